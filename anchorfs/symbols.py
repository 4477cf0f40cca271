"""Symbols as dotted qualified names, found with tree-sitter.

A symbol anchor (`auth/token.py#TokenIssuer.issue`) must name the same code across languages,
so every grammar is mapped onto one naming scheme: enclosing classes / namespaces / impls joined
with dots, top-level definitions by their bare name. tree-sitter is imported lazily because the
drift pass imports this module on every CLI start and most runs never parse anything.
"""

from __future__ import annotations

import difflib
import os
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from anchorfs.errors import AnchorError, SymbolNotFoundError

if TYPE_CHECKING:  # pragma: no cover - typing only
    from tree_sitter import Language, Node, Parser, Query

__all__ = ["Symbol", "language_for", "list_symbols", "find_symbol", "token_hash", "MAX_PARSE_BYTES"]

#: Files above this size are not parsed: a symbol anchor on a generated or vendored blob is
#: not worth a multi-second parse on every drift check.
MAX_PARSE_BYTES: int = 4 * 1024 * 1024

_BINARY_SNIFF_BYTES = 8192


@dataclass(frozen=True, slots=True)
class Symbol:
    """One definition: its qualified name and the exact span its anchor hashes."""

    name: str
    kind: str
    start_line: int
    end_line: int
    start_byte: int
    end_byte: int


_EXTENSIONS: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".pyw": "python",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".rs": "rust",
    ".go": "go",
    ".java": "java",
    ".c": "c",
    # Headers go to the C++ grammar: it parses plain C headers well, the C grammar
    # cannot parse C++ headers at all.
    ".h": "cpp",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".c++": "cpp",
    ".hh": "cpp",
    ".hpp": "cpp",
    ".hxx": "cpp",
    ".h++": "cpp",
    ".ipp": "cpp",
    ".tpp": "cpp",
    ".inl": "cpp",
    ".cs": "csharp",
    ".rb": "ruby",
    ".rake": "ruby",
    ".gemspec": "ruby",
    ".php": "php",
    ".kt": "kotlin",
    ".kts": "kotlin",
    ".swift": "swift",
    ".scala": "scala",
    ".sc": "scala",
    ".sql": "sql",
}


def language_for(path: str) -> str | None:
    """The grammar name for `path` by its extension, or None when symbols cannot be resolved."""
    ext = os.path.splitext(path)[1].lower()
    return _EXTENSIONS.get(ext)


# --------------------------------------------------------------------------- parsers

_LANGUAGES: dict[str, Language] = {}
_QUERIES: dict[str, Query] = {}
_LANG_LOCK = threading.Lock()
_THREAD = threading.local()


def _language(lang: str) -> Language:
    """The grammar of `lang`, loaded once. Straight from the language pack's `bindings/` folder
    when it is there: the pack's `__init__` imports three grammars and `importlib.resources`
    (a seventh of an agent hook's cost, issue 20); else, or on any surprise, its `get_language`."""
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


# --------------------------------------------------------------------------- walk machinery

_TYPE_KINDS = frozenset(
    {
        "class",
        "struct",
        "interface",
        "trait",
        "impl",
        "enum",
        "object",
        "record",
        "extension",
        "protocol",
        "union",
        "annotation",
    }
)
_FUNC_KINDS = frozenset({"function", "method"})
# Values yield their name to a definition spelled the same (a Java builder's field `secret`
# and its method `secret()`): the definition is what an anchor on that name means.
_VALUE_KINDS = frozenset({"variable", "constant", "field", "property"})


class _Def:
    """What a handler found at one node (internal)."""

    __slots__ = ("parts", "kind", "first", "last", "weak", "opens", "child_scope", "absolute")

    def __init__(
        self,
        parts: tuple[str, ...],
        kind: str,
        first: Node,
        last: Node | None = None,
        *,
        weak: bool = False,
        opens: bool = True,
        child_scope: tuple[str, ...] | None = None,
        absolute: bool = False,
    ) -> None:
        self.parts = parts  # appended to the enclosing scope (or the whole name when absolute)
        self.kind = kind
        self.first = first  # span start node
        self.last = last if last is not None else first  # span end node
        self.weak = weak  # a declaration only: dropped when a definition has the same name
        self.opens = opens  # children are named inside it
        self.child_scope = child_scope  # children's scope when not scope + parts
        self.absolute = absolute


class _Ctx:
    """Per-parse state handed to handlers."""

    __slots__ = ("src", "scope", "pkind", "in_func", "known_types")

    def __init__(self, src: bytes) -> None:
        self.src = src
        self.scope: tuple[str, ...] = ()
        self.pkind: str | None = None  # kind of the innermost enclosing symbol
        self.in_func = False  # inside a function body: locals are not symbols
        self.known_types: set[tuple[str, ...]] = set()

    def text(self, node: Node | None) -> str:
        if node is None:
            return ""
        return self.src[node.start_byte : node.end_byte].decode("utf-8", "replace")

    def fn_kind(self) -> str:
        return "method" if self.pkind in _TYPE_KINDS else "function"


