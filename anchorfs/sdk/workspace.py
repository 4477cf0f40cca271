"""The SDK: `anchorfs.open(...) -> Workspace`. The CLI and the MCP server only call this.

Write path: validate and take anchors outside the lock, then under the writer lock: replay any
ledger tail the store missed, append the ledger (fsync), write the store, advance the
checkpoint. A crash between ledger and store is repaired on the next open; a failed ledger
append means nothing happened.

Read path: search the store, drift-check the hits through the hash cache, demote, re-sort,
write back drift that changed. `drift()` and `list()` read the ledger, never LanceDB (fast hooks).

This module is the SDK's face; the logic lives one concept per module: `writes`, `revision`,
`recall` (the query path), `storesync` (the store kept to the ledger, and drift.json).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

_list = list  # `Workspace.list` shadows the builtin in annotations below it

from ..anchor import anchors as anchors_mod
from ..ledger import catchup, foldsnap
from . import storesync as writeback  # recall, revision, storesync, writes: where used (a digest needs none)
from ..core.config import Config, load_config
from ..drift import DriftChecker, DriftReport, MemoryDrift, envelope
from ..core.errors import AnchorfsError, HistoryError, InputError, NotFoundError, WorkspaceError
from ..drift.hashcache import HashCache
from ..ledger.log import Entry, FoldState, Ledger
from ..core.statedir import init, locate, upgrade_gitignore  # noqa: F401 (init, upgrade_gitignore re-exported)
from ..core.statefs import check_state
from .storesync import DRIFTS, UNANCHORED
from ..core.model import (Candidate, Drift, Memory, Status, MIN_ID_PREFIX, Value, claim_key, new_id, parse_time, short_ids, utcnow,
                          validate_memory)

if TYPE_CHECKING:
    from pathlib import Path  # annotations only: see anchorfs/workspace.py
    from typing import Any

    from ..core.model import Hit
    from ..ledger.log import Fork  # a digest lists no forks: `anchorfs.ledger.log` builds two dataclasses
    from .writes import AnchorLike
    from .recall import ContextBlock
    from ..store.embedders import Embedder
    from ..store.table import Store
    from ..history import AtReport, BisectResult, LogResult
    from ..verify.claims import SuggestReport, VerifyReport
    from .tidy import TidyReport
    from .instructions import ExportResult, ImportResult

__all__ = ["Workspace", "open", "init", "find_root", "HistoryEvent", "STATE_DIR"]

STATE_DIR = anchors_mod.STATE_DIR


def covered_by(paths: Iterable[str]) -> Callable[[str], bool]:
    """Whether an anchored path is one of `paths` or lies under one (a folder covers the files
    under it): how the paths an edit or a commit touched are read."""
    wanted = frozenset(p.strip("/") for p in paths if p and p.strip("/"))
    under = tuple(w + "/" for w in wanted)  # a proper prefix of a path's parts is followed by a "/"

    def hit(path: str) -> bool:
        return path in wanted or path.startswith(under)

    return hit


def find_root(root: str | os.PathLike[str] | None = None) -> Path:
    """`root`, else $ANCHORFS_ROOT, else the nearest parent of the cwd holding `.anchorfs/`."""
    from pathlib import Path

    return Path(locate(root))


def open(root: str | os.PathLike[str] | None = None, *, embedder: str | None = None) -> "Workspace":  # noqa: A001
    """Open the workspace at `root` (or found like git finds `.git`)."""
    return Workspace(find_root(root), embedder=embedder)


class HistoryEvent(Value):
    """One ledger entry touching a memory's chain (a `model.Value`: opening a workspace builds no dataclass)."""

    __slots__ = ("op", "at", "actor", "reason", "memory")
    op: str
    at: datetime
    actor: str
    reason: str | None
    memory: Memory

    def __init__(self, op: str, at: datetime, actor: str, reason: str | None, memory: Memory) -> None:
        for name, value in zip(self.__slots__, (op, at, actor, reason, memory)):
            object.__setattr__(self, name, value)

    def to_dict(self) -> dict[str, Any]:
        from ..core.model import to_iso

        return {"op": self.op, "at": to_iso(self.at), "actor": self.actor, "reason": self.reason,
                "id": self.memory.id, "status": self.memory.status, "memory": self.memory.to_dict()}


class _ReadOnlyCache(HashCache):
    """The hash cache of a read-only workspace: hashes are kept in memory, never saved."""

    def save(self, *, strict: bool = False) -> bool:
        return False


