"""Symbols as dotted qualified names, found with tree-sitter.

A symbol anchor (`auth/token.py#TokenIssuer.issue`) must name the same code across languages,
so every grammar is mapped onto one naming scheme: enclosing classes / namespaces / impls joined
with dots, top-level definitions by their bare name. tree-sitter is imported lazily, and each
language's handlers (`symbols_walk` for Python, `symbols_cfamily`, `symbols_langs`) the first
time a file of theirs is parsed.
"""

from __future__ import annotations

import os
from bisect import bisect_left, bisect_right
import threading
from collections.abc import Callable
from functools import lru_cache
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from anchorfs.core.errors import AnchorError, SymbolNotFoundError

from ..core.model import Value
from .symbols_walk import _FUNC_KINDS, _VALUE_KINDS, _Ctx, _Def

if TYPE_CHECKING:  # pragma: no cover - typing only
    import difflib

    from tree_sitter import Language, Node, Parser, Query

    from .symbols_walk import _Spec

__all__ = ["Symbol", "language_for", "list_symbols", "find_symbol", "token_hash", "MAX_PARSE_BYTES"]

#: Files above this size are not parsed (a generated blob is not worth a parse on every check).
MAX_PARSE_BYTES: int = 4 * 1024 * 1024

_BINARY_SNIFF_BYTES = 8192


class Symbol(Value):
    """One definition: its qualified name and the exact span its anchor hashes."""

    __slots__ = ("name", "kind", "start_line", "end_line", "start_byte", "end_byte")
    name: str
    kind: str
    start_line: int
    end_line: int
    start_byte: int
    end_byte: int

    def __init__(self, name: str, kind: str, start_line: int, end_line: int, start_byte: int, end_byte: int) -> None:
        cls = self.__class__
        object.__setattr__(self, "__class__", cls._Open)  # see `Value._Open`
        self.name = name
        self.kind = kind
        self.start_line = start_line
        self.end_line = end_line
        self.start_byte = start_byte
        self.end_byte = end_byte
        self.__class__ = cls


_EXTENSIONS: dict[str, str] = {
    ".py": "python", ".pyi": "python", ".pyw": "python",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript", ".tsx": "tsx",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".rs": "rust", ".go": "go", ".java": "java", ".c": "c",
    # Headers go to the C++ grammar: it parses plain C headers well, the C grammar cannot parse C++ ones.
    ".h": "cpp", ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".c++": "cpp", ".hh": "cpp", ".hpp": "cpp",
    ".hxx": "cpp", ".h++": "cpp", ".ipp": "cpp", ".tpp": "cpp", ".inl": "cpp",
    ".cs": "csharp", ".rb": "ruby", ".rake": "ruby", ".gemspec": "ruby", ".php": "php",
    ".kt": "kotlin", ".kts": "kotlin", ".swift": "swift", ".scala": "scala", ".sc": "scala", ".sql": "sql",
}


def language_for(path: str) -> str | None:
    """The grammar name for `path` by its extension, or None when symbols cannot be resolved."""
    return _EXTENSIONS.get(os.path.splitext(path)[1].lower())


# --------------------------------------------------------------------------- parsers

_LANGUAGES: dict[str, Language] = {}
_QUERIES: dict[str, Query] = {}
_LANG_LOCK = threading.Lock()
_THREAD = threading.local()


