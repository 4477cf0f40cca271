"""The fold snapshot: `.anchorfs/fold.snap`, the folded ledger kept between processes.

Every process used to fold the whole ledger (`ledger.fold`: parse each line, check each
snapshot, order the entries), which is most of a one-shot `record`, of the agent hooks and of
the post-commit hook on a large ledger. The snapshot keeps what the fold gave (each memory's
snapshot, and what `FoldState` needs to stay order-free: the heads of every memory, the ids
named as replaced, the highest `seq`, the line count) with the ledger prefix it was folded
from (`catchup.Prefix`: offset, chained blake3, the ledger's stat).

It is derived and never trusted blindly:
- the prefix must still hold, by the rule `catchup` uses for the store's checkpoint: the
  ledger's stat unchanged and settled (racy-git: its last change older than the snapshot's
  own mtime by more than the granularity), else the prefix's checksum against the bytes now;
- a grown ledger is the snapshot plus the lines after it (`ledger.refold`); anything else (a
  ledger rewritten, truncated, or checked out to other bytes, even of the same size; a
  snapshot that is torn, garbage, a link, of another version or another state folder, or
  whose body does not match its own checksum) is ignored: the fold is rebuilt from the
  ledger and written anew;
- it is data only (JSON lines: a header, then the body: the fold's counts, the drift plan,
  then one record per memory, all under the header's checksum; the drift plan, a JSON line and
  raw arrays with its own checksum in the header, is what a whole-workspace drift pass reads
  instead of the records, `read_plan`, each record read later checked against the plan's
  blake3 of it; the plan ends with the hooks' index, a hash table of anchored path, folder
  and memory id -> records' starts and blake3, its head and table under their own checksum in
  the header and each bucket under the table's, which `on_paths` reads instead of the plan:
  a hook's cost does not grow with the workspace): nothing in it is ever executed, and
  every memory in it passes the ledger reader's own rules (`model.check_snapshot`) as it is
  loaded. It names the state folder it was written in (device and inode), so a copy
  committed to a clone, or carried over with `cp -r`, is never read.

Written through `statefs.replace_state` (exclusive temp beside it, its mtime set, fsync, the
atomic `os.replace`), lock-free: each file is whole and self-consistent, and the last one wins. A
read-only workspace never writes it; nor is a fold kept whose read skipped a bad line or found
a torn tail (those are said on every read, so no later process may skip reading them).
"""

from __future__ import annotations

import gc
import os
import stat as stat_mod
import sys
from array import array
from collections.abc import Iterator
from itertools import chain

import blake3

from . import catchup
from .catchup import Folded, Prefix
from .errors import AnchorfsError
from .ledger import OPS, FoldState, Head, Ledger, fold, refold
from .model import Memory, SnapshotError, check_snapshot, from_iso, to_iso
from .statefs import open_state, replace_state

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path  # annotations only: see anchorfs/workspace.py
    from typing import Any
    from .snapindex import on_paths
    from .snapplan import PlanMismatch, SnapPlan, covered_by, read_plan
