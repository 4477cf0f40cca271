"""core: what every other package stands on: the model (memories, anchors, verdicts, hits; `core.model`,
imported by what uses it, never by the warm server's client), the
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

__version__ = "0.1.0"
"""The anchorfs version: part of every derived file's key, so an upgrade starts each cold."""

__all__ = [
    "AnchorError", "AnchorfsError", "ConfigError", "EmbedderError", "HistoryError", "InputError", "LedgerError",
    "NotFoundError", "RevisionError", "StoreError", "SymbolNotFoundError", "UnsafePathError", "WorkspaceError",
    "__version__",
]
