"""What history returns: one anchor's steps, a bisect's culprit, a log, a past drift report.

Frozen values, one JSON shape for the CLI, MCP and the SDK (`to_dict`, each hunk carried once)
and a few lines for a person (`describe`). A step's verdict says what that step did (`moved`
only when it moved the text); an anchor's verdict is `drift`'s, relative to the anchor. A
change later undone is not a culprit: the culprit starts the breakage still in force.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..drift import MemoryDrift
from .patch import Hunk
from .repo import WORKING_TREE, _Commit
from ..core.model import AnchorRef, Drift, Verdict, span_text

__all__ = ["_HOLDS", "_BREAKS", "Step", "AnchorHistory", "BisectResult", "LogResult", "AtResult", "AtReport"]


_HOLDS = frozenset(v for v in Verdict if v.value in ("fresh", "moved", "reformatted"))
_BREAKS = frozenset({Verdict.CHANGED, Verdict.DELETED, Verdict.SYMBOL_MISSING})


@dataclass(frozen=True, slots=True)
class Step:
    """One version of an anchored file along the walk, with the verdict that version earns."""

    commit: str
    short: str
    date: str | None
    author: str | None
    subject: str
    verdict: Verdict
    detail: str
    lines_before: tuple[int, int] | None
    """Where the anchored text stood just before this step (None when not known)."""
    lines_after: tuple[int, int] | None
    hunks: tuple[Hunk, ...] = ()
    """The hunks that matter: those hitting the anchored text (all of them for a whole file)."""
    invalidates: bool = False
    """The anchor held before this step and not after: a culprit."""
    restores: bool = False
    merge: bool = False
    renamed_to: str | None = None
    """Where git saw the anchored file renamed to in this step (the walk follows it)."""
    distance: int = 0
    """First-parent commits between this step and HEAD (HEAD is 0, the working tree -1)."""
    path: str = ""
    """The file the anchored text stands in after this step (the walk follows renames and moves)."""
    path_now: str | None = None
    """Set when this step moved the anchored text to another file: that file."""

    @property
    def cause(self) -> str | None:
        return ("deleted" if self.verdict is Verdict.DELETED else "changed") if self.invalidates else None

    @property
    def hunk(self) -> Hunk | None:
        return self.hunks[0] if self.hunks else None

    def to_dict(self, *, hunks: bool = True) -> dict[str, Any]:
        """The step as JSON. Each hunk is carried once: `hunk` is the headline (the first that
        hits the anchored text), `more_hunks` the others; `hunks=False` gives only their
        headers (`hunk_headers`), for a step whose hunks are shown elsewhere in the result."""
        out: dict[str, Any] = {
            "commit": self.commit, "short": self.short, "date": self.date, "author": self.author,
            "subject": self.subject, "verdict": self.verdict.value, "detail": self.detail, "cause": self.cause,
            "path": self.path or None, "path_now": self.path_now,
            "lines_before": list(self.lines_before) if self.lines_before else None,
            "lines_after": list(self.lines_after) if self.lines_after else None,
        }
        if hunks:
            out["hunk"] = self.hunk.to_dict() if self.hunk else None
            out["more_hunks"] = [h.to_dict() for h in self.hunks[1:]]
        else:
            out["hunk_headers"] = [h.header for h in self.hunks]
        out.update(invalidates=self.invalidates, restores=self.restores, merge=self.merge,
                   renamed_to=self.renamed_to)
        return out


def _anchor_dict(ref: AnchorRef) -> dict[str, Any]:
    return {"anchor": ref.spec, "path": ref.path, "symbol": ref.symbol, "lines": list(ref.lines) if ref.lines else None,
            "anchored_at": ref.commit, "dirty": ref.dirty}


@dataclass(frozen=True, slots=True)
class AnchorHistory:
    """One anchor's walk: every step that touched its file, and the step that broke it."""

    anchor: AnchorRef
    anchored: _Commit
    steps: tuple[Step, ...]
    verdict: Verdict
    """The verdict at the end of the walk (the working tree): what `drift` says now."""
    lines_now: tuple[int, int] | None
    walked: int
    """Steps walked: first-parent commits since the anchor's commit, plus the working tree."""
    path_now: str | None = None
    """The file the anchored text stands in now, when the walk followed it to another one."""

    @property
    def holds(self) -> bool:
        """The anchor holds now; an unreadable last version is unknown, not holding."""
        return self.verdict in _HOLDS

    @property
    def unknown(self) -> bool:
        """Neither holds nor broken now (the last version was unreadable or unsafe)."""
        return self.verdict not in _HOLDS and self.verdict not in _BREAKS

    @property
    def culprit(self) -> Step | None:
        """The step that began the current breakage (an earlier break later undone is a touch)."""
        if self.verdict not in _BREAKS:
            return None
        return next((step for step in reversed(self.steps) if step.invalidates), None)

    @property
    def touches(self) -> tuple[Step, ...]:
        """Steps before the culprit (all steps when the anchor holds): touched, not broken."""
        culprit = self.culprit
        return self.steps if culprit is None else self.steps[: self.steps.index(culprit)]

    def to_dict(self, *, with_steps: bool = False, full: bool = True) -> dict[str, Any]:
        """This anchor's walk. `full` carries its culprit's hunks and its touches here; a
        result that shows them at its top level passes False (each hunk carried once), and
        `with_steps` lists every step (the log), which then carries the hunks."""
        culprit = self.culprit
        out = _anchor_dict(self.anchor)
        out.update(
            anchored_short=self.anchored.short, anchored_date=self.anchored.date, verdict=self.verdict.value,
            holds=self.holds, unknown=self.unknown, path_now=self.path_now,
            lines_now=list(self.lines_now) if self.lines_now else None, walked=self.walked,
            culprit=_culprit_dict(self, culprit, hunks=full and not with_steps) if culprit else None,
            touched=len(self.touches),
        )
        if full and not with_steps:
            out["touches"] = [_touch_dict(self.anchor, s) for s in self.touches]
        if with_steps:
            out["steps"] = [s.to_dict(hunks=False) for s in self.steps]
        return out


