"""The drift memo right after a one-shot `record` (issue 19: bench_process's warm `drift --json`).

bench_process times `anchorfs drift --json` right after five `anchorfs record` calls: the
ledger was written a few hundred milliseconds before each pass. The memo used to insist on
every stat it rests on being two seconds old (the coarse-filesystem window) even where the
filesystem keeps fine timestamps, so on a quiet machine no pass of the five left a memo and
each was a full pass (31x `python3 -c pass` at 10k instead of 2-3x). On a filesystem with
fine timestamps the window is `catchup.FINE_NS`, the one the fold snapshot and the store's
checkpoint trust the very same ledger by.

These tests keep the real default windows (no shrinking, unlike test_memo.py): the set-up
waits once for everything to settle by the two-second rule, as a workspace not written in the
last seconds is.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

import anchorfs
import anchorfs.hashing as hashing
from anchorfs import memo
from anchorfs.__main__ import main as entry
from anchorfs.catchup import FINE_NS
from anchorfs.locate import STATE_DIR
from anchorfs.workspace import Workspace

from conftest import git

PY = "def helper(x):\n    return x + 1\n\n\ndef other():\n    return 2\n"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """The `anchorfs` entry point in this process: (exit code, stdout)."""
    with pytest.raises(SystemExit) as exc:
        entry(list(args))
    code = exc.value.code
    return (code if isinstance(code, int) else 0), capsys.readouterr().out


def replays(root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    """`drift --json` with the full pass forbidden: only the memo can answer."""
    def no_pass(self: Workspace, **kw: Any) -> None:
        raise AssertionError("the full pass ran")

    with monkeypatch.context() as m:
        m.setattr(Workspace, "drift", no_pass)
        return run(capsys, "--root", str(root), "--json", "drift")


def fine(path: Path) -> bool:
    return os.lstat(path).st_ctime_ns % 1_000_000 != 0


@pytest.fixture
def settled_repo(git_repo: Path) -> Path:
    """bench_process's workspace in small: a git repo, memories anchored to its files (whole
    file and a line range), a pass run, then every file older than the two-second window."""
    root = git_repo
    (root / "src").mkdir()
    (root / "src" / "token.py").write_text(PY)
    (root / "README.md").write_text("one\ntwo\nthree\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "tree")
    anchorfs.init(root)
    with anchorfs.open(root) as ws:
        ws.record_many([{"content": "the token module", "anchors": ["src/token.py"]},
                        {"content": "the readme's lines", "anchors": ["README.md:1-3"]}])
        ws.drift()
    time.sleep(hashing.DEFAULT_GRANULARITY_NS / 1e9 + 0.2)
    return root


def test_a_drift_right_after_one_shot_records_leaves_a_memo_the_next_replays(
        settled_repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    root = settled_repo
    ledger = root / STATE_DIR / "ledger.jsonl"
    memo_file = root / STATE_DIR / memo.MEMO_FILE
    first = run(capsys, "--root", str(root), "--json", "drift")
    assert first[0] == 0 and json.loads(first[1])["fresh"] == 2
    assert memo_file.exists()  # settled: the memo held before any record, on the old code too
    assert replays(root, capsys, monkeypatch) == first
    for i in range(3):  # what bench_process times before the drift rows: one-shot records
        assert run(capsys, "--root", str(root), "record", f"bench note {i}")[0] == 0
    assert memo.replay(str(root), True) is None  # the ledger moved: the old memo does not hold
    # a new process's start-up (its imports) outlasts the fine window; a coarse filesystem's
    # two seconds are waited out
    time.sleep(FINE_NS / 1e9 * 2 if fine(ledger) else hashing.DEFAULT_GRANULARITY_NS / 1e9 + 0.2)
    code, out = run(capsys, "--root", str(root), "--json", "drift")
    assert (code, json.loads(out)["fresh"]) == (0, 2)
    assert memo_file.exists(), "the pass after the records left no memo"
    assert replays(root, capsys, monkeypatch) == (code, out)
    assert replays(root, capsys, monkeypatch) == (code, out)


def test_a_ledger_changed_within_the_fine_window_is_not_vouched_for(settled_repo: Path) -> None:
    """The window still holds: a stat changed less than FINE_NS before the pass began cannot
    prove the pass saw it as it is (the coarse clock stamps a change up to a tick early)."""
    root = settled_repo
    with anchorfs.open(root) as ws:
        ws.record("one more note")
    ledger = root / STATE_DIR / "ledger.jsonl"
    st = os.lstat(ledger)
    changed = max(st.st_mtime_ns, st.st_ctime_ns)
    with anchorfs.open(root) as ws:
        report = ws.drift()
        coarse = hashing.DEFAULT_GRANULARITY_NS

        def grounds(started_ns: int) -> Any:
            return memo._grounds(ws, report, started_ns - coarse, memo.fine_limit(started_ns))

        assert grounds(changed + FINE_NS // 2) is None  # within the fine window
        assert grounds(changed + 1) is None
        if fine(ledger):
            got = grounds(changed + FINE_NS + 1_000_000)
            assert got is not None and got[0][0] == str(ledger)  # past it: the ledger first, as replay insists
        assert grounds(changed + coarse + 1_000_000) is not None  # past the coarse window: as ever
        # without the fine limit (the hooks' digest memo passes none) the two-second rule stands
        assert memo._grounds(ws, report, changed + FINE_NS + 1_000_000 - coarse) is None


@pytest.mark.parametrize(("mtime_ns", "ctime_ns", "limit", "fine_limit", "settled"), [
    (1_500_000_123, 1_500_000_123, 1_000_000_000, 1_600_000_000, True),   # fine, before the fine limit
    (1_500_000_123, 1_700_000_123, 1_000_000_000, 1_600_000_000, False),  # fine, ctime after it
    (1_700_000_123, 1_500_000_123, 1_000_000_000, 1_600_000_000, False),  # fine, mtime after it
    (1_500_000_000, 1_500_000_000, 1_000_000_000, 1_600_000_000, False),  # whole milliseconds: the coarse limit
    (1_500_000_123, 1_500_000_000, 1_000_000_000, 1_600_000_000, False),  # a fine mtime is settable: ctime decides
    (500_000_000, 500_000_000, 1_000_000_000, 1_600_000_000, True),       # coarse, before the coarse limit
    (1_500_000_123, 1_500_000_123, 1_400_000_000, None, False),           # no fine limit given: the coarse one
])
def test_which_window_a_stat_is_judged_by(mtime_ns: int, ctime_ns: int, limit: int, fine_limit: int | None,
                                          settled: bool) -> None:
    assert memo._settled(mtime_ns, ctime_ns, limit, fine_limit) is settled
