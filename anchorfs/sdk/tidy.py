"""Keeping the store clean: near-duplicates and contradictions found, never silently retired.

Two active memories are compared only when they rest on the same ground: an anchor on the same
file, or that file named in the other's text. The comparison is deterministic (no model):
- `conflicts`: the same subject with another value: one setting given two (`SameSite=Strict` /
  `SameSite=Lax`), quantities of one dimension that differ
  (`24h` / `7 days`; a label's number, `Fact 12:`, is none), a negation on one side (`uses JWTs` /
  `no longer uses JWTs`) or an opposite (`enabled` / `disables`), or the same sentence with one
  name swapped for another (`uses bcrypt` / `uses argon2`; not across two symbols of one file);
- `similar`: the same claim in other words (most terms shared after identifier splitting,
  stemming and the synonym table, nothing added, the same quantities and polarity).
A write names what it found (`Memory.candidates`); `tidy` lists them over the store, and
`tidy --apply` merges near-duplicates only. A conflict waits for a person (`tidy --keep ID`).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from functools import lru_cache
from itertools import accumulate
from typing import TYPE_CHECKING, Any, NamedTuple

from ..core.errors import InputError, RevisionError
from ..core.model import Candidate, Memory, Status, cut, utcnow, validate_memory
from ..core.textutil import expand_for_search, search_terms, term_key
from ..store.lexicon import synonyms

if TYPE_CHECKING:
    from .workspace import Workspace

__all__ = ["Claim", "compare", "Ground", "Cluster", "TidyReport", "tidy", "keep"]

# -- a memory's text as the comparison reads it ----------------------------------------------

_UNITS: dict[str, tuple[str, float]] = {}
for _names, _dim, _scale in (
        ("ms millisecond milliseconds msec", "time", 0.001), ("s sec secs second seconds", "time", 1),
        ("m min mins minute minutes", "time", 60), ("h hr hrs hour hours", "time", 3600),
        ("d day days", "time", 86400), ("w wk week weeks", "time", 604800), ("month months", "time", 2592000),
        ("year years yr yrs", "time", 31536000), ("b byte bytes", "size", 1), ("kb kib", "size", 1024),
        ("mb mib", "size", 1024 ** 2), ("gb gib", "size", 1024 ** 3), ("% percent", "percent", 1),
        ("x times", "count", 1), ("attempt attempts retry retries try tries", "count", 1)):
    for _n in _names.split():
        _UNITS[_n] = (_dim, _scale)
_WORD_NUMBERS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve".split())}
_TIMES = {"once": 1, "twice": 2, "thrice": 3}
_QUANTITY_RE = re.compile(r"(?<![\w.:/#-])(\d+(?:[.,_]\d+)*|(?:" + "|".join([*_WORD_NUMBERS, *_TIMES]) + r"|a|an)\b)"
                          r"\s*-?\s*(%|[a-z]+)?")
_NEGATION_RE = re.compile(r"\b(?:not|no|never|none|without|cannot|nothing|neither|nor|stopped|instead|rather)\b|n't\b")
_NOT_TERMS = frozenset("not no never none without cannot nothing neither nor stopped longer instead rather".split())
_ANTONYMS = {"disabled": "enabled", "disable": "enable", "false": "true", "off": "on", "deny": "allow",
             "forbid": "allow", "forbidden": "allowed", "disallow": "allow", "optional": "required",
             "exclude": "include", "excluded": "included", "sync": "async", "blocking": "nonblocking",
             "insecure": "secure", "unsafe": "safe", "invalid": "valid", "below": "above", "less": "more",
             "lower": "higher", "min": "max", "minimum": "maximum"}
"""A word on the left states its right-hand word negated (`disabled` = not `enabled`)."""
_SETTING_RE = re.compile(r"(?<![\w.])([A-Za-z_][\w.]*)\s*=\s*('[^']*'|\"[^\"]*\"|[\w.+-]+)")
"""A setting given a value, as code spells it: `max_retries=2`, `SameSite=Lax`, `annual=False`."""
_CODE_RE = re.compile(r"`[^`]+`|\b\w*(?:[a-z][A-Z]|[A-Za-z]\d|\d[A-Za-z]|_|\.\w)\w*\b|\b[A-Z]{2,}\b|(?<=\w )[A-Z]\w+")
"""Names, not words: backticked, camelCase, snake_case, dotted, with digits, ALLCAPS, or capitalised mid-sentence."""


@lru_cache(maxsize=1)
def _antonyms() -> dict[str, str]:
    """`_ANTONYMS` by stem, as the terms are (`disables` and `disabled` both negate `enable`)."""
    return {term_key(k): term_key(v) for k, v in _ANTONYMS.items()}


def _number(raw: str) -> float:
    """`1,000` and `1_000` as 1000, `2.5` as 2.5; a version (`3.2.2`) as one number, each part after
    the first in four digits (3.00020002), so two versions are equal only when they are."""
    head, *rest = raw.replace(",", "").replace("_", "").split(".")
    if len(rest) < 2:
        return float(".".join([head, *rest]))
    return float(head + "." + "".join(part.zfill(4)[-4:] for part in rest))


@lru_cache(maxsize=1 << 16)
def _canon(term: str) -> str:
    """A term as the comparison counts it: its synonym group's first word (`expiry` = `ttl`)."""
    group = synonyms(term)
    return min(group) if group else term


