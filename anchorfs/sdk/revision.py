"""Belief revision: supersede, retract, accept, reject, revert and reanchor, each a transition
checked against the memory's status and written through `writes.commit`."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from . import writes
from ..core.errors import AnchorError, InputError, RevisionError
from ..core.model import AnchorRef, Memory, Status, anchor_items, check_optional_str, new_id, utcnow, validate_memory
from .writes import AnchorLike

if TYPE_CHECKING:
    from .workspace import Workspace

__all__ = ["supersede", "retract", "accept", "reject", "revert", "reanchor", "redact"]


def supersede(ws: "Workspace", memory_id: str, content: str, *, reason: str | None = None,
              anchors: Iterable[AnchorLike] | None = None, kind: str | None = None,
              tags: Sequence[str] | None = None, author: str | None = None,
              drop_anchors: bool = False, allow_secret: bool = False, propose: bool = False) -> Memory:
    """`Workspace.supersede`: the successor written, the old memory (and every side of its fork) retired."""
    check_optional_str(reason, "reason")
    items = _anchor_args(anchors, drop_anchors)
    if type(propose) is not bool:
        raise InputError(f"propose must be true or false, got {type(propose).__name__}")
    old = ws.get(memory_id)
    if old.status == Status.PROPOSED:
        raise RevisionError(f"memory {old.id} is proposed, not yet accepted; `accept` or `reject` it first")
    if old.status == Status.SUPERSEDED:
        head = ws._head_of(old)
        raise RevisionError(f"memory {old.id} is already superseded; supersede the head of its chain, {head.id}")
    if old.status == Status.RETRACTED:
        raise RevisionError(f"memory {old.id} is retracted; `revert` it first")
    content, kind, tags_t = writes.validate(ws, content, kind or old.kind, old.tags if tags is None else tags)
    if (content, kind, tags_t) == (old.content, old.kind, old.tags) and not items and not drop_anchors:
        raise RevisionError(f"memory {old.id} already says that; to confirm it on the code as it is now, `reanchor` it")
    author = writes.author(ws, author)
    if drop_anchors:
        new_anchors = writes.take_anchors(ws, content, ())
    elif not items:
        # inherit the old anchors, re-taken against the files as they are now
        new_anchors = writes.take_anchors(ws, content, writes.current_specs(ws, old))
    else:
        new_anchors = writes.take_anchors(ws, content, items)
    now = utcnow()
    new = validate_memory(Memory(id=new_id(), content=content, kind=kind, tags=tags_t, anchors=new_anchors,
                                 author=author, recorded_at=now, valid_from=now, supersedes=old.id,
                                 reason=reason, status=(Status.PROPOSED if propose else Status.ACTIVE).value))
    found = ws._candidates([new], retiring=old.id)
    if propose:  # the old memory stands until the proposal is accepted
        writes.commit(ws, "supersede", [new], reason=reason, at=now, based_on=[old], allow_secret=allow_secret,
                      conflicts=found)
        return new.replace(candidates=found[new.id])
    retired, seen = _retired_by(ws, old, new.id, now)
    writes.commit(ws, "supersede", [new, *retired], reason=reason, at=now, based_on=[old, *seen],
                  allow_secret=allow_secret, conflicts=found)
    return new.replace(candidates=found[new.id])


def retract(ws: "Workspace", memory_id: str, *, reason: str | None = None) -> Memory:
    """`Workspace.retract`: an active memory withdrawn, with no successor."""
    return _withdrawn(ws, memory_id, reason, Status.ACTIVE, "retract", "only an active memory can be retracted")


def accept(ws: "Workspace", memory_id: str, *, reason: str | None = None) -> Memory:
    """`Workspace.accept`: a proposal made active; a proposed supersede retires its predecessor now."""
    check_optional_str(reason, "reason")
    m = ws.get(memory_id)
    if m.status != Status.PROPOSED:
        raise RevisionError(f"memory {m.id} is {m.status}; only a proposed memory can be accepted")
    now = utcnow()
    accepted = validate_memory(m.replace(status=Status.ACTIVE.value, valid_from=now))
    if not m.supersedes:
        writes.commit(ws, "accept", [accepted], reason=reason, at=now, based_on=[m])
        return accepted
    old = ws._memories().get(m.supersedes)
    if old is None or old.status != Status.ACTIVE:
        now_is = "missing" if old is None else old.status
        head = f" (the head of its chain is {ws._head_of(old).id})" if old is not None and old.superseded_by else ""
        raise RevisionError(f"memory {m.id} proposes to supersede {m.supersedes}, which is {now_is} now{head}; "
                            f"`reject {m.id}`, or supersede what stands instead")
    retired, seen = _retired_by(ws, old, m.id, now)
    writes.commit(ws, "accept", [accepted, *retired], reason=reason, at=now, based_on=[m, old, *seen])
    return accepted


def reject(ws: "Workspace", memory_id: str, *, reason: str | None = None) -> Memory:
    """`Workspace.reject`: a proposal retracted with its reason."""
    return _withdrawn(ws, memory_id, reason, Status.PROPOSED, "reject", "only a proposed memory can be rejected")


def revert(ws: "Workspace", memory_id: str, *, reason: str | None = None) -> Memory:
    """`Workspace.revert`: a supersede or a retract undone."""
    check_optional_str(reason, "reason")
    old = ws.get(memory_id)
    if old.status == Status.PROPOSED:
        raise RevisionError(f"memory {old.id} is proposed, not yet accepted; `accept` or `reject` it")
    if old.status == Status.ACTIVE:
        pred = ws._memories().get(old.supersedes) if old.supersedes else None
        if pred is None or pred.status != Status.SUPERSEDED or pred.superseded_by != old.id:
            raise RevisionError(f"memory {old.id} is active and replaced nothing; nothing to revert")
        old = pred
    now = utcnow()
    changed: list[Memory] = []
    based = [old]
    if old.status == Status.SUPERSEDED and old.superseded_by:
        successor = ws._memories().get(old.superseded_by)
        heads = getattr(ws._memories(), "heads", {}).get(old.id, {})
        if successor is not None and not any(h.op == "tidy" for h in heads.values()):  # a merge: the survivor stands
            based.append(successor)
            if successor.status == Status.SUPERSEDED:
                raise RevisionError(
                    f"memory {successor.id} (the successor) was itself superseded; revert {ws._head_of(successor).id} first"
                )
            if successor.status == Status.ACTIVE:
                changed.append(validate_memory(successor.replace(
                    status=Status.RETRACTED.value, valid_until=now, reason=reason or f"reverted to {old.id}")))
    restored = validate_memory(old.replace(status=Status.ACTIVE.value, valid_until=None, superseded_by=None,
                                           reason=reason))  # the retract's reason no longer holds
    writes.commit(ws, "revert", [restored, *changed], reason=reason, at=now, based_on=based)
    return restored


def reanchor(ws: "Workspace", memory_id: str, *, anchors: Iterable[AnchorLike] | None = None,
             reason: str | None = None, drop_anchors: bool = False) -> Memory:
    """`Workspace.reanchor`: an active memory anchored to the content as it is now."""
    check_optional_str(reason, "reason")
    items = _anchor_args(anchors, drop_anchors)
    old = ws.get(memory_id)
    if old.status == Status.SUPERSEDED:
        raise RevisionError(f"memory {old.id} is superseded; re-anchor the head of its chain, {ws._head_of(old).id}")
    if old.status != Status.ACTIVE:
        pred = ws._memories().get(old.supersedes) if old.supersedes else None
        where = (f"the active memory of its chain is {pred.id}" if pred is not None and pred.status == Status.ACTIVE
                 else f"`revert {old.id}` makes it active again")
        raise RevisionError(f"memory {old.id} is {old.status}; only an active memory can be re-anchored ({where})")
    if drop_anchors:
        taken: tuple[AnchorRef, ...] = ()
    elif not items:
        if not old.anchors:
            raise AnchorError(f"memory {old.id} has no anchors; give some with --anchor")
        taken = writes.take_anchors(ws, "", writes.current_specs(ws, old))
    else:
        taken = writes.take_anchors(ws, "", items)
    now = utcnow()
    # re-verified by a person: what `verify --mark` found stale in its text is cleared too
    updated = validate_memory(old.replace(anchors=taken, verified_at=now, stale_claims=()))
    writes.commit(ws, "reanchor", [updated], reason=reason, at=now, based_on=[old])
    return updated


def _anchor_args(anchors: Iterable[AnchorLike] | None, drop_anchors: bool) -> list[AnchorLike]:
    """The anchors given, checked against `drop_anchors` (a bool, and not both)."""
    if type(drop_anchors) is not bool:
        raise InputError(f"drop_anchors must be true or false, got {type(drop_anchors).__name__}")
    items = anchor_items(anchors)
    if drop_anchors and items:
        raise InputError("give anchors or drop_anchors=True, not both")
    return items


def _retired_by(ws: "Workspace", old: Memory, successor: str, now: datetime) -> tuple[list[Memory], list[Memory]]:
    """(`old` and every other side of its fork retired by `successor`, the other sides as they were)."""
    retired = validate_memory(old.replace(status=Status.SUPERSEDED.value, valid_until=now, superseded_by=successor))
    over, seen = writes.over_fork(ws, old, successor, now)
    return [retired, *over], seen


def _withdrawn(ws: "Workspace", memory_id: str, reason: str | None, need: Status, action: str,
               refusal: str) -> Memory:
    """A memory of status `need` retracted, written as `action`; any other refused with `refusal`."""
    check_optional_str(reason, "reason")
    m = ws.get(memory_id)
    if m.status != need:
        raise RevisionError(f"memory {m.id} is {m.status}; {refusal}")
    now = utcnow()
    withdrawn = validate_memory(m.replace(status=Status.RETRACTED.value, valid_until=now, reason=reason))
    writes.commit(ws, action, [withdrawn], reason=reason, at=now, based_on=[m])
    return withdrawn


def redact(ws: "Workspace", memory_id: str, *, reason: str, anchors: bool = False) -> Memory:
    """`Workspace.redact`: a memory's text (and its anchors, when asked) purged from every ledger
    line, the ledger rewritten atomically, a `redact` entry left saying what was there (its
    SHA-256), the store rebuilt. The one write that removes anything."""
    import hashlib

    from ..ledger.log import REDACTED, Entry, redact_lines, stamped

    if not isinstance(reason, str) or not reason.strip():
        raise InputError("a redact needs a reason (--reason): the ledger keeps why the text was removed")
    if type(anchors) is not bool:
        raise InputError(f"anchors must be true or false, got {type(anchors).__name__}")
    if ws.read_only:
        raise RevisionError(f"the workspace at {ws.root} is open read-only; nothing was redacted")
    m = ws.get(memory_id)
    if m.id in getattr(ws._memories(), "redacted", {}):
        raise RevisionError(f"memory {m.id} is already redacted")
    now = utcnow()
    digest = hashlib.sha256(m.content.encode("utf-8", "surrogatepass")).hexdigest()
    why = f"redacted (sha256 {digest}): {reason}"
    live = m.status in (Status.ACTIVE, Status.PROPOSED)
    gone = validate_memory(m.replace(content=REDACTED, anchors=() if anchors else m.anchors, reason=why,
                                     status=Status.RETRACTED.value if live else m.status,
                                     valid_until=now if live else m.valid_until))
    with ws.ledger.lock():
        writes.guard(ws, [m])
        ws.ledger.append([stamped(Entry.new("redact", [gone], at=now, reason=why), ws._memories())])
        ws.ledger.rewrite(redact_lines)
        ws._fold = None
        from ..ledger.foldsnap import snap_file
        try:
            os.unlink(snap_file(ws.ledger))
        except FileNotFoundError:
            pass
        _scrub_logs(ws, m.id)
    if (ws.state / "memories.lance").exists():
        ws.reindex()  # a fresh table: no older version or index keeps the text
    return gone


def _scrub_logs(ws: "Workspace", memory_id: str) -> None:
    """The state folder's other JSON-lines logs (`events.jsonl`, which carries each event's memory
    text) with that memory's text redacted too; a line that does not parse but names it, dropped."""
    import orjson

    from ..core.statefs import read_state, replace_state
    from ..ledger.log import REDACTED

    for path in ws.state.glob("*.jsonl"):
        if path.name == "ledger.jsonl":
            continue
        data = read_state(path, limit=1 << 40) or b""
        if memory_id.encode() not in data:
            continue
        out = []
        for line in data.split(b"\n"):
            if memory_id.encode() not in line:
                out.append(line)
                continue
            try:
                d = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(d, dict) and d.get("id") == memory_id and "content" in d:
                d["content"] = REDACTED
            out.append(orjson.dumps(d))
        replace_state(path, b"\n".join(out), fsync=True)
