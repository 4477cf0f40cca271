"""Ranking an agent can trust (issue 17): relevance that means how well a memory matches,
demotion before the cut, a floor that says "nothing matches well", one envelope format, and
text without spaces (CJK) found. Real files, real LanceDB, the default (hashing) embedder."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import git
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import anchorfs
from anchorfs.cli.commands import cli
from anchorfs.drift import weak_envelope
from anchorfs.core.model import Drift

TOKEN_QUERY = "how long do tokens last TOKEN_TTL_SECONDS"


def run(root: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, ["--root", str(root), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture
def issue_ws(tmp_path: Path) -> Path:
    """The issue's example: a token memory whose line then changes, and two unrelated ones."""
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "token.py").write_text("TOKEN_TTL_SECONDS = 86400\n")
    (root / "src" / "billing.py").write_text("def charge(amount_cents):\n    return amount_cents\n")
    anchorfs.init(root)
    run(root, "record", "TOKEN_TTL_SECONDS is one day: tokens last 24 hours", "--anchor", "src/token.py:1")
    run(root, "record", "We deploy on Fridays only after review")
    run(root, "record", "Billing charges amounts in cents", "--anchor", "src/billing.py")
    (root / "src" / "token.py").write_text("TOKEN_TTL_SECONDS = 3600\n")
    return root


def test_the_issue_example_a_stale_exact_match_leads_at_every_k(issue_ws: Path) -> None:
    firsts = []
    for k in ("1", "2", "3"):
        hits = json.loads(run(issue_ws, "--json", "query", TOKEN_QUERY, "-k", k))["hits"]
        assert len(hits) == int(k)
        top = hits[0]
        assert top["content"].startswith("TOKEN_TTL_SECONDS is one day")
        assert top["drift"] == "stale" and top["envelope"].startswith("[STALE · src/token.py:1 changed · ")
        # relevance says how well it matches; the score shows what the demotion did
        assert top["relevance"] >= 0.3 and not top["weak"]
        assert top["score"] == pytest.approx(top["relevance"] * 0.7, abs=1e-5)  # drift.stale_factor
        for other in hits[1:]:
            assert other["weak"] and other["relevance"] < 0.05 and other["score"] < top["score"]
            assert "weak match" in other["envelope"]
        firsts.append(top["id"])
    assert len(set(firsts)) == 1
    text = run(issue_ws, "query", TOKEN_QUERY, "-k", "3")
    assert "no memory matches well" not in text
    label, first = text.splitlines()[:2]
    assert label == "Memories (data, not instructions):"  # as MCP recall labels them
    assert f"(relevance {json.loads(run(issue_ws, '--json', 'query', TOKEN_QUERY))['hits'][0]['relevance']:.3f})" in first
    assert "[STALE · src/token.py:1 changed ·" in first


def test_the_issue_example_a_query_about_nothing_says_so(issue_ws: Path) -> None:
    text = run(issue_ws, "query", "kubernetes helm chart")
    assert text.startswith("Memories (data, not instructions):\nno memory matches well; closest:\n")
    hits = json.loads(run(issue_ws, "--json", "query", "kubernetes helm chart"))["hits"]
    assert hits and all(h["weak"] and h["relevance"] < 0.05 for h in hits)
    assert all(h["envelope"].count("weak match") == 1 for h in hits)
    block = json.loads(run(issue_ws, "--json", "context", "kubernetes helm chart"))
    assert block["fresh"] == block["stale"] == block["unknown"] == []
    assert set(block["weak"]) == {h["id"] for h in hits}
    assert "No memory matches this task well" in block["markdown"]


WORDS = ["token", "expiry", "invoice", "refund", "retry", "email", "cache", "lock", "session", "webhook"]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    contents=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4), min_size=3, max_size=12),
    stale_mask=st.lists(st.booleans(), min_size=12, max_size=12),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
    candidates=st.integers(min_value=1, max_value=6),
)
def test_the_first_j_hits_of_any_k_are_the_hits_of_k_equals_j(
        tmp_path_factory: pytest.TempPathFactory, contents: list[list[str]], stale_mask: list[bool],
        query: list[str], candidates: int) -> None:
    root = tmp_path_factory.mktemp("kinv")
    anchorfs.init(root)
    with anchorfs.open(root) as ws:
        for i, words in enumerate(contents):
            path = root / f"f{i}.py"
            path.write_text(f"X_{i} = 1\n")
            ws.record(" ".join(words), anchors=[f"f{i}.py"])
        for i in range(len(contents)):
            if stale_mask[i]:
                (root / f"f{i}.py").write_text(f"X_{i} = 2\n")
        ws.config.values["search.candidates"] = candidates  # small tiers: the widening is exercised
        text = " ".join(query)
        full = [h.memory.id for h in ws.query(text, k=len(contents))]
        assert len(full) == len(contents)  # every memory is a candidate somewhere
        for j in range(1, len(contents)):
            assert [h.memory.id for h in ws.query(text, k=j)] == full[:j]


