"""A whole-workspace drift pass in a new process, from the fold snapshot's plan.

`Workspace.drift()` in a new process used to fold the ledger into one `Memory` per memory
before its pass (at 100,000: parse the 73 MB snapshot, check every memory's snapshot, build
each, then derive the pass's plan from them), seconds where the pass itself, the C loop over
a few thousand files, is tens of milliseconds. The fold snapshot now carries that plan
(`foldsnap.SnapPlan`: the distinct files, the hash their anchors recorded, which memory rests
on which, the memories with `stale_claims`), checksummed apart from the records. Here it is
read alone (the header and the plan line), the files are vouched for as ever
(`DriftChecker.check_planned`), and a memory is built only when it rests on a file that fails,
carries marked claims, changed drift since drift.json, or when a caller reads it
(`LazyMemories`): counts, `flagged` and `stale` build nothing more.

Trusted only as the snapshot is: its prefix settled on the ledger's stat (else the full fold,
which re-verifies and re-stamps it), this state folder, the plan line's own checksum, and
every record read back hashing as the plan says and being the target it names (`PlanMismatch`
otherwise: the plan is dropped and the full fold decides). The answers are `Workspace.drift`'s
full path's, value for value (tests/test_driftplan.py compares them).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence

from . import catchup, foldsnap, writeback
from .drift import DriftChecker, DriftReport, MemoryDrift, _all_fresh, _Plan, plan_of_files
from .foldsnap import PlanMismatch, SnapPlan
from .model import Memory

TYPE_CHECKING = False  # not `typing`'s: its import is about 12M instructions of a hook (issue 20)
if TYPE_CHECKING:
    from typing import overload

    from .planoverlay import OverlayPlan
    from .workspace import Workspace

__all__ = ["LazyMemories", "drift"]


class LazyMemories(Sequence[Memory]):
    """A snapshot plan's targets (the active anchored memories, in the fold's order), each built
    from its record on first read; reading them all reads the records once."""

    __slots__ = ("_snap", "_plan", "_built", "_all")

    def __init__(self, snap: SnapPlan | OverlayPlan, plan: _Plan) -> None:
        self._snap, self._plan = snap, plan
        self._built: dict[int, Memory] = {}
        self._all: list[Memory] | None = None

    def __len__(self) -> int:
        return self._snap.n

    if TYPE_CHECKING:
        @overload
        def __getitem__(self, i: int) -> Memory: ...

        @overload
        def __getitem__(self, i: slice) -> list[Memory]: ...

    def __getitem__(self, i: int | slice) -> Memory | list[Memory]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if self._all is not None:
            return self._all[i]
        n = self._snap.n
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        m = self._built.get(i)
        if m is None:
            m = self._built[i] = self._checked(i, self._snap.memory(i))
        return m

    def __iter__(self) -> Iterator[Memory]:
        if self._all is None:
            import gc

            paused = gc.isenabled()
            if paused:
                gc.disable()  # 100,000 memories allocated, nothing freed: as `foldsnap.current`
            try:
                snap, built = self._snap, self._built
                data = snap.records()
                self._all = [built.get(i) or self._checked(i, snap.memory(i, data)) for i in range(snap.n)]
            finally:
                if paused:
                    gc.enable()
        return iter(self._all)

    def _checked(self, pos: int, memory: Memory) -> Memory:
        """`memory` if it rests where the plan says target `pos` does (each anchor on a path the
        plan has, with this target among its owners and the hash the plan wants there)."""
        plan, snap = self._plan, self._snap
        for a in memory.anchors:
            k = plan.at.get(a.path)
            if k is None:
                raise PlanMismatch("a record rests on a file its plan does not name")
            want = plan.want[k]
            owners = snap.owners(k)
            j = bisect_left(owners, pos)
            if (want is not None and a.sha256 != want) or j == len(owners) or owners[j] != pos:
                raise PlanMismatch("a record rests elsewhere than its plan says")
        return memory


class _Planned:
    """What a workspace keeps of a snapshot plan while the ledger holds: the plan, the pass's
    plan derived from it (its folder checks kept between passes, as `drift._PLANS` keeps a
    fold's), the memories built so far, and the ids' positions once a write-back needed them."""

    __slots__ = ("snap", "plan", "memories", "marked", "_at")

    def __init__(self, root_real: str, snap: SnapPlan | OverlayPlan) -> None:
        self.snap = snap
        self.plan = plan_of_files(root_real, snap.paths, snap.want, snap.owners)
        self.memories = LazyMemories(snap, self.plan)
        for i in snap.claims:  # read by every report (`with_claims`): a mismatch is found before the pass
            self.memories[i]
        self.marked = snap.marked()
        self._at: dict[str, int] | None = None

    def position(self, mid: str) -> int | None:
        if self._at is None:
            ids = self.snap.ids
            self._at = dict(zip(ids, range(len(ids))))
        return self._at.get(mid)


def _planned(ws: Workspace) -> _Planned | None:
    held: _Planned | None = ws.__dict__.get("_planned")
    if held is not None and catchup.settled(ws.ledger, held.snap.prefix):
        return held
    ws.__dict__["_planned"] = None
    snap = foldsnap.read_plan(ws.ledger)
    if snap is None:
        return None
    try:
        planned = _Planned(ws.root_real, snap)
    except PlanMismatch:
        snap.close()
        return None
    ws.__dict__["_planned"] = planned
    return planned


def drift(ws: Workspace, progress: Callable[[int, int], None] | None = None) -> DriftReport | None:
    """`ws.drift()` from the snapshot's plan, with the same answers; None when there is no plan
    to trust (the caller takes the full fold). Writes what the full path writes: the manifest,
    and drift.json for the memories whose drift changed (`writeback.write_back`)."""
    planned = _planned(ws)
    if planned is None:
        return None
    snap = planned.snap
    checker = DriftChecker(ws.root_real, ws.cache, whitespace=str(ws.config["drift.whitespace"]))
    try:
        report = checker.check_planned(planned.plan, planned.memories, progress, claims=snap.claims,
                                       paths=snap.paths)
        changed = _changed(ws, report, planned)
    except (PlanMismatch, IndexError):  # IndexError: the plan names a target past its count
        ws.__dict__["_planned"] = None
        snap.close()  # a plan refused: no report of it is handed out
        return None
    ws.cache.save()
    ws._write_back(changed)
    return report.with_claims(planned.marked)


def _changed(ws: Workspace, report: DriftReport, planned: _Planned) -> list[MemoryDrift]:
    """The results `writeback.write_back` would take out of the whole report: the flagged ones,
    and a fresh one for each memory drift.json last found not fresh (only those are built)."""
    out = report.flagged
    known = writeback.read(ws.state_dir)[0]
    was = [mid for mid, drift in known.items() if drift != "fresh"]
    if was:
        now = {r.memory.id for r in out}
        for mid in was:
            j = planned.position(mid) if mid not in now else None
            if j is not None:
                out.append(_all_fresh(report.checked[j]))
    return out
