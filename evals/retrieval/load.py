"""Load a retrieval evaluation set into a workspace and score queries against it.

Shared by `scripts/bench_retrieval.py` (figures) and `tests/store/test_retrieval_floor.py` (a floor
in CI), so both measure exactly the same thing. Import it with this folder on `sys.path`.

Two sets share the file formats (`SETS`): this folder's (Quillpay, an invented billing app, with a
Chinese and Japanese part) and `evals/retrieval2/` (httpx 0.28.1, no CJK part). Every function
takes the set's folder as `root`, the first set by default.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anchorfs
from anchorfs.sdk.workspace import Workspace

__all__ = [
    "HERE",
    "SETS",
    "STYLES",
    "MODES",
    "Loaded",
    "QueryResult",
    "Scores",
    "load_memories",
    "load_queries",
    "load_nothing_queries",
    "load_cjk_queries",
    "run_stale_queries",
    "k_invariance",
    "floor_rates",
    "build",
    "run_queries",
    "score",
    "mode",
]

HERE = Path(__file__).resolve().parent
# name -> the set's folder (memories.jsonl, queries.jsonl, queries_nothing.jsonl, repo/; the CJK
# files memories_cjk.jsonl and queries_cjk.jsonl only where the set has them)
SETS: dict[str, Path] = {"quillpay": HERE, "httpx": HERE.parent / "retrieval2"}
STYLES = ("exact_identifier", "identifier_part", "paraphrase", "question", "path", "superseded", "short")
# name -> (vector_weight, text_weight); None keeps the configured value (the default's fusion).
MODES: dict[str, tuple[float | None, float | None]] = {
    "full-text": (0.0, None),
    "vectors": (None, 0.0),
    "hybrid": (None, None),
}


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def load_memories(*, cjk: bool = True, root: Path = HERE) -> list[dict[str, Any]]:
    """The memories; with `cjk`, also the handful written in Chinese and Japanese (if the set has them)."""
    extra = root / "memories_cjk.jsonl"
    return _read_jsonl(root / "memories.jsonl") + (_read_jsonl(extra) if cjk and extra.exists() else [])


def load_queries(root: Path = HERE) -> list[dict[str, Any]]:
    return _read_jsonl(root / "queries.jsonl")


def load_nothing_queries(root: Path = HERE) -> list[dict[str, Any]]:
    """Queries about nothing in the store (style `nothing`, no relevant memory)."""
    return _read_jsonl(root / "queries_nothing.jsonl")


def load_cjk_queries(root: Path = HERE) -> list[dict[str, Any]]:
    """Queries in Chinese and Japanese, written without spaces inside words (style `cjk`); none
    when the set has no CJK part."""
    path = root / "queries_cjk.jsonl"
    return _read_jsonl(path) if path.exists() else []


@dataclass
class Loaded:
    """A workspace holding the set, and the map from the set's ids to the store's ids."""

    ws: Workspace
    ids: dict[str, str]  # set id (m001) -> anchorfs id
    back: dict[str, str]  # anchorfs id -> set id
    superseded: set[str]  # set ids of retired memories
    record_seconds: float
    recorded: int
    root: Path = HERE  # the set's folder


def build(dest: Path, *, embedder: str | None = None, one_by_one: bool = False, cjk: bool = True,
          root: Path = HERE) -> Loaded:
    """Copy the set's `repo/` (`root`: its folder) to `dest`, open a workspace there and replay
    every memory in file order.

    Consecutive plain records go in one `record_many` batch unless `one_by_one` (the way an
    agent writes, for the throughput figure); a memory with `supersedes` is a `supersede`.
    """
    shutil.copytree(root / "repo", dest)
    anchorfs.init(dest)
    ws = anchorfs.open(dest, embedder=embedder)
    ids: dict[str, str] = {}
    superseded: set[str] = set()
    batch: list[dict[str, Any]] = []
    batch_ids: list[str] = []

    def flush() -> None:
        if batch:
            for sid, m in zip(batch_ids, ws.record_many(batch)):
                ids[sid] = m.id
            batch.clear()
            batch_ids.clear()

    memories = load_memories(cjk=cjk, root=root)
    ws.store  # open (and create) the table, and load the model, outside the timed part
    ws.embedder.embed_query("warm up")
    t0 = time.perf_counter()
    for item in memories:
        if item.get("supersedes"):
            flush()
            old = item["supersedes"]
            m = ws.supersede(ids[old], item["content"], anchors=item["anchors"], kind=item["kind"],
                             tags=item["tags"])
            ids[item["id"]] = m.id
            superseded.add(old)
        else:
            batch.append(dict(content=item["content"], kind=item["kind"], tags=item["tags"],
                              anchors=item["anchors"]))
            batch_ids.append(item["id"])
            if one_by_one:
                flush()
    flush()
    elapsed = time.perf_counter() - t0
    return Loaded(ws, ids, {v: k for k, v in ids.items()}, superseded, elapsed, len(memories), root)


@contextmanager
def mode(ws: Workspace, name: str) -> Iterator[None]:
    """Run queries in one retrieval mode by setting the fusion weights for the duration."""
    vector_weight, text_weight = MODES[name]
    saved = dict(ws.config.values)
    if vector_weight is not None:
        ws.config.values["search.vector_weight"] = vector_weight
    if text_weight is not None:
        ws.config.values["search.text_weight"] = text_weight
    try:
        yield
    finally:
        ws.config.values.clear()
        ws.config.values.update(saved)


@dataclass
class QueryResult:
    qid: str
    style: str
    relevant: list[str]
    ranked: list[str]  # set ids, best first
    seconds: float
    relevance: list[float] = field(default_factory=list)  # per ranked hit
    weak: list[bool] = field(default_factory=list)
    drift: list[str] = field(default_factory=list)


def run_queries(loaded: Loaded, queries: Sequence[dict[str, Any]] | None = None, *,
                k: int = 10) -> list[QueryResult]:
    queries = load_queries(loaded.root) if queries is None else queries
    out = []
    for q in queries:
        t0 = time.perf_counter()
        hits = loaded.ws.query(q["query"], k=k)
        elapsed = time.perf_counter() - t0
        out.append(_result(loaded, q, hits, elapsed))
    return out


def _result(loaded: Loaded, q: dict[str, Any], hits: Sequence[Any], elapsed: float) -> QueryResult:
    ranked = [loaded.back.get(h.memory.id, "?") for h in hits]
    return QueryResult(q["id"], q["style"], list(q["relevant"]), ranked, elapsed,
                       [h.relevance for h in hits], [h.weak for h in hits], [h.drift.value for h in hits])


def _stale_edit(root: Path, specs: Sequence[str]) -> dict[Path, bytes]:
    """Edit the code under each anchor spec so that the anchor is stale; returns the files'
    original bytes. A whole file gets a line more; a symbol or line range, a word more on its
    last line (a changed, or for a broken parse a missing, symbol: stale either way)."""
    from anchorfs.anchor.anchors import narrowed_text, parse_spec

    saved: dict[Path, bytes] = {}
    for spec in specs:
        ref = parse_spec(spec)
        path = root / ref.path
        data = path.read_bytes()
        saved.setdefault(path, data)
        if not ref.symbol and not ref.lines:
            path.write_bytes(data + b"\nedited for the stale variant\n")
            continue
        _, (_, end) = narrowed_text(ref, data)
        lines = data.split(b"\n")
        lines[end - 1] = lines[end - 1] + b" staleedit"
        path.write_bytes(b"\n".join(lines))
    return saved


def run_stale_queries(loaded: Loaded, queries: Sequence[dict[str, Any]] | None = None, *,
                      k: int = 10) -> tuple[list[QueryResult], set[str]]:
    """Each query's stale variant: its relevant memories made stale by editing the code they
    are anchored to (in the workspace copy), the query run, the files put back. Returns the
    results and the ids of the queries with at least one anchored relevant memory (for the
    others the variant is the query itself)."""
    queries = load_queries(loaded.root) if queries is None else queries
    by_id = {m["id"]: m for m in load_memories(root=loaded.root)}
    root = Path(loaded.ws.root)
    out: list[QueryResult] = []
    stalable: set[str] = set()
    # A read-only workspace on the same store: the same search and drift pass, but no drift
    # write-back into LanceDB per query (edits undone at once would make each one a write).
    reader = Workspace(root, embedder=loaded.ws.embedder.name, read_only=True)
    try:
        for q in queries:
            specs = [a for mid in q["relevant"] for a in by_id[mid]["anchors"]]
            saved = _stale_edit(root, specs) if specs else {}
            try:
                t0 = time.perf_counter()
                hits = reader.query(q["query"], k=k)
                elapsed = time.perf_counter() - t0
            finally:
                for path, data in saved.items():
                    path.write_bytes(data)
            if specs:
                stalable.add(q["id"])
            out.append(_result(loaded, q, hits, elapsed))
    finally:
        reader.close()
    loaded.ws.drift()  # every memory back to fresh in the store's last known drift
    return out, stalable


def k_invariance(loaded: Loaded, queries: Sequence[dict[str, Any]], *, k: int = 10,
                 cuts: Sequence[int] = (1, 3, 5),
                 full: Sequence[QueryResult] | None = None,
                 rotate: bool = False) -> tuple[int, list[str]]:
    """(queries checked, ids of those where the hits of some `-k j` are not the first j of `-k k`).

    `full`: the queries' results at `k` already run (`run_queries`), reused instead of asked
    again. `rotate`: each query is checked at one of the `cuts` in turn (the i-th query at
    cuts[i % len(cuts)]) instead of at all of them: every query and every cut is covered for
    a third of the queries' cost (the CI floor test; the benchmark checks every cut).
    """
    bad: list[str] = []
    done = {r.qid: r for r in full} if full is not None else {}
    for i, q in enumerate(queries):
        if q["id"] in done:
            ranked = done[q["id"]].ranked
            full_ids = [loaded.ids.get(sid, sid) for sid in ranked]
        else:
            full_ids = [h.memory.id for h in loaded.ws.query(q["query"], k=k)]
        todo = [cuts[i % len(cuts)]] if rotate else list(cuts)
        if any([h.memory.id for h in loaded.ws.query(q["query"], k=j)] != full_ids[:j] for j in todo):
            bad.append(q["id"])
    return len(queries), bad


def floor_rates(real: Sequence[QueryResult], nothing: Sequence[QueryResult]) -> dict[str, float]:
    """How the relevance floor sorts queries: `nothing_clear` is the share of queries about
    nothing with no hit above the floor; `answered` the share of real queries whose first
    relevant hit is in the results and above it; `answered_found` the same among the real
    queries whose answer is in the results at all."""
    clear = sum(1 for r in nothing if not any(not w for w in r.weak)) / max(1, len(nothing))
    found = answered = 0
    for r in real:
        rel = set(r.relevant)
        at = next((i for i, mid in enumerate(r.ranked) if mid in rel), None)
        if at is None:
            continue
        found += 1
        answered += not r.weak[at]
    return {"nothing_clear": clear, "answered": answered / max(1, len(real)),
            "answered_found": answered / max(1, found)}


@dataclass
class Scores:
    n: int = 0
    mrr: float = 0.0
    recall_at_1: float = 0.0
    recall_at_5: float = 0.0
    recall_at_10: float = 0.0
    superseded_in_top: float = 0.0  # share of queries with a retired memory in the top 10
    misses: list[str] = field(default_factory=list)  # qids whose first relevant hit is not rank 1


def score(results: Sequence[QueryResult], superseded: set[str] | None = None) -> Scores:
    """MRR of the first relevant hit; recall@k = relevant ids in the top k / min(k, relevant).

    The denominator is capped at k so that a query with five relevant memories can still
    reach recall@1 = 1. A retired memory in the results is a miss: it is never relevant.
    """
    s = Scores(n=len(results))
    if not results:
        return s
    superseded = superseded or set()
    for r in results:
        rel = set(r.relevant)
        rank = next((i + 1 for i, mid in enumerate(r.ranked) if mid in rel), None)
        s.mrr += 1.0 / rank if rank else 0.0
        if rank != 1:
            s.misses.append(r.qid)
        for cut, attr in ((1, "recall_at_1"), (5, "recall_at_5"), (10, "recall_at_10")):
            found = len(rel.intersection(r.ranked[:cut]))
            setattr(s, attr, getattr(s, attr) + found / min(len(rel), cut))
        if superseded.intersection(r.ranked):
            s.superseded_in_top += 1
    for attr in ("mrr", "recall_at_1", "recall_at_5", "recall_at_10", "superseded_in_top"):
        setattr(s, attr, getattr(s, attr) / len(results))
    return s
