"""`anchorfs init` refused writes nothing: not `.anchorfs/`, not `.gitattributes`, not git's
config or `info/attributes`, not a host's files. The team mode's checks (`team.check_mode`),
the hosts' and the MCP config's run before the state folder is made; a refusal used to come
after it, leaving a new `.anchorfs/` (and the merge driver in `.git/config`) behind."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest


from conftest import git, run_cli, tree_snapshot

OUTSIDE = b"* text=auto\n"


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A git repository with one commit and no `.anchorfs/`, beside a file outside it."""
    repo = tmp_path / "clone"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "app.py").write_text("x = 1\n")
    git(repo, "add", "app.py")
    git(repo, "commit", "-q", "-m", "one")
    (tmp_path / "outside").write_bytes(OUTSIDE)
    return repo


@pytest.mark.parametrize("mode", [(), ("--shared",)], ids=["default", "shared"])
@pytest.mark.parametrize("target", ["outside", "/dev/zero"])
def test_init_refused_for_a_linked_gitattributes_writes_nothing(
        mode: tuple[str, ...], target: str, clone: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (clone / ".gitattributes").symlink_to(tmp_path / "outside" if target == "outside" else target)
    before = tree_snapshot(tmp_path)
    code, err = run_cli(capsys, "init", *mode, "--root", str(clone))
    assert code == 1 and err.count("\n") == 1 and err.startswith("anchorfs: error: ") and ".gitattributes" in err, err
    assert not os.path.lexists(clone / ".anchorfs")
    assert tree_snapshot(tmp_path) == before  # nor .git/config (the driver), nor info/attributes, nor the target


def test_init_refused_for_a_linked_info_attributes_writes_nothing(
        clone: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    info = clone / ".git" / "info"
    info.mkdir(exist_ok=True)
    (info / "attributes").unlink(missing_ok=True)
    (info / "attributes").symlink_to(tmp_path / "outside")
    before = tree_snapshot(tmp_path)
    code, err = run_cli(capsys, "init", "--shared", "--root", str(clone))
    assert code == 1 and err.count("\n") == 1 and "attributes" in err, err
    assert not os.path.lexists(clone / ".anchorfs") and not os.path.lexists(clone / ".gitattributes")
    assert tree_snapshot(tmp_path) == before


def test_init_shared_outside_git_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    code, err = run_cli(capsys, "init", "--shared", "--root", str(plain))
    assert code == 1 and err.count("\n") == 1 and "not in a git repository" in err, err
    assert list(plain.iterdir()) == []


@pytest.mark.parametrize("args", [("--for", "claude"), ("--mcp",)], ids=["for-claude", "mcp"])
def test_init_refused_for_a_linked_host_config_writes_nothing(
        args: tuple[str, ...], clone: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (clone / ".mcp.json").symlink_to(tmp_path / "outside")
    before = tree_snapshot(tmp_path)
    code, err = run_cli(capsys, "init", *args, "--root", str(clone))
    assert code == 1 and err.count("\n") == 1 and ".mcp.json" in err, err
    assert not os.path.lexists(clone / ".anchorfs") and not os.path.lexists(clone / ".gitattributes")
    assert tree_snapshot(tmp_path) == before


def test_init_that_succeeds_still_writes_every_file(clone: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The checks moved earlier, not away: a clean clone gets the state folder, the attribute
    line, the local driver and the host's files in one `init --shared --for claude`."""
    code, err = run_cli(capsys, "init", "--shared", "--for", "claude", "--root", str(clone))
    assert code == 0, err
    assert (clone / ".anchorfs" / ".gitignore").is_file()
    assert "merge=union" in (clone / ".gitattributes").read_text()
    assert "anchorfs" in subprocess.run(["git", "config", "--local", "--get-regexp", "merge\\."], cwd=clone,
                                        capture_output=True, text=True, check=True).stdout
    assert (clone / ".mcp.json").is_file() and (clone / "CLAUDE.md").is_file()


def test_init_never_writes_through_a_link_planted_at_a_temp_name(
        clone: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The attributes files were written through `.gitattributes.anchorfs.PID.tmp`, a name a
    crafted clone can plant a link at (the pid is small and guessable): the write went to the
    link's target, and the rename made `.gitattributes` that link."""
    planted = [clone / f".gitattributes.anchorfs.{os.getpid()}.tmp",
               clone / ".git" / "info" / f".attributes.anchorfs.{os.getpid()}.tmp"]
    planted[1].parent.mkdir(exist_ok=True)
    for link in planted:
        link.symlink_to(tmp_path / "outside")
    code, err = run_cli(capsys, "init", "--shared", "--root", str(clone))
    assert code == 0, err
    assert (tmp_path / "outside").read_bytes() == OUTSIDE
    for path in (clone / ".gitattributes", clone / ".git" / "info" / "attributes"):
        assert not path.is_symlink() and "merge=" in path.read_text()
    assert all(link.is_symlink() for link in planted)  # left as they were
