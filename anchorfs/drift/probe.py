"""The files one drift pass looks at: an anchored path located inside the root (a folder's
realpath checked once per pass, a link's whole chain), its hash through the racy-safe cache,
its bytes through the guarded open, each once per pass (`FileProbe`, the base of
`anchorfs.drift.check.DriftChecker`). A path that would leave the root is `unsafe` and never
read; an I/O error is `unreadable`, in words (`_why`).
"""

from __future__ import annotations

import os
import stat

from ..anchor.anchors import MAX_FILE_BYTES, STATE_DIR, is_state_name, resolve_path
from ..core.errors import AnchorError, UnsafePathError
from ..core.guard import NotRegularError, SwappedError, read_guarded
from .hashcache import HashCache
from ..core.model import AnchorCheck, AnchorRef, Verdict

from typing import cast

__all__ = ["FileProbe"]

_ERRNO_WORDS = {13: "permission denied", 21: "a directory where a file was", 40: "too many symlink levels"}
_RECHECKS = 2
"""How often a file swapped between its check and its open is checked afresh before it is
called unreadable ("kept changing")."""


class FileProbe:
    """A drift pass's view of the workspace's files: located, hashed and read at most once per pass."""

    def __init__(self, root_real: str, cache: HashCache, *, whitespace: str | None = None) -> None:
        self.root_real = root_real
        self.cache = cache
        self._whitespace = whitespace
        self._stats: dict[str, os.stat_result | None] = {}  # candidates' `lstat`, once per pass
        self._dirs: dict[str, str | None] = {}
        self._files: dict[str, tuple[str, os.stat_result] | AnchorCheck] = {}
        self._full: dict[str, str] = {}
        self._data: dict[str, bytes] = {}
        self._lstats: dict[str, os.stat_result] = {}  # from the batch pre-pass, used once by `_locate`

    def _dir_real(self, rel_dir: str) -> str | None:
        """The realpath of a workspace folder if it stays inside and is not `.anchorfs/`."""
        if rel_dir in self._dirs:
            return self._dirs[rel_dir]
        result: str | None = self.root_real
        if rel_dir:
            real = os.path.realpath(os.path.join(self.root_real, rel_dir))
            rel = os.path.relpath(real, self.root_real)
            outside = rel == os.pardir or rel.startswith(os.pardir + os.sep) or os.path.isabs(rel)
            state = is_state_name(rel.partition(os.sep)[0])  # `.AnchorFS` too: see is_state_name
            result = None if outside or state else real
        self._dirs[rel_dir] = result
        return result

    def _locate(self, path: str) -> tuple[str, os.stat_result]:
        """Real path and stat of an anchored file, refusing anything outside the root."""
        if "\0" in path or path[:1] == "/" or (".." in path and ".." in path.split("/")):
            raise UnsafePathError(f"{path} now resolves outside the workspace")
        cut = path.rfind("/")
        if cut < 0:
            if path == STATE_DIR:
                raise UnsafePathError(f"{path} is anchorfs's own state folder")
            dir_real: str | None = self.root_real
        else:
            rel_dir = path[:cut]
            dir_real = self._dirs[rel_dir] if rel_dir in self._dirs else self._dir_real(rel_dir)
            if dir_real is None:
                raise UnsafePathError(f"{path} now resolves outside the workspace")
        full = f"{dir_real}/{path[cut + 1:]}"
        st = self._lstats.pop(path, None) or os.lstat(full)
        if st.st_mode & 0o170000 == 0o120000:  # a symlink: the whole chain must stay inside
            _, full = resolve_path(self.root_real, path)
            st = os.stat(full)
        return full, st

    def _probe(self, path: str) -> tuple[str, os.stat_result] | AnchorCheck:
        """(sha256, stat) of the file at an anchor's path, or the verdict that stops there (memoized)."""
        found = self._files.get(path)
        if found is not None:
            return found
        result: tuple[str, os.stat_result] | AnchorCheck | None = None
        for _ in range(_RECHECKS + 1):
            result = self._probe_once(path)
            if result is not None:
                break
        if result is None:
            result = AnchorCheck(AnchorRef(path), Verdict.UNREADABLE, f"{path} unreadable: it kept changing while being read")
        self._files[path] = result
        return result

    def _probe_once(self, path: str) -> tuple[str, os.stat_result] | AnchorCheck | None:
        """One try of `_probe`; None when the file was swapped between its stat and its open."""
        result: tuple[str, os.stat_result] | AnchorCheck
        try:
            full, st = self._locate(path)
            if stat.S_ISREG(st.st_mode):
                result = (self.cache.sha256(path, full, st=st), st)
                self._full[path] = full
            elif stat.S_ISDIR(st.st_mode):
                result = AnchorCheck(AnchorRef(path), Verdict.UNREADABLE, f"{path} unreadable: a directory where a file was")
            else:
                result = AnchorCheck(AnchorRef(path), Verdict.UNREADABLE, f"{path} unreadable: not a regular file")
        except SwappedError:
            return None
        except NotRegularError:  # swapped for a FIFO (or a socket) after the stat: never waited on
            result = AnchorCheck(AnchorRef(path), Verdict.UNREADABLE, f"{path} unreadable: not a regular file")
        except UnsafePathError:
            result = AnchorCheck(AnchorRef(path), Verdict.UNSAFE, f"{path} now resolves outside the workspace")
        except AnchorError as exc:  # e.g. a symlink to the workspace root itself: a folder, not a file
            result = AnchorCheck(AnchorRef(path), Verdict.UNREADABLE, f"{path} unreadable: {exc}")
        except FileNotFoundError:
            result = AnchorCheck(AnchorRef(path), Verdict.DELETED, f"{path} deleted")
        except OSError as exc:
            result = AnchorCheck(AnchorRef(path), Verdict.UNREADABLE, f"{path} unreadable: {_why(exc)}")
        return result

    @property
    def strict(self) -> bool:
        """`drift.whitespace = "strict"`: every byte counts, a reformat is a change."""
        if self._whitespace is None:
            from ..core.config import load_config
            from ..core.errors import AnchorfsError

            try:
                self._whitespace = str(load_config(self.root_real)["drift.whitespace"])
            except (AnchorfsError, OSError):
                self._whitespace = "tokens"
        return self._whitespace == "strict"

    def _sha_of(self, path: str) -> str | None:
        probe = self._probe(path)
        return cast("tuple[str, os.stat_result]", probe)[0] if type(probe) is tuple else None

    def _size(self, path: str) -> int | None:
        """A candidate's size from one `lstat` (no hashing), None if it is not a plain file inside."""
        known = self._files.get(path)
        if type(known) is tuple:
            return int(cast("tuple[str, os.stat_result]", known)[1].st_size)
        st = self._stat_of(path)
        return int(st.st_size) if st is not None else None

    def _read(self, path: str) -> bytes | None:
        """A candidate file's bytes through the guarded open, or None (gone, unsafe, too big)."""
        data = self._data.get(path)
        if data is not None:
            return data
        probe = self._probe(path)
        if type(probe) is not tuple or path not in self._full:
            return None
        st = cast("tuple[str, os.stat_result]", probe)[1]
        if st.st_size > MAX_FILE_BYTES:
            return None
        try:
            data = read_guarded(self._full[path], root=self.root_real, expect=st, max_bytes=MAX_FILE_BYTES)
        except (AnchorError, OSError):
            return None
        self._data[path] = data
        return data

    def _stat_of(self, path: str) -> os.stat_result | None:
        """A candidate's `lstat` through `_locate` (None: not a plain file inside), once per pass."""
        if path in self._stats:
            return self._stats[path]
        known = self._files.get(path)
        st: os.stat_result | None = None
        if type(known) is tuple:
            st = cast("tuple[str, os.stat_result]", known)[1]
        else:
            try:
                _, got = self._locate(path)
            except (AnchorError, OSError):
                got = None
            st = got if got is not None and stat.S_ISREG(got.st_mode) else None
        self._stats[path] = st
        return st


def _why(exc: OSError) -> str:
    return _ERRNO_WORDS.get(exc.errno or 0) or (exc.strerror or str(exc)).lower()
