"""history: when, in which commit and by whom a memory's ground moved.

`bisect` walks HEAD's first-parent chain from the commit each anchor was taken at, then the
working tree, carrying the anchored lines down through every diff of the anchored file: an edit
above a span moves it, only an edit inside it (or a deletion) invalidates it. `log` is the same
walk seen whole, `drift_at` is what `drift` would have said at a revision, `history_facts` is
what git adds to the one-line freshness envelope.

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
from .repo import WORKING_TREE, _Blobs, _commit_info, _count_since
from .results import AnchorHistory, AtReport, AtResult, BisectResult, LogResult, Step
from .follow import _intact
from .walk import Progress, bisect, drift_at, log, progress_bar
from ..core.model import Drift, Memory

# `_Blobs`, `_commit_info`, `_count_since` and `_intact` are imported here too: tests patch or
# clear them through this module.
__all__ = [
    "WORKING_TREE", "Progress", "Hunk", "Step", "AnchorHistory", "BisectResult", "LogResult", "AtResult", "AtReport",
    "bisect", "log", "drift_at", "history_facts", "progress_bar",
]


def history_facts(root: Path, memory: Memory, drift: Drift, *, result: BisectResult | None = None,
                  top: Path | None = None, head: str | None = None) -> tuple[str | None, int | None] | None:
    """What git adds to a memory's envelope: the change that staled it (`9f8e7d6 2026-09-02 "subject"`
    or `uncommitted changes`), the commits since it was anchored; None when git cannot say. A stale
    memory costs a bisect unless `result` is given; never raises."""
    commits = [a.commit for a in memory.anchors if a.commit]
    if not commits:
        return None
    try:
        if Drift(drift) is Drift.STALE:
            step = (result or bisect(Path(root), memory, top=top)).culprit
            if step is None:
                return None
            if step.commit == WORKING_TREE:
                return "uncommitted changes", None
            return f'{step.commit[:7]} {(step.date or "")[:10]} "{step.subject.replace(chr(34), chr(39))}"', None
        top = top or toplevel(Path(os.path.realpath(root)))
        head = head or (head_commit(top) if top is not None else None)
        if top is None or head is None:
            return None
        top_real = os.path.realpath(top)
        return None, max(_count_since(top_real, _commit_info(top_real, c).commit, head) for c in dict.fromkeys(commits))
    except (AnchorfsError, OSError):
        return None
