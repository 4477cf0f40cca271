"""JSON written as orjson writes it, without importing orjson when it can: a hook's writes
(the hash cache's manifest, `drift.json`, the events log, the session-start answer) by the C
encoder the standard `json` writes with. orjson's import pulls `dataclasses`, `inspect`,
`uuid`, `platform` and `json`: about 60M instructions, 1.5x `python3 -c pass`, a quarter of a
hook that makes one memory stale (issue 20).

The C encoder, compact and UTF-8 (`ensure_ascii=False`), gives orjson's bytes for `None`,
`bool`, `str` (the same escapes), `int` and `float` written without an exponent, `list`,
`tuple` and `dict` with `str` keys (every writer here builds only those: a key of another type,
which orjson refuses, is spelt as `json` spells it). Where the two could differ otherwise,
orjson itself writes the whole value, so the bytes and the errors are orjson's:

- a type neither the encoder nor JSON has (orjson writes dataclasses, datetimes, UUIDs);
- NaN or infinity (orjson writes `null`), a lone surrogate (orjson refuses), a cycle;
- a float whose repr has an exponent (`1e-05`, orjson `0.00001`; `1e+16`, orjson `1e16`);
- an integer past 64 bits (orjson refuses it).

The last two are found in the output: a digit before `e+`/`e-`, or a separator (`[`, `,`,
`:`) then 20 digits (19 after a `-`). A string holding such text is written by orjson too,
which is only slower.
"""

from __future__ import annotations

TYPE_CHECKING = False  # `typing` imports `re`: see anchorfs/jsonread.py
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = ["dumps", "json_dumps"]


class _Other(Exception):
    """A value the encoder leaves to orjson."""


def _other(obj: object) -> object:
    raise _Other


_NUMERALS = bytes.maketrans(b"123456789[:", b"000000000,,")
"""Digits as `0`, what precedes a number in compact JSON as `,`."""
_ENCODE: list[Callable[[Any, int], Any]] = []


def _encoder() -> Callable[[Any, int], Any]:
    if not _ENCODE:
        import _json

        # (markers, default, encoder, indent, key_separator, item_separator, sort_keys, skipkeys, allow_nan)
        _ENCODE.append(_json.make_encoder(None, _other, _json.encode_basestring, None, ":", ",",
                                          False, False, False))
    return _ENCODE[0]


def dumps(obj: Any) -> bytes:
    """`orjson.dumps(obj)` (no options): the same bytes, or the same error."""
    try:
        out = "".join(_encoder()(obj, 0)).encode("utf-8")
    except (_Other, ValueError, RecursionError):  # UnicodeEncodeError (a lone surrogate) too
        return _orjson(obj)
    flat = b"," + out.translate(_NUMERALS)  # a number at the start follows a separator too
    if b"0e-" in flat or b"0e+" in flat or b"," + b"0" * 20 in flat or b",-" + b"0" * 19 in flat:
        return _orjson(obj)
    return out


def _refuse(obj: object) -> object:
    raise TypeError(f"Object of type {obj.__class__.__name__} is not JSON serializable")  # json's words


def json_dumps(obj: Any, *, ensure_ascii: bool = True, separators: tuple[str, str] = (", ", ": ")) -> str:
    """`json.dumps(obj, ensure_ascii=..., separators=...)`, the same text and errors, by the C
    encoder `json.dumps` itself calls, without importing the `json` package (its import compiles
    `re` patterns: about 6M instructions of a hook, issue 20)."""
    import _json

    encode = _json.encode_basestring_ascii if ensure_ascii else _json.encode_basestring
    if isinstance(obj, str):
        return str(encode(obj))
    item, key = separators
    # (markers, default, encoder, indent, key_separator, item_separator, sort_keys, skipkeys, allow_nan)
    return "".join(_json.make_encoder({}, _refuse, encode, None, key, item, False, False, True)(obj, 0))


def _orjson(obj: Any) -> bytes:
    import orjson

    return orjson.dumps(obj)