else:
    def __getattr__(name: str) -> Any:
        """The plan reader's names live in `anchorfs.snapplan`, the index reader's (`on_paths`) in
        `anchorfs.snapindex`, each imported the first time one of its names is asked for."""
        if name == "on_paths":
            from .snapindex import on_paths

            globals()["on_paths"] = on_paths
            return on_paths
        if name in ("PlanMismatch", "SnapPlan", "covered_by", "read_plan"):
            from . import snapplan

            globals().update({k: getattr(snapplan, k) for k in snapplan.__all__})
            return getattr(snapplan, name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["SNAP_FILE", "FORMAT", "VERSION", "MIN_LINES", "PlanMismatch", "SnapPlan", "Snapshot", "covered_by", "current",
           "decode", "encode", "index_bytes", "ix_bucket", "load", "plan_sum", "on_paths", "read_plan", "save", "snap_file", "snap_path"]

SNAP_FILE = "fold.snap"
FORMAT = "anchorfs-fold"
VERSION = 8
"""4: the drift plan (a JSON line and its raw arrays) after the counts (`read_plan`); 5: the plan
also lists every memory of the fold (id, record start, record hash) with the fold's `top` and
`lines`, so lines appended since fold into it (`anchorfs.planoverlay`); 6: and each active
memory's digest key (its time, anchor count, kind: `anchorfs.digest`); 7: and, at the plan's
end, a hashed index (anchored path, folder above one, memory id -> its records' starts and
hashes) with its own checksum in the header, which a hook reads instead of the whole plan
(`snapindex.on_paths`); the counts line's old index is left empty; 8: the plan's checksum leaves
that index out (`plan_sum`; 7's covered it). A file of another version is simply not used."""
MIN_LINES = 64
"""A ledger this short folds in about a millisecond: no snapshot is written for it."""
REWRITE_DIVISOR = 32
"""A grown fold is saved again once the lines since the snapshot pass 1/32 of its memories
(at least `MIN_LINES`): a reader parses at most that tail, a writer rewrites rarely."""
_HEAD_LIMIT = 1 << 16
_Folder = tuple[int, int]


def snap_file(ledger: Ledger) -> str:
    """The fold snapshot's path, beside the ledger (a str: see `Ledger.file`)."""
    return os.path.join(ledger.dir, SNAP_FILE)


def snap_path(ledger: Ledger) -> Path:
    from pathlib import Path

    return Path(snap_file(ledger))


class Snapshot:
    """A snapshot read from disk: its fold, and the file's identity (to re-stamp that file).
    A plain class: a dataclass costs a millisecond of every hook's import."""

    __slots__ = ("folded", "ident")

    def __init__(self, folded: Folded, ident: tuple[int, int, int, int]) -> None:
        self.folded = folded
        self.ident = ident


def _folder(ledger: Ledger) -> _Folder | None:
    try:
        st = os.lstat(ledger.dir)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat_mod.S_ISDIR(st.st_mode) else None


# -- the format ------------------------------------------------------------------------------

def _records(state: FoldState) -> Iterator[list[Any]]:
    """One [id, heads, named, lone] per memory, in the fold's dict order."""
    heads_all, named_all = state.heads, state.named
    for mid, memory in state.items():
        heads = heads_all.get(mid)
        named = named_all.get(mid)
        out_heads = None
        if heads is not None:
            out_heads = [[h.rank[0] if len(h.rank) == 3 else None, h.rank[1] if len(h.rank) == 2 else None,
                          h.tx, h.op, h.actor, to_iso(h.at), h.memory.to_dict()] for h in heads.values()]
        yield [mid, out_heads, sorted(named) if named is not None else None,
               memory.to_dict() if not heads else None]


def encode(folded: Folded, folder: _Folder) -> bytes:
    """The file's bytes: a header line (format, prefix, folder, the body's checksum, where the
    plan line is and its own checksum, where the index at the plan's end is and the checksum of
    its head and table), the body: a line with the fold's counts, the drift plan line
    (`read_plan`) ending with the index (`_index`), then one line per memory record."""
    state = folded.state
    if not isinstance(state, FoldState):
        raise TypeError("only a FoldState is snapshotted")
    import orjson  # here and at each use, not at import: a hook reads the plan (`snapplan`) alone (issue 20)

    records: list[bytes] = []
    plan = _PlanBuilder()
    at = 0
    for rec in _records(state):
        line = orjson.dumps(rec) + b"\n"  # orjson escapes every newline inside a string
        memory = state[rec[0]]
        digest = blake3.blake3(line).digest(_SUM)
        plan.every(rec[0], memory, at, digest)
        if memory.status == "active":
            plan.add(memory, at, digest)
        records.append(line)
        at += len(line)
    # the old per-path index (read by no version-7 reader: `ix` is): kept empty for the shape `_split` checks
    head = orjson.dumps({"top": state.top, "lines": state.lines, "index": {}})
    plan_line = plan.dumps(state.top, state.lines)
    ix, ix_size = None, 0
    if plan.ix is not None:  # the index ends the plan line's bytes: [where, its checked part, all of it, blake3]
        ix_size, checked, digest_hex = plan.ix
        ix = [len(head) + 1 + len(plan_line) - ix_size, checked, ix_size, digest_hex]
    body = b"".join([head, b"\n", plan_line, b"\n", *records])
    header = orjson.dumps({"format": FORMAT, "v": VERSION, "prefix": folded.prefix.to_dict(), "folder": list(folder),
                           "size": len(body), "body": blake3.blake3(body).hexdigest(),
                           "plan": [len(head) + 1, len(plan_line), plan_sum(plan_line, ix_size)], "ix": ix})
    return header + b"\n" + body


_SUM = 16
"""Bytes of a record line's blake3 kept in the plan (`sums`): a record read alone is checked by it."""


class _PlanBuilder:
    """The drift plan of a fold, gathered as `encode` writes its records: what a whole-workspace
    drift pass asks of the file system (`drift._Plan`), derived from the active anchored
    memories (the pass's targets, in the fold's order) without their records being read back."""

    __slots__ = ("at", "ids", "sums", "claims", "marked", "where", "paths", "first", "mixed", "owners", "ok",
                 "all_at", "all_ids", "all_sums", "act_j", "act_ts", "act_na", "act_kind", "kinds", "ix")

    def __init__(self) -> None:
        self.at = array("Q")  # per target: where its record starts (after the plan line)
        self.ids: list[str] = []
        self.sums: list[bytes] = []  # per target: its record line's blake3, `_SUM` bytes
        self.claims: list[int] = []  # targets whose text `verify --mark` found stale
        self.marked: list[list[Any]] = []  # [start, sum] of active unanchored memories with such claims
        self.where: dict[str, int] = {}
        self.paths: list[str] = []  # distinct anchored paths, in order of first use
        self.first: list[str | None] = []  # per path: the hash its first anchor recorded
        self.mixed: set[int] = set()  # paths whose anchors disagree on the hash
        self.owners: list[list[int]] = []  # per path: the targets resting on it, in order
        self.ok = True  # an id with a newline cannot be listed: no plan then
        self.all_at = array("Q")  # per memory of the fold, in its order: where its record starts
        self.all_ids: list[str] = []
        self.all_sums: list[bytes] = []
        self.act_j = array("I")  # per active memory (format 6): its place in the fold,
        self.act_ts = array("d")  # the time the session-start digest sorts it by,
        self.act_na = array("I")  # its anchor count,
        self.act_kind = array("I")  # and its kind (an index into `kinds`)
        self.kinds: dict[str, int] = {}
        self.ix: tuple[int, int, str] | None = None  # the index's (size, checked part's size, blake3): `dumps`

    def every(self, mid: str, memory: Memory, at: int, digest: bytes) -> None:
        """Any memory of the fold (format 5): what `planoverlay` needs to fold lines appended
        since into the plan (the record of each memory they touch, found by id and checked);
        an active one's digest key (format 6: `anchorfs.digest` sorts the active memories by it
        and reads only the records it shows)."""
        if memory.status == "active":
            self.act_j.append(len(self.all_ids))
            self.act_ts.append((memory.verified_at or memory.recorded_at).timestamp())
            self.act_na.append(len(memory.anchors))
            self.act_kind.append(self.kinds.setdefault(memory.kind, len(self.kinds)))
        self.all_at.append(at)
        self.all_ids.append(mid)
        self.ok = self.ok and "\n" not in mid
        self.all_sums.append(digest)

    def add(self, memory: Memory, at: int, digest: bytes) -> None:
        if not memory.anchors:
            if memory.stale_claims:
                self.marked.append([at, digest.hex()])  # few: hex in the JSON
            return
        pos = len(self.ids)
        self.at.append(at)
        self.ids.append(memory.id)
        self.sums.append(digest)
        if memory.stale_claims:
            self.claims.append(pos)
        where, owners = self.where, self.owners
        for a in memory.anchors:
            k = where.get(a.path)
            if k is None:
                where[a.path] = len(self.paths)
                self.paths.append(a.path)
                self.first.append(a.sha256)
                owners.append([pos])
                continue
            if self.first[k] != a.sha256:
                self.mixed.add(k)
            if owners[k][-1] != pos:
                owners[k].append(pos)

    def dumps(self, top: int, lines: int) -> bytes:
        """The plan: a JSON line (counts, the fold's `top` and `lines`, the paths and their
        hashes, the marked), then its arrays as raw little-endian bytes (starts, owners, the
        owners' bounds per path, the records' hashes, the ids; then the same three of every
        memory of the fold), which a reader takes without parsing: at 100,000 memories the JSON
        form of the ids and hashes alone cost more to parse than the whole pass."""
        if not self.ok:
            return b"null"
        own = array("I", chain.from_iterable(self.owners))
        own_at = array("I", [0])
        for o in self.owners:
            own_at.append(own_at[-1] + len(o))
        mixed = self.mixed
        ids = "\n".join(self.ids).encode("utf-8")
        all_ids = "\n".join(self.all_ids).encode("utf-8")
        import orjson

        index, checked, digest = self._index(top, lines)
        self.ix = (len(index), checked, digest)
        head = orjson.dumps({
            "n": len(self.ids), "paths": self.paths,
            "want": [None if k in mixed else sha for k, sha in enumerate(self.first)],
            "own_n": len(own), "ids_size": len(ids), "claims": self.claims, "marked": self.marked,
            "top": top, "lines": lines, "all_n": len(self.all_ids), "all_ids_size": len(all_ids),
            "act_n": len(self.act_j), "kinds": list(self.kinds), "ix_size": len(index)})
        return b"".join([head, b"\n", _le(self.at), _le(own), _le(own_at), b"".join(self.sums), ids,
                         _le(self.all_at), b"".join(self.all_sums), all_ids,
                         _le(self.act_j), _le(self.act_ts), _le(self.act_na), _le(self.act_kind), index])

    def _index(self, top: int, lines: int) -> tuple[bytes, int, str]:
        """(the index's bytes, how many of them its checksum covers, that checksum): what a hook
        reads instead of the whole plan (`snapindex.on_paths`: at 10,000 memories the plan is
        1.5 MB, read, hashed and parsed for one path's records).

        A hash table of keys: `p:PATH` (an anchored path) -> [[start, blake3, id], ...] of the
        active anchored memories resting on it, in the fold's order; `d:FOLDER` (a folder above
        one) -> 0; `i:ID` (any memory of the fold) -> [start, blake3]. A head line (the bucket
        count, the fold's `top` and `lines`), then per bucket its start (u64) and size (u32)
        in the buckets' bytes and its blake3 (`_SUM` bytes), all under one checksum in the
        header; then the buckets, each a JSON list of [key, value] checked by its own blake3.
        So a reader hashes the head, the table and one bucket per key, whatever the size."""
        keys: dict[str, Any] = {}
        at, sums, ids = self.at, self.sums, self.ids
        for path, owners in zip(self.paths, self.owners):
            keys["p:" + path] = [[at[pos], sums[pos].hex(), ids[pos]] for pos in owners]
            parts = path.split("/")
            for i in range(1, len(parts)):
                keys.setdefault("d:" + "/".join(parts[:i]), 0)
        for mid, start, digest in zip(self.all_ids, self.all_at, self.all_sums):
            keys["i:" + mid] = [start, digest.hex()]
        return index_bytes(keys, top, lines)


def index_bytes(keys: dict[str, Any], top: int, lines: int) -> tuple[bytes, int, str]:
    """The index of `keys` as `_PlanBuilder._index` lays it out: (its bytes, the size of its
    head and table, their blake3)."""
    import orjson

    n_buckets = 16
    while n_buckets * 8 < len(keys):
        n_buckets *= 2
    buckets: list[list[Any]] = [[] for _ in range(n_buckets)]
    for key, value in keys.items():
        buckets[ix_bucket(key, n_buckets)].append([key, value])
    blobs = [orjson.dumps(b) for b in buckets]
    starts, sizes = array("Q"), array("I")
    pos = 0
    for blob in blobs:
        starts.append(pos)
        sizes.append(len(blob))
        pos += len(blob)
    head = orjson.dumps({"b": n_buckets, "top": top, "lines": lines}) + b"\n"
    checked = head + _le(starts) + _le(sizes) + b"".join(blake3.blake3(b).digest(_SUM) for b in blobs)
    return checked + b"".join(blobs), len(checked), blake3.blake3(checked).hexdigest()


def plan_sum(plan_line: bytes, ix_size: int) -> str:
    """The plan's own checksum (the header's `plan`): its bytes but the index that ends them,
    which has its own (`ix`), so `read_plan` neither reads nor hashes the hooks' index."""
    return blake3.blake3(memoryview(plan_line)[:len(plan_line) - ix_size]).hexdigest()


def ix_bucket(key: str, n_buckets: int) -> int:
    """The index's bucket of `key` (`_PlanBuilder._index`): the same in every process (a CRC, not
    Python's salted `hash`); its integrity is the bucket's blake3, not this."""
    import zlib

    return zlib.crc32(key.encode("utf-8", "surrogatepass")) % n_buckets


def _le(a: array[Any]) -> bytes:
    if sys.byteorder != "little":
        a = array(a.typecode, a)
        a.byteswap()
    return a.tobytes()


def _array(typecode: str, data: memoryview) -> array[Any]:
    a = array(typecode)
    a.frombytes(data)
    if sys.byteorder != "little":
        a.byteswap()
    return a


def _memory(d: Any, mid: str) -> Memory:
    check_snapshot(d)
    if d["id"] != mid:
        raise ValueError("a snapshot under another id")
    return Memory.from_dict(d)


def _str(x: Any) -> str:
    if type(x) is not str:
        raise ValueError("not a string")
    return x


def _int(x: Any) -> int:
    if type(x) is not int or x < 0:
        raise ValueError("not a count")
    return x


def _record(rec: Any) -> tuple[str, dict[str, Head], set[str] | None, Memory]:
    """One memory record read back (id, heads, named ids, the memory the fold gives), checked as
    the ledger reader checks a line; any surprise raises."""
    if type(rec) is not list or len(rec) != 4:
        raise ValueError("a bad memory record")
    mid, heads_in, named_in, lone = _str(rec[0]), rec[1], rec[2], rec[3]
    if not mid:
        raise ValueError("a memory without an id")
    if heads_in is None:
        raise ValueError("a memory without heads")  # every memory folded has a heads entry
    if type(heads_in) is not list:
        raise ValueError("bad heads")
    from_dict = Memory.from_dict
    heads: dict[str, Head] = {}
    for h in heads_in:
        if type(h) is not list or len(h) != 7:
            raise ValueError("a bad head")
        seq, line, tx, op, actor, at_s, snap = h
        if type(tx) is not str or type(actor) is not str or type(at_s) is not str or op not in OPS \
                or tx in heads:
            raise ValueError("a bad head")
        at = from_iso(at_s)
        if at is None:
            raise ValueError("a head without a time")
        if seq is not None:
            if type(seq) is not int or seq < 1 or line is not None:
                raise ValueError("a bad rank")
            rank: tuple[Any, ...] = (seq, at, tx)
        else:
            rank = (0, _int(line))
        check_snapshot(snap)
        if snap["id"] != mid:
            raise ValueError("a snapshot under another id")
        heads[tx] = Head(rank, tx, op, actor, at, from_dict(snap))
    named: set[str] | None = None
    if named_in is not None:
        if type(named_in) is not list:
            raise ValueError("bad names")
        named = {_str(t) for t in named_in}
    if heads and lone is not None:
        raise ValueError("a lone snapshot beside heads")
    if len(heads) == 1:
        memory = next(iter(heads.values())).memory
    elif heads:
        memory = max(heads.values(), key=lambda x: x.rank).memory
    else:
        memory = _memory(lone, mid)
    return mid, heads, named, memory


def _split(body: bytes, plan_size: int) -> tuple[dict[str, Any], bytes]:
    """(the counts-and-index line, parsed and checked for shape; the records' bytes, after the
    plan of `plan_size` bytes and its newline)."""
    import orjson

    cut = body.find(b"\n")
    if cut < 0:
        raise ValueError("not a fold")
    head = orjson.loads(body[:cut])
    if not isinstance(head, dict) or not isinstance(head.get("index"), dict):
        raise ValueError("not a fold")
    _int(head["top"]), _int(head["lines"])
    end = cut + 1 + plan_size
    if body[end:end + 1] != b"\n":
        raise ValueError("not a fold")
    records = body[end + 1:]
    if records and not records.endswith(b"\n"):
        raise ValueError("a torn record")
    return head, records


def _state(body: bytes, plan_size: int) -> FoldState:
    """The body read back into a `FoldState`, checked as the ledger reader checks a line; any
    surprise raises (the caller treats it as no snapshot)."""
    head, records = _split(body, plan_size)
    state = FoldState()
    state.top, state.lines = head["top"], head["lines"]
    heads_all, named_all = state.heads, state.named
    import orjson

    loads = orjson.loads
    for line in records.split(b"\n")[:-1]:
        mid, heads, named, memory = _record(loads(line))
        if mid in state:
            raise ValueError("a memory twice")
        heads_all[mid] = heads
        if named is not None:
            named_all[mid] = named
        state[mid] = memory
    return state


def decode(data: bytes, seen_ns: int, folder: _Folder | None) -> Folded | None:
    """The snapshot in `data` (its prefix's `seen_ns` is the file's mtime), or None for anything
    that is not a whole, well-formed snapshot written in this state folder."""
    try:
        checked = _checked(data, seen_ns, folder)
        if checked is None:
            return None
        prefix, body, plan_size = checked
        state = _state(body, plan_size)
    except _SURPRISES:
        return None
    return Folded(prefix, state, state.lines)


_SURPRISES = (ValueError, KeyError, TypeError, AttributeError, IndexError, OverflowError, SnapshotError)
"""What a damaged snapshot can raise while read (orjson's and json's `JSONDecodeError` are ValueErrors)."""


def _checked(data: bytes, seen_ns: int, folder: _Folder | None) -> tuple[Prefix, bytes, int] | None:
    """(prefix, body, the plan's size) of a snapshot whose header is ours (format, version,
    this state folder) and whose body matches its size and checksum; None otherwise. May
    raise on garbage."""
    import orjson

    cut = data.find(b"\n", 0, _HEAD_LIMIT)
    if cut < 0:
        return None
    header = orjson.loads(data[:cut])
    if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("v") != VERSION:
        return None
    if folder is None or header.get("folder") != list(folder):
        return None
    body = data[cut + 1:]
    if header.get("size") != len(body) or header.get("body") != blake3.blake3(body).hexdigest():
        return None
    where = header.get("plan")
    if type(where) is not list or len(where) != 3:
        return None
    plan_size = _int(where[1])
    prefix = Prefix.from_dict(header.get("prefix"), seen_ns)
    return None if prefix is None else (prefix, body, plan_size)


def _read(ledger: Ledger) -> tuple[bytes, os.stat_result] | None:
    """The snapshot file's bytes and its `fstat`; None when missing, a link (never followed,
    only ignored), unreadable, or larger than any fold of that ledger."""
    try:
        fd = open_state(snap_file(ledger), os.O_RDONLY)
    except (OSError, AnchorfsError):
        return None
    try:
        st = os.fstat(fd)
        ledger_size = os.lstat(ledger.file).st_size
        if st.st_size > 2 * ledger_size + (1 << 20):
            return None  # no fold of that ledger is this large: not ours
        chunks = []
        while chunk := os.read(fd, 1 << 22):
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return b"".join(chunks), st


def load(ledger: Ledger) -> Snapshot | None:
    """The snapshot beside `ledger`, checked as it is read; None when missing or not usable
    (a link there is never followed, only ignored)."""
    read = _read(ledger)
    if read is None:
        return None
    data, st = read
    folded = decode(data, st.st_mtime_ns, _folder(ledger))
    if folded is None:
        return None
    return Snapshot(folded, (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))


def save(ledger: Ledger, folded: Folded) -> bool:
    """Write `folded` as the snapshot (`statefs.replace_state`: exclusive temp, mtime set to the
    moment its prefix was verified, fsync, `os.replace`); False when it cannot be (a link there,
    an I/O error): the snapshot is only ever a saving, so a failed write is no error."""
    folder = _folder(ledger)
    path = snap_file(ledger)
    if folder is None or not isinstance(folded.state, FoldState):
        return False
    try:
        st = os.lstat(path)
        if not stat_mod.S_ISREG(st.st_mode):
            return False  # a link (or anything odd) there is left alone, never written through or over
    except FileNotFoundError:
        pass
    except OSError:
        return False
    payload = encode(folded, folder)
    try:
        _upgrade_gitignore(ledger)
        # the racy rule measures from the mtime (`catchup.stamp`): the moment the prefix was verified
        replace_state(path, payload, fsync=True, mtime_ns=folded.prefix.seen_ns)
    except (OSError, AnchorfsError):
        return False
    return True


def _upgrade_gitignore(ledger: Ledger) -> None:
    from .statedir import upgrade_gitignore

    upgrade_gitignore(ledger.dir)


def _restamp(ledger: Ledger, snap: Snapshot, prefix: Prefix) -> None:
    """Give the snapshot just verified whole the time of that verification, so later readers
    trust it on the stat alone; only if it is still the very file read (fd, identity checked)."""
    try:
        fd = open_state(snap_file(ledger), os.O_RDONLY)
    except (OSError, AnchorfsError):
        return
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) == snap.ident:
            os.utime(fd, ns=(prefix.seen_ns, prefix.seen_ns))
    except OSError:
        pass
    finally:
        os.close(fd)