_Handler = Callable[[_Ctx, "Node"], "_Def | list[_Def] | None"]


@dataclass(frozen=True, slots=True)
class _Spec:
    handlers: dict[str, _Handler]
    # Nodes that apply a namespace to their following siblings (C# file-scoped, PHP `namespace X;`).
    setters: dict[str, Callable[[_Ctx, Node], tuple[str, ...] | None]]


def _wrap(node: Node, wrappers: tuple[str, ...]) -> Node:
    """Climb to wrapping nodes whose span belongs to the definition (decorators, export...)."""
    parent = node.parent
    while parent is not None and parent.type in wrappers:
        node, parent = parent, parent.parent
    return node


def _name(ctx: _Ctx, node: Node, field: str = "name") -> str:
    return ctx.text(node.child_by_field_name(field)).strip()


_TEMPLATE_ARGS = re.compile(r"<[^<>]*>")


def _strip_generics(text: str) -> str:
    text = "".join(text.split())
    prev = None
    while prev != text:
        prev, text = text, _TEMPLATE_ARGS.sub("", text)
    return re.sub(r"\[[^\[\]]*\]", "", text)


def _split(text: str, sep: str) -> tuple[str, ...]:
    return tuple(p for p in _strip_generics(text).split(sep) if p)


def _first_of_type(node: Node | None, types: frozenset[str]) -> Node | None:
    """First descendant (preorder, self included) of one of `types`."""
    stack = [node] if node is not None else []
    while stack:
        cur = stack.pop()
        if cur.type in types:
            return cur
        stack.extend(reversed(cur.named_children))
    return None


def _child_of_type(node: Node, types: Iterable[str]) -> Node | None:
    for child in node.named_children:
        if child.type in types:
            return child
    return None


def _has_token(node: Node, token: str) -> bool:
    return any(child.type == token for child in node.children)


def _named(kind: str, *, field: str = "name", opens: bool = True, sep: str = ".") -> _Handler:
    """Handler for the common case: a `name` field and a fixed kind."""

    def handler(ctx: _Ctx, node: Node) -> _Def | None:
        name = _name(ctx, node, field)
        if not name:
            return None
        return _Def(_split(name, sep) if sep else (name,), kind, node, opens=opens)

    return handler


def _named_fn(
    *, field: str = "name", wrappers: tuple[str, ...] = (), weak: bool = False
) -> _Handler:
    """A function whose kind (function or method) depends on what encloses it."""

    def handler(ctx: _Ctx, node: Node) -> _Def | None:
        name = _name(ctx, node, field)
        if not name:
            return None
        return _Def((name,), ctx.fn_kind(), _wrap(node, wrappers), weak=weak)

    return handler


def _unless_in_func(handler: _Handler) -> _Handler:
    def wrapped(ctx: _Ctx, node: Node) -> _Def | list[_Def] | None:
        return None if ctx.in_func else handler(ctx, node)

    return wrapped


# --------------------------------------------------------------------------- Python


def _py_assignment(ctx: _Ctx, node: Node) -> _Def | None:
    left = node.child_by_field_name("left")
    if left is None or left.type != "identifier":
        return None
    parent = node.parent
    span = parent if parent is not None and parent.type == "expression_statement" else node
    return _Def((ctx.text(left),), "variable", span, opens=False)


_PYTHON = _Spec(
    handlers={
        "class_definition": lambda ctx, node: _Def(
            (_name(ctx, node),), "class", _wrap(node, ("decorated_definition",))
        ),
        "function_definition": _named_fn(wrappers=("decorated_definition",)),
        "assignment": _unless_in_func(_py_assignment),
    },
    setters={},
)


# ------------------------------------------------------------------------ JavaScript / TypeScript

_JS_WRAPPERS = ("export_statement", "ambient_declaration")
_JS_FUNC_VALUES = frozenset(
    {"arrow_function", "function_expression", "function", "generator_function"}
)


def _js_declarator(ctx: _Ctx, node: Node) -> _Def | None:
    name_node = node.child_by_field_name("name")
    if name_node is None or name_node.type != "identifier":
        return None  # destructuring patterns bind no single name
    value = node.child_by_field_name("value")
    vtype = value.type if value is not None else None
    if vtype in _JS_FUNC_VALUES:
        kind = "function"
    elif vtype in ("class", "class_expression"):
        kind = "class"
    elif ctx.in_func:
        return None  # a local variable
    else:
        decl = node.parent
        is_const = decl is not None and _has_token(decl, "const")
        kind = "constant" if is_const else "variable"
    span: Node = node
    decl = node.parent
    if decl is not None and decl.type in ("lexical_declaration", "variable_declaration"):
        if sum(1 for c in decl.named_children if c.type == "variable_declarator") == 1:
            span = _wrap(decl, _JS_WRAPPERS)
    return _Def((ctx.text(name_node),), kind, span, opens=kind in ("function", "class"))


def _js_field(field: str) -> _Handler:
    def handler(ctx: _Ctx, node: Node) -> _Def | None:
        name = _name(ctx, node, field)
        if not name:
            return None
        value = node.child_by_field_name("value")
        is_fn = value is not None and value.type in _JS_FUNC_VALUES
        return _Def((name,), "method" if is_fn else "field", node, opens=is_fn)

    return handler


