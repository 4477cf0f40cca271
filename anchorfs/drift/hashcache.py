"""The hash cache behind every drift check, persisted to `.anchorfs/manifest.json`.

Every read re-checks anchors, so "is this file's SHA-256 still X?" must cost about one
`os.stat`: the cache keeps, per repo-relative path, the stat fields seen when the file was
hashed and trusts the stored hash while they all still match.

Racy-git rule: a file rewritten within one timestamp tick of being hashed can keep every stat
field, so a cached hash is trusted only when the file changed longer than the granularity
before the hash was taken (this process) or before the manifest's mtime (loaded from disk).
Racy entries are kept "poisoned" (no hash), in memory and on disk. A hash whose file moved
while it was read is never cached. Every doubt resolves to re-hashing: a wrong cached hash
would give a verdict without evidence, a needless re-hash only costs time.

The manifest's layout, its CRCs and its readers: `anchorfs.drift.manifest`.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from operator import attrgetter, eq, itemgetter
from types import TracebackType
from typing import Any

from ..core.guard import sha256_bytes
from .manifest import MANIFEST_VERSION, assemble, newest_hashed, parse, parse_only, splice
from .manifest import plain_rel as _plain_rel

try:  # the warm check's loop and the batch re-read in C, off the GIL: built at install where a compiler is at hand
    from . import _statmatch
except ImportError:  # the pure-Python loop gives the same answers (tests run both)
    _statmatch = None  # type: ignore[assignment]

__all__ = ["HashCache", "sha256_bytes", "sha256_file", "reread_digests", "MANIFEST_VERSION"]


# -- hashing: the anchor contract's SHA-256 of a file, one at a time or a batch read again in C --

_ONE_READ = 1 << 20
"""Files up to this size are hashed from one `os.read` (`HashCache.hash_many`, `reread_digests`)."""
_RENEW_BYTES = 64 << 20
"""Most bytes `reread_digests` holds at once: one batch of `_statmatch.reread`'s reads."""


def reread_digests(root: str, rels: Sequence[str], keys: Sequence[tuple[int, ...]]
                   ) -> tuple[int, list[bytes | None]] | None:
    """(when the reads began, per file `root/rel` the SHA-256 of its bytes read again now, None
    where it was refused) by `_statmatch.reread`'s loop: the guarded open's checks, in C, at
    most `_RENEW_BYTES` held at once. None where the loop is not built or refused the batch:
    the caller goes one by one."""
    reread = getattr(_statmatch, "reread", None)
    if reread is None:
        return None
    started = time.time_ns()  # before any read, so a caller's racy rule errs towards poisoning
    out: list[bytes | None] = []
    import hashlib

    sha256 = hashlib.sha256
    start = 0
    while start < len(rels):  # batches of at most _RENEW_BYTES held at once
        end, held = start, 0
        while end < len(rels) and (end == start or held + keys[end][0] <= _RENEW_BYTES):
            held += keys[end][0]
            end += 1
        packed = _statmatch.pack(list(keys[start:end]))
        got = reread(root, list(rels[start:end]), packed, _ONE_READ) if packed is not None else None
        if got is None:
            return None
        out.extend(None if data is None else sha256(data).digest() for data in got)
        start = end
    return started, out


def sha256_file(
    path: str | os.PathLike[str], *, root: str | None = None, expect: os.stat_result | None = None
) -> str:
    """Hex SHA-256 of a whole workspace file, streamed, through the one guarded open
    (`anchorfs.core.guard`): a violation raises its `GuardError`; other OSErrors pass."""
    from ..core.guard import hash_guarded

    return hash_guarded(path, root=root, expect=expect)


DEFAULT_GRANULARITY_NS = 2_000_000_000
"""Two seconds: the coarsest common mtime resolution (FAT), with room for the kernel's coarse
file clock and modest NFS clock skew."""

