"""Anchors proposed for unanchored memories (`verify --suggest`, `import --apply`): what their
text names that the workspace backs, each held back when the text makes a stale claim.
Built on the claim checks of `anchorfs.verify.claims`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..anchor.anchors import MAX_FILE_BYTES
from ..core.model import Drift, Memory
from .claims import SymbolIndex, _Checker
from .text import _prose_identifiers, extract_claims, remote_context

__all__ = ["Suggestion", "SuggestReport", "suggest", "suggest_anchors", "suggest_report"]


def suggest_anchors(root: str | os.PathLike[str], memory: Memory, index: SymbolIndex | None = None) -> list[str]:
    """Anchor specs the memory's text names and the workspace backs, deduplicated: a workspace
    file named by path (or a bare name found in exactly one place), a `file#Name` that resolves,
    and an identifier that names exactly one definition. Paths are not proposed when the memory
    talks about another machine; specs it is already anchored to are left out."""
    checker = _Checker(root, index)
    remote = remote_context(memory.content)
    have = {a.spec for a in memory.anchors}
    specs: list[str] = []
    names: list[str] = []
    for claim in extract_claims(memory.content):
        if claim.kind == "url":
            continue
        if claim.kind == "path":
            if remote:
                continue
            where = checker.where(claim.value)
            if (where.verdict is Drift.FRESH and where.is_file and where.rel is not None
                    and os.path.getsize(where.real or "") <= MAX_FILE_BYTES):
                specs.append(where.rel)
        elif "#" in claim.value:
            if remote:
                continue
            where, qualified = checker.symbol(claim.value)
            if where.verdict is Drift.FRESH and where.rel is not None and qualified is not None:
                specs.append(f"{where.rel}#{qualified}")
        else:
            names.append(claim.value)
    names.extend(_prose_identifiers(memory.content))
    for name in dict.fromkeys(names):
        where, qualified = checker.symbol(name)
        if where.verdict is Drift.FRESH and where.rel is not None and qualified is not None:
            specs.append(f"{where.rel}#{qualified}")
    return [s for s in dict.fromkeys(specs) if s not in have]


@dataclass(frozen=True, slots=True)
class Suggestion:
    """Anchors proposed for one unanchored memory. `held` names the claims of its text that are
    stale (found now, or marked by `verify --mark`): such a memory is never anchored, because
    an anchor to whatever else it names would serve a claim about something gone as fresh."""

    id: str
    anchors: tuple[str, ...]
    held: tuple[tuple[str, str], ...] = ()
    """(claim, detail) of each stale claim; empty when the anchors may be taken."""
    applied: bool = False

    @property
    def why(self) -> str | None:
        """Why it was not anchored, in one line; None when nothing holds it back."""
        if not self.held:
            return None
        gone = "; ".join(f"claims `{value}`, which is gone: {detail}" for value, detail in self.held[:3])
        more = f" and {len(self.held) - 3} more" if len(self.held) > 3 else ""
        return f"{gone}{more}; not anchored: fix the text (supersede) or retract it first"

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "anchors": list(self.anchors), "applied": self.applied, "why": self.why}


@dataclass(frozen=True, slots=True)
class SuggestReport:
    """Every suggestion, those that may be anchored and those held back (`Suggestion.held`)."""

    suggestions: tuple[Suggestion, ...] = ()
    applied: bool = False

    @property
    def proposals(self) -> dict[str, list[str]]:
        """memory id -> specs, for the memories that may be anchored."""
        return {s.id: list(s.anchors) for s in self.suggestions if not s.held}

    @property
    def held(self) -> list[Suggestion]:
        return [s for s in self.suggestions if s.held]

    def to_dict(self) -> dict[str, Any]:
        return {"suggestions": [s.to_dict() for s in self.suggestions], "applied": self.applied,
                "held": len(self.held)}


def suggest_report(root: str | os.PathLike[str], memories: Iterable[Memory], *,
                   index: SymbolIndex | None = None) -> SuggestReport:
    """Suggestions for the memories without anchors that name something here, each held back
    when its text makes a stale claim: checked now (paths and symbols; URLs are not fetched
    here), or marked stale by an earlier `verify --mark` (a URL found 404 by `--net`)."""
    index = index if index is not None else SymbolIndex(root)
    checker = _Checker(root, index)
    out: list[Suggestion] = []
    for memory in memories:
        if memory.anchors:
            continue
        specs = suggest_anchors(root, memory, index)
        if not specs:
            continue
        held = {c.value: c.detail for c in memory.stale_claims}
        for claim, where in checker.check(memory):
            if where is not None and where.verdict is Drift.STALE:
                held.setdefault(claim.value, where.detail)
        out.append(Suggestion(memory.id, tuple(specs), tuple(held.items())))
    return SuggestReport(tuple(out))


def suggest(root: str | os.PathLike[str], memories: Iterable[Memory], *,
            index: SymbolIndex | None = None) -> dict[str, list[str]]:
    """memory id -> proposed specs, for the memories `suggest_report` does not hold back."""
    return suggest_report(root, memories, index=index).proposals
