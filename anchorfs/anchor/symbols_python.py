"""Python's definitions as symbols (`anchorfs.anchor.symbols`' walk, `anchorfs.anchor.symbols_walk`).

A module of its own: a hook checking a Python file's symbols loads no other language's handlers."""

from __future__ import annotations

from .symbols_walk import _Ctx, _Def, _name, _named_fn, _Spec, _unless_in_func, _wrap

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from tree_sitter import Node

__all__ = ["SPECS"]

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


SPECS: dict[str, _Spec] = {
    "python": _PYTHON,
}
