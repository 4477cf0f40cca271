"""Load the retrieval evaluation set into a workspace and score queries against it.

Shared by `scripts/bench_retrieval.py` (figures) and `tests/test_retrieval_floor.py` (a floor
in CI), so both measure exactly the same thing. Import it with this folder on `sys.path`.
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
from anchorfs.workspace import Workspace

__all__ = [
    "HERE",
    "STYLES",
    "MODES",
    "Loaded",
    "QueryResult",
    "Scores",
    "load_memories",
    "load_queries",
    "build",
    "run_queries",
    "score",
    "mode",
]

HERE = Path(__file__).resolve().parent
STYLES = ("exact_identifier", "identifier_part", "paraphrase", "question", "path", "superseded")
# name -> (vector_weight, text_weight); None keeps the configured value (the default's fusion).
MODES: dict[str, tuple[float | None, float | None]] = {
    "full-text": (0.0, None),
    "vectors": (None, 0.0),
    "hybrid": (None, None),
}


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def load_memories() -> list[dict[str, Any]]:
    return _read_jsonl(HERE / "memories.jsonl")


def load_queries() -> list[dict[str, Any]]:
    return _read_jsonl(HERE / "queries.jsonl")


@dataclass
class Loaded:
    """A workspace holding the set, and the map from the set's ids to the store's ids."""

    ws: Workspace
    ids: dict[str, str]  # set id (m001) -> anchorfs id
    back: dict[str, str]  # anchorfs id -> set id
    superseded: set[str]  # set ids of retired memories
    record_seconds: float
    recorded: int


def build(dest: Path, *, embedder: str | None = None, one_by_one: bool = False) -> Loaded:
    """Copy `repo/` to `dest`, open a workspace there and replay every memory in file order.

    Consecutive plain records go in one `record_many` batch unless `one_by_one` (the way an
    agent writes, for the throughput figure); a memory with `supersedes` is a `supersede`.
    """
    shutil.copytree(HERE / "repo", dest)
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

    memories = load_memories()
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
    return Loaded(ws, ids, {v: k for k, v in ids.items()}, superseded, elapsed, len(memories))


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


def run_queries(loaded: Loaded, queries: Sequence[dict[str, Any]] | None = None, *,
                k: int = 10) -> list[QueryResult]:
    queries = load_queries() if queries is None else queries
    out = []
    for q in queries:
        t0 = time.perf_counter()
        hits = loaded.ws.query(q["query"], k=k)
        elapsed = time.perf_counter() - t0
        ranked = [loaded.back.get(h.memory.id, "?") for h in hits]
        out.append(QueryResult(q["id"], q["style"], list(q["relevant"]), ranked, elapsed))
    return out


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