def _language(lang: str) -> Language:
    """The grammar of `lang`, loaded once: straight from the language pack's `bindings/` folder
    (the pack's `__init__` is costly to import), else through its `get_language`."""
    language = _LANGUAGES.get(lang)
    if language is None:
        with _LANG_LOCK:
            language = _LANGUAGES.get(lang)
            if language is None:
                try:
                    import importlib.machinery
                    import importlib.util

                    from tree_sitter import Language as _Language

                    spec = importlib.util.find_spec("tree_sitter_language_pack")  # found, not imported
                    where = list(spec.submodule_search_locations or ()) if spec is not None else []
                    name = f"anchorfs._grammar.{lang}"  # the binding's init function is named for `lang`
                    for suffix in importlib.machinery.EXTENSION_SUFFIXES if where and lang.isidentifier() else ():
                        path = os.path.join(where[0], "bindings", lang + suffix)
                        if os.path.isfile(path):
                            loader = importlib.machinery.ExtensionFileLoader(name, path)
                            binding = importlib.util.module_from_spec(
                                importlib.util.spec_from_file_location(name, path, loader=loader))  # type: ignore[arg-type]
                            loader.exec_module(binding)
                            language = _Language(binding.language())
                            break
                except Exception:  # noqa: BLE001 - the pack's own loader below says what is wrong
                    language = None
                if language is None:
                    from tree_sitter_language_pack import get_language

                    language = get_language(lang)  # type: ignore[arg-type]
                _LANGUAGES[lang] = language
    return language


def _parser(lang: str) -> Parser:
    """One parser per language per thread: parsers are not safe to share across threads."""
    cache: dict[str, Parser] | None = getattr(_THREAD, "parsers", None)
    if cache is None:
        cache = _THREAD.parsers = {}
    parser = cache.get(lang)
    if parser is None:
        from tree_sitter import Parser

        parser = cache[lang] = Parser(_language(lang))
    return parser


# --------------------------------------------------------------------------- languages

_SPEC_MODULES = {"python": "symbols_walk", "c": "symbols_cfamily", "cpp": "symbols_cfamily", "csharp": "symbols_cfamily"}
"""Where each language's handlers are (any other: `symbols_langs`), imported when first asked for."""
_SPECS: dict[str, _Spec] = {}


def _spec(lang: str) -> _Spec:
    """The handlers of `lang`, from its module (`_SPEC_MODULES`)."""
    spec = _SPECS.get(lang)
    if spec is None:
        import importlib

        module = importlib.import_module(f"{__package__}." + _SPEC_MODULES.get(lang, "symbols_langs"))
        spec = _SPECS.setdefault(lang, module.SPECS[lang])
    return spec


# --------------------------------------------------------------------------- public API


def _check_source(path: str, source: bytes) -> str:
    lang = language_for(path)
    if lang is None:
        base = os.path.basename(path)
        ext = os.path.splitext(base)[1] or base
        raise AnchorError(f"no grammar for {ext!r} files; anchor the whole file or lines instead")
    if len(source) > MAX_PARSE_BYTES:
        raise AnchorError(f"{path} is too large to parse for symbols ({len(source)} bytes, limit "
                          f"{MAX_PARSE_BYTES}); anchor the whole file or lines instead")
    if b"\0" in source[:_BINARY_SNIFF_BYTES]:
        raise AnchorError(f"{path} is a binary file; anchor the whole file instead")
    try:
        source.decode("utf-8")
    except UnicodeDecodeError:
        raise AnchorError(f"{path} is not valid UTF-8 text; anchor the whole file instead") from None
    return lang


def _span(first: Node, last: Node) -> tuple[int, int, int, int]:
    start_line = first.start_point[0] + 1
    end_row, end_col = last.end_point
    # A node that swallows its trailing newline ends at column 0 of the next line.
    end_line = end_row if end_col == 0 and end_row + 1 > start_line else end_row + 1
    return start_line, end_line, first.start_byte, last.end_byte


def _query(lang: str) -> Query:
    """One query matching every node type the language's handlers look at (matching in C is
    faster than walking every node from Python; scopes come from nesting)."""
    query = _QUERIES.get(lang)
    if query is None:
        from tree_sitter import Query

        language = _language(lang)
        spec = _spec(lang)
        kinds = sorted(k for k in {*spec.handlers, *spec.setters} if language.id_for_node_kind(k, True))
        query = Query(language, "[" + " ".join(f"({k})" for k in kinds) + "] @def")
        with _LANG_LOCK:
            query = _QUERIES.setdefault(lang, query)
    return query


def list_symbols(path: str, source: bytes) -> list[Symbol]:
    """Every definition in `source` (parsed as `path`'s language), in source order."""
    if len(source) <= _CACHED_SOURCE_BYTES:
        return list(_cached_symbols(path, source))
    return list(_parse_symbols(path, source))


