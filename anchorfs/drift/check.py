"""The drift pass: re-check anchors through the hash cache, judge memories, demote scores.

This runs on every read, so the common case (nothing moved) costs one `lstat` per anchored
file: the hash comes from the racy-safe cache, folders are checked once per pass, and a file is
read again only when its stat moved. `check` does one memory (a query's hits); `check_all` a
whole workspace, planned per file (`_Plan`). Staleness needs positive evidence: an anchor we
cannot read is `unknown`, never `stale`.

`DriftChecker` stands on `MoveSearch` (`drift.moves`: where moved content went), which stands on
`FileProbe` (`drift.probe`: the pass's files, located, hashed and read once); results are `drift.report`'s.
"""

from __future__ import annotations

import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from itertools import chain, repeat
from operator import attrgetter, is_, itemgetter
from typing import cast

from ..anchor.anchors import MAX_FILE_BYTES, is_state_name, judge, nearest_now
from ..core.guard import EscapedError, NotRegularError, SwappedError, TooLargeError, read_guarded
from ..core.guard import folded as fold_name
from ..core.model import AnchorCheck, AnchorRef, Memory, Verdict, drift_of
from ..core.statedir import STATE_DIR
from . import moves as drift_moves
from .hashcache import HashCache
from .moves import _GONE, MoveSearch, _followed_lock
from .probe import _RECHECKS, _why
from .report import _ANCHORS, _PATH, DriftReport, MemoryDrift


__all__ = ["DriftChecker", "plan_of_files"]


_CHUNK = 4096
"""Files hashed per call in a cold whole-workspace pass: paces the progress bar."""
_THEN_TOKENS: dict[tuple[str, AnchorRef], str | None] = {}
"""Token hashes of anchors recorded without one, read back from git's blob of then."""


