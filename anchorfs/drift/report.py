"""A drift pass's results: one memory's drift (`MemoryDrift`) and every checked memory's
(`DriftReport`), the fresh ones built only when read; and the envelope (`envelope`), the one
line an agent reads before trusting a memory.

No `from __future__ import annotations` here: `typing.NamedTuple` would compile the string
annotations in every process that checks drift, so annotations are the objects, a forward one
quoted, as are those naming `Any` (imported for the type checker only).
"""

from collections.abc import Iterator, Sequence
from datetime import datetime
from itertools import chain
from operator import attrgetter
from typing import TYPE_CHECKING, NamedTuple

from ..core.model import AnchorCheck, Drift, Memory, Verdict, dated_ahead, one_line, utcnow

if TYPE_CHECKING:
    from typing import Any


__all__ = ["MemoryDrift", "DriftReport", "envelope", "weak_envelope", "WEAK_MARK", "expired", "age_days"]


class MemoryDrift(NamedTuple):
    """One memory's drift and its anchors' checks (a tuple: one is built per memory per read)."""

    memory: Memory
    drift: Drift
    checks: tuple[AnchorCheck, ...]

    def to_dict(self) -> "dict[str, Any]":
        out = {"id": self.memory.id, "content": self.memory.content, "drift": self.drift.value,
               "anchors": [c.to_dict() for c in self.checks]}
        if self.memory.stale_claims:  # what `verify --mark` found stale in the text itself
            out["stale_claims"] = [c.to_dict() for c in self.memory.stale_claims]
        return out

    def with_claims(self) -> "MemoryDrift":
        """This drift as reads serve it: stale when the memory has `stale_claims`, whatever its anchors say."""
        if self.memory.stale_claims and self.drift is not Drift.STALE:
            return self._replace(drift=Drift.STALE)
        return self


class DriftReport:
    """Every checked memory's drift, in the order given. Only the memories a pass had to look at
    one by one carry a result; the rest (every anchor still hashes as recorded) are built on
    demand. `checked` may build its memories on demand too: counts, `flagged`, `stale` and
    `anchored_paths` never read it whole."""

    __slots__ = ("checked", "_found", "_flagged", "_built", "_claims", "_paths", "_by_id")
    checked: Sequence[Memory]

    def __init__(self, checked: Sequence[Memory] = (), results: Sequence[MemoryDrift | None] | None = None) -> None:
        self.checked = list(checked)
        self._claims: Sequence[int] | None = None
        self._paths: list[str] | None = None
        found: dict[int, MemoryDrift] = {}
        if results is not None:
            if len(results) != len(self.checked):
                raise ValueError("one result per checked memory")
            found = {i: r for i, r in enumerate(results) if r is not None}
        self._set(found)

    @classmethod
    def _of(cls, checked: Sequence[Memory], found: dict[int, MemoryDrift], *, claims: Sequence[int] | None = None,
            paths: list[str] | None = None) -> "DriftReport":
        """A pass's report from the results it built, by position (no copy). `claims` (positions of
        the memories with `stale_claims`) and `paths` (`anchored_paths`): when the caller knows them."""
        report = cls.__new__(cls)
        report.checked = checked
        report._claims, report._paths = claims, paths
        report._set(found)
        return report

    def _set(self, found: dict[int, MemoryDrift]) -> None:
        self._found = found
        self._flagged = [found[i] for i in sorted(found) if found[i].drift is not Drift.FRESH]
        self._built: list[MemoryDrift] | None = None
        self._by_id: dict[str, MemoryDrift] | None = None

    def result_of(self, memory: Memory) -> MemoryDrift:
        """The result of `memory`, one of the checked memories (no check made again)."""
        by_id = self._by_id
        if by_id is None:
            by_id = self._by_id = {r.memory.id: r for r in self._found.values()}
        return by_id.get(memory.id) or _all_fresh(memory)

    @property
    def memories(self) -> list[MemoryDrift]:
        """One result per checked memory (fresh ones built on first read)."""
        if self._built is None:
            found = self._found
            self._built = [found.get(i) or _all_fresh(m) for i, m in enumerate(self.checked)]
        return self._built

    def with_claims(self, unanchored: Sequence[Memory] = ()) -> "DriftReport":
        """The report as reads serve it: a memory whose text `verify --mark` found stale counts
        stale whatever its anchors say, and `unanchored` such memories are added after the
        checked ones. The anchors' own drift (drift.json's) is this report before the call."""
        checked = self.checked
        claims = self._claims
        if claims is None:
            claims = [i for i, m in enumerate(checked) if m.stale_claims]
        if not unanchored and not claims:
            return self
        found = dict(self._found)
        for i in claims:
            found[i] = (found.get(i) or _all_fresh(checked[i])).with_claims()
        tail = list(unanchored)
        base = len(checked)
        for k, m in enumerate(tail):
            found[base + k] = _new(MemoryDrift, (m, Drift.STALE, ()))
        if tail:
            checked = [*checked, *tail] if isinstance(checked, list) else _Chained(checked, tail)
        return DriftReport._of(checked, found, claims=[*claims, *range(base, base + len(tail))], paths=self._paths)

    def anchored_paths(self) -> list[str]:
        """The checked memories' distinct anchored paths, in order of first use."""
        if self._paths is not None:
            return list(self._paths)
        return list(dict.fromkeys(map(_PATH, chain.from_iterable(map(_ANCHORS, self.checked)))))

    @property
    def flagged(self) -> list[MemoryDrift]:
        """The memories that are not fresh (stale or unknown), without building the rest."""
        return list(self._flagged)

    def count(self, drift: Drift) -> int:
        flagged = sum(1 for m in self._flagged if m.drift is drift)
        return len(self.checked) - len(self._flagged) if drift is Drift.FRESH else flagged

    @property
    def stale(self) -> list[MemoryDrift]:
        return [m for m in self._flagged if m.drift is Drift.STALE]

    def to_dict(self, *, every: bool = False) -> "dict[str, Any]":
        """The counts, and the memories that are not fresh (`every`: all of them, in order)."""
        return {"checked": len(self.checked), "stale": self.count(Drift.STALE), "unknown": self.count(Drift.UNKNOWN),
                "fresh": self.count(Drift.FRESH),
                "memories": [m.to_dict() for m in (self.memories if every else self._flagged)]}


