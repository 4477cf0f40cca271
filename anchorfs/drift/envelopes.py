"""The freshness envelope: the one line, in one format everywhere, an agent reads before
trusting a memory (`[STATE · what · when — advice]`), and the age rules it states.

Imported alone by what only prints memories (the hooks' digest, `instructions`' export, the
query path's hits): it needs the model, not the drift checker.
"""

from __future__ import annotations

from datetime import datetime

from ..core.model import AnchorCheck, Drift, Memory, Verdict, utcnow

__all__ = ["envelope", "weak_envelope", "WEAK_MARK", "expired", "age_days"]


def age_days(memory: Memory, now: datetime) -> float:
    since = memory.verified_at or memory.recorded_at
    return max(0.0, (now - since).total_seconds() / 86400.0)


def expired(memory: Memory, expiry_days: float, now: datetime) -> bool:
    """Past its kind's expiry: demoted as unverified (the boundary day itself still holds)."""
    return age_days(memory, now) > expiry_days


def envelope(memory: Memory, drift: Drift, checks: tuple[AnchorCheck, ...], *,
             expiry_days: float, now: datetime | None = None, history: str | None = None,
             weak: bool = False) -> str:
    """One line an agent can read before trusting the memory, in one format everywhere:
    `[STATE · what · when — advice]`.

    `[fresh · anchored 2026-08-23 at a1b2c3d · 40 commits since]`,
    `[STALE · src/token.py#issue changed since 9f8e7d6 2026-09-02 "raise expiry" — re-verify before relying on this]`,
    `[UNKNOWN · src/x.py unreadable: permission denied — re-verify before relying on this]`,
    `[unanchored · recorded 2026-08-23]`, `[SUPERSEDED by ID on DATE · held from DATE — do not rely on this]`.
    `history` is git's word (`anchorfs.history.history_envelope`) when there is one: it only
    fills the "since" of a stale line (the commit that staled it) and the commit count of a
    fresh one. `weak` adds `weak match` (see `weak_envelope`).
    """
    line = _envelope(memory, drift, checks, expiry_days=expiry_days, now=now, history=history)
    return weak_envelope(line) if weak else line


WEAK_MARK = "weak match"


def weak_envelope(line: str) -> str:
    """`line` with `weak match` before its advice (or its closing bracket), once."""
    if f" · {WEAK_MARK}" in line or not line.endswith("]"):
        return line
    cut = line.find(" — ")
    cut = cut if cut >= 0 else len(line) - 1
    return f"{line[:cut]} · {WEAK_MARK}{line[cut:]}"


def _history_parts(history: str | None, drift: Drift) -> tuple[str | None, str | None, str | None]:
    """(stale since, fresh commit and date, fresh count) read out of git's envelope line."""
    if not history:
        return None, None, None
    if drift is Drift.STALE and history.startswith("[STALE since ") and " — " in history:
        return history[len("[STALE since "):history.index(" — ")], None, None
    if drift is Drift.FRESH and history.startswith("[fresh · anchored ") and history.endswith("]"):
        body = history[len("[fresh · anchored "):-1]
        head, _, count = body.partition(" · ")
        commit, _, date = head.partition(" ")
        return None, f"{date} at {commit}" if date else commit, count or None
    return None, None, None


def _envelope(memory: Memory, drift: Drift, checks: tuple[AnchorCheck, ...], *,
              expiry_days: float, now: datetime | None, history: str | None) -> str:
    now = now or utcnow()
    since = (memory.verified_at or memory.recorded_at).date().isoformat()
    stale_since, anchored, count = _history_parts(history if memory.status == "active" else None, drift)
    commits = {c.anchor.commit for c in checks if c.anchor.commit}
    at = f" at {sorted(commits)[0][:7]}" if len(commits) == 1 else ""
    tail = ""
    if expired(memory, expiry_days, now):
        tail = f" · unverified for {int(age_days(memory, now))} days ({memory.kind} expiry {int(expiry_days)})"
    if memory.status != "active":
        who = f" by {memory.superseded_by}" if memory.superseded_by else ""
        until = memory.valid_until.date().isoformat() if memory.valid_until else "?"
        return f"[{memory.status.upper()}{who} on {until} · held from {memory.valid_from.date().isoformat()} — do not rely on this]"
    claims = memory.stale_claims
    if drift is Drift.STALE or claims:  # prose found stale (`verify --mark`) flags it like an anchor
        bad = next((c for c in checks if c.verdict in (Verdict.CHANGED, Verdict.DELETED, Verdict.SYMBOL_MISSING)), None)
        more = f" (and {len(claims) - 1} more claim{'s' if len(claims) > 2 else ''})" if len(claims) > 1 else ""
        if bad is None and claims:
            return (f"[STALE · {claims[0].words}{more} · found by verify {claims[0].found_at.date().isoformat()}"
                    " — re-verify before relying on this]")
        if bad is None:  # pragma: no cover - a stale drift always has a stale anchor or claim
            return "[STALE — re-verify before relying on this]"
        if stale_since and stale_since.startswith("uncommitted changes"):
            when = " in uncommitted changes"
        else:
            when = f" since {stale_since or since}"
        said = f" · {claims[0].words}{more}" if claims else ""
        return f"[STALE · {bad.detail}{when}{said} — re-verify before relying on this]"
    if drift is Drift.UNKNOWN:
        bad = next(c for c in checks if c.verdict in (Verdict.UNREADABLE, Verdict.UNSAFE))
        return f"[UNKNOWN · {bad.detail} — re-verify before relying on this]"
    if not checks:
        return f"[unanchored · recorded {since}{tail}]"
    moved = [c for c in checks if c.verdict in (Verdict.MOVED, Verdict.REFORMATTED)]
    extra = f" · {_moved_words(moved[0])}" if moved else ""
    where = anchored or f"{since}{at}"
    counted = f" · {count}" if count else ""
    return f"[fresh · anchored {where}{counted}{extra}{tail}]"


def _moved_words(check: AnchorCheck) -> str:
    """A moved or reformatted anchor in a fresh envelope: "SPEC now at NEW_PATH" for another
    file, else the check's own detail."""
    if check.path_now is not None and check.path_now != check.anchor.path:
        words = f"{check.anchor.spec} now at {check.path_now}"
        return words + " (reformatted)" if check.verdict is Verdict.REFORMATTED else words
    return check.detail
