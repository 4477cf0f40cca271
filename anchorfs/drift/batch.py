"""The batch pass's plan: what a set of memories asks of the file system (`_Plan`: the
distinct anchored files, the hash their anchors recorded, the folders on their way), derived
from the memories alone and kept between passes while the same memories come back
(`_plan_of`), or taken from the fold snapshot without building one (`plan_of_files`).

`DriftChecker.check_all` and `check_planned` (`anchorfs.drift.check`) vouch for the plan's
files in one C loop and check one by one only the memories resting on a file that failed.
"""

from __future__ import annotations

import os
from _thread import allocate_lock  # `threading.Lock` itself, without importing `threading` (a hook's import)
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from itertools import chain, repeat
from operator import attrgetter, is_, itemgetter

from .report import _ANCHORS, _PATH
from ..core.guard import folded as fold_name
from ..core.locate import STATE_DIR
from ..core.model import Memory

__all__ = ["plan_of_files"]

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
_plans_lock = allocate_lock()


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
