"""The walk: each of a memory's anchors down HEAD's first-parent chain, then the working tree.

`bisect` and `log` are this walk, read for its culprit or seen whole: a handful of git processes
per anchor whatever the history's length (`rev-list` for the chain, one streaming `git log -p` of the
steps that touched the anchored file, and `cat-file --batch`). A merge is one step, diffed against
its first parent. `drift_at` reads a past revision from git's objects.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from ..anchor.anchors import MAX_FILE_BYTES, judge, nearest_now
from ..core.errors import HistoryError
from ..core.git import is_ancestor, run_git, tree_changes, worktree_changes
from ..core.model import AnchorCheck, AnchorRef, Memory, Verdict, drift_of, from_iso
from .follow import _safe_repo_path
from .patch import _Record, _stream
from .repo import _FORMAT, WORKING_TREE, _Commit, _parse_commit, _Repo
from .results import _HOLDS, AnchorHistory, AtReport, AtResult, BisectResult, LogResult, Step
from .tracker import _Tracker

__all__ = ["Progress", "bisect", "log", "progress_bar", "drift_at"]


Progress = Callable[[int, int], None]
"""Called as (steps walked, steps in all) while a walk runs."""


def _records(repo: _Repo, paths: list[str], base: str, chain: list[str], start: int,
             early: Iterator[_Record] | None = None) -> Generator[_Record, None, None]:
    """The steps `chain[start:]` that touched `paths`, oldest first, with their diffs: one `git log`
    (`early`, when started already), but a first step whose parent is not `base` (a side branch's
    merge, an older checkout) is diffed against `base` alone."""
    apart = start == 0 and (repo.blobs.info(f"{chain[0]}^") or ("",))[0] != base
    if apart:
        for rec in _stream(repo.top, paths, pairs=f"{chain[0]} {base}\n"):
            rec.meta = repo.info(rec.commit)  # its own parents, not the pair's
            yield rec
    for rec in early or _stream(repo.top, paths, repo.head, f"^{chain[start - 1] if start else base}"):
        if not apart or rec.commit != chain[0]:
            yield rec


def _walk_anchor(repo: _Repo, ref: AnchorRef, base: str, chain: list[str], tick: Callable[[int], None] | None,
                 *, fast: bool = True, early: Iterator[_Record] | None = None) -> tuple[AnchorHistory, bool]:
    """One anchor down the chain and into the working tree; (history, consistent?)."""
    rpath = repo.repo_path(ref.path)
    paths = [rpath]  # every file the walk followed the text to: what its diffs are limited to
    tracker = _Tracker(repo, ref, repo.blobs.oid(f"{base}:{rpath}"), fast=fast)
    steps: list[Step] = []
    index = {c: i for i, c in enumerate(chain)}
    start = 0
    while start < len(chain):
        moved_at: int | None = None
        stream = _records(repo, paths, base, chain, start, None if start else early)
        try:
            for rec in stream:
                i = index.get(rec.commit, -1)
                mine = rec.mine(rpath) if i >= 0 else None
                if mine is None or rec.meta is None:
                    continue
                entry, hunks, binary = mine
                oid = entry[2] if len(entry[2]) >= 40 else repo.blobs.oid(entry[2]) or entry[2]  # no index line
                follow = (partial(tree_changes, repo.top, chain[i - 1] if i else base, chain[i]), repo.load)
                step = tracker.step(rec.meta, len(chain) - 1 - i, (entry[0], entry[1], oid), hunks, binary,
                                    partial(repo.blobs.get, oid),
                                    size=repo.blobs.size(oid) if binary or hunks is None else None, follow=follow)
                steps.append(step)
                if tick is not None:
                    tick(i + 1)
                rpath = repo.repo_path(tracker.ref.path)
                if rpath not in paths:  # moved to a file this stream does not show: another one from here
                    paths.append(rpath)
                    moved_at = i
                    break
        finally:
            stream.close()
        if moved_at is None:
            break
        start = moved_at + 1
    wt = tracker.working_tree()
    if wt is not None:
        steps.append(wt)
    if tracker.verdict is Verdict.DELETED and tracker.state is False:
        back = _recover(repo, tracker, base, chain)
        if back is not None:
            steps.append(back)
    if tick is not None:
        tick(len(chain) + 1)
    moved = tracker.ref.path if tracker.ref.path != ref.path and tracker.verdict not in (
        Verdict.DELETED, Verdict.UNREADABLE, Verdict.UNSAFE) else None
    hist = AnchorHistory(anchor=ref, anchored=repo.info(base), steps=tuple(steps), verdict=tracker.verdict,
                         lines_now=tracker.span if tracker.state and tracker.verdict in _HOLDS else None,
                         walked=len(chain) + 1, path_now=moved)
    return hist, tracker.consistent()


def _recover(repo: _Repo, tracker: _Tracker, base: str, chain: list[str]) -> Step | None:
    """A file deleted with no trace at that step may have come back later under another name:
    `drift` would find it there, so history looks once, at the end of the walk, and names the
    commit that brought it back (or the working tree) as a restoring `moved` step."""
    found = tracker._relocate(worktree_changes(repo.top, base), tracker._read_disk)
    if found is None or found[0].verdict not in _HOLDS:
        return None
    judged, path, _, _ = found
    rpath = repo.repo_path(path)
    out = run_git(repo.top, "log", "--first-parent", "-1", "--diff-filter=A", f"--format={_FORMAT}",
                  repo.head, f"^{base}", "--", ":(literal)" + rpath, check=False).strip()
    index = {c: i for i, c in enumerate(chain)}
    meta = _parse_commit(out.splitlines()[0]) if out else None
    if meta is not None and meta.commit in index:
        distance = len(chain) - 1 - index[meta.commit]
    else:  # not in a commit yet: the working tree brought it back
        meta, distance = _Commit(WORKING_TREE, WORKING_TREE, None, None, "uncommitted changes"), -1
    tracker.ref = replace(tracker.orig, path=path)
    tracker.state, tracker.verdict = True, Verdict.MOVED
    tracker.span = judged.where
    return Step(
        commit=meta.commit, short=meta.short, date=meta.date, author=meta.author, subject=meta.subject,
        verdict=Verdict.MOVED, detail=f"{judged.detail}, brought back after {tracker.orig.path} was deleted",
        lines_before=None, lines_after=judged.where, restores=True, merge=len(meta.parents) > 1,
        distance=distance, path=path, path_now=path,
    )


def _walk(repo: _Repo, memory: Memory, progress: Progress | None) -> tuple[AnchorHistory, ...]:
    for ref in memory.anchors:
        if not ref.commit:
            raise HistoryError(f"anchor {ref.spec} of memory {memory.id} has no commit: it was recorded outside git")
    bases: list[str] = []
    for ref in memory.anchors:
        assert ref.commit is not None
        try:
            bases.append(repo.resolve(ref.commit, what="commit"))
        except HistoryError:
            raise HistoryError(
                f"anchor {ref.spec} was taken at {ref.commit[:12]}, which is not in this repository") from None
    # the first anchor's diffs come while rev-list lists the chain
    early = _stream(repo.top, [repo.repo_path(memory.anchors[0].path)], repo.head, f"^{bases[0]}") if (
        bases and bases[0] != repo.head) else None
    chains = {base: repo.chain(base) for base in dict.fromkeys(bases)}
    plans = [(ref, base, chains[base]) for ref, base in zip(memory.anchors, bases)]
    total = sum(len(chain) + 1 for _, _, chain in plans)
    results: list[AnchorHistory] = []
    done = 0
    for ref, base, chain in plans:
        tick = None
        if progress is not None:
            offset = done
            tick = lambda n, offset=offset: progress(offset + n, total)  # noqa: E731
        hist, consistent = _walk_anchor(repo, ref, base, chain, tick, early=None if done else early)
        if not consistent:  # a carried symbol verdict went wrong somewhere: parse every step
            hist, _ = _walk_anchor(repo, ref, base, chain, None, fast=False)
        results.append(hist)
        done += len(chain) + 1
    return tuple(results)


def bisect(root: Path, memory: Memory, *, progress: Progress | None = None,
           top: Path | None = None) -> BisectResult:
    """The step that broke each anchor of `memory`, the earliest one on top. `top`: the repo's top
    level, when known. HistoryError when `root` is not in git or an anchor has no (known) commit."""
    with _Repo(Path(root), top=top) as repo:
        return BisectResult(memory.id, _walk(repo, memory, progress))


def log(root: Path, memory: Memory, *, progress: Progress | None = None) -> LogResult:
    """Every step that touched each anchor of `memory`, with the verdict it earned."""
    with _Repo(Path(root)) as repo:
        return LogResult(memory.id, _walk(repo, memory, progress))


@contextmanager
def progress_bar(*, label: str = "walking history", min_steps: int = 200,
                 console: Any = None) -> Iterator[Progress]:
    """A `progress` callback drawing a bar on stderr, for the CLI's long walks: silent below
    `min_steps` steps or when stderr is not a terminal. `console` (a rich Console) is for tests."""
    state: dict[str, Any] = {}

    def update(done: int, total: int) -> None:
        bar = state.get("bar")
        if bar is None:
            if total < min_steps or "off" in state:
                return
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn
            from rich.progress import Progress as Bar

            out = console or Console(stderr=True)
            if not out.is_terminal:
                state["off"] = True
                return
            bar = Bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      console=out, transient=True)
            bar.start()
            state["bar"], state["task"] = bar, bar.add_task(label, total=total)
        bar.update(state["task"], completed=done, total=total)

    try:
        yield update
    finally:
        if state.get("bar") is not None:
            state["bar"].stop()


# -- `at REV`: what `drift` would have said at a past revision

def drift_at(root: Path, memories: Iterable[Memory], rev: str) -> AtReport:
    """What `drift` would have said at `rev` for the memories that existed then: every anchor's
    commit is an ancestor of it (inclusive), or with no anchors (or anchors recorded outside
    git), the memory was recorded by `rev`'s date."""
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
    if verdict is Verdict.CHANGED and ref.lines and not ref.symbol and ref.commit and ref.dirty is False:
        verdict, detail, where = nearest_now(ref, data, repo.blobs.get(f"{ref.commit}:{repo.repo_path(ref.path)}"), detail)
    if verdict is Verdict.SYMBOL_MISSING or (verdict is Verdict.CHANGED and ref.lines and not ref.symbol):
        return _follow_at(repo, ref, commit, AnchorCheck(ref, verdict, detail))
    return AnchorCheck(ref, verdict, detail, where)


def _follow_at(repo: _Repo, ref: AnchorRef, commit: str, lost: AnchorCheck) -> AnchorCheck:
    """Where a lost anchor's content stands at `commit`, searched as a walk step searches."""
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
