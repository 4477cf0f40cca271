"""core: what every other package stands on: the model (memories, anchors, verdicts, hits), the
errors (one base, `AnchorfsError`), the configuration, the state folder and its files
(`statefs`, `statedir`, `locate`), the guarded open (`guard`), git plumbing (`git`) and the
words of a text (`textutil`). Imports nothing of anchorfs.
"""

from __future__ import annotations

from .errors import (
    AnchorError,
    AnchorfsError,
    ConfigError,
    EmbedderError,
    HistoryError,
    InputError,
    LedgerError,
    NotFoundError,
    RevisionError,
    StoreError,
    SymbolNotFoundError,
    UnsafePathError,
    WorkspaceError,
)
from .model import AnchorCheck, AnchorRef, Drift, Hit, Memory, Status, Verdict

__version__ = "0.1.0"
"""The anchorfs version: part of every derived file's key, so an upgrade starts each cold."""

__all__ = [
    "AnchorCheck", "AnchorError", "AnchorRef", "AnchorfsError", "ConfigError", "Drift", "EmbedderError", "Hit",
    "HistoryError", "InputError", "LedgerError", "Memory", "NotFoundError", "RevisionError", "Status", "StoreError",
    "SymbolNotFoundError", "UnsafePathError", "Verdict", "WorkspaceError", "__version__",
]
