"""The labeled set's own rules, checked on its files (evals/retrieval/README.md).

A label the set's rules call wrong skews every figure measured on it: a path query whose
answer list leaves out a memory anchored to that very file counts a correct first hit as a
miss (the Chinese and Japanese memories, added later, were left out of the three path
queries naming the files they are anchored to).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "evals" / "retrieval"))
import load  # noqa: E402  (evals/retrieval/load.py)


def _anchored_path(spec: str) -> str:
    """The file of an anchor spec (`PATH`, `PATH#SYM`, `PATH:N-M`)."""
    path = spec.split("#", 1)[0]
    head, sep, tail = path.rpartition(":")
    return head if sep and tail.replace("-", "").isdigit() else path


def test_a_path_query_counts_every_active_memory_anchored_to_its_file() -> None:
    memories = load.load_memories()  # the CJK ones included, as the benchmark loads them
    retired = {m["supersedes"] for m in memories if m.get("supersedes")}
    checked = 0
    for q in load.load_queries():
        if q["style"] != "path" or ":" in q["query"]:
            continue  # a line query (`config/app.toml:23`) asks about those lines only
        anchored = {m["id"] for m in memories if m["id"] not in retired
                    and any(_anchored_path(a) == q["query"] for a in m["anchors"])}
        assert anchored <= set(q["relevant"]), (q["id"], sorted(anchored - set(q["relevant"])))
        checked += 1
    assert checked == 13


def test_no_query_lists_a_retired_or_unknown_memory_as_relevant() -> None:
    memories = load.load_memories()
    ids = {m["id"] for m in memories}
    retired = {m["supersedes"] for m in memories if m.get("supersedes")}
    for q in [*load.load_queries(), *load.load_cjk_queries()]:
        assert set(q["relevant"]) <= ids - retired, q["id"]
    assert all(q["relevant"] == [] for q in load.load_nothing_queries())