def _ts_module(kind: str) -> _Handler:
    def handler(ctx: _Ctx, node: Node) -> _Def | None:
        name = _name(ctx, node)
        if not name:
            return None
        if name[:1] in "\"'`":
            parts: tuple[str, ...] = (name.strip("\"'`"),)
        else:
            parts = _split(name, ".")
        return _Def(parts, kind, _wrap(node, _JS_WRAPPERS))

    return handler


def _js_named(kind: str) -> _Handler:
    def handler(ctx: _Ctx, node: Node) -> _Def | None:
        name = _name(ctx, node)
        if not name:
            return None
        return _Def((name,), kind, _wrap(node, _JS_WRAPPERS))

    return handler


def _js_method(*, weak: bool = False) -> _Handler:
    def handler(ctx: _Ctx, node: Node) -> _Def | None:
        name = _name(ctx, node)
        if not name:
            return None
        return _Def((name,), "method", node, weak=weak)

    return handler


def _js_function(*, weak: bool = False) -> _Handler:
    def handler(ctx: _Ctx, node: Node) -> _Def | None:
        name = _name(ctx, node)
        if not name:
            return None
        return _Def((name,), "function", _wrap(node, _JS_WRAPPERS), weak=weak)

    return handler


_JS_HANDLERS: dict[str, _Handler] = {
    "class_declaration": _js_named("class"),
    "function_declaration": _js_function(),
    "generator_function_declaration": _js_function(),
    "method_definition": _js_method(),
    "field_definition": _js_field("property"),
    "variable_declarator": _js_declarator,
}

_TS_HANDLERS: dict[str, _Handler] = {
    **_JS_HANDLERS,
    "abstract_class_declaration": _js_named("class"),
    "interface_declaration": _js_named("interface"),
    "enum_declaration": _js_named("enum"),
    "type_alias_declaration": lambda ctx, node: _Def(
        (_name(ctx, node),), "type", _wrap(node, _JS_WRAPPERS), opens=False
    ),
    "internal_module": _ts_module("namespace"),
    "module": _ts_module("module"),
    "function_signature": _js_function(weak=True),
    "method_signature": _js_method(weak=True),
    "abstract_method_signature": _js_method(weak=True),
    "public_field_definition": _js_field("name"),
}

_JAVASCRIPT = _Spec(handlers=_JS_HANDLERS, setters={})
_TYPESCRIPT = _Spec(handlers=_TS_HANDLERS, setters={})


# --------------------------------------------------------------------------- Rust


def _rust_span_start(node: Node) -> Node:
    """Outer attributes (`#[derive]`, `#[test]`) are siblings in the tree but part of the item."""
    first = node
    prev = node.prev_named_sibling
    while prev is not None and prev.type == "attribute_item":
        first, prev = prev, prev.prev_named_sibling
    return first


def _rust_type_name(ctx: _Ctx, node: Node | None) -> str:
    while node is not None:
        if node.type == "generic_type":
            node = node.child_by_field_name("type")
        elif node.type == "scoped_type_identifier":
            node = node.child_by_field_name("name")
        elif node.type in ("reference_type", "pointer_type"):
            node = node.child_by_field_name("type")
        else:
            return _strip_generics(ctx.text(node))
    return ""


def _rust_item(kind: str, *, opens: bool = True, local: bool = True) -> _Handler:
    def handler(ctx: _Ctx, node: Node) -> _Def | None:
        if not local and ctx.in_func:
            return None
        name = _name(ctx, node)
        if not name:
            return None
        return _Def((name,), kind, _rust_span_start(node), node, opens=opens)

    return handler


def _rust_fn(*, weak: bool = False) -> _Handler:
    def handler(ctx: _Ctx, node: Node) -> _Def | None:
        name = _name(ctx, node)
        if not name:
            return None
        return _Def((name,), ctx.fn_kind(), _rust_span_start(node), node, weak=weak)

    return handler


def _rust_impl(ctx: _Ctx, node: Node) -> _Def | None:
    name = _rust_type_name(ctx, node.child_by_field_name("type"))
    if not name:
        return None
    return _Def((name,), "impl", _rust_span_start(node), node)


_RUST = _Spec(
    handlers={
        "function_item": _rust_fn(),
        "function_signature_item": _rust_fn(weak=True),
        "struct_item": _rust_item("struct"),
        "enum_item": _rust_item("enum"),
        "union_item": _rust_item("union"),
        "trait_item": _rust_item("trait"),
        "impl_item": _rust_impl,
        "mod_item": _rust_item("module"),
        "type_item": _rust_item("type", opens=False, local=False),
        "const_item": _rust_item("constant", opens=False, local=False),
        "static_item": _rust_item("constant", opens=False, local=False),
        "macro_definition": _rust_item("macro", opens=False),
    },
    setters={},
)


# --------------------------------------------------------------------------- Go

_GO_TYPE_WRAPPERS = frozenset({"pointer_type", "generic_type", "parenthesized_type"})


