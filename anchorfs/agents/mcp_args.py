"""The MCP tools' arguments, honoured or refused in one sentence (issue 16).

The schemas an agent sees are closed (`_close`: `additionalProperties: false`), and every
call's arguments are checked against them here (`check_arguments`), before the SDK's own
validation: an unknown name is refused naming the parameter meant (`_ALIASES`, then the closest
name), a missing one naming what it carries (`_GIVEN`), a wrong type or a value out of range
naming what is accepted, never with raw pydantic text and never with a write.
"""

import difflib
import json
import re
from collections.abc import Mapping
from typing import Any

from ..core.errors import InputError

__all__ = ["check_arguments"]

_GIVEN: dict[str, tuple[str, str]] = {
    # parameter -> (what it carries, an example value), for "<what> given as `<name>`: <example>"
    "anchors": ("anchors are", '["src/a.py#Cls.fn", "src/b.py:10-12"]'),
    "k": ("the number of memories is", "5"),
    "content": ("the memory's text is", '"token expiry is 24h"'),
    "query": ("the search text is", '"token expiry"'),
    "task": ("the task is", '"add refresh tokens"'),
    "id": ("the memory is", '"01JC3Q2W"'),
    "kind": ("its sort is", '"constraint"'),
    "tags": ("tags are", '["auth"]'),
    "reason": ("the reason is", '"issue() now signs for 12h"'),
    "budget": ("the block's size in tokens is", "1500"),
    "as_of": ("a past instant is", '"2026-09-01" or "7d"'),
    "include_superseded": ("including past beliefs is", "true"),
    "all": ("listing every memory, fresh ones too, is", "true"),
    "offset": ("the page's start is", "50"),
    "limit": ("the page's size is", "50"),
    "drop_anchors": ("dropping the anchors on purpose is", "true"),
}

_ALIASES: dict[str, tuple[str, ...]] = {
    # parameter -> names agents guess for it; the first parameter a tool has wins
    "anchors": ("paths", "path", "files", "file", "file_path", "filepath", "symbols", "symbol", "evidence",
                "anchor", "lines", "line", "refs", "references", "locations", "location", "sources",
                "source", "spans", "span", "specs", "spec", "anchor_specs", "code"),
    "k": ("limit", "top_k", "topk", "top", "n", "count", "max_results", "num_results", "results", "max",
          "size", "number"),
    "content": ("text", "memory", "claim", "body", "fact", "statement", "new_content", "new_text",
                "message", "value", "summary", "description", "correction"),
    "query": ("q", "text", "question", "search", "prompt", "terms", "keywords", "topic", "task"),
    "task": ("query", "q", "text", "question", "prompt", "topic", "goal", "search"),
    "id": ("memory_id", "memoryid", "mid", "uid", "key", "ref", "memory", "ids", "memory_ids", "old_id"),
    "kind": ("type", "category", "memory_type", "class"),
    "tags": ("tag", "labels", "label", "topics", "keywords"),
    "reason": ("why", "because", "rationale", "comment", "explanation", "note", "message"),
    "budget": ("tokens", "max_tokens", "token_budget", "limit", "size", "max_chars", "k"),
    "as_of": ("at", "when", "time", "since", "date", "timestamp", "before", "asof"),
    "include_superseded": ("superseded", "history", "include_history", "include_past", "past", "all",
                           "include_retracted", "include_all"),
    "all": ("full", "every", "list_all", "include_fresh", "verbose", "everything"),
    "offset": ("skip", "start", "page", "cursor", "from"),
    "limit": ("k", "top_k", "count", "page_size", "n", "max", "size", "per_page"),
}


def _norm(key: str) -> str:
    """`topK`, `top-k`, ` Top_K ` -> `top_k`: how a guessed name is compared."""
    key = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", key.strip())
    return key.lower().replace("-", "_").replace(" ", "_")


def _meant(key: str, params: list[str]) -> str | None:
    """The parameter an unknown argument name was most likely meant as, if any."""
    norm = _norm(key)
    if norm in params:
        return norm
    guesses = [p for p in _ALIASES if p in params and norm in _ALIASES[p]]
    if guesses:  # the likeliest first: earliest in its alias list, then in `_ALIASES` order
        return min(guesses, key=lambda p: _ALIASES[p].index(norm))
    close = difflib.get_close_matches(norm, params, n=1, cutoff=0.75)
    return close[0] if close else None


