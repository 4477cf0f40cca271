"""One markdown block of memories, ready to paste into a prompt.

An agent given memories as a bare list trusts them all equally. The block is ordered by how
far each memory can be trusted right now: fresh ones first, then the ones that could not be
checked, then the stale ones under a banner that says what changed in the code, so the warning
is read before the claims it qualifies. Every memory carries its one-line envelope.

The budget is in tokens, estimated at four characters each (no tokenizer is loaded): good
enough to keep a prompt section from crowding out the task, and the same on every machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .model import Drift, Hit, Verdict

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
    return out


def _what_changed(hits: Sequence[Hit]) -> list[str]:
    seen: list[str] = []
    for hit in hits:
        for check in hit.checks:
            if check.verdict in _STALE_VERDICTS and check.detail not in seen:
                seen.append(check.detail)
    return seen


def render_context(hits: Sequence[Hit], *, task: str, budget: int = DEFAULT_BUDGET) -> ContextBlock:
    """Lay out `hits` (already drift-checked, best first) as one markdown block within `budget`.

    Memories are taken greedily, fresh before unknown before stale and best first within each,
    skipping any that would overflow the budget; the ids left out are returned in `omitted`.
    Superseded or retracted hits are left out: a prompt should only carry current beliefs.
    """
    task_line = " ".join(task.split())
    if len(task_line) > 200:
        task_line = task_line[:199] + "…"
    head = (f"## Memories for: {task_line}\n\n"
            "Checked against the code just now; trust each memory only as far as its bracketed status says.")
    current = [h for h in hits if h.memory.status == "active"]
    groups = {
        Drift.FRESH: [h for h in current if h.drift is Drift.FRESH],
        Drift.UNKNOWN: [h for h in current if h.drift is Drift.UNKNOWN],
        Drift.STALE: [h for h in current if h.drift is Drift.STALE],
    }
    if not current:
        markdown = f"{head}\n\nNo memories found for this task."
        return ContextBlock(markdown, task, budget)

    # Greedy by priority, pricing each candidate by composing the block with it: exact, and
    # cheap at the few dozen hits a query returns. The "left out" note is always reserved.
    reserve = estimate_tokens("\n\n" + _omitted_note(999))
    taken: dict[Drift, list[Hit]] = {d: [] for d in groups}
    omitted: list[str] = []
    for drift in (Drift.FRESH, Drift.UNKNOWN, Drift.STALE):
        for hit in groups[drift]:
            taken[drift].append(hit)
            if estimate_tokens(_compose(head, taken, groups[Drift.STALE], 0)) + reserve > budget:
                taken[drift].pop()
                omitted.append(hit.memory.id)
    return ContextBlock(
        _compose(head, taken, groups[Drift.STALE], len(omitted)),
        task,
        budget,
        fresh=tuple(h.memory.id for h in taken[Drift.FRESH]),
        unknown=tuple(h.memory.id for h in taken[Drift.UNKNOWN]),
        stale=tuple(h.memory.id for h in taken[Drift.STALE]),
        omitted=tuple(omitted),
    )


def _omitted_note(n: int) -> str:
    return f"({n} more {'memory' if n == 1 else 'memories'} left out to fit the budget.)"


def _compose(head: str, taken: dict[Drift, list[Hit]], all_stale: Sequence[Hit], omitted: int) -> str:
    parts = [head]
    if taken[Drift.FRESH]:
        parts.append("### Fresh\n" + "\n".join(_item(h) for h in taken[Drift.FRESH]))
    if taken[Drift.UNKNOWN]:
        parts.append("### Could not be checked\n> These anchors could not be read; re-verify before relying on them.\n"
                     + "\n".join(_item(h) for h in taken[Drift.UNKNOWN]))
    if taken[Drift.STALE]:
        parts.append(_stale_header(all_stale) + "\n".join(_item(h) for h in taken[Drift.STALE]))
    if omitted:
        parts.append(_omitted_note(omitted))
        if not any(taken.values()):
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