def _go_receiver(ctx: _Ctx, node: Node) -> str:
    receiver = node.child_by_field_name("receiver")
    param = _child_of_type(receiver, ("parameter_declaration",)) if receiver else None
    typ = param.child_by_field_name("type") if param is not None else None
    while typ is not None and typ.type in _GO_TYPE_WRAPPERS:
        inner = typ.child_by_field_name("type")
        kids = typ.named_children
        typ = inner if inner is not None else (kids[0] if kids else None)
    return _strip_generics(ctx.text(typ)) if typ is not None else ""


def _go_method(ctx: _Ctx, node: Node) -> _Def | None:
    name = _name(ctx, node)
    recv = _go_receiver(ctx, node)
    if not name:
        return None
    return _Def((recv, name) if recv else (name,), "method", node)


def _go_single_parent(node: Node, parent_type: str) -> Node:
    """`type X struct{}` spans its keyword; a member of a `type ( ... )` group only itself."""
    parent = node.parent
    if parent is not None and parent.type == parent_type and parent.named_child_count == 1:
        return parent
    return node


def _go_type_spec(ctx: _Ctx, node: Node) -> _Def | None:
    name = _name(ctx, node)
    if not name:
        return None
    typ = node.child_by_field_name("type")
    kind = {"struct_type": "struct", "interface_type": "interface"}.get(
        typ.type if typ is not None else "", "type"
    )
    return _Def((name,), kind, _go_single_parent(node, "type_declaration"))


def _go_value_spec(kind: str, parent_type: str) -> _Handler:
    def handler(ctx: _Ctx, node: Node) -> list[_Def] | None:
        if ctx.in_func:
            return None
        names = [c for c in node.children_by_field_name("name") if c.is_named]
        if not names:
            return None
        span = _go_single_parent(node, parent_type) if len(names) == 1 else node
        return [_Def((ctx.text(n),), kind, span, opens=False) for n in names]

    return handler


_GO = _Spec(
    handlers={
        "function_declaration": _named("function", sep=""),
        "method_declaration": _go_method,
        "type_spec": _go_type_spec,
        "type_alias": _go_type_spec,
        "method_elem": _named("method", opens=False, sep=""),
        "method_spec": _named("method", opens=False, sep=""),
        "const_spec": _go_value_spec("constant", "const_declaration"),
        "var_spec": _go_value_spec("variable", "var_declaration"),
    },
    setters={},
)


# --------------------------------------------------------------------------- Java


def _java_field(ctx: _Ctx, node: Node) -> _Def | None:
    parent = node.parent
    if parent is None or parent.type not in ("field_declaration", "constant_declaration"):
        return None
    name = _name(ctx, node)
    if not name:
        return None
    single = sum(1 for c in parent.children_by_field_name("declarator")) == 1
    return _Def((name,), "field", parent if single else node, opens=False)


_JAVA = _Spec(
    handlers={
        "class_declaration": _named("class", sep=""),
        "interface_declaration": _named("interface", sep=""),
        "enum_declaration": _named("enum", sep=""),
        "record_declaration": _named("record", sep=""),
        "annotation_type_declaration": _named("annotation", sep=""),
        "method_declaration": _named("method", sep=""),
        "constructor_declaration": _named("method", sep=""),
        "compact_constructor_declaration": _named("method", sep=""),
        "annotation_type_element_declaration": _named("method", sep=""),
        "variable_declarator": _java_field,
    },
    setters={},
)


# --------------------------------------------------------------------------- C / C++

_DECLARATOR_WRAPPERS = frozenset(
    {
        "pointer_declarator",
        "reference_declarator",
        "parenthesized_declarator",
        "attributed_declarator",
        "array_declarator",
        "init_declarator",
    }
)


def _c_declarator_parts(ctx: _Ctx, decl: Node | None, *, want_function: bool) -> tuple[str, ...]:
    """The name a (possibly qualified) declarator declares; () if it is not of the wanted shape."""
    seen_function = False
    while decl is not None:
        if decl.type == "function_declarator":
            seen_function = True
            decl = decl.child_by_field_name("declarator")
        elif decl.type in _DECLARATOR_WRAPPERS:
            inner = decl.child_by_field_name("declarator")
            kids = decl.named_children
            decl = inner if inner is not None else (kids[-1] if kids else None)
        else:
            break
    if decl is None or (want_function and not seen_function):
        return ()
    return _cpp_qualified_parts(ctx, decl)


_CPP_LEAF_NAMES = frozenset(
    {
        "identifier",
        "field_identifier",
        "type_identifier",
        "namespace_identifier",
        "destructor_name",
        "operator_name",
        "primitive_type",
    }
)


