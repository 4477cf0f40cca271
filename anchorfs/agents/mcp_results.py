"""The MCP tools' arguments, checked against the closed schemas an agent sees (`check_arguments`),
and their results: compact JSON, every text bounded, memories labelled as data.

No `from __future__ import annotations`: the SDK reads the typed dicts at run time.
"""

import difflib
import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

import orjson

from ..core.errors import InputError
from ..core.model import DATA_LABEL, under

if TYPE_CHECKING:
    from ..core.model import Memory
    from ..drift import MemoryDrift


__all__ = ["DATA_LABEL", "HIT_CHARS", "SHOW_CHARS", "WriteResult", "RecallResult", "ContextResult",
           "DriftResult", "ShowResult", "HistoryResult", "BisectOutput", "check_arguments"]


HIT_CHARS = 2000
"""A hit's (or a listed memory's) content is cut past this many characters, saying so."""
SHOW_CHARS = 32768
"""`show` gives a memory's content up to this many characters, saying so past it."""
_SHORT_CHARS = 200  # content in lists that name many memories (check_drift, history)
_PAGE = 50  # check_drift's default page


def _json(data: Any) -> str:
    """Compact JSON, the text form of every structured result."""
    return orjson.dumps(data).decode()


def _cut(text: str, limit: int) -> tuple[str, bool]:
    """`text` up to `limit` characters; past it, cut with a marker that says how much there was."""
    if len(text) <= limit:
        return text, False
    return f"{text[:limit]} [... cut: {limit:,} of {len(text):,} characters; `show` the id for more]", True


def _capped_hit(hit: dict[str, Any], limit: int = HIT_CHARS) -> dict[str, Any]:
    """A hit (or listed memory) dict whose content is at most `limit` characters, saying so."""
    text = hit.get("content")
    if not isinstance(text, str) or len(text) <= limit:
        return hit
    shown, _ = _cut(text, limit)
    return {**hit, "content": shown, "content_cut": True, "content_chars": len(text)}


def _short_strings(obj: Any, limit: int = HIT_CHARS) -> Any:
    """`obj` with every string past `limit` characters cut, saying so (bisect's hunks)."""
    if isinstance(obj, str):
        return obj if len(obj) <= limit else f"{obj[:limit]} [... cut: {limit:,} of {len(obj):,} characters]"
    if isinstance(obj, dict):
        return {k: _short_strings(v, limit) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_short_strings(v, limit) for v in obj]
    return obj


def _read_text(tool: str, data: Mapping[str, Any]) -> str:
    """The text an agent reads for a recall, context or check_drift result."""
    if tool == "context":
        return str(data["markdown"])
    if tool == "recall":
        return _recall_text(data)
    return _json(data)


def _recall_text(data: Mapping[str, Any]) -> str:
    """Recall as the CLI prints a query: per hit, score, relevance, id and envelope, then the content."""
    hits = list(data.get("hits") or ())
    if not hits:
        return "no memories found"
    lines = [DATA_LABEL]
    if all(h.get("weak") for h in hits):
        lines.append("no memory matches well; closest:")
    for h in hits:
        mark = "" if h.get("status") == "active" else f" ({h.get('status')})"
        lines.append(f"{float(h.get('score') or 0):.3f}  (relevance {float(h.get('relevance') or 0):.3f})  "
                     f"{h.get('id')}{mark}  {h.get('envelope')}")
        lines.append(f"       {under(str(h.get('content')), '       ')}")
    return "\n".join(lines)


def _drift_word(md: "MemoryDrift") -> str:
    """A memory's drift, `unanchored` when it rests on nothing (unless its own text was found stale)."""
    return md.drift.value if md.memory.anchors or md.drift.value == "stale" else "unanchored"


def _anchor_checks(md: "MemoryDrift", *, with_meta: bool = False) -> list[dict[str, Any]]:
    """Each anchor as its spec string and verdict; the detail only when it is not fresh."""
    out = []
    for check in md.checks:
        entry: dict[str, Any] = {"anchor": check.anchor.spec, "verdict": check.verdict.value}
        if check.verdict.value != "fresh":
            entry["detail"] = check.detail
        if check.lines_now and tuple(check.lines_now) != check.anchor.lines:
            entry["lines_now"] = list(check.lines_now)
        if with_meta:
            if check.anchor.commit:
                entry["commit"] = check.anchor.commit[:12]
            if check.anchor.dirty:
                entry["uncommitted"] = True
        out.append(entry)
    return out


def _listed(md: "MemoryDrift") -> dict[str, Any]:
    """One memory in a drift list: id, drift, a short text, its anchors' verdicts."""
    text = _cut(" ".join(md.memory.content.split()), _SHORT_CHARS)[0]
    return {"id": md.memory.id, "drift": _drift_word(md), "content": text, "anchors": _anchor_checks(md)}


