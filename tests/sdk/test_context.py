"""Prompt context: ordering by trust, the stale banner, envelopes, the budget."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from conftest import TOKEN

import anchorfs
from anchorfs.sdk.recall import STALE_BANNER, estimate_tokens, render_context
from anchorfs.core.model import AnchorCheck, AnchorRef, Drift, Hit, Memory, Verdict, new_id


def hit(content: str, drift: Drift, *, detail: str = "unchanged", verdict: Verdict = Verdict.FRESH,
        score: float = 1.0, status: str = "active", kind: str = "note") -> Hit:
    m = Memory(id=new_id(), content=content, kind=kind, status=status)
    ref = AnchorRef(path="auth/token.py", sha256="0" * 64, symbol="TokenIssuer.issue")
    env = f"[{drift.value.upper() if drift is not Drift.FRESH else 'fresh'} · {detail}]"
    return Hit(m, score, score, drift, (AnchorCheck(ref, verdict, detail),), env)


def test_fresh_first_then_unknown_then_stale_under_the_banner() -> None:
    stale = hit("token expiry is 24h", Drift.STALE, detail="auth/token.py#TokenIssuer.issue changed",
                verdict=Verdict.CHANGED, score=0.9)
    fresh = hit("tokens are signed with HS256", Drift.FRESH, score=0.4)
    unknown = hit("config lives in settings.toml", Drift.UNKNOWN, detail="settings.toml unreadable: permission denied",
                  verdict=Verdict.UNREADABLE, score=0.5)
    block = render_context([stale, unknown, fresh], task="change token expiry")
    md = block.markdown
    assert md.startswith("## Memories for: change token expiry")
    # fresh first even though the stale hit scored higher, then unknown, then the stale section
    assert md.index(fresh.memory.content) < md.index(unknown.memory.content) < md.index(STALE_BANNER) \
        < md.index(stale.memory.content)
    assert "### Fresh" in md and "### Could not be checked" in md and "### Stale" in md
    # the banner says what changed
    banner = md[md.index(STALE_BANNER):md.index(stale.memory.content)]
    assert "What changed: auth/token.py#TokenIssuer.issue changed." in banner
    assert "`reanchor`" in banner and "`supersede`" in banner
    assert (block.fresh, block.unknown, block.stale) == ((fresh.memory.id,), (unknown.memory.id,), (stale.memory.id,))
    assert block.omitted == ()


def test_every_memory_line_carries_its_envelope_and_id() -> None:
    hits = [hit("a fresh one", Drift.FRESH), hit("a stale one", Drift.STALE, detail="x.py deleted", verdict=Verdict.DELETED)]
    md = render_context(hits, task="t").markdown
    lines = [line for line in md.splitlines() if line.startswith("- ")]
    assert len(lines) == 2
    for line, h in zip(lines, hits):
        assert line.startswith(f"- {h.envelope} {h.memory.content}")
        assert f"`{h.memory.id}`" in line
    # the stale memory lists the anchor that moved under it
    assert "  - deleted: x.py deleted" in md.splitlines()


def test_no_banner_without_stale_memories_and_multiline_content_stays_in_its_bullet() -> None:
    md = render_context([hit("first line\nsecond line", Drift.FRESH)], task="t").markdown
    assert STALE_BANNER not in md and "### Stale" not in md
    assert "first line\n  | second line" in md  # under its bullet, behind a mark no bullet starts with


def test_superseded_hits_are_left_out() -> None:
    old = hit("old belief", Drift.FRESH, status="superseded")
    md = render_context([old], task="t").markdown
    assert "old belief" not in md
    assert "No memories found" in md


def test_budget_keeps_the_best_that_fit_and_reports_the_rest() -> None:
    hits = [hit(f"memory number {i} " + "x" * 200, Drift.FRESH, score=1.0 - i / 100) for i in range(10)]
    block = render_context(hits, task="t", budget=300)
    assert block.tokens <= 300
    assert 0 < len(block.fresh) < 10
    assert list(block.fresh) == [h.memory.id for h in hits[: len(block.fresh)]]  # best first
    assert set(block.omitted) == {h.memory.id for h in hits[len(block.fresh):]}
    assert f"({len(block.omitted)} more memories left out to fit the budget.)" in block.markdown
    big = render_context(hits, task="t", budget=100_000)
    assert len(big.fresh) == 10 and big.omitted == ()


def test_budget_goes_best_first_by_score_so_a_relevant_stale_warning_beats_weaker_fresh_ones() -> None:
    fresh = [hit(f"fresh {i} " + "y" * 150, Drift.FRESH, score=0.1) for i in range(3)]
    stale = hit("stale " + "z" * 150, Drift.STALE, detail="a.py changed", verdict=Verdict.CHANGED, score=0.45)
    block = render_context([*fresh, stale], task="t", budget=220)
    assert block.stale == (stale.memory.id,)  # its warning made it in
    assert set(block.omitted) == {h.memory.id for h in fresh[len(block.fresh):]}
    assert "What changed: a.py changed." in block.markdown


def test_weak_hits_never_go_in_and_a_query_with_only_weak_ones_says_so() -> None:
    good = hit("a good match", Drift.FRESH, score=0.6)
    weak_fresh = replace(hit("a fresh but weak match", Drift.FRESH, score=0.09), weak=True, relevance=0.09)
    weak_stale = replace(hit("a stale weak one", Drift.STALE, detail="b.py changed", verdict=Verdict.CHANGED,
                             score=0.04), weak=True, relevance=0.08)
    block = render_context([weak_fresh, good, weak_stale], task="t", budget=100_000)
    assert block.fresh == (good.memory.id,) and block.stale == ()
    assert set(block.weak) == {weak_fresh.memory.id, weak_stale.memory.id}
    assert "weak" not in block.markdown.split("### Fresh", 1)[1] and "b.py changed" not in block.markdown
    only = render_context([weak_fresh, weak_stale], task="t")
    assert only.fresh == only.stale == () and "No memory matches this task well" in only.markdown
    assert f"`{weak_fresh.memory.id}`" in only.markdown  # the closest one is named, not included
    assert only.to_dict()["weak"] == [weak_fresh.memory.id, weak_stale.memory.id]


def test_a_budget_too_small_for_the_best_memory_gives_its_envelope_and_a_cut_line() -> None:
    best = hit("token expiry is 24 hours " + "because of the login flow " * 20, Drift.STALE,
               detail="auth/token.py#TokenIssuer.issue changed", verdict=Verdict.CHANGED, score=0.5)
    small = hit("short", Drift.FRESH, score=0.2)
    block = render_context([best, small], task="t", budget=160)
    assert block.stale == (best.memory.id,) and block.fresh == ()  # not the small one that fits
    assert small.memory.id in block.omitted
    line = next(line for line in block.markdown.splitlines() if line.startswith("- "))
    assert line.startswith(f"- {best.envelope} token expiry is 24 hours")
    assert "…" in line and best.memory.content not in block.markdown
    assert block.tokens <= 160
    tiny = render_context([best], task="t", budget=1)  # the envelope is never cut
    assert best.envelope in tiny.markdown and tiny.stale == (best.memory.id,)


def test_estimate_tokens() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2


# -- through the workspace, on real files -----------------------------------------------------

@pytest.fixture
def ws(tmp_path: Path) -> anchorfs.Workspace:
    root = tmp_path / "ws"
    (root / "auth").mkdir(parents=True)
    (root / "auth" / "token.py").write_text(TOKEN)
    (root / "README.md").write_text("tokens are documented here\n")
    anchorfs.init(root)
    with anchorfs.open(root) as w:
        yield w


def test_workspace_context_flags_what_the_edit_staled(ws: anchorfs.Workspace) -> None:
    stale = ws.record("token expiry is 24 hours", kind="constraint", anchors=["auth/token.py#TokenIssuer.issue"])
    fresh = ws.record("token revoke is a no-op for now", anchors=["auth/token.py#TokenIssuer.revoke"])
    plain = ws.record("token docs live in the README", anchors=["README.md"])
    (ws.root / "auth" / "token.py").write_text(TOKEN.replace("hours=24", "hours=12"))
    block = ws.context("token expiry 24 hours", budget=2000)
    md = block.markdown
    assert block.stale == (stale.id,)
    # the others barely match "token expiry": weak, left out rather than filling the prompt
    assert set(block.fresh) | set(block.weak) == {fresh.id, plain.id} and not set(block.fresh) & set(block.weak)
    assert "What changed: auth/token.py#TokenIssuer.issue changed." in md
    assert md.index(STALE_BANNER) < md.index("token expiry is 24 hours")
    assert "[STALE · auth/token.py#TokenIssuer.issue changed ·" in md
    other = ws.context("token revoke", budget=2000)
    assert other.fresh == (fresh.id,) and "[fresh · anchored" in other.markdown
    d = block.to_dict()
    assert d["stale"] == [stale.id] and d["tokens"] == block.tokens <= 2000


def test_workspace_context_checks_its_input(ws: anchorfs.Workspace) -> None:
    with pytest.raises(anchorfs.InputError):
        ws.context("anything", budget=0)
    with pytest.raises(anchorfs.InputError):
        ws.context("   ")
    assert "No memories found" in ws.context("nothing recorded yet").markdown
