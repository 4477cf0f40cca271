"""The fold snapshot's drift plan and index, read alone: `SnapPlan`, `read_plan`, `on_paths`.

Split out of `anchorfs.foldsnap` (which writes the plan, `_PlanBuilder`, and re-exports these
names): a whole-workspace drift pass (`anchorfs.driftplan`) reads the header and the plan line
only, then the records the plan names, each checked against the plan's blake3 of it; the hooks
(`on_paths`) read the header and the index that ends the plan (`_Index`: its head and table,
then one bucket per path asked), then the records it names, each checked the same way, so
their cost does not grow with the workspace (issue 20). All of it is JSON read by the C scanner the standard `json` parses with
(`jsonread.loads`), not orjson, whose import (it pulls `dataclasses`, `uuid` and `json`) is
2.4x `python -c pass`: an edit's or a commit's hook reads the plan alone.
"""

from __future__ import annotations

import gc
import os
import stat as stat_mod
from array import array
from collections.abc import Callable, Iterable, Sequence

import blake3

from . import catchup
from .catchup import Prefix
from .jsonread import loads as _loads  # not orjson: its import is 2.4x `python -c pass`
from .errors import AnchorfsError, LedgerError
from .foldsnap import _HEAD_LIMIT, _SUM, _SURPRISES, FORMAT, VERSION, _array, _folder, _int, _record, ix_bucket, snap_file
from .ledger import FoldState, Head, Ledger
from .model import Memory
from .statefs import open_state

__all__ = ["ActiveKeys", "PlanMismatch", "SnapPlan", "covered_by", "on_paths", "read_plan"]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any
    from .planoverlay import OverlayPlan