def _given(param: str) -> str:
    what, example = _GIVEN.get(param, (f"`{param}` is", "..."))
    return f"{what} given as `{param}`: {example}"


def _shown(value: Any) -> str:
    """A value as the agent sent it, in JSON, shortened."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _describe(schema: Mapping[str, Any]) -> str:
    """What a JSON-schema property accepts, in words."""
    options = [o for o in schema.get("anyOf", [schema]) if o.get("type") != "null"]
    words = []
    for o in options:
        kind = o.get("type")
        if "enum" in o:
            words.append("one of " + ", ".join(str(e) for e in o["enum"]))
        elif kind == "string":
            words.append("a string")
        elif kind == "boolean":
            words.append("true or false")
        elif kind == "integer":
            lo, hi = o.get("minimum"), o.get("maximum")
            words.append("a whole number" + (f" from {lo} to {hi}" if lo is not None and hi is not None
                                              else f" of at least {lo}" if lo is not None else ""))
        elif kind == "array":
            words.append("a list of strings")
        else:
            words.append(str(kind))
    return " or ".join(words)


def _fits(schema: Mapping[str, Any], value: Any) -> tuple[bool, Any]:
    """Whether `value` is what one (non-null) schema option says, strictly (no coercion)."""
    kind = schema.get("type")
    if kind == "string":
        ok = isinstance(value, str)
    elif kind == "boolean":
        ok = isinstance(value, bool)
    elif kind == "integer":
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # JSON Schema: 5.0 is the integer 5
        ok = isinstance(value, int) and not isinstance(value, bool)
        if ok and "minimum" in schema:
            ok = value >= schema["minimum"]
        if ok and "maximum" in schema:
            ok = value <= schema["maximum"]
    elif kind == "array":
        if isinstance(value, str):
            # Some hosts send a list as JSON text (the SDK parses it too): the same list.
            try:
                parsed = json.loads(value)
            except (ValueError, RecursionError):
                return False, value
            if not isinstance(parsed, list):
                return False, value
            value = parsed
        item = schema.get("items", {})
        ok = isinstance(value, list) and all(_fits(item, v)[0] for v in value)
    else:
        ok = True
    if ok and "enum" in schema:
        ok = value in schema["enum"]
    return ok, value


def check_arguments(tool: str, schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments as the tool will take them, or InputError naming the right way.

    Strict against the tool's published input schema: an unknown name is refused naming the
    parameter meant, a missing one naming what it carries, a wrong type or a value out of
    range naming what is accepted. Null stands for "left out" where the schema allows null.
    """
    props: Mapping[str, Any] = schema.get("properties", {})
    params = list(props)
    for key in arguments:
        if key in props:
            continue
        meant = _meant(str(key), params)
        name = repr(str(key)) if len(str(key)) <= 40 else repr(str(key)[:37] + "...")
        if meant is not None:
            raise InputError(f"unknown argument {name}; {_given(meant)}")
        takes = ", ".join(f"`{p}`" for p in params) or "no arguments"
        raise InputError(f"unknown argument {name}; `{tool}` takes {takes}")
    for name in schema.get("required", ()):
        if name not in arguments:
            raise InputError(f"`{tool}` needs `{name}`; {_given(name)}")
    out: dict[str, Any] = {}
    for key, value in arguments.items():
        prop = props[key]
        options = prop.get("anyOf", [prop])
        if value is None and any(o.get("type") == "null" for o in options):
            out[key] = None
            continue
        for option in options:
            ok, taken = _fits(option, value)
            if ok and option.get("type") != "null":
                out[key] = taken
                break
        else:
            example = _GIVEN.get(key, ("", ""))[1]
            such = f" such as {example}" if prop.get("anyOf", [prop])[0].get("type") == "array" and example else ""
            raise InputError(f"`{key}` must be {_describe(prop)}{such}; got {_shown(value)}")
    return out


def _close(schema: dict[str, Any]) -> dict[str, Any]:
    """The same schema, closed: no argument it does not name (published to the agent)."""
    return {**schema, "additionalProperties": False}