def _cpp_qualified_parts(ctx: _Ctx, node: Node | None) -> tuple[str, ...]:
    """`ns::Class<T>::operator[]` -> ("ns", "Class", "operator[]"), read from the tree.

    Walking the fields rather than splitting text keeps operator names such as `operator<=>`
    intact and drops template arguments only where they are arguments.
    """
    parts: list[str] = []
    while node is not None and node.type == "qualified_identifier":
        scope = node.child_by_field_name("scope")
        if scope is not None:
            if scope.type in ("template_type", "template_function"):
                scope = scope.child_by_field_name("name")
            parts.extend(_split(ctx.text(scope), "::"))
        node = node.child_by_field_name("name")
    if node is not None and node.type in ("template_type", "template_function"):
        node = node.child_by_field_name("name")
    if node is None or node.type not in _CPP_LEAF_NAMES:
        return ()
    parts.append("".join(ctx.text(node).split()))
    return tuple(parts)


def _c_fn_kind(ctx: _Ctx, parts: tuple[str, ...]) -> str:
    if len(parts) > 1:
        owner = ctx.scope + parts[:-1]
        return "method" if owner in ctx.known_types or parts[:-1] in ctx.known_types else "function"
    return ctx.fn_kind()


def _c_function_definition(ctx: _Ctx, node: Node) -> _Def | None:
    parts = _c_declarator_parts(ctx, node.child_by_field_name("declarator"), want_function=True)
    if not parts:
        return None
    return _Def(parts, _c_fn_kind(ctx, parts), _wrap(node, ("template_declaration",)))


def _c_prototype(ctx: _Ctx, node: Node) -> list[_Def] | None:
    if ctx.in_func:
        return None
    found = []
    for decl in node.children_by_field_name("declarator"):
        parts = _c_declarator_parts(ctx, decl, want_function=True)
        if parts:
            found.append(
                _Def(
                    parts,
                    _c_fn_kind(ctx, parts),
                    _wrap(node, ("template_declaration",)),
                    weak=True,
                    opens=False,
                )
            )
    return found or None


def _c_record(kind: str) -> _Handler:
    def handler(ctx: _Ctx, node: Node) -> _Def | None:
        if node.child_by_field_name("body") is None:
            return None  # `struct token t;` uses a type, it does not define one
        name_node = node.child_by_field_name("name")
        span: Node = node
        if name_node is not None:
            parts = _cpp_qualified_parts(ctx, name_node)
        else:
            parent = node.parent
            if parent is None or parent.type != "type_definition":
                return None
            parts = _c_declarator_parts(
                ctx, parent.child_by_field_name("declarator"), want_function=False
            )
            span = parent
        if not parts:
            return None
        ctx.known_types.add(ctx.scope + parts)
        return _Def(parts, kind, _wrap(span, ("template_declaration",)))

    return handler


def _c_typedef(ctx: _Ctx, node: Node) -> list[_Def] | None:
    typ = node.child_by_field_name("type")
    if (
        typ is not None
        and typ.child_by_field_name("body") is not None
        and typ.child_by_field_name("name") is None
    ):
        return None  # the anonymous struct/enum takes the typedef's name itself
    found = []
    for decl in node.children_by_field_name("declarator"):
        parts = _c_declarator_parts(ctx, decl, want_function=False)
        if parts:
            found.append(_Def(parts, "type", node, opens=False))
    return found or None


def _cpp_namespace(ctx: _Ctx, node: Node) -> _Def | None:
    name = _name(ctx, node)
    if not name:
        return None  # anonymous namespace: its members keep the enclosing scope
    return _Def(_split(name, "::"), "namespace", node)


_C_HANDLERS: dict[str, _Handler] = {
    "function_definition": _c_function_definition,
    "declaration": _c_prototype,
    "field_declaration": _c_prototype,
    "struct_specifier": _c_record("struct"),
    "union_specifier": _c_record("union"),
    "enum_specifier": _c_record("enum"),
    "type_definition": _unless_in_func(_c_typedef),
    "preproc_def": _unless_in_func(_named("macro", opens=False, sep="")),
    "preproc_function_def": _unless_in_func(_named("macro", opens=False, sep="")),
}

_C = _Spec(handlers=_C_HANDLERS, setters={})
_CPP = _Spec(
    handlers={
        **_C_HANDLERS,
        "class_specifier": _c_record("class"),
        "namespace_definition": _cpp_namespace,
        "alias_declaration": _unless_in_func(_named("type", opens=False, sep="")),
    },
    setters={},
)


# --------------------------------------------------------------------------- C#


def _cs_field(ctx: _Ctx, node: Node) -> _Def | None:
    var_decl = node.parent
    field = var_decl.parent if var_decl is not None else None
    if var_decl is None or field is None or field.type not in ("field_declaration", "event_field_declaration"):
        return None
    name = _name(ctx, node)
    if not name:
        return None
    single = sum(1 for c in var_decl.named_children if c.type == "variable_declarator") == 1
    return _Def((name,), "field", field if single else node, opens=False)


def _cs_file_namespace(ctx: _Ctx, node: Node) -> tuple[str, ...] | None:
    return _split(_name(ctx, node), ".") or None


