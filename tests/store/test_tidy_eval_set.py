"""The labelled pairs for near-duplicate and conflict detection (evals/tidy/README.md) are valid:
every pair checks out against the Quillpay workspace, and the set keeps its size and shape."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "evals" / "tidy"))
import tidy_pairs as load  # noqa: E402  (evals/tidy/tidy_pairs.py; not `load`, the retrieval sets' loader)

PAIRS = load.load_pairs()


def test_every_pair_checks_out() -> None:
    assert load.check() == []


def test_size_and_label_floor() -> None:
    assert len(PAIRS) >= 150
    labels = Counter(p["label"] for p in PAIRS)
    assert set(labels) == set(load.LABELS)
    assert min(labels.values()) >= 25, labels


def test_ids_unique_and_sides_differ() -> None:
    ids = [p["id"] for p in PAIRS]
    assert len(ids) == len(set(ids))
    assert not [p["id"] for p in PAIRS if p["a"]["content"] == p["b"]["content"]]


def test_most_pairs_rest_on_overlapping_anchors() -> None:
    """README: at least 80% share a symbol or overlapping lines; the rest are same-file or path-in-text."""
    grounds = Counter(p["ground"] for p in PAIRS)
    assert grounds["same-symbol"] + grounds["same-lines"] >= 0.8 * len(PAIRS), grounds
    assert grounds["same-file"] >= 15 and grounds["path-in-text"] >= 15, grounds
    for p in PAIRS:
        if p["ground"] == "path-in-text":
            assert not (p["a"]["anchors"] and p["b"]["anchors"]), p["id"]
        else:
            assert p["a"]["anchors"] and p["b"]["anchors"], p["id"]
