"""A snapshot's drift plan with the lines appended to the ledger since folded in.

A new process whose ledger has only grown since the fold snapshot was written (one `anchorfs
record` is one line) used to pay the full fold (every record decoded, seconds at 100,000
memories) until the snapshot was rewritten. Here the plan (`snapplan.SnapPlan`, format 5: it
lists every memory of the fold with its record's start and hash, and the fold's `top` and
`lines`) is kept, the lines after its prefix are parsed, and only the memories they touch are
folded: their records read through the plan and checked by their hash, loaded into a small
`FoldState` with their heads and named ids, the lines applied in ledger order as
`ledger.refold` applies them. The result answers as the full path (`foldsnap.current`: the
snapshot and the lines after it) does, position for position.

Anything doubtful is None (the full fold decides, as before): the prefix not holding by
`catchup.follow`'s rule, a line skipped as bad, a torn or unvouched tail, a line without `seq`
or whose `seq` is not above the snapshot's `top` (a union merge's older lines, a rewrite of an
earlier seq), a touched memory left with two heads (a fork), an id with a newline, a record
that does not hash or read as the plan says.
"""

from __future__ import annotations

import warnings
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from itertools import compress

from . import catchup
from .catchup import Prefix
from .errors import LedgerError
from .ledger import FoldState, Ledger
from .model import Memory
from .snapplan import ActiveKeys, PlanMismatch, SnapPlan

TYPE_CHECKING = False  # not `typing`'s: its import is about 8M instructions of a session start (issue 20)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["OverlayPlan", "overlay", "MAX_TOUCHED"]

MAX_TOUCHED = catchup.MAX_TOUCHED  # where the rule lives (`catchup.touched_after`)


def _target(m: Memory) -> bool:
    return m.status == "active" and bool(m.anchors)


def overlay(ledger: Ledger, base: SnapPlan) -> SnapPlan | OverlayPlan | None:
    """`base` with the ledger's lines after its prefix folded in; `base` itself (its prefix
    renewed) when the ledger holds the same bytes under another stat; None when it cannot be
    told exactly (see the module's doc). Never closes `base`: the caller does on None."""
    try:
        with warnings.catch_warnings():  # the full fold, taken on None, says what it finds
            warnings.simplefilter("ignore")
            follow = catchup.follow(ledger, base.prefix)
    except (LedgerError, OSError):
        return None
    prefix = follow.prefix
    if not catchup.read_whole(follow):
        return None  # moved while read, a bad line, a torn tail (or an append under way)
    if follow.kind == "same":
        base.prefix = prefix
        return base
    touched = catchup.touched_after(follow, base.top)
    if touched is None:
        return None
    entries = follow.entries
    found = base.find(touched)
    state = FoldState()
    starts: dict[str, int] = {}
    before: dict[str, Memory] = {}
    for mid, j in sorted(found.items(), key=lambda kv: kv[1]):  # the fold's order
        at, (rid, heads, named, memory) = base.record_of(j)
        if rid != mid:
            raise PlanMismatch("a record under another id than its plan lists")
        state[mid] = memory
        state.heads[mid] = heads
        if named is not None:
            state.named[mid] = named
        starts[mid] = at
        before[mid] = memory
    state.top, state.lines = base.top, base.lines
    for entry in entries:
        state.apply(entry)
    if any(len(state.heads.get(mid, ())) > 1 for mid in state):
        return None  # a fork: listed and flagged by the full fold
    return OverlayPlan(base, state, starts, before, prefix, frozenset(found.values()))


def _grown(code: str, column: Sequence[Any], extra: Iterable[Any]) -> array[Any]:
    """`column` as an array of `code`, then `extra` (an array's own copy is one memcpy)."""
    out = column[:] if isinstance(column, array) and column.typecode == code else array(code, column)
    out.extend(extra)
    return out