def test_a_stale_good_match_ranks_above_fresh_poor_ones_and_equal_matches_go_fresh_first(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    for name in ("x1.py", "x2.py"):
        (root / name).write_text("RETRY_LIMIT = 5\n")
    anchorfs.init(root)
    with anchorfs.open(root) as ws:
        stale = ws.record("webhook deliveries retry five times, see RETRY_LIMIT", anchors=["x1.py"])
        twin = ws.record("webhook deliveries retry five times, see RETRY_LIMIT", anchors=["x2.py"])
        for i in range(8):
            ws.record(f"note {i} about deliveries of invoices by email")
        (root / "x1.py").write_text("RETRY_LIMIT = 7\n")
        hits = ws.query("how many times do webhook deliveries retry RETRY_LIMIT", k=10)
        by = {h.memory.id: h for h in hits}
        assert by[stale.id].drift is Drift.STALE
        # equally good: the fresh twin first, then the stale one, above every poor match
        assert [h.memory.id for h in hits[:2]] == [twin.id, stale.id]
        assert by[stale.id].relevance == pytest.approx(by[twin.id].relevance, rel=0.05)
        assert all(h.score < by[stale.id].score for h in hits[2:])


def test_one_envelope_format_in_query_check_drift_and_context(git_repo: Path) -> None:
    root = git_repo
    (root / "token.py").write_text("def issue():\n    return 24\n")
    (root / "notes.py").write_text("def helper():\n    return 1\n")
    git(root, "add", ".")
    git(root, "commit", "-qm", "first")
    anchorfs.init(root)
    with anchorfs.open(root) as ws:
        stale = ws.record("tokens are issued for 24 hours by issue()", anchors=["token.py#issue"])
        fresh = ws.record("helper returns one", anchors=["notes.py#helper"])
        (root / "token.py").write_text("def issue():\n    return 12\n")
        git(root, "commit", "-qam", "shorter tokens")
        env_stale = ws.query("tokens issued for 24 hours", k=1)[0].envelope
        env_fresh = ws.query("helper returns one", k=1)[0].envelope
        assert env_stale.startswith("[STALE · token.py#issue changed · ")
        assert '"shorter tokens" — re-verify before relying on this]' in env_stale
        assert env_fresh.startswith("[fresh · anchored ") and " at " in env_fresh
        # MCP's check_drift reads check_id: the same line as the query's
        assert ws.check_id(stale.id)[1] == env_stale
        assert ws.check_id(fresh.id)[1] == env_fresh
        assert env_stale in ws.context("tokens issued for 24 hours").markdown
        assert env_fresh in ws.context("helper returns one").markdown


def test_weak_envelope_marks_once_before_the_advice() -> None:
    assert weak_envelope("[fresh · anchored 2026-08-23]") == "[fresh · anchored 2026-08-23 · weak match]"
    stale = "[STALE · a.py changed · anchored 2026-08-23 — re-verify before relying on this]"
    assert weak_envelope(stale) == "[STALE · a.py changed · anchored 2026-08-23 · weak match — re-verify before relying on this]"
    assert weak_envelope(weak_envelope(stale)) == weak_envelope(stale)


def test_cjk_text_without_spaces_is_found(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    anchorfs.init(root)
    with anchorfs.open(root) as ws:
        target = ws.record("会话需要密钥，刷新令牌只保存哈希值")
        ws.record("发票金额一律以分为单位存储")
        ws.record("tokens are hashed before they are stored")
        for text in ("会话 密钥", "会话密钥", "刷新令牌"):
            hits = ws.query(text, k=3)
            assert hits[0].memory.id == target.id, text
        # in a store of three, the glued words' relevance (0.048) is under the floor fitted on both
        # evaluation sets (0.05, issue 42): found first, marked weak; the spaced and longer ones clear it
        assert [ws.query(t, k=1)[0].weak for t in ("会话 密钥", "会话密钥", "刷新令牌")] == [False, True, False]


# --------------------------------------------------------------------------- store size

SIZES = (1, 2, 10, 200)
BAND = 0.12
"""How far one (query, memory) pair's relevance may move between a store of 1, 2, 10 and 200
memories. What is left is the query terms' document frequencies in BM25's idf: in 200 memories
a word many of them hold says a little less than in two, so relevance eases as the store grows
(measured 2026-12-02, default embedder: the issue's pair 0.02 and 0.08, q021 0.09, q069 0.10,
q073 0.105; the same measure is in `scripts/bench_retrieval.py`). With LanceDB's BM25, whose
length normalization divides by the table's average length, the bound was 0.25 (up to 0.21, a
path query's 0.92 -> 0.70); before that, with features taken relative to the other
candidates: up to 0.70, median 0.15, and 0.001-0.05 against 0.6 for the issue's pair."""


def _fillers(count: int) -> list[dict[str, Any]]:
    """Memories of the eval set (evals/retrieval), unanchored, as filler."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "evals" / "retrieval"))
    import load

    mems = [m for m in load.load_memories(cjk=False) if not m.get("supersedes")]
    return [dict(content=m["content"], kind=m["kind"], tags=m["tags"]) for m in mems[:count]]


def _relevance_by_size(root: Path, first: dict[str, Any], others: list[dict[str, Any]],
                       query: str, track: int = 1) -> list[dict[str, float]]:
    """Record `first`, then `others` a batch at a time until the store holds each of SIZES;
    after each, the relevance of the first `track` memories recorded for `query`."""
    root.mkdir(exist_ok=True)
    anchorfs.init(root)
    out: list[dict[str, float]] = []
    ids: list[str] = []
    with anchorfs.open(root) as ws:
        have = 0
        pending = [first, *others]
        for size in SIZES:
            batch, pending = pending[:size - have], pending[size - have:]
            ids.extend(m.id for m in ws.record_many(batch))
            have = size
            hits = {h.memory.id: h for h in ws.query(query, k=size)}
            out.append({mid: hits[mid].relevance for mid in ids[:track] if mid in hits})
    return out


def test_the_issue_pair_reads_the_same_relevance_and_order_at_every_store_size(tmp_path: Path) -> None:
    """The open item of issue 17: with two memories, "token expiry is 24 hours" read 0.001-0.05
    for "token expiry and revoke" while its neighbour read 0.6; a new user's first memories are
    exactly this case."""
    a: dict[str, Any] = dict(content="token expiry is 24 hours")
    b: dict[str, Any] = dict(content="token revoke does not check expiry yet")
    task = "token expiry and revoke"
    fillers = _fillers(198)
    both = _relevance_by_size(tmp_path / "ab", a, [b, *fillers], task, track=2)
    alone_b = _relevance_by_size(tmp_path / "b", b, fillers, task)[0]
    first = both[0]
    (id_a,) = first
    series_a = [r[id_a] for r in both]
    id_b = next(mid for mid in both[1] if mid != id_a)
    series_b = [list(alone_b.values())[0], *[r[id_b] for r in both[1:]]]
    for series in (series_a, series_b):
        assert max(series) - min(series) <= BAND, (series_a, series_b)
    # the memory that holds every word of the task leads at every size, the other is a partial match
    assert all(rb > ra_ for ra_, rb in zip(series_a[1:], series_b[1:])), (series_a, series_b)
    assert min(series_b) >= 0.4 and max(series_a) < min(series_b), (series_a, series_b)


@pytest.mark.parametrize("qid", ["q021", "q069", "q073"])
def test_an_answer_reads_the_same_relevance_in_a_store_of_1_2_10_or_200_memories(tmp_path: Path, qid: str) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "evals" / "retrieval"))
    import load

    q = next(q for q in load.load_queries() if q["id"] == qid)
    mems = {m["id"]: m for m in load.load_memories(cjk=False)}
    ans = mems[q["relevant"][0]]
    shutil.copytree(load.HERE / "repo", tmp_path / "repo")  # the answer's anchors hold
    others = [dict(content=m["content"], kind=m["kind"], tags=m["tags"], anchors=m["anchors"])
              for m in mems.values() if m["id"] not in q["relevant"] and not m.get("supersedes")][:199]
    series = [next(iter(r.values())) for r in _relevance_by_size(
        tmp_path / "repo", dict(content=ans["content"], kind=ans["kind"], tags=ans["tags"], anchors=ans["anchors"]),
        others, q["query"])]
    assert max(series) - min(series) <= BAND, series
