"""`at REV`: what `drift` would have said at a past revision, read from git's objects alone.

Each memory that existed at the revision is judged against that revision's tree (blobs through
`cat-file`, never the disk); an anchor whose file is gone there or whose symbol is missing is
followed to where its content went since the anchor's commit, as `drift` follows it on disk.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..anchor.anchors import MAX_FILE_BYTES, judge
from ..core.errors import HistoryError
from ..core.git import is_ancestor, tree_changes
from .follow import _safe_repo_path
from .repo import _Repo
from .results import AtReport, AtResult
from .tracker import _Tracker
from ..core.model import AnchorCheck, AnchorRef, Memory, Verdict, drift_of, from_iso

__all__ = [
    "drift_at",
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
    tracker = _Tracker(repo, ref, repo.blobs.oid(f"{base}:{repo.repo_path(ref.path)}"))
    if tracker.state is not True:
        return lost  # the anchored text is not in its own commit: nothing to look for

    moved = tracker._relocate(tree_changes(repo.top, base, commit), repo.load)
    if moved is None:
        return lost
    judged, path, _, _ = moved
    return AnchorCheck(ref, judged.verdict, judged.detail, judged.where, path)