class SnapPlan:
    """The drift plan of a snapshot that holds (`read_plan`), with its file kept open: what a
    whole-workspace drift pass needs, and each target's record read and checked alone when it
    is needed (`memory`), or all at once (`memories`).

    Targets are the active anchored memories, in the fold's order, by position. `paths` are
    their distinct anchored paths in order of first use, `want` the hash every anchor on a path
    recorded (None where they disagree), `owners(k)` the targets resting on path k, `claims`
    the targets whose text `verify --mark` found stale. A record read back must hash as the
    plan says (`sums`, written with it), parse by the ledger reader's rules and be the target
    the plan names (its id, active, anchored); anything else raises `PlanMismatch`."""

    __slots__ = ("prefix", "n", "paths", "want", "claims", "top", "lines", "all_n", "_fd", "_base", "_end", "_at",
                 "_own", "_own_at", "_ids", "_ids_text", "_sums", "_marked", "_claimset", "_path", "_ident",
                 "_all_at", "_all_sums", "_all_ids", "_act", "kinds", "__weakref__")

    def __init__(self, fd: int, base: int, end: int, prefix: Prefix, region: bytes, file: str | None = None) -> None:
        cut = region.find(b"\n")
        if cut < 0:
            raise ValueError("no plan")
        plan = _loads(region[:cut])
        if not isinstance(plan, dict):
            raise ValueError("no plan")  # `null`: none was kept for this fold
        n, own_n, ids_size = _int(plan["n"]), _int(plan["own_n"]), _int(plan["ids_size"])
        paths, want = plan["paths"], plan["want"]
        if type(paths) is not list or type(want) is not list or len(want) != len(paths):
            raise ValueError("bad plan paths")
        for path, sha in zip(paths, want):
            if type(path) is not str or not path or (sha is not None and type(sha) is not str):
                raise ValueError("bad plan paths")
        all_n, all_ids_size, act_n = _int(plan["all_n"]), _int(plan["all_ids_size"]), _int(plan["act_n"])
        kinds = plan["kinds"]
        if type(kinds) is not list or not all(type(k) is str for k in kinds):
            raise ValueError("bad plan kinds")
        self.kinds: list[str] = kinds
        self.top, self.lines = _int(plan["top"]), _int(plan["lines"])
        blobs = memoryview(region)[cut + 1:]
        sizes = (8 * n, 4 * own_n, 4 * (len(paths) + 1), _SUM * n, ids_size, 8 * all_n, _SUM * all_n, all_ids_size,
                 4 * act_n, 8 * act_n, 4 * act_n, 4 * act_n)
        if sum(sizes) != len(blobs):  # the hooks' index, which ends the plan, is not read here (`_Index`)
            raise ValueError("bad plan lengths")
        cuts = [0]
        for size in sizes:
            cuts.append(cuts[-1] + size)
        at, own, own_at = (_array(code, blobs[cuts[i]:cuts[i + 1]]) for i, code in enumerate("QII"))
        if own_at[0] != 0 or own_at[-1] != len(own) or not all(map(int.__le__, own_at, own_at[1:])):
            raise ValueError("bad plan owners")  # positions and starts out of range: `memory` says so
        claims, marked = plan["claims"], plan["marked"]
        if type(claims) is not list or any(type(i) is not int or not 0 <= i < n for i in claims):
            raise ValueError("bad plan claims")
        if type(marked) is not list or any(type(x) is not list or len(x) != 2 or type(x[0]) is not int
                                           or type(x[1]) is not str for x in marked):
            raise ValueError("bad plan marks")
        self.n, self.paths, self.want, self.claims = n, paths, want, claims
        self._claimset = frozenset(claims)
        self._at, self._own, self._own_at, self._marked = at, own, own_at, marked
        # views into `region`, which the plan keeps anyway: at 10,000 memories a copy of each was
        # a fault per page taken afresh (the sums and ids are a MB), a tenth of a first session's start
        self._sums = blobs[cuts[3]:cuts[4]]
        self._ids_text = blobs[cuts[4]:cuts[5]]
        self._ids: list[str] | None = None
        self.all_n = all_n
        self._all_at = _array("Q", blobs[cuts[5]:cuts[6]])
        self._all_sums = blobs[cuts[6]:cuts[7]]
        self._all_ids = blobs[cuts[7]:cuts[8]]
        self._act = (_array("I", blobs[cuts[8]:cuts[9]]), _array("d", blobs[cuts[9]:cuts[10]]),
                     _array("I", blobs[cuts[10]:cuts[11]]), _array("I", blobs[cuts[11]:cuts[12]]))
        self._base, self._end, self.prefix, self._path = base, end, prefix, file
        st = os.fstat(fd)
        self._ident = (st.st_dev, st.st_ino, st.st_size)
        self._adopt(fd)  # last: a plan refused is closed by its reader

    def _adopt(self, fd: int) -> None:
        self._fd = fd

    def __del__(self) -> None:  # not `weakref.finalize`: its import (with `atexit`) is a hook's cost
        self.close()

    def close(self) -> None:
        """Close the file now (`Workspace.close`). A record read later (a report's memories
        read after the workspace closed) opens the snapshot again, and reads only the very file
        the plan was read from (same device, inode and size: a snapshot is replaced, never
        changed in place, though a full fold may re-stamp its mtime; each record is checked
        against its blake3 as ever); another file there is `PlanMismatch`."""
        fd, self._fd = getattr(self, "_fd", -1), -1
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass

    def _file(self) -> int:
        if self._fd >= 0:
            return self._fd
        if self._path is None:
            raise PlanMismatch("the snapshot's plan was closed")
        try:
            fd = open_state(self._path, os.O_RDONLY)
        except (OSError, AnchorfsError):
            raise PlanMismatch("the snapshot its plan was read from is gone") from None
        try:
            st = os.fstat(fd)
            same = (st.st_dev, st.st_ino, st.st_size) == self._ident
        except OSError:
            same = False
        if not same:
            os.close(fd)
            raise PlanMismatch("the snapshot was replaced since its plan was read")
        self._adopt(fd)
        return fd

    def owners(self, k: int) -> array[Any]:
        return self._own[self._own_at[k]:self._own_at[k + 1]]

    @property
    def ids(self) -> list[str]:
        """The targets' ids, by position (split on first use: only a write-back needs them)."""
        if self._ids is None:
            ids = str(self._ids_text, "utf-8").split("\n") if self.n else []
            if len(ids) != self.n:
                raise PlanMismatch("the plan's ids are not one per target")
            self._ids = ids
        return self._ids

    def _line(self, at: int, data: bytes | None = None) -> bytes:
        """The record line starting `at` bytes after the plan line (through the open file)."""
        if not 0 <= at < self._end - self._base:
            raise PlanMismatch("a record start outside the snapshot")
        if data is not None:
            end = data.find(b"\n", at)
            if end < 0:
                raise PlanMismatch("a record runs past the end")
            return data[at:end + 1]
        size = 4096
        while True:
            got = os.pread(self._file(), size, self._base + at)
            end = got.find(b"\n")
            if end >= 0:
                return got[:end + 1]
            if len(got) < size:
                raise PlanMismatch("a record runs past the end")
            size *= 4

    def _build(self, line: bytes, digest: bytes | memoryview) -> Memory:
        if blake3.blake3(line).digest(_SUM) != digest:
            raise PlanMismatch("a record does not hash as its plan says")
        try:
            return _record(_loads(line))[3]
        except _SURPRISES as exc:
            raise PlanMismatch(f"a record the plan names does not read: {exc}") from None

    def memory(self, pos: int, data: bytes | None = None) -> Memory:
        """Target `pos`, read alone (or out of `data`, the records' bytes) and checked."""
        if not 0 <= pos < self.n:
            raise PlanMismatch(f"the plan names no target {pos}")
        memory = self._build(self._line(self._at[pos], data), self._sums[_SUM * pos:_SUM * (pos + 1)])
        if memory.id != self.ids[pos] or memory.status != "active" or not memory.anchors \
                or bool(memory.stale_claims) != (pos in self._claimset):
            raise PlanMismatch("a record is not the target its plan names")
        return memory

    def records(self) -> bytes:
        """Every record's bytes, read in one call (to build them all)."""
        want = self._end - self._base
        chunks, got = [], 0
        while got < want:
            chunk = os.pread(self._file(), want - got, self._base + got)
            if not chunk:
                raise PlanMismatch("the snapshot is shorter than its header says")
            chunks.append(chunk)
            got += len(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def marked(self) -> list[Memory]:
        """The active unanchored memories whose text `verify --mark` found stale, in order."""
        return [m for _, m in self.marked_at()]

    def marked_at(self) -> list[tuple[int, Memory]]:
        """`marked`, each with where its record starts (the fold's order)."""
        out = []
        for at, sum_hex in self._marked:
            if not 0 <= at < self._end - self._base:
                raise PlanMismatch("a marked record outside the snapshot")
            try:
                digest = bytes.fromhex(sum_hex)
            except ValueError:
                raise PlanMismatch("a marked record's hash is not hex") from None
            memory = self._build(self._line(at), digest)
            if memory.status != "active" or memory.anchors or not memory.stale_claims:
                raise PlanMismatch("a marked record is not what its plan names")
            out.append((at, memory))
        return out

    @property
    def claimset(self) -> frozenset[int]:
        return self._claimset

    def start(self, pos: int) -> int:
        """Where target `pos`'s record starts (the fold's order: starts grow with it)."""
        return self._at[pos]

    def starts(self) -> array[Any]:
        return self._at

    def find(self, ids: Iterable[str]) -> dict[str, int]:
        """The fold's position of each of `ids` it holds (format 5 lists every memory)."""
        text = self._all_ids
        out: dict[str, int] = {}
        wanted = list(dict.fromkeys(ids))
        if len(wanted) > 16:  # many: split the list once
            at = dict(zip(str(text, "utf-8").split("\n"), range(self.all_n))) if self.all_n else {}
            if len(at) != self.all_n:
                raise PlanMismatch("the plan's fold ids are not one per memory")
            return {i: at[i] for i in wanted if i in at}
        padded = b"\n" + text + b"\n"
        for mid in wanted:
            key = b"\n" + mid.encode("utf-8") + b"\n"
            k = padded.find(key)
            if k >= 0:
                if padded.find(key, k + 1) >= 0:
                    raise PlanMismatch("an id listed twice in the plan's fold")
                out[mid] = padded.count(b"\n", 0, k)
        return out

    def fold_ids(self) -> list[str]:
        """Every memory's id, in the fold's order."""
        ids = str(self._all_ids, "utf-8").split("\n") if self.all_n else []
        if len(ids) != self.all_n:
            raise PlanMismatch("the plan's fold ids are not one per memory")
        return ids

    def active_columns(self) -> tuple[Sequence[int], list[str], Sequence[float], Sequence[int], Sequence[int],
                                      list[str]]:
        """Every active memory as the session-start digest sorts it, column by column: (its
        place in the fold, its id, its time, its anchor count, its kind as an index into the
        last, the kinds), no object per memory: at 10,000 a tuple, an object and a sort key
        each were a third of a full digest's own time."""
        js, ts, na, kind = self._act
        fold = self.fold_ids()
        if len(js) == len(fold) and js == array(js.typecode, range(len(js))):
            ids = fold  # every memory active, in the fold's order (the common case): no copy
        else:
            try:
                ids = list(map(fold.__getitem__, js))
            except IndexError:
                raise PlanMismatch("the plan's active memories are out of range") from None
        return js, ids, ts, na, kind, self.kinds

    def active_keys(self) -> ActiveKeys:
        """`active_columns`' ids, times, anchor counts, kinds and kinds' names, with a reader of
        the `i`th one's record (`active_memory`): what the digest sorts, and the few records it
        shows."""
        js, ids, ts, na, kind, kinds = self.active_columns()
        return ids, ts, na, kind, kinds, lambda i: self.active_memory(js[i], ids[i])

    def active_memory(self, j: int, mid: str) -> Memory:
        """Active memory `j` of the fold (`active`), read alone and checked: by its hash, and as
        the active memory `mid` the plan names."""
        memory = self.record_of(j)[1][3]
        if memory.id != mid or memory.status != "active":
            raise PlanMismatch("a record is not the active memory its plan names")
        return memory

    def record_of(self, j: int) -> tuple[int, tuple[str, dict[str, Head], set[str] | None, Memory]]:
        """Memory `j` of the fold: where its record starts, and the record (id, heads, named
        ids, the memory), read alone and checked by its hash in the plan."""
        if not 0 <= j < self.all_n:
            raise PlanMismatch(f"the plan's fold has no memory {j}")
        at = self._all_at[j]
        line = self._line(at)
        if blake3.blake3(line).digest(_SUM) != self._all_sums[_SUM * j:_SUM * (j + 1)]:
            raise PlanMismatch("a record does not hash as its plan says")
        try:
            return at, _record(_loads(line))
        except _SURPRISES as exc:
            raise PlanMismatch(f"a record the plan names does not read: {exc}") from None


ActiveKeys = tuple[list[str], Sequence[float], Sequence[int], Sequence[int], list[str], Callable[[int], Memory]]
"""(ids, times, anchor counts, kinds as indexes into the next, the kinds, the `i`th one's memory)
of every active memory, by index."""


class PlanMismatch(LedgerError, ValueError):
    """A snapshot's plan and a record it names disagree (a crafted or damaged file): the plan
    is not used (`driftplan` falls back to the full fold), or, found by a later read of a
    report built on demand, the read fails with this one line."""


def _header(ledger: Ledger, fd: int) -> tuple[os.stat_result, dict[str, Any], int, Prefix] | None:
    """(the snapshot's fstat, its header, where the header's line ends, the ledger prefix it
    holds) when the open snapshot `fd` is one of ours for this state folder (a regular file of a
    sane size, this format and version, this folder, its body the size the header says); None
    otherwise. What `read_plan` and the hooks' index (`_open_index`) both ask first."""
    st = os.fstat(fd)
    if not stat_mod.S_ISREG(st.st_mode) or st.st_size > 2 * os.lstat(ledger.file).st_size + (1 << 20):
        return None
    first = os.pread(fd, 4096, 0)  # the header is well under a page
    cut = first.find(b"\n")
    if cut < 0:
        first = os.pread(fd, _HEAD_LIMIT, 0)
        cut = first.find(b"\n")
        if cut < 0:
            return None
    header = _loads(first[:cut])
    if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("v") != VERSION:
        return None
    folder = _folder(ledger)
    if folder is None or header.get("folder") != list(folder) or header.get("size") != st.st_size - cut - 1:
        return None
    prefix = Prefix.from_dict(header.get("prefix"), st.st_mtime_ns)
    return None if prefix is None else (st, header, cut, prefix)


def read_plan(ledger: Ledger) -> SnapPlan | OverlayPlan | None:
    """The drift plan of the snapshot beside `ledger`, when that snapshot holds the whole ledger
    as it stands now, judged as `current` judges it on the stat alone (the prefix settled), or
    when the ledger has only grown since (`planoverlay.overlay`: the lines after it folded into
    the plan, the same answers); None otherwise (missing, a link, another version or state
    folder, the ledger rewritten since, a tail the overlay cannot take exactly, a plan that is
    torn or does not match its own checksum): the full fold decides then.

    Only the header and the plan line are read (a few MB at 100,000 memories, where the
    records are 70), but the hooks' index that ends it: the plan line has its own checksum in
    the header, and every record read later is checked against the plan's hash of it
    (`SnapPlan.memory`)."""
    try:
        fd = open_state(snap_file(ledger), os.O_RDONLY)
    except (OSError, AnchorfsError):
        return None
    keep = False
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        head = _header(ledger, fd)
        if head is None:
            return None
        st, header, cut, prefix = head
        where = header.get("plan")
        if type(where) is not list or len(where) != 3:
            return None
        off, size, digest = where
        if type(off) is not int or type(size) is not int or off < 1 or size < 1 or cut + 1 + off + size >= st.st_size:
            return None
        ix = header.get("ix")  # the hooks' index ends the plan, under its own checksum: neither read nor hashed here
        own = size - (ix[2] if type(ix) is list and len(ix) == 4 and type(ix[2]) is int and 0 <= ix[2] < size else 0)
        region = os.pread(fd, own, cut + 1 + off)
        if len(region) != own or os.pread(fd, 1, cut + 1 + off + size) != b"\n" \
                or blake3.blake3(region).hexdigest() != digest:
            return None
        out = SnapPlan(fd, cut + 1 + off + size + 1, st.st_size, prefix, region, snap_file(ledger))
        keep = True
        if catchup.settled(ledger, prefix):
            return out
        try:
            from .planoverlay import overlay

            grown = overlay(ledger, out)
        except _SURPRISES:  # PlanMismatch included
            grown = None
        if grown is None:
            out.close()
        return grown
    except _SURPRISES + (OSError,):
        return None
    finally:
        if paused:
            gc.enable()
        if not keep:
            os.close(fd)


def covered_by(paths: Iterable[str]) -> Callable[[str], bool]:
    """Whether an anchored path is one of `paths` or lies under one (a folder covers the files
    under it): how `on_paths` and `Workspace.recheck` both read the paths an edit touched."""
    wanted = frozenset(p.strip("/") for p in paths if p and p.strip("/"))
    under = tuple(w + "/" for w in wanted)  # a proper prefix of a path's parts is followed by a "/"

    def hit(path: str) -> bool:
        return path in wanted or path.startswith(under)

    return hit


class _Index:
    """The snapshot's hashed index (format 7: `foldsnap._PlanBuilder._index`), opened: what a hook
    reads instead of the plan. Its head and table are checked against the header's blake3 as
    they are read, each bucket against the table's blake3 of it when first asked, each record
    against the bucket's blake3 of it; anything else raises (`PlanMismatch`, or a surprise of
    `_SURPRISES`): the caller's answer is then None, the full fold."""

    __slots__ = ("fd", "prefix", "top", "lines", "ident", "body", "_n", "_table", "_at", "_size", "_records", "_end",
                 "_seen")

    def __init__(self, fd: int, prefix: Prefix, region: bytes, buckets: tuple[int, int], records: int, end: int,
                 ident: tuple[int, int, int], body: str) -> None:
        cut = region.find(b"\n")
        head = _loads(region[:cut]) if cut >= 0 else None
        if not isinstance(head, dict):
            raise ValueError("no index head")
        self._n, self.top, self.lines = _int(head["b"]), _int(head["top"]), _int(head["lines"])
        self._table = memoryview(region)[cut + 1:]
        if self._n < 1 or len(self._table) != self._n * (12 + _SUM):
            raise ValueError("bad index table")
        self.fd, self.prefix, self.ident, self.body = fd, prefix, ident, body
        self._at, self._size = buckets
        self._records, self._end = records, end
        self._seen: dict[int, list[Any]] = {}

    def get(self, key: str) -> Any:
        """The value the index holds for `key`, None when it holds none."""
        h = ix_bucket(key, self._n)
        bucket = self._seen.get(h)
        if bucket is None:
            t, n = self._table, self._n
            start = int.from_bytes(t[8 * h:8 * h + 8], "little")
            size = int.from_bytes(t[8 * n + 4 * h:8 * n + 4 * h + 4], "little")
            if start + size > self._size:
                raise PlanMismatch("an index bucket outside the index")
            blob = os.pread(self.fd, size, self._at + start)
            if len(blob) != size or blake3.blake3(blob).digest(_SUM) != t[12 * n + _SUM * h:12 * n + _SUM * (h + 1)]:
                raise PlanMismatch("an index bucket does not hash as its table says")
            bucket = _loads(blob)
            if type(bucket) is not list:
                raise PlanMismatch("an index bucket is not a list")
            self._seen[h] = bucket
        for item in bucket:
            if item[0] == key:
                return item[1]
        return None

    def record(self, at: int, sum_hex: str) -> tuple[str, dict[str, Head], set[str] | None, Memory]:
        """The record starting `at` bytes after the plan line, read alone and checked by its hash."""
        if type(at) is not int or not 0 <= at < self._end - self._records or type(sum_hex) is not str:
            raise PlanMismatch("an indexed record outside the snapshot")
        size, base = 4096, self._records + at
        while True:
            got = os.pread(self.fd, size, base)
            end = got.find(b"\n")
            if end >= 0:
                line = got[:end + 1]
                break
            if len(got) < size:
                raise PlanMismatch("a record runs past the end")
            size *= 4
        if blake3.blake3(line).digest(_SUM) != bytes.fromhex(sum_hex):
            raise PlanMismatch("a record does not hash as its index says")
        return _record(_loads(line))


def _open_index(ledger: Ledger) -> _Index | None:
    """The index of the snapshot beside `ledger` when it is one of ours for this state folder
    (as `read_plan` judges it: format, version, folder, size) and its head and table hash as
    the header says; None otherwise. Whether its prefix still holds is the caller's to ask."""
    try:
        fd = open_state(snap_file(ledger), os.O_RDONLY)
    except (OSError, AnchorfsError):
        return None
    keep = False
    try:
        head = _header(ledger, fd)
        if head is None:
            return None
        st, header, cut, prefix = head
        plan, ix = header.get("plan"), header.get("ix")
        if type(plan) is not list or len(plan) != 3 or type(ix) is not list or len(ix) != 4:
            return None
        p_off, p_size = _int(plan[0]), _int(plan[1])
        off, checked, size, digest = _int(ix[0]), _int(ix[1]), _int(ix[2]), ix[3]
        body = cut + 1
        records = body + p_off + p_size + 1
        if not p_off <= off or off + size != p_off + p_size or not 0 < checked <= size or records > st.st_size:
            return None
        region = os.pread(fd, checked, body + off)
        if len(region) != checked or blake3.blake3(region).hexdigest() != digest:
            return None
        body_sum = header.get("body")
        if type(body_sum) is not str:
            return None
        out = _Index(fd, prefix, region, (body + off + checked, size - checked), records, st.st_size,
                     (st.st_dev, st.st_ino, st.st_size), body_sum)
        keep = True
        return out
    except _SURPRISES + (OSError,):
        return None
    finally:
        if not keep:
            os.close(fd)


_PLAN = object()
"""`_indexed`'s answer when the index cannot say, but the plan may (`_on_paths_plan`)."""


def _indexed(ledger: Ledger, paths: Iterable[str], remember: bool = False) -> list[Memory] | None | object:
    """`on_paths` from the index alone: the header, the index's head and table, one bucket per
    path, the records named there, and where the ledger grew since the snapshot the lines after
    it folded into the records of the memories they touch (`_tail`). `_PLAN` when a path asked
    is a folder above anchored files (the plan's paths are walked then); None as `on_paths`."""
    ix = _open_index(ledger)
    if ix is None:
        return None
    try:
        hit = covered_by(paths)
        picks: dict[int, tuple[str, str]] = {}
        for path in dict.fromkeys(p.strip("/") for p in paths if p and p.strip("/")):
            if ix.get("d:" + path) is not None:
                return _PLAN  # a folder: its files are the plan's to list
            for at, sum_hex, mid in ix.get("p:" + path) or ():
                picks[at] = (sum_hex, mid)
        tail: _Tail | None = None
        if not catchup.settled(ledger, ix.prefix):
            tail = _tail(ledger, ix, remember)
            if tail is None:
                return None
        out: list[tuple[tuple[int, int], Memory]] = []
        seen: set[str] = set()
        for at in sorted(picks):  # record starts grow with the fold's order: the order the full fold lists them in
            sum_hex, mid = picks[at]
            if tail is not None and mid in tail:
                continue  # the lines since the snapshot touched it: as they leave it, below
            memory = ix.record(at, sum_hex)[3]
            if memory.id != mid or memory.id in seen or memory.status != "active" or not memory.anchors \
                    or not any(hit(a.path) for a in memory.anchors):
                return None  # the index says it rests there and it does not: a snapshot not to trust
            seen.add(memory.id)
            out.append(((0, at), memory))
        if tail is not None:
            for k, (mid, memory) in enumerate(tail.items()):
                if memory.status == "active" and memory.anchors and any(hit(a.path) for a in memory.anchors):
                    # in the fold's order: one the snapshot held keeps its place, a new one comes after all
                    out.append(((0, tail.starts[mid]) if mid in tail.starts else (1, k), memory))
            out.sort(key=lambda x: x[0])
        return [m for _, m in out]
    except _SURPRISES + (OSError, LedgerError):  # PlanMismatch included
        return None
    finally:
        os.close(ix.fd)


class _Tail(FoldState):
    """The memories the lines appended since the snapshot touch, folded (`_tail`), and where the
    record of each one the snapshot held starts (its place in the fold's order)."""

    def __init__(self) -> None:
        super().__init__()
        self.starts: dict[str, int] = {}


TAIL_FILE = "fold.tail"
"""Beside the snapshot: the ledger's stat and prefix at the moment a reader verified that it
starts with the snapshot's prefix (`_vouch`), so the next reader need not checksum it again."""


def _tail_path(ledger: Ledger) -> str:
    return os.path.join(ledger.dir, TAIL_FILE)


def _vouch(ledger: Ledger, ix: _Index, prefix: Prefix) -> None:
    """Record that the ledger, as `prefix` found it (its stat, vouched: nothing moved while it was
    read, its last line whole), starts with the snapshot's prefix, whose checksum was verified
    against those very bytes (`catchup.follow`): what a later reader trusts on the ledger's
    stat alone (`_vouched`), as the snapshot's own prefix is trusted. Written whole (temp,
    `os.replace`) with `prefix.seen_ns` as its mtime, the moment the racy rule measures from;
    no fsync (lost, the next reader verifies again). Never fails the read: it only saves one."""
    from .jsonwrite import dumps
    from .statefs import replace_state

    if prefix.stat is None or prefix.stat[2] != prefix.offset or prefix.offset < ix.prefix.offset:
        return
    try:
        replace_state(_tail_path(ledger), dumps({"v": 1, "snap": [*ix.ident, ix.body], "prefix": prefix.to_dict()}),
                      mtime_ns=prefix.seen_ns)
    except (OSError, AnchorfsError):
        pass


def _vouched(ledger: Ledger, ix: _Index) -> Prefix | None:
    """The ledger's prefix as the last reader that verified it against this snapshot recorded
    it (`_vouch`), while the ledger's stat is still the one it saw, and settled (the racy rule
    from that reader's moment: `catchup.settled`); None otherwise (missing, a link, torn, about
    another snapshot, the ledger changed since, or too recently)."""
    from .statefs import read_state

    try:
        raw = read_state(_tail_path(ledger))
        if raw is None:
            return None
        d = _loads(raw)
        if not isinstance(d, dict) or d.get("v") != 1 or d.get("snap") != [*ix.ident, ix.body]:
            return None
        prefix = Prefix.from_dict(d.get("prefix"), os.lstat(_tail_path(ledger)).st_mtime_ns)
    except _SURPRISES + (OSError, AnchorfsError):
        return None
    if prefix is None or prefix.stat is None or prefix.offset < ix.prefix.offset or prefix.stat[2] != prefix.offset:
        return None
    return prefix if catchup.settled(ledger, prefix) else None


def _follow_vouched(ledger: Ledger, ix: _Index, prefix: Prefix) -> catchup.Follow | None:
    """`catchup.follow`'s answer from the snapshot's prefix to the vouched `prefix`: the lines
    between them, read and parsed as it reads them, through one descriptor whose stat must still
    be the vouched one after the read (else None: the ledger moved meanwhile)."""
    fd = open_state(ledger.file, os.O_RDONLY)
    try:
        start, end = ix.prefix.offset, prefix.offset
        chunks, at = [], start
        while at < end:
            got = os.pread(fd, end - at, at)
            if not got:
                return None
            chunks.append(got)
            at += len(got)
        if catchup._sig(os.fstat(fd)) != prefix.stat:
            return None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if data and not data.endswith(b"\n"):
        return None
    entries: list[Any] = []
    skipped, cut = 0, 0
    while (nl := data.find(b"\n", cut)) >= 0:
        skipped += catchup._parse(data[cut:nl + 1], start + cut, ledger.file, entries)
        cut = nl + 1
    return catchup.Follow("grown" if entries or skipped else "same", prefix, entries, skipped)


def _tail(ledger: Ledger, ix: _Index, remember: bool = False) -> _Tail | None:
    """The lines appended to the ledger since the snapshot's prefix, folded into the records
    (found by the index, each checked by its hash) of the memories they touch, as
    `planoverlay.overlay` folds them into the plan: the full fold's memories, for those ids.
    None where it cannot be told exactly (the prefix not holding by `catchup.follow`'s rule: its
    checksum verified against the bytes now; a line skipped as bad, a torn or unvouched tail;
    a line without `seq` or not above the snapshot's `top`; a fork left; too many touched)."""
    import warnings

    vouched = _vouched(ledger, ix)
    with warnings.catch_warnings():  # the full fold, taken on None, says what it finds
        warnings.simplefilter("ignore")
        follow = catchup.follow(ledger, ix.prefix) if vouched is None else _follow_vouched(ledger, ix, vouched)
    if follow is None:
        return None
    if not catchup.read_whole(follow):
        return None  # moved while read, a bad line, a torn tail (or an append under way)
    if remember and vouched is None and follow.kind in ("same", "grown"):
        _vouch(ledger, ix, follow.prefix)  # the checksum just verified: the next reader trusts the stat
    state = _Tail()
    state.top, state.lines = ix.top, ix.lines
    if follow.kind == "same":
        return state  # the same bytes under another stat: nothing touched
    touched = catchup.touched_after(follow, ix.top)
    if touched is None:
        return None
    entries = follow.entries
    found: list[tuple[int, str, tuple[str, dict[str, Head], set[str] | None, Memory]]] = []
    for mid in touched:
        where = ix.get("i:" + mid)
        if where is not None:
            at, sum_hex = where
            rec = ix.record(at, sum_hex)
            if rec[0] != mid:
                raise PlanMismatch("a record under another id than its index lists")
            found.append((at, mid, rec))
    for at, mid, (_, heads, named, memory) in sorted(found, key=lambda x: x[0]):  # the fold's order
        state[mid] = memory
        state.heads[mid] = heads
        if named is not None:
            state.named[mid] = named
        state.starts[mid] = at
    for entry in entries:
        state.apply(entry)
    if any(len(state.heads.get(mid, ())) > 1 for mid in state):
        return None  # a fork: listed and flagged by the full fold
    return state


def on_paths(ledger: Ledger, paths: Iterable[str], *, remember: bool = False) -> list[Memory] | None:
    """The active memories anchored to `paths` (a path also covers the files under it, as
    `Workspace.recheck` takes it), from the snapshot alone; None when the snapshot does not
    hold the whole ledger as it stands now (missing, damaged, of another folder, the ledger
    changed since, no plan kept: the full fold, `current`, decides then).

    What the agent and git hooks need, at a fraction of `current`'s cost: only the header and
    the drift plan are read (`read_plan`, its own checksum; a few hundred KB at 10,000
    memories where the whole file is 9 MB), then only the records the plan names for `paths`,
    each read alone and checked as `SnapPlan.memory` checks it (its blake3 in the plan, the
    ledger reader's rules, the target the plan names: its id, active, anchored), and refused
    unless it does rest there. A record nobody asked for is neither read nor checked: its
    damage is the business of the read that needs it. Writes nothing, but `fold.tail` when
    asked to `remember`.

    The plan itself (1.5 MB at 10,000 memories, read, hashed and parsed whole) is read only
    where the snapshot's index cannot say: a folder asked, or the ledger grown since. Else
    only the index is: its head and table (checked against the header), the bucket of each
    path asked (against the table) and the records it names (against the bucket): a hook's
    cost no longer grows with the workspace (`_indexed`). A ledger grown since the snapshot is
    checked against its prefix's checksum (all of its bytes) unless a reader that did so left
    its stat behind (`fold.tail`) and the ledger still has it; `remember`: leave it (a caller
    that may write the state folder: the hooks), so the next one trusts the stat."""
    paths = list(paths)  # read twice where the index sends it to the plan
    gc_paused = gc.isenabled()
    if gc_paused:
        gc.disable()
    try:
        got = _indexed(ledger, paths, remember)
    finally:
        if gc_paused:
            gc.enable()
    return _on_paths_plan(ledger, paths) if got is _PLAN else got  # type: ignore[return-value]


def _on_paths_plan(ledger: Ledger, paths: Iterable[str]) -> list[Memory] | None:
    """`on_paths` from the whole plan (`read_plan`, with the lines appended since folded in)."""
    plan = read_plan(ledger)
    if plan is None:
        return None
    hit = covered_by(paths)
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        picks: set[int] = set()
        for k, path in enumerate(plan.paths):
            if hit(path):
                picks.update(plan.owners(k))
        out: list[Memory] = []
        seen: set[str] = set()
        for pos in sorted(picks):  # positions are the fold's order: the order the full fold lists them in
            memory = plan.memory(pos)
            if memory.id in seen or not any(hit(a.path) for a in memory.anchors):
                return None  # the plan says it rests there and it does not: a plan not to trust
            seen.add(memory.id)
            out.append(memory)
        return out
    except _SURPRISES + (OSError,):  # PlanMismatch included
        return None
    finally:
        plan.close()
        if paused:
            gc.enable()
