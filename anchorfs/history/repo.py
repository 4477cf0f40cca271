"""The repository as history sees it: its top level, HEAD, commits and blobs.

The git binary, not a library: it does the costly part, tree and blob diffs, in C. Objects come
through one long-lived `cat-file --batch-check` (names, types, sizes) and one `cat-file --batch`
(contents): no process per blob, and a blob over the size bound is never read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..anchor.anchors import MAX_FILE_BYTES
from ..core.errors import HistoryError
from ..core.git import _Blobs, is_ancestor, run_git, toplevel

__all__ = ["WORKING_TREE", "_Commit", "_FORMAT", "_parse_commit", "_Blobs", "_Repo", "_commit_info",
           "_count_since"]


WORKING_TREE = "working tree"
"""The commit / short name of the last step: uncommitted changes (staged or not)."""


@dataclass(frozen=True, slots=True)
class _Commit:
    commit: str
    short: str
    date: str | None
    author: str | None
    subject: str
    parents: tuple[str, ...] = ()
    committed: str | None = None


_FORMAT = "%x1f".join(("%H", "%h", "%aI", "%an", "%cI", "%P", "%s"))


def _parse_commit(line: bytes) -> _Commit:
    parts = line.decode("utf-8", "replace").split("\x1f", 6)
    full, short, date, author, committed, parents, subject = (parts + [""] * 7)[:7]
    return _Commit(full, short, date or None, author or None, subject, tuple(parents.split()),
                   committed or None)


class _Repo:
    """The workspace seen from git: its top level, the workspace's place in it, HEAD."""

    def __init__(self, root: Path, *, top: Path | None = None) -> None:
        root_real = os.path.realpath(root)
        if top is None:
            top = toplevel(Path(root_real))
        if top is None:
            raise HistoryError(f"{root} is not in a git repository: history needs one")
        self.root_real = root_real
        self.top = Path(os.path.realpath(top))
        rel = os.path.relpath(root_real, self.top)
        self.prefix = "" if rel == os.curdir else rel.replace(os.sep, "/") + "/"
        self.blobs = _Blobs(self.top, MAX_FILE_BYTES)
        found = self.blobs.info("HEAD^{commit}")
        if found is None:
            self.close()
            raise HistoryError("the repository has no commits yet")
        self.head = found[0]

    def close(self) -> None:
        self.blobs.close()

    def __enter__(self) -> "_Repo":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def repo_path(self, path: str) -> str:
        return self.prefix + path

    def load(self, _path: str, oid: str) -> bytes | None:
        """A blob by oid (a search's loader by path and oid); None when missing or over the size bound."""
        return self.blobs.get(oid)

    def workspace_path(self, repo_path: str) -> str:
        if self.prefix and repo_path.startswith(self.prefix):
            return repo_path[len(self.prefix):]
        return repo_path if not self.prefix else ":/" + repo_path  # outside: git's top-relative form

    def resolve(self, rev: str, *, what: str = "revision") -> str:
        found = None if rev.startswith("-") else self.blobs.info(f"{rev}^{{commit}}")
        if found is None or found[1] != "commit":
            raise HistoryError(f"unknown {what} {rev!r}")
        return found[0]

    def info(self, commit: str) -> _Commit:
        return _commit_info(str(self.top), commit)

    def chain(self, base: str) -> list[str]:
        """HEAD's first-parent commits after `base`, oldest first, starting where `base` is in."""
        chain = run_git(self.top, "rev-list", "--first-parent", "--reverse", self.head, f"^{base}").decode().split()
        if not chain:
            # HEAD is `base`, or behind it (an older checkout): one step from `base` to HEAD.
            return [] if base == self.head else [self.head]
        if (self.blobs.info(f"{chain[0]}^") or ("",))[0] != base and is_ancestor(self.top, base, self.head):
            # `base` sits on a side branch: start at the first commit of the chain holding it
            # (ancestry along a first-parent chain is monotone, so bisect for it).
            lo, hi = 0, len(chain) - 1
            while lo < hi:
                mid = (lo + hi) // 2
                if is_ancestor(self.top, base, chain[mid]):
                    hi = mid
                else:
                    lo = mid + 1
            chain = chain[lo:]
        return chain


@lru_cache(maxsize=1024)
def _commit_info(top: str, commit: str) -> _Commit:
    out = run_git(Path(top), "log", "-1", "--no-walk", f"--format={_FORMAT}", commit)
    return _parse_commit(out.rstrip(b"\n"))


@lru_cache(maxsize=1024)
def _count_since(top: str, commit: str, head: str) -> int:
    out = run_git(Path(top), "rev-list", "--count", head, f"^{commit}", check=False).strip()
    return int(out) if out.isdigit() else 0
