"""The drift pass: re-check anchors through the hash cache, judge memories, demote scores.

This runs on every read, so the common case (nothing moved) costs one `lstat` per anchored
file: the whole-file hash comes from the racy-safe cache, folders are checked once per pass,
and a file is only read again when its stat moved. `check` does one memory (a query's hits);
`check_all` does a whole workspace in batches whose files the cache vouches for at once.
Staleness needs positive evidence: an anchor we cannot read is `unknown`, never `stale`.
"""

from __future__ import annotations

import os
import stat
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from datetime import datetime
from itertools import chain, repeat
from operator import attrgetter, is_, itemgetter
from typing import Any, NamedTuple, cast, overload

from .anchors import MAX_FILE_BYTES, STATE_DIR, is_state_name, judge, judge_at, resolve_path
from .errors import AnchorError, UnsafePathError
from .guard import EscapedError, NotRegularError, SwappedError, TooLargeError, read_guarded
from .hashing import HashCache
from .model import AnchorCheck, AnchorRef, Drift, Memory, Verdict, drift_of, utcnow

__all__ = ["DriftChecker", "MemoryDrift", "DriftReport", "envelope", "weak_envelope", "WEAK_MARK"]


class MemoryDrift(NamedTuple):
    """One memory's drift and its anchors' checks (a tuple: one is built per memory per read)."""

    memory: Memory
    drift: Drift
    checks: tuple[AnchorCheck, ...]

    def to_dict(self) -> dict[str, Any]:
        out = {
            "id": self.memory.id,
            "content": self.memory.content,
            "drift": self.drift.value,
            "anchors": [c.to_dict() for c in self.checks],
        }
        if self.memory.stale_claims:  # what `verify --mark` found stale in the text itself
            out["stale_claims"] = [c.to_dict() for c in self.memory.stale_claims]
        return out

    def with_claims(self) -> MemoryDrift:
        """This drift as every read serves it: stale when `verify --mark` found a claim of the
        memory's own text stale (`Memory.stale_claims`), whatever its anchors say."""
        if self.memory.stale_claims and self.drift is not Drift.STALE:
            return self._replace(drift=Drift.STALE)
        return self


class DriftReport:
    """Every checked memory's drift, in the order given.

    Only the memories a pass had to look at one by one carry a result; the rest (every anchor
    still hashes as recorded) are built on demand: a whole-workspace pass over 100,000
    unchanged memories should cost about the stat loop over their files, and most callers only
    count them or read the few that are not fresh. `checked` may itself build its memories on
    demand (`driftplan`: a new process's pass from the fold snapshot's plan): counts,
    `flagged`, `stale` and `anchored_paths` never read it whole.
    """

    __slots__ = ("checked", "_found", "_flagged", "_built", "_claims", "_paths")
    checked: Sequence[Memory]

    def __init__(self, checked: Sequence[Memory] = (), results: Sequence[MemoryDrift | None] | None = None) -> None:
        self.checked = list(checked)
        self._claims: Sequence[int] | None = None
        self._paths: list[str] | None = None
        found: dict[int, MemoryDrift] = {}
        if results is not None:
            if len(results) != len(self.checked):
                raise ValueError("one result per checked memory")
            found = {i: r for i, r in enumerate(results) if r is not None}
        self._set(found)

    @classmethod
    def _of(cls, checked: Sequence[Memory], found: dict[int, MemoryDrift], *, claims: Sequence[int] | None = None,
            paths: list[str] | None = None) -> DriftReport:
        """A pass's report from the results it built, by position (taken as they are, no copy).
        `claims` (the positions of the memories with `stale_claims`) and `paths` (`anchored_paths`),
        when the caller knows them without reading every memory."""
        report = cls.__new__(cls)
        report.checked = checked
        report._claims, report._paths = claims, paths
        report._set(found)
        return report

    def _set(self, found: dict[int, MemoryDrift]) -> None:
        self._found = found
        self._flagged = [found[i] for i in sorted(found) if found[i].drift is not Drift.FRESH]
        self._built: list[MemoryDrift] | None = None

    @property
    def memories(self) -> list[MemoryDrift]:
        """One result per checked memory (fresh ones built on first read)."""
        if self._built is None:
            found = self._found
            self._built = [found.get(i) or _all_fresh(m) for i, m in enumerate(self.checked)]
        return self._built

    def with_claims(self, unanchored: Sequence[Memory] = ()) -> DriftReport:
        """The report as reads serve it: a memory whose text `verify --mark` found stale counts
        stale whatever its anchors say, and `unanchored` such memories (nothing for the pass to
        check) are added after the checked ones. The anchors' own drift, which drift.json
        keeps, is this report before the call."""
        checked = self.checked
        claims = self._claims
        if claims is None:
            claims = [i for i, m in enumerate(checked) if m.stale_claims]
        if not unanchored and not claims:
            return self
        found = dict(self._found)
        for i in claims:
            found[i] = (found.get(i) or _all_fresh(checked[i])).with_claims()
        tail = list(unanchored)
        base = len(checked)
        for k, m in enumerate(tail):
            found[base + k] = _new(MemoryDrift, (m, Drift.STALE, ()))
        if tail:
            checked = [*checked, *tail] if isinstance(checked, list) else _Chained(checked, tail)
        return DriftReport._of(checked, found, claims=[*claims, *range(base, base + len(tail))], paths=self._paths)

    def anchored_paths(self) -> list[str]:
        """The checked memories' distinct anchored paths, in order of first use (the files the
        report rests on, with `paths_now`: what `anchorfs.memo` records the stats of)."""
        if self._paths is not None:
            return list(self._paths)
        return list(dict.fromkeys(map(_PATH, chain.from_iterable(map(_ANCHORS, self.checked)))))

    def paths_now(self) -> list[str]:
        """Where anchors followed to another file are now (`path_now`): files the report rests
        on besides the anchored ones (`anchorfs.memo` records them too)."""
        return [c.path_now for r in self._found.values() for c in r.checks if c.path_now is not None]

    @property
    def flagged(self) -> list[MemoryDrift]:
        """The memories that are not fresh (stale or unknown), without building the rest."""
        return list(self._flagged)

    def count(self, drift: Drift) -> int:
        flagged = sum(1 for m in self._flagged if m.drift is drift)
        return len(self.checked) - len(self._flagged) if drift is Drift.FRESH else flagged

    @property
    def stale(self) -> list[MemoryDrift]:
        return [m for m in self._flagged if m.drift is Drift.STALE]

    def to_dict(self, *, every: bool = False) -> dict[str, Any]:
        """The counts, and the memories that are not fresh (`every`: all of them, in order).

        At scale the fresh ones are nearly all of it and say nothing (100,000 of them printed
        44 MB): what a hook or an agent acts on is the counts and the few to re-verify."""
        return {
            "checked": len(self.checked),
            "stale": self.count(Drift.STALE),
            "unknown": self.count(Drift.UNKNOWN),
            "fresh": self.count(Drift.FRESH),
            "memories": [m.to_dict() for m in (self.memories if every else self._flagged)],
        }