def _worth_saving(ledger: Ledger, follow: catchup.Follow, state: FoldState, saved: int | None) -> bool:
    prefix = follow.prefix
    if prefix.stat is None or follow.skipped or prefix.stat[2] != prefix.offset:
        return False  # not vouched for, a bad line skipped, or a torn tail: every read must see those
    if state.lines < MIN_LINES:
        return False
    if saved is None:
        return True
    return state.lines - saved >= max(MIN_LINES, len(state) // REWRITE_DIVISOR)


def _warn_torn(ledger: Ledger, end: int) -> None:
    try:
        torn = os.lstat(ledger.file).st_size > end and not ledger._in_flight(end)
    except OSError:
        return
    if torn:
        import warnings

        warnings.warn(f"{ledger.file}: skipping a torn last line at byte {end}", stacklevel=4)


def current(ledger: Ledger, cached: Folded | None = None, *, write: bool = True) -> Folded:
    """The fold of the ledger as it is now.

    From `cached` (this process's last fold) when given, else from the snapshot on disk when
    it holds; the lines after either are folded in, and a ledger that no longer starts with
    their prefix is folded afresh. The snapshot is written anew (when `write`) after a fresh
    fold, or once enough lines were folded in since it was last written.

    The cyclic collector is paused meanwhile: a fold allocates one memory (and its dicts) per
    snapshot and frees nothing, so each collection it would trigger walks a growing heap for
    no garbage (a third of the time at 20,000 memories).
    """
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        return _current(ledger, cached, write=write)
    finally:
        if paused:
            gc.enable()


def _current(ledger: Ledger, cached: Folded | None, *, write: bool) -> Folded:
    base = cached
    snap: Snapshot | None = None
    if base is None:
        snap = load(ledger)
        if snap is not None:
            if catchup.settled(ledger, snap.folded.prefix):
                return snap.folded
            base = snap.folded
    follow = catchup.follow(ledger, base.prefix if base is not None else None)
    if snap is not None and follow.kind != "rewritten":
        _warn_torn(ledger, follow.prefix.offset)  # as a read from the first line would have
    saved: int | None
    if follow.kind == "same" and base is not None:
        state, saved = base.state, base.saved
        if snap is not None and write and follow.prefix.stat is not None:
            if follow.prefix.stat != snap.folded.prefix.stat:
                saved = None  # the same bytes under another stat (a checkout, a touch): vouch for it anew
            elif catchup.settled(ledger, follow.prefix):
                _restamp(ledger, snap, follow.prefix)
    elif follow.kind == "grown" and base is not None:
        state, saved = refold(base.state, follow.entries), base.saved
    else:
        state, saved = fold(follow.entries), None
    if write and isinstance(state, FoldState) and _worth_saving(ledger, follow, state, saved):
        if save(ledger, Folded(follow.prefix, state)):
            saved = state.lines
    return Folded(follow.prefix, state, saved)