class Claim(NamedTuple):
    """What a text says, reduced: content terms, quantities by dimension, polarity, code names."""

    terms: frozenset[str]
    quantities: dict[str, frozenset[float]]
    negated: bool
    code: frozenset[str]
    flipped: frozenset[str]
    """The terms said through their opposite (`disabled` for `enable`)."""
    shown: dict[float, str]
    settings: dict[str, frozenset[str]]
    """Each setting's values (`SameSite=Lax`: `samesite` -> {`lax`})."""

    @classmethod
    @lru_cache(maxsize=1 << 15)
    def of(cls, text: str) -> "Claim":
        low = text.lower()
        quantities: dict[str, set[float]] = {}
        shown: dict[float, str] = {}
        spent: set[str] = set()
        for m in _QUANTITY_RE.finditer(low):
            raw, unit = m.group(1), (m.group(2) or "")
            if raw in _TIMES:  # "retries once" / "3 times"
                quantities.setdefault("count", set()).add(float(_TIMES[raw]))
                shown.setdefault(float(_TIMES[raw]), raw)
                continue
            if raw in ("a", "an") and unit not in ("day", "week", "hour", "minute", "second", "month", "year"):
                continue
            number = 1.0 if raw in ("a", "an") else (float(_WORD_NUMBERS.get(raw, 0)) if raw.isalpha()
                                                        else _number(raw))
            dim, scale = _UNITS.get(unit, ("number", 1))
            if dim == "number" and (raw.isalpha() or low[m.end(1):m.end(1) + 1] in (":", ")")
                                    or low[max(0, m.start() - 1):m.start()] == "#"):
                continue  # "one of the", and a label ("Fact 12:", "step 3)", "#4") are no quantities
            if dim != "number":
                spent.add(unit)
            value = round(number * scale, 9)
            quantities.setdefault(dim, set()).add(value)
            shown.setdefault(value, raw if dim == "number" else m.group(0).strip())
        negated = _NEGATION_RE.search(low.replace("’", "'")) is not None
        terms: set[str] = set()
        flipped: set[str] = set()
        for t in search_terms(expand_for_search(text)):
            if t[0].isdigit() or t in spent or t in _UNITS or t in _NOT_TERMS or t in _WORD_NUMBERS or t in _TIMES:
                continue
            if t in _antonyms():
                t = _antonyms()[t]
                flipped.add(_canon(t))
            terms.add(_canon(t))
        code = frozenset(_canon(w) for name in _CODE_RE.findall(text)
                         for w in search_terms(expand_for_search(name.strip("`"))) if not w[0].isdigit())
        settings: dict[str, set[str]] = {}
        for key, value in _SETTING_RE.findall(text):
            settings.setdefault(key.lower().rsplit(".", 1)[-1], set()).add(value.strip("'\"").rstrip(".,;:").lower())
        return cls(frozenset(terms), {d: frozenset(v) for d, v in quantities.items()}, negated, code,
                   frozenset(flipped), shown, {k: frozenset(v) for k, v in settings.items()})


