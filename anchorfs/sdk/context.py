"""One markdown block of memories, ready to paste into a prompt.

An agent given memories as a bare list trusts them all equally. What goes in is chosen by
score (how well a memory matches the task, demoted when its code changed or it aged), best
first, never a memory under the relevance floor; how it is laid out says how far each can be
trusted right now: fresh ones first, then the ones that could not be checked, then the stale
ones under a banner that says what changed in the code, so the warning is read with the
claims it qualifies. Every memory carries its one-line envelope.

The budget is in tokens, estimated at four characters each (no tokenizer is loaded): good
enough to keep a prompt section from crowding out the task, and the same on every machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.model import Drift, Hit, Verdict

__all__ = ["ContextBlock", "render_context", "estimate_tokens", "DEFAULT_BUDGET", "STALE_BANNER"]

DEFAULT_BUDGET = 1500
"""Tokens; about a page of memories."""

CHARS_PER_TOKEN = 4
STALE_BANNER = "> **Warning: the code under these memories changed since they were recorded.**"
_STALE_VERDICTS = (Verdict.CHANGED, Verdict.DELETED, Verdict.SYMBOL_MISSING)
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
        return {
            "markdown": self.markdown,
            "task": self.task,
            "budget": self.budget,
            "tokens": self.tokens,
            "fresh": list(self.fresh),
            "unknown": list(self.unknown),
            "stale": list(self.stale),
            "omitted": list(self.omitted),
            "weak": list(self.weak),
        }


def _item(hit: Hit) -> str:
    """One bullet: envelope, content (continuation lines indented), kind and id."""
    m = hit.memory
    lines = m.content.strip().splitlines() or [""]
    text = "\n  ".join([lines[0], *lines[1:]])
    out = f"- {hit.envelope} {text} ({m.kind} · `{m.id}`)"
    if hit.drift is Drift.STALE or hit.drift is Drift.UNKNOWN:
        for check in hit.checks:
            if check.verdict in _STALE_VERDICTS or check.verdict in _UNKNOWN_VERDICTS:
                out += f"\n  - {check.verdict.value}: {check.detail}"
        for claim in m.stale_claims:  # what `verify --mark` found gone in its own text
            out += f"\n  - {claim.words}"
    return out


def _what_changed(hits: Sequence[Hit]) -> list[str]:
    seen: list[str] = []
    for hit in hits:
        for check in hit.checks:
            if check.verdict in _STALE_VERDICTS and check.detail not in seen:
                seen.append(check.detail)
        for claim in hit.memory.stale_claims:
            if claim.words not in seen:
                seen.append(claim.words)
    return seen


def render_context(hits: Sequence[Hit], *, task: str, budget: int = DEFAULT_BUDGET) -> ContextBlock:
    """Lay out `hits` (already drift-checked and scored) as one markdown block within `budget`.

    Memories are taken best first by score (relevance x drift x age factors), as long as
    they fit: a stale memory that matches well is taken before a fresh one that matches less,
    and a memory under the relevance floor (`weak`) is never taken. When the best memory alone
    does not fit, it is given anyway, its envelope whole and its text cut, rather than a worse
    one that fits. The layout still groups them by trust: fresh, then could-not-be-checked,
    then stale under a banner saying what changed, so the warning is read with the claims.
    Superseded or retracted hits are left out: a prompt should only carry current beliefs.
    """
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

    # Best first, pricing each candidate by composing the block with it: exact, and cheap at
    # the few dozen hits a query returns. The "left out" note is always reserved.
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
    """`hit` with its content cut (ending in `…`) so the block fits `budget` if it can; the
    envelope, the id and the stale banner are never cut, so at worst the text is `…` alone."""
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
    from dataclasses import replace

    return replace(hit, memory=hit.memory.replace(content=content))


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