_CSHARP = _Spec(
    handlers={
        "namespace_declaration": _named("namespace"),
        "class_declaration": _named("class", sep=""),
        "struct_declaration": _named("struct", sep=""),
        "interface_declaration": _named("interface", sep=""),
        "enum_declaration": _named("enum", sep=""),
        "record_declaration": _named("record", sep=""),
        "record_struct_declaration": _named("record", sep=""),
        "delegate_declaration": _named("type", opens=False, sep=""),
        "method_declaration": _named("method", sep=""),
        "constructor_declaration": _named("method", sep=""),
        "destructor_declaration": lambda ctx, node: _Def(("~" + _name(ctx, node),), "method", node),
        "local_function_statement": _named("function", sep=""),
        "property_declaration": _named("property", sep=""),
        "variable_declarator": _cs_field,
    },
    setters={"file_scoped_namespace_declaration": _cs_file_namespace},
)


# --------------------------------------------------------------------------- Ruby


def _rb_scoped(kind: str) -> _Handler:
    def handler(ctx: _Ctx, node: Node) -> _Def | None:
        parts = _split(_name(ctx, node), "::")
        return _Def(parts, kind, node) if parts else None

    return handler


def _rb_method(ctx: _Ctx, node: Node) -> _Def | None:
    name = _name(ctx, node)
    if not name:
        return None
    kind = "method" if ctx.pkind in _TYPE_KINDS or ctx.pkind == "module" else "function"
    return _Def((name,), kind, node)


def _rb_constant(ctx: _Ctx, node: Node) -> _Def | None:
    left = node.child_by_field_name("left")
    if left is None or left.type != "constant":
        return None
    return _Def((ctx.text(left),), "constant", node, opens=False)


_RUBY = _Spec(
    handlers={
        "module": _rb_scoped("module"),
        "class": _rb_scoped("class"),
        "method": _rb_method,
        "singleton_method": _rb_method,
        "assignment": _unless_in_func(_rb_constant),
    },
    setters={},
)


# --------------------------------------------------------------------------- PHP


def _php_namespace(ctx: _Ctx, node: Node) -> _Def | None:
    if node.child_by_field_name("body") is None:
        return None  # `namespace X;` is applied to the following statements by the walker
    parts = _split(_name(ctx, node), "\\")
    if not parts:
        return None  # `namespace { ... }`: the global namespace
    return _Def(parts, "namespace", node)


def _php_file_namespace(ctx: _Ctx, node: Node) -> tuple[str, ...] | None:
    if node.child_by_field_name("body") is not None:
        return None
    return _split(_name(ctx, node), "\\") or None


_PHP = _Spec(
    handlers={
        "namespace_definition": _php_namespace,
        "class_declaration": _named("class", sep=""),
        "interface_declaration": _named("interface", sep=""),
        "trait_declaration": _named("trait", sep=""),
        "enum_declaration": _named("enum", sep=""),
        "method_declaration": _named("method", sep=""),
        "function_definition": _named_fn(),
    },
    setters={"namespace_definition": _php_file_namespace},
)


# --------------------------------------------------------------------------- Kotlin


def _kt_class(ctx: _Ctx, node: Node) -> _Def | None:
    name_node = _child_of_type(node, ("type_identifier", "simple_identifier"))
    if name_node is None:
        return None
    if _has_token(node, "interface"):
        kind = "interface"
    elif _child_of_type(node, ("enum_class_body",)) is not None or any(
        ctx.text(m) == "enum" for m in _modifiers(node, "class_modifier")
    ):
        kind = "enum"
    else:
        kind = "class"
    return _Def((ctx.text(name_node),), kind, node)


def _modifiers(node: Node, kind: str) -> list[Node]:
    mods = _child_of_type(node, ("modifiers",))
    return [m for m in mods.named_children if m.type == kind] if mods is not None else []


def _kt_object(ctx: _Ctx, node: Node) -> _Def | None:
    name_node = _child_of_type(node, ("type_identifier", "simple_identifier"))
    return _Def((ctx.text(name_node),), "object", node) if name_node is not None else None


def _kt_companion(ctx: _Ctx, node: Node) -> _Def:
    """Companion members are called as `Owner.member`, so that is their name."""
    name_node = _child_of_type(node, ("type_identifier", "simple_identifier"))
    name = ctx.text(name_node) if name_node is not None else "Companion"
    return _Def((name,), "object", node, child_scope=ctx.scope)


def _kt_function(ctx: _Ctx, node: Node) -> _Def | None:
    name_node = _child_of_type(node, ("simple_identifier",))
    if name_node is None:
        return None
    receiver = node.child_by_field_name("receiver")
    if receiver is not None:
        base = _first_of_type(receiver, frozenset({"type_identifier"}))
        if base is not None:
            return _Def((ctx.text(base), ctx.text(name_node)), "function", node)
    return _Def((ctx.text(name_node),), ctx.fn_kind(), node)


def _kt_property(ctx: _Ctx, node: Node) -> _Def | None:
    var = _child_of_type(node, ("variable_declaration",))
    name_node = _child_of_type(var, ("simple_identifier",)) if var is not None else None
    if name_node is None:
        return None
    return _Def((ctx.text(name_node),), "property", node, opens=False)


def _kt_typealias(ctx: _Ctx, node: Node) -> _Def | None:
    name_node = _child_of_type(node, ("type_identifier", "simple_identifier"))
    return _Def((ctx.text(name_node),), "type", node, opens=False) if name_node else None