class OverlayPlan:
    """`SnapPlan`'s reading interface over a base plan and the memories a tail changed: the
    targets (active anchored memories, in the fold's order) by position, each either the base's
    target or a memory the tail left; the distinct paths in order of first use, their hash (None
    where the anchors disagree, or where a memory that did left: a `None` only sends that file's
    memories through their own hashes, same answers), and the targets on each."""

    __slots__ = ("base", "prefix", "n", "paths", "want", "claims", "_old_of", "_extra", "_gone", "_ins_at",
                 "_gone_set", "_src", "_n_old", "_ins_on", "_owners", "_ids", "_marked", "_found", "_before")

    def __init__(self, base: SnapPlan, state: FoldState, starts: dict[str, int], before: dict[str, Memory],
                 prefix: Prefix, found: frozenset[int] = frozenset()) -> None:
        self.base, self.prefix = base, prefix
        self._found = found  # the fold's places of the memories the tail touched
        self._before = before  # those of them the base holds, as it holds them
        at0 = base.starts()
        n0 = base.n
        events = sorted((starts[mid], mid) for mid in starts)
        old_of = array("q")
        extra: list[Memory] = []
        extra_pos: list[int] = []
        gone: list[int] = []
        left: list[Memory] = []  # the base targets the tail touched, as the snapshot had them
        ins_at: list[int] = []
        cur = 0
        for start, mid in events:
            p = bisect_left(at0, start, cur)
            old_of.extend(range(cur, p))
            cur = p
            if p < n0 and at0[p] == start:  # the same record: target p
                old = before[mid]
                if not _target(old) or bool(old.stale_claims) != (p in base.claimset):
                    raise PlanMismatch("a record is not the target its plan names")
                gone.append(p)
                left.append(old)
                cur = p + 1
            m = state[mid]
            if _target(m):
                extra_pos.append(len(old_of))
                old_of.append(-1 - len(extra))
                extra.append(m)
                ins_at.append(start)
        old_of.extend(range(cur, n0))
        for mid, m in state.items():
            if mid not in starts and _target(m):
                extra_pos.append(len(old_of))
                old_of.append(-1 - len(extra))
                extra.append(m)
        self._old_of, self._extra, self._gone, self._ins_at = old_of, extra, gone, ins_at
        self._gone_set = frozenset(gone)
        self.n = len(old_of)
        self._paths(base, left, extra, extra_pos)
        claims = [self._new(p) for p in base.claims if p not in self._gone_set]
        claims += [q for q, m in zip(extra_pos, extra) if m.stale_claims]
        self.claims = sorted(claims)
        self._ids: list[str] | None = None
        self._marked = (starts, state)

    def _new(self, p: int) -> int:
        """Base target `p`'s position here (`p` not one the tail touched)."""
        if not self._gone and not self._ins_at:
            return p  # the tail only brought new memories: they come after every base target
        return p - bisect_left(self._gone, p) + bisect_left(self._ins_at, self.base.start(p))

    def _paths(self, base: SnapPlan, left: list[Memory], extra: list[Memory], extra_pos: list[int]) -> None:
        """The distinct paths in order of first use, their hashes and their owners' sources. Only
        the paths of the targets the tail left or brought (`touched`) are judged one by one: every
        other path keeps its owners, its hash and its place among the others (its first owner's
        position only shifts), so the touched ones are placed among them by binary search."""
        gone = self._gone_set
        n_old = len(base.paths)
        where = dict(zip(base.paths, range(n_old)))
        touched: set[int] = set()
        for m in left:
            for a in m.anchors:
                k = where.get(a.path)
                if k is None:
                    raise PlanMismatch("a record rests on a file its plan does not name")
                touched.add(k)
        ins_on: dict[int, list[int]] = {}
        shas: dict[int, set[str | None]] = {}
        new_paths: list[str] = []
        for q, m in zip(extra_pos, extra):
            for a in m.anchors:
                k = where.setdefault(a.path, n_old + len(new_paths))
                if k == n_old + len(new_paths):
                    new_paths.append(a.path)
                touched.add(k)
                on = ins_on.setdefault(k, [])
                if not on or on[-1] != q:
                    on.append(q)
                shas.setdefault(k, set()).add(a.sha256)
        all_paths = [*base.paths, *new_paths]
        want: dict[int, str | None] = {}
        first_of: dict[int, int] = {}  # per touched path still in use: its first owner's position here
        for k in touched:
            first = next((p for p in base.owners(k) if p not in gone), None) if k < n_old else None
            f = None if first is None else self._new(first)
            on_k = ins_on.get(k)
            if on_k:
                f = on_k[0] if f is None else min(f, on_k[0])
            if f is None:
                continue  # no target rests there any more
            first_of[k] = f
            got = shas.get(k, set())
            if first is None:  # only the tail's anchors rest there now
                want[k] = next(iter(got)) if len(got) == 1 else None
            else:
                w = base.want[k]
                want[k] = w if w is not None and got <= {w} else None
        dirty: set[int] = set()
        for k, f in first_of.items():
            old = self._old_of[f]  # the base target first on path k, or (< 0) one the tail brought
            if old >= 0 and (k >= n_old or base.owners(k)[0] != old):
                dirty.add(f)  # a base target newly the first on a path: its anchors say the order
        order_in: dict[int, dict[str, int]] = {}

        def tiebreak(k: int, f: int) -> int:
            """Path k's place among the paths its first owner (at f) is the first on."""
            if self._old_of[f] >= 0 and f not in dirty:
                return k  # the base's order of them holds: they were first used by it there too
            got = order_in.get(f)
            if got is None:
                m = self.memory(f)
                got = order_in[f] = {p: i for i, p in enumerate(dict.fromkeys(a.path for a in m.anchors))}
            i = got.get(all_paths[k])
            if i is None:
                raise PlanMismatch("a memory first on a path it does not rest on")
            return i

        def key(k: int) -> tuple[int, int]:
            f = self._new(base.owners(k)[0])
            return (f, tiebreak(k, f))

        untouched = [k for k in range(n_old) if k not in touched] if touched else list(range(n_old))
        inserts = sorted((bisect_left(untouched, (f, tiebreak(k, f)), key=key), f, tiebreak(k, f), k)
                         for k, f in first_of.items())
        order: list[int] = []
        prev = 0
        for i, _, _, k in inserts:
            order.extend(untouched[prev:i])
            order.append(k)
            prev = i
        order.extend(untouched[prev:])
        base_want = base.want
        self.paths = [all_paths[k] for k in order]
        self.want = [want[k] if k in want else base_want[k] for k in order]
        self._src = order  # per path here: its base path (< n_old) or one the tail brought
        self._n_old = n_old
        self._ins_on = ins_on
        self._owners: dict[int, list[int]] = {}

    def touched(self) -> dict[str, Memory]:
        """Every memory the tail's lines wrote (a supersede's two, a retract's one...), as they
        left it, by id: all that can read otherwise than in the base snapshot, so what a digest
        kept from a fold on that same base must look at again (`digest_memo._update_grown`)."""
        return dict(self._marked[1])

    def active_count(self) -> int:
        """How many memories are active: the base's, less those the tail touched that were,
        plus those it left so (`active_keys`' length, without building its columns)."""
        try:
            n0 = len(self.base._act[0])  # the base's active memories (`SnapPlan.active_columns`' first)
        except AttributeError:
            n0 = len(self.base.active_columns()[0])
        was = sum(1 for m in self._before.values() if m.status == "active")
        return n0 - was + sum(1 for m in self._marked[1].values() if m.status == "active")

    def owners(self, k: int) -> list[int]:
        """The targets resting on path `k`, in order."""
        got = self._owners.get(k)
        if got is None:
            src = self._src[k]
            ins = self._ins_on.get(src, [])
            if src >= self._n_old:
                got = list(ins)
            else:
                gone = self._gone_set
                new = self._new
                mapped = [new(p) for p in self.base.owners(src) if p not in gone]
                got = sorted(set(mapped).union(ins)) if ins else mapped
            self._owners[k] = got
        return got

    @property
    def ids(self) -> list[str]:
        if self._ids is None:
            base_ids, extra = self.base.ids, self._extra
            self._ids = [base_ids[o] if o >= 0 else extra[-1 - o].id for o in self._old_of]
        return self._ids

    def memory(self, pos: int, data: bytes | None = None) -> Memory:
        if not 0 <= pos < self.n:
            raise PlanMismatch(f"the plan names no target {pos}")
        old = self._old_of[pos]
        return self.base.memory(old, data) if old >= 0 else self._extra[-1 - old]

    def records(self) -> bytes:
        return self.base.records()

    def marked(self) -> list[Memory]:
        """The active unanchored memories with marked claims, in the fold's order."""
        starts, state = self._marked
        at_of = {at: mid for mid, at in starts.items()}
        out: list[tuple[int, Memory]] = [(at, m) for at, m in self.base.marked_at() if at not in at_of]

        def marked(m: Memory) -> bool:
            return m.status == "active" and not m.anchors and bool(m.stale_claims)

        out += [(starts[mid], m) for mid, m in state.items() if mid in starts and marked(m)]
        out.sort(key=lambda x: x[0])
        tail = [m for mid, m in state.items() if mid not in starts and marked(m)]
        return [m for _, m in out] + tail

    def active_keys(self) -> ActiveKeys:
        """`SnapPlan.active_keys` with the tail folded in: the base's active memories the tail
        did not touch, in the fold's order, then every touched one still active, as it left it."""
        js, ids, ts, na, kind, kinds = self.base.active_columns()
        if self._found:
            found = self._found
            keep = [j not in found for j in js]
            js, ids = list(compress(js, keep)), list(compress(ids, keep))
            ts, na, kind = list(compress(ts, keep)), list(compress(na, keep)), list(compress(kind, keep))
        state = self._marked[1]
        act = [m for m in state.values() if m.status == "active"]
        n0 = len(ids)
        kinds = list(kinds)
        at = {k: i for i, k in enumerate(kinds)}
        for m in act:
            at.setdefault(m.kind, len(at))
            if len(at) > len(kinds):
                kinds.append(m.kind)
        ids = [*ids, *(m.id for m in act)]
        ts = _grown("d", ts, ((m.verified_at or m.recorded_at).timestamp() for m in act))
        na = _grown("I", na, (len(m.anchors) for m in act))
        kind = _grown("I", kind, (at[m.kind] for m in act))
        base = self.base

        def read(i: int) -> Memory:
            return base.active_memory(js[i], ids[i]) if i < n0 else act[i - n0]

        return ids, ts, na, kind, kinds, read

    def close(self) -> None:
        self.base.close()
