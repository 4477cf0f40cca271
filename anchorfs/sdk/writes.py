"""The write doors' common steps, in order: input checked before any file is read, anchors hashed
outside the lock, then under the writer lock the revision checked against the snapshots it was
computed from, the ledger appended (fsynced), and only then the store written.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ..anchor import anchors as anchors_mod
from . import storesync
from ..drift import DriftChecker
from ..core.errors import AnchorError, HistoryError, InputError, RevisionError, StoreError, WorkspaceError
from ..ledger.log import Entry, FoldState, current_actor, fault, stamped
from ..core.model import (KINDS, AnchorRef, Candidate, Memory, Status, Verdict, anchor_items, check_optional_str, utcnow,
                    validate_anchor, validate_memory)

if TYPE_CHECKING:
    from ..verify.claims import VerifyReport
    from .workspace import Workspace

__all__ = ["AnchorLike", "validate", "author", "take_anchors", "stamp_git", "current_specs", "guard", "over_fork",
           "commit", "mark"]

AnchorLike = str | AnchorRef
"""An anchor as the SDK takes it: a spec string (`PATH#SYMBOL`, `PATH:START-END`) or an AnchorRef."""


def validate(ws: "Workspace", content: str, kind: str | None, tags: Sequence[str] | None) -> tuple[str, str, tuple[str, ...]]:
    """Content (capped: `limits.content_chars`), kind and tags checked before any file is read."""
    if not isinstance(content, str):
        raise InputError(f"content must be a string, got {type(content).__name__}")
    if not content.strip():
        raise InputError("a memory needs content: empty text given")
    if "\0" in content:
        raise InputError("content holds a NUL character (\\0), which no reader of a memory expects; nothing was written")
    cap = int(ws.config["limits.content_chars"])
    if len(content) > cap:
        raise InputError(f"content is {len(content):,} characters, over the limit of {cap:,} "
                         "(limits.content_chars); nothing was written")
    if kind is None:
        kind = "note"
    if not isinstance(kind, str):
        raise InputError(f"kind must be a string, got {type(kind).__name__}")
    if kind not in KINDS:
        raise InputError(f"unknown kind {kind!r}; one of: {', '.join(KINDS)}")
    if tags is None:
        tags = ()
    elif isinstance(tags, str):
        tags = [tags]
    elif isinstance(tags, (bytes, bytearray, dict)) or not hasattr(tags, "__iter__"):
        raise InputError(f"tags must be a list of strings, got {type(tags).__name__}")
    clean: list[str] = []
    for t in tags:
        if not isinstance(t, str) or not t.strip() or "\0" in t:
            raise InputError(f"bad tag {t!r}: tags are non-empty strings without NUL")
        if t.strip() not in clean:
            clean.append(t.strip())
    return content, kind, tuple(clean)


def author(ws: "Workspace", author: str | None) -> str:
    check_optional_str(author, "author")
    return author or ws.config["author"] or current_actor()


def take_anchors(ws: "Workspace", content: str, anchors: Iterable[AnchorLike] | None, *,
                 stamp: bool = True) -> tuple[AnchorRef, ...]:
    """Parse, validate and hash the anchors; `stamp=False` leaves git's stamp to one `stamp_git` per batch."""
    wanted: list[AnchorRef] = []
    for i, a in enumerate(anchor_items(anchors)):
        wanted.append(validate_anchor(a, f"anchors[{i}]") if isinstance(a, AnchorRef) else anchors_mod.parse_spec(a))
    wanted.extend(anchors_mod.parse_markers(content))
    if not wanted:
        return ()
    taken: list[AnchorRef] = []
    for w in wanted:
        ref = anchors_mod.take(ws.root_real, w)
        if ref not in taken:
            taken.append(ref)
    return stamp_git(ws, [taken])[0] if stamp else tuple(taken)


def stamp_git(ws: "Workspace", refs: Sequence[Sequence[AnchorRef]]) -> list[tuple[AnchorRef, ...]]:
    """Give taken anchors HEAD's commit and their dirty flag: one git process per batch."""
    paths = sorted({r.path for group in refs for r in group})
    place = ws._git_place() if paths else None
    if place is None:
        return [tuple(group) for group in refs]
    from ..core.git import head_and_dirty

    try:
        head, dirty = head_and_dirty(Path(ws.root_real), paths, prefix=place[1])
    except HistoryError:
        head, dirty = None, set()
    if head is None:
        return [tuple(group) for group in refs]
    return [tuple(dataclasses.replace(r, commit=head, dirty=r.path in dirty) for r in group) for group in refs]


def current_specs(ws: "Workspace", memory: Memory) -> list[AnchorLike]:
    """A memory's anchors as requests for the content as it stands now (moved lines and files followed)."""
    from ..core.errors import SymbolNotFoundError

    checker = DriftChecker(ws.root_real, ws.cache, whitespace=str(ws.config["drift.whitespace"]))
    wanted: list[AnchorLike] = []
    for a in memory.anchors:
        check = checker.check_anchor(a)
        if check.verdict is Verdict.UNSAFE:
            raise AnchorError(f"cannot re-anchor {memory.id}: {check.detail}")
        if check.verdict is Verdict.SYMBOL_MISSING or (check.verdict is Verdict.DELETED and a.symbol):
            found = tuple(checker.body_candidates(a))
            offer = (f"; the same body is at {', '.join(found)}: take one with --to SPEC" if found
                     else "; give its new place with --to SPEC")
            raise SymbolNotFoundError(f"cannot re-anchor {memory.id}: {check.detail}{offer}", candidates=found)
        if check.verdict is Verdict.DELETED:
            raise AnchorError(f"cannot re-anchor {memory.id}: {check.detail}, and its content was not found "
                              "elsewhere; give its new place with --to SPEC")
        lines = (check.lines_now or a.lines) if a.lines else None
        if a.lines and check.verdict is Verdict.CHANGED:  # never the old numbers blindly: where the text went
            if check.lines_now is None:
                from ..anchor.anchors import old_text

                why = ("nothing near its old place reads like them" if old_text(a, checker.then_of(a)) is not None
                       else "the text it was taken from is not in git (recorded uncommitted, or outside git)")
                raise AnchorError(f"cannot re-take {a.spec} for {memory.id}: its lines changed, and {why}; "
                                  "give the anchor with --anchor SPEC")
            lines = check.lines_now
        wanted.append(AnchorRef(path=check.path_now or a.path, symbol=a.symbol, lines=lines))
    return wanted


