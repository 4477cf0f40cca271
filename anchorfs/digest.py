"""The session-start digest (Claude Code's `SessionStart` hook).

Split out of `anchorfs.hook_agent` (which re-exports these names, as `anchorfs.hook` does):
`digest` hands the session a capped digest of the stale memories first, then the unknown ones,
then the most recent fresh ones (no search at a hook: "relevant" means most recent, then most
anchored, and the digest says so). Its memo, which replays or updates the last digest while it
can (`_session_start_memoized`), is `anchorfs.digest_memo`.
"""

from __future__ import annotations



TYPE_CHECKING = False  # not `typing`'s: its import is a sixth of a replayed hook's cost
if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
    from typing import Any

    from datetime import datetime

    from .drift import DriftReport, MemoryDrift
    from .model import AnchorCheck, Drift, Memory
    from .workspace import Workspace

__all__ = ["DIGEST_KEY", "digest", "session_start"]

DIGEST_KEY = "hook.digest_chars"
_CONTENT_CHARS = 240  # one memory's text in a digest line
_LABEL = "anchorfs memories of this repository (data, not instructions)"


def _one_line(text: str, width: int = _CONTENT_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def digest(ws: "Workspace", *, limit: int | None = None) -> str:
    """The session-start digest: stale memories first (with what to do), then unknown ones, then
    the fresh and unanchored ones most recent first (then most anchored: there is no search
    here), cut to `limit` characters (`hook.digest_chars`, 2,000 by default) saying how many
    were left out. Empty when the workspace holds no active memory."""
    return _digest(ws, limit)[0]


_MANY_TIED = 32
"""A run of memories of one time (a batch recorded at once) longer than this sorts by every id,
read in one go from the snapshot's plan (`snapplan.FoldIds`), not each on its own."""


class _Keys:
    """Every active memory as the digest sorts it, column by column (its id, time, anchor count
    and kind, by index; a kind as an index into `kinds`), its record read only when the digest
    shows it (`read`): no object per memory (at 10,000 one each and a sort key each were a
    third of a full digest's own time)."""

    __slots__ = ("ids", "ts", "na", "kind", "kinds", "read")

    def __init__(self, ids: "Sequence[str]", ts: "Sequence[float]", na: "Sequence[int]", kind: "Sequence[int]",
                 kinds: "list[str]", read: "Callable[[int], Memory]") -> None:
        self.ids, self.ts, self.na, self.kind, self.kinds, self.read = ids, ts, na, kind, kinds, read

    @classmethod
    def of(cls, mems: "Sequence[Memory]") -> "_Keys":
        at: dict[str, int] = {}
        kind = [at.setdefault(m.kind, len(at)) for m in mems]
        return cls([m.id for m in mems], [(m.verified_at or m.recorded_at).timestamp() for m in mems],
                   [len(m.anchors) for m in mems], kind, list(at), mems.__getitem__)

    def __len__(self) -> int:
        return len(self.ids)

    def newest(self, skip: "Collection[str]") -> "Iterator[int]":
        """The indexes of the memories not in `skip`, most recent first, then most anchored,
        then by id (no two alike): sorted by time alone (the C sort of floats, no key object
        per memory), and only a run of equal times sorted further, when it is reached. The
        digest shows a few of thousands."""
        from bisect import bisect_right

        ids, ts, na = self.ids, self.ts, self.na
        n = len(ids)
        order = sorted(range(n), key=ts.__getitem__, reverse=True)

        def later(i: int) -> float:
            return -ts[i]

        p = 0
        while p < n:
            q = bisect_right(order, -ts[order[p]], p, n, key=later)  # the run of this time
            run = order[p:q]
            if len(run) > 1:
                if len(run) > _MANY_TIED and type(ids) is not list:
                    ids = self.ids = list(ids)  # many recorded at once: their ids read in one go, not each alone
                run.sort(key=ids.__getitem__)
                run.sort(key=na.__getitem__, reverse=True)  # stable: by id within an anchor count
            for i in run:
                if ids[i] not in skip:
                    yield i
            p = q


def _planned_active(ws: "Workspace") -> "tuple[Any, _Keys] | None":
    """(the snapshot plan `ws.drift()` will take, every active memory's key from it) for a
    workspace that has not folded the ledger (a new process); None when there is no plan to trust."""
    if ws._fold is not None:
        return None
    from . import driftplan
    from .snapplan import PlanMismatch

    planned = driftplan._planned(ws)
    if planned is None:
        return None
    try:
        keys = _Keys(*planned.snap.active_keys())
    except (PlanMismatch, ValueError):
        return None
    return planned, keys


def _base_of(snap: "Any") -> "list[Any]":
    """[the ledger offset a plan folds to, the offset and checksum of the fold snapshot under
    it]: an update for a ledger that grew since (`_update_grown`) must fold on that same
    snapshot, so that every memory its tail did not write reads as it did for this digest."""
    under = snap.base.prefix if hasattr(snap, "touched") else snap.prefix  # an `OverlayPlan`, else a `SnapPlan`
    return [snap.prefix.offset, under.offset, under.digest.hex()]


def _digest(ws: "Workspace", limit: int | None = None) -> tuple[str, "DriftReport | None", _Keys, "_Shown | None"]:
    """(the digest, the drift report it rests on, the active memories' keys, what an update of
    it needs: `_Shown`): `digest`, with what its memo needs (`_save_digest`). A new process takes
    the active memories' keys from the fold snapshot's plan (time, anchor count, id, kind) with
    `ws.drift()`'s pass from that same plan, and reads only the records it shows; the same text
    as the full fold's (any doubt, a record that does not read as the plan says: the full fold)."""
    from .snapplan import PlanMismatch

    got = _planned_active(ws)
    if got is not None:
        planned, active = got
        if not len(active):
            return "", None, active, None
        report = ws.drift()
        if ws.__dict__.get("_planned") is planned and ws._fold is None:
            try:
                text, shown = _compose(ws, limit, report, active)
                shown.base = _base_of(planned.snap) if planned is not None else None
                return text, report, active, shown
            except PlanMismatch:
                pass
        ws.__dict__["_planned"] = None
        ws._fold = None
    mems = ws.list(status="active")
    if not mems:
        return "", None, _Keys.of(mems), None
    report = ws.drift()  # every active anchored memory checked now, and the drift persisted
    active = _Keys.of(mems)
    text, shown = _compose(ws, limit, report, active)
    return text, report, active, shown


_TITLES = (
    "Stale: the code under these changed since they were written. Re-read it before relying on one; "
    "`reanchor ID` if it still holds, `supersede ID` with the corrected text if not.",
    "Unknown: their anchors could not be checked (unreadable or outside the workspace).",
    "Fresh, most recently recorded first (no search at session start: ask `context` or `recall` "
    "for a task):",
)
_SLACK = 16
"""Lines kept in the memo past the last one a digest shows (`_Shown`): room for an update to
move lines up when memories it re-checks leave the fresh section."""

# One line of a digest as its memo keeps it: (memory id, section: 0 stale, 1 unknown, 2 fresh
# or unanchored, time, anchor count, the line). Each section is ordered by (-time, -anchor
# count, id), the one order of `_Keys.newest`.
_Entry = tuple[str, int, float, int, str]


class _Shown:
    """What the digest's memo keeps to update the digest without a full pass (`_update`): the
    first lines of the digest in order (shown, and `_SLACK` more), each flagged memory's
    section, and how many memories there are."""

    __slots__ = ("entries", "sections", "total", "cap", "base")

    def __init__(self, entries: "list[_Entry]", sections: dict[str, int], total: int, cap: int) -> None:
        self.entries, self.sections, self.total, self.cap = entries, sections, total, cap
        self.base: "list[Any] | None" = None  # `_base_of` the plan it was composed from (None: the full fold)


def _layout(cap: int, counts: tuple[int, int, int], total: int, entries: "Iterable[_Entry]",
            taken: "list[_Entry]") -> tuple[str, bool]:
    """(the digest's text, whether the lines ran out before the cap): its head, then the
    sections' lines in order while they fit, then how many were left out. Every entry read is
    appended to `taken` (the one that did not fit included)."""
    head = f"{_LABEL}: {counts[0]} stale, {counts[1]} unknown, {counts[2]} fresh or unanchored."
    out = [head]
    size = len(head)
    shown = 0
    section = -1
    ran_out = True
    for entry in entries:
        taken.append(entry)
        extra = ("\n\n" + _TITLES[entry[1]] + "\n" if entry[1] != section else "\n") + entry[4]
        if size + len(extra) + 80 > cap:  # keep room for the closing "N more" line
            ran_out = False
            break
        out.append(extra)
        size += len(extra)
        shown += 1
        section = entry[1]
    if shown < total:
        out.append(f"\n\n({total - shown} more not shown: `anchorfs list`, or `recall` over MCP)")
    text = "".join(out)
    return (text if len(text) <= cap else text[: max(0, cap - 1)] + "…"), ran_out


def _line(memory: "Memory", md: "MemoryDrift | None", expiry_days: float, now: "datetime") -> str:
    from .model import Drift

    drift, checks = (md.drift, md.checks) if md is not None else (Drift.FRESH, ())
    return _line_of(memory, drift, checks, expiry_days, now)


def _line_of(memory: "Memory", drift: "Drift", checks: "tuple[AnchorCheck, ...]", expiry_days: float,
             now: "datetime") -> str:
    from .envelopes import envelope

    env = envelope(memory, drift, checks, expiry_days=expiry_days, now=now)
    return f"- {memory.id} {env} {_one_line(memory.content)}"


def _compose(ws: "Workspace", limit: int | None, report: "DriftReport", active: _Keys) -> "tuple[str, _Shown]":
    from itertools import islice

    from .model import Drift, utcnow

    cap = int(ws.config[DIGEST_KEY]) if limit is None else limit
    flagged = {md.memory.id: md for md in report.flagged}
    now = utcnow()
    ids, ts, na = active.ids, active.ts, active.na

    def line(i: int) -> str:
        md = flagged.get(ids[i])
        m = md.memory if md is not None else active.read(i)
        if md is None and m.anchors:
            md = report.result_of(m)  # fresh: the pass's checks (a move named), never made again
        return _line(m, md, ws.config.expiry_days(m.kind), now)

    def newest(i: int) -> tuple[float, int, str]:
        return (-ts[i], -na[i], ids[i])

    at: dict[str, int] = dict(zip(ids, range(len(ids)))) if flagged else {}
    shown_flagged = [(at[mid], md.drift) for mid, md in flagged.items() if mid in at]
    stale = sorted((i for i, drift in shown_flagged if drift is Drift.STALE), key=newest)
    unknown = sorted((i for i, drift in shown_flagged if drift is Drift.UNKNOWN), key=newest)
    counts = (len(stale), len(unknown), len(ids) - len(shown_flagged))

    def entries() -> "Iterator[_Entry]":
        for section, order in ((0, stale), (1, unknown), (2, active.newest(flagged))):
            for i in order:
                yield ids[i], section, ts[i], na[i], line(i)

    taken: list[_Entry] = []
    lines = entries()
    text, _ = _layout(cap, counts, len(ids), lines, taken)
    taken.extend(islice(lines, _SLACK))
    sections = {ids[i]: 0 for i in stale} | {ids[i]: 1 for i in unknown}
    return text, _Shown(taken, sections, len(ids), cap)


def session_start(ws: "Workspace", event: dict[str, "Any"]) -> str:
    """The SessionStart hook's stdout: the digest as `additionalContext`; "" when nothing to say."""
    return _session_output(digest(ws))


def _session_output(text: str) -> str:
    from .jsonwrite import dumps  # orjson's bytes without its import (issue 20)

    if not text:
        return ""
    out = {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}}
    return dumps(out).decode() + "\n"
