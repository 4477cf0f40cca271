"""The walk machinery every language's symbol handlers share (`anchorfs.anchor.symbols`): what a
handler finds at a node (`_Def`), the per-parse state it is handed (`_Ctx`), a language's handlers
(`_Spec`) and the helpers they are built from, and Python's handlers (`SPECS`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tree_sitter import Node

__all__ = ["SPECS"]


_TYPE_KINDS = frozenset({"class", "struct", "interface", "trait", "impl", "enum", "object", "record", "extension",
                         "protocol", "union", "annotation"})
_FUNC_KINDS = frozenset({"function", "method"})
# Values yield their name to a definition spelled the same (a Java builder's field `secret`
# and its method `secret()`): the definition is what an anchor on that name means.
_VALUE_KINDS = frozenset({"variable", "constant", "field", "property"})


class _Def:
    """What a handler found at one node (internal)."""

    __slots__ = ("parts", "kind", "first", "last", "weak", "opens", "child_scope", "absolute")

    def __init__(self, parts: tuple[str, ...], kind: str, first: Node, last: Node | None = None, *,
                 weak: bool = False, opens: bool = True, child_scope: tuple[str, ...] | None = None,
                 absolute: bool = False) -> None:
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


class _Spec:
    """A language's handlers, by the node types they look at."""

    __slots__ = ("handlers", "setters")

    def __init__(self, *, handlers: dict[str, _Handler],
                 setters: dict[str, Callable[[_Ctx, Node], tuple[str, ...] | None]] | None = None) -> None:
        self.handlers = handlers
        # Nodes that apply a namespace to their following siblings (C# file-scoped, PHP `namespace X;`).
        self.setters = setters if setters is not None else {}


def _wrap(node: Node, wrappers: tuple[str, ...]) -> Node:
    """Climb to wrapping nodes whose span belongs to the definition (decorators, export...)."""
    parent = node.parent
    while parent is not None and parent.type in wrappers:
        node, parent = parent, parent.parent
    return node


def _name(ctx: _Ctx, node: Node, field: str = "name") -> str:
    return ctx.text(node.child_by_field_name(field)).strip()


_TEMPLATE_ARGS = r"<[^<>]*>"  # compiled at first use (re's cache): a hook checking Python never imports `re`


def _strip_generics(text: str) -> str:
    import re

    text = "".join(text.split())
    prev = None
    while prev != text:
        prev, text = text, re.sub(_TEMPLATE_ARGS, "", text)
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


def _named_fn(*, field: str = "name", wrappers: tuple[str, ...] = (), weak: bool = False) -> _Handler:
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


# --------------------------------------------------------------------------- Python's handlers


def _py_assignment(ctx: _Ctx, node: Node) -> _Def | None:
    left = node.child_by_field_name("left")
    if left is None or left.type != "identifier":
        return None
    parent = node.parent
    span = parent if parent is not None and parent.type == "expression_statement" else node
    return _Def((ctx.text(left),), "variable", span, opens=False)


_PYTHON = _Spec(
    handlers={
        "class_definition": lambda ctx, node: _Def((_name(ctx, node),), "class",
                                                   _wrap(node, ("decorated_definition",))),
        "function_definition": _named_fn(wrappers=("decorated_definition",)),
        "assignment": _unless_in_func(_py_assignment),
    },
)


SPECS: dict[str, _Spec] = {"python": _PYTHON}
