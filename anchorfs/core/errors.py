"""One error tree: the CLI prints any `AnchorfsError` as one line and exits 1.

Anything else escaping is a bug, never a user error.
"""

from __future__ import annotations

import re
import sys
from typing import Any

__all__ = [
    "printable",
    "warn_line",
    "AnchorfsError",
    "InputError",
    "AnchorError",
    "UnsafePathError",
    "SymbolNotFoundError",
    "ConfigError",
    "WorkspaceError",
    "NotFoundError",
    "LedgerError",
    "StoreError",
    "RevisionError",
    "EmbedderError",
    "HistoryError",
]


class AnchorfsError(Exception):
    """Base of every error a user can cause or fix."""


class InputError(AnchorfsError):
    """Bad input that is not an anchor: empty content, an unknown kind, a bad time."""


class AnchorError(AnchorfsError):
    """An anchor or `@anchor(...)` marker that cannot be taken."""


class UnsafePathError(AnchorError):
    """A path that resolves outside the workspace (or into `.anchorfs/`)."""


class SymbolNotFoundError(AnchorError):
    """A symbol that is not defined in the file; carries the closest names that are."""

    def __init__(self, message: str, *, candidates: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.candidates = candidates


class ConfigError(AnchorfsError):
    """A bad `.anchorfs.toml` key or `ANCHORFS_*` value."""


class WorkspaceError(AnchorfsError):
    """No workspace where one was expected, or a broken state folder."""


class NotFoundError(AnchorfsError):
    """An unknown (or ambiguous) memory id."""


class LedgerError(AnchorfsError):
    """The ledger could not be appended to: the write did not happen."""


class StoreError(AnchorfsError):
    """The LanceDB store is unusable; `anchorfs reindex` rebuilds it from the ledger."""


class RevisionError(AnchorfsError):
    """A supersede / retract / revert that the memory's state does not allow."""


class EmbedderError(AnchorfsError):
    """An unknown embedder, a missing extra, or a table built with another embedder."""


class HistoryError(AnchorfsError):
    """Git history cannot answer (not a repo, unknown revision)."""


_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """Text for a terminal: control characters and bidi overrides as escapes (newlines, tabs stay)."""
    return _UNPRINTABLE.sub(lambda m: repr(m.group())[1:-1], text)


def warn_line(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
    """`warnings.showwarning` of the CLI and the hooks: one line on stderr, no source line."""
    sys.stderr.write(printable(f"anchorfs: warning: {message}") + "\n")