class _Chained(Sequence[Memory]):
    """Two sequences of memories read as one, without reading the first whole (`with_claims`)."""

    __slots__ = ("_head", "_tail")

    def __init__(self, head: Sequence[Memory], tail: list[Memory]) -> None:
        self._head, self._tail = head, tail

    def __len__(self) -> int:
        return len(self._head) + len(self._tail)

    def __getitem__(self, i: int) -> Memory:  # type: ignore[override]  # no slices: none is asked
        n, cut = len(self), len(self._head)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        return self._head[i] if i < cut else self._tail[i - cut]

    def __iter__(self) -> Iterator[Memory]:
        yield from self._head
        yield from self._tail


_new = tuple.__new__  # skips a NamedTuple's Python-level __new__: same values, several times faster


def _all_fresh(memory: Memory) -> MemoryDrift:
    """The result of a memory whose every anchor still hashes as recorded."""
    fresh = Verdict.FRESH
    checks = tuple([_new(AnchorCheck, (ref, fresh, "unchanged", ref.lines, None)) for ref in memory.anchors])
    return _new(MemoryDrift, (memory, Drift.FRESH, checks))


_ANCHORS = attrgetter("anchors")
_PATH = attrgetter("path")


# -- The freshness envelope

def age_days(memory: Memory, now: datetime) -> float:
    since = memory.verified_at or memory.recorded_at
    return max(0.0, (now - since).total_seconds() / 86400.0)


def expired(memory: Memory, expiry_days: float, now: datetime) -> bool:
    """Past its kind's expiry: demoted as unverified (the boundary day itself still holds)."""
    return age_days(memory, now) > expiry_days