class _Chained(Sequence[Memory]):
    """Two sequences of memories read as one (a report built on demand, then the unanchored
    memories `with_claims` adds), without reading the first whole."""

    __slots__ = ("_head", "_tail")

    def __init__(self, head: Sequence[Memory], tail: list[Memory]) -> None:
        self._head, self._tail = head, tail

    def __len__(self) -> int:
        return len(self._head) + len(self._tail)

    @overload
    def __getitem__(self, i: int) -> Memory: ...

    @overload
    def __getitem__(self, i: slice) -> list[Memory]: ...

    def __getitem__(self, i: int | slice) -> Memory | list[Memory]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n, cut = len(self), len(self._head)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        return self._head[i] if i < cut else self._tail[i - cut]

    def __iter__(self) -> Iterator[Memory]:
        yield from self._head
        yield from self._tail


_new = tuple.__new__  # skips a NamedTuple's Python-level __new__: same values, several times faster


def _all_fresh(memory: Memory) -> MemoryDrift:
    """The result of a memory whose every anchor still hashes as recorded."""
    fresh = Verdict.FRESH
    checks = tuple([_new(AnchorCheck, (ref, fresh, "unchanged", ref.lines, None)) for ref in memory.anchors])
    return _new(MemoryDrift, (memory, Drift.FRESH, checks))


_ANCHORS = attrgetter("anchors")
_PATH = attrgetter("path")
_SHA = attrgetter("sha256")
_HEAD = itemgetter(0)
_CHUNK = 4096
"""Files hashed per call in a cold whole-workspace pass: paces the progress bar."""


_ERRNO_WORDS = {13: "permission denied", 21: "a directory where a file was", 40: "too many symlink levels"}
_RECHECKS = 2
"""How often a file swapped between its check and its open is checked afresh before it is
called unreadable ("kept changing"): the guarded open refuses the swap, the re-check judges
what is there now (a link out is `unsafe`, a FIFO `unreadable`, another file its own bytes)."""


_FOLLOW_BUDGET = 16 * 1024 * 1024
"""Bytes one pass may read or hash looking for moved content (candidate files, whole)."""
_WALK_FILES = 200_000
"""Files one pass may list in a workspace without git when it looks for moved content."""
_SKIP_DIRS = frozenset({"node_modules", "__pycache__"})
_FOLLOWED: OrderedDict[tuple[Any, ...], tuple[str, str, AnchorCheck]] = OrderedDict()
"""Answers of the moved-content search, kept while the file found still hashes as it did (the
hash cache's rules): a long-lived process pays the search once per move, not once per read."""
_FOLLOWED_KEPT = 4096
_UNFOUND: OrderedDict[tuple[Any, ...], tuple[str | None, Any, float]] = OrderedDict()
"""Lines gone from a file still there and found in no new file: kept, as the hash cache keeps a
hash, while that file hashes the same, git's index has the same stat and the cache's TTL runs
(a changed line anchor is the most common stale memory: no git process on every read of it)."""
_followed_lock = threading.Lock()
_GONE: dict[str, set[str]] = {}
"""Per root, anchored paths found gone (and followed) by an earlier pass. The batch pre-pass
`lstat`s the root folder in their place: it never matches a file's cache entry, so their
memories take the one-by-one check (which answers from `_FOLLOWED`), and the rest of the
batch stays in the C loop, which a path that fails its `lstat` would send one file at a time."""
_THEN_TOKENS: dict[tuple[str, AnchorRef], str | None] = {}
"""Token hashes of anchors recorded without one, read back from git's blob of then."""
_TOPS: dict[str, Any] = {}
"""Per root, the git top level (None outside git): asked once per process."""


