"""anchor: what a memory rests on. Anchor specs and `@anchor(...)` markers parsed, guarded and
hashed at write time (`anchors.take`), symbols resolved with tree-sitter (`symbols`, one module
per family of languages), an anchor's text as the index reads it (`codetext`). Imports `core`.
"""

from __future__ import annotations

from .anchors import judge, narrowed_text, parse_markers, parse_spec, resolve_path, take
from .symbols import find_symbol, language_for, list_symbols

__all__ = ["find_symbol", "judge", "language_for", "list_symbols", "narrowed_text", "parse_markers", "parse_spec",
           "resolve_path", "take"]