_MOVES_KEPT = 65_536
"""Most found moves a manifest keeps (the oldest are dropped first): leads, re-found if lost."""
# A found move, in memory: (path, path_now, sha256 of path_now, gone: path itself was missing).
_Move = tuple[str, str, str, bool]
_stat = os.stat

# An entry, in memory and on disk: [size, mtime_ns, ctime_ns, inode, sha256 or None, checked_at],
# the lists orjson builds (loading converts nothing); entries are replaced, never mutated once published.
_Entry = list[Any]
_Sig = tuple[int, int, int]
_ENTRY_KEY = itemgetter(0, 1, 2, 3)
_STAT_KEY = attrgetter("st_size", "st_mtime_ns", "st_ctime_ns", "st_ino")
_ENTRY_SHA = itemgetter(4)
_MEMO_KEPT = 16
"""Batches whose entry keys `vouch` keeps between passes (one per batch of a workspace pass)."""
_ONLY_MAX = 64
"""Most paths a partial load (`only`) looks up one by one in the manifest's bytes; more: one parse."""


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return _STAT_KEY(a) == _STAT_KEY(b)


def _changed_ns(st: os.stat_result) -> int:
    """When the file last changed, for the racy rule: the later of mtime and ctime (an mtime
    can be set back, `touch -d`, `cp -p`; a ctime cannot)."""
    m, c = st.st_mtime_ns, st.st_ctime_ns
    return m if m > c else c


def _sig(st: os.stat_result) -> _Sig:
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a surrogate-escaped name: JSON cannot carry it
        return False
    return True


