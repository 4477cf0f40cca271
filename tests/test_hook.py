"""The git post-commit hook on a real repo: install/uninstall hygiene, what a commit reports."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import git

import anchorfs
from anchorfs.hook import BEGIN, END, committed_paths, hook_path, install, is_installed, uninstall
from anchorfs.watch import read_events

TOKEN = """class TokenIssuer:
    def issue(self, user):
        return sign(user, hours=24)

    def revoke(self, token):
        return None
"""


def commit(repo: Path, message: str) -> subprocess.CompletedProcess[str]:
    """`git commit -a` with the hook running; returns the process (hook output is on stderr)."""
    env = dict(os.environ, GIT_AUTHOR_NAME="T", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="T", GIT_COMMITTER_EMAIL="t@example.com")
    git(repo, "add", "-A")
    proc = subprocess.run(["git", "commit", "-q", "-m", message], cwd=repo, env=env,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture
def repo(git_repo: Path) -> Path:
    (git_repo / "auth").mkdir()
    (git_repo / "auth" / "token.py").write_text(TOKEN)
    (git_repo / "README.md").write_text("hello\n")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-qm", "initial")
    anchorfs.init(git_repo)
    return git_repo


def test_install_creates_an_executable_hook_and_twice_is_harmless(repo: Path) -> None:
    path, changed = install(repo)
    assert changed and path == repo / ".git" / "hooks" / "post-commit"
    text = path.read_text()
    assert text.startswith("#!/bin/sh\n") and BEGIN in text and END in text
    assert f"{sys.executable} -m anchorfs.cli hook run --root {repo}" in text
    assert path.stat().st_mode & stat.S_IXUSR
    assert is_installed(repo)
    assert install(repo) == (path, False)
    assert path.read_text() == text
    assert uninstall(repo) == (path, True)
    assert not path.exists()  # we created it, nothing else was in it
    assert uninstall(repo) == (path, False)
    assert not is_installed(repo)


def test_commit_reports_the_memories_it_made_stale(repo: Path) -> None:
    with anchorfs.open(repo) as ws:
        stale = ws.record("token expiry is 24 hours", anchors=["auth/token.py#TokenIssuer.issue"])
        kept = ws.record("revoke is a no-op", anchors=["auth/token.py#TokenIssuer.revoke"])
        ws.record("readme greets", anchors=["README.md"])
    install(repo)

    (repo / "auth" / "token.py").write_text(TOKEN.replace("hours=24", "hours=12"))
    out = commit(repo, "shorter tokens").stderr
    assert "anchorfs: this commit made 1 memory stale:" in out
    assert f"{stale.id}  auth/token.py#TokenIssuer.issue changed  · token expiry is 24 hours" in out
    assert kept.id not in out
    events = read_events(anchorfs.open(repo))
    assert [(e["id"], e["from"], e["to"], e["source"]) for e in events] == [(stale.id, "fresh", "stale", "hook")]
    assert events[0]["detail"] == "auth/token.py#TokenIssuer.issue changed"

    # a commit that touches nothing anchored says nothing and logs nothing
    (repo / "other.txt").write_text("x\n")
    assert "anchorfs" not in commit(repo, "unrelated").stderr
    # nor does one that touches the file again while the memory is already stale
    (repo / "auth" / "token.py").write_text(TOKEN.replace("hours=24", "hours=6"))
    assert "anchorfs" not in commit(repo, "shorter still").stderr
    # putting the code back makes it fresh again, and says so
    (repo / "auth" / "token.py").write_text(TOKEN)
    out = commit(repo, "revert").stderr
    assert f"anchorfs: {stale.id} is fresh again" in out
    assert [e["to"] for e in read_events(anchorfs.open(repo))] == ["stale", "fresh"]


def test_an_existing_hook_is_kept_and_still_runs(repo: Path) -> None:
    path = repo / ".git" / "hooks" / "post-commit"
    original = "#!/bin/bash\necho user-hook-ran >> \"$(git rev-parse --show-toplevel)/.git/hook.log\"\nexit 0\n"
    path.write_text(original)
    path.chmod(0o755)
    with anchorfs.open(repo) as ws:
        m = ws.record("readme greets", anchors=["README.md"])
    assert install(repo) == (path, True)
    text = path.read_text()
    assert text.startswith("#!/bin/bash\n" + BEGIN)  # before the user's `exit 0`
    assert text.endswith(original.split("\n", 1)[1])

    (repo / "README.md").write_text("bye\n")
    out = commit(repo, "bye").stderr
    assert m.id in out
    assert (repo / ".git" / "hook.log").read_text() == "user-hook-ran\n"

    assert uninstall(repo) == (path, True)
    assert path.read_text() == original


def test_a_non_shell_hook_is_left_alone(repo: Path) -> None:
    path = repo / ".git" / "hooks" / "post-commit"
    path.write_text("#!/usr/bin/env python3\nprint('hi')\n")
    with pytest.raises(anchorfs.WorkspaceError, match="not a shell script; add this line to it yourself"):
        install(repo)
    assert path.read_text() == "#!/usr/bin/env python3\nprint('hi')\n"


def test_hooks_path_and_two_workspaces_in_one_repo(repo: Path) -> None:
    git(repo, "config", "core.hooksPath", ".githooks")
    sub = repo / "service"
    sub.mkdir()
    (sub / "app.py").write_text("PORT = 80\n")
    anchorfs.init(sub, nested=True)
    path, _ = install(repo)
    assert path == repo / ".githooks" / "post-commit"
    assert install(sub) == (path, True)
    assert is_installed(repo) and is_installed(sub)
    with anchorfs.open(sub) as ws:
        m = ws.record("port is 80", anchors=["app.py"])
    commit(repo, "service")  # app.py added: still fresh, nothing to say

    (sub / "app.py").write_text("PORT = 8080\n")
    out = commit(repo, "port").stderr
    assert f"{m.id}  app.py changed" in out
    assert committed_paths(sub) == ["app.py"]  # relative to the workspace, not the repo

    assert uninstall(sub) == (path, True)
    assert is_installed(repo) and not is_installed(sub)
    text = path.read_text()
    assert str(sub) not in text and f"--root {repo} " in text


def test_the_hook_never_fails_a_commit(repo: Path) -> None:
    install(repo)
    os.rename(repo / ".anchorfs", repo / "moved-away")
    (repo / "README.md").write_text("bye\n")
    out = commit(repo, "no workspace any more").stderr
    assert "anchorfs: hook:" in out and "not an anchorfs workspace" in out
    proc = subprocess.run([sys.executable, "-m", "anchorfs.cli", "hook", "run", "--root", str(repo)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0


def test_install_outside_git_is_one_clear_error(tmp_path: Path) -> None:
    anchorfs.init(tmp_path)
    with pytest.raises(anchorfs.WorkspaceError, match="not in a git repository"):
        hook_path(tmp_path)


def test_cli_install_and_uninstall(repo: Path) -> None:
    def cli(*args: str) -> str:
        proc = subprocess.run([sys.executable, "-m", "anchorfs.cli", *args, "--root", str(repo)],
                              capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    hook = repo / ".git" / "hooks" / "post-commit"
    assert cli("hook", "install") == f"installed: {hook}\n"
    assert cli("hook", "install") == f"already installed: {hook}\n"
    assert cli("hook", "uninstall") == f"removed from {hook}\n"
    assert not hook.exists()
