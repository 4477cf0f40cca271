"""Thin git plumbing: the few facts anchorfs needs from a repo, through the `git` binary.

The binary rather than a library: it is on every developer machine, reads every repo format
(packs, worktrees, partial clones) exactly as the user's git does, and costs nothing to import.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from .errors import HistoryError

__all__ = [
    "run_git", "git_env", "popen_git", "toplevel", "prefix_of", "head_commit", "head_and_dirty",
    "dirty_paths", "is_ancestor",
]


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


def prefix_of(root: Path, top: Path) -> str:
    """`root`'s place inside the repo at `top` as a git path prefix (`""` or `"sub/dir/"`)."""
    rel = os.path.relpath(os.path.realpath(root), os.path.realpath(top))
    return "" if rel == os.curdir else rel.replace(os.sep, "/") + "/"


def head_and_dirty(root: Path, paths: Sequence[str], *, prefix: str | None = None) -> tuple[str | None, set[str]]:
    """HEAD's hash (None before the first commit) and which of `paths` (relative to `root`)
    differ from it or are untracked: one `git status --porcelain=v2 --branch` for both, so a
    batch of writes pays one process whatever its size. `prefix` is `prefix_of(root, top)`,
    looked up here (one more process) when the caller has not kept it.
    """
    if not paths:
        return head_commit(root), set()
    out = run_git(
        root, "status", "--porcelain=v2", "--branch", "-z", "--untracked-files=all", "--no-renames",
        "--", *(":(literal)" + p for p in paths), check=False,
    )
    if prefix is None:
        top = toplevel(root)
        prefix = prefix_of(root, top) if top is not None else ""
    head: str | None = None
    dirty: set[str] = set()
    for entry in out.split(b"\0"):
        if entry.startswith(b"# branch.oid "):
            oid = entry[len(b"# branch.oid "):].strip().decode("ascii", "replace")
            head = oid if oid and oid != "(initial)" else None
            continue
        kind = entry[:1]
        fields = {b"1": 8, b"2": 9, b"u": 10, b"?": 1}.get(kind)
        if fields is None or entry[1:2] != b" ":
            continue  # another header, an ignored entry, or a rename's source (none: --no-renames)
        parts = entry.split(b" ", fields)
        if len(parts) <= fields:
            continue
        name = os.fsdecode(parts[fields])
        if prefix and name.startswith(prefix):
            name = name[len(prefix):]
        dirty.add(name)
    return head, dirty


def dirty_paths(root: Path, paths: list[str]) -> set[str]:
    """Which of `paths` (relative to `root`) differ from HEAD or are untracked."""
    return head_and_dirty(root, paths)[1] if paths else set()


def is_ancestor(cwd: Path, ancestor: str, descendant: str) -> bool:
    """True when `ancestor` is reachable from `descendant` (a commit is its own ancestor)."""
    try:
        proc = subprocess.run(
            ["git", "merge-base", "--is-ancestor", ancestor, descendant],
            cwd=cwd, env=git_env(), capture_output=True, check=False,
        )
    except FileNotFoundError as exc:  # no git on this machine
        raise HistoryError("git is not installed") from exc
    return proc.returncode == 0
