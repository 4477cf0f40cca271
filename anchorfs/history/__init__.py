"""history: when, in which commit and by whom a memory's ground moved.

`bisect` walks HEAD's first-parent chain from the commit each anchor was taken at, then the
working tree, carrying the anchored lines down through every diff of the anchored file: an edit
above a span moves it, only an edit inside it (or a deletion) invalidates it. `log` is the same
walk seen whole, `drift_at` is what `drift` would have said at a revision, `history_envelope`
turns both into the one-line freshness envelope (it lives here).

Modules: `repo` (commits, blobs), `patch` (git's zero-context diffs, parsed), `results` (what a
walk returns), `follow` (where a step's lost text went), `tracker` (one anchor carried down the
walk), `walk` (`bisect`, `log`, `drift_at`). Imports `core`, `anchor` and `drift`.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..core.errors import AnchorfsError
from ..core.git import head_commit, toplevel
from .patch import Hunk
from .repo import WORKING_TREE, _Blobs, _Commit, _commit_info, _count_since
from .results import AnchorHistory, AtReport, AtResult, BisectResult, LogResult, Step
from .follow import _intact
from .walk import Progress, bisect, drift_at, log, progress_bar
from ..core.model import Drift, Memory

# `_Blobs`, `_commit_info`, `_count_since` and `_intact` are imported here too: tests patch or
# clear them through this module.
__all__ = [
    "WORKING_TREE", "Progress", "Hunk", "Step", "AnchorHistory", "BisectResult", "LogResult", "AtResult", "AtReport",
    "bisect", "log", "drift_at", "history_envelope", "progress_bar",
]


def history_envelope(root: Path, memory: Memory, drift: Drift, *, result: BisectResult | None = None,
                     top: Path | None = None, head: str | None = None) -> str | None:
    """The freshness envelope with history; None when git cannot say (the caller falls back),
    e.g. `[STALE since 9f8e7d6 2026-09-02 "raise token expiry" — do not rely on this]`.
    A stale memory costs a bisect unless `result` is given; never raises. A caller serving
    many hits passes the repo's `top` and `head`, looked up once.
    """
    commits = [a.commit for a in memory.anchors if a.commit]
    if not commits:
        return None
    try:
        drift = Drift(drift)
        if drift is Drift.STALE:
            result = result or bisect(Path(root), memory, top=top)
            step = result.culprit
            if step is None:
                return "[STALE — do not rely on this]"
            if step.commit == WORKING_TREE:
                return "[STALE since uncommitted changes in the working tree — do not rely on this]"
            subject = step.subject.replace('"', "'")
            return f'[STALE since {step.short} {(step.date or "")[:10]} "{subject}" — do not rely on this]'
        if top is None:
            top = toplevel(Path(os.path.realpath(root)))
            if top is None:
                return None
        if head is None:
            head = head_commit(top)
            if head is None:
                return None
        best: tuple[int, _Commit] | None = None
        for c in dict.fromkeys(commits):
            assert c is not None
            info = _commit_info(os.path.realpath(top), c)
            n = _count_since(os.path.realpath(top), info.commit, head)
            if best is None or n > best[0]:
                best = (n, info)
        assert best is not None
        n, info = best
        since = f"{n} commit{'s' if n != 1 else ''} since"
        body = f"anchored {info.short} {(info.date or '')[:10]} · {since}"
        if drift is Drift.UNKNOWN:
            return f"[unknown · {body} — check before relying on this]"
        return f"[fresh · {body}]"
    except (AnchorfsError, OSError):
        return None