class Workspace:
    def __init__(self, root: str | os.PathLike[str], *, embedder: str | None = None, read_only: bool = False) -> None:
        self.read_only = read_only  # nothing in .anchorfs/ is written, a write raises (MCP --read-only)
        # Kept as str: `root` and `state` build their `Path` on first use, so opening a workspace
        # (a hook) never imports `pathlib`, which is slow to import.
        self.root_dir = os.fspath(root)
        self.root_real = os.path.realpath(self.root_dir)
        self.state_dir = os.path.join(self.root_dir, STATE_DIR)
        check_state(self.state_dir)  # a link at any state path: refused before anything is read
        self.config: Config = load_config(self.root_dir)
        self._embedder_name = embedder or self.config.embedder
        self.ledger = Ledger(self.state_dir)
        self.cache = self._hash_cache()
        self._embedder: Embedder | None = None
        self._store: Store | None = None
        self._store_opened = False  # once opened here, writes go through it (see `writes.commit`)
        self._fold: catchup.Folded | None = None  # the in-process fold and the ledger prefix it took in
        self._applied_at: catchup.Prefix | None = None  # the prefix the store holds, as last verified
        self._in_git: bool | None = None
        self._git_top: tuple[Path, str] | None = None
        self._history_memo: dict[tuple[Any, ...], Any] = {}

    def _hash_cache(self, ttl: float | None = None) -> HashCache:
        """The hash cache over `manifest.json` (`drift.cache_ttl`, unless `ttl`); read-only: never written."""
        ttl = float(self.config["drift.cache_ttl"]) if ttl is None else ttl
        return (_ReadOnlyCache if self.read_only else HashCache)(os.path.join(self.state_dir, "manifest.json"), ttl=ttl)

    @property
    def root(self) -> Path:
        """The workspace's folder, as it was given."""
        return self._as_path("_root_path", self.root_dir)

    @property
    def state(self) -> Path:
        """Its state folder, `.anchorfs/`."""
        return self._as_path("_state_path", self.state_dir)

    def _as_path(self, slot: str, text: str) -> Path:
        got = self.__dict__.get(slot)
        if got is None:
            from pathlib import Path

            got = self.__dict__[slot] = Path(text)
        return got

    # -- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> "Workspace":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Save the hash cache."""
        self.cache.save()

    # -- lazy parts ------------------------------------------------------------------------

    @property
    def embedder(self) -> "Embedder":
        """The embedder asked for (argument, `embedder =` in .anchorfs.toml, ANCHORFS_EMBEDDER), else
        the one the store was last built with (so `reindex --embedder e5` is remembered)."""
        if self._embedder is None:
            from ..core.config import CONFIG_FILE, env_name
            from ..store.embedders import get_embedder

            name = self._embedder_name
            chosen = name != self.config.embedder or env_name("embedder") in os.environ
            if not chosen:  # did .anchorfs.toml name it? Read as load_config reads it (guarded: no FIFO hang)
                from ..core.guard import read_guarded

                try:
                    raw: bytes | None = read_guarded(os.path.realpath(self.root / CONFIG_FILE), root=self.root_real,
                                                     max_bytes=1 << 20)
                except FileNotFoundError:
                    raw = None
                except (OSError, AnchorfsError):  # GuardError: unreadable now, though it loaded; keep the config's word
                    raw, chosen = None, True
                if raw is not None:
                    import tomllib

                    try:
                        chosen = "embedder" in tomllib.loads(raw.decode("utf-8"))
                    except (ValueError, RecursionError):
                        chosen = True
            if not chosen:
                from ..store.table import Store

                name = Store(self.state, get_embedder(name)).stored_embedder() or name
            self._embedder = get_embedder(name)
            self._embedder_name = self._embedder.name
        return self._embedder

    @property
    def store(self) -> "Store":
        """The LanceDB store, exactly the fold of the ledger as it is now: a crash between the two
        is repaired, a ledger rewritten (by git or by hand) is followed (`anchorfs.ledger.catchup`)."""
        if self._store is not None and catchup.settled(self.ledger, self._applied_at):
            return self._store
        from . import storesync
        return storesync.open_store(self)

    def _git_place(self) -> tuple[Path, str] | None:
        """The git repo's top level and the workspace's path prefix in it, looked up once; None
        outside git, or without a git binary (anchors and envelopes then go without commit names)."""
        if self._in_git is None:
            from ..core.git import prefix_of, toplevel

            try:
                top = toplevel(self.root)
            except HistoryError as exc:  # git is not installed
                import logging  # here only: slow to import for a hook

                logging.getLogger("anchorfs").info("%s: anchors and envelopes go without commit names", exc)
                top = None
            self._in_git = top is not None
            if top is not None:
                from pathlib import Path

                self._git_top = (Path(os.path.realpath(top)), prefix_of(self.root, top))
        return self._git_top

    # -- the ledger as state --------------------------------------------------------------

    def _memories(self) -> dict[str, Memory]:
        """Latest snapshot of every memory, folded from the ledger as it is now. Kept per process
        and extended by new lines only; a ledger rewritten under it is folded afresh (the fold is
        keyed on a checksum of its prefix). A new process starts from the fold snapshot on disk
        where it still holds (`anchorfs.ledger.foldsnap`)."""
        cached = self._fold
        if cached is not None and catchup.settled(self.ledger, cached.prefix):
            return cached.state
        self._fold = foldsnap.current(self.ledger, cached, write=not self.read_only)
        return self._fold.state

    # -- writes ----------------------------------------------------------------------------

    def record(self, content: str, *, kind: str = "note", tags: Sequence[str] = (),
               anchors: Iterable[AnchorLike] = (), author: str | None = None, allow_secret: bool = False,
               propose: bool = False) -> Memory:
        """Record one memory; its anchors (given and `@anchor` markers) are validated and hashed.
        The same claim again (active, same kind, text and anchored content) writes nothing: that
        memory comes back with `duplicate` set. `propose=True` writes it `proposed` (unread until `accept`)."""
        return self.record_many([dict(content=content, kind=kind, tags=tags, anchors=anchors, author=author)],
                                allow_secret=allow_secret, propose=propose)[0]

    def record_many(self, items: Iterable[dict[str, Any]], *, allow_secret: bool = False,
                    propose: bool = False) -> list[Memory]:
        """Record several memories (dicts of `record`'s fields) in one ledger append and one store
        write, all or nothing, each checked by the ledger reader's rules first. A repeat of an
        active memory (or within the batch) is not written: the existing one comes back, `duplicate` set."""
        if isinstance(items, (str, bytes, dict)) or not hasattr(items, "__iter__"):
            raise InputError(f"record_many takes a list of memories (dicts), got {type(items).__name__}")
        if type(propose) is not bool:
            raise InputError(f"propose must be true or false, got {type(propose).__name__}")
        # a proposal repeating an active claim, or one still under review, is that memory again
        held = (Status.ACTIVE, Status.PROPOSED) if propose else (Status.ACTIVE,)
        prepared = []
        for item in items:
            if not isinstance(item, dict) or "content" not in item:
                raise InputError("each memory to record needs a 'content'")
            unknown = set(item) - {"content", "kind", "tags", "anchors", "author"}
            if unknown:
                raise InputError(f"unknown field(s) for a memory: {', '.join(sorted(map(str, unknown)))}")
            from . import writes
            content, kind, tags = writes.validate(self, item["content"], item.get("kind", "note"), item.get("tags", ()))
            author = writes.author(self, item.get("author"))
            anchors = writes.take_anchors(self, content, item.get("anchors", ()), stamp=False)
            prepared.append((content, kind, tags, anchors, author))
        if not prepared:
            return []
        texts = {c.strip() for c, *_ in prepared}
        known = {claim_key(m.content, m.kind, m.anchors): m for m in self._memories().values()
                 if m.status in held and m.content.strip() in texts}
        now = utcnow()
        out: list[Memory] = []
        memories: list[Memory] = []
        for c, k, t, a, au in prepared:
            key = claim_key(c, k, a)
            if key in known:
                out.append(known[key].replace(duplicate=True))
                continue
            known[key] = m = Memory(id=new_id(), content=c, kind=k, tags=t, anchors=a, author=au,
                                    recorded_at=now, valid_from=now,
                                    status=(Status.PROPOSED if propose else Status.ACTIVE).value)
            memories.append(m)
            out.append(m)
        if not memories:
            return out
        stamped = writes.stamp_git(self, [m.anchors for m in memories])  # one git process per batch
        done = {m.id: validate_memory(m.replace(anchors=a)) for m, a in zip(memories, stamped)}
        found = self._candidates(list(done.values()))
        writes.commit(self, "record", list(done.values()), new=True, at=now, allow_secret=allow_secret,
                      conflicts=found)
        return [done[m.id].replace(duplicate=m.duplicate, candidates=found[m.id]) if m.id in done else m for m in out]

    def _candidates(self, memories: _list[Memory], retiring: str | None = None) -> dict[str, tuple[Candidate, ...]]:
        """What each memory about to be written may repeat or contradict on its ground, among the
        active memories and the others written with it (`retiring` left out: `anchorfs.sdk.tidy`)."""
        from .tidy import Ground

        ground = Ground((m for m in self._memories().values() if m.id != retiring), around=memories)
        return ground.candidates(memories, self.short_ids)

    def get(self, memory_id: str) -> Memory:
        """A memory by id or by a unique prefix of MIN_ID_PREFIX+ characters (`show 01`); an
        ambiguous prefix is refused naming its candidates."""
        if not isinstance(memory_id, str):
            raise InputError(f"a memory id must be a string, got {type(memory_id).__name__}")
        if not memory_id.strip():
            raise NotFoundError("no memory id given")
        mems = self._memories()
        key = memory_id.strip().lower()
        if key in mems:
            return mems[key]
        if len(key) < MIN_ID_PREFIX:
            raise NotFoundError(f"no memory {memory_id!r} (an id prefix needs {MIN_ID_PREFIX}+ characters)")
        matches = sorted(mid for mid in mems if mid.startswith(key))
        if len(matches) == 1:
            return mems[matches[0]]
        if matches:
            shown = ", ".join(matches[:8]) + (f" and {len(matches) - 8} more" if len(matches) > 8 else "")
            raise NotFoundError(f"memory id {memory_id!r} is ambiguous: {len(matches)} memories start with it "
                                f"({shown}); give more of the id")
        raise NotFoundError(f"no memory {memory_id!r}")

    def short_ids(self, ids: Iterable[str]) -> dict[str, str]:
        """Each id as a person reads and types it back: its shortest unique prefix (`model.short_ids`).
        A process that has not folded (a hook) does not fold for it: the only ids that can share
        more than its first SHOWN_ID_CHARS are the ledger's memory ids starting with them."""
        ids = list(ids)
        if self._fold is not None or not ids:  # none: nothing to read, never a fold
            return short_ids(ids, self._memories() if ids else ())
        import re

        from ..core.model import SHOWN_ID_CHARS

        heads = {i[:SHOWN_ID_CHARS] for i in ids}
        same = os.path.commonprefix(list(heads))  # one pass in C, each `"id"` its literal start
        starts = "|".join(re.escape(h[len(same):]) for h in heads)
        near = set(re.findall(rf'"id"\s*:\s*"({re.escape(same)}(?:{starts})[0-9a-z]*)"'.encode(), self.ledger._head()))
        return short_ids(ids, {n.decode() for n in near})

    def _head_of(self, memory: Memory) -> Memory:
        mems = self._memories()
        seen = set()
        while memory.superseded_by and memory.superseded_by in mems and memory.id not in seen:
            seen.add(memory.id)
            memory = mems[memory.superseded_by]
        return memory

    def supersede(self, memory_id: str, content: str, *, reason: str | None = None,
                  anchors: Iterable[AnchorLike] | None = None, kind: str | None = None,
                  tags: Sequence[str] | None = None, author: str | None = None,
                  drop_anchors: bool = False, allow_secret: bool = False, propose: bool = False) -> Memory:
        """Correct a memory: the successor wins at recall, the old belief keeps its bounds.

        Kind, tags and anchors are inherited unless given; `anchors=None` or `[]` re-take the old
        anchors against the files now (moved lines followed); `drop_anchors=True` leaves the
        successor unanchored (`@anchor` markers in its text still count). `propose=True` writes it
        `proposed`, the old memory served until `accept`. Superseding one side of a fork supersedes all.
        """
        from . import revision
        return revision.supersede(self, memory_id, content, reason=reason, anchors=anchors, kind=kind, tags=tags,
                                  author=author, drop_anchors=drop_anchors, allow_secret=allow_secret,
                                  propose=propose)

    def redact(self, memory_id: str, *, reason: str, anchors: bool = False) -> Memory:
        """Purge a memory's text (its anchors too with `anchors=True`) from every ledger line: for a
        leaked secret, never for a correction. The ledger keeps a `redact` entry with the SHA-256 of
        what was removed; a committed ledger's git history still holds the text (`redact_history`)."""
        from . import revision
        return revision.redact(self, memory_id, reason=reason, anchors=anchors)

    def retract(self, memory_id: str, *, reason: str | None = None) -> Memory:
        """Withdraw a belief with no successor."""
        from . import revision
        return revision.retract(self, memory_id, reason=reason)

    def accept(self, memory_id: str, *, reason: str | None = None) -> Memory:
        """Accept a proposed memory (`anchorfs mcp --propose`): it is active and served from now. A
        proposed supersede retires its predecessor only now: one no longer active is refused."""
        from . import revision
        return revision.accept(self, memory_id, reason=reason)

    def reject(self, memory_id: str, *, reason: str | None = None) -> Memory:
        """Turn down a proposed memory: it is retracted with `reason`, never served; the ledger
        keeps it. A proposed supersede leaves its predecessor as it was."""
        from . import revision
        return revision.reject(self, memory_id, reason=reason)

    def revert(self, memory_id: str, *, reason: str | None = None) -> Memory:
        """Undo a supersede or a retract: the memory is active again, its successor retracted.
        Given the successor of a supersede, that supersede is undone (the predecessor returned)."""
        from . import revision
        return revision.revert(self, memory_id, reason=reason)

    def reanchor(self, memory_id: str, *, anchors: Iterable[AnchorLike] | None = None,
                 reason: str | None = None, drop_anchors: bool = False) -> Memory:
        """Someone re-verified the memory: anchor it to the content as it is now. `anchors`
        replaces its anchors (None or []: its own, re-taken, moved lines followed); `drop_anchors=True`
        leaves it unanchored. Only an active memory can be re-anchored."""
        from . import revision
        return revision.reanchor(self, memory_id, anchors=anchors, reason=reason, drop_anchors=drop_anchors)

    # -- reads -----------------------------------------------------------------------------

    def list(self, *, limit: int | None = None, status: str | None = "active",
             drift: str | None = None, unused: str | datetime | None = None) -> _list[Memory]:
        """Memories newest first; `drift` keeps those whose drift is that now (`drift_of`):
        fresh, stale, unknown, or unanchored for a memory with no anchors; `unused` (`28d`, or a
        time) those recorded before then and handed to no agent since (`last_handed`)."""
        mems = [m for m in self._memories().values() if status in (None, "all") or m.status == status]
        if unused is not None:
            since, last = parse_time(unused) if isinstance(unused, str) else unused, self.last_handed()
            mems = [m for m in mems if m.recorded_at <= since and (m.id not in last or last[m.id][0] < since)]
        mems.sort(key=lambda m: (m.recorded_at, m.id), reverse=True)
        if drift is not None:
            if drift not in (*DRIFTS, UNANCHORED):
                raise InputError(f"unknown drift {drift!r}; one of: fresh, stale, unknown, unanchored")
            now = self.drift_of(mems)
            mems = [m for m in mems if now[m.id] == drift]
        return mems[:limit] if limit else mems

    def handed(self, ids: Iterable[str], by: str) -> None:
        """Note in the local usage record that `by` (recall, context, a hook) handed `ids` to an agent
        (not by a read-only workspace: it writes nothing)."""
        from .usage import handed

        if not self.read_only:
            handed(self.state_dir, ids, by)

    def last_handed(self) -> dict[str, tuple[datetime, str]]:
        """Each memory's newest hand-out to an agent: id -> (when, by which surface) (`sdk.usage`)."""
        from .usage import last_handed

        return last_handed(self.state_dir)

    def drift_of(self, memories: Iterable[Memory]) -> dict[str, str]:
        """Each memory's drift now, by id: its anchors checked through the hash cache (never a
        record of an earlier check, which a lost or damaged file would turn into `fresh`);
        `unanchored` without anchors; `stale` when `verify --mark` found its text stale."""
        mems = _list(memories)
        checker = DriftChecker(self.root_real, self.cache, whitespace=str(self.config["drift.whitespace"]))
        report = checker.check_all([m for m in mems if m.anchors])
        self.cache.save()
        out: dict[str, str] = {}
        for m in mems:
            if m.stale_claims:
                out[m.id] = Drift.STALE.value
            elif not m.anchors:
                out[m.id] = UNANCHORED
            else:
                out[m.id] = report.result_of(m).drift.value
        return out

    def last_drift(self) -> dict[str, str]:
        """Drift as of the last check (`.anchorfs/drift.json`): the memories found not fresh then.
        Only what a re-check compares with; never read as a memory's drift (`drift_of`)."""
        return writeback.read(self.state_dir)[0]

    def _write_back(self, results: Iterable[MemoryDrift] | DriftReport) -> int:
        """Persist drift that changed since the last check (`anchorfs.sdk.storesync`): the store's
        column at once when the store is open here, else when it is next opened."""
        return writeback.write_back(self.state_dir, results, store=self._store, read_only=self.read_only)

    def drift(self, *, progress: Callable[[int, int], None] | None = None, rehash: bool = False) -> DriftReport:
        """Check every active anchored memory now; one whose text `verify --mark` found stale
        counts stale, anchored or not (drift.json keeps what the anchors alone say). `rehash`:
        hash every anchored file again, trusting no cached hash (a write its stat does not show).

        A process that has not folded takes the pass's inputs from the fold snapshot
        (`foldsnap.drift_view`); otherwise they are kept while the fold is the same object."""
        cache = self._hash_cache(ttl=0.0) if rehash else self.cache  # a TTL of 0: no cached hash trusted
        checker = DriftChecker(self.root_real, cache, whitespace=str(self.config["drift.whitespace"]))
        view = foldsnap.drift_view(self.ledger) if self._fold is None else None
        if view is not None:
            from ..drift.check import plan_of_files

            plan = plan_of_files(self.root_real, view.uniq, view.want, view.owners.__getitem__)
            report = checker.check_planned(plan, view.targets, progress, claims=view.claims, paths=view.uniq)
            marked: Sequence[Memory] = view.marked
        else:
            state = self._memories()
            held = self.__dict__.get("_drift_targets")
            if held is not None and held[0] is state:
                targets, marked = held[1], held[2]
            else:
                active = [m for m in state.values() if m.status == Status.ACTIVE]
                targets = [m for m in active if m.anchors]
                marked = [m for m in active if m.stale_claims and not m.anchors]
                self._drift_targets = (state, targets, marked)
            report = checker.check_all(targets, progress)
        cache.save()
        if rehash:
            self.cache = self._hash_cache()  # the hashes just taken, under the configured TTL
        self._write_back(report)
        return report.with_claims(marked)

    def check(self, memory: Memory) -> MemoryDrift:
        """One memory's drift now: its anchors, and any claim of its text `verify --mark` found stale."""
        checker = DriftChecker(self.root_real, self.cache, whitespace=str(self.config["drift.whitespace"]))
        return checker.check(memory).with_claims()

    def query(self, text: str, *, k: int | None = None, include_superseded: bool = False,
              as_of: str | datetime | None = None, stale: str = "include") -> _list[Hit]:
        """Hybrid search, then the drift pass: stale hits demoted and flagged, never hidden.
        `stale`: "include" (default), "exclude" or "only". `as_of`: the memories active then, as
        they stood, checked against the files now (no drift written back)."""
        from . import recall
        return recall.query(self, text, k=k, include_superseded=include_superseded, as_of=as_of, stale=stale)

    def bisect(self, memory_id: str, *, progress: "Callable[[int, int], None] | None" = None) -> "BisectResult":
        """The commit (or the working tree) that staled a memory, with its hunk."""
        from ..history import bisect

        return bisect(self.root, self.get(memory_id), progress=progress)

    def log(self, memory_id: str, *, progress: "Callable[[int, int], None] | None" = None) -> "LogResult":
        """Every step of git history that touched each of a memory's anchors."""
        from ..history import log

        return log(self.root, self.get(memory_id), progress=progress)

    def at(self, rev: str) -> "AtReport":
        """What `drift` would have said at REV, for the memories that existed then."""
        from ..history import drift_at

        if not isinstance(rev, str) or not rev.strip() or rev.startswith("-"):
            raise InputError(f"bad revision {rev!r}")
        mems = [m for m in self._memories().values() if m.anchors]  # any status: it may have held then
        return drift_at(self.root, mems, rev.strip())

    # -- history ---------------------------------------------------------------------------

    def history(self, memory_id: str) -> _list[HistoryEvent]:
        """The whole supersede chain of a memory, oldest first, with times, actors and reasons."""
        target = self.get(memory_id)
        mems = self._memories()
        # Links both ways: a revert clears the old memory's `superseded_by`, but its former
        # successor still names it in `supersedes`, and belongs in the story.
        links: dict[str, set[str]] = {}
        for m in mems.values():
            for other in (m.supersedes, m.superseded_by):
                if other and other in mems:
                    links.setdefault(m.id, set()).add(other)
                    links.setdefault(other, set()).add(m.id)
        chain = {target.id}
        todo = [target.id]
        while todo:
            for other in links.get(todo.pop(), ()):
                if other not in chain:
                    chain.add(other)
                    todo.append(other)
        events: _list[HistoryEvent] = []
        for entry in self.ledger.read():
            for m in entry.memories:
                if m.id in chain:
                    events.append(HistoryEvent(entry.op, entry.at, entry.actor, entry.reason, m))
        return events

    def ledger_entries(self, *, since: str | datetime | None = None, limit: int | None = None) -> _list[Entry]:
        """The audit trail, newest first."""
        when = None if since is None else (since if isinstance(since, datetime) else parse_time(since))
        entries = [e for e in self.ledger.read() if when is None or e.at >= when]
        entries.reverse()
        return entries[:limit] if limit else entries

    # -- prose claims (verify) -------------------------------------------------------------

    def verify(self, *, net: bool = False, mark: bool = False, timeout: float = 8.0) -> "VerifyReport":
        """Check what active memories' prose claims (paths, symbols, URLs with `net`).

        `mark` keeps the findings on each memory (`Memory.stale_claims`, a `mark` ledger entry):
        a memory claiming something gone is served stale until a later `mark` finds it holds, or
        it is superseded or re-anchored. Only a memory whose findings changed gets an entry.
        """
        from ..verify.claims import verify as verify_claims

        if mark and self.read_only:
            raise WorkspaceError(f"the workspace at {self.root} is open read-only; verify --mark was not written")
        active = [m for m in self._memories().values() if m.status == Status.ACTIVE]
        report = verify_claims(self.root_real, active, net=net, timeout=timeout)
        if mark and report.results:
            from . import writes
            writes.mark(self, report, active)
        return report

    def suggest(self, *, apply: bool = False) -> "SuggestReport":
        """Anchors that unanchored memories' text names; `apply` anchors them (a reanchor entry).
        A memory making a stale claim is only proposed, never anchored (`Suggestion.why`)."""
        from ..verify.claims import SuggestReport, suggest_report

        active = [m for m in self._memories().values() if m.status == Status.ACTIVE and not m.anchors]
        report = suggest_report(self.root_real, active)
        if not apply:
            return report
        import dataclasses  # here: a Suggestion is a dataclass, and this is no hook's path

        done = []
        for s in report.suggestions:
            if not s.held:
                self.reanchor(s.id, anchors=list(s.anchors), reason="verify --suggest --apply")
            done.append(dataclasses.replace(s, applied=not s.held))
        return SuggestReport(tuple(done), applied=True)

    # -- maintenance -----------------------------------------------------------------------

    def reindex(self, *, embedder: str | None = None,
                progress: Callable[[int, int], None] | None = None) -> int:
        """Rebuild the store from the ledger alone (also the way to switch to `embedder`).
        `progress(done, total)` is told after each batch of memories embedded."""
        from . import storesync
        return storesync.rebuild(self, embedder=embedder, progress=progress)

    # -- agents: prompt context, watch mode, git hook ----------------------------------------

    def context(self, task: str, *, budget: int | None = None, k: int | None = None) -> "ContextBlock":
        """One markdown block for a prompt: the best-scoring memories that fit, fresh first and
        stale ones under a banner. `budget` is in tokens (four characters each); `k` bounds the candidates."""
        from .recall import DEFAULT_BUDGET, render_context

        budget = DEFAULT_BUDGET if budget is None else int(budget)
        if budget < 1:
            raise InputError("budget must be at least 1 token")
        hits = self.query(task, k=k if k is not None else max(20, int(self.config["search.k"])))
        return render_context(hits, task=task, budget=budget)

    def check_id(self, memory_id: str) -> tuple[MemoryDrift, str]:
        """Re-check one memory now: its drift and its envelope (persisted like any read)."""
        m = self.get(memory_id)
        md = DriftChecker(self.root_real, self.cache).check(m)
        self.cache.save()
        if m.status == Status.ACTIVE:
            self._write_back([md])
        md = md.with_claims()
        env = envelope(m, md.drift, md.checks, expiry_days=self.config.expiry_days(m.kind))
        if self.config["history.envelope"]:  # the same line a query gives (git names the commits)
            from . import recall
            from ..core.model import Hit

            env = recall.with_history(self, [Hit(m, 0.0, 0.0, md.drift, md.checks, env)], utcnow())[0].envelope
        return md, env

    def anchored_paths(self) -> dict[str, _list[str]]:
        """Anchored path -> ids of the active memories resting on it (what a watcher watches)."""
        out: dict[str, _list[str]] = {}
        for m in self._memories().values():
            if m.status == Status.ACTIVE:
                for a in m.anchors:
                    ids = out.setdefault(a.path, [])
                    if m.id not in ids:
                        ids.append(m.id)
        return out

    def recheck(self, paths: Iterable[str] | None = None) -> _list[tuple[str, MemoryDrift]]:
        """Re-check the active memories anchored to `paths` (a folder covers the files under it;
        None: every anchored memory) and return `(drift before, result)` for each whose drift
        changed since the last check; persisted, so each is returned once. A memory never checked
        counts as fresh before."""
        targets = self._anchored_on(paths)
        if not targets:
            return []
        known = self.last_drift()
        report = DriftChecker(self.root_real, self.cache).check_all(targets)
        self.cache.save()
        changed = [(known.get(md.memory.id, Drift.FRESH.value), md) for md in report.memories
                   if known.get(md.memory.id, Drift.FRESH.value) != md.drift.value]
        self._write_back([md for _, md in changed])
        return changed

    def anchored_on(self, paths: Iterable[str]) -> _list[MemoryDrift]:
        """The active memories anchored to `paths` (a folder covers the files under it), each checked now."""
        targets = self._anchored_on(list(paths))
        report = DriftChecker(self.root_real, self.cache).check_all(targets) if targets else None
        self.cache.save()
        return report.memories if report is not None else []

    def _anchored_on(self, paths: Iterable[str] | None) -> Sequence[Memory]:
        """The active anchored memories on `paths` (all when None). A process that has not folded (a
        hook) takes them from the snapshot's drift view, else folds only the entries naming them."""
        view = None if paths is None or self._fold is not None else foldsnap.drift_view(self.ledger)
        if view is not None:
            hit = covered_by(paths or ())
            on = {t for path, owners in zip(view.uniq, view.owners) if hit(path) for t in owners}
            return [view.targets[t] for t in sorted(on)]
        held = self._memories() if paths is None or self._fold is not None else self.ledger.fold_on(list(paths))
        targets = [m for m in held.values() if m.status == Status.ACTIVE and m.anchors]
        if paths is None:
            return targets
        hit = covered_by(paths)
        return [m for m in targets if any(hit(a.path) for a in m.anchors)]

    def tidy(self, *, apply: bool = False, keep: str | None = None) -> "TidyReport":
        """Near-duplicates and candidate conflicts over every active memory, by ground; `apply`
        merges the near-duplicates only; `keep=ID` settles ID's conflicts in its favour (`anchorfs.sdk.tidy`)."""
        from . import tidy

        if keep is not None and apply:
            raise InputError("give keep or apply, not both: a conflict is settled apart from the merges")
        return tidy.TidyReport(merged=tidy.keep(self, keep)) if keep is not None else tidy.tidy(self, apply=apply)

    # -- agent instruction files (CLAUDE.md, AGENTS.md) ---------------------------------------

    def import_file(self, path: str | os.PathLike[str], *, apply: bool = False,
                    kind: str = "note") -> "ImportResult":
        """Import an instructions file's claims as memories tagged with their headings (and
        `source:FILE`); again is idempotent, a changed text supersedes. Suggested anchors are
        taken only with `apply` (`anchorfs.sdk.instructions`)."""
        from .instructions import import_file

        return import_file(self, path, apply=apply, kind=kind)

    def export_to(self, path: str | os.PathLike[str]) -> "ExportResult":
        """Write the active memories, with their freshness envelopes, into a managed block of
        `path` (text outside it kept byte for byte)."""
        from .instructions import export_to

        return export_to(self, path)

    def verify_file(self, path: str | os.PathLike[str], *, net: bool = False,
                    timeout: float = 8.0) -> "VerifyReport":
        """`verify`'s claim checks on an instructions file, without importing it: each result's
        id is `FILE:LINE` of its claim."""
        from .instructions import shown_path, verify_items
        from ..verify.claims import verify_texts

        return verify_texts(self.root_real, verify_items(path, shown_path(self, path)), net=net, timeout=timeout)

    # -- team memory through git (anchorfs.sdk.team) ---------------------------------------------

    def conflicts(self) -> _list["Fork"]:
        """Every fork in the ledger (one memory with two successors, or a supersede racing a
        retract, as a merge of two branches gives): both sides with their texts and authors.
        Resolved by superseding one side (the successor replaces every side) or retracting one."""
        state = self._memories()
        return state.forks() if isinstance(state, FoldState) else []

    def open_conflicts(self) -> _list[tuple[str, str]]:
        """(earlier, later) ids of active memories a write found to contradict each other (`tidy` finds every one)."""
        state = self._memories()
        return state.open_conflicts() if isinstance(state, FoldState) else []

    def share(self, shared: bool = True) -> str:
        """Make the workspace shared (ledger committed, merge driver installed) or private (the
        whole `.anchorfs/` ignored); returns what is left to do in git, if anything."""
        from .team import set_mode

        return set_mode(self.root, shared)

