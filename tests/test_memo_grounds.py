"""What a memo rests on (`memo._grounds`): every anchored file and each folder on its way,
stat'ed once (the folders in walk order, then the files, matched in C against the hash cache); a folder or file that is gone recorded as absent and nothing under it
walked. Checked value for value against the walk it replaced (one `os.path.join` per part),
on nested, shared, deleted and file-versus-folder paths."""

from __future__ import annotations

import os
import random
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

import anchorfs
import anchorfs.hashing as hashing
from anchorfs import memo
from anchorfs.drift_report import DriftReport
from anchorfs.workspace import Workspace

GRAN_NS = 30_000_000


@pytest.fixture(autouse=True)
def _short_racy_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hashing, "DEFAULT_GRANULARITY_NS", GRAN_NS)
    kwdefaults = hashing.HashCache.__init__.__kwdefaults__
    assert kwdefaults is not None
    monkeypatch.setitem(kwdefaults, "granularity_ns", GRAN_NS)


def _walk(root: str, rels: list[str], limit: int) -> tuple[list[str], list[Any], list[str], dict[str, Any]]:
    """The walk `_grounds` did before: every part joined in turn."""
    paths: list[str] = []
    keys: list[Any] = []
    absent: dict[str, None] = {}
    walked: set[str] = set()
    present: dict[str, Any] = {}
    for rel in rels:
        parts = rel.split("/")
        path = root
        for i, part in enumerate(parts):
            path = os.path.join(path, part)
            last = i == len(parts) - 1
            if path in walked:
                if last or path in absent:
                    break
                continue
            walked.add(path)
            if not memo._record(path, limit, paths, keys, folder=not last):
                absent[path] = None
                break
            if last:
                present[rel] = keys[-1]
    return paths, keys, list(absent), present


class _Report(DriftReport):
    def __init__(self, rels: list[str]) -> None:
        super().__init__([])
        self._rels = rels

    def anchored_paths(self) -> list[str]:
        return list(self._rels)

    def paths_now(self) -> list[str]:
        return []


@pytest.mark.parametrize("order", ["as_given", "reversed", "shuffled-1", "shuffled-2", "shuffled-3"])
def test_the_grounds_are_the_part_by_part_walks(tmp_path: Path, order: str, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "ws"
    for rel in ["a.py", "src/b.py", "src/c.py", "src/deep/er/d.py", "src/deep/e.py", "lib/x/y.py", "both/f.py",
                "both", "gone_dir/z.py"]:
        if rel == "both":
            continue
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x = 1\n")
    anchorfs.init(root)
    with Workspace(root) as ws:
        ws.record("a ledger to rest on")
    shutil.rmtree(root / "gone_dir")
    (root / "lib" / "x" / "y.py").unlink()
    time.sleep(GRAN_NS / 1e9 * 1.5)
    rels = ["a.py", "src/b.py", "src/deep/er/d.py", "src/c.py", "gone_dir/z.py", "gone_dir/w.py", "src/deep/e.py",
            "lib/x/y.py", "missing.py", "both/f.py", "src/deep/er/d.py", "gone_dir/q/r.py"]
    if order == "reversed":
        rels.reverse()
    elif order == "as_given":
        rels.append("both")  # a folder walked on the way to a file, then anchored itself: nothing more
    else:  # each folder walked once, by whichever file comes first
        random.Random(int(order.rsplit("-", 1)[1])).shuffle(rels)
    limit = time.time_ns() - GRAN_NS
    with Workspace(root) as ws:
        seen: list[dict[str, Any]] = []

        def trusted_until(present: dict[str, Any], shas: Any = None) -> float:
            seen.append(dict(present))
            return 1e18

        monkeypatch.setattr(ws.cache, "trusted_until", trusted_until)
        got = memo._grounds(ws, _Report(rels), limit)
        assert got is not None
        paths, keys, absent, until = got
        head = memo._grounds(ws, _Report([]), limit)
        assert head is not None
        n = len(head[0])  # the ledger, the config, the code, the root: before the anchored paths
        assert paths[:n] == head[0] and keys[:n] == head[1]
        want_paths, want_keys, want_absent, present = _walk(ws.root_real, list(dict.fromkeys(rels)), limit)
        # the same stats and absences; the order is free (a replay compares path by path as
        # recorded): the folders come first, then the files, matched against the hash cache
        assert dict(zip(paths[n:], keys[n:])) == dict(zip(want_paths, want_keys))
        assert len(paths) == len(set(paths)) and len(paths[n:]) == len(want_paths)
        assert sorted(absent[len(head[2]):]) == sorted(want_absent)
        assert until == 1e18 and seen[0] == present
    assert str(root / "gone_dir") in absent and str(root / "gone_dir" / "z.py") not in absent
    assert str(root / "lib" / "x" / "y.py") in absent and str(root / "missing.py") in absent


def _anchored(tmp_path: Path, rels: list[str]) -> Path:
    """A workspace with one memory anchored to each of `rels`, hashed by a pass, all settled."""
    root = tmp_path / "ws"
    for rel in rels:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"# {rel}\n")
    anchorfs.init(root)
    time.sleep(GRAN_NS / 1e9 * 1.5)
    with Workspace(root) as ws:
        ws.record("anchored everywhere", anchors=rels)
        ws.drift()
    time.sleep(GRAN_NS / 1e9 * 1.5)
    return root