def envelope(memory: Memory, drift: Drift, checks: tuple[AnchorCheck, ...], *,
             expiry_days: float, now: datetime | None = None, history: tuple[str | None, int | None] | None = None,
             weak: bool = False) -> str:
    """One line an agent can read before trusting the memory: `[STATE · what · when — advice]`,
    e.g. `[fresh · anchored 2026-08-23 at a1b2c3d · 40 commits since]`, the same in every surface.
    `history` is what git adds (`anchorfs.history.history_facts`): the change that staled it, the
    commits since it was anchored. `weak` adds `weak match` (see `weak_envelope`)."""
    line = one_line(_envelope(memory, drift, checks, expiry_days=expiry_days, now=now, history=history))
    return weak_envelope(line) if weak else line


WEAK_MARK = "weak match"


def weak_envelope(line: str) -> str:
    """`line` with `weak match` before its advice (or its closing bracket), once."""
    if f" · {WEAK_MARK}" in line or not line.endswith("]"):
        return line
    cut = line.find(" — ")
    cut = cut if cut >= 0 else len(line) - 1
    return f"{line[:cut]} · {WEAK_MARK}{line[cut:]}"


def _envelope(memory: Memory, drift: Drift, checks: tuple[AnchorCheck, ...], *,
              expiry_days: float, now: datetime | None, history: tuple[str | None, int | None] | None) -> str:
    now = now or utcnow()
    since = (memory.verified_at or memory.recorded_at).date().isoformat()
    changed_in, count = history or (None, None)
    commits = {c.anchor.commit for c in checks if c.anchor.commit}
    at = f" at {sorted(commits)[0][:7]}" if len(commits) == 1 else ""
    tail = ""
    if expired(memory, expiry_days, now):
        tail = f" · unverified for {int(age_days(memory, now))} days ({memory.kind} expiry {int(expiry_days)})"
    if dated_ahead(memory, now):  # a clock far off, or a forged date: never a reason to rank it first
        tail += f" · dated {since}, ahead of now"
    if memory.status != "active":
        who = f" by {memory.superseded_by}" if memory.superseded_by else ""
        until = memory.valid_until.date().isoformat() if memory.valid_until else "?"
        return f"[{memory.status.upper()}{who} on {until} · held from {memory.valid_from.date().isoformat()} — do not rely on this]"
    claims = memory.stale_claims
    if drift is Drift.STALE or claims:  # prose found stale (`verify --mark`) flags it like an anchor
        bad = next((c for c in checks if c.verdict in (Verdict.CHANGED, Verdict.DELETED, Verdict.SYMBOL_MISSING)), None)
        more = f" (and {len(claims) - 1} more claim{'s' if len(claims) > 2 else ''})" if len(claims) > 1 else ""
        if bad is None and claims:
            return (f"[STALE · {claims[0].words}{more} · found by verify {claims[0].found_at.date().isoformat()}"
                    " — re-verify before relying on this]")
        if bad is None:  # pragma: no cover - a stale drift always has a stale anchor or claim
            return "[STALE — re-verify before relying on this]"
        when = f" · anchored {since}{at}" + (f" · changed in {changed_in}" if changed_in else "")
        said = f" · {claims[0].words}{more}" if claims else ""
        ahead = f" · dated {since}, ahead of now" if dated_ahead(memory, now) else ""
        return f"[STALE · {bad.detail}{when}{said}{ahead} — re-verify before relying on this]"
    if drift is Drift.UNKNOWN:
        bad = next(c for c in checks if c.verdict in (Verdict.UNREADABLE, Verdict.UNSAFE))
        return f"[UNKNOWN · {bad.detail} — re-verify before relying on this]"
    if not checks:
        return f"[unanchored · recorded {since}{tail}]"
    moved = [c for c in checks if c.verdict in (Verdict.MOVED, Verdict.REFORMATTED)]
    extra = f" · {_moved_words(moved[0])}" if moved else ""
    counted = f" · {count} commit{'s' if count != 1 else ''} since" if count is not None else ""
    return f"[fresh · anchored {since}{at}{counted}{extra}{tail}]"


def _moved_words(check: AnchorCheck) -> str:
    """A moved or reformatted anchor in a fresh envelope: "SPEC now at NEW_PATH", or its detail."""
    if check.path_now is not None and check.path_now != check.anchor.path:
        words = f"{check.anchor.spec} now at {check.path_now}"
        return words + " (reformatted)" if check.verdict is Verdict.REFORMATTED else words
    return check.detail
