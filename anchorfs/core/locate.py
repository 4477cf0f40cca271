"""Finding the workspace root, as git finds `.git`.

Kept apart, on `os.path` alone, because the fast `anchorfs drift` path (`anchorfs.memo`)
must find the root before it may import anything heavy; `workspace.find_root` is this.
"""

from __future__ import annotations

import os

from .errors import WorkspaceError

__all__ = ["STATE_DIR", "ROOT_ENV", "locate"]

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