@pytest.mark.parametrize("loop", ["c", "python"])
def test_anchored_files_are_recorded_from_the_hash_cache_while_their_stat_holds(
        tmp_path: Path, loop: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file whose `lstat` (taken in the C loop) is the stat its cached hash was taken under is
    recorded from that key, never `lstat`-ed again in Python: the same grounds as the walk. A
    file rewritten since takes `_record`, which judges its new stat (here: too recent, no memo)."""
    if loop == "python":
        monkeypatch.setattr(memo, "_statmatch", None)
    rels = ["a.py", "src/b.py", "src/c.py", "src/deep/d.py"]
    root = _anchored(tmp_path, rels)
    real_record = memo._record
    asked: list[str] = []

    def record(path: str, *args: Any, **kwargs: Any) -> bool:
        asked.append(path)
        return real_record(path, *args, **kwargs)

    limit = time.time_ns() - GRAN_NS
    with Workspace(root) as ws:
        assert all(key is not None for key in ws.cache.keys_of(rels))
        head = memo._grounds(ws, _Report([]), limit)
        monkeypatch.setattr(memo, "_record", record)
        got = memo._grounds(ws, _Report(rels), limit)
        monkeypatch.setattr(memo, "_record", real_record)
        assert got is not None and head is not None
        n = len(head[0])
        want_paths, want_keys, _, present = _walk(ws.root_real, rels, limit)
        assert dict(zip(got[0][n:], got[1][n:])) == dict(zip(want_paths, want_keys))
        files = {str(Path(ws.root_real) / rel) for rel in rels}
        assert files.isdisjoint(asked) if loop == "c" else files <= set(asked)
        (root / "src" / "b.py").write_text("# rewritten\n")
        asked.clear()
        monkeypatch.setattr(memo, "_record", record)
        assert memo._grounds(ws, _Report(rels), limit) is None  # its new stat is not settled
        assert str(Path(ws.root_real) / "src" / "b.py") in asked


def test_files_the_pass_compared_are_recorded_by_that_stat_not_stat_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The anchored files the pass's hash cache compared in C since the pass began are recorded
    by the stat it judged them by (`HashCache.seen_since`), with no second stat of thousands of
    files; a file compared before the pass began, or whose comparison failed, is stat'ed again."""
    if memo._statmatch is None:
        pytest.skip("the C loop is not built here")  # pragma: no cover - built on every CI machine
    rels = ["a.py", "src/b.py", "src/c.py"]
    root = _anchored(tmp_path, rels)
    real_match = memo._statmatch.match
    matched: list[list[str]] = []

    def match(paths: list[str], packed: bytes) -> Any:
        matched.append(list(paths))
        return real_match(paths, packed)

    files = [str(Path(os.path.realpath(root)) / rel) for rel in rels]
    with Workspace(root) as ws:
        before = time.time_ns()
        report = ws.drift()
        limit = time.time_ns() - GRAN_NS
        assert set(ws.cache.seen_since(before)) == set(rels)
        assert {path for path, _ in ws.cache.seen_since(before).values()} == set(files)
        monkeypatch.setattr(memo._statmatch, "match", match)
        got = memo._grounds(ws, report, limit, started_ns=before)
        assert got is not None
        assert matched == []  # every file recorded by the pass's own comparison
        assert dict(zip(got[0], got[1])).items() >= {f: ws.cache.keys_of([r])[0] for f, r in zip(files, rels)}.items()
        again = memo._grounds(ws, report, limit, started_ns=time.time_ns())  # compared before it began
        assert again is not None and again[:3] == got[:3]
        assert [sorted(m) for m in matched] == [sorted(files)]
        matched.clear()
        (root / "src" / "b.py").write_text("# rewritten\n")
        later = time.time_ns()
        ws.drift()
        assert set(ws.cache.seen_since(later)) == {"a.py", "src/c.py"}  # b.py's comparison failed: stat it again


@pytest.mark.parametrize("rels", [["src/b.py", "src/.."], ["src/b.py", "src/."], ["src/b.py", "src/"],
                                  ["a.py", ""], ["a.py", "/a.py"], ["a.py", ".anchorfs"], ["a.py", ".."],
                                  ["src/b.py", "src//b.py"], ["src/b.py", ".anchorfs/ledger.jsonl"]])
def test_an_unplain_path_after_a_plain_one_in_its_folder_is_no_memo(tmp_path: Path, rels: list[str]) -> None:
    """Each folder is walked once, for the first file under it: a later path in the same folder
    is still judged whole (an empty, `.` or `..` last part, the state folder, a leading `/`)."""
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "a.py").write_text("x = 1\n")
    (root / "src" / "b.py").write_text("x = 2\n")
    anchorfs.init(root)
    time.sleep(GRAN_NS / 1e9 * 1.5)
    with Workspace(root) as ws:
        ws.record("both files", anchors=["a.py", "src/b.py"])
        ws.drift()
    time.sleep(GRAN_NS / 1e9 * 1.5)
    limit = time.time_ns() - GRAN_NS
    with Workspace(root) as ws:
        assert memo._grounds(ws, _Report(rels[:1]), limit) is not None
        assert memo._grounds(ws, _Report(rels), limit) is None