def compare(a: str, b: str, *, narrow: bool = True) -> tuple[str, str] | None:
    """(`similar` or `conflicts`, why) for two texts on the same ground; None when neither holds. Not
    `narrow` (one file, other spots): a name swapped or said opposite is no contradiction there."""
    ca, cb = Claim.of(a), Claim.of(b)
    shared = ca.terms & cb.terms
    only_a, only_b = ca.terms - cb.terms, cb.terms - ca.terms
    small = min(len(ca.terms), len(cb.terms)) or 1
    overlap = len(shared) / small
    jaccard = len(shared) / (len(ca.terms | cb.terms) or 1)
    for key in sorted(ca.settings.keys() & cb.settings.keys()) if narrow else ():  # one setting, two values
        if not ca.settings[key] & cb.settings[key]:
            return "conflicts", f"{key}={'/'.join(sorted(ca.settings[key]))} vs {key}={'/'.join(sorted(cb.settings[key]))}"
    if overlap >= 0.5:  # a value changed, not one added (a refinement keeps the old value)
        for dim in ("time", "size", "percent", "count", "number"):
            qa, qb = ca.quantities.get(dim), cb.quantities.get(dim)
            if (qa and qb and not qa <= qb and not qb <= qa and (dim != "number" or overlap >= 0.6)
                    and not (only_a & ca.code and only_b & cb.code)):  # two names, two values: two facts
                return "conflicts", f"{_show(ca, qa)} vs {_show(cb, qb)}"
    turned = (ca.flipped ^ cb.flipped) & shared if narrow else frozenset()  # `AlwaysTrue` / `AlwaysFalse`: two names
    if overlap >= 0.7 and ca.negated == cb.negated and turned and min(len(only_a), len(only_b)) <= 2:
        return "conflicts", f"{_words(frozenset(turned))} said both ways"
    if overlap >= 0.7 and ca.negated != cb.negated and not turned and max(len(only_a), len(only_b)) <= 3:
        said, denied = (b, a) if ca.negated else (a, b)
        return "conflicts", f"one says it, one denies it ({cut(denied, 40)!r} / {cut(said, 40)!r})"
    if (narrow and overlap >= 0.6 and 1 <= len(only_a) <= 2 and 1 <= len(only_b) <= 2
            and (only_a | only_b) & (ca.code | cb.code) and ca.quantities == cb.quantities):
        return "conflicts", f"{_words(only_a)} vs {_words(only_b)}"
    if (jaccard >= 0.6 and ca.negated == cb.negated and not turned and ca.quantities == cb.quantities
            and max(len(only_a), len(only_b)) <= 2 and not (only_a & ca.code and only_b & cb.code)
            and not (min(len(only_a), len(only_b)) == 0 and max(len(only_a), len(only_b)) >= 2)  # a refinement
            and not (len(only_a) == len(only_b) == 1)):  # one word for another: a value swapped as often as a synonym
        return "similar", f"{round(jaccard * 100)}% of their terms shared"
    return None


def _show(claim: Claim, values: frozenset[float]) -> str:
    return "/".join(claim.shown.get(v, f"{v:g}") for v in sorted(values))


def _words(terms: frozenset[str]) -> str:
    """The terms a person recognises: `argon2`, not also its part `argon`."""
    return " ".join(sorted(t for t in terms if not any(t != o and t in o for o in terms)))


SHOWN = 10
"""At most this many candidates per write (conflicts first)."""

# -- ground: where two memories meet --------------------------------------------------------

_PATHISH_RE = re.compile(r"[\w][\w./-]*/[\w./-]*\w|[\w-]{2,}\.[A-Za-z]{1,5}\b")
"""A path as a text names it: with a folder (`src/auth/token.py`) or a file's extension (`app.toml`;
not `e.g`)."""


@lru_cache(maxsize=1 << 15)
def _named(text: str) -> frozenset[str]:
    """The paths a text names."""
    return frozenset(_PATHISH_RE.findall(text))


def _judge(a: Memory, b: Memory) -> tuple[str, str] | None:
    """`compare` on the ground `a` and `b` share: (kind, "ground; why"), or None."""
    where = _ground(a, b)  # one file, other spots: each may name its own symbol (`narrow=False`)
    found = compare(a.content, b.content, narrow=not where.startswith("same file")) if where else None
    return None if found is None else (found[0], f"{where}; {found[1]}")


def _ground(a: Memory, b: Memory) -> str | None:
    """The most specific ground `a` and `b` share, as a person reads it; None when none."""
    named_a, named_b = _named(a.content), _named(b.content)
    best: tuple[int, str] | None = None
    for x in a.anchors:
        for y in b.anchors:
            if x.path != y.path:
                continue
            if x.symbol and y.symbol and (x.symbol == y.symbol or x.symbol.startswith(y.symbol + ".")
                                          or y.symbol.startswith(x.symbol + ".")):
                spot = (3, f"{x.path}#{min(x.symbol, y.symbol, key=len)}")
            elif x.lines and y.lines and x.lines[0] <= y.lines[1] and y.lines[0] <= x.lines[1]:
                spot = (3, f"{x.path}:{max(x.lines[0], y.lines[0])}-{min(x.lines[1], y.lines[1])}")
            else:
                spot = (2, x.path)
            best = max(best or spot, spot)
    if best is not None:
        return f"same anchor {best[1]}" if best[0] == 3 else f"same file {best[1]}"
    for path in sorted(({a_.path for a_ in a.anchors} & named_b) | ({b_.path for b_ in b.anchors} & named_a)
                       | (named_a & named_b)):
        return f"both name {path}"
    return None