class DriftChecker(MoveSearch):
    """One drift pass, memoized per anchor and folder: a new one per read. `whitespace` is
    `drift.whitespace` ("tokens" or "strict"); None reads the config when first needed."""

    def __init__(self, root_real: str, cache: HashCache, *, whitespace: str | None = None) -> None:
        super().__init__(root_real, cache, whitespace=whitespace)
        self._plain_dirs: dict[str, bool] = {}
        self._dir_stats: dict[str, os.stat_result | None] = {}  # `_odd_dirs`'s folder stats (None: gone)

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
            changed = self._changed(ref, st, sha)
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
                from ..core.git import elsewhere

                why = elsewhere(self.root_real, ref.commit, ref.path)
                if why is not None:
                    return AnchorCheck(ref, Verdict.UNREADABLE, why)
            return gone
        return AnchorCheck(ref, probe.verdict, detail)

    def _changed(self, ref: AnchorRef, st: os.stat_result, sha: str) -> AnchorCheck | None:
        """The file's hash moved (it is `sha` now): judge a narrowed anchor by its own text, read
        held to the stat its hash was taken with; None when swapped or removed since (check afresh)."""
        if not ref.symbol and not ref.lines and not self._then_known(ref):
            return AnchorCheck(ref, Verdict.CHANGED, f"{ref.path} changed")
        return self._judged(ref, st)  # a whole file too, when its text of then can say "only a formatter"

    def _then_known(self, ref: AnchorRef) -> bool:
        """Whether an anchor's text of then can be read back from git and parsed: taken clean at
        a commit, in a language with a grammar, and `drift.whitespace` not strict."""
        from ..anchor.symbols import language_for

        return not self.strict and bool(ref.commit) and ref.dirty is False and language_for(ref.path) is not None

    def _judged(self, ref: AnchorRef, st: os.stat_result) -> AnchorCheck | None:
        """`_changed`'s judgement of a narrowed anchor: the file read and its text judged."""
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
        return self.judge_bytes(ref, data)

    def judge_bytes(self, ref: AnchorRef, data: bytes) -> AnchorCheck:
        """A narrowed (or a whole-file) anchor judged against `data`, its file's bytes now: read from
        disk, or an editor's unsaved buffer (`agents.lsp`), which nothing here caches or writes."""
        verdict, detail, where = judge(ref, data, strict=self.strict)
        if verdict is Verdict.CHANGED and not ref.token_hash and self._same_tokens_as_then(ref, data, where):
            return AnchorCheck(ref, Verdict.REFORMATTED, f"{ref.spec} reformatted: same tokens, other layout", where)
        if verdict is Verdict.CHANGED and ref.lines and where is None:
            verdict, detail, where = nearest_now(ref, data, self.then_of(ref), detail, strict=self.strict)
        return AnchorCheck(ref, verdict, detail, where)

    def _same_tokens_as_then(self, ref: AnchorRef, data: bytes, where: tuple[int, int] | None) -> bool:
        """For an anchor recorded without a token hash (a whole file: always): whether its text has
        the tokens it had at its commit (read back from git, its sha256 matching); never with
        `drift.whitespace = "strict"`."""
        from ..anchor.anchors import narrowed_tokens
        from ..anchor.symbols import token_hash

        if not self._then_known(ref):
            return False
        from ..core.guard import sha256_bytes

        def tokens(r: AnchorRef, text: bytes) -> str | None:
            return narrowed_tokens(r, text) if r.symbol or r.lines else token_hash(r.path, text, 0, len(text))

        key = (self.root_real, ref)
        if key in _THEN_TOKENS:  # a commit's blob never changes: once per process
            old = _THEN_TOKENS[key]
        else:
            then = self.then_of(ref)
            old = tokens(ref, then) if then and sha256_bytes(then) == ref.sha256 else None
            with _followed_lock:
                if len(_THEN_TOKENS) >= drift_moves._FOLLOWED_KEPT:  # the moves' bound: one knob for both
                    _THEN_TOKENS.clear()
                _THEN_TOKENS[key] = old
        if old is None:
            return False
        now = tokens(ref if ref.symbol or not ref.lines else ref.replace(lines=where or ref.lines), data)
        return old == now

    def check(self, memory: Memory) -> MemoryDrift:
        self._since_ns = int((memory.verified_at or memory.recorded_at).timestamp() * 1e9)  # `_search`, no git
        checks = tuple(self.check_anchor(a) for a in memory.anchors)
        return MemoryDrift(memory, drift_of([c.verdict for c in checks]), checks)

    def check_all(self, memories: Sequence[Memory],
                  progress: Callable[[int, int], None] | None = None) -> DriftReport:
        """`check` over many memories, for whole-workspace passes. The pass follows files: the
        cache vouches for each distinct anchored file once (`_vouched`), its folders are checked
        once (`_odd_dirs`), and only memories resting on a file it cannot vouch for (or whose
        anchors disagree on its hash) take `check`. The plan (`_Plan`) is kept between passes."""
        checked = list(memories)
        return self.check_planned(_plan_of(self.root_real, checked), checked, progress)

    def check_planned(self, plan: _Plan, checked: Sequence[Memory],
                      progress: Callable[[int, int], None] | None = None, *, claims: Sequence[int] | None = None,
                      paths: list[str] | None = None) -> DriftReport:
        """`check_all` of the memories `plan` was made for (`checked`, by position): only those on
        a file the cache cannot vouch for are read from `checked`, so it may build them on demand
        (`claims` and `paths`: what the report would otherwise read off every memory)."""
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
        Only plain paths under folders still their own realpath (`_odd_dirs`) qualify; a link never
        matches its cached target. Files the cache has no word on are hashed here, `_CHUNK` at a time."""
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
        hashes = self.cache.vouch(plan.uniq, fulls, seen=seen, root=self.root_real)
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
        """The plan's folders that are not their own realpath (a link on the way down) or are the
        state folder: files under them take the careful route. Every folder is `lstat`-ed each
        pass, in one C loop against the stats the last full check kept; any change judges them again."""
        from . import hashcache as hashing

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
        """Whether a workspace folder is its own realpath (no link on the way down) and not
        `.anchorfs/`, so a path under it needs no resolving; a folder gone counts as plain."""
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


_SHA = attrgetter("sha256")
_HEAD = itemgetter(0)


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
        self.owners_of = owners_of  # distinct path's position -> its memories' positions (a snapshot's plan)
        self._owners: list[list[int]] | None = None
        self._under: tuple[frozenset[str], list[str | None]] | None = None

    def suspects(self, bad: list[int]) -> list[int]:
        """The memories (positions, in order) resting on any of these files, and the unanchored:
        a few files are scanned for, more build the map of every file's memories (kept)."""
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
"""Smaller sets (a query's hits) are planned afresh: cheap, and kept out of `_PLANS`."""
_plans_lock = threading.Lock()


def _plan_of(root_real: str, memories: list[Memory]) -> _Plan:
    """The plan of a set of memories, reused while the same memory objects come back in the
    same order (a fold keeps unchanged memories' objects); any other set is planned afresh."""
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
    """`_plan_of`'s plan from what the memories ask alone (`foldsnap.DriftView`: distinct paths,
    the hash their anchors recorded, the memories on each), without one memory built."""
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
        folded = "\n".join(map(fold_name, uniq))
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
    return "\0" in path or ".." in path or path[:1] == "/" or STATE_DIR in fold_name(path)
