"""Drift follows files (issue 19): a whole-workspace pass costs one `lstat` per distinct file and
folder, whatever the number of memories on them, and what it derives from the memories (the
plan) is kept between passes, rebuilt when the memories change, and never lets a folder that
became a link through: that is checked on every pass."""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import anchorfs
import anchorfs.drift.check as drift_mod
import anchorfs.drift.hashcache as hashing_mod
from anchorfs.drift import DriftChecker, DriftReport
from anchorfs.drift.hashcache import HashCache
from anchorfs.core.model import Drift, Memory, Verdict, new_id

pytestmark = pytest.mark.usefixtures("no_racy_window")

FOLDERS = ("app", "app/core", "lib")
FILES = [f"{d}/m{i}.py" for d in FOLDERS for i in range(4)]  # 12 files in 3 folders
PER_FILE = 6  # 72 memories: above the size from which a plan is kept (`_PLAN_MIN`)


def backdate(path: Path) -> None:
    old = os.stat(path).st_mtime_ns - 3600 * 10**9
    os.utime(path, ns=(old, old))


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[anchorfs.Workspace]:
    root = tmp_path / "ws"
    for rel in FILES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"def f():\n    return {rel!r}\n")
        backdate(root / rel)
    anchorfs.init(root)
    with anchorfs.open(root) as w:
        w.record_many([{"content": f"fact {k} of {rel}", "anchors": [rel if k % 2 else f"{rel}#f"]}
                       for rel in FILES for k in range(PER_FILE)])
        yield w


def targets(ws: anchorfs.Workspace) -> list[Memory]:
    """What `ws.drift()` checks, as it checks them."""
    return [m for m in ws._memories().values() if m.status == "active" and m.anchors]


def plan(ws: anchorfs.Workspace) -> object:
    return drift_mod._plan_of(ws.root_real, targets(ws))


def one_by_one(ws: anchorfs.Workspace) -> dict[str, tuple[Drift, list[Verdict]]]:
    """Every memory checked on its own by a fresh checker: what the batch pass must agree with."""
    checker = DriftChecker(ws.root_real, HashCache(ws.cache.manifest_path))
    return {m.id: (md.drift, [c.verdict for c in md.checks]) for m in targets(ws) for md in [checker.check(m)]}


def of(report: DriftReport) -> dict[str, tuple[Drift, list[Verdict]]]:
    return {md.memory.id: (md.drift, [c.verdict for c in md.checks]) for md in report.memories}


def flagged(report: DriftReport) -> dict[str, Drift]:
    return {md.memory.id: md.drift for md in report.flagged}


