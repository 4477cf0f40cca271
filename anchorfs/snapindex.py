"""The fold snapshot's hashed index, read alone: `on_paths`, the memories on a few paths.

Split out of `anchorfs.snapplan` (which reads the plan a whole-workspace pass takes): the hooks
read the header and the index that ends the plan (`_Index`: its head and table, then one bucket
per path asked), then the records it names, each checked against its blake3, so their cost does
not grow with the workspace (issue 20); lines appended since the snapshot are folded in from
the tail a hook last vouched for (`fold.tail`). JSON is read by the C scanner the standard
`json` parses with (`jsonread.loads`), not orjson: an edit's or a commit's hook reads this alone.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterable

import blake3

from . import catchup
from .catchup import Prefix
from .errors import AnchorfsError, LedgerError
from .foldsnap import _SUM, _SURPRISES, _int, _record, ix_bucket, snap_file
from .jsonread import loads as _loads  # not orjson: its import is 2.4x `python -c pass`
from .ledger import FoldState, Head, Ledger
from .model import Memory
from .snapplan import PlanMismatch, _header, covered_by, read_plan
from .statefs import open_state

__all__ = ["TAIL_FILE", "on_paths"]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


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