def _settle(kind: str, new: str, old: str) -> str:
    if kind == "conflicts":
        return f"anchorfs tidy --keep {new} (it supersedes {old}), or anchorfs retract {new}"
    return f"anchorfs retract {new} (it repeats {old}), or anchorfs tidy --apply"


class Ground:
    """The active memories by the files they rest on or name: who stands on a memory's ground is a
    look up by path, not a comparison with the whole store."""

    def __init__(self, memories: Iterable[Memory], around: Sequence[Memory] | None = None) -> None:
        if around is None:
            self.active = [m for m in memories if m.status == Status.ACTIVE]
        else:  # only what stands on or names the ground of these (a write's few): one pass, texts searched in C
            paths = {p for m in around for p in ({a.path for a in m.anchors} | _named(m.content))}
            pool = list(memories)
            keep = {i for i, m in enumerate(pool) for a in m.anchors if a.path in paths}
            joined = "\0".join(m.content for m in pool)
            starts = list(accumulate(len(m.content) + 1 for m in pool))
            for path in paths:
                at = joined.find(path)
                while at >= 0:
                    i = bisect_right(starts, at)
                    keep.add(i)
                    at = joined.find(path, starts[i])
            near = [pool[i] for i in sorted(keep)]
            ids = {m.id for m in near}
            self.active = [m for m in near if m.status == Status.ACTIVE] + [m for m in around if m.id not in ids]
        self.by_path: dict[str, list[Memory]] = {}
        for m in self.active:
            for a in m.anchors:
                self.by_path.setdefault(a.path, []).append(m)
        self.naming: dict[str, list[Memory]] | None = None
        """Path -> the memories whose text names it (`index_names`, at the first `near`)."""

    def index_names(self) -> None:
        self.naming = {}
        for m in self.active:
            for path in _named(m.content):
                self.naming.setdefault(path, []).append(m)

    def near(self, memory: Memory) -> list[Memory]:
        """Anchored on a file it rests on or names, or naming one."""
        paths = {a.path for a in memory.anchors} | _named(memory.content)
        out = {m.id: m for p in paths for m in self.by_path.get(p, ())}
        if self.naming is None:
            self.index_names()
        assert self.naming is not None
        out.update((m.id, m) for p in paths for m in self.naming.get(p, ()))
        out.pop(memory.id, None)
        return list(out.values())

    def candidates(self, memories: Sequence[Memory], short: Any = None) -> dict[str, tuple[Candidate, ...]]:
        """What each of `memories` may repeat or contradict on its ground, conflicts first;
        `short(ids)` gives the ids as a person types them back (asked once for all)."""
        found: dict[str, list[tuple[str, Memory, str]]] = {}
        for memory in memories:
            mine = found[memory.id] = []
            for other in self.near(memory):
                if (judged := _judge(other, memory)) is not None:
                    mine.append((judged[0], other, judged[1]))
            mine.sort(key=lambda f: (f[0] != "conflicts", f[1].id))
            del mine[SHOWN:]  # templated memories (`fact 1`, `fact 2`...) may all differ in a number
        ids = {i for mid, fs in found.items() if fs for i in (mid, *(o.id for _, o, _ in fs))}
        names = short(ids) if short and ids else {}
        return {mid: tuple(Candidate(kind, o.id, why, _settle(kind, names.get(mid, mid), names.get(o.id, o.id)))
                           for kind, o, why in fs) for mid, fs in found.items()}


# -- across the store: `tidy` ---------------------------------------------------------------

class Cluster(NamedTuple):
    """Near-duplicates (`similar`, merged by `--apply`) or one candidate conflict (a person's choice)."""

    kind: str
    ids: list[str]
    ground: str
    why: str
    action: str

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "ids": self.ids, "ground": self.ground, "why": self.why, "action": self.action}


class TidyReport:
    """`tidy`'s answer; `merged`, with `apply` or `keep`: the ids retired into a survivor."""

    def __init__(self, checked: int = 0, merged: list[str] | None = None) -> None:
        self.checked = checked
        self.similar: list[Cluster] = []
        self.conflicts: list[Cluster] = []
        self.merged = merged or []

    def to_dict(self) -> dict[str, Any]:
        return {"checked": self.checked, "similar": [c.to_dict() for c in self.similar],
                "conflicts": [c.to_dict() for c in self.conflicts], "merged": self.merged}