class HashCache:
    """SHA-256 of workspace files, cached by repo-relative path, racy-safe, persisted on save.

    `ttl` (seconds) bounds how long a cached hash is trusted at all, a backstop for stat fields
    that lie. `granularity_ns` is the timestamp resolution the racy rule assumes. `clock` gives
    wall seconds for the TTL only. Mutation and `save` share a lock (several threads may share one).
    """

    hashes: int
    """How many files this instance actually read and hashed (retries included)."""

    def __init__(self, manifest_path: str | os.PathLike[str], *, ttl: float = 300.0,
                 granularity_ns: int = DEFAULT_GRANULARITY_NS, clock: Callable[[], float] = time.time,
                 only: Iterable[str] | None = None) -> None:
        if not ttl >= 0:
            raise ValueError(f"ttl must be >= 0, got {ttl}")
        if granularity_ns < 0:
            raise ValueError(f"granularity_ns must be >= 0, got {granularity_ns}")
        self.manifest_path = os.fspath(manifest_path)  # a str: no `pathlib` on a hook's path
        self.hashes = 0
        self._ttl = float(ttl)
        self._gran = int(granularity_ns)
        self._clock = clock
        self._entries: dict[str, _Entry] = {}  # empty until the lazy load: see `_miss`
        self._version = 0  # bumped on every change to `_entries`: `vouch`'s memo is good while it holds
        self._window_version = -1  # `_version` when the TTL window below was last made exact
        self._memo: dict[int, tuple[list[str], int, list[_Entry | None], list[tuple[int, ...]], list[str | None],
                                    bytes | None]] = {}
        self._touched: set[str] = set()  # changed or forgotten here since the last save
        self._by_sha: tuple[int, dict[str, list[str]]] | None = None  # (version, sha -> paths): `paths_for`
        self._moves: dict[str, _Move] = {}  # key -> found move: see `move_of`
        self._moves_touched: set[str] = set()  # moves noted or dropped here since the last save
        self._gone: frozenset[str] | None = None  # `moved_from`, rebuilt after the moves changed
        self._dirty = False
        self._loaded = False
        # `only`: the paths asked about (a hook's few files): the load decodes their entries alone
        # and keeps the manifest's bytes to decode the rest when first needed (`_whole`).
        self._only: frozenset[str] | None = frozenset(only) if only is not None else None
        self._rest: tuple[bytes, int] | None = None  # (the manifest read, its mtime) while partial
        self._disk_sig: _Sig | None = None
        self._lock = threading.Lock()
        # A window in which every entry is within its TTL, so the warm path need not read each
        # entry's time. Kept conservative on insert, made exact again on load and save.
        self._lo = float("-inf")
        self._hi = float("inf")

    # -- reading ---------------------------------------------------------------------------

    def sha256(self, rel: str, path: str | os.PathLike[str], *, st: os.stat_result | None = None) -> str:
        """Hex SHA-256 of the file at `path`, cached under `rel`. OSErrors propagate untouched (the
        caller turns them into verdicts). `st`: the caller's fresh stat of `path`, if it has one."""
        if st is None:
            st = _stat(path)
        try:
            e = self._entries[rel]
        except KeyError:
            return self._miss(rel, path, st)
        # The warm path: one stat, one lookup, a few compares (fields indexed, not unpacked).
        if e[1] == st.st_mtime_ns and e[2] == st.st_ctime_ns and e[0] == st.st_size and e[3] == st.st_ino:
            sha = e[4]
            if sha is not None:
                now = self._clock()
                if self._lo <= now < self._hi or e[5] <= now < e[5] + self._ttl:
                    return sha
        return self._refresh(rel, path, st)

    def vouch(self, rels: list[str], paths: Sequence[str | None], *,
              seen: dict[str, os.stat_result] | None = None, root: str | None = None) -> list[str | None]:
        """The batch form of `sha256`'s warm path: `lstat` each path (None: skip it) and return,
        per file, the hash this cache vouches for, or None where it cannot (the caller takes
        `sha256` for those; `seen` receives their stats when at hand). With `root` (each path
        `root/rel`), entries past their TTL are renewed here in one batch (`_renew`). `lstat`,
        not `stat`: a symlink never matches its target's entry."""
        self._need_all(rels)
        now = self._clock()
        window = self._lo <= now < self._hi
        if not window and self._window_version != self._version:
            with self._lock:  # re-hashed entries may have closed the window: make it exact again
                self._set_window()
            window = self._lo <= now < self._hi
        version = self._version  # read before the entries: a change meanwhile voids the memo
        memo = self._memo.get(id(rels))
        if memo is not None and memo[0] is rels and memo[1] == version:
            entries, keys, shas, packed = memo[2], memo[3], memo[4], memo[5]  # no entry changed since
        else:
            packed = None
            entries = list(map(self._entries.get, rels))
            found: list[Any] = entries  # a None among them fails the key map: no entry for a file
            try:
                keys = list(map(_ENTRY_KEY, found))
            except TypeError:
                keys = None
            shas = list(map(_ENTRY_SHA, found)) if keys is not None else []
            if keys is not None:
                packed = _statmatch.pack(keys) if _statmatch is not None else None
                if len(self._memo) >= _MEMO_KEPT:
                    self._memo.clear()
                self._memo[id(rels)] = (rels, version, entries, keys, shas, packed)  # holds `rels`: no id reuse
        if window and keys is not None and packed is not None and _statmatch is not None:
            got = _statmatch.match(paths, packed)  # None: no path, a file gone, a name C cannot pass: one by one
            if got is not None:
                return list(shas) if 0 not in got else [sha if fine else None for sha, fine in zip(shas, got)]
        elif window and keys is not None:
            try:
                ok = list(map(eq, keys, map(_STAT_KEY, map(os.lstat, paths))))  # type: ignore[arg-type]
            except (OSError, TypeError, ValueError):  # no path, a file gone: one by one
                pass
            else:  # a poisoned entry's hash is None: not vouched for
                return list(shas) if False not in ok else [sha if fine else None for sha, fine in zip(shas, ok)]
        ttl = self._ttl
        renewed = self._renew(rels, paths, entries, root, now) if root is not None and keys is not None else {}
        out: list[str | None] = []
        for rel, e, path in zip(rels, entries, paths):
            if path is None:
                out.append(None)
                continue
            if renewed and rel in renewed:
                out.append(renewed[rel])
                continue
            try:
                st = os.lstat(path)
            except (OSError, ValueError):
                out.append(None)
                continue
            if (e is not None and e[4] is not None and _ENTRY_KEY(e) == _STAT_KEY(st)
                    and (window or e[5] <= now < e[5] + ttl)):
                out.append(e[4])
            else:
                out.append(None)
                if seen is not None:
                    seen[rel] = st
        return out

    def _renew(self, rels: list[str], paths: Sequence[str | None], entries: list[_Entry | None], root: str,
               now: float) -> dict[str, str]:
        """Hashes of the files whose entries hold a hash past its TTL and whose stat is still the
        entry's, read again by `reread_digests` and hashed; their entries stamped anew. A file
        the loop refused is left to the caller's one-by-one path. Empty where the loop is not
        built or refused the batch."""
        ttl = self._ttl
        base = root + "/"
        todo: list[tuple[str, _Entry]] = []
        for rel, e, path in zip(rels, entries, paths):
            if e is not None and e[4] is not None and not e[5] <= now < e[5] + ttl and path == base + rel:
                todo.append((rel, e))
        if not todo:
            return {}
        got = reread_digests(root, [rel for rel, _ in todo], [_ENTRY_KEY(e) for _, e in todo])
        if got is None:
            return {}
        started, digests = got
        limit = started - self._gran
        out: dict[str, str] = {}
        fresh: dict[str, _Entry] = {}
        for (rel, e), raw in zip(todo, digests):
            if raw is None:
                continue
            self.hashes += 1
            digest = raw.hex()
            out[rel] = digest
            changed = e[1] if e[1] > e[2] else e[2]
            fresh[rel] = [e[0], e[1], e[2], e[3], None if changed >= limit else digest]
        if fresh:
            self._publish(fresh)
        return out

    def hash_many(self, rels: Sequence[str], paths: Sequence[str], stats: Sequence[os.stat_result], *,
                  root: str | None = None) -> list[str | None]:
        """Hash files the caller has just `lstat`-ed, in one tight loop (the cold pass's `_refresh`):
        each read in one call through the guarded open and `fstat`-ed before closing. None where
        the read or the `fstat` disagrees with the given stat, or the file is not regular or over
        `_ONE_READ` bytes: the caller takes `sha256`."""
        from ..core.guard import GuardError, open_guarded

        if not self._loaded:
            self._load()  # or the lazy load would later drop what is stored here
        self._whole()
        started = time.time_ns()  # before any read, so the racy rule errs towards poisoning
        limit = started - self._gran
        out: list[str | None] = []
        fresh: dict[str, _Entry] = {}
        sha256 = hashlib.sha256
        for rel, path, st in zip(rels, paths, stats):
            size = st.st_size
            if size > _ONE_READ or not stat.S_ISREG(st.st_mode):
                out.append(None)
                continue
            try:
                fd, _ = open_guarded(path, root=root, expect=st)
            except (OSError, ValueError, GuardError):
                out.append(None)
                continue
            try:
                data = os.read(fd, size + 1)
                after = os.fstat(fd)
            except OSError:
                out.append(None)
                continue
            finally:
                os.close(fd)
            self.hashes += 1
            if len(data) != size or not _same(st, after):
                out.append(None)
                continue
            digest = sha256(data).hexdigest()
            out.append(digest)
            fresh[rel] = [size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, None if _changed_ns(st) >= limit else digest]
        if fresh:
            self._publish(fresh)
        return out

    def _miss(self, rel: str, path: str | os.PathLike[str], st: os.stat_result) -> str:
        if not self._loaded or (self._rest is not None and rel not in self._only):  # type: ignore[operator]
            self._need(rel)
            if rel in self._entries:
                return self.sha256(rel, path, st=st)
        return self._refresh(rel, path, st)

    def _refresh(self, rel: str, path: str | os.PathLike[str], st: os.stat_result) -> str:
        """Hash with a stat on each side; re-hash once if the file moved, never cache a mover."""
        digest = ""
        for attempt in range(2):
            if attempt:
                st = _stat(path)
            if stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))
            if not stat.S_ISREG(st.st_mode):  # a FIFO would block the read path forever
                raise OSError(errno.EINVAL, "not a regular file", os.fspath(path))
            started = time.time_ns()  # before the read: any write it could miss comes later
            digest = sha256_file(path)
            self.hashes += 1
            if _same(st, _stat(path)):
                racy = _changed_ns(st) >= started - self._gran
                self._store(rel, st, None if racy else digest)
                return digest
        with self._lock:
            if self._entries.pop(rel, None) is not None:
                self._version += 1
                self._touched.add(rel)
                self._dirty = True
        return digest

    def _store(self, rel: str, st: os.stat_result, sha: str | None) -> None:
        self._publish({rel: [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, sha]})

    def _publish(self, fresh: dict[str, _Entry]) -> None:
        """Stamp new entries (size, mtime, ctime, inode, sha256) with the time and publish them."""
        at = self._clock()
        with self._lock:
            for rel, new in fresh.items():
                new.append(at)
                old = self._entries.get(rel)
                self._entries[rel] = new
                self._version += 1
                # A poisoned entry seen again with the same stat carries no news: don't rewrite
                # the manifest on every read of a file that is being edited.
                if new[4] is None and old is not None and old[4] is None and old[:4] == new[:4]:
                    continue
                self._touched.add(rel)
                self._dirty = True
            if at > self._lo:
                self._lo = at
            if at + self._ttl < self._hi:
                self._hi = at + self._ttl

    def paths_for(self, sha: str) -> list[str]:
        """Paths whose cached entry holds `sha`: where a moved file's bytes may be now (leads)."""
        if not self._loaded:
            self._load()
        self._whole()
        index = self._by_sha
        if index is None or index[0] != self._version:
            table: dict[str, list[str]] = {}
            for rel, e in list(self._entries.items()):
                if e[4] is not None:
                    table.setdefault(e[4], []).append(rel)
            index = self._by_sha = (self._version, table)
        return list(index[1].get(sha, ()))

    @property
    def ttl(self) -> float:
        """Seconds a cached hash is trusted: also how long an answer resting on these hashes may be."""
        return self._ttl

    def now(self) -> float:
        """This cache's clock (wall seconds; the TTL's), for answers kept by its rules."""
        return self._clock()

    def stat_of(self, rel: str) -> tuple[int, int, int, int] | None:
        """(size, mtime_ns, ctime_ns, inode) of `rel` when last hashed here (a gone file's trace)."""
        self._need(rel)
        e = self._entries.get(rel)
        return (int(e[0]), int(e[1]), int(e[2]), int(e[3])) if e is not None else None

    def forget(self, rel: str) -> None:
        """Drop `rel`: its next `sha256` reads the file, and the next save drops it on disk."""
        self._need(rel)
        with self._lock:
            if self._entries.pop(rel, None) is not None:
                self._version += 1
                self._dirty = True
            self._touched.add(rel)

    # -- found moves -------------------------------------------------------------------------

    def move_of(self, key: str) -> _Move | None:
        """The move the drift pass found for `key` (an anchor's identity), kept in the manifest:
        (path, path_now, sha256 of path_now then, whether path itself was gone). A lead, not proof."""
        if not self._loaded:
            self._load()
        return self._moves.get(key)

    def note_move(self, key: str, path: str, path_now: str, sha_now: str, gone: bool) -> None:
        """Keep a found move for the next process (see `move_of`); unchanged, nothing to save."""
        if not self._loaded:
            self._load()
        if not (_plain_rel(path) and _plain_rel(path_now) and len(sha_now) == 64 and _utf8(key + path + path_now)):
            return  # never written: a manifest holds only what its reader accepts
        move = (path, path_now, sha_now, bool(gone))
        with self._lock:
            if self._moves.get(key) == move:
                return
            self._moves.pop(key, None)  # re-inserted last: the oldest are dropped first
            self._moves[key] = move
            while len(self._moves) > _MOVES_KEPT:
                oldest = next(iter(self._moves))
                del self._moves[oldest]
                self._moves_touched.add(oldest)
            self._moves_touched.add(key)
            self._gone = None
            self._dirty = True

    def drop_move(self, key: str) -> None:
        """Forget a found move that no longer holds (its target changed, nothing found again)."""
        if not self._loaded:
            self._load()
        with self._lock:
            if self._moves.pop(key, None) is not None:
                self._moves_touched.add(key)
                self._gone = None
                self._dirty = True

    def drop_moves_from(self, path: str) -> None:
        """`path` is back: forget the moves found for it while it was gone (re-judged in place)."""
        if not self._loaded:
            self._load()
        with self._lock:
            for key in [k for k, m in self._moves.items() if m[0] == path and m[3]]:
                del self._moves[key]
                self._moves_touched.add(key)
                self._dirty = True
            self._gone = None

    def moved_from(self) -> frozenset[str]:
        """The paths found gone and followed elsewhere (`move_of`, `gone`): never vouched for."""
        if not self._loaded:
            self._load()
        gone = self._gone
        if gone is None:
            gone = self._gone = frozenset(m[0] for m in list(self._moves.values()) if m[3])
        return gone

    # -- the manifest ----------------------------------------------------------------------

    def _owner(self) -> list[Any] | None:
        """Whose manifest this is: [anchorfs version, state folder's device and inode], None without one."""
        try:
            st = os.lstat(os.path.dirname(self.manifest_path) or ".")
        except OSError:
            return None
        from ..core import __version__

        return [__version__, st.st_dev, st.st_ino]

    def _load(self) -> None:
        data, sig, mtime = self._read_bytes()
        partial = None
        if data is not None and self._only is not None and len(self._only) <= _ONLY_MAX:
            partial = parse_only(data, mtime, self._gran, self._only, self._owner())
        entries, moves, old = partial if partial is not None else self._parse(data, mtime)
        with self._lock:
            if not self._loaded:
                self._entries = entries
                self._moves = moves
                self._gone = None
                self._version += 1
                self._disk_sig = sig
                self._rest = (data, mtime) if partial is not None and data is not None else None
                self._set_window()
                self._loaded = True
                if old:  # an older layout: written in this one at the next save
                    self._dirty = True

    def _need(self, rel: str) -> None:
        """Loaded, and `rel`'s entry decoded if it has one."""
        if not self._loaded:
            self._load()
        if self._rest is not None and rel not in self._only:  # type: ignore[operator]
            self._whole()

    def _need_all(self, rels: Iterable[str]) -> None:
        """`_need` for many paths: loaded, and the rest decoded unless a partial load holds them all."""
        if not self._loaded:
            self._load()
        if self._rest is not None and not self._only.issuperset(rels):  # type: ignore[union-attr]
            self._whole()

    def _whole(self) -> None:
        """Every entry decoded: a partial load (`only`) completed from the bytes it read."""
        if self._rest is not None:
            with self._lock:
                self._whole_locked()

    def _whole_locked(self) -> None:
        if self._rest is None:
            return
        data, mtime = self._rest
        entries, _, _ = parse(data, mtime, self._gran, self._owner())
        entries.update(self._entries)  # the entries decoded (and changed) here stand
        self._entries = entries
        self._rest = None
        self._version += 1
        self._set_window()

    def _set_window(self) -> None:
        self._window_version = self._version
        lo, hi = float("-inf"), float("inf")
        for e in self._entries.values():
            at = e[5]
            if at > lo:
                lo = at
            if at < hi:
                hi = at
        self._lo, self._hi = lo, hi + self._ttl

    def _parse(self, data: bytes | None, mtime: int) -> tuple[dict[str, _Entry], dict[str, _Move], bool]:
        """(entries with racy ones poisoned, found moves, of an older version?); unexpected: cold."""
        return parse(data, mtime, self._gran, self._owner()) if data else ({}, {}, False)

    def _read_disk(self) -> tuple[dict[str, _Entry], _Sig | None]:
        """Entries from the manifest with racy ones poisoned; anything unexpected is cold."""
        data, sig, mtime = self._read_bytes()
        return self._parse(data, mtime)[0], sig

    def _read_bytes(self) -> tuple[bytes | None, _Sig | None, int]:
        """The manifest's bytes, its signature and its mtime; (None, None, 0) when unreadable."""
        from ..core.statefs import STATE_LIMIT, open_state  # a link here is refused, never read through

        try:
            with os.fdopen(open_state(self.manifest_path, os.O_RDONLY), "rb") as f:
                st = os.fstat(f.fileno())
                if st.st_size > STATE_LIMIT:
                    return None, None, 0  # past its bound: a cold cache, never a MemoryError
                data = f.read()
        except OSError:
            return None, None, 0
        return data, _sig(st), st.st_mtime_ns

    def save(self, *, strict: bool = False) -> bool:
        """Write the manifest if an entry changed; return whether it was written. An OSError returns
        False, the changes pending (`strict=True`: raised). Entries another process saved meanwhile
        are merged in unless this instance changed the same path."""
        with self._lock:
            if not self._dirty:
                return False
            try:
                self._write()
            except OSError:
                if strict:
                    raise
                return False
        return True

    def _write(self) -> None:
        """Merge, then temp file + fsync + `os.replace` + fsync the folder; caller holds the lock."""
        from ..core.statefs import fsync_dir, refuse_link, replace_state  # never written through a link, nor over one

        refuse_link(self.manifest_path)
        try:
            cur: _Sig | None = _sig(os.lstat(self.manifest_path))
        except FileNotFoundError:
            cur = None
        if self._rest is not None and cur == self._disk_sig and not self._moves_touched:
            # a partial load, the file as it read it: only the changed entries' bytes are new
            data, mtime = self._rest
            owner = self._owner()
            spliced = splice(data, mtime, self._gran, {rel: self._entries.get(rel) for rel in self._touched},
                             owner) if owner is not None else None
            if spliced is not None:
                st = replace_state(self.manifest_path, spliced, fsync=True, fault_point="manifest-write")
                fsync_dir(os.path.dirname(self.manifest_path))
                self._rest = (spliced, st.st_mtime_ns)
                self._done(_sig(st))
                return
        self._whole_locked()  # every entry is written, not the few a partial load decoded
        entries = self._entries
        moves = self._moves
        if cur is not None and cur != self._disk_sig:
            disk, _, disk_mtime = self._read_bytes()
            theirs, their_moves, _ = self._parse(disk, disk_mtime)
            if theirs:
                entries = dict(entries)
                for rel, e in theirs.items():
                    if rel not in self._touched:
                        entries[rel] = e
            if their_moves:
                moves = dict(moves)
                for key, m in their_moves.items():
                    if key not in self._moves_touched:
                        moves[key] = m
        from orjson import dumps

        part = b""
        if moves:  # the listed moves' bytes as they are, which their CRC is over
            listed = dumps([[key, *m] for key, m in moves.items()])
            part = b',"moves":' + listed + b',"moves_crc32":' + dumps(zlib.crc32(listed))
        owner = self._owner()
        if owner is None:
            raise FileNotFoundError(errno.ENOENT, "no state folder", os.path.dirname(self.manifest_path))
        payload = assemble(dumps(entries), newest_hashed(entries.values()), owner, part)
        new_sig = _sig(replace_state(self.manifest_path, payload, fsync=True, fault_point="manifest-write"))
        fsync_dir(os.path.dirname(self.manifest_path))
        self._entries = entries
        self._moves = moves
        self._gone = None
        self._done(new_sig)

    def _done(self, new_sig: _Sig) -> None:
        """The manifest written as this instance holds it (`new_sig`)."""
        self._version += 1
        self._set_window()
        self._touched.clear()
        self._moves_touched.clear()
        self._dirty = False
        self._disk_sig = new_sig

    def __enter__(self) -> HashCache:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.save()
