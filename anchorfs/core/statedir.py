"""Creating the state folder `.anchorfs/`, keeping its `.gitignore` current, and finding it.

Apart from the `Workspace`: `init` runs before there is one. Every path is opened through
`anchorfs.core.statefs`: a link is refused, never followed.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .errors import InputError, WorkspaceError
from .statefs import check_state, check_state_dir, open_state, read_state, replace_state

if TYPE_CHECKING:
    from pathlib import Path  # annotations only

__all__ = ["check_init", "init", "upgrade_gitignore", "STATE_DIR", "ROOT_ENV", "locate", "option_value"]


_GITIGNORE = "# the ledger is the record; everything else here is rebuilt from it\nmemories.lance/\nmanifest.json\ndrift.json\ndrift.memo\napplied\nlock\n*.tmp\nevents.jsonl\nfold.snap\ndigest.memo\nfold.tail\nconfig.parsed\njudged/\nsessions.json\nusage.jsonl\n"
_GITIGNORE_BEFORE = (
    "# the ledger is the record; everything else here is rebuilt from it\nmemories.lance/\nmanifest.json\ndrift.json\n"
    "drift.memo\napplied\nlock\n*.tmp\nevents.jsonl\nfold.snap\ndigest.memo\nfold.tail\nconfig.parsed\njudged/\nsessions.json\n",
    "# the ledger is the record; everything else here is rebuilt from it\nmemories.lance/\nmanifest.json\ndrift.json\n"
    "drift.memo\napplied\nlock\n*.tmp\nevents.jsonl\nfold.snap\ndigest.memo\nfold.tail\nconfig.parsed\njudged/\n",
    "# the ledger is the record; everything else here is rebuilt from it\nmemories.lance/\nmanifest.json\ndrift.json\n"
    "drift.memo\napplied\nlock\n*.tmp\nevents.jsonl\nfold.snap\ndigest.memo\nfold.tail\nconfig.parsed\n",
    "# the ledger is the record; everything else here is rebuilt from it\nmemories.lance/\nmanifest.json\ndrift.json\n"
    "drift.memo\napplied\nlock\n*.tmp\nevents.jsonl\nfold.snap\ndigest.memo\n",
    "# the ledger is the record; everything else here is rebuilt from it\nmemories.lance/\nmanifest.json\ndrift.json\n"
    "applied\nlock\n*.tmp\nevents.jsonl\n",
    "# the ledger is the record; everything else here is rebuilt from it\nmemories.lance/\nmanifest.json\ndrift.json\n"
    "drift.memo\napplied\nlock\n*.tmp\nevents.jsonl\n",
)
"""Earlier anchorfs's `.gitignore`, upgraded in place when found untouched (`upgrade_gitignore`)."""


def _replace_atomic(path: str | os.PathLike[str], payload: bytes, point: str) -> None:
    """Write a derived file whole or not at all (`statefs.replace_state`; not fsynced: a torn one
    is rebuilt). `point` is the test-only fault switch's name."""
    replace_state(path, payload, fault_point=point)


def upgrade_gitignore(state: str | os.PathLike[str]) -> None:
    """Give an untouched `.gitignore` from an earlier anchorfs the state files added since; one a
    person edited is left alone. A link there is refused (`WorkspaceError`)."""
    ignore = os.path.join(state, ".gitignore")
    try:
        text = read_state(ignore)
        if text is not None and text.decode("utf-8") in _GITIGNORE_BEFORE:
            _replace_atomic(ignore, _GITIGNORE.encode(), "gitignore-write")
    except (OSError, UnicodeDecodeError):
        pass


def _checked(root: str | os.PathLike[str] | None, nested: bool) -> Path:
    """The folder `init` would make a workspace of, after every check that can refuse it."""
    from pathlib import Path

    path = Path(root if root is not None else os.environ.get(ROOT_ENV) or Path.cwd()).expanduser()
    if not path.is_dir():
        raise WorkspaceError(f"{path} is not a folder")
    if type(nested) is not bool:
        raise InputError(f"nested must be true or false, got {type(nested).__name__}")
    if not nested and not os.path.lexists(path / STATE_DIR):
        here = below = os.path.realpath(path)
        parent = os.path.dirname(below)
        while parent != below:
            if os.path.isdir(os.path.join(parent, STATE_DIR)):
                raise WorkspaceError(
                    f"{here} is inside the anchorfs workspace at {parent}, whose memories a workspace here "
                    f"would hide; use that one, or pass --nested (SDK: nested=True) for a separate workspace")
            below, parent = parent, os.path.dirname(parent)
    check_state(path / STATE_DIR)
    return path


def check_init(root: str | os.PathLike[str] | None = None, *, nested: bool = False) -> Path:
    """Raise what `init(root, nested=nested)` would refuse with, writing nothing; returns the
    root `init` would return (for a caller with checks of its own to run first)."""
    return _checked(root, nested).resolve()


def init(root: str | os.PathLike[str] | None = None, *, nested: bool = False) -> Path:
    """Create `.anchorfs/` (idempotent). Returns the workspace root. A folder inside another
    workspace is refused unless `nested` (it would hide the parent's memories below it); a state
    folder that is or holds a link is refused before anything is written."""
    path = _checked(root, nested)
    state = path / STATE_DIR
    try:
        try:
            os.mkdir(state)  # never through a link: mkdir does not follow one at its last component
        except FileExistsError:
            check_state_dir(state)  # raced with another init, or a link planted meanwhile
        ignore = os.path.join(state, ".gitignore")
        try:
            fd = open_state(ignore, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            upgrade_gitignore(state)
        else:
            try:
                os.write(fd, _GITIGNORE.encode())
            finally:
                os.close(fd)
    except OSError as exc:
        raise WorkspaceError(f"cannot create {state}: {exc.strerror}") from None
    return path.resolve()


# -- Finding the workspace root, as git finds `.git`, and reading `--root` from a command line.

STATE_DIR = ".anchorfs"
ROOT_ENV = "ANCHORFS_ROOT"


def locate(root: str | os.PathLike[str] | None = None, *, start: str | None = None) -> str:
    """The real path of `root`, else of $ANCHORFS_ROOT, else of the nearest parent of `start`
    (default: the cwd; a hook passes the session's folder) holding `.anchorfs/`."""
    if root is not None:
        path = os.path.expanduser(os.fspath(root))
        if not os.path.isdir(os.path.join(path, STATE_DIR)):
            raise WorkspaceError(f"{os.path.normpath(path)} is not an anchorfs workspace (no {STATE_DIR}/); "
                                 "run `anchorfs init`")
        return os.path.realpath(path)
    env = os.environ.get(ROOT_ENV)
    if env:
        return locate(env)
    here = candidate = os.path.realpath(start if start is not None else os.getcwd())
    while True:
        if os.path.isdir(os.path.join(candidate, STATE_DIR)):
            return candidate
        parent = os.path.dirname(candidate)
        if parent == candidate:
            raise WorkspaceError(f"no anchorfs workspace in {here} or its parents; run `anchorfs init`")
        candidate = parent


def option_value(argv: Sequence[str], i: int, name: str = "--root") -> tuple[str, int] | None:
    """`argv[i]` read as `NAME VALUE` or `NAME=VALUE`: (VALUE, the index of the last word it
    took); None when `argv[i]` is not that option. A NAME with no word after it gives ""."""
    arg = argv[i]
    if arg == name:
        return (argv[i + 1], i + 1) if i + 1 < len(argv) else ("", i)
    if arg.startswith(name + "="):
        return arg[len(name) + 1:], i
    return None
