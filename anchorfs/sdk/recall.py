"""The read path: search the store, run the drift pass on the hits, demote, re-sort, cut to k.

Apart from the `Workspace` because recall is one concept with its own rules (DESIGN.md, "Drift
pass"): candidates in tiers of a fixed size so the first j hits of any k >= j are the hits of
k = j, stale hits demoted and flagged but never hidden, forks named, envelopes that name git's
commits. Functions of the workspace: it holds the store, the hash cache and the config.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import TYPE_CHECKING

from ..drift import DriftChecker, MemoryDrift, envelope, expired, weak_envelope
from ..core.errors import HistoryError, InputError
from ..ledger.log import FoldState, fold
from ..core.model import Drift, Hit, Memory, Status, Verdict, utcnow, validate_query_args

if TYPE_CHECKING:
    from .workspace import Workspace

__all__ = ["ANCHOR_STALE", "git_head", "active_at", "query", "with_history", "flag_conflicts"]


ANCHOR_STALE = (Verdict.CHANGED, Verdict.DELETED, Verdict.SYMBOL_MISSING)


def git_head(ws: "Workspace") -> tuple[bool, str | None]:
    """(in a git repo, HEAD now): read per call since commits happen meanwhile, with a
    process only when a file HEAD rests on changed (`git.current_head`)."""
    from ..core.git import current_head

    place = ws._git_place()
    if place is None:
        return False, None
    try:
        return True, current_head(place[0])
    except HistoryError:  # git went away since: do without, as when it was never there
        return True, None


def active_at(ws: "Workspace", when: datetime) -> dict[str, Memory]:
    """The memories active at `when`, each as it stood then (status, bounds, anchors)."""
    state = fold(ws.ledger.read(until=when))
    return {m.id: m for m in state.values() if m.status == Status.ACTIVE and m.valid_from <= when}


def query(ws: "Workspace", text: str, *, k: int | None = None, include_superseded: bool = False,
          as_of: str | datetime | None = None, stale: str = "include") -> list[Hit]:
    """Hybrid search, then the drift pass: stale hits demoted and flagged, never hidden.

    `stale`: "include" (default), "exclude" (leave stale hits out) or "only". `as_of`: the
    memories active at that instant, each as it stood then, its anchors of then checked
    against the files now; such a read writes no drift back.
    """
    if not isinstance(text, str) or not text.strip():
        raise InputError("a query needs text")
    if stale not in ("include", "exclude", "only"):
        raise InputError(f"stale must be include, exclude or only, not {stale!r}")
    k_given, when_given = validate_query_args(k, include_superseded, as_of)
    k = k_given if k_given is not None else int(ws.config["search.k"])
    if k < 1:
        raise InputError("k must be at least 1")
    from ..store.search import id_filter

    # a proposed memory is under review: not a belief of any time, so never a hit
    where: str | None = "status != 'proposed'" if include_superseded else "status = 'active'"
    then: dict[str, Memory] | None = None
    if when_given is not None:
        then = active_at(ws, when_given)
        if not then:
            return []
        where = id_filter(then)
    store = ws.store
    qvec = ws.embedder.embed_query(text)
    checker = DriftChecker(ws.root_real, ws.cache)
    now = utcnow()
    stale_factor = float(ws.config["drift.stale_factor"])
    expired_factor = float(ws.config["drift.expired_factor"])
    floor = float(ws.config["search.relevance_floor"])
    # Demote first, cut to k after. The candidates come in tiers of a size fixed by
    # `search.candidates`, never by k (doubling only when a tier leaves fewer than k hits):
    # each tier is checked, demoted and sorted on its own and follows the one before, so
    # the first j hits of any k >= j are the hits of k = j.
    size = max(1, int(ws.config["search.candidates"]))
    hits: list[Hit] = []
    results: list[MemoryDrift] = []
    seen: set[str] = set()
    # the fold the store was written from (flag_conflicts reads it too): each candidate's
    # Memory from it, not from a read of the row's JSON
    held = ws._memories()
    while True:
        rows = store.search(
            text, qvec, k=2 * size, where=where, candidates=size, rrf_k=float(ws.config["search.rrf_k"]),
            vector_weight=float(ws.config["search.vector_weight"]),
            text_weight=float(ws.config["search.text_weight"]), memories=held,
        )
        tier: list[Hit] = []
        for row in rows:  # best relevance first
            mid = getattr(row, "id", None) or row.memory.id  # the store's rows carry their id
            if mid in seen:
                continue
            seen.add(mid)
            if len(tier) >= k and row.relevance < tier[k - 1].score:
                break  # no later row can enter the top k: its score is at most its relevance
            # as of an instant: the memory as it stood then (later retired or re-anchored, it
            # showed neither), its anchors of then checked against the files now
            m = row.memory if then is None else then.get(row.memory.id, row.memory)
            md = checker.check(m)  # retired memories too: their ground may have moved as well
            results.append(md)  # the anchors' drift is what drift.json keeps; the claims live in the snapshot
            md = md.with_claims()
            if (stale == "exclude" and md.drift is Drift.STALE) or (stale == "only" and md.drift is not Drift.STALE):
                continue
            days = ws.config.expiry_days(m.kind)
            score = row.score  # the relevance (ranking.rank); demoted below by the drift and age factors
            if md.drift is Drift.STALE:
                score *= stale_factor
            if expired(m, days, now):
                score *= expired_factor
            weak = row.relevance < floor  # how well it matches, before any demotion
            tier.append(Hit(m, row.similarity, score, md.drift, md.checks,
                            envelope(m, md.drift, md.checks, expiry_days=days, now=now, weak=weak),
                            row.relevance, weak))
            tier.sort(key=lambda h: (-h.score, h.memory.id))
        hits.extend(tier)
        if len(hits) >= k or len(rows) < size:
            break
        size *= 2
    ws.cache.save()
    if then is None:  # the drift of anchors as they stood then is not the memory's drift now
        ws._write_back(results)
    hits = flag_conflicts(ws, hits[:k])
    if hits and ws.config["history.envelope"]:
        hits = with_history(ws, hits, now)
        hits = [dataclasses.replace(h, envelope=weak_envelope(h.envelope)) if h.weak else h for h in hits]
    return hits


def with_history(ws: "Workspace", hits: list[Hit], now: datetime) -> list[Hit]:
    """Envelopes that name commits (git), remembered per (memory, HEAD, verdicts); HEAD and
    the top level are looked up once per query, not per hit."""
    from ..history import history_envelope

    if not any(a.commit for h in hits for a in h.memory.anchors):
        return hits
    in_git, head = git_head(ws)
    place = ws._git_top
    if not in_git or head is None or place is None:
        return hits
    memo = ws._history_memo
    if len(memo) >= 4096 or (memo and next(iter(memo))[1] != head):
        memo.clear()  # HEAD moved (every entry names the old one), or a long-lived process grew it
    out = []
    for h in hits:
        m = h.memory
        if m.status != Status.ACTIVE or not any(a.commit for a in m.anchors) or (
                m.stale_claims and not any(c.verdict in ANCHOR_STALE for c in h.checks)):
            out.append(h)  # stale by its text alone: git has no commit to name (and no bisect to run)
            continue
        key = (m.id, head, h.drift.value, tuple((c.verdict.value, c.lines_now) for c in h.checks))
        hist = ws._history_memo.get(key, "")
        if hist == "":
            hist = history_envelope(ws.root, m, h.drift, top=place[0], head=head)
            ws._history_memo[key] = hist
        env = envelope(m, h.drift, h.checks, expiry_days=ws.config.expiry_days(m.kind), now=now, history=hist)
        out.append(dataclasses.replace(h, envelope=env))
    return out


def flag_conflicts(ws: "Workspace", hits: list[Hit]) -> list[Hit]:
    """Hits that stand in a fork name the other sides (`conflict`) and show them in the envelope."""
    state = ws._memories()
    against = state.in_conflict() if isinstance(state, FoldState) and hits else {}
    if not against:
        return hits
    out = []
    for h in hits:
        others = against.get(h.memory.id)
        if not others:
            out.append(h)
            continue
        shown = "; ".join(f"{o}: {state[o].content[:80]!r}" for o in others if o in state)
        out.append(dataclasses.replace(h, conflict=tuple(others),
                                       envelope=f"{h.envelope} [in conflict with {shown}: see `anchorfs conflicts`]"))
    return out
