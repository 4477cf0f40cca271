"""The session-start digest updated from its memo (`digest_memo._update`) when only anchored files
changed: the same output, `drift.json` and hash cache as the full digest over the same tree,
whatever the edits (a property test over seeded random edits, reverts, rewrites of the same
bytes, deletes and re-creates)."""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

import pytest

import anchorfs
import anchorfs.digest as digest
import anchorfs.digest_memo as digest_memo
from anchorfs import catchup, foldsnap
from anchorfs.ledger import Ledger
from anchorfs.workspace import Workspace

_FILES = 6
_FUNCS = 6


def _body(i: int, tweaks: dict[int, int]) -> str:
    return "".join(f"def f{j}(x):\n    return x * {i * 10 + j + 1000 * tweaks.get(j, 0)}\n\n" for j in range(_FUNCS))


def _workspace(root: Path, cap: int) -> None:
    (root / "src" / "deep").mkdir(parents=True)
    for i in range(_FILES):
        _path(root, i).write_text(_body(i, {}))
    anchorfs.init(root)
    (root / ".anchorfs.toml").write_text(f"[hook]\ndigest_chars = {cap}\n")
    items: list[dict[str, object]] = []
    for i in range(_FILES):
        rel = _path(root, i).relative_to(root).as_posix()
        for j in range(_FUNCS):
            items.append({"content": f"f{j} of file {i} scales x by {i * 10 + j}", "anchors": [f"{rel}#f{j}"]})
        items.append({"content": f"lines of file {i}", "anchors": [f"{rel}:1-2"], "kind": "constraint"})
        items.append({"content": f"all of file {i}", "anchors": [rel]})
    items.append({"content": "two files at once", "anchors": [f"{_rel(0)}#f1", f"{_rel(1)}#f2"]})
    items += [{"content": f"an unanchored note {n}"} for n in range(3)]
    with anchorfs.open(root) as ws:
        ws.record_many(items[: len(items) // 2])
        time.sleep(0.01)  # two recording times: the fresh section is ordered by time, then anchors, then id
        ws.record_many(items[len(items) // 2:])
    # the fold snapshot the update reads the re-checked memories from (a small ledger has none:
    # `foldsnap.MIN_LINES`; the update then leaves it to the full digest)
    time.sleep(catchup.FINE_NS / 1e9 + 0.02)
    ledger = Ledger(root / ".anchorfs")
    assert foldsnap.save(ledger, foldsnap.current(ledger, write=False))
    time.sleep(catchup.FINE_NS / 1e9 + 0.02)  # the ledger settled on its stat


def _rel(i: int) -> str:
    return f"src/m{i}.py" if i % 2 else f"src/deep/m{i}.py"


def _path(root: Path, i: int) -> Path:
    return root / _rel(i)


def _state(root: Path) -> dict[str, str]:
    """drift.json's memories that are not fresh (an entry "fresh" and none mean the same)."""
    file = root / ".anchorfs" / "drift.json"
    drift = json.loads(file.read_text())["drift"] if file.exists() else {}
    return {k: v for k, v in drift.items() if v != "fresh"}


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Every `_update` call's outcome from now on (an update made, or None: the full digest)."""
    updates: list[bool] = []
    update = digest_memo._update

    def counted(*args: object, **kwargs: object) -> str | None:
        got = update(*args, **kwargs)  # type: ignore[arg-type]
        updates.append(got is not None)
        return got

    monkeypatch.setattr(digest_memo, "_update", counted)
    return updates


def _full(real: str) -> str:
    """The digest a full pass gives for the tree as it is (no memo read, none written)."""
    with Workspace(Path(real)) as ws:
        return digest._session_output(digest._digest(ws)[0])


@pytest.mark.parametrize("seed,cap", [(1, 700), (2, 1500), (3, 400), (4, 5000)])
def test_an_updated_digest_is_the_full_digest(tmp_path: Path, short_window: None, monkeypatch: pytest.MonkeyPatch,
                                              seed: int, cap: int) -> None:
    root = tmp_path / "ws"
    _workspace(root, cap)
    real = os.path.realpath(root)
    updates = _counting(monkeypatch)
    time.sleep(0.05)
    assert digest_memo._session_start_memoized(real) == _full(real)
    rng = random.Random(seed)
    tweaks: list[dict[int, int]] = [{} for _ in range(_FILES)]
    for step in range(14):
        i = rng.randrange(_FILES)
        action = rng.choice(["edit", "edit", "revert", "same", "comment", "delete"])
        path = _path(root, i)
        if action == "edit":
            tweaks[i][rng.randrange(_FUNCS)] = step + 1
            path.write_text(_body(i, tweaks[i]))
        elif action == "revert":
            tweaks[i] = {}
            path.write_text(_body(i, tweaks[i]))
        elif action == "same":
            path.write_bytes(path.read_bytes())
        elif action == "comment":
            path.write_text(_body(i, tweaks[i]) + f"# note {step}\n")
        else:  # deleted, then back on the next start's tree: a path gone is the full digest
            path.unlink()
            time.sleep(0.05)
            out = digest_memo._session_start_memoized(real)
            assert out == _full(real), (seed, step, action)
            path.write_text(_body(i, tweaks[i]))
        time.sleep(0.05)  # past the racy window: the new stats settle and the memo can be written again
        before = len(updates)
        out = digest_memo._session_start_memoized(real)
        drift_now = _state(root)
        assert out == _full(real), (seed, step, action)
        assert _state(root) == drift_now, (seed, step, action)  # the full pass found nothing to write back
        assert len(updates) > before or action == "delete"  # a changed anchored file: the update was tried
    assert sum(updates) >= 8, updates  # most starts were updates, not full digests


def test_an_update_writes_what_the_full_digest_writes(tmp_path: Path, short_window: None) -> None:
    root = tmp_path / "ws"
    _workspace(root, 700)
    real = os.path.realpath(root)
    time.sleep(0.05)
    digest_memo._session_start_memoized(real)
    _path(root, 3).write_text(_body(3, {2: 9}))  # f2 of file 3, the lines 1-2 untouched: two memories stale
    time.sleep(0.05)
    d = digest_memo._read_memo(real)
    assert d is not None
    changed = digest_memo._changed_grounds(d)
    assert changed and [d["paths"][i] for i in changed] == [str(_path(root, 3))]
    out = digest_memo._update(real, d, changed, time.time_ns())
    assert out is not None and "2 stale" in out
    stale = _state(root)
    with anchorfs.open(root) as ws:
        by_text = {m.id: m.content for m in ws.list()}
    assert sorted(by_text[k] for k in stale) == ["all of file 3", "f2 of file 3 scales x by 32"]
    assert digest_memo._replay_digest(real) == out  # the memo rewritten: the next start replays it
    assert _full(real) == out


def test_what_an_update_cannot_place_is_the_full_digest(tmp_path: Path, short_window: None) -> None:
    root = tmp_path / "ws"
    _workspace(root, 700)
    real = os.path.realpath(root)
    time.sleep(0.05)
    digest_memo._session_start_memoized(real)
    (root / ".anchorfs.toml").write_text("[hook]\ndigest_chars = 900\n")  # the config: not an anchored path
    _path(root, 1).write_text(_body(1, {0: 1}))
    time.sleep(0.05)
    d = digest_memo._read_memo(real)
    assert d is not None
    changed = digest_memo._changed_grounds(d)
    assert changed is not None and len(changed) == 2
    assert digest_memo._update(real, d, changed, time.time_ns()) is None
    assert digest_memo._session_start_memoized(real) == _full(real)
    with anchorfs.open(root) as ws:  # drift.json moved on for a memory the update would not re-check
        m = next(m for m in ws.list() if m.content == "all of file 4")
    digest_memo._session_start_memoized(real)
    time.sleep(0.05)
    digest_memo._session_start_memoized(real)  # memoized again
    drift_file = root / ".anchorfs" / "drift.json"
    data = json.loads(drift_file.read_text())
    data["drift"][m.id] = "stale"
    drift_file.write_text(json.dumps(data))
    _path(root, 2).write_text(_body(2, {1: 3}))
    time.sleep(0.05)
    d = digest_memo._read_memo(real)
    assert d is not None
    changed = digest_memo._changed_grounds(d)
    assert changed and digest_memo._update(real, d, changed, time.time_ns()) is None


def test_an_update_on_a_grown_ledger_leaves_its_check_for_the_next_hook(tmp_path: Path, short_window: None) -> None:
    """The memories on the changed file come from the snapshot's index with the lines written
    since folded in; the ledger prefix checksummed for that is left in `fold.tail`
    (`on_paths(remember=True)`, as the edit hooks do), so the next hook does not checksum it again."""
    root = tmp_path / "ws"
    _workspace(root, 700)
    real = os.path.realpath(root)
    with anchorfs.open(root) as ws:
        ws.record("a note written after the snapshot")  # the ledger grows past the snapshot
    time.sleep(catchup.FINE_NS / 1e9 + 0.05)
    digest_memo._session_start_memoized(real)
    tail = root / ".anchorfs" / "fold.tail"
    assert not tail.exists()  # the full digest folds through the workspace, which leaves none
    _path(root, 3).write_text(_body(3, {2: 9}))
    time.sleep(0.05)
    d = digest_memo._read_memo(real)
    assert d is not None
    changed = digest_memo._changed_grounds(d)
    out = digest_memo._update(real, d, changed, time.time_ns())
    assert out is not None and "2 stale" in out and out == _full(real)
    assert tail.exists()
