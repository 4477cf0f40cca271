"""A fork of the ledger's fold: one memory two entries changed without seeing each other.

Apart from `anchorfs.ledger.log` for its import cost only: the hooks fold (or read the fold's
snapshot) but never list forks, and each frozen dataclass costs a millisecond at import.
`anchorfs.ledger.log` re-exports both names (`from anchorfs.ledger.log import Fork` keeps working).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..core.model import Memory, to_iso

__all__ = ["Side", "Fork"]


@dataclass(frozen=True, slots=True)
class Side:
    """One side of a fork: the memory it left standing (a successor, or the memory itself
    retracted or kept), and who wrote it."""

    id: str
    memory: Memory
    op: str
    actor: str
    at: datetime

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "content": self.memory.content, "author": self.memory.author,
                "status": self.memory.status, "op": self.op, "actor": self.actor, "at": to_iso(self.at)}


@dataclass(frozen=True, slots=True)
class Fork:
    """One memory that two entries changed without seeing each other (two successors, or a
    supersede racing a retract), each side still standing: listed, never resolved by a guess."""

    memory: Memory
    sides: tuple[Side, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.memory.id, "content": self.memory.content, "sides": [s.to_dict() for s in self.sides]}