_KOTLIN = _Spec(
    handlers={
        "class_declaration": _kt_class,
        "object_declaration": _kt_object,
        "companion_object": _kt_companion,
        "function_declaration": _kt_function,
        "property_declaration": _unless_in_func(_kt_property),
        "type_alias": _unless_in_func(_kt_typealias),
    },
    setters={},
)


# --------------------------------------------------------------------------- Swift


def _swift_class(ctx: _Ctx, node: Node) -> _Def | None:
    kind = ctx.text(node.child_by_field_name("declaration_kind")) or "class"
    parts = _split(_name(ctx, node), ".")
    if not parts:
        return None
    return _Def(parts, kind, node)


def _swift_property(ctx: _Ctx, node: Node) -> list[_Def] | None:
    found = []
    patterns = list(node.children_by_field_name("name"))
    for pattern in patterns:
        ident = pattern.child_by_field_name("bound_identifier")
        if ident is None and pattern.type == "simple_identifier":
            ident = pattern
        if ident is not None:
            found.append(
                _Def(
                    (ctx.text(ident),),
                    "property",
                    node if len(patterns) == 1 else pattern,
                    opens=False,
                )
            )
    return found or None


_SWIFT = _Spec(
    handlers={
        "class_declaration": _swift_class,
        "protocol_declaration": _named("protocol", sep=""),
        "function_declaration": _named_fn(),
        "protocol_function_declaration": _named("method", opens=False, sep=""),
        "init_declaration": lambda ctx, node: _Def(("init",), "method", node),
        "deinit_declaration": lambda ctx, node: _Def(("deinit",), "method", node),
        "property_declaration": _unless_in_func(_swift_property),
        "typealias_declaration": _unless_in_func(_named("type", opens=False, sep="")),
    },
    setters={},
)


# --------------------------------------------------------------------------- Scala


def _scala_value(kind: str) -> _Handler:
    def handler(ctx: _Ctx, node: Node) -> list[_Def] | None:
        pattern = node.child_by_field_name("pattern")
        if pattern is None:
            return None
        if pattern.type == "identifier":
            idents = [pattern]
        elif pattern.type == "identifiers":
            idents = [c for c in pattern.named_children if c.type == "identifier"]
        else:
            return None
        span = node if len(idents) == 1 else None
        return [_Def((ctx.text(i),), kind, span or i, opens=False) for i in idents] or None

    return handler


_SCALA = _Spec(
    handlers={
        "class_definition": _named("class", sep=""),
        "object_definition": _named("object", sep=""),
        "trait_definition": _named("trait", sep=""),
        "enum_definition": _named("enum", sep=""),
        "function_definition": _named_fn(),
        "function_declaration": _named_fn(),
        "type_definition": _unless_in_func(_named("type", opens=False, sep="")),
        "val_definition": _unless_in_func(_scala_value("variable")),
        "var_definition": _unless_in_func(_scala_value("variable")),
    },
    setters={},
)


# --------------------------------------------------------------------------- SQL


def _sql_ident(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] + text[-1] in ('""', "``", "[]"):
        return text[1:-1]
    return text


def _sql_object(kind: str, *, weak: bool = False) -> _Handler:
    """`CREATE TABLE billing.invoices`: the object reference names it, schema first."""

    def handler(ctx: _Ctx, node: Node) -> _Def | None:
        ref = _child_of_type(node, ("object_reference",))
        if ref is None:
            return None
        parts = tuple(_sql_ident(ctx.text(c)) for c in ref.named_children if c.type == "identifier")
        if not parts or not all(parts):
            return None
        return _Def(parts, kind, node, weak=weak, opens=kind == "table")

    return handler


def _sql_index(ctx: _Ctx, node: Node) -> _Def | None:
    name = _sql_ident(ctx.text(node.child_by_field_name("column")))
    return _Def((name,), "index", node, opens=False) if name else None


def _sql_column(ctx: _Ctx, node: Node) -> _Def | None:
    if ctx.pkind != "table":  # a column of CREATE TABLE or ALTER TABLE ... ADD COLUMN
        return None
    name = _sql_ident(_name(ctx, node))
    return _Def((name,), "field", node, opens=False) if name else None


_SQL = _Spec(
    handlers={
        "create_table": _sql_object("table"),
        # What a migration does to a table it did not create: `invoices` names the ALTER (and
        # `invoices.paid_at` an added column) unless the file also creates `invoices`.
        "alter_table": _sql_object("table", weak=True),
        "column_definition": _sql_column,
        "create_view": _sql_object("view"),
        "create_materialized_view": _sql_object("view"),
        "create_function": _sql_object("function"),
        "create_type": _sql_object("type"),
        "create_sequence": _sql_object("sequence"),
        "create_trigger": _sql_object("trigger"),
        "create_index": _sql_index,
    },
    setters={},
)


