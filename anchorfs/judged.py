"""Anchor verdicts kept across processes (`.anchorfs/judged/`, one small file per anchored
file), each bound to the file as the hash cache holds it.

A narrowed anchor (a symbol, a line range) on a file that changed since it was recorded is
judged against the file's bytes: the file read and, for a symbol, parsed with tree-sitter. The
verdict is a function of the anchor, the bytes and the whitespace rule alone, so once judged it
holds for as long as the file hashes the same. Without a record of it, every pass of every new
process (a first session's digest, `anchorfs drift`, a server's start) read and parsed every
such file again: where an edit elsewhere in a file left its memories fresh, that was the
tree-sitter import and a parse per file, each time.

A file's verdicts are kept with its hash-cache key (size, mtime_ns, ctime_ns, inode) and SHA-256
as they were when judged, and served only while the cache holds that very entry for the file: a
file rewritten since has another stat, and a record from elsewhere (a crafted clone) names stats
no file here has. One record per anchored file, named by a hash of its path, so a hook reads and
writes only the files it judges, whatever the workspace's size. Verdicts that depend on more than
the bytes (unreadable, unsafe) are never kept. Derived: delete the folder and the next pass
judges again.
"""

from __future__ import annotations

import os

from .errors import AnchorfsError

TYPE_CHECKING = False  # `typing` imports `re`: a hook's digest must not pay for it
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from .model import AnchorRef

__all__ = ["FOLDER", "Judged", "anchor_key"]

FOLDER = "judged"
_FORMAT = 1
_MAX_BYTES = 1 << 20  # a runaway record is not read to the end: judged again instead
_KEPT = ("fresh", "moved", "reformatted", "changed", "symbol_missing")
"""The verdicts that are functions of the bytes alone."""

if TYPE_CHECKING:
    _Key = tuple[int, int, int, int]


def anchor_key(ref: AnchorRef, strict: bool) -> str:
    """Everything a verdict depends on besides the bytes: every field of the anchor, and the
    whitespace rule (`drift.whitespace = "strict"`)."""
    from .jsonwrite import json_dumps

    return json_dumps([strict, ref.path, ref.sha256, ref.symbol, list(ref.lines) if ref.lines else None,
                       ref.content_hash, ref.commit, ref.dirty, ref.token_hash])


class Judged:
    """The verdicts folder of one state folder: each file's record read on its first lookup,
    written by `save` when a verdict was added to it."""

    def __init__(self, state_dir: str, held: Callable[[str], tuple[_Key, str] | None]) -> None:
        self.folder = os.path.join(state_dir, FOLDER)
        self._held = held  # rel -> (stat key, hash) the hash cache trusts for the file now, or None
        self._files: dict[str, list[Any] | None] = {}  # rel -> [key, sha, {anchor: [verdict, detail, where]}]
        self._touched: set[str] = set()

    def _now(self, rel: str, sha: str) -> list[Any] | None:
        """[key, sha] when the hash cache holds `rel` hashing `sha`: what a verdict is bound to."""
        held = self._held(rel)
        return [list(held[0]), sha] if held is not None and held[1] == sha else None

    def get(self, rel: str, sha: str, anchor: str) -> tuple[str, str, tuple[int, int] | None] | None:
        """(verdict, detail, where) judged for `anchor` (`anchor_key`) against `rel`'s bytes,
        which hash `sha`, while the hash cache holds the file under the stat it was judged under;
        None when it was not."""
        now = self._now(rel, sha)
        f = self._record(rel) if now is not None else None
        if f is None or f[:2] != now:
            return None
        got = f[2].get(anchor)
        if got is None:
            return None
        verdict, detail, where = got
        return verdict, detail, (where[0], where[1]) if where is not None else None

    def put(self, rel: str, sha: str, anchor: str, verdict: str, detail: str, where: tuple[int, int] | None) -> None:
        """Keep a verdict just judged against `rel`'s bytes, which hash `sha`: one of `_KEPT`,
        while the hash cache holds the file hashing so (anything else is not kept)."""
        now = self._now(rel, sha)
        if verdict not in _KEPT or now is None:
            return
        f = self._record(rel)
        if f is None or f[:2] != now:
            f = self._files[rel] = [*now, {}]
        f[2][anchor] = [verdict, detail, list(where) if where is not None else None]
        self._touched.add(rel)

    def save(self) -> bool:
        """Write the record of each file a verdict was added to, while the hash cache still holds
        the entry it was judged against. Never raises: a verdict not kept is judged again next
        time."""
        if not self._touched:
            return False
        from .jsonwrite import json_dumps
        from .statedir import upgrade_gitignore
        from .statefs import refuse_link, replace_state

        wrote = False
        try:
            try:
                os.mkdir(self.folder, 0o755)
                upgrade_gitignore(os.path.dirname(self.folder))  # a workspace made before it must not offer it
            except FileExistsError:
                pass
            refuse_link(self.folder, "state folder")  # a link there (a crafted clone) is never written through
            for rel in sorted(self._touched):
                f = self._files.get(rel)
                if f is None or self._now(rel, f[1]) != f[:2]:
                    continue
                payload = json_dumps({"format": _FORMAT, "path": rel, "key": f[0], "sha256": f[1], "verdicts": f[2]})
                replace_state(_file(self.folder, rel), payload.encode(), fault_point="judged-write")
                wrote = True
        except (OSError, ValueError, TypeError, AnchorfsError):
            return wrote
        self._touched.clear()
        return wrote

    def _record(self, rel: str) -> list[Any] | None:
        if rel not in self._files:
            self._files[rel] = self._read(rel)
        return self._files[rel]

    def _read(self, rel: str) -> list[Any] | None:
        """`rel`'s record, checked for shape; None for anything else (missing, torn, a link,
        another format or path). Never raises."""
        from .jsonread import loads
        from .statefs import open_state, refuse_link

        try:
            refuse_link(self.folder, "state folder")
            fd = open_state(_file(self.folder, rel), os.O_RDONLY)
        except (OSError, ValueError, AnchorfsError):  # missing, a folder, a link (`WorkspaceError`)
            return None
        try:
            data = os.read(fd, _MAX_BYTES + 1)
        except OSError:
            return None
        finally:
            os.close(fd)
        try:
            doc = loads(data, constants=False) if len(data) <= _MAX_BYTES else None
        except ValueError:
            return None
        if type(doc) is not dict or doc.get("format") != _FORMAT or doc.get("path") != rel:
            return None
        f = [doc.get("key"), doc.get("sha256"), doc.get("verdicts")]
        return f if _shaped(f) else None


def _file(folder: str, rel: str) -> str:
    """A file's record: named by the SHA-256 of its path (any path, any length, one flat folder)."""
    from .hashing import sha256_bytes

    return os.path.join(folder, sha256_bytes(rel.encode("utf-8", "surrogatepass"))[:40] + ".json")


def _shaped(f: Any) -> bool:
    """Whether a file's record reads as `save` writes it."""
    if not (type(f) is list and len(f) == 3 and type(f[0]) is list and len(f[0]) == 4
            and all(type(n) is int for n in f[0]) and type(f[1]) is str and type(f[2]) is dict):
        return False
    for v in f[2].values():
        if not (type(v) is list and len(v) == 3 and v[0] in _KEPT and type(v[1]) is str):
            return False
        where = v[2]
        if where is not None and not (type(where) is list and len(where) == 2 and all(type(n) is int for n in where)):
            return False
    return True