def _memory_view(md: "MemoryDrift", envelope: str) -> dict[str, Any]:
    """One memory in full (`show`, `anchorfs://memory/{id}`): text up to SHOW_CHARS, drift now."""
    m = md.memory
    d = m.to_dict()
    text, cut = _cut(m.content, SHOW_CHARS)
    memory: dict[str, Any] = {
        "id": m.id, "content": text, "kind": m.kind, "tags": list(m.tags), "status": m.status,
        "drift": _drift_word(md), "envelope": envelope, "anchors": _anchor_checks(md, with_meta=True),
        **{key: d[key] for key in ("author", "recorded_at", "valid_from", "valid_until", "supersedes",
                                   "superseded_by", "reason", "verified_at") if d[key] is not None},
    }
    if cut:
        memory.update(content_cut=True, content_chars=len(m.content))
    return memory


def _reverify_text(flagged: "list[MemoryDrift]", *, read_only: bool, propose: bool) -> str:
    """The `reverify_stale` prompt: the steps, then the memories to walk, labelled as data."""
    if not flagged:
        return ("Every anchored memory of this repository is fresh: the code under each is as it was "
                "when it was recorded. Nothing to re-verify.")
    if read_only:
        steps = ("For each memory below: read its anchored code now (the `detail` says what changed), "
                 "decide whether the claim still holds, and tell the user which ones no longer do; "
                 "`bisect` names the commit that staled one. This server cannot change memories.")
    else:
        steps = ("For each memory below, one at a time:\n"
                 "1. Read the anchored code as it is now; each anchor's detail says what changed.\n"
                 "2. If the claim still holds, call `reanchor` with the id (and `reason`: what you checked).\n"
                 "3. If the claim changed, call `supersede` with the id and the corrected claim "
                 "(and `reason`: what changed); `bisect` names the commit, when that helps.\n"
                 "4. If it was simply wrong and nothing replaces it, call `retract` with a reason.\n"
                 "An `unknown` memory could not be checked (an anchor unreadable): say so, change nothing.")
        if propose:
            steps += "\nYour supersedes land as proposals a person accepts; reanchor and retract take effect at once."
    lines = [f"{len(flagged)} {'memory needs' if len(flagged) == 1 else 'memories need'} re-verifying.", "",
             steps, "", DATA_LABEL]
    for md in flagged[:_PAGE]:
        text = _cut(" ".join(md.memory.content.split()), _SHORT_CHARS)[0]
        lines.append(f"- `{md.memory.id}` ({_drift_word(md)}): {text}")
        for check in md.checks:
            if check.verdict.value != "fresh":
                lines.append(f"  - {check.anchor.spec}: {check.verdict.value} ({check.detail})")
    if len(flagged) > _PAGE:
        lines.append(f"({len(flagged) - _PAGE} more: `check_drift` pages through them all.)")
    return "\n".join(lines)


def _written(m: "Memory", md: "MemoryDrift") -> dict[str, Any]:
    """What an agent needs back from a write: id, status, anchors as specs, drift now."""
    out: dict[str, Any] = {"id": m.id, "status": m.status, "kind": m.kind}
    if m.tags:
        out["tags"] = list(m.tags)
    out["anchors"] = [a.spec for a in m.anchors]
    out["drift"] = _drift_word(md)
    flagged = [c.detail for c in md.checks if c.verdict.value != "fresh"]
    if flagged:
        out["changed"] = flagged
    d = m.to_dict()
    out.update({key: d[key] for key in ("supersedes", "superseded_by", "verified_at") if d[key] is not None})
    return out


class WriteResult(TypedDict):
    memory: dict[str, Any]
    duplicate: NotRequired[bool]
    note: NotRequired[str]
    similar: NotRequired[list[dict[str, str]]]
    """Active memories on the same ground saying the same in other words: {id, why, settle}."""
    conflicts: NotRequired[list[dict[str, str]]]
    """Active memories on the same ground saying another value: supersede or retract one."""


class RecallResult(TypedDict):
    count: int
    hits: list[dict[str, Any]]


class ContextResult(TypedDict):
    markdown: str
    fresh: list[str]
    unknown: list[str]
    stale: list[str]
    omitted: list[str]
    tokens: int
    budget: int


class DriftResult(TypedDict):
    checked: int
    stale: int
    unknown: int
    fresh: int
    memories: list[dict[str, Any]]
    listed: NotRequired[int]
    offset: NotRequired[int]
    next_offset: NotRequired[int | None]
    conflicts: NotRequired[int]


class ShowResult(TypedDict):
    memory: dict[str, Any]


class HistoryResult(TypedDict):
    id: str
    events: list[dict[str, Any]]


class BisectOutput(TypedDict):
    result: dict[str, Any]


# -- The MCP tools' arguments, honoured or refused in one sentence.

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
    """The arguments as the tool will take them, strictly by its schema, or InputError naming the right way."""
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
