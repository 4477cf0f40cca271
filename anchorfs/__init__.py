"""anchorfs: memories for coding agents, anchored to the code they rest on.

    import anchorfs
    with anchorfs.open() as ws:
        ws.record("token expiry is 24h", kind="constraint", anchors=["auth/token.py:7"])
        for hit in ws.query("when do tokens expire"):
            print(hit.envelope, hit.memory.content)
"""

from __future__ import annotations

from .core.errors import (
    AnchorError, AnchorfsError, ConfigError, EmbedderError, HistoryError, InputError, LedgerError, NotFoundError,
    RevisionError, StoreError, SymbolNotFoundError, UnsafePathError, WorkspaceError,
)

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from .core.model import AnchorCheck, AnchorRef, Drift, Hit, Memory, Verdict
    from .sdk.workspace import Workspace, init, open

from .core import __version__

# Imported on first use (PEP 562), so a command that imports this package does not pay for them.
_LAZY = {
    "AnchorCheck": "core.model", "AnchorRef": "core.model", "Drift": "core.model", "Hit": "core.model", "Memory": "core.model",
    "Verdict": "core.model", "Workspace": "sdk.workspace", "init": "sdk.workspace", "open": "sdk.workspace",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'anchorfs' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

__all__ = [
    "open", "init", "Workspace", "Memory", "AnchorRef", "AnchorCheck", "Hit", "Verdict", "Drift",
    "AnchorfsError", "AnchorError", "UnsafePathError", "SymbolNotFoundError", "InputError", "ConfigError",
    "WorkspaceError", "NotFoundError", "LedgerError", "StoreError", "RevisionError", "EmbedderError", "HistoryError",
]
