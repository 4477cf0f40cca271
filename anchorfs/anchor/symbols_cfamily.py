"""C, C++ and C#'s definitions as symbols (on `anchorfs.anchor.symbols_walk`), loaded for those files alone."""

from __future__ import annotations

from .symbols_walk import _Ctx, _Def, _Handler, _name, _named, _Spec, _split, _unless_in_func, _wrap

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from tree_sitter import Node

__all__ = ["SPECS"]

# --------------------------------------------------------------------------- C / C++

_DECLARATOR_WRAPPERS = frozenset({"pointer_declarator", "reference_declarator", "parenthesized_declarator",
                                  "attributed_declarator", "array_declarator", "init_declarator"})


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


_CPP_LEAF_NAMES = frozenset({"identifier", "field_identifier", "type_identifier", "namespace_identifier",
                             "destructor_name", "operator_name", "primitive_type"})


def _cpp_qualified_parts(ctx: _Ctx, node: Node | None) -> tuple[str, ...]:
    """`ns::Class<T>::operator[]` -> ("ns", "Class", "operator[]"), read from the tree (not split
    from text: `operator<=>` stays whole, template arguments go only where they are arguments)."""
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
            found.append(_Def(parts, _c_fn_kind(ctx, parts), _wrap(node, ("template_declaration",)), weak=True,
                              opens=False))
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
            parts = _c_declarator_parts(ctx, parent.child_by_field_name("declarator"), want_function=False)
            span = parent
        if not parts:
            return None
        ctx.known_types.add(ctx.scope + parts)
        return _Def(parts, kind, _wrap(span, ("template_declaration",)))

    return handler


def _c_typedef(ctx: _Ctx, node: Node) -> list[_Def] | None:
    typ = node.child_by_field_name("type")
    if typ is not None and typ.child_by_field_name("body") is not None and typ.child_by_field_name("name") is None:
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

_C = _Spec(handlers=_C_HANDLERS)
_CPP = _Spec(
    handlers={
        **_C_HANDLERS,
        "class_specifier": _c_record("class"),
        "namespace_definition": _cpp_namespace,
        "alias_declaration": _unless_in_func(_named("type", opens=False, sep="")),
    },
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


SPECS: dict[str, _Spec] = {"c": _C, "cpp": _CPP, "csharp": _CSHARP}
