"""JSON read without importing a JSON package: the hooks' small reads (a hook's stdin, the
digest memo, the fold snapshot's plan and records, `drift.json`) by the C scanner the standard
`json` parses with. `import json` compiles `re` patterns and orjson's import pulls `dataclasses`,
`uuid` and `json`: either is a large share of a hook that reads a few KB (issue 20)."""

from __future__ import annotations

TYPE_CHECKING = False  # `typing` imports `re`: a hook's replay must not pay for it
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = ["loads", "loads_as_orjson"]


class _Decoder:
    """What the C JSON scanner reads off a decoder: `json.loads`' defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float: Callable[[str], float] = float
    parse_int = int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__


def _finite(text: str) -> float:
    value = float(text)
    if value - value:  # inf (nan is no JSON number): past float's range, which orjson refuses
        raise ValueError(f"number out of range: {text}")
    return value


class _Plain(_Decoder):
    """`json.loads` refusing NaN and the infinities, as orjson does."""

    @staticmethod
    def parse_constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")


class _Strict(_Decoder):
    """orjson's refusals of what `json.loads` takes: NaN, the infinities, a float out of range."""

    parse_float = staticmethod(_finite)

    @staticmethod
    def parse_constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")


_SPACE = " \t\n\r"  # JSON's whitespace
_NUMERALS = bytes.maketrans(b"123456789[: \t\n\r", b"000000000,,,,,,")
"""Digits as `0`, what can precede a number as `,`: a number's shape found by `bytes.find`."""


def loads(data: bytes, *, constants: bool = True, finite: bool = False) -> Any:
    """`json.loads` of UTF-8 JSON (the digest memo, a hook's stdin, the fold snapshot's plan and
    records, the hash cache's manifest), by the C scanner `json` itself parses with, without
    importing the `json` package (its import compiles `re` patterns: a third of a replayed
    digest's own cost) or orjson. Raises ValueError for anything `json.loads` refuses, for another
    encoding than UTF-8, and for JSON nested past the recursion limit; `constants=False` refuses
    NaN and the infinities too, and `finite=True` also a number past float's range."""
    return _scan(data, _Strict if finite else _Decoder if constants else _Plain)


def loads_as_orjson(data: bytes) -> Any:
    """`orjson.loads(data)`'s value, or a ValueError where it refuses, without importing orjson
    when the scanner reads the same: here it also refuses NaN, the infinities and a float past
    float's range (json's infinity). orjson reads what could still differ: an escaped surrogate
    (json takes one alone, orjson refuses it), found as `\\ud` in the bytes, and an integer past
    64 bits (a float in orjson), found as a separator then 20 digits (19 after a `-`); a string
    holding such text is read by orjson too, which is only slower. The ledger's lines are read
    so (issue 20)."""
    flat = data.translate(_NUMERALS)  # one copy: the file's own start is looked at apart (a manifest is 400 KB)
    if (b"\\" in data and (b"\\ud" in data or b"\\uD" in data)) or b"," + b"0" * 20 in flat \
            or b",-" + b"0" * 19 in flat or flat.startswith((b"0" * 20, b"-" + b"0" * 19)):
        import orjson

        return orjson.loads(data)  # its JSONDecodeError is a ValueError
    return _scan(data, _Strict)


def _scan(data: bytes, decoder: type[_Decoder]) -> Any:
    import _json

    text = data.decode("utf-8").lstrip(_SPACE)
    try:
        value, end = _json.make_scanner(decoder)(text, 0)  # type: ignore[arg-type]  # any object with its attributes
    except StopIteration:
        raise ValueError("no JSON value") from None
    except RecursionError:  # nested past the interpreter's limit: damage, as orjson says of it
        raise ValueError("JSON nested too deep") from None
    if text[end:].strip(_SPACE):
        raise ValueError("extra data after the JSON value")
    return value
