"""`NamedTuple` as `typing.NamedTuple` builds it, without importing `typing`, whose import
(`re`, `contextlib`, its generics) is about 12M instructions of a hook's 200M (issue 20). The
type checker reads `typing.NamedTuple` (`if TYPE_CHECKING:` at each use), so the fields keep
their types.

A class body's annotated names become the fields (those given a value, the defaults), its
other names (methods, properties, the docstring) are set on the `collections.namedtuple`
class, which is the class itself, as `typing` does; `__annotations__` holds the annotations
as written (strings under `from __future__ import annotations`, where `typing` keeps them as
`ForwardRef`s).
"""

from __future__ import annotations

import collections

TYPE_CHECKING = False  # not `typing`'s: the point of this module
if TYPE_CHECKING:
    from typing import Any

__all__ = ["NamedTuple"]

_SPECIAL = frozenset({"__module__", "__name__", "__annotations__", "__qualname__"})


class _Meta(type):
    def __new__(mcls, name: str, bases: tuple[type, ...], ns: dict[str, object]) -> type:
        if not bases:  # `NamedTuple` itself
            return super().__new__(mcls, name, bases, ns)
        annotations = dict(ns.get("__annotations__", {}))  # type: ignore[call-overload]
        defaults = [ns[field] for field in annotations if field in ns]
        make: Any = collections.namedtuple  # called with names only known at run time
        cls: type = make(name, list(annotations), defaults=defaults, module=str(ns["__module__"]))
        cls.__annotations__ = annotations
        for key, value in ns.items():
            if key not in _SPECIAL and key not in annotations:
                setattr(cls, key, value)
        cls.__qualname__ = str(ns.get("__qualname__", name))
        return cls


class NamedTuple(metaclass=_Meta):
    """Subclass with annotated fields: the subclass is a `collections.namedtuple` class."""
