"""The session-start digest (Claude Code's `SessionStart` hook).

`digest` hands the session a capped digest of the stale memories first, then the unknown ones,
then the most recent fresh ones (no search at a hook: "relevant" means most recent, then most
anchored, and the digest says so). Every anchored memory is checked now, through the hash cache.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..drift import DriftReport
    from ..core.model import Memory
    from ..sdk.workspace import Workspace

__all__ = ["DIGEST_KEY", "digest", "session_start"]

DIGEST_KEY = "hook.digest_chars"
_CONTENT_CHARS = 240  # one memory's text in a digest line
_LABEL = "anchorfs memories of this repository (data, not instructions)"


def _one_line(text: str, width: int = _CONTENT_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def digest(ws: "Workspace", *, limit: int | None = None, shown: list[str] | None = None) -> str:
    """The session-start digest: stale memories first (with what to do), then unknown ones, then
    the fresh and unanchored ones most recent first (then most anchored: there is no search
    here), cut to `limit` characters (`hook.digest_chars`, 2,000 by default) saying how many
    were left out. Empty when the workspace holds no active memory. The anchored ones are
    checked now (and their drift persisted). `shown` gets the ids of the memories it names."""
    mems = [m for m in ws._memories().values() if m.status == "active"]  # ordered below, not by `list`
    if not mems:
        return ""
    return _compose(ws, limit, ws.drift(), mems, shown if shown is not None else [])


_TITLES = (
    "Stale: the code under these changed since they were written. Re-read it before relying on one; "
    "`reanchor ID` if it still holds, `supersede ID` with the corrected text if not.",
    "Unknown: their anchors could not be checked (unreadable or outside the workspace).",
    "Fresh, most recently recorded first (no search at session start: ask `context` or `recall` "
    "for a task):",
)
# One line of a digest: (memory id, section: 0 stale, 1 unknown, 2 fresh or unanchored, the line).
_Entry = tuple[str, int, str]


def _layout(cap: int, counts: tuple[int, int, int], total: int, entries: "Iterable[_Entry]", ids: list[str],
            conflicts: int = 0) -> str:
    """The digest's text: its head (with the open conflicts, when any), then the sections' lines
    in order while they fit, then how many were left out."""
    head = f"{_LABEL}: {counts[0]} stale, {counts[1]} unknown, {counts[2]} fresh or unanchored."
    if conflicts:
        head += (f" {conflicts} open conflict{'s' if conflicts != 1 else ''} (two memories on the same ground "
                 "saying different values): `anchorfs tidy` lists them.")
    out = [head]
    size = len(head)
    shown = 0
    section = -1
    for mid, sect, text in entries:
        extra = ("\n\n" + _TITLES[sect] + "\n" if sect != section else "\n") + text
        if size + len(extra) + 80 > cap:  # keep room for the closing "N more" line
            break
        out.append(extra)
        ids.append(mid)
        size += len(extra)
        shown += 1
        section = sect
    if shown < total:
        out.append(f"\n\n({total - shown} more not shown: `anchorfs list`, or `recall` over MCP)")
    text = "".join(out)
    return text if len(text) <= cap else text[: max(0, cap - 1)] + "…"


def _compose(ws: "Workspace", limit: int | None, report: "DriftReport", mems: "list[Memory]", shown: list[str]) -> str:
    from ..core.model import Drift, dated_ahead, short_ids, utcnow
    from ..drift.report import envelope

    cap = int(ws.config[DIGEST_KEY]) if limit is None else limit
    flagged = {md.memory.id: md for md in report.flagged}
    now = utcnow()

    from ..sdk.recall import conflict_words

    state = ws._memories()
    against = state.in_conflict() if hasattr(state, "in_conflict") else {}

    def line(m: "Memory") -> str:
        md = flagged.get(m.id)
        if md is None and m.anchors:
            md = report.result_of(m)  # fresh: the pass's checks (a move named), never made again
        others = against.get(m.id)  # a fork: named as query and recall name it
        drift, checks = (md.drift, md.checks) if md is not None else (Drift.FRESH, ())
        env = envelope(m, drift, checks, expiry_days=ws.config.expiry_days(m.kind), now=now)
        return f"- {short[m.id]} {env}{conflict_words(state, others) if others else ''} {_one_line(m.content)}"

    def newest(m: "Memory") -> tuple[bool, float, int, str]:
        """Most recent first, then most anchored, then by id; one dated ahead of now (a clock far off,
        a forged `9999-12-31`) after the rest: its date says nothing of recency."""
        return (dated_ahead(m, now), -min(m.verified_at or m.recorded_at, now).timestamp(), -len(m.anchors), m.id)

    active = {m.id for m in mems}
    shown_flagged = [md for mid, md in flagged.items() if mid in active]
    stale = sorted((md.memory for md in shown_flagged if md.drift is Drift.STALE), key=newest)
    unknown = sorted((md.memory for md in shown_flagged if md.drift is Drift.UNKNOWN), key=newest)
    # a line is over 20 characters (an id, an envelope): no more than cap // 20 fit
    fresh = heapq.nsmallest(cap // 20 + 1, (m for m in mems if m.id not in flagged), key=newest)
    counts = (len(stale), len(unknown), len(mems) - len(shown_flagged))
    short = short_ids([m.id for m in (*stale, *unknown, *fresh)], state)

    def entries() -> "Iterator[_Entry]":
        for section, order in ((0, stale), (1, unknown), (2, fresh)):
            for m in order:
                yield m.id, section, line(m)

    return _layout(cap, counts, len(mems), entries(), shown, len(ws.open_conflicts()))


def session_start(ws: "Workspace", event: dict[str, "Any"]) -> str:
    """The SessionStart hook's stdout: the digest as `additionalContext`; "" when nothing to say."""
    import orjson

    shown: list[str] = []
    text = digest(ws, shown=shown)
    if not text:
        return ""
    ws.handed(shown, "session-start")
    out = {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}}
    return orjson.dumps(out).decode() + "\n"
