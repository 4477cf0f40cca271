from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing a test does may leak into the real home or cache, or read the developer's env."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for key in list(os.environ):
        if key.startswith("ANCHORFS_"):
            monkeypatch.delenv(key)


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Run git with a fixed identity; returns stdout."""
    full_env = dict(os.environ)
    full_env.update(
        GIT_AUTHOR_NAME="Test Author",
        GIT_AUTHOR_EMAIL="author@example.com",
        GIT_COMMITTER_NAME="Test Author",
        GIT_COMMITTER_EMAIL="author@example.com",
    )
    if env:
        full_env.update(env)
    return subprocess.run(
        ["git", *args], cwd=cwd, env=full_env, check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    """An empty git repo with a fixed identity."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    return root


@pytest.fixture
def no_racy_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Trust hashes of files written before the check began (granularity 0), in this process.

    The racy rule judges the later of mtime and ctime, and a test can backdate an mtime but never
    a ctime: without this, every file a test has just written stays racy for the default two
    seconds and is re-hashed. Tests of the racy rule itself pass `granularity_ns` explicitly.
    """
    import anchorfs.hashing as hashing

    monkeypatch.setattr(hashing, "DEFAULT_GRANULARITY_NS", 0)
    kwdefaults = hashing.HashCache.__init__.__kwdefaults__
    assert kwdefaults is not None
    monkeypatch.setitem(kwdefaults, "granularity_ns", 0)