_SPECS: dict[str, _Spec] = {
    "python": _PYTHON,
    "javascript": _JAVASCRIPT,
    "typescript": _TYPESCRIPT,
    "tsx": _TYPESCRIPT,
    "rust": _RUST,
    "go": _GO,
    "java": _JAVA,
    "c": _C,
    "cpp": _CPP,
    "csharp": _CSHARP,
    "ruby": _RUBY,
    "php": _PHP,
    "kotlin": _KOTLIN,
    "swift": _SWIFT,
    "scala": _SCALA,
    "sql": _SQL,
}


# --------------------------------------------------------------------------- public API


def _check_source(path: str, source: bytes) -> str:
    lang = language_for(path)
    if lang is None:
        base = os.path.basename(path)
        ext = os.path.splitext(base)[1] or base
        raise AnchorError(f"no grammar for {ext!r} files; anchor the whole file or lines instead")
    if len(source) > MAX_PARSE_BYTES:
        raise AnchorError(
            f"{path} is too large to parse for symbols ({len(source)} bytes, limit "
            f"{MAX_PARSE_BYTES}); anchor the whole file or lines instead"
        )
    if b"\0" in source[:_BINARY_SNIFF_BYTES]:
        raise AnchorError(f"{path} is a binary file; anchor the whole file instead")
    try:
        source.decode("utf-8")
    except UnicodeDecodeError:
        raise AnchorError(
            f"{path} is not valid UTF-8 text; anchor the whole file instead"
        ) from None
    return lang


def _span(first: Node, last: Node) -> tuple[int, int, int, int]:
    start_line = first.start_point[0] + 1
    end_row, end_col = last.end_point
    # A node that swallows its trailing newline ends at column 0 of the next line.
    end_line = end_row if end_col == 0 and end_row + 1 > start_line else end_row + 1
    return start_line, end_line, first.start_byte, last.end_byte


def _query(lang: str) -> Query:
    """One query matching every node type the language's handlers look at.

    Matching in C and visiting only the matches is several times faster than walking every
    node from Python; the scopes come from nesting, which tree nodes guarantee.
    """
    query = _QUERIES.get(lang)
    if query is None:
        from tree_sitter import Query

        language = _language(lang)
        spec = _SPECS[lang]
        kinds = sorted(
            k for k in {*spec.handlers, *spec.setters} if language.id_for_node_kind(k, True)
        )
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
    """One parse per file version: recording many memories anchored in one file, judging many
    anchors of one changed file, and indexing their code all ask for the same symbols."""
    return _parse_symbols(path, source)


def _parse_symbols(path: str, source: bytes) -> tuple[Symbol, ...]:
    lang = _check_source(path, source)
    spec = _SPECS[lang]
    query = _query(lang)
    tree = _parser(lang).parse(source)
    from tree_sitter import QueryCursor

    nodes = QueryCursor(query).captures(tree.root_node).get("def", [])
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
    open_scopes: list[tuple[int, tuple[str, ...], str | None, bool]] = [
        (len(source) + 1, (), None, False)
    ]
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
                open_scopes.append(
                    (node.end_byte, child_scope, result.kind, result.kind in _FUNC_KINDS)
                )
        elif result:
            for d in result:
                emit(d)

    strong = {s.name for s, weak in found if not weak}
    symbols = [s for s, weak in found if not weak or s.name not in strong]
    symbols.sort(key=lambda s: s.start_byte)  # stable: an outer symbol stays before its first child
    return tuple(symbols)


def _namespace_region_end(
    ctx: _Ctx, node: Node, setters: dict[str, Callable[[_Ctx, Node], tuple[str, ...] | None]]
) -> Node:
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
    """Up to 3 names close to `name` as a whole or by their last part, best first.

    Both ratios count, and only names about as close as the best one are offered, so a typo
    of a method suggests that method and not its class or its nested helpers.
    """
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
    candidates = _suggest(name, [s.name for s in symbols])
    message = f"symbol {name!r} not found in {path}"
    if candidates:
        message += f"; did you mean: {', '.join(candidates)}?"
    raise SymbolNotFoundError(message, candidates=candidates)


# --------------------------------------------------------------------------- token sequences


def token_hash(path: str, source: bytes, start_byte: int, end_byte: int) -> str | None:
    """SHA-256 of the syntax tree over `source[start_byte:end_byte]`, layout left out; None when
    `path` has no grammar (or cannot be parsed: binary, too large, not UTF-8).

    Why a tree and not a plain token list: every leaf counts with its type and text (comments
    too: a changed comment is a change), and so does the nesting of the named nodes, so a
    Python re-indent that moves a statement into or out of a block changes the hash while a
    gofmt re-indent, a prettier reflow or a re-wrapped argument list does not. Whitespace
    between tokens is never hashed; whitespace inside a token (a string) is. The whole file is
    parsed, so a method is read in its class's context; a leaf cut by a line range counts by
    its part inside it.
    """
    import hashlib

    try:
        lang = _check_source(path, source)
    except AnchorError:
        return None
    tree = _parser(lang).parse(source)
    digest = hashlib.sha256()
    update = digest.update
    stack: list[tuple[Node, bool]] = [(tree.root_node, False)]
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
        stack.extend((child, False) for child in reversed(node.children))
    return digest.hexdigest()
