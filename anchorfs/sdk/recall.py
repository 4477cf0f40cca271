"""The read path: search the store, run the drift pass on the hits, demote, re-sort, cut to k;
and `context`, the hits laid out as one markdown block for a prompt (`ContextBlock`).

Stale hits are demoted and flagged, never hidden; forks are named; envelopes name git's commits.
A context block's budget is in tokens estimated at four characters each (no tokenizer loaded).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..core.errors import HistoryError, InputError
from ..core.model import Drift, Hit, Memory, Status, Verdict, one_line, under, utcnow, validate_query_args
from ..drift import DriftChecker, MemoryDrift, envelope, expired, weak_envelope
from ..ledger.log import FoldState, fold

if TYPE_CHECKING:
    from .workspace import Workspace

__all__ = ["conflict_words", "ANCHOR_STALE", "git_head", "active_at", "query", "with_history", "flag_conflicts",
           "ContextBlock", "render_context", "estimate_tokens", "DEFAULT_BUDGET", "STALE_BANNER"]


ANCHOR_STALE = (Verdict.CHANGED, Verdict.DELETED, Verdict.SYMBOL_MISSING)


def git_head(ws: "Workspace") -> tuple[bool, str | None]:
    """(in a git repo, HEAD now): read per call, since commits happen meanwhile."""
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


MAX_QUERY_CHARS = 2000
"""A pasted file is no question: past this the search would take seconds and find noise."""


def query(ws: "Workspace", text: str, *, k: int | None = None, include_superseded: bool = False,
          as_of: str | datetime | None = None, stale: str = "include") -> list[Hit]:
    """Hybrid search, then the drift pass: stale hits demoted and flagged, never hidden. `stale`: include,
    exclude or only; `as_of`: the memories as they stood then, checked now, with no drift written back."""
    if not isinstance(text, str) or not text.strip():
        raise InputError("a query needs text")
    if len(text) > MAX_QUERY_CHARS:
        raise InputError(f"a query is at most {MAX_QUERY_CHARS:,} characters, this one has {len(text):,}: ask about one thing")
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
    # Demote first, cut to k after. Candidates come in tiers of a size fixed by
    # `search.candidates`, never by k (doubled only when a tier leaves fewer than k hits),
    # each sorted on its own, so the first j hits of any k >= j are the hits of k = j.
    size = max(1, int(ws.config["search.candidates"]))
    hits: list[Hit] = []
    results: list[MemoryDrift] = []
    seen: set[str] = set()
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
            m = row.memory if then is None else then.get(row.memory.id, row.memory)
            md = checker.check(m)  # retired memories too: their ground may have moved as well
            results.append(md)  # the anchors' drift is what drift.json keeps; the claims live in the snapshot
            md = md.with_claims()
            if (stale == "exclude" and md.drift is Drift.STALE) or (stale == "only" and md.drift is not Drift.STALE):
                continue
            days = ws.config.expiry_days(m.kind)
            score = row.score  # the relevance; demoted below by the drift and age factors
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
    """Envelopes that name commits (git), remembered per (memory, HEAD, verdicts)."""
    from ..history import history_facts

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
            hist = history_facts(ws.root, m, h.drift, top=place[0], head=head)
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
        out.append(dataclasses.replace(h, conflict=tuple(others), envelope=h.envelope + conflict_words(state, others)))
    return out


def conflict_words(state: Mapping[str, Memory], others: Sequence[str]) -> str:
    """What follows the envelope of a memory standing in a fork, in every surface: the other sides."""
    shown = "; ".join(f"{o}: {one_line(state[o].content[:80])!r}" for o in others if o in state)
    return f" [in conflict with {shown}: see `anchorfs conflicts`]"


# -- One markdown block of memories, ready to paste into a prompt.

DEFAULT_BUDGET = 1500
"""Tokens; about a page of memories."""

CHARS_PER_TOKEN = 4
STALE_BANNER = "> **Warning: the code under these memories changed since they were recorded.**"
_UNKNOWN_VERDICTS = (Verdict.UNREADABLE, Verdict.UNSAFE)


def estimate_tokens(text: str) -> int:
    """Tokens for `text`, at four characters each, rounded up."""
    return -(-len(text) // CHARS_PER_TOKEN)


@dataclass(frozen=True, slots=True)
class ContextBlock:
    """The markdown and what went into it, so a caller can tell what was left out."""

    markdown: str
    task: str
    budget: int
    fresh: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()
    stale: tuple[str, ...] = ()
    omitted: tuple[str, ...] = field(default=())
    weak: tuple[str, ...] = ()
    """Hits under the relevance floor, never put in the block."""

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.markdown)

    def to_dict(self) -> dict[str, Any]:
        lists = ("fresh", "unknown", "stale", "omitted", "weak")
        return {"markdown": self.markdown, "task": self.task, "budget": self.budget, "tokens": self.tokens,
                **{key: list(getattr(self, key)) for key in lists}}


def _item(hit: Hit) -> str:
    """One bullet: envelope, content (continuation lines indented), kind and id."""
    m = hit.memory
    out = f"- {hit.envelope} {under(m.content.strip(), '  ')} ({m.kind} · `{m.id}`)"
    if hit.drift is Drift.STALE or hit.drift is Drift.UNKNOWN:
        for check in hit.checks:
            if check.verdict in ANCHOR_STALE or check.verdict in _UNKNOWN_VERDICTS:
                out += f"\n  - {check.verdict.value}: {one_line(check.detail)}"
        for claim in m.stale_claims:  # what `verify --mark` found gone in its own text
            out += f"\n  - {one_line(claim.words)}"
    return out


def _what_changed(hits: Sequence[Hit]) -> list[str]:
    seen: list[str] = []
    for hit in hits:
        for check in hit.checks:
            if check.verdict in ANCHOR_STALE and one_line(check.detail) not in seen:
                seen.append(one_line(check.detail))
        for claim in hit.memory.stale_claims:
            if one_line(claim.words) not in seen:
                seen.append(one_line(claim.words))
    return seen


def render_context(hits: Sequence[Hit], *, task: str, budget: int = DEFAULT_BUDGET) -> ContextBlock:
    """Lay out `hits` (drift-checked and scored) as one markdown block within `budget`: the active ones
    best first while they fit (the best one cut if it alone does not), never `weak` ones, grouped by trust."""
    task_line = " ".join(task.split())
    if len(task_line) > 200:
        task_line = task_line[:199] + "…"
    head = (f"## Memories for: {task_line}\n\n"
            "Checked against the code just now; trust each memory only as far as its bracketed status says.")
    current = [h for h in hits if h.memory.status == "active"]
    weak = tuple(h.memory.id for h in current if h.weak)
    ranked = sorted((h for h in current if not h.weak), key=lambda h: (-h.score, h.memory.id))
    if not ranked:
        if current:
            closest = min(current, key=lambda h: (-h.score, h.memory.id))
            markdown = (f"{head}\n\nNo memory matches this task well; closest, left out: "
                        f"`{closest.memory.id}` (relevance {closest.relevance:.2f}).")
        else:
            markdown = f"{head}\n\nNo memories found for this task."
        return ContextBlock(markdown, task, budget, weak=weak)
    stale_all = [h for h in ranked if h.drift is Drift.STALE]

    # Best first, each priced by composing the block with it; room for the "left out" note is kept.
    reserve = estimate_tokens("\n\n" + _omitted_note(999))
    taken: list[Hit] = []
    omitted: list[str] = []
    for hit in ranked:
        if omitted:  # best first: nothing worse slips in after a better one was left out
            omitted.append(hit.memory.id)
            continue
        taken.append(hit)
        if estimate_tokens(_compose(head, taken, stale_all, 0)) + reserve > budget:
            taken.pop()
            if not taken:  # the best one alone is too big: its envelope whole, its text cut
                taken.append(_cut_to_fit(hit, head, stale_all, budget - reserve))
                continue
            omitted.append(hit.memory.id)
    return ContextBlock(
        _compose(head, taken, stale_all, len(omitted)),
        task,
        budget,
        fresh=tuple(h.memory.id for h in taken if h.drift is Drift.FRESH),
        unknown=tuple(h.memory.id for h in taken if h.drift is Drift.UNKNOWN),
        stale=tuple(h.memory.id for h in taken if h.drift is Drift.STALE),
        omitted=tuple(omitted),
        weak=weak,
    )


def _cut_to_fit(hit: Hit, head: str, stale_all: Sequence[Hit], budget: int) -> Hit:
    """`hit` with its content cut (ending in `…`) so the block fits `budget`; the envelope is never cut."""
    text = " ".join(hit.memory.content.split())
    lo, hi = 0, len(text)
    while lo < hi:  # the longest prefix that fits
        mid = (lo + hi + 1) // 2
        trial = _with_content(hit, text[:mid].rstrip() + "…")
        if estimate_tokens(_compose(head, [trial], stale_all, 0)) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return _with_content(hit, text[:lo].rstrip() + "…")


def _with_content(hit: Hit, content: str) -> Hit:
    return dataclasses.replace(hit, memory=hit.memory.replace(content=content))


def _omitted_note(n: int) -> str:
    return f"({n} more {'memory' if n == 1 else 'memories'} left out to fit the budget.)"


def _compose(head: str, taken: Sequence[Hit], all_stale: Sequence[Hit], omitted: int) -> str:
    parts = [head]
    fresh = [h for h in taken if h.drift is Drift.FRESH]
    unknown = [h for h in taken if h.drift is Drift.UNKNOWN]
    stale = [h for h in taken if h.drift is Drift.STALE]
    if fresh:
        parts.append("### Fresh\n" + "\n".join(_item(h) for h in fresh))
    if unknown:
        parts.append("### Could not be checked\n> These anchors could not be read; re-verify before relying on them.\n"
                     + "\n".join(_item(h) for h in unknown))
    if stale:
        parts.append(_stale_header(all_stale) + "\n".join(_item(h) for h in stale))
    if omitted:
        parts.append(_omitted_note(omitted))
        if not taken:
            parts.append("No memory fits the budget; raise it to see them.")
    return "\n\n".join(parts)


def _stale_header(stale: Sequence[Hit]) -> str:
    """The banner: what changed, across every stale hit (even those the budget leaves out)."""
    changes = _what_changed(stale)
    listed = "; ".join(changes[:8]) + ("; …" if len(changes) > 8 else "")
    return (
        "### Stale\n"
        f"{STALE_BANNER}\n"
        f"> What changed: {listed}.\n"
        "> Re-verify each against the code before relying on it: `reanchor` one that still holds, "
        "`supersede` one that no longer does.\n"
    )
