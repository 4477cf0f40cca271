"""The fold snapshot's drift plan, read alone: `SnapPlan`, `read_plan`.

Split out of `anchorfs.foldsnap` (which writes the plan, `_PlanBuilder`, and re-exports these
names): a whole-workspace drift pass (`anchorfs.driftplan`) reads the header and the plan line
only, then the records the plan names, each checked against the plan's blake3 of it. The hooks
read the index that ends the plan instead (`anchorfs.snapindex`). All of it is JSON read by the
C scanner the standard `json` parses with (`jsonread.loads`), not orjson, whose import (it pulls
`dataclasses`, `uuid` and `json`) is 2.4x `python -c pass`.
"""

from __future__ import annotations

import gc
import os
import stat as stat_mod
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence

import blake3

from . import catchup
from .catchup import Prefix
from .jsonread import loads as _loads  # not orjson: its import is 2.4x `python -c pass`
from .errors import AnchorfsError, LedgerError
from .foldsnap import _HEAD_LIMIT, _SUM, _SURPRISES, FORMAT, VERSION, _array, _folder, _int, _record, snap_file
from .ledger import Head, Ledger
from .model import Memory
from .statefs import open_state

__all__ = ["ActiveKeys", "FoldIds", "PlanMismatch", "SnapPlan", "covered_by", "read_plan"]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, overload
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
        if not set(map(type, paths)) <= {str} or "" in paths or not set(map(type, want)) <= {str, type(None)}:
            raise ValueError("bad plan paths")  # each path a non-empty str, each hash a str or None
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

    def fold_ids(self) -> Sequence[str]:
        """Every memory's id, in the fold's order: each read off the plan's bytes when asked
        for (`FoldIds`) where they are all of one width, as every id this project makes is."""
        n = self.all_n
        blob = self._all_ids
        width = len(blob) if n == 1 else bytes(blob[:64]).find(b"\n")
        if n and width > 0 and len(blob) == n * (width + 1) - 1 \
                and bytes(blob[width::width + 1]) == b"\n" * (n - 1):
            return FoldIds(blob, n, width)
        ids = str(blob, "utf-8").split("\n") if n else []
        if len(ids) != n:
            raise PlanMismatch("the plan's fold ids are not one per memory")
        return ids

    def active_columns(self) -> tuple[Sequence[int], Sequence[str], Sequence[float], Sequence[int], Sequence[int],
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


class FoldIds(Sequence[str]):
    """The fold's ids as the plan keeps them (one width, newline-joined), each decoded when it
    is read: the session-start digest of 10,000 memories reads a few dozen, and splitting them
    all was a MB of objects, a page fault each page (a tenth of a first session's start here).
    An id that does not read as one (not UTF-8, a newline in it) is `PlanMismatch`, as the
    whole list's split finds it."""

    __slots__ = ("_blob", "_n", "_width")

    def __init__(self, blob: bytes | memoryview, n: int, width: int) -> None:
        self._blob, self._n, self._width = blob, n, width

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[str]:
        """Every id, in one split of the bytes (what `list()` of them takes)."""
        try:
            ids = str(self._blob, "utf-8").split("\n")
        except UnicodeDecodeError:
            raise PlanMismatch("the plan's fold ids are not one per memory") from None
        if len(ids) != self._n:
            raise PlanMismatch("the plan's fold ids are not one per memory")
        return iter(ids)

    if TYPE_CHECKING:
        @overload
        def __getitem__(self, i: int) -> str: ...

        @overload
        def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._n))]
        n = self._n
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        start = i * (self._width + 1)
        try:
            mid = str(self._blob[start:start + self._width], "utf-8")
        except UnicodeDecodeError:
            raise PlanMismatch("the plan's fold ids are not one per memory") from None
        if "\n" in mid:
            raise PlanMismatch("the plan's fold ids are not one per memory")
        return mid


ActiveKeys = tuple[Sequence[str], Sequence[float], Sequence[int], Sequence[int], list[str], Callable[[int], Memory]]
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