class DriftChecker:
    """One drift pass. Memoizes per anchor and per directory; create a new one per read.

    `whitespace` is `drift.whitespace` ("tokens" or "strict"); None reads it from the
    workspace's config the first time a narrowed anchor's file has changed.
    """

    def __init__(self, root_real: str, cache: HashCache, *, whitespace: str | None = None) -> None:
        self.root_real = root_real
        self.cache = cache
        self._whitespace = whitespace
        self._renames: dict[str, Any] = {}  # commit -> git.Renames (None: no answer), per pass
        self._walked: list[str] | None = None
        self._inodes: dict[int, list[str]] = {}  # inode -> walked files (`DirEntry.inode`: no extra stat)
        self._stats: dict[str, os.stat_result | None] = {}  # candidates' `lstat`, once per pass
        self._since_ns: int | None = None  # when the memory being checked was anchored (`check`)
        self._untracked: list[str] | None = None
        self._spent = 0
        self._dirs: dict[str, str | None] = {}
        self._files: dict[str, tuple[str, os.stat_result] | AnchorCheck] = {}
        self._full: dict[str, str] = {}
        self._data: dict[str, bytes] = {}
        self._plain_dirs: dict[str, bool] = {}
        self._lstats: dict[str, os.stat_result] = {}  # from the batch pre-pass, used once by `_locate`
        self._dir_stats: dict[str, os.stat_result | None] = {}  # `_odd_dirs`'s folder stats (None: gone)

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
        """(sha256, stat) of the file at an anchor's path, or the verdict that stops there.

        Memoized per path for the pass: many memories often rest on one file.
        """
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

    def check_anchor(self, ref: AnchorRef, *, _rechecks: int = _RECHECKS) -> AnchorCheck:
        probe = self._probe(ref.path)
        if type(probe) is tuple:  # faster than isinstance: AnchorCheck is a tuple subclass
            followed = _GONE.get(self.root_real)
            if followed and ref.path in followed:  # back again: the batch pre-pass may vouch for it
                with _followed_lock:
                    followed.discard(ref.path)
            if ref.path in self.cache.moved_from():  # and the moves found while it was gone are void
                self.cache.drop_moves_from(ref.path)
            sha, st = cast("tuple[str, os.stat_result]", probe)
            if sha == ref.sha256:
                return AnchorCheck(ref, Verdict.FRESH, "unchanged", ref.lines)
            changed = self._changed(ref, st)
            if changed is not None:
                if changed.verdict is Verdict.SYMBOL_MISSING or (
                        changed.verdict is Verdict.CHANGED and ref.lines and not ref.symbol):
                    return self._follow(ref, changed)  # lines gone from a file still there: split off?
                return changed
            # Swapped between the hash and the read: forget this pass's view of it, look again.
            self._files.pop(ref.path, None)
            self._full.pop(ref.path, None)
            self._data.pop(ref.path, None)
            if _rechecks > 0:
                return self.check_anchor(ref, _rechecks=_rechecks - 1)
            return AnchorCheck(ref, Verdict.UNREADABLE, f"{ref.path} unreadable: it kept changing while being read")
        assert isinstance(probe, AnchorCheck)
        detail = probe.detail
        if probe.verdict is Verdict.UNSAFE and ref.spec != ref.path:
            detail = f"{ref.spec} now resolves outside the workspace"
        if probe.verdict is Verdict.DELETED:
            gone = self._follow(ref, AnchorCheck(ref, Verdict.DELETED, detail))
            if gone.verdict is Verdict.DELETED and ref.commit:  # a private ledger's memory from another branch
                from .team import elsewhere

                why = elsewhere(self.root_real, ref.commit, ref.path)
                if why is not None:
                    return AnchorCheck(ref, Verdict.UNREADABLE, why)
            return gone
        return AnchorCheck(ref, probe.verdict, detail)

    def _changed(self, ref: AnchorRef, st: os.stat_result) -> AnchorCheck | None:
        """The file's hash moved: judge a narrowed anchor by its own text.

        The file is read through the guarded open, held to the stat its hash was taken with:
        None when it was swapped or removed since (the caller checks it afresh).
        """
        if not ref.symbol and not ref.lines:
            return AnchorCheck(ref, Verdict.CHANGED, f"{ref.path} changed")
        too_large = AnchorCheck(ref, Verdict.UNREADABLE, f"{ref.path} unreadable: larger than {MAX_FILE_BYTES >> 20} MiB")
        if st.st_size > MAX_FILE_BYTES:
            return too_large
        data = self._data.get(ref.path)
        if data is None:
            try:
                data = read_guarded(self._full[ref.path], root=self.root_real, expect=st, max_bytes=MAX_FILE_BYTES)
            except (SwappedError, FileNotFoundError):
                return None
            except EscapedError:
                return AnchorCheck(ref, Verdict.UNSAFE, f"{ref.spec} now resolves outside the workspace")
            except NotRegularError:
                return AnchorCheck(ref, Verdict.UNREADABLE, f"{ref.path} unreadable: not a regular file")
            except TooLargeError:
                return too_large
            except OSError as exc:
                return AnchorCheck(ref, Verdict.UNREADABLE, f"{ref.path} unreadable: {_why(exc)}")
            self._data[ref.path] = data
        verdict, detail, where = judge(ref, data, strict=self.strict)
        if verdict is Verdict.CHANGED and not ref.token_hash and self._same_tokens_as_then(ref, data, where):
            return AnchorCheck(ref, Verdict.REFORMATTED, f"{ref.spec} reformatted: same tokens, other layout", where)
        return AnchorCheck(ref, verdict, detail, where)

    def _same_tokens_as_then(self, ref: AnchorRef, data: bytes, where: tuple[int, int] | None) -> bool:
        """For an anchor recorded without a token hash: whether its text has the tokens it had,
        the text of then read back from git (the file at the anchor's commit, when it was
        committed as it was hashed: its sha256 must match). One `git cat-file` per such anchor,
        only when its bytes changed; never with `drift.whitespace = "strict"`."""
        from .anchors import narrowed_tokens
        from .symbols import language_for

        if self.strict or not ref.commit or ref.dirty is not False or language_for(ref.path) is None:
            return False
        from pathlib import Path

        from .errors import HistoryError
        from .git import run_git
        from .hashing import sha256_bytes

        key = (self.root_real, ref)
        if key in _THEN_TOKENS:  # a commit's blob never changes: once per process
            old = _THEN_TOKENS[key]
        else:
            try:
                then = run_git(Path(self.root_real), "cat-file", "blob", f"{ref.commit}:./{ref.path}", check=False)
            except (HistoryError, OSError):
                return False
            old = narrowed_tokens(ref, then) if then and sha256_bytes(then) == ref.sha256 else None
            with _followed_lock:
                if len(_THEN_TOKENS) >= _FOLLOWED_KEPT:
                    _THEN_TOKENS.clear()
                _THEN_TOKENS[key] = old
        if old is None:
            return False
        now = narrowed_tokens(ref if ref.symbol else replace(ref, lines=where or ref.lines), data)
        return old is not None and old == now

    @property
    def strict(self) -> bool:
        """`drift.whitespace = "strict"`: every byte counts, a reformat is a change."""
        if self._whitespace is None:
            from pathlib import Path

            from .config import load_config
            from .errors import AnchorfsError

            try:
                self._whitespace = str(load_config(Path(self.root_real))["drift.whitespace"])
            except (AnchorfsError, OSError):
                self._whitespace = "tokens"
        return self._whitespace == "strict"

    # -- moved content ---------------------------------------------------------------------

    def _follow(self, ref: AnchorRef, lost: AnchorCheck) -> AnchorCheck:
        """Where the content of an anchor that would be `deleted` or `symbol_missing` is now:
        `moved` with `path_now` when found identical (or `reformatted` there), `changed` with
        `path_now` when git names its file's new path and the text there differs, else `lost`.

        Answers are kept while the file found hashes as it did: in this process (`_FOLLOWED`)
        and, for the next ones, in the manifest (`HashCache.move_of`), re-judged there before
        use, so a new CLI process pays neither git nor a search for a move already found."""
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
        """Anchored paths found gone and followed, by this process (`_GONE`) or an earlier one
        (the manifest's moves): the batch pre-pass `lstat`s the root in their place."""
        here = _GONE.get(self.root_real)
        kept = self.cache.moved_from()
        if not kept:
            return here
        return kept | here if here else kept

    def _search(self, ref: AnchorRef, lost: AnchorCheck) -> AnchorCheck:
        """The search behind `_follow`. In git only new files count as where content went:
        what `git diff -M` since the anchor's commit renamed or added, and untracked files (a
        copy that was already there is a copy, not a move). Without git every file under the
        root does for a gone file, closest paths first (same name, then the most folders in
        common), so a renamed file wins over a copy elsewhere; for lines gone from a file still
        there (a split), only the files changed since the anchor was taken.

        Found identical: `moved`. Not identical, but a gone file's positive trace, `changed`
        with that `path_now` (a candidate, still stale): git's rename, else without git the
        same inode renamed (`_same_inode`), else the same symbol under its name, other text, in
        a file new since."""
        from .symbols import MAX_PARSE_BYTES, language_for

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
        if gone and ref.sha256:  # the very bytes at a new path
            if renames is not None:
                added = set(candidates)
                for path in self.cache.paths_for(ref.sha256):  # already hashed: no read needed
                    if path in added and self._sha_of(path) == ref.sha256:
                        return self._moved_whole(ref, path)
            size = self.cache.size_of(ref.path)
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
            for path in candidates:
                if (language_for(path) != lang) if ref.symbol else (os.path.splitext(path)[1] != ext):
                    continue
                size = self._size(path)
                if size is None or size > MAX_PARSE_BYTES or not self._afford(size):
                    continue
                data = self._read(path)
                if data is None or (leaf is not None and leaf not in data):
                    continue
                found = self._judge_in(ref, path, data)
                if found is not None and found.verdict in (Verdict.MOVED, Verdict.REFORMATTED):
                    return found
                if (gone and evidence is None and ref.symbol and found is not None
                        and found.verdict is Verdict.CHANGED):
                    if renames is not None or self._newer([path], since):  # new since: a candidate
                        evidence = found._replace(
                            detail=f"{ref.spec} changed: {ref.path} gone, {ref.symbol} found with other text in {path}")
        return evidence or lost

    def body_candidates(self, ref: AnchorRef) -> list[str]:
        """Specs (`PATH#NAME`) of definitions whose text is a symbol anchor's text under their
        own name (bytes; under the same name, tokens too when it carries a token hash): in its own file under another name, then in the
        files new since (renamed, added), closest first. What `reanchor` offers for a
        missing symbol; bounded like the moved-content search."""
        from .anchors import text_hash
        from .symbols import MAX_PARSE_BYTES, language_for, list_symbols, token_hash

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
        verdict, detail, where = judge_at(ref, path, data, strict=self.strict)
        if verdict in (Verdict.UNREADABLE, Verdict.SYMBOL_MISSING):
            return AnchorCheck(ref, verdict, detail, None)
        if verdict is Verdict.CHANGED and path not in detail:
            detail = f"{ref.path} renamed to {path}; {detail}"
        return AnchorCheck(ref, verdict, detail, where, path)

    def _afford(self, size: int) -> bool:
        self._spent += max(size, 4096)
        return self._spent <= _FOLLOW_BUDGET

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

    def _git_renames(self, commit: str) -> Any:
        """git's renames and new files since `commit` (`anchorfs.git.renames_since`), once per
        commit per pass; None outside git or when git cannot answer. Untracked files are not
        in `added` yet: `_git_added` asks for them, once per pass, when a search needs them."""
        if commit in self._renames:
            return self._renames[commit]
        from pathlib import Path

        from .errors import HistoryError
        from .git import renames_since, toplevel

        found = None
        try:
            top = _TOPS.get(self.root_real, "")
            if top == "":
                top = _TOPS[self.root_real] = toplevel(Path(self.root_real))
            if top is not None:
                found = renames_since(Path(self.root_real), [commit], untracked=False)
        except (HistoryError, OSError):
            found = None
        self._renames[commit] = found
        return found

    def _git_added(self, renames: Any) -> list[str]:
        """`renames.added` and the untracked files (one `git ls-files --others` per pass)."""
        if self._untracked is None:
            from pathlib import Path

            from .errors import HistoryError
            from .git import untracked_files

            try:
                self._untracked = untracked_files(Path(self.root_real))
            except (HistoryError, OSError):
                self._untracked = []
        return list(dict.fromkeys([*renames.added, *self._untracked]))

    def _walk(self) -> list[str]:
        """Every regular file under the root (hidden folders, `node_modules` and links left
        out), listed once per pass and only when a search needs it: the no-git fallback."""
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

    def _newer(self, paths: list[str], since_ns: int | None) -> list[str]:
        """The files among `paths` changed (mtime or ctime) after `since_ns`: without git, the
        files new or changed since an anchor was taken. None known: no file qualifies."""
        if since_ns is None:
            return []
        out = []
        for path in paths:
            st = self._stat_of(path)
            if st is not None and max(st.st_mtime_ns, st.st_ctime_ns) > since_ns:
                out.append(path)
        return out

    def _same_inode(self, old: str) -> str | None:
        """Without git, the file a gone one was renamed to by the file system: a walked file with
        the inode the hash cache last saw at `old` (a rename keeps it; so does an in-place
        edit), on the root's device, changed after that entry was taken (a rename sets the
        ctime). A freed inode is soon reused by an unrelated file, so it must also keep the
        extension and be within a factor of two of the size. Closest path first."""
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

    def check(self, memory: Memory) -> MemoryDrift:
        self._since_ns = int((memory.verified_at or memory.recorded_at).timestamp() * 1e9)  # `_search`, no git
        checks = tuple(self.check_anchor(a) for a in memory.anchors)
        return MemoryDrift(memory, drift_of([c.verdict for c in checks]), checks)

    def check_all(self, memories: Sequence[Memory],
                  progress: Callable[[int, int], None] | None = None) -> DriftReport:
        """`check` over many memories: the batch form, for whole-workspace passes.

        The pass follows files, not memories: the hash cache vouches for each distinct anchored
        file once (`_vouched`: one `lstat` each, compared in one C loop), the folders on their
        way are checked once (`_odd_dirs`), and where a file's hash is the one every anchor on it
        recorded, none of those memories is looked at. Only memories resting on a file it
        cannot vouch for (or whose anchors disagree on its hash) take `check`. What the set of
        memories asks (`_Plan`) is derived once and kept while the same memories come back.
        """
        checked = list(memories)
        return self.check_planned(_plan_of(self.root_real, checked), checked, progress)

    def check_planned(self, plan: _Plan, checked: Sequence[Memory],
                      progress: Callable[[int, int], None] | None = None, *, claims: Sequence[int] | None = None,
                      paths: list[str] | None = None) -> DriftReport:
        """`check_all` of the memories `plan` was made for (`checked`, by position): only the
        memories resting on a file the cache cannot vouch for are read out of `checked`, so it
        may build them on demand (`driftplan`: a new process's pass builds no fresh memory;
        `claims` and `paths` are then what the report would otherwise read off every memory,
        see `DriftReport._of`)."""
        total = len(checked)
        hashes = self._vouched(plan, progress, total)
        want = plan.want
        if plan.hashed and hashes == want:
            suspects: Sequence[int] = plan.always
        else:
            bad = [i for i, (sha, w) in enumerate(zip(hashes, want)) if sha is None or sha != w]
            suspects = plan.suspects(bad)
        found: dict[int, MemoryDrift] = {}
        if suspects:
            at = plan.at
            for j in suspects:
                m = checked[j]
                refs = m.anchors
                if refs and all(r.sha256 is not None and hashes[at[r.path]] == r.sha256 for r in refs):
                    continue  # a file its other anchors disagree on: this memory's own hashes hold
                found[j] = self.check(m)
                if progress is not None:
                    progress(j + 1, total)
        if progress is not None:
            progress(total, total)
        return DriftReport._of(checked, found, claims=claims, paths=paths)

    def _vouched(self, plan: _Plan, progress: Callable[[int, int], None] | None = None,
                 total: int = 0) -> list[str | None]:
        """Per distinct file of the plan, the hash the cache vouches for after one `lstat`, or None.

        Only plain paths qualify (see `_plan_of`), and only under folders that are still their
        own realpath (`_odd_dirs`, on every pass). A symlinked file is `lstat`-ed as the link,
        which never matches its cached target, so links always take the careful route in
        `_locate`. Files the cache has no word on are hashed here, stat in hand, `_CHUNK` at a
        time (each chunk a tick of the progress bar).
        """
        fulls = plan.fulls_under(self._odd_dirs(plan))
        gone = self._gone_paths()
        if gone:  # followed before: stat the root in their place (see `_GONE`), never vouched for
            root = self.root_real
            fulls = list(fulls)  # a copy in C; only the gone paths' places are touched
            at = plan.at
            for path in gone:
                i = at.get(path)
                if i is not None and fulls[i] is not None:
                    fulls[i] = root
        seen = self._lstats
        hashes = self.cache.vouch(plan.uniq, fulls, seen=seen)
        if gone and seen:  # the root's stat, taken in a gone file's place, is no file's stat
            for path in gone.intersection(seen):
                del seen[path]
        if seen:  # files the cache has no word on, stat in hand: hash them in one loop
            uniq = plan.uniq
            todo = [i for i, (path, sha) in enumerate(zip(uniq, hashes)) if sha is None and path in seen]
            for start in range(0, len(todo), _CHUNK):
                part = todo[start:start + _CHUNK]
                got = self.cache.hash_many([uniq[i] for i in part], [fulls[i] for i in part],  # type: ignore[misc]
                                           [seen[uniq[i]] for i in part], root=self.root_real)
                for i, sha in zip(part, got):
                    if sha is not None:
                        path = uniq[i]
                        hashes[i] = sha
                        self._files[path] = (sha, seen.pop(path))  # `check` of a changed one reads it from here
                        self._full[path] = fulls[i]  # type: ignore[assignment]
                if progress is not None and start + _CHUNK < len(todo):
                    progress(total * (start + _CHUNK) // len(todo), total)
        return hashes

    def _odd_dirs(self, plan: _Plan) -> frozenset[str]:
        """The plan's folders that are not their own realpath (a link on the way down) or are
        the state folder: files under them take the careful route.

        Every folder is `lstat`-ed on every pass: in one C loop against the stats the last
        full check judged them by (a folder swapped for a link is another inode, so it never
        matches), and the folders gone then must still be gone. Anything else, or no C loop,
        judges each folder again from one `lstat` and keeps those stats for the next pass."""
        from . import hashing

        loop = hashing._statmatch
        held = plan.folders
        if held is not None and loop is not None:
            live, packed, odd, gone = held
            got = loop.match(live, packed) if live else b""
            if got is not None and 0 not in got and all(map(_absent, gone)):
                return odd
        root = self.root_real
        stats = self._dir_stats
        live_paths: list[str] = []
        keys: list[tuple[int, int, int, int]] = []
        gone_paths: list[str] = []
        keyed = True
        plain_dirs = self._plain_dirs
        odd_dirs: list[str] = []
        for d in plan.dirs:  # parents first: each folder judged as `_plain` judges it, from the stat just taken
            full = f"{root}/{d}"
            try:
                st: os.stat_result | None = os.lstat(full)
            except FileNotFoundError:
                st = None
                gone_paths.append(full)
            except (OSError, ValueError):
                keyed = False  # not plain (its `lstat` fails in `_plain` too): no shortcut next pass
                if not self._plain(d):
                    odd_dirs.append(d)
                continue
            stats[d] = st
            if st is not None:
                live_paths.append(full)
                keys.append((st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino))
            plain = plain_dirs.get(d)
            if plain is None:
                parent, _, name = d.rpartition("/")
                up = (plain_dirs.get(parent) if parent else True)
                if up is None:
                    up = self._plain(parent)
                plain = up and not (not parent and is_state_name(name)) and (st is None or not stat.S_ISLNK(st.st_mode))
                plain_dirs[d] = plain
            if not plain:
                odd_dirs.append(d)
        odd = frozenset(odd_dirs)
        judged = loop.pack(keys) if keyed and loop is not None else None
        plan.folders = None if judged is None else (live_paths, judged, odd, gone_paths)
        return odd

    def _plain(self, rel_dir: str) -> bool:
        """Whether a workspace folder is its own realpath (no link on the way down from the root)
        and not `.anchorfs/`: then a file's path under it needs no resolving. A folder that is
        gone counts as plain: its files' `lstat` fails and they take the careful route. Judged
        from the `lstat` `_odd_dirs` took of it, when it took one."""
        known = self._plain_dirs.get(rel_dir)
        if known is not None:
            return known
        if not rel_dir:
            plain = True
        else:
            parent, _, name = rel_dir.rpartition("/")
            plain = self._plain(parent) and not (not parent and is_state_name(name))
            if plain:
                if rel_dir in self._dir_stats:
                    st = self._dir_stats[rel_dir]
                    plain = st is None or not stat.S_ISLNK(st.st_mode)
                else:
                    try:
                        plain = not stat.S_ISLNK(os.lstat(f"{self.root_real}/{rel_dir}").st_mode)
                    except FileNotFoundError:
                        pass
                    except (OSError, ValueError):
                        plain = False
        self._plain_dirs[rel_dir] = plain
        return plain


def _move_key(ref: AnchorRef) -> str:
    """An anchor's identity in the manifest's found moves: its spec and the hash it rests on."""
    return f"{ref.spec}\n{ref.content_hash or ref.sha256 or ''}"


def _utf8(name: str) -> bool:
    """Whether a (surrogate-escaped) file name is valid UTF-8: only those can be anchored."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return bool(name)


def _closeness(old: str) -> Callable[[str], tuple[bool, int, str]]:
    """Sort key of candidate paths for content that was at `old`: the same file name first,
    then the most leading folders in common, then by name (a stable order)."""
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


class _Plan:
    """What a set of memories asks of the file system, derived from the memories alone: the
    distinct files, the hash their anchors recorded, the folders on their way. Kept between
    passes (`_plan_of`); `folders` is what the last full folder check found (`_odd_dirs`)."""

    __slots__ = ("memories", "paths", "owner", "uniq", "want", "hashed", "fulls", "dirs", "at", "always",
                 "folders", "owners_of", "_owners", "_under")

    def __init__(self, memories: Sequence[Memory], paths: list[str], owner: list[int] | None, uniq: list[str],
                 want: list[str | None], fulls: list[str | None], dirs: list[str], at: dict[str, int],
                 always: list[int], owners_of: Callable[[int], Iterable[int]] | None = None) -> None:
        self.memories = memories
        self.paths = paths  # per anchor, in memory order
        self.owner = owner  # per anchor, its memory's position (None: one anchor each, the same position)
        self.uniq = uniq  # distinct anchored paths, in order of first use
        self.want = want  # per distinct path: the hash all its anchors recorded, None when they differ
        self.hashed = None not in want
        self.fulls = fulls  # per distinct path: the absolute path to `lstat`, None if suspicious
        self.dirs = dirs  # every folder on the way to `uniq`, parents first
        self.at = at  # distinct path -> its position in `uniq`
        self.always = always  # memories with no anchor: `check` says so on every pass
        self.folders: tuple[list[str], bytes, frozenset[str], list[str]] | None = None
        self.owners_of = owners_of  # distinct path's position -> its memories' positions, when known (a snapshot's plan)
        self._owners: list[list[int]] | None = None
        self._under: tuple[frozenset[str], list[str | None]] | None = None

    def suspects(self, bad: list[int]) -> list[int]:
        """The memories (positions, in order) resting on any of these files, and the unanchored.

        A few files are looked for along the anchors' paths (one scan in C each); more build
        the map of every file's memories once, kept with the plan."""
        paths, owner = self.paths, self.owner
        found: set[int] = set(self.always)
        if self.owners_of is not None:
            found.update(chain.from_iterable(map(self.owners_of, bad)))
            return sorted(found)
        if len(bad) <= 4 and self._owners is None:
            for i in bad:
                path, k = self.uniq[i], -1
                try:
                    while True:
                        k = paths.index(path, k + 1)
                        found.add(k if owner is None else owner[k])
                except ValueError:
                    pass
            return sorted(found)
        owners = self._owners
        if owners is None:
            at = self.at
            owners = [[] for _ in self.uniq]
            for k, path in enumerate(paths):
                owners[at[path]].append(k if owner is None else owner[k])
            self._owners = owners
        found.update(chain.from_iterable(owners[i] for i in bad))
        return sorted(found)

    def fulls_under(self, odd: frozenset[str]) -> list[str | None]:
        """`fulls` with the files under odd folders left out (None: the careful route)."""
        if not odd:
            return self.fulls
        under = self._under
        if under is None or under[0] != odd:
            fulls = [None if f is None or p.rpartition("/")[0] in odd else f for p, f in zip(self.uniq, self.fulls)]
            self._under = under = (odd, fulls)
        return under[1]


_PLANS: OrderedDict[tuple[str, int], _Plan] = OrderedDict()
_PLANS_KEPT = 8
_PLAN_MIN = 64
"""Sets smaller than this (a query's hits) are planned afresh each time: cheap, and they would
push a workspace's whole-set plan out of `_PLANS`."""
_plans_lock = threading.Lock()


def _plan_of(root_real: str, memories: list[Memory]) -> _Plan:
    """The plan of a set of memories, reused while the same memory objects come back in the
    same order (a long-lived process checks the same memories pass after pass, and a fold
    keeps the objects of unchanged memories): only their files' stats can have changed. Any
    other set (a memory recorded, superseded, re-anchored: another object) is planned afresh."""
    key = (root_real, len(memories))
    plan = _PLANS.get(key) if len(memories) >= _PLAN_MIN else None
    if plan is not None and all(map(is_, plan.memories, memories)):  # held: their ids are not reused
        return plan
    anchors = list(map(_ANCHORS, memories))
    refs = list(chain.from_iterable(anchors))
    paths: list[str] = list(map(_PATH, refs))
    shas: list[str | None] = list(map(_SHA, refs))
    last = dict(zip(paths, shas))  # C loops only: this runs over every anchor of a new process's set
    uniq = list(last)
    at = dict(zip(uniq, range(len(uniq))))
    if list(map(last.__getitem__, paths)) == shas:  # every file's anchors agree on its hash (the common case)
        want = list(last.values())
    else:
        mixed = {p for p, sha in zip(paths, shas) if last[p] != sha}
        want = [None if p in mixed else last[p] for p in uniq]
    none_empty = all(anchors)
    owner = None if none_empty and len(refs) == len(memories) else \
        list(chain.from_iterable(map(repeat, range(len(memories)), map(len, anchors))))
    always = [] if none_empty else [j for j, a in enumerate(anchors) if not a]
    fulls, dirs = _places(root_real, uniq)
    plan = _Plan(memories, paths, owner, uniq, want, fulls, dirs, at, always)
    if len(memories) >= _PLAN_MIN:
        with _plans_lock:
            _PLANS[key] = plan
            _PLANS.move_to_end(key)
            while len(_PLANS) > _PLANS_KEPT:
                _PLANS.popitem(last=False)
    return plan


def plan_of_files(root_real: str, uniq: list[str], want: list[str | None],
                  owners_of: Callable[[int], Iterable[int]]) -> _Plan:
    """The plan of a set of anchored memories from what it asks alone (`foldsnap.SnapPlan`: the
    distinct paths in order of first use, the hash their anchors recorded, the memories on
    each): the same plan `_plan_of` derives from the memories, without one of them built."""
    fulls, dirs = _places(root_real, uniq)
    return _Plan([], [], None, uniq, want, fulls, dirs, dict(zip(uniq, range(len(uniq)))), [], owners_of)


def _places(root_real: str, uniq: list[str]) -> tuple[list[str | None], list[str]]:
    """(per distinct path the absolute path to `lstat`, None if suspicious; every folder on
    the way to them, parents first)."""
    prefix = root_real + "/"
    joined = "\n".join(uniq)
    if joined.isascii():
        folded = joined.lower()  # ASCII's casefold
    else:  # only the names that need it normalized (NFKC never composes across the newlines)
        folded = "\n".join([p.lower() if p.isascii() else unicodedata.normalize("NFKC", p).casefold() for p in uniq])
    fulls: list[str | None]
    if "\0" in joined or ".." in joined or joined[:1] == "/" or "\n/" in joined or STATE_DIR in folded:
        fulls = [None if _suspicious(p) else prefix + p for p in uniq]
    else:
        fulls = list(map(prefix.__add__, uniq))
    dirs: dict[str, None] = {}
    for head in dict.fromkeys(map(_HEAD, map(str.rpartition, uniq, repeat("/")))):
        chain_up = []
        while head and head not in dirs:
            chain_up.append(head)
            head = head.rpartition("/")[0]
        dirs.update(dict.fromkeys(reversed(chain_up)))
    return fulls, list(dirs)


def _absent(path: str) -> bool:
    """Whether nothing is at `path` (its `lstat` says not found; any other answer: maybe)."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return True
    except (OSError, ValueError):
        return False
    return False


def _suspicious(path: str) -> bool:
    folded = unicodedata.normalize("NFKC", path).casefold()
    return "\0" in path or ".." in path or path[:1] == "/" or STATE_DIR in folded


def _why(exc: OSError) -> str:
    return _ERRNO_WORDS.get(exc.errno or 0) or (exc.strerror or str(exc)).lower()


def age_days(memory: Memory, now: datetime) -> float:
    since = memory.verified_at or memory.recorded_at
    return max(0.0, (now - since).total_seconds() / 86400.0)


def expired(memory: Memory, expiry_days: float, now: datetime) -> bool:
    """Past its kind's expiry: demoted as unverified (the boundary day itself still holds)."""
    return age_days(memory, now) > expiry_days


def envelope(memory: Memory, drift: Drift, checks: tuple[AnchorCheck, ...], *,
             expiry_days: float, now: datetime | None = None, history: str | None = None,
             weak: bool = False) -> str:
    """One line an agent can read before trusting the memory, in one format everywhere:
    `[STATE · what · when — advice]`.

    `[fresh · anchored 2026-08-23 at a1b2c3d · 40 commits since]`,
    `[STALE · src/token.py#issue changed since 9f8e7d6 2026-09-02 "raise expiry" — re-verify before relying on this]`,
    `[UNKNOWN · src/x.py unreadable: permission denied — re-verify before relying on this]`,
    `[unanchored · recorded 2026-08-23]`, `[SUPERSEDED by ID on DATE · held from DATE — do not rely on this]`.
    `history` is git's word (`anchorfs.history.history_envelope`) when there is one: it only
    fills the "since" of a stale line (the commit that staled it) and the commit count of a
    fresh one. `weak` adds `weak match` (see `weak_envelope`).
    """
    line = _envelope(memory, drift, checks, expiry_days=expiry_days, now=now, history=history)
    return weak_envelope(line) if weak else line


WEAK_MARK = "weak match"


def weak_envelope(line: str) -> str:
    """`line` with `weak match` before its advice (or its closing bracket), once."""
    if f" · {WEAK_MARK}" in line or not line.endswith("]"):
        return line
    cut = line.find(" — ")
    cut = cut if cut >= 0 else len(line) - 1
    return f"{line[:cut]} · {WEAK_MARK}{line[cut:]}"


def _history_parts(history: str | None, drift: Drift) -> tuple[str | None, str | None, str | None]:
    """(stale since, fresh commit and date, fresh count) read out of git's envelope line."""
    if not history:
        return None, None, None
    if drift is Drift.STALE and history.startswith("[STALE since ") and " — " in history:
        return history[len("[STALE since "):history.index(" — ")], None, None
    if drift is Drift.FRESH and history.startswith("[fresh · anchored ") and history.endswith("]"):
        body = history[len("[fresh · anchored "):-1]
        head, _, count = body.partition(" · ")
        commit, _, date = head.partition(" ")
        return None, f"{date} at {commit}" if date else commit, count or None
    return None, None, None


def _envelope(memory: Memory, drift: Drift, checks: tuple[AnchorCheck, ...], *,
              expiry_days: float, now: datetime | None, history: str | None) -> str:
    now = now or utcnow()
    since = (memory.verified_at or memory.recorded_at).date().isoformat()
    stale_since, anchored, count = _history_parts(history if memory.status == "active" else None, drift)
    commits = {c.anchor.commit for c in checks if c.anchor.commit}
    at = f" at {sorted(commits)[0][:7]}" if len(commits) == 1 else ""
    tail = ""
    if expired(memory, expiry_days, now):
        tail = f" · unverified for {int(age_days(memory, now))} days ({memory.kind} expiry {int(expiry_days)})"
    if memory.status != "active":
        who = f" by {memory.superseded_by}" if memory.superseded_by else ""
        until = memory.valid_until.date().isoformat() if memory.valid_until else "?"
        return f"[{memory.status.upper()}{who} on {until} · held from {memory.valid_from.date().isoformat()} — do not rely on this]"
    claims = memory.stale_claims
    if drift is Drift.STALE or claims:  # prose found stale (`verify --mark`) flags it like an anchor
        bad = next((c for c in checks if c.verdict in (Verdict.CHANGED, Verdict.DELETED, Verdict.SYMBOL_MISSING)), None)
        more = f" (and {len(claims) - 1} more claim{'s' if len(claims) > 2 else ''})" if len(claims) > 1 else ""
        if bad is None and claims:
            return (f"[STALE · {claims[0].words}{more} · found by verify {claims[0].found_at.date().isoformat()}"
                    " — re-verify before relying on this]")
        if bad is None:  # pragma: no cover - a stale drift always has a stale anchor or claim
            return "[STALE — re-verify before relying on this]"
        if stale_since and stale_since.startswith("uncommitted changes"):
            when = " in uncommitted changes"
        else:
            when = f" since {stale_since or since}"
        said = f" · {claims[0].words}{more}" if claims else ""
        return f"[STALE · {bad.detail}{when}{said} — re-verify before relying on this]"
    if drift is Drift.UNKNOWN:
        bad = next(c for c in checks if c.verdict in (Verdict.UNREADABLE, Verdict.UNSAFE))
        return f"[UNKNOWN · {bad.detail} — re-verify before relying on this]"
    if not checks:
        return f"[unanchored · recorded {since}{tail}]"
    moved = [c for c in checks if c.verdict in (Verdict.MOVED, Verdict.REFORMATTED)]
    extra = f" · {_moved_words(moved[0])}" if moved else ""
    where = anchored or f"{since}{at}"
    counted = f" · {count}" if count else ""
    return f"[fresh · anchored {where}{counted}{extra}{tail}]"


def _moved_words(check: AnchorCheck) -> str:
    """A moved or reformatted anchor in a fresh envelope: "SPEC now at NEW_PATH" for another
    file, else the check's own detail."""
    if check.path_now is not None and check.path_now != check.anchor.path:
        words = f"{check.anchor.spec} now at {check.path_now}"
        return words + " (reformatted)" if check.verdict is Verdict.REFORMATTED else words
    return check.detail