def guard(ws: "Workspace", based_on: Sequence[Memory]) -> None:
    """Under the lock: the snapshots a revision was computed from must still be the latest."""
    if not based_on:
        return
    mems = ws._memories()
    for seen in based_on:
        now = mems.get(seen.id)
        if now == seen:
            continue
        if now is not None and now.status == Status.SUPERSEDED:
            head = ws._head_of(now)
            raise RevisionError(f"memory {now.id} was superseded meanwhile; the head of its chain is {head.id}")
        raise RevisionError(f"memory {seen.id} was changed by another writer meanwhile "
                            f"(now {now.status if now else 'missing'}); try again")


def over_fork(ws: "Workspace", old: Memory, new_id: str, now: datetime) -> tuple[list[Memory], list[Memory]]:
    """(snapshots to write, snapshots they replace): superseding one side of a fork supersedes every side."""
    state = ws._memories()
    if not isinstance(state, FoldState):
        return [], []
    out: dict[str, Memory] = {}
    seen: dict[str, Memory] = {}
    for fork in state.forks():
        ids = {s.id for s in fork.sides}
        if old.id not in ids and old.id != fork.memory.id:
            continue
        for i in sorted(ids | {fork.memory.id}):
            if i == old.id or i in out:
                continue
            m = state[i]
            seen[i] = m
            out[i] = validate_memory(m.replace(status=Status.SUPERSEDED.value, valid_until=now, superseded_by=new_id)
                                     if m.status == Status.ACTIVE else m)  # a retired base: re-written, heads merged
    return list(out.values()), list(seen.values())


def _ledger_only(ws: "Workspace") -> bool:
    """Whether a write here goes to the ledger alone (the store caught up on its next read)."""
    return not (ws._store is not None or ws._store_opened or not (ws.state / "memories.lance").exists())


def commit(ws: "Workspace", op: str, memories: list[Memory], *, reason: str | None = None,
           new: bool = False, at: datetime | None = None, based_on: Sequence[Memory] = (),
           allow_secret: bool = False, conflicts: Mapping[str, Sequence[Candidate]] | None = None) -> None:
    """Ledger first (fsynced), then the store, under the writer lock. A process that has not opened
    the store leaves it to the next read's catch-up, so a one-shot `anchorfs record` never imports LanceDB."""
    if ws.read_only:
        raise WorkspaceError(f"the workspace at {ws.root} is open read-only; the {op} was not written")
    from .team import secret_check

    secret = secret_check(ws, [m for m in memories if op in ("record", "supersede")
                                 and m.status in ("active", "proposed")],
                          allow_secret)
    through = not _ledger_only(ws)
    store = ws.store if through else None
    entries = [Entry.new(op, [m], at=at, reason=reason) for m in memories] if new else \
        [Entry.new(op, memories, at=at, reason=reason)]
    with ws.ledger.lock():
        if store is not None:
            storesync.catch_up(ws)
        guard(ws, based_on)
        state = ws._memories()  # dependency fields: the fold orders by them, not by line (anchorfs.ledger.log)
        entries = [dataclasses.replace(stamped(e, state), allow_secret=secret, conflicts=tuple(
            c.id for c in (conflicts or {}).get(e.memories[0].id, ()) if c.kind == "conflicts")) for e in entries]
        size = ws.ledger.append(entries)
        fault("kill-after-ledger")
        if store is None:  # the checkpoint stays where the store is: the next read replays the rest
            fault("kill-after-store")
            return
        try:
            (store.add if new else store.upsert)(memories)
        except StoreError as exc:
            # The ledger has it, so the write happened (failing now would invite a duplicate retry).
            ws._store = None
            warnings.warn(f"the {op} is recorded, but the search index lags behind: {exc}", stacklevel=3)
            return
        fault("kill-after-store")
        storesync.set_applied(ws, size)


def mark(ws: "Workspace", report: "VerifyReport", checked_from: Sequence[Memory]) -> None:
    """`verify --mark`: a `mark` entry per memory whose findings changed, still as checked; the ledger only."""
    from ..verify.claims import mark_reason, marked_claims

    checked = {m.id: m for m in checked_from}
    now = utcnow()
    with ws.ledger.lock():
        state = ws._memories()
        entries = []
        for r in report.results:
            m = state.get(r.id)
            if m is None or m != checked.get(r.id):
                continue  # changed meanwhile: the verdict is about a text no longer current
            claims = marked_claims(m, r, now)
            if claims == m.stale_claims:
                continue
            updated = validate_memory(m.replace(stale_claims=claims))
            entry = Entry.new("mark", [updated], at=now, reason=mark_reason(r, m.stale_claims, claims))
            entries.append(stamped(entry, state))
        if entries:
            ws.ledger.append(entries)
