"""Thin git plumbing: the few facts anchorfs needs from a repo, through the `git` binary.

The binary rather than a library: it is on every developer machine, reads every repo format
(packs, worktrees, partial clones) exactly as the user's git does, and costs nothing to import.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .errors import HistoryError

__all__ = ["run_git", "git_env", "popen_git", "toplevel", "head_commit", "dirty_paths", "is_ancestor"]


def git_env() -> dict[str, str]:
    """A stable, non-interactive environment: no optional locks, C locale, no pager or prompt."""
    env = dict(os.environ)
    env.setdefault("GIT_OPTIONAL_LOCKS", "0")
    env["LC_ALL"] = "C"
    env["GIT_TERMINAL_PROMPT"] = "0"
    env.pop("GIT_PAGER", None)
    return env


def popen_git(cwd: Path, *args: str, stdin: int | None = subprocess.PIPE) -> subprocess.Popen[bytes]:
    """A streaming git process (binary pipes) for commands whose output is read as it comes."""
    try:
        return subprocess.Popen(
            ["git", *args], cwd=cwd, env=git_env(), stdin=stdin,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
    except FileNotFoundError as exc:  # no git on this machine
        raise HistoryError("git is not installed") from exc


def _command(args: tuple[str, ...]) -> str:
    """The subcommand, past any leading `-c key=value` options, for error messages."""
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] == "-c" else 1
    return args[i] if i < len(args) else (args[0] if args else "")


def run_git(cwd: Path, *args: str, check: bool = True, input: bytes | None = None) -> bytes:
    """Run git with a stable, non-interactive environment; stdout as bytes."""
    env = git_env()
    try:
        proc = subprocess.run(
            ["git", *args], cwd=cwd, env=env, input=input, capture_output=True, check=False
        )
    except FileNotFoundError as exc:  # no git on this machine
        raise HistoryError("git is not installed") from exc
    if check and proc.returncode != 0:
        msg = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise HistoryError(f"git {_command(args)} failed: {msg[-1] if msg else proc.returncode}")
    return proc.stdout


def toplevel(root: Path) -> Path | None:
    """The enclosing repo's top level, or None when `root` is not in a git work tree."""
    probe = root
    while True:
        if (probe / ".git").exists():
            break
        if probe.parent == probe:
            return None
        probe = probe.parent
    out = run_git(root, "rev-parse", "--show-toplevel", check=False).strip()
    return Path(os.fsdecode(out)) if out else None


def head_commit(root: Path) -> str | None:
    """HEAD's full hash; None outside a repo or before the first commit."""
    out = run_git(root, "rev-parse", "--verify", "-q", "HEAD", check=False).strip()
    return out.decode() if out else None


def dirty_paths(root: Path, paths: list[str]) -> set[str]:
    """Which of `paths` (relative to `root`) differ from HEAD or are untracked."""
    if not paths:
        return set()
    out = run_git(
        root, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--", *paths, check=False
    )
    dirty: set[str] = set()
    top = toplevel(root)
    prefix = ""
    if top is not None:
        rel = os.path.relpath(os.path.realpath(root), os.path.realpath(top))
        prefix = "" if rel == "." else rel.replace(os.sep, "/") + "/"
    entries = out.split(b"\0")
    i = 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        if len(entry) < 4:
            continue
        status, name = entry[:2], os.fsdecode(entry[3:])
        if status[:1] in (b"R", b"C"):
            i += 1  # the rename source follows
        if prefix and name.startswith(prefix):
            name = name[len(prefix):]
        dirty.add(name)
    return dirty


def is_ancestor(cwd: Path, ancestor: str, descendant: str) -> bool:
    """True when `ancestor` is reachable from `descendant` (a commit is its own ancestor)."""
    env = git_env()
    proc = subprocess.run(
        ["git", "merge-base", "--is-ancestor", ancestor, descendant],
        cwd=cwd, env=env, capture_output=True, check=False,
    )
    return proc.returncode == 0
