"""History: when, in which commit and by whom a memory's ground moved.

A content hash says an anchor no longer holds; version control can say which step broke it.
`bisect` walks HEAD's first-parent chain from the commit each anchor was taken at, then the
working tree, carrying the anchored lines down through every diff of the anchored file: an edit
above a span moves it, only an edit inside it (or a deletion) invalidates it. `log` is the same
walk seen whole, `drift_at` is what `drift` would have said at a revision, `history_envelope`
turns both into the one-line freshness envelope. The culprit's headline hunk is one that hits
the anchored text, and a result carries each hunk once.

Why the git binary and not a library: pygit2 (a native wheel) and dulwich (a pure-Python diff)
are not dependencies, and the binary already does the costly part, tree and blob diffs, in C.
A walk costs a handful of processes per anchor whatever the history's length: one
`rev-list --first-parent` (the steps and their metadata), one streaming
`diff-tree --stdin -p -U0` fed every (step, previous step) pair and limited to the one path (git
skips untouched commits in C and prints zero-context hunks for the rest), and one long-lived
`cat-file --batch` for the few blobs a verdict needs (symbols, content re-checks). No process
per commit. Explicit (step, previous step) pairs make a merge one step, diffed against its
first parent, and let an anchor taken on a side branch start at the merge that brought it in.

Renames are followed by rename detection in the walk, not `git log --follow` (one path per
log, heuristics that misbehave with `--first-parent`): at a step that loses the anchored text
(its file gone, its symbol missing), one `diff-tree -M` of that step says where it went: the
file git renamed ours to, else a file the step added, copied or renamed holding the text
intact (the same bytes, the same symbol, the same lines). Found, the step is `moved` (with
`path_now`) and the stream restarts on the new file; a rename whose text differs is the
culprit, `changed` at its new path. So the culprit is the commit that changed or removed the
content, never one that only moved it. The working tree is searched the same way (staged
renames, untracked files), and `drift_at` follows a rename made between the anchor's commit
and the revision. A step's verdict says what that step did (`moved` only when it moved the
text); the walk's verdict is `drift`'s, relative to the anchor.

The walk's verdict at every step is the one `judge` would give that version of the file, so
`bisect` never contradicts `drift`: hunks that miss the tracked span prove the text identical;
when a hunk hits it, the content is re-judged, so a span moved as a block is still found.
Symbols are re-parsed only at steps whose hunks hit the symbol or a definition enclosing it, or
mention one of its names; the rest carry the verdict, and the last version is parsed to check
that carry (a disagreement, e.g. a syntax error far away, re-walks the anchor parsing every
step). A change later undone is not a culprit: the culprit starts the breakage still in force.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from .anchors import MAX_FILE_BYTES, judge
from .errors import AnchorfsError, HistoryError
from .git import head_commit, is_ancestor, toplevel, tree_changes
from .history_patch import Hunk
from .history_repo import WORKING_TREE, _Blobs, _Commit, _Repo, _commit_info, _count_since
from .history_results import AnchorHistory, AtReport, AtResult, BisectResult, LogResult, Step
from .history_tracker import _Tracker, _intact, _safe_repo_path
from .history_walk import Progress, bisect, log, progress_bar
from .model import AnchorCheck, AnchorRef, Drift, Memory, Verdict, drift_of, from_iso

__all__ = [
    "WORKING_TREE",
    "Progress",
    "Hunk",
    "Step",
    "AnchorHistory",
    "BisectResult",
    "LogResult",
    "AtResult",
    "AtReport",
    "bisect",
    "log",
    "drift_at",
    "history_envelope",
    "progress_bar",
]


def drift_at(root: Path, memories: Iterable[Memory], rev: str) -> AtReport:
    """What `drift` would have said at `rev` for the memories that existed then.

    A memory existed at `rev` when every anchor's commit is an ancestor of it (inclusive); one
    with no anchors, or anchors recorded outside git, when it was recorded by `rev`'s date.
    The caller chooses which snapshots to pass (e.g. the active ones, or those as of a time).
    """
    with _Repo(Path(root)) as repo:
        commit = repo.resolve(rev)
        meta = repo.info(commit)
        when_c = from_iso(meta.committed or meta.date)
        known: dict[str, bool] = {}

        def existed(ref_commit: str) -> bool:
            if ref_commit not in known:
                try:
                    full = repo.resolve(ref_commit, what="commit")
                    known[ref_commit] = is_ancestor(repo.top, full, commit)
                except HistoryError:
                    known[ref_commit] = False
            return known[ref_commit]

        results: list[AtResult] = []
        skipped = 0
        for memory in memories:
            commits = [a.commit for a in memory.anchors]
            if memory.anchors and all(commits):
                ok = all(existed(c) for c in commits if c)
            else:
                ok = when_c is not None and memory.recorded_at <= when_c
            if not ok:
                skipped += 1
                continue
            checks = tuple(_check_at(repo, ref, commit, meta.short) for ref in memory.anchors)
            results.append(AtResult(memory, drift_of([c.verdict for c in checks]), checks))
        return AtReport(rev, commit, meta.short, meta.date, tuple(results), skipped)


def _check_at(repo: _Repo, ref: AnchorRef, commit: str, short: str) -> AnchorCheck:
    """`ref` judged at its path as of `commit`; when its file is gone there or its symbol is
    missing, followed to where the content went since the anchor's commit (a rename, a
    directory move, a split: `git diff-tree -M` between the two), as `drift` follows it."""
    if not _safe_repo_path(ref.path):
        return AnchorCheck(ref, Verdict.UNSAFE, f"{ref.path} is not a safe workspace path")
    spec = f"{commit}:{repo.repo_path(ref.path)}"
    size = repo.blobs.size(spec)  # checked before a byte is read
    if size is None:
        return _follow_at(repo, ref, commit, AnchorCheck(ref, Verdict.DELETED, f"{ref.path} does not exist at {short}"))
    if size > MAX_FILE_BYTES:
        return AnchorCheck(ref, Verdict.UNREADABLE,
                           f"{ref.path} is too large at {short} ({size} bytes, over {MAX_FILE_BYTES})")
    data = repo.blobs.get(spec)
    if data is None:  # pragma: no cover - gone between two questions to the same git process
        return AnchorCheck(ref, Verdict.UNREADABLE, f"{ref.path} could not be read at {short}")
    verdict, detail, where = judge(ref, data)
    if verdict is Verdict.SYMBOL_MISSING:
        return _follow_at(repo, ref, commit, AnchorCheck(ref, verdict, detail))
    return AnchorCheck(ref, verdict, detail, where)


def _follow_at(repo: _Repo, ref: AnchorRef, commit: str, lost: AnchorCheck) -> AnchorCheck:
    """Where a lost anchor's content stands at `commit`: what changed between the anchor's
    commit and it, renames detected, searched as a walk step searches (`_Tracker._relocate`)."""
    if not ref.commit:
        return lost
    try:
        base = repo.resolve(ref.commit, what="commit")
    except HistoryError:
        return lost
    found = repo.blobs.info(f"{base}:{repo.repo_path(ref.path)}")
    tracker = _Tracker(repo, ref, found[0] if found is not None and found[1] == "blob" else None)
    if tracker.state is not True:
        return lost  # the anchored text is not in its own commit: nothing to look for

    def blob(_path: str, oid: str) -> bytes | None:
        size = repo.blobs.size(oid)
        return None if size is None or size > MAX_FILE_BYTES else repo.blobs.get(oid)

    moved = tracker._relocate(tree_changes(repo.top, base, commit), blob)
    if moved is None:
        return lost
    judged, path, _, _ = moved
    return AnchorCheck(ref, judged.verdict, judged.detail, judged.where, path)


def history_envelope(
    root: Path,
    memory: Memory,
    drift: Drift,
    *,
    result: BisectResult | None = None,
    top: Path | None = None,
    head: str | None = None,
) -> str | None:
    """The freshness envelope with history; None when git cannot say (the caller falls back).

    `[fresh · anchored a1b2c3d 2026-08-23 · 40 commits since]`,
    `[STALE since 9f8e7d6 2026-09-02 "raise token expiry" — do not rely on this]`.
    A stale memory costs a bisect unless `result` is given; never raises. A caller serving
    many hits passes the repo's `top` and `head`, looked up once, instead of twice per hit.
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
