"""The session-start digest updated from its memo when the ledger only grew since it (memories
recorded, superseded, retracted, reverted during a session; `digest_memo._update`): the same output
and `drift.json` as the full digest over the same ledger and tree, byte for byte, whatever the
writes (a property test over seeded random writes mixed with file edits), and the update path
taken, not the full digest."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest

import anchorfs
import anchorfs.digest_memo as digest_memo
from anchorfs import catchup

from test_digest_update import _FILES, _FUNCS, _body, _counting, _full, _path, _rel, _state, _workspace


def _settle() -> None:
    time.sleep(catchup.FINE_NS / 1e9 + 0.05)  # past the (shortened) racy windows: the memo can be written


def test_a_recorded_memory_updates_the_digest(tmp_path: Path, short_window: None,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "ws"
    _workspace(root, 5000)
    real = os.path.realpath(root)
    updates = _counting(monkeypatch)
    _settle()
    assert digest_memo._session_start_memoized(real) == _full(real)
    _settle()
    with anchorfs.open(root) as ws:
        new = ws.record("the newest fact about f3", anchors=[f"{_rel(2)}#f3"])
    _settle()
    out = digest_memo._session_start_memoized(real)
    assert updates == [True]  # the ledger only grew: updated, not the full digest
    assert new.id in out and "fresh or unanchored" in out
    assert out == _full(real)
    assert digest_memo._replay_digest(real) == out  # the memo rewritten for the grown ledger


def test_a_superseded_stale_memory_leaves_the_updated_digest(tmp_path: Path, short_window: None,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "ws"
    _workspace(root, 5000)
    real = os.path.realpath(root)
    _path(root, 3).write_text(_body(3, {2: 9}))  # two memories stale
    _settle()
    _full(real)  # the file hashed, the hash cache saved: both settle before the memo is written
    updates = _counting(monkeypatch)
    _settle()
    first = digest_memo._session_start_memoized(real)
    assert "2 stale" in first and first == _full(real)
    stale = sorted(_state(root))
    with anchorfs.open(root) as ws:
        ws.supersede(stale[0], "f2 of file 3 now scales x by 9032", anchors=[f"{_rel(3)}#f2"])
        ws.retract(stale[1])
    _settle()
    out = digest_memo._session_start_memoized(real)
    assert updates == [True]
    assert "0 stale" in out and stale[0] not in out and stale[1] not in out
    assert out == _full(real)


_ACTIONS = ["record", "record", "record_new_file", "note", "supersede", "retract", "revert", "edit", "edit_and_record",
            "reanchor", "many"]


@pytest.mark.parametrize("seed,cap", [(11, 900), (12, 3000), (13, 500)])
def test_a_digest_updated_for_a_grown_ledger_is_the_full_digest(tmp_path: Path, short_window: None,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 seed: int, cap: int) -> None:
    root = tmp_path / "ws"
    _workspace(root, cap)
    real = os.path.realpath(root)
    updates = _counting(monkeypatch)
    _settle()
    assert digest_memo._session_start_memoized(real) == _full(real)
    rng = random.Random(seed)
    tweaks: list[dict[int, int]] = [{} for _ in range(_FILES)]
    extra = 0
    with anchorfs.open(root) as ws:
        for step in range(10):
            action = rng.choice(_ACTIONS)
            if action == "revert" and not any(m.status == "superseded" for m in ws.list()):
                action = "note"  # nothing to revert: the ledger must move all the same
            active = sorted(m.id for m in ws.list(status="active"))
            retired = sorted(m.id for m in ws.list() if m.status == "superseded")
            if action in ("edit", "edit_and_record"):
                i = rng.randrange(_FILES)
                tweaks[i][rng.randrange(_FUNCS)] = step + 1
                _path(root, i).write_text(_body(i, tweaks[i]))
            if action in ("record", "edit_and_record"):
                i, j = rng.randrange(_FILES), rng.randrange(_FUNCS)
                ws.record(f"step {step}: f{j} of file {i}", anchors=[f"{_rel(i)}#f{j}"])
            elif action == "record_new_file":
                extra += 1
                new = root / "src" / f"extra{extra}.py"
                new.write_text(f"def g(x):\n    return x - {extra}\n")
                ws.record(f"step {step}: g of extra {extra}", anchors=[f"src/extra{extra}.py#g"])
            elif action == "note":
                ws.record(f"step {step}: an unanchored note", kind=rng.choice(["note", "decision"]))
            elif action == "supersede":
                ws.supersede(rng.choice(active), f"step {step}: corrected", reason="test")
            elif action == "retract":
                ws.retract(rng.choice(active), reason="test")
            elif action == "revert" and retired:
                ws.revert(rng.choice(retired))
            elif action == "reanchor":  # stale ones among them: re-verified where the code is now
                anchored = sorted(m.id for m in ws.list(status="active") if m.anchors)
                ws.reanchor(rng.choice(anchored))
            elif action == "many":
                ws.record_many([{"content": f"step {step}: batch {n}", "anchors": [f"{_rel(n)}#f{n}"]} for n in range(3)])
            _settle()
            before = len(updates)
            out = digest_memo._session_start_memoized(real)
            drift_now = _state(root)
            assert out == _full(real), (seed, step, action)
            assert _state(root) == drift_now, (seed, step, action)  # the full pass found nothing to write back
            assert len(updates) == before + 1, (seed, step, action)  # the update was tried
    assert sum(updates) >= 7, updates  # most starts were updates, not full digests


def test_another_snapshot_is_the_full_digest(tmp_path: Path, short_window: None) -> None:
    """A fold snapshot rewritten since the memo (a full fold saved it): what the lines folded
    into it wrote is not known to the memo, so the update refuses and the full digest answers."""
    from anchorfs import foldsnap
    from anchorfs.ledger import Ledger

    root = tmp_path / "ws"
    _workspace(root, 900)
    real = os.path.realpath(root)
    _settle()
    digest_memo._session_start_memoized(real)
    with anchorfs.open(root) as ws:
        ws.record("the newest fact about f1", anchors=[f"{_rel(4)}#f1"])
    _settle()
    ledger = Ledger(root / ".anchorfs")
    assert foldsnap.save(ledger, foldsnap.current(ledger, write=False))  # the snapshot now holds that line too
    _settle()
    d = digest_memo._read_memo(real)
    assert d is not None
    changed = digest_memo._changed_grounds(d)
    assert changed and changed[0] == 0
    assert digest_memo._update(real, d, changed, time.time_ns()) is None
    assert digest_memo._session_start_memoized(real) == _full(real)