def test_a_pass_lstats_each_file_once_however_many_memories_rest_on_it(
        ws: anchorfs.Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    """5,000 memories on 12 files: a warm pass is 12 file `lstat`s and one per folder, not one
    per memory (nor one per file per batch of memories). Counted in the pure-Python loop (the
    C loop's `lstat`s are not visible from Python; both give the same verdicts)."""
    base = targets(ws)
    many = [dataclasses.replace(base[i % len(base)], id=new_id()) for i in range(5000)]
    ws.drift()  # the manifest holds every file
    monkeypatch.setattr(hashing_mod, "_statmatch", None)
    cache = HashCache(ws.cache.manifest_path)
    DriftChecker(ws.root_real, cache).check_all(many)
    calls: list[str] = []
    real = os.lstat

    def counting(path: object, *a: object, **k: object) -> os.stat_result:
        calls.append(str(path))
        return real(path, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "lstat", counting)
    report = DriftChecker(ws.root_real, cache).check_all(many)
    monkeypatch.setattr(os, "lstat", real)
    assert (report.count(Drift.FRESH), report.flagged) == (5000, [])
    assert sorted(calls) == sorted([f"{ws.root_real}/{p}" for p in (*FILES, *FOLDERS)])
    assert cache.hashes == 0


def test_the_plan_is_kept_between_passes_and_rebuilt_when_the_memories_change(ws: anchorfs.Workspace) -> None:
    first = ws.drift()
    kept = plan(ws)
    assert (first.count(Drift.FRESH), first.flagged) == (len(FILES) * PER_FILE, [])
    assert ws.drift().count(Drift.FRESH) == len(FILES) * PER_FILE
    assert plan(ws) is kept  # the same memories: nothing derived again

    (ws.root / "lib" / "new.py").write_text("def g():\n    return 1\n")
    added = ws.record("g returns one", anchors=["lib/new.py#g"])
    report = ws.drift()
    assert plan(ws) is not kept  # another set of memories: planned afresh
    assert report.count(Drift.FRESH) == len(FILES) * PER_FILE + 1 and added.id in {m.id for m in report.checked}
    kept = plan(ws)

    old = next(m for m in targets(ws) if m.anchors[0].path == "app/m0.py" and m.anchors[0].symbol is None)
    new = ws.supersede(old.id, "app/m0 is now about lib/new.py", anchors=["lib/new.py"])
    report = ws.drift()
    assert plan(ws) is not kept
    ids = {m.id for m in report.checked}
    assert new.id in ids and old.id not in ids and report.flagged == []
    assert of(report) == one_by_one(ws)
    kept = plan(ws)

    (ws.root / "app" / "core" / "m1.py").write_text("def f():\n    return 'edited'\n")  # both kinds of anchor stale
    on_it = {m.id for m in targets(ws) if m.anchors[0].path == "app/core/m1.py"}
    for _ in range(3):  # a stale memory stays stale on every pass, and the rest stay fresh
        report = ws.drift()
        assert plan(ws) is kept  # the same memories: only a stat moved
        assert flagged(report) == dict.fromkeys(on_it, Drift.STALE)
        assert of(report) == one_by_one(ws)


def test_two_anchors_on_one_file_that_disagree_on_its_hash_are_judged_each(ws: anchorfs.Workspace) -> None:
    """One memory recorded before an edit, one after: the file's hash is the second one's only,
    so the pass judges that file's memories one anchor at a time."""
    ws.drift()
    path = ws.root / "lib" / "m2.py"
    stale = {m.id for m in targets(ws) if m.anchors[0].path == "lib/m2.py"}  # f's body changes too
    path.write_text("def f():\n    return 'two'\n")
    backdate(path)
    after = ws.record("lib/m2 returns two", anchors=["lib/m2.py"])
    for _ in range(2):
        report = ws.drift()
        assert flagged(report) == dict.fromkeys(stale, Drift.STALE)
        assert of(report) == one_by_one(ws) and of(report)[after.id] == (Drift.FRESH, [Verdict.FRESH])


@pytest.mark.parametrize("c_loop", [True, False])
def test_a_folder_swapped_for_a_link_is_caught_on_every_pass(
        ws: anchorfs.Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, c_loop: bool) -> None:
    """The folder's files keep their inodes and stats when the folder is moved out and linked
    back: only the folder check tells. A kept plan remembers the folders' stats from the last
    pass that judged them; a swapped folder is another inode, so it is judged again, every pass."""
    if not c_loop:
        monkeypatch.setattr(hashing_mod, "_statmatch", None)
    for _ in range(2):
        assert ws.drift().flagged == []
    kept = plan(ws)
    folder, away = ws.root / "app" / "core", tmp_path / "outside-core"
    under = {m.id for m in targets(ws) if m.anchors[0].path.startswith("app/core/")}
    folder.rename(away)
    folder.symlink_to(away, target_is_directory=True)
    for _ in range(3):
        report = ws.drift()
        assert plan(ws) is kept
        assert flagged(report) == dict.fromkeys(under, Drift.UNKNOWN)
        assert {c.verdict for m in report.flagged for c in m.checks} == {Verdict.UNSAFE}
        assert of(report) == one_by_one(ws)
    folder.unlink()  # the link inside the root, to a copy inside: followed, judged by its bytes
    shutil.copytree(away, ws.root / "core-copy", copy_function=shutil.copy2)
    folder.symlink_to(ws.root / "core-copy", target_is_directory=True)
    for _ in range(2):
        report = ws.drift()
        assert of(report) == one_by_one(ws)
        assert report.count(Drift.UNKNOWN) == 0
    folder.unlink()
    away.rename(folder)  # the very folder back: fresh again
    for _ in range(2):
        report = ws.drift()
        assert report.flagged == [] and report.count(Drift.FRESH) == len(FILES) * PER_FILE


def test_a_folder_gone_and_then_a_link_in_its_place_is_caught(ws: anchorfs.Workspace, tmp_path: Path) -> None:
    """A pass that finds a folder gone remembers it gone; a link that appears there later is
    judged, not skipped."""
    ws.drift()
    folder, away = ws.root / "lib", tmp_path / "outside-lib"
    under = {m.id for m in targets(ws) if m.anchors[0].path.startswith("lib/")}
    folder.rename(away)
    for _ in range(2):
        assert set(flagged(ws.drift())) == under  # deleted: stale
    folder.symlink_to(away, target_is_directory=True)
    for _ in range(2):
        report = ws.drift()
        assert flagged(report) == dict.fromkeys(under, Drift.UNKNOWN)
        assert of(report) == one_by_one(ws)
