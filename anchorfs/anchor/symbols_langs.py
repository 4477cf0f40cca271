"""The other languages' definitions as symbols (on `anchorfs.anchor.symbols_walk`): JavaScript /
TypeScript, Rust, Go, Java, Ruby, PHP, Kotlin, Swift, Scala and SQL, loaded for those files alone."""

from __future__ import annotations

from .symbols_walk import (
    _child_of_type, _Ctx, _Def, _first_of_type, _Handler, _has_token, _name, _named, _named_fn,
    _Spec, _split, _strip_generics, _TYPE_KINDS, _unless_in_func, _wrap,
)

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from tree_sitter import Node

__all__ = ["SPECS"]

# ------------------------------------------------------------------------ JavaScript / TypeScript

_JS_WRAPPERS = ("export_statement", "ambient_declaration")
_JS_FUNC_VALUES = frozenset({"arrow_function", "function_expression", "function", "generator_function"})


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


def _js_named(kind: str, *, weak: bool = False) -> _Handler:
    """A named declaration; a method's span is its own node, anything else's takes its wrappers."""

    def handler(ctx: _Ctx, node: Node) -> _Def | None:
        name = _name(ctx, node)
        if not name:
            return None
        return _Def((name,), kind, node if kind == "method" else _wrap(node, _JS_WRAPPERS), weak=weak)

    return handler


_JS_HANDLERS: dict[str, _Handler] = {
    "class_declaration": _js_named("class"),
    "function_declaration": _js_named("function"),
    "generator_function_declaration": _js_named("function"),
    "method_definition": _js_named("method"),
    "field_definition": _js_field("property"),
    "variable_declarator": _js_declarator,
}

_TS_HANDLERS: dict[str, _Handler] = {
    **_JS_HANDLERS,
    "abstract_class_declaration": _js_named("class"),
    "interface_declaration": _js_named("interface"),
    "enum_declaration": _js_named("enum"),
    "type_alias_declaration": lambda ctx, node: _Def((_name(ctx, node),), "type", _wrap(node, _JS_WRAPPERS),
                                                     opens=False),
    "internal_module": _ts_module("namespace"),
    "module": _ts_module("module"),
    "function_signature": _js_named("function", weak=True),
    "method_signature": _js_named("method", weak=True),
    "abstract_method_signature": _js_named("method", weak=True),
    "public_field_definition": _js_field("name"),
}

_JAVASCRIPT = _Spec(handlers=_JS_HANDLERS)
_TYPESCRIPT = _Spec(handlers=_TS_HANDLERS)


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


def _rust_item(kind: str | None, *, opens: bool = True, local: bool = True, weak: bool = False) -> _Handler:
    """An item by its name; `kind` None: a function or a method, by what encloses it."""

    def handler(ctx: _Ctx, node: Node) -> _Def | None:
        if not local and ctx.in_func:
            return None
        name = _name(ctx, node)
        if not name:
            return None
        return _Def((name,), kind or ctx.fn_kind(), _rust_span_start(node), node, opens=opens, weak=weak)

    return handler


def _rust_impl(ctx: _Ctx, node: Node) -> _Def | None:
    name = _rust_type_name(ctx, node.child_by_field_name("type"))
    if not name:
        return None
    return _Def((name,), "impl", _rust_span_start(node), node)


_RUST = _Spec(
    handlers={
        "function_item": _rust_item(None),
        "function_signature_item": _rust_item(None, weak=True),
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
    kind = {"struct_type": "struct", "interface_type": "interface"}.get(typ.type if typ is not None else "", "type")
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
            found.append(_Def((ctx.text(ident),), "property", node if len(patterns) == 1 else pattern, opens=False))
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
)


SPECS: dict[str, _Spec] = {
    "javascript": _JAVASCRIPT, "typescript": _TYPESCRIPT, "tsx": _TYPESCRIPT, "rust": _RUST, "go": _GO, "java": _JAVA,
    "ruby": _RUBY, "php": _PHP, "kotlin": _KOTLIN, "swift": _SWIFT, "scala": _SCALA, "sql": _SQL,
}
