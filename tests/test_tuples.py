"""`anchorfs.tuples.NamedTuple` builds the class `typing.NamedTuple` builds (issue 20: the
hooks' modules import `typing` for the type checker only)."""

from __future__ import annotations

import pickle
import typing

from anchorfs import tuples
from anchorfs.drift_report import MemoryDrift
from anchorfs.ledger import Head
from anchorfs.model import AnchorCheck, StaleClaim


def _pair(base: type) -> type:
    class Point(base):  # type: ignore[misc, valid-type]
        """A point."""

        x: int
        y: int = 2
        label: str | None = None

        @property
        def norm(self) -> int:
            return abs(self.x) + abs(self.y)

        def moved(self, dx: int) -> Point:
            return self._replace(x=self.x + dx)

    return Point


def test_the_class_is_typings() -> None:
    ours, theirs = _pair(tuples.NamedTuple), _pair(typing.NamedTuple)  # type: ignore[arg-type]
    for cls in (ours, theirs):
        p = cls(1)
        assert (p.x, p.y, p.label, p.norm, tuple(p)) == (1, 2, None, 3, (1, 2, None))
        assert p.moved(2) == cls(3, 2, None) and type(p.moved(2)) is cls
        assert repr(p) == "Point(x=1, y=2, label=None)" and cls.__doc__ == "A point."
        assert cls._fields == ("x", "y", "label") and cls._field_defaults == {"y": 2, "label": None}
        assert cls.__mro__ == (cls, tuple, object) and cls.__match_args__ == ("x", "y", "label")
        assert cls.__module__ == __name__ and cls.__qualname__.endswith("Point")
        assert list(cls.__annotations__) == ["x", "y", "label"]
        assert cls._make([5, 6, "a"]) == (5, 6, "a") and p._asdict() == {"x": 1, "y": 2, "label": None}
        match p:
            case cls(x, y):  # type: ignore[misc]
                assert (x, y) == (1, 2)


def test_the_projects_tuples_are_built_by_it() -> None:
    for cls in (MemoryDrift, Head, AnchorCheck, StaleClaim):
        assert cls.__mro__ == (cls, tuple, object) and cls._fields
        assert not hasattr(cls, "__orig_bases__")  # not built by typing's metaclass
    check = AnchorCheck(None, "fresh", "unchanged")  # type: ignore[arg-type]
    assert (check.lines_now, check.path_now) == (None, None)
    assert pickle.loads(pickle.dumps(check)) == check
