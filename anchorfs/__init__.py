"""anchorfs: memories for coding agents, anchored to the code they rest on.

    import anchorfs
    with anchorfs.open() as ws:
        ws.record("token expiry is 24h", kind="constraint", anchors=["auth/token.py:7"])
        for hit in ws.query("how long do tokens last"):
            print(hit.envelope, hit.memory.content)
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
from .model import AnchorCheck, AnchorRef, Drift, Hit, Memory, Verdict
from .workspace import Workspace, init, open

__version__ = "0.1.0"

__all__ = [
    "open",
    "init",
    "Workspace",
    "Memory",
    "AnchorRef",
    "AnchorCheck",
    "Hit",
    "Verdict",
    "Drift",
    "AnchorfsError",
    "AnchorError",
    "UnsafePathError",
    "SymbolNotFoundError",
    "InputError",
    "ConfigError",
    "WorkspaceError",
    "NotFoundError",
    "LedgerError",
    "StoreError",
    "RevisionError",
    "EmbedderError",
    "HistoryError",
]
