"""The repository as history sees it: its top level, HEAD, commits and blobs.

The git binary, not a library: it does the costly part, tree and blob diffs, in C. Objects come
through one long-lived `cat-file --batch-check` (names, types, sizes) and one `cat-file --batch`
(contents): no process per blob, and a blob over the size bound is never read.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import IO, Any

from ..anchor.anchors import MAX_FILE_BYTES
from ..core.errors import HistoryError
from ..core.git import is_ancestor, popen_git, run_git, toplevel

__all__ = ["WORKING_TREE", "_OID_RE", "_Commit", "_FORMAT", "_parse_commit", "_Blobs", "_Repo", "_commit_info",
           "_count_since"]


WORKING_TREE = "working tree"
"""The commit / short name of the last step: uncommitted changes (staged or not)."""


_OID_RE = re.compile(rb"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")


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


class _Blobs:
    """Objects on demand for a walk, through two long-lived `git cat-file` processes. A blob's
    size is known before a byte of it is read, so one over `MAX_FILE_BYTES` is never read."""

    def __init__(self, top: Path) -> None:
        self._top = top
        self._check: Any = None
        self._batch: Any = None
        self._info: dict[str, tuple[str, str, int] | None] = {}
        self._data: dict[str, bytes] = {}
        self.read_bytes = 0
        """Blob bytes read so far (what the size bound keeps small)."""

    def info(self, spec: str) -> tuple[str, str, int] | None:
        """(oid, type, size) of any object name git understands; None when missing or bad."""
        if spec in self._info:
            return self._info[spec]
        if "\n" in spec or "\0" in spec or not spec:
            return None
        if self._check is None:
            self._check = popen_git(self._top, "cat-file", "--batch-check")
        found = _header(self._ask(self._check, spec))
        if len(self._info) >= 4096:
            del self._info[next(iter(self._info))]
        self._info[spec] = found
        return found

    def size(self, spec: str) -> int | None:
        """A blob's size in bytes; None when missing or not a blob."""
        found = self.info(spec)
        return found[2] if found is not None and found[1] == "blob" else None

    def oid(self, spec: str) -> str | None:
        """A blob's oid (e.g. of `rev:path`); None when missing or not a blob."""
        found = self.info(spec)
        return found[0] if found is not None and found[1] == "blob" else None

    def too_large(self, spec: str) -> bool:
        size = self.size(spec)
        return size is not None and size > MAX_FILE_BYTES

    def why_missing(self, spec: str | None, path: str) -> str:
        """The detail of an unreadable step whose blob `get` did not give."""
        size = self.size(spec) if spec else None
        if size is not None and size > MAX_FILE_BYTES:
            return f"{path} is too large to judge ({size} bytes, over {MAX_FILE_BYTES})"
        return f"{path}: the blob is missing"

    def get(self, spec: str) -> bytes | None:
        """The blob named by an oid or `rev:path`; None when missing, not a blob, or over the size bound."""
        found = self.info(spec)
        if found is None or found[1] != "blob" or found[2] > MAX_FILE_BYTES:
            return None
        oid, _, size = found
        if oid in self._data:
            return self._data[oid]
        if self._batch is None:
            self._batch = popen_git(self._top, "cat-file", "--batch")
        got = _header(self._ask(self._batch, oid))
        if got is None or got[2] != size:
            raise HistoryError(f"git cat-file gave {oid} as {got!r}, not a {size}-byte blob")
        body = self._batch.stdout.read(size + 1)[:size]
        if len(body) != size:
            raise HistoryError("git cat-file stopped unexpectedly")
        self.read_bytes += size
        if len(self._data) >= 16:
            del self._data[next(iter(self._data))]
        self._data[oid] = body
        return body

    @staticmethod
    def _ask(proc: Any, spec: str) -> bytes:
        stdin: IO[bytes] = proc.stdin
        stdout: IO[bytes] = proc.stdout
        try:
            stdin.write(spec.encode("utf-8", "surrogateescape") + b"\n")
            stdin.flush()
        except (BrokenPipeError, OSError):
            raise HistoryError("git cat-file stopped unexpectedly") from None
        header = stdout.readline()
        if not header:
            raise HistoryError("git cat-file stopped unexpectedly")
        return header

    def close(self) -> None:
        for attr in ("_check", "_batch"):
            proc = getattr(self, attr)
            if proc is None:
                continue
            try:
                proc.stdin.close()
                proc.wait(timeout=10)
            except Exception:  # pragma: no cover - best effort cleanup
                proc.kill()
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
            setattr(self, attr, None)


def _header(line: bytes) -> tuple[str, str, int] | None:
    """`<oid> <type> <size>` from cat-file; None for `<name> missing`, `<name> ambiguous` and
    anything else (a name with spaces in it echoes back as more than three words)."""
    parts = line.split()
    if len(parts) != 3 or not _OID_RE.match(parts[0]) or not parts[2].isdigit():
        return None
    return parts[0].decode(), parts[1].decode("ascii", "replace"), int(parts[2])


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
        self.blobs = _Blobs(self.top)
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

    def chain(self, base: str) -> list[_Commit]:
        """HEAD's first-parent steps after `base`, oldest first, starting where `base` is in."""
        out = run_git(self.top, "rev-list", "--first-parent", "--reverse", f"--format={_FORMAT}",
                      self.head, f"^{base}")
        chain = [_parse_commit(line) for line in out.splitlines()
                 if line and not line.startswith(b"commit ")]
        if not chain:
            # HEAD is `base`, or behind it (an older checkout): one step from `base` to HEAD.
            return [] if base == self.head else [self.info(self.head)]
        if chain[0].parents[:1] != (base,) and is_ancestor(self.top, base, self.head):
            # `base` sits on a side branch: start at the first commit of the chain holding it
            # (ancestry along a first-parent chain is monotone, so bisect for it).
            lo, hi = 0, len(chain) - 1
            while lo < hi:
                mid = (lo + hi) // 2
                if is_ancestor(self.top, base, chain[mid].commit):
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