_CACHED_SOURCE_BYTES = 256 * 1024


@lru_cache(maxsize=32)
def _cached_symbols(path: str, source: bytes) -> tuple[Symbol, ...]:
    """One parse per file version: writes, drift checks and indexing ask for the same symbols."""
    return _parse_symbols(path, source)


def _parse_symbols(path: str, source: bytes) -> tuple[Symbol, ...]:
    lang = _check_source(path, source)
    spec = _spec(lang)
    query = _query(lang)
    root = _tree(lang, source)
    from tree_sitter import QueryCursor

    nodes = QueryCursor(query).captures(root).get("def", [])
    nodes.sort(key=lambda n: (n.start_byte, -n.end_byte))  # stable: outer before inner on ties

    ctx = _Ctx(source)
    handlers, setters = spec.handlers, spec.setters
    found: list[tuple[Symbol, bool]] = []

    def emit(d: _Def) -> None:
        name_parts = d.parts if d.absolute else ctx.scope + d.parts
        start_line, end_line, start_byte, end_byte = _span(d.first, d.last)
        symbol = Symbol(".".join(name_parts), d.kind, start_line, end_line, start_byte, end_byte)
        found.append((symbol, d.weak or d.kind in _VALUE_KINDS))

    # Open scopes, innermost last: (end byte, scope, kind of its symbol, is a function body).
    open_scopes: list[tuple[int, tuple[str, ...], str | None, bool]] = [(len(source) + 1, (), None, False)]
    for node in nodes:
        start = node.start_byte
        while len(open_scopes) > 1 and open_scopes[-1][0] <= start:
            open_scopes.pop()
        _, ctx.scope, ctx.pkind, ctx.in_func = open_scopes[-1]
        setter = setters.get(node.type)
        if setter is not None:
            ns = setter(ctx, node)
            if ns is not None:
                last = _namespace_region_end(ctx, node, setters)
                emit(_Def(ns, "namespace", node, last))
                open_scopes.append((last.end_byte, ctx.scope + ns, "namespace", ctx.in_func))
                continue
        handler = handlers.get(node.type)
        if handler is None:
            continue
        result = handler(ctx, node)
        if isinstance(result, _Def):
            emit(result)
            if result.opens:
                parts = result.parts if result.absolute else ctx.scope + result.parts
                child_scope = result.child_scope if result.child_scope is not None else parts
                open_scopes.append((node.end_byte, child_scope, result.kind, result.kind in _FUNC_KINDS))
        elif result:
            for d in result:
                emit(d)

    strong = {s.name for s, weak in found if not weak}
    symbols = [s for s, weak in found if not weak or s.name not in strong]
    symbols.sort(key=lambda s: s.start_byte)  # stable: an outer symbol stays before its first child
    return tuple(symbols)


def _namespace_region_end(ctx: _Ctx, node: Node,
                          setters: dict[str, Callable[[_Ctx, Node], tuple[str, ...] | None]]) -> Node:
    """`namespace X;` names the siblings after it, up to the next such statement."""
    last = node
    sibling = node.next_named_sibling
    while sibling is not None:
        setter = setters.get(sibling.type)
        if setter is not None and setter(ctx, sibling) is not None:
            break
        last, sibling = sibling, sibling.next_named_sibling
    return last


_CUTOFF = 0.6
_MARGIN = 0.15


def _ratio(matcher: difflib.SequenceMatcher[str], candidate: str) -> float:
    matcher.set_seq1(candidate)
    if matcher.real_quick_ratio() < _CUTOFF or matcher.quick_ratio() < _CUTOFF:
        return 0.0
    return matcher.ratio()