def _pairs(ground: Ground) -> list[tuple[str, Memory, Memory, str]]:
    """Every (kind, earlier, later, why) over memories sharing a ground, each pair once."""
    seen: set[tuple[str, str]] = set()
    out = []
    for m in ground.active:
        for o in ground.near(m):
            a, b = sorted((m, o), key=lambda x: (x.recorded_at, x.id))
            if (a.id, b.id) in seen:
                continue
            seen.add((a.id, b.id))
            if (judged := _judge(a, b)) is not None:
                out.append((judged[0], a, b, judged[1]))
    return out


def tidy(ws: "Workspace", *, apply: bool = False) -> TidyReport:
    """Near-duplicate clusters and candidate conflicts over every active memory; `apply` merges
    each near-duplicate cluster into its newest memory (the others superseded by it, tags united)."""
    ground = Ground(sorted(ws._memories().values(), key=lambda m: (m.recorded_at, m.id)))
    active = ground.active
    report = TidyReport(checked=len(active))
    pairs = _pairs(ground)
    parent: dict[str, str] = {}

    def root(i: str) -> str:
        parent.setdefault(i, i)
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    why: dict[str, str] = {}
    for kind, a, b, reason in pairs:
        if kind == "similar":
            parent[root(a.id)] = root(b.id)
            why.setdefault(b.id, reason)
    groups: dict[str, list[str]] = {}
    order = {m.id: i for i, m in enumerate(active)}
    for i in list(parent):
        groups.setdefault(root(i), []).append(i)
    short = ws.short_ids({*parent, *(i for kind, a, b, _ in pairs if kind == "conflicts" for i in (a.id, b.id))})
    for ids in groups.values():
        ids = sorted(set(ids), key=order.__getitem__)
        survivor = ids[-1]
        reason = next((why[i] for i in ids if i in why), "")
        report.similar.append(Cluster("similar", ids, reason.split(";")[0], reason.split("; ", 1)[-1],
                                      f"merge into {short.get(survivor, survivor)} (tidy --apply)"))
    for kind, a, b, reason in pairs:
        if kind == "conflicts":
            report.conflicts.append(Cluster("conflicts", [a.id, b.id], reason.split(";")[0],
                                            reason.split("; ", 1)[-1],
                                            f"choose: tidy --keep {short[b.id]} or tidy --keep {short[a.id]}"))
    if apply:
        for cluster in report.similar:
            report.merged.extend(_merge(ws, cluster.ids[-1], cluster.ids[:-1], "tidy: near-duplicates merged"))
    return report


def keep(ws: "Workspace", memory_id: str) -> list[str]:
    """A person's choice on a conflict: `memory_id` stands, every active memory it conflicts with is
    superseded by it. Returns the ids retired."""
    kept = ws.get(memory_id)
    if kept.status != Status.ACTIVE:
        raise RevisionError(f"memory {kept.id} is {kept.status}; only an active memory can be kept")
    ground = Ground(ws._memories().values(), around=[kept])
    others = [c.id for c in ground.candidates([kept])[kept.id] if c.kind == "conflicts"]
    if not others:
        raise InputError(f"memory {kept.id} conflicts with no active memory; nothing to keep it over")
    return _merge(ws, kept.id, others, f"tidy: kept {kept.id} over a conflicting memory", unite_tags=False)


def _merge(ws: "Workspace", survivor_id: str, ids: Sequence[str], reason: str, *, unite_tags: bool = True) -> list[str]:
    """One `tidy` entry: each of `ids` superseded by the survivor (which takes their tags when asked)."""
    from . import writes

    state = ws._memories()
    survivor = state[survivor_id]
    olds = [state[i] for i in ids if i in state and state[i].status == Status.ACTIVE]
    if not olds:
        return []
    now = utcnow()
    tags = tuple(dict.fromkeys([*survivor.tags, *(t for m in olds for t in m.tags)])) if unite_tags else survivor.tags
    written = [validate_memory(m.replace(status=Status.SUPERSEDED.value, valid_until=now, superseded_by=survivor.id))
               for m in olds]
    if tags != survivor.tags:
        written.insert(0, validate_memory(survivor.replace(tags=tags)))
    writes.commit(ws, "tidy", written, reason=reason, at=now, based_on=[survivor, *olds])
    return [m.id for m in olds]
