"""The git post-commit hook: after each commit, say which memories it made stale.

`install` writes a block between marker lines into the repo's post-commit hook (honouring
`core.hooksPath`), keeping whatever the hook already holds; `uninstall` removes only that
block. The block calls the interpreter that installed it, by absolute path, so the hook works
from any shell without anchorfs on PATH, and ends in `|| true`: a post-commit hook cannot
stop a commit, and a memory check must never look like a failed one.

`run` is what the hook calls. It re-checks only the memories anchored to the paths the new
commit touched (the working tree is what is checked, as everywhere in anchorfs) and logs each
transition to `.anchorfs/events.jsonl`. It reads the ledger and the hash cache, never LanceDB
unless some drift changed, so a commit pays tens of milliseconds.
"""

from __future__ import annotations

import os
import shlex
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import WorkspaceError
from .git import run_git, toplevel

if TYPE_CHECKING:
    from .watch import DriftEvent
    from .workspace import Workspace

__all__ = ["BEGIN", "END", "hook_path", "hook_command", "install", "uninstall", "is_installed", "committed_paths", "run"]

BEGIN = "# >>> anchorfs >>>"
END = "# <<< anchorfs <<<"
_NOTE = "# Added by `anchorfs hook install`; `anchorfs hook uninstall` removes this block only."
_CREATED = "# (anchorfs created this hook file; uninstalling deletes it once nothing else is in it)"
_SHELLS = ("sh", "bash", "dash", "zsh", "ksh", "ash")


def _repo(root: Path) -> Path:
    if toplevel(root) is None:
        raise WorkspaceError(f"{root} is not in a git repository; the hook needs one")
    return root


def hook_path(root: Path) -> Path:
    """The post-commit hook git will run for the repo holding `root` (core.hooksPath honoured)."""
    _repo(root)
    out = run_git(root, "rev-parse", "--git-path", "hooks/post-commit").decode().strip()
    return (root / out).resolve() if not os.path.isabs(out) else Path(out)


def hook_command(root: Path) -> str:
    """The block's command line: this interpreter, by absolute path, on this workspace."""
    exe = shlex.quote(os.path.abspath(sys.executable))
    return f"{exe} -m anchorfs.cli hook run --root {shlex.quote(str(root))} || true"


def _split(text: str) -> tuple[str, list[str], str] | None:
    """(before, block lines, after) of the hook's text, or None when there is no block."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.rstrip("\r\n") == BEGIN]
    if not starts:
        return None
    start = starts[0]
    ends = [i for i in range(start + 1, len(lines)) if lines[i].rstrip("\r\n") == END]
    if not ends:
        raise WorkspaceError(f"the anchorfs block in the hook has no `{END}` line; fix the hook by hand")
    end = ends[0]
    return "".join(lines[:start]), [line.rstrip("\r\n") for line in lines[start + 1:end]], "".join(lines[end + 1:])


def _is_shell(text: str) -> bool:
    first = text.splitlines()[0] if text.strip() else ""
    if not first.startswith("#!"):
        return True  # git runs a hook without a shebang through sh
    words = first[2:].split()
    if not words:
        return True
    prog = os.path.basename(words[0])
    if prog == "env" and len(words) > 1:
        prog = os.path.basename(words[-1] if words[1].startswith("-") else words[1])
    return prog in _SHELLS


def _write(path: Path, text: str) -> None:
    """Atomically, keeping the file's mode (and making it executable)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = 0o755
    tmp = path.with_name(f".{path.name}.anchorfs.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.chmod(tmp, mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    os.replace(tmp, path)


def is_installed(root: Path) -> bool:
    path = hook_path(root)
    try:
        parts = _split(path.read_text())
    except FileNotFoundError:
        return False
    return parts is not None and any(_for_root(line, root) for line in parts[1])


def _for_root(line: str, root: Path) -> bool:
    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        return False
    return "--root" in words and words.index("--root") + 1 < len(words) and \
        words[words.index("--root") + 1] == str(root)


def install(root: Path) -> tuple[Path, bool]:
    """Add (or refresh) this workspace's line in the post-commit hook; (hook path, changed)."""
    root = Path(root)
    path = hook_path(root)
    command = hook_command(root)
    try:
        text = path.read_text()
    except FileNotFoundError:
        text = ""
    except OSError as exc:
        raise WorkspaceError(f"cannot read the hook {path}: {exc.strerror}") from None
    if text and not _is_shell(text):
        raise WorkspaceError(
            f"{path} is not a shell script; add this line to it yourself: {command}"
        )
    parts = _split(text)
    if parts is None:
        body = [_NOTE, command]
        if not text.strip():
            new = "#!/bin/sh\n" + _block([_NOTE, _CREATED, command])
        else:
            # Right after the shebang: a hook that ends in `exit` would never reach the end.
            lines = text.splitlines(keepends=True)
            if lines[0].startswith("#!"):
                head = lines[0] if lines[0].endswith("\n") else lines[0] + "\n"
                new = head + _block(body) + "".join(lines[1:])
            else:
                new = _block(body) + text
    else:
        before, body, after = parts
        kept = [line for line in body if not _for_root(line, root)]
        if _NOTE not in kept:
            kept.insert(0, _NOTE)
        new = before + _block([*kept, command]) + after
    if new == text:
        return path, False
    _write(path, new)
    return path, True


def _block(body: list[str]) -> str:
    return "\n".join([BEGIN, *body, END]) + "\n"


def uninstall(root: Path) -> tuple[Path, bool]:
    """Remove this workspace's line (and the block once empty); (hook path, changed).

    A hook that held nothing but our block is deleted; anything else in it stays as it was.
    """
    root = Path(root)
    path = hook_path(root)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return path, False
    parts = _split(text)
    if parts is None:
        return path, False
    before, body, after = parts
    kept = [line for line in body if not _for_root(line, root)]
    if len(kept) == len(body):
        return path, False
    if any(line.strip() and not line.startswith("#") for line in kept):
        new = before + _block(kept) + after
    else:
        new = before + after
    if not new.strip() or (_CREATED in body and new.strip() == "#!/bin/sh"):
        path.unlink()
    else:
        _write(path, new)
    return path, True


def committed_paths(root: Path, rev: str = "HEAD") -> list[str]:
    """Workspace-relative paths the commit touched (against its first parent; all for a root commit)."""
    out = run_git(
        root, "diff-tree", "--no-commit-id", "--name-only", "-r", "-z", "--no-renames", "--relative",
        "--root", "-m", "--first-parent", rev, check=False,
    )
    return sorted({os.fsdecode(p) for p in out.split(b"\0") if p})


def run(ws: "Workspace", rev: str = "HEAD") -> list["DriftEvent"]:
    """The hook's work: re-check the memories on the paths `rev` touched, log transitions."""
    from .watch import record_transitions

    paths = committed_paths(ws.root, rev)
    return record_transitions(ws, paths, source="hook") if paths else []