def _culprit_dict(hist: AnchorHistory, step: Step, *, hunks: bool = True) -> dict[str, Any]:
    d = step.to_dict(hunks=hunks)
    d.update(anchor=hist.anchor.spec, lines=d["lines_before"], touches_before=len(hist.touches))
    return d


def _touch_dict(ref: AnchorRef, step: Step) -> dict[str, Any]:
    d = step.to_dict()
    d["anchor"] = ref.spec
    return d


@dataclass(frozen=True, slots=True)
class BisectResult:
    """Which step broke a memory: the earliest culprit among its anchors, or none (it holds)."""

    memory_id: str
    anchors: tuple[AnchorHistory, ...]

    def broken(self) -> list[tuple[AnchorHistory, Step]]:
        """Every broken anchor with its culprit, the one that broke first (furthest from HEAD) on top."""
        found = [(h, h.culprit) for h in self.anchors if h.culprit is not None]
        order = sorted(range(len(found)), key=lambda i: -found[i][1].distance)  # type: ignore[union-attr]
        return [(found[i][0], found[i][1]) for i in order]  # type: ignore[misc]

    def _culprit_pair(self) -> tuple[AnchorHistory, Step] | None:
        broken = self.broken()
        return broken[0] if broken else None

    @property
    def culprit(self) -> Step | None:
        pair = self._culprit_pair()
        return pair[1] if pair else None

    @property
    def culprit_anchor(self) -> AnchorRef | None:
        """The anchor that broke first (the culprit's), when one is broken."""
        pair = self._culprit_pair()
        return pair[0].anchor if pair else None

    @property
    def holds(self) -> bool:
        """Every anchor holds now (none broken, none unknown)."""
        return all(h.holds for h in self.anchors)

    @property
    def unknown(self) -> bool:
        """No anchor is broken but history cannot vouch for one (an unreadable step last)."""
        return self.culprit is None and any(h.unknown for h in self.anchors)

    @property
    def touches(self) -> tuple[Step, ...]:
        """Before the culprit, on the culprit's anchor; all touches of every anchor if it holds."""
        pair = self._culprit_pair()
        if pair:
            return pair[0].touches
        return tuple(s for h in self.anchors for s in h.steps)

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON, every hunk carried once: the culprit's at the top (its
        anchor's entry in `anchors` names the commit and the hunks' headers), the other
        broken anchors' under their own entry; `broken` lists them all, first broken first."""
        pair = self._culprit_pair()
        if pair:
            touches = [_touch_dict(pair[0].anchor, s) for s in pair[0].touches]
        else:
            touches = [_touch_dict(h.anchor, s) for h in self.anchors for s in h.steps]
        top = pair[0] if pair else None
        shown = {(pair[1].commit, h) for h in pair[1].hunks} if pair else set()
        entries = []
        for h in self.anchors:
            step = h.culprit
            if pair is None or h is top or step is None:
                entries.append(h.to_dict(full=False))
                continue
            fresh = [x for x in step.hunks if (step.commit, x) not in shown]
            entry = h.to_dict(full=True)
            if not fresh:  # the same hunks as a culprit shown above (one edit broke both)
                entry["culprit"] = _culprit_dict(h, step, hunks=False)
            shown.update((step.commit, x) for x in step.hunks)
            entries.append(entry)
        return {
            "id": self.memory_id, "holds": self.holds, "unknown": self.unknown,
            "culprit": _culprit_dict(*pair) if pair else None,
            "broken": [{"anchor": h.anchor.spec, "commit": st.commit, "short": st.short, "date": st.date,
                        "subject": st.subject, "cause": st.cause, "path_now": h.path_now}
                       for h, st in self.broken()],
            "touches": touches, "walked": max((h.walked for h in self.anchors), default=0), "anchors": entries,
        }

    def describe(self) -> str:
        """A few lines for a person: the culprit and its hunk, or that the memory holds."""
        pair = self._culprit_pair()
        if not self.anchors:
            return "the memory has no anchors: history has nothing to say about it"
        if pair is None:
            n = sum(len(h.steps) for h in self.anchors)
            walked = max((h.walked for h in self.anchors), default=0)
            counts = f"({walked} steps walked, {n} touched the anchored files)"
            unknown = [h for h in self.anchors if h.unknown]
            if unknown:
                h = unknown[0]
                last = next((s.detail for s in reversed(h.steps) if s.verdict is h.verdict), "")
                why = f" ({last})" if last else ""
                return (f"unknown: no step broke the memory's anchors {counts}, but "
                        f"{h.anchor.spec} is {h.verdict.value}{why}: history cannot say it holds")
            moved = [h for h in self.anchors if h.path_now]
            where = "".join(f"; {h.anchor.spec} is now in {h.path_now}" for h in moved)
            return f"the memory holds: no step broke its anchors {counts}{where}"
        hist, step = pair
        head = step.short if step.commit == WORKING_TREE else f"{step.short} {(step.date or '')[:10]}"
        who = f" {step.author}" if step.author else ""
        out = [f"culprit: {head}{who}  {step.subject}".rstrip()]
        where = f", lines {span_text(step.lines_before)} at that point" if step.lines_before else ""
        if step.path and step.path != hist.anchor.path:
            where = f", in {step.path}" + where
        out.append(f"  cause: {step.cause} ({hist.anchor.spec}{where}): {step.detail}")
        broken = self.broken()
        if len(broken) > 1:
            later = ", ".join(f"{h.anchor.spec} at {st.short}" for h, st in broken[1:])
            out.append(f"  broke first of {len(broken)} broken anchors; then {later}")
        if step.merge:
            out.append("  (a merge, diffed against its first parent)")
        for hunk in step.hunks[:3]:
            out.extend("  " + line for line in hunk.text.splitlines())
        if len(step.hunks) > 3:
            out.append(f"  ... {len(step.hunks) - 3} more hunks (--json has them)")
        n = len(hist.touches)
        out.append(f"  {n} earlier step{'s' if n != 1 else ''} touched the file without breaking the anchor")
        return "\n".join(out)