def _suggest(name: str, names: list[str]) -> tuple[str, ...]:
    """Up to 3 names close to `name` as a whole or by their last part, best first; only names
    about as close as the best one (a typo of a method suggests the method, not its class)."""
    import difflib  # here: only a symbol not found asks for suggestions

    whole = difflib.SequenceMatcher(autojunk=False)
    whole.set_seq2(name)
    tail = difflib.SequenceMatcher(autojunk=False)
    tail.set_seq2(name.rsplit(".", 1)[-1])
    scored: list[tuple[float, int, str]] = []
    tails: dict[str, float] = {}  # many names share a last part (`__init__`, `new`, `get`)
    for index, qualified in enumerate(dict.fromkeys(names)):
        w = _ratio(whole, qualified)
        last = qualified.rsplit(".", 1)[-1]
        t = tails.get(last)
        if t is None:
            t = tails[last] = _ratio(tail, last)
        if w >= _CUTOFF or t >= _CUTOFF:
            scored.append(((w + t) / 2, index, qualified))
    if not scored:
        return ()
    scored.sort(key=lambda item: (-item[0], item[1]))
    best = scored[0][0]
    return tuple(q for score, _, q in scored[:3] if score >= best - _MARGIN)


def find_symbol(path: str, source: bytes, name: str) -> Symbol:
    """The first definition named exactly `name`; SymbolNotFoundError names the closest ones."""
    symbols = list_symbols(path, source)
    for symbol in symbols:
        if symbol.name == name:
            return symbol
    if not name.isascii() or not all(s.name.isascii() for s in symbols):
        import unicodedata  # identifiers compare as Python compares them: NFKC (`he\u0301llo` is `héllo`)

        want = unicodedata.normalize("NFKC", name)
        for symbol in symbols:
            if unicodedata.normalize("NFKC", symbol.name) == want:
                return symbol
    candidates = _suggest(name, [s.name for s in symbols])
    message = f"symbol {name!r} not found in {path}"
    if candidates:
        message += f"; did you mean: {', '.join(candidates)}?"
    raise SymbolNotFoundError(message, candidates=candidates)


# --------------------------------------------------------------------------- token sequences


_END_BYTE, _START_BYTE = attrgetter("end_byte"), attrgetter("start_byte")


@lru_cache(maxsize=8)
def _tree(lang: str, source: bytes) -> Any:
    """One parse per version of a file (checked by `_check_source`): its symbols, token hashes and
    the spans a re-layout search tries share it, and a history walk meeting the same blob again
    does not parse it again. The root node is kept: its children, listed once, serve every span."""
    return _parser(lang).parse(source).root_node


def token_hash(path: str, source: bytes, start_byte: int, end_byte: int) -> str | None:
    """SHA-256 of the syntax tree over `source[start_byte:end_byte]`, layout left out; None when
    `path` has no grammar (or cannot be parsed: binary, too large, not UTF-8).

    Every leaf counts with its type and text (comments too), and so does the nesting of named
    nodes: a Python re-indent that moves a statement into a block changes the hash, a reflow does
    not. Whitespace between tokens is never hashed; a leaf cut by the span counts by its part inside.
    """
    import hashlib

    try:
        root = _tree(_check_source(path, source), source)
    except AnchorError:
        return None
    digest = hashlib.sha256()
    update = digest.update
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, closing = stack.pop()
        if closing:
            update(b")")
            continue
        a, b = node.start_byte, node.end_byte
        if b <= start_byte or a >= end_byte or a == b:
            continue  # outside the span, or a zero-width node (Python's indent, a missing token)
        inside = start_byte <= a and b <= end_byte
        if node.child_count == 0:
            text = source[max(a, start_byte):min(b, end_byte)]
            if node.type == "comment" or node.type.endswith("_comment"):
                text = text.rstrip()
            update(node.type.encode() + b"\0" + text + b"\1")
            continue
        if inside and node.is_named:
            update(b"(" + node.type.encode())
            stack.append((node, True))
        children = node.children  # only those reaching into the span: a file's thousand others are not visited
        first = bisect_right(children, start_byte, key=_END_BYTE)
        last = bisect_left(children, end_byte, lo=first, key=_START_BYTE)
        stack.extend((child, False) for child in reversed(children[first:last]))
    return digest.hexdigest()
