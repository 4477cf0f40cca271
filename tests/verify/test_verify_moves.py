"""verify and drift share the move rules (issue 38, item 9): a claim about a path that git saw
renamed names the new path and is not stale; a path gone with no rename still is."""

from __future__ import annotations

from pathlib import Path

from conftest import git

import anchorfs
from anchorfs.core.model import Drift


def make(repo: Path) -> str:
    git(repo, "init", "-q", "-b", "main")
    (repo / "src").mkdir()
    (repo / "src" / "auth.py").write_text("def login():\n    return True\n")
    (repo / "src" / "other.py").write_text("X = 1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "start")
    anchorfs.init(repo)
    with anchorfs.open(repo) as ws:
        return ws.record("login lives in src/auth.py", anchors=["src/auth.py#login"]).id


def test_a_git_mv_is_followed_by_verify_as_by_drift(tmp_path: Path) -> None:
    memory_id = make(tmp_path)
    git(tmp_path, "mv", "src/auth.py", "src/login.py")
    with anchorfs.open(tmp_path) as ws:
        assert ws.check(ws.get(memory_id)).drift is Drift.FRESH  # drift follows the rename
        result = next(r for r in ws.verify(mark=True).results if r.id == memory_id)
        assert result.verdict is Drift.FRESH, result
        assert "src/login.py" in result.claims[0].detail
        assert ws.get(memory_id).stale_claims == ()


def test_the_rename_committed_is_followed_too(tmp_path: Path) -> None:
    memory_id = make(tmp_path)
    git(tmp_path, "mv", "src/auth.py", "src/login.py")
    git(tmp_path, "commit", "-qm", "rename")
    with anchorfs.open(tmp_path) as ws:
        result = next(r for r in ws.verify().results if r.id == memory_id)
        assert result.verdict is Drift.FRESH and "src/login.py" in result.claims[0].detail


def test_a_path_deleted_for_good_is_still_stale(tmp_path: Path) -> None:
    memory_id = make(tmp_path)
    git(tmp_path, "rm", "-q", "src/auth.py")
    with anchorfs.open(tmp_path) as ws:
        result = next(r for r in ws.verify().results if r.id == memory_id)
        assert result.verdict is Drift.STALE and "does not exist" in result.claims[0].detail
