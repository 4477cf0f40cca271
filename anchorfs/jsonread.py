"""JSON read without importing a JSON package: the hooks' small reads (a hook's stdin, the
digest memo, the fold snapshot's plan and records, `drift.json`) by the C scanner the standard
`json` parses with. `import json` compiles `re` patterns and orjson's import pulls `dataclasses`,
`uuid` and `json`: either is a large share of a hook that reads a few KB (issue 20)."""

from __future__ import annotations

TYPE_CHECKING = False  # `typing` imports `re`: a hook's replay must not pay for it
if TYPE_CHECKING:
    from typing import Any

__all__ = ["loads"]


class _Decoder:
    """What the C JSON scanner reads off a decoder: `json.loads`' defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__


_SPACE = " \t\n\r"  # JSON's whitespace


def loads(data: bytes) -> Any:
    """`json.loads` of UTF-8 JSON (the digest memo, a hook's stdin, the fold snapshot's plan and
    records), by the C scanner `json` itself parses with, without importing the `json` package
    (its import compiles `re` patterns: a third of a replayed digest's own cost) or orjson. Raises
    ValueError for anything `json.loads` refuses, for another encoding than UTF-8, and for JSON
    nested past the recursion limit."""
    import _json

    text = data.decode("utf-8").lstrip(_SPACE)
    try:
        value, end = _json.make_scanner(_Decoder)(text, 0)  # type: ignore[arg-type]  # any object with its attributes
    except StopIteration:
        raise ValueError("no JSON value") from None
    except RecursionError:  # nested past the interpreter's limit: damage, as orjson says of it
        raise ValueError("JSON nested too deep") from None
    if text[end:].strip(_SPACE):
        raise ValueError("extra data after the JSON value")
    return value
