"""A query result (`Hit`): a memory with its relevance, score, drift and freshness envelope.

Apart from `anchorfs.core.model` for its import cost only: the hooks build memories and check their
anchors but never rank a hit, and each frozen dataclass costs a millisecond at import.
`anchorfs.core.model` re-exports it (`from anchorfs.core.model import Hit` keeps working).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .model import AnchorCheck, Drift, Memory, to_iso

__all__ = ["Hit"]


@dataclass(frozen=True, slots=True)
class Hit:
    """One query result. `relevance` in [0, 1] is how well the memory matches the query;
    `score = relevance x drift factor x age factor` orders the results; `weak` marks a
    relevance under the floor (`search.relevance_floor`): the closest thing, not an answer."""

    memory: Memory
    similarity: float
    score: float
    drift: Drift
    checks: tuple[AnchorCheck, ...]
    envelope: str
    relevance: float = 1.0
    weak: bool = False
    conflict: tuple[str, ...] = ()
    """The ids standing against this memory in a fork (`Workspace.conflicts`); empty when none."""

    def to_dict(self) -> dict[str, Any]:
        m = self.memory
        return {
            "id": m.id,
            "content": m.content,
            "kind": m.kind,
            "tags": list(m.tags),
            "status": m.status,
            "relevance": round(self.relevance, 6),
            "score": round(self.score, 6),
            "weak": self.weak,
            "similarity": round(self.similarity, 6),
            "drift": self.drift.value,
            "envelope": self.envelope,
            "recorded_at": to_iso(m.recorded_at),
            "valid_until": to_iso(m.valid_until),
            "superseded_by": m.superseded_by,
            "anchors": [c.to_dict() for c in self.checks],
            "stale_claims": [c.to_dict() for c in m.stale_claims],
            "conflict": list(self.conflict),
        }