@dataclass(frozen=True, slots=True)
class LogResult:
    """Every step that touched each of a memory's anchors, with the verdict it earned."""

    memory_id: str
    anchors: tuple[AnchorHistory, ...]

    @property
    def steps(self) -> tuple[Step, ...]:
        return tuple(s for h in self.anchors for s in h.steps)

    def to_dict(self) -> dict[str, Any]:
        """Every step at the top (with the hunks); each anchor's entry lists its own (hunk headers only)."""
        return {"id": self.memory_id, "steps": [_touch_dict(h.anchor, s) for h in self.anchors for s in h.steps],
                "anchors": [h.to_dict(with_steps=True) for h in self.anchors]}


AtResult = MemoryDrift
"""One memory judged against the tree of a past revision: the same shape as a drift check."""


@dataclass(frozen=True, slots=True)
class AtReport:
    """What `drift` would have said at `rev`, for the memories that existed then."""

    rev: str
    commit: str
    short: str
    date: str | None
    results: tuple[AtResult, ...]
    skipped: int = 0
    """Memories left out: recorded after `rev` (their anchors' commits are not its ancestors)."""

    def count(self, drift: Drift) -> int:
        return sum(1 for r in self.results if r.drift is drift)

    def to_dict(self) -> dict[str, Any]:
        return {"rev": self.rev, "commit": self.commit, "short": self.short, "date": self.date,
                "checked": len(self.results), "stale": self.count(Drift.STALE), "unknown": self.count(Drift.UNKNOWN),
                "fresh": self.count(Drift.FRESH), "skipped": self.skipped,
                "memories": [r.to_dict() for r in self.results]}
