"""Where an anchor's content went: the moved-content search behind `moved` (and behind
`changed` with `path_now`), for an anchor that would be `deleted` or `symbol_missing`, or
whose lines left a file still there (`MoveSearch`, between `FileProbe` and `DriftChecker`).

In git, new files count (renamed, added or untracked since the anchor's commit) and, for a
symbol or lines, the files changed since (a helper moved into an existing module); without git,
every file under the root for a gone file, and the files changed since for lines gone. Bounded
per pass (`_FOLLOW_BUDGET`, `_WALK_FILES`); answers kept while the file found hashes as it did,
in this process (`_FOLLOWED`) and in the manifest for the next ones.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from operator import attrgetter
from typing import Any

from ..anchor.anchors import _distinctive, is_state_name, judge_at, old_text
from ..core.errors import AnchorError
from ..core.model import AnchorCheck, AnchorRef, Verdict
from .hashcache import HashCache
from .hashcache import _utf8 as _encodes
from .probe import FileProbe

__all__ = ["MoveSearch"]

_FOLLOW_BUDGET = 16 * 1024 * 1024
"""Bytes one pass may read or hash looking for moved content (candidate files, whole)."""
_WALK_FILES = 200_000
"""Files one pass may list in a workspace without git when it looks for moved content."""
_SKIP_DIRS = frozenset({"node_modules", "__pycache__"})
_FOLLOWED: OrderedDict[tuple[Any, ...], tuple[str, str, AnchorCheck]] = OrderedDict()
"""Answers of the moved-content search, kept while the file found still hashes as it did."""
_FOLLOWED_KEPT = 4096
_UNFOUND: OrderedDict[tuple[Any, ...], tuple[str | None, Any, float]] = OrderedDict()
"""Lines gone from a file still there and found in no new file: kept while that file hashes the
same, git's index has the same stat and the cache's TTL runs (no git process on every read)."""
_followed_lock = threading.Lock()
_GONE: dict[str, set[str]] = {}
"""Per root, anchored paths found gone (and followed) by an earlier pass. The batch pre-pass
`lstat`s the root folder in their place: it never matches a cache entry, so their memories take
the one-by-one check while the rest of the batch stays in the C loop."""
_THEN_BLOBS: dict[tuple[str, str, str], bytes | None] = {}
"""(root, commit, path) -> the file as committed then (`MoveSearch.then_of`)."""
_TOPS: dict[str, Any] = {}
"""Per root, the git top level (None outside git): asked once per process."""
_AHEAD: dict[str, tuple[threading.Thread, list[Any]]] = {}  # per root: untracked files listed ahead (`look_ahead`)


def look_ahead(root_real: str) -> None:
    """Start `git ls-files --others` (a move search's slowest git answer: it walks the tree) beside
    the work before a search this process may make (the post-edit hook of an anchored file)."""
    from pathlib import Path

    from ..core.git import untracked_files

    out: list[Any] = []

    def run() -> None:
        try:
            out.append(untracked_files(Path(root_real)))
        except Exception:  # noqa: BLE001 - no answer: the search asks git itself
            pass
    if root_real not in _AHEAD:
        _AHEAD[root_real] = (thread := threading.Thread(target=run, daemon=True), out)
        thread.start()


class MoveSearch(FileProbe):
    """The moved-content search of one drift pass (git answers, walk of the root, read budget)."""

    def __init__(self, root_real: str, cache: HashCache, *, whitespace: str | None = None) -> None:
        super().__init__(root_real, cache, whitespace=whitespace)
        self._renames: dict[str, Any] = {}  # commit -> git.Renames (None: no answer), per pass
        self._walked: list[str] | None = None
        self._inodes: dict[int, list[str]] = {}  # inode -> walked files (`DirEntry.inode`: no extra stat)
        self._since_ns: int | None = None  # when the memory being checked was anchored (`check`)
        self._untracked: list[str] | None = None
        self._spent = 0

    def then_of(self, ref: AnchorRef) -> bytes | None:
        """The anchor's file as committed at `ref.commit` when it was recorded clean, else None
        (one `git cat-file` per anchor and process: a commit's blob never changes)."""
        if not ref.commit or ref.dirty is not False:
            return None
        key = (self.root_real, ref.commit, ref.path)
        if key in _THEN_BLOBS:
            return _THEN_BLOBS[key]
        from ..core.errors import HistoryError
        from ..core.git import read_git

        try:
            then: bytes | None = read_git(self.root_real, "cat-file", "blob", f"{ref.commit}:./{ref.path}") or None
        except (HistoryError, OSError):
            return None
        with _followed_lock:
            if len(_THEN_BLOBS) >= 64:  # a pass over many stale anchors keeps the last few files
                _THEN_BLOBS.clear()
            _THEN_BLOBS[key] = then
        return then

    def _follow(self, ref: AnchorRef, lost: AnchorCheck) -> AnchorCheck:
        """Where a lost anchor's content is now: `moved` (or `reformatted`) with `path_now`, `changed`
        with `path_now` when git names its file's new path and the text differs, else `lost`; kept
        while the file found hashes as it did (`_FOLLOWED`, the manifest's `move_of`)."""
        key = (self.root_real, ref, self.strict)
        known = _FOLLOWED.get(key)
        if known is not None:
            path_now, sha_now, result = known
            if self._sha_of(path_now) == sha_now:
                return result
        gone = lost.verdict is Verdict.DELETED
        kept = _move_key(ref)
        lead = self.cache.move_of(kept)
        found: AnchorCheck | None = None
        if lead is not None and lead[0] == ref.path and lead[1] != ref.path:
            sha = self._sha_of(lead[1])  # through `_locate`: a crafted path is refused, never read
            if sha is not None and sha == lead[2]:
                again = self._judge_in(ref, lead[1])
                if again is not None and again.verdict in (Verdict.MOVED, Verdict.REFORMATTED):
                    found = again
        split = lost.verdict is Verdict.CHANGED  # lines gone from a file still there
        if found is None and split:
            unfound = _UNFOUND.get(key)
            if (unfound is not None and unfound[0] == self._sha_of(ref.path) and unfound[1] == self._index_sig()
                    and self.cache.now() < unfound[2]):
                return lost
        result = found if found is not None else self._search(ref, lost)
        if split and result is lost:
            with _followed_lock:
                _UNFOUND[key] = (self._sha_of(ref.path), self._index_sig(), self.cache.now() + self.cache.ttl)
                while len(_UNFOUND) > _FOLLOWED_KEPT:
                    _UNFOUND.popitem(last=False)
        if result.path_now is not None and gone:
            with _followed_lock:
                _GONE.setdefault(self.root_real, set()).add(ref.path)
        now = result.path_now
        sha = self._sha_of(now) if now is not None else None
        if now is not None and sha is not None:
            with _followed_lock:
                _FOLLOWED[key] = (now, sha, result)
                while len(_FOLLOWED) > _FOLLOWED_KEPT:
                    _FOLLOWED.popitem(last=False)
            if result.verdict in (Verdict.MOVED, Verdict.REFORMATTED):
                self.cache.note_move(kept, ref.path, now, sha, gone)
                return result
        if lead is not None:
            self.cache.drop_move(kept)
        return result

    def _index_sig(self) -> Any:
        """The stat of git's index (None: not known to be in git): a `git add` changes it."""
        top = _TOPS.get(self.root_real)
        if not top:
            return None
        try:
            st = os.lstat(os.path.join(str(top), ".git", "index"))
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    def _gone_paths(self) -> set[str] | frozenset[str] | None:
        """Anchored paths found gone and followed, by this process (`_GONE`) or an earlier one."""
        here = _GONE.get(self.root_real)
        kept = self.cache.moved_from()
        if not kept:
            return here
        return kept | here if here else kept

    def _search(self, ref: AnchorRef, lost: AnchorCheck) -> AnchorCheck:
        """The search behind `_follow`, over the candidates the module says (a file untouched
        since holds a copy, not a move; history's `_relocate` has the same rule). Found identical:
        `moved`. Else a gone file's positive trace gives `changed` with that `path_now`: git's
        rename, else without git the same inode renamed, else the same symbol, other text, in a
        file new since."""
        from ..anchor.symbols import MAX_PARSE_BYTES, language_for

        narrowed = bool(ref.symbol or ref.lines)
        gone = lost.verdict is Verdict.DELETED
        renames = self._git_renames(ref.commit) if ref.commit else None
        evidence: AnchorCheck | None = None
        if gone and renames is not None and _utf8(renames.renamed.get(ref.path, "")):
            found = self._judge_in(ref, renames.renamed[ref.path])
            if found is not None and found.verdict in (Verdict.MOVED, Verdict.REFORMATTED):
                return found
            if found is not None and found.verdict is Verdict.CHANGED:
                evidence = found
        since: int | None = None
        if renames is not None:
            candidates = [p for p in self._git_added(renames)
                          if p != ref.path and _utf8(p) and not is_state_name(p.partition("/")[0])]
        else:
            candidates = [p for p in self._walk() if p != ref.path]
            seen = self.cache.stat_of(ref.path) if gone else None
            since = self._since_ns if self._since_ns is not None else (seen[2] if seen is not None else None)
            if not gone:  # lines gone from a file still there: only files of its kind changed since count
                ext = os.path.splitext(ref.path)[1]
                candidates = self._newer([p for p in candidates if os.path.splitext(p)[1] == ext], since)
        candidates.sort(key=_closeness(ref.path))
        touched = sorted((p for p in renames.modified if p != ref.path and _utf8(p)),
                         key=_closeness(ref.path)) if renames is not None and narrowed else []
        if gone and ref.sha256:  # the very bytes at a new path
            if renames is not None:
                added = set(candidates)
                for path in self.cache.paths_for(ref.sha256):  # already hashed: no read needed
                    if path in added and self._sha_of(path) == ref.sha256:
                        return self._moved_whole(ref, path)
            size = (self.cache.stat_of(ref.path) or (None,))[0]  # its size when last hashed narrows the search
            for path in candidates:
                got = self._size(path)
                if not got or (size is not None and got != size):
                    continue  # an empty file is no evidence: its content is everywhere
                if not self._afford(got):
                    break
                if self._sha_of(path) == ref.sha256:
                    return self._moved_whole(ref, path)
        if gone and evidence is None and renames is None:
            renamed = self._same_inode(ref.path)
            if renamed is not None:
                found = self._judge_in(ref, renamed)
                if found is not None and found.verdict in (Verdict.MOVED, Verdict.REFORMATTED):
                    return found
                if found is not None and found.verdict is Verdict.CHANGED:
                    evidence = found
        if narrowed:
            lang = language_for(ref.path)
            leaf = ref.symbol.rsplit(".", 1)[-1].encode() if ref.symbol else None
            ext = os.path.splitext(ref.path)[1]
            for path in [*candidates, *touched]:
                if (language_for(path) != lang) if ref.symbol else (os.path.splitext(path)[1] != ext):
                    continue
                size = self._size(path)
                if size is None or size > MAX_PARSE_BYTES or not self._afford(size):
                    continue
                data = self._read(path)
                if data is None or (leaf is not None and leaf not in data):
                    continue
                found = self._judge_in(ref, path, data)
                if (found is not None and found.verdict in (Verdict.MOVED, Verdict.REFORMATTED)
                        and (ref.symbol or _distinctive(data, found.lines_now))):
                    return found
                if (gone and evidence is None and ref.symbol and found is not None and found.verdict is Verdict.CHANGED
                        and (path not in touched if renames is not None else self._newer([path], since))):
                    evidence = found._replace(
                        detail=f"{ref.spec} changed: {ref.path} gone, {ref.symbol} found with other text in {path}")
        return evidence or lost

    def body_candidates(self, ref: AnchorRef) -> list[str]:
        """Specs (`PATH#NAME`) of definitions whose text is a symbol anchor's text under their
        own name (under the same name, its tokens too when it carries a token hash): in its own
        file, then in the files new since, closest first. What `reanchor` offers for a missing
        symbol; bounded like the moved-content search."""
        from ..anchor.anchors import text_hash
        from ..anchor.symbols import MAX_PARSE_BYTES, language_for, list_symbols, token_hash

        if not ref.symbol:
            return []
        renames = self._git_renames(ref.commit) if ref.commit else None
        paths = [ref.path]
        if renames is not None:
            if ref.path in renames.renamed:
                paths.append(renames.renamed[ref.path])
            paths += self._git_added(renames)
        else:
            paths += sorted(self._walk(), key=_closeness(ref.path))
        lang = language_for(ref.path)
        old_name = ref.symbol.rsplit(".", 1)[-1].encode()
        found: list[str] = []
        for path in dict.fromkeys(paths):
            if language_for(path) != lang or not _utf8(path):
                continue
            size = self._size(path)
            if size is None or size > MAX_PARSE_BYTES or not self._afford(size):
                continue
            data = self._read(path)
            if data is None:
                continue
            try:
                symbols = list_symbols(path, data)
            except AnchorError:
                continue
            for sym in symbols:
                if path == ref.path and sym.name == ref.symbol:
                    continue
                text = data[sym.start_byte:sym.end_byte].replace(b"\r\n", b"\n")
                name = sym.name.rsplit(".", 1)[-1].encode()
                as_old = text.replace(name, old_name, 1)  # the body under the old name
                if text_hash(as_old) == ref.content_hash or (
                        name == old_name and ref.token_hash
                        and token_hash(path, data, sym.start_byte, sym.end_byte) == ref.token_hash):
                    found.append(f"{path}#{sym.name}")
        return found

    def _moved_whole(self, ref: AnchorRef, path: str) -> AnchorCheck:
        """The anchor's file, byte for byte, at `path` (a narrowed anchor: at its own lines)."""
        if ref.symbol or ref.lines:
            data = self._read(path)
            if data is not None:
                found = judge_at(ref, path, data, strict=self.strict)
                if found[0] is Verdict.MOVED:
                    return AnchorCheck(ref, Verdict.MOVED, found[1], found[2], path)
        return AnchorCheck(ref, Verdict.MOVED, f"{ref.spec} now at {path}", ref.lines, path)

    def _judge_in(self, ref: AnchorRef, path: str, data: bytes | None = None) -> AnchorCheck | None:
        """`ref` judged against the file at `path` (another file than its own)."""
        if not (ref.symbol or ref.lines):  # the file's hash through the cache: no read when warm
            sha = self._sha_of(path)
            if sha is None:
                return None
            if sha == ref.sha256:
                return self._moved_whole(ref, path)
            return AnchorCheck(ref, Verdict.CHANGED, f"{ref.path} renamed to {path} and changed", None, path)
        if data is None:
            data = self._read(path)
            if data is None:
                return None
        text = old_text(ref, self.then_of(ref)) if ref.lines and ref.token_hash and not self.strict else None
        verdict, detail, where = judge_at(ref, path, data, strict=self.strict, text=text)
        if verdict in (Verdict.UNREADABLE, Verdict.SYMBOL_MISSING):
            return AnchorCheck(ref, verdict, detail, None)
        if verdict is Verdict.CHANGED and path not in detail:
            detail = f"{ref.path} renamed to {path}; {detail}"
        return AnchorCheck(ref, verdict, detail, where, path)

    def _afford(self, size: int) -> bool:
        self._spent += max(size, 4096)
        return self._spent <= _FOLLOW_BUDGET

    def _git_renames(self, commit: str) -> Any:
        """git's renames and new files since `commit` (`anchorfs.core.git.renames_since`), once per
        commit per pass, the untracked files listed beside the first diff (kept for `_git_added`);
        None outside git or when git cannot answer."""
        if commit in self._renames:
            return self._renames[commit]
        from pathlib import Path

        from ..core.errors import HistoryError
        from ..core.git import renames_since, toplevel

        found = None
        try:
            top = _TOPS.get(self.root_real, "")
            if top == "":
                top = _TOPS[self.root_real] = toplevel(Path(self.root_real))
            if top is not None:
                ahead = _AHEAD.pop(self.root_real, None)
                if ahead is not None and self._untracked is None:
                    ahead[0].join()
                    self._untracked = ahead[1][0] if ahead[1] else None
                found = renames_since(Path(self.root_real), [commit], untracked=self._untracked is None)
                if found.untracked is not None:  # listed beside the diff: `_git_added` needs them next
                    self._untracked = found.untracked
        except (HistoryError, OSError):
            found = None
        self._renames[commit] = found
        return found

    def _git_added(self, renames: Any) -> list[str]:
        """`renames.added` and the untracked files (one `git ls-files --others` per pass)."""
        if self._untracked is None:
            from pathlib import Path

            from ..core.errors import HistoryError
            from ..core.git import untracked_files

            try:
                self._untracked = untracked_files(Path(self.root_real))
            except (HistoryError, OSError):
                self._untracked = []
        return list(dict.fromkeys([*renames.added, *self._untracked]))

    def _walk(self) -> list[str]:
        """Every regular file under the root (hidden folders, `_SKIP_DIRS` and links left out), once per pass."""
        if self._walked is not None:
            return self._walked
        out: list[str] = []
        stack = [""]
        while stack and len(out) < _WALK_FILES:
            rel = stack.pop()
            try:
                with os.scandir(f"{self.root_real}/{rel}" if rel else self.root_real) as it:
                    entries = sorted(it, key=attrgetter("name"))
            except OSError:
                continue
            for entry in entries:
                name = entry.name
                if name.startswith(".") or name in _SKIP_DIRS or not _utf8(name):
                    continue  # a name that is not UTF-8 cannot be anchored (nor stored in the ledger)
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(f"{rel}/{name}" if rel else name)
                    elif entry.is_file(follow_symlinks=False):
                        path = f"{rel}/{name}" if rel else name
                        out.append(path)
                        self._inodes.setdefault(entry.inode(), []).append(path)
                except OSError:
                    continue
        self._walked = out
        return out

    def _newer(self, paths: list[str], since_ns: int | None) -> list[str]:
        """The files among `paths` changed (mtime or ctime) after `since_ns` (None: none qualifies)."""
        if since_ns is None:
            return []
        out = []
        for path in paths:
            st = self._stat_of(path)
            if st is not None and max(st.st_mtime_ns, st.st_ctime_ns) > since_ns:
                out.append(path)
        return out

    def _same_inode(self, old: str) -> str | None:
        """Without git, the file a gone one was renamed to: a walked file with the inode the hash
        cache last saw at `old`, on the root's device, its ctime later than that entry's. A freed
        inode is soon reused, so it must also keep the extension and be within a factor of two
        of the size. Closest path first."""
        seen = self.cache.stat_of(old)
        if seen is None:
            return None
        size, _, ctime_ns, ino = seen
        ext = os.path.splitext(old)[1]
        self._walk()
        try:
            dev = os.lstat(self.root_real).st_dev
        except OSError:
            return None
        for path in sorted(self._inodes.get(ino, ()), key=_closeness(old)):
            st = self._stat_of(path)
            if (path != old and st is not None and st.st_ino == ino and st.st_dev == dev and st.st_ctime_ns > ctime_ns
                    and os.path.splitext(path)[1] == ext and size // 2 <= st.st_size <= 2 * size + 1):
                return path
        return None


def _move_key(ref: AnchorRef) -> str:
    """An anchor's identity in the manifest's found moves: its spec and the hash it rests on."""
    return f"{ref.spec}\n{ref.content_hash or ref.sha256 or ''}"


def _utf8(name: str) -> bool:
    """Whether a (surrogate-escaped) file name is not empty and valid UTF-8: only those can be anchored."""
    return bool(name) and _encodes(name)


def _closeness(old: str) -> Callable[[str], tuple[bool, int, str]]:
    """Sort key of candidate paths for content that was at `old`: same name, most folders in common, name."""
    base = old.rpartition("/")[2]
    parts = old.split("/")[:-1]

    def key(path: str) -> tuple[bool, int, str]:
        head, _, name = path.rpartition("/")
        common = 0
        for a, b in zip(parts, head.split("/") if head else []):
            if a != b:
                break
            common += 1
        return (name != base, -common, path)

    return key
