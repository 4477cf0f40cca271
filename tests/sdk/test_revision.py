"""Belief revision: supersede, retract, revert, history and recall as of an instant.

Nothing is ever deleted: a correction supersedes, a withdrawal retracts, both can be reverted,
and every step stays queryable. These tests drive the SDK and the CLI against a real
workspace (real files, real ledger, real LanceDB store, the offline hashing embedder).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

import anchorfs
from anchorfs.cli.commands import cli
from anchorfs.core.errors import InputError, NotFoundError, RevisionError
from anchorfs.core.model import Status, utcnow
from anchorfs.sdk.workspace import Workspace

AUTH = "def issue(user):\n    ttl = 24 * 3600\n    return make_token(user, ttl)\n\n\ndef revoke(token):\n    return drop(token)\n"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "proj"
    path.mkdir()
    (path / "auth.py").write_text(AUTH)
    (path / "db.py").write_text("POOL_SIZE = 10\nTIMEOUT = 30\n")
    anchorfs.init(path)
    return path


@pytest.fixture
def ws(root: Path) -> Iterator[Workspace]:
    with anchorfs.open(root) as w:
        yield w


def instant() -> datetime:
    """A moment strictly between two operations (the clock has microseconds; never collide)."""
    time.sleep(0.002)
    t = utcnow()
    time.sleep(0.002)
    return t


def contents(hits: list) -> set[str]:
    return {h.memory.content for h in hits}


def run(root: Path, *args: str) -> dict:
    result = CliRunner().invoke(cli, ["--root", str(root), "--json", *args])
    assert result.exit_code == 0, (result.output, result.exception)
    return orjson.loads(result.stdout)


# -- supersede ----------------------------------------------------------------------------

def test_supersede_round_trip_keeps_the_old_belief_bounded(ws: Workspace) -> None:
    old = ws.record("token expiry is 24h", kind="constraint", tags=["auth", "tokens"],
                    anchors=["auth.py#issue", "db.py:1"])
    new = ws.supersede(old.id, "token expiry is 12h", reason="security review")

    assert new.id != old.id
    assert new.supersedes == old.id
    assert new.status == Status.ACTIVE
    assert new.reason == "security review"
    # inherited by default: kind, tags and anchors (re-taken against the files as they are)
    assert new.kind == "constraint"
    assert new.tags == ("auth", "tokens")
    assert [(a.path, a.symbol, a.lines) for a in new.anchors] == [(a.path, a.symbol, a.lines) for a in old.anchors]
    assert [a.sha256 for a in new.anchors] == [a.sha256 for a in old.anchors]

    retired = ws.get(old.id)
    assert retired.status == Status.SUPERSEDED
    assert retired.superseded_by == new.id
    assert retired.valid_until == new.valid_from == new.recorded_at
    assert retired.content == "token expiry is 24h"  # the old belief keeps its content
    assert retired.anchors == old.anchors
    assert ws.get(new.id).supersedes == old.id


def test_supersede_with_new_anchors_kind_and_tags_replaces_them(ws: Workspace, root: Path) -> None:
    old = ws.record("pool size is 10", kind="constraint", tags=["db"], anchors=["db.py:1"])
    new = ws.supersede(old.id, "pool and timeout live in db.py", anchors=["db.py"], kind="reference", tags=["infra"])
    assert new.kind == "reference"
    assert new.tags == ("infra",)
    assert [(a.path, a.lines) for a in new.anchors] == [("db.py", None)]


def test_supersede_inherits_anchors_where_the_lines_moved(ws: Workspace, root: Path) -> None:
    old = ws.record("timeout is 30", anchors=["db.py:2"])
    (root / "db.py").write_text("# settings\nPOOL_SIZE = 10\nTIMEOUT = 30\n")
    new = ws.supersede(old.id, "timeout is 30 seconds")
    assert [(a.path, a.lines) for a in new.anchors] == [("db.py", (3, 3))]
    assert new.anchors[0].content_hash == old.anchors[0].content_hash
    assert new.anchors[0].sha256 != old.anchors[0].sha256


def test_supersede_is_refused_on_a_superseded_memory_naming_the_head(ws: Workspace) -> None:
    a = ws.record("retry 3 times")
    b = ws.supersede(a.id, "retry 5 times")
    c = ws.supersede(b.id, "retry 5 times with backoff")
    before = ws.ledger.size()
    with pytest.raises(RevisionError) as exc:
        ws.supersede(a.id, "retry forever")
    assert c.id in str(exc.value)
    assert a.id in str(exc.value)
    with pytest.raises(RevisionError, match=c.id):
        ws.supersede(b.id, "retry forever")
    assert ws.ledger.size() == before
    assert contents(ws.query("retry", k=10)) == {"retry 5 times with backoff"}


def test_supersede_is_refused_on_a_retracted_memory(ws: Workspace) -> None:
    a = ws.record("use redis for sessions")
    ws.retract(a.id, reason="we dropped redis")
    with pytest.raises(RevisionError, match="retracted"):
        ws.supersede(a.id, "use memcached for sessions")


def test_supersede_rejects_bad_input_and_unknown_ids(ws: Workspace) -> None:
    a = ws.record("cache ttl is 60s")
    with pytest.raises(InputError):
        ws.supersede(a.id, "   ")
    with pytest.raises(NotFoundError):
        ws.supersede("01nosuchmemory0000000000000", "x")
    assert ws.get(a.id).status == Status.ACTIVE
    assert len(ws.ledger_entries()) == 1


def test_supersede_accepts_a_unique_id_prefix(ws: Workspace) -> None:
    a = ws.record("logs go to stderr")
    new = ws.supersede(a.id[:12], "logs go to stderr as JSON")
    assert new.supersedes == a.id


def test_a_chain_of_corrections_has_a_history_oldest_first(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANCHORFS_ACTOR", "alice")
    v1 = ws.record("max upload is 10MB", kind="constraint")
    monkeypatch.setenv("ANCHORFS_ACTOR", "bob")
    v2 = ws.supersede(v1.id, "max upload is 20MB", reason="bigger files")
    monkeypatch.setenv("ANCHORFS_ACTOR", "carol")
    v3 = ws.supersede(v2.id, "max upload is 50MB", reason="video support")
    v4 = ws.supersede(v3.id, "max upload is 100MB", reason="customer ask")

    # the chain links both ways and only the head is active
    assert [ws.get(m.id).status for m in (v1, v2, v3)] == ["superseded"] * 3
    assert ws.get(v4.id).status == "active"
    assert ws.get(v1.id).superseded_by == v2.id and ws.get(v2.id).superseded_by == v3.id
    assert ws.get(v3.id).superseded_by == v4.id and v4.supersedes == v3.id
    assert ws.get(v2.id).valid_from == ws.get(v1.id).valid_until
    assert ws.get(v3.id).valid_from == ws.get(v2.id).valid_until

    for anyone in (v1, v2, v3, v4):  # the same chain from any of its members
        events = ws.history(anyone.id)
        assert [(e.op, e.memory.id, e.memory.status) for e in events] == [
            ("record", v1.id, "active"),
            ("supersede", v2.id, "active"),
            ("supersede", v1.id, "superseded"),
            ("supersede", v3.id, "active"),
            ("supersede", v2.id, "superseded"),
            ("supersede", v4.id, "active"),
            ("supersede", v3.id, "superseded"),
        ]
    events = ws.history(v4.id)
    times = [e.at for e in events]
    assert times == sorted(times) and times[0] < times[-1]
    assert [e.actor for e in events][::2] == ["alice", "bob", "carol", "carol"]
    assert [e.reason for e in events][::2] == [None, "bigger files", "video support", "customer ask"]
    assert events[0].memory.author == "alice" and events[-2].memory.author == "carol"

    assert contents(ws.query("max upload", k=10)) == {"max upload is 100MB"}
    # a second chain does not leak into this one's history
    other = ws.record("max download is 1GB")
    ws.supersede(other.id, "max download is 2GB")
    assert {e.memory.id for e in ws.history(v2.id)} == {v1.id, v2.id, v3.id, v4.id}


def test_history_of_an_unknown_id_is_not_found(ws: Workspace) -> None:
    with pytest.raises(NotFoundError):
        ws.history("01zzzzzzzzzzzzzzzzzzzzzzzz")


# -- retract and revert -------------------------------------------------------------------

def test_retract_withdraws_the_belief_with_no_successor(ws: Workspace) -> None:
    a = ws.record("deploys happen on fridays")
    keep = ws.record("deploys need two approvals")
    gone = ws.retract(a.id, reason="never on fridays")
    assert gone.status == Status.RETRACTED
    assert gone.valid_until is not None and gone.valid_until >= a.recorded_at
    assert gone.superseded_by is None
    stored = ws.get(a.id)
    assert stored.status == "retracted" and stored.content == "deploys happen on fridays"
    assert contents(ws.query("deploys fridays approvals")) == {keep.content}
    marked = {h.memory.id: h.memory.status for h in ws.query("deploys fridays", include_superseded=True)}
    assert marked == {a.id: "retracted", keep.id: "active"}
    last = ws.ledger_entries(limit=1)[0]
    assert (last.op, last.reason, [m.id for m in last.memories]) == ("retract", "never on fridays", [a.id])
    with pytest.raises(RevisionError):
        ws.retract(a.id)


def test_revert_undoes_a_retract(ws: Workspace) -> None:
    a = ws.record("feature flags live in flags.yaml")
    ws.retract(a.id, reason="oops")
    back = ws.revert(a.id)
    assert back.status == Status.ACTIVE
    assert back.valid_until is None and back.superseded_by is None
    assert ws.get(a.id).status == "active"
    assert contents(ws.query("feature flags")) == {a.content}
    assert [e.op for e in ws.ledger_entries()] == ["revert", "retract", "record"]


def test_revert_undoes_a_supersede_and_retracts_the_successor(ws: Workspace) -> None:
    a = ws.record("api version is v1", tags=["api"])
    b = ws.supersede(a.id, "api version is v2", reason="migration")
    back = ws.revert(a.id, reason="migration rolled back")
    assert back.status == "active" and back.superseded_by is None and back.valid_until is None
    succ = ws.get(b.id)
    assert succ.status == "retracted"
    assert succ.valid_until is not None and succ.valid_until >= b.recorded_at
    assert succ.supersedes == a.id  # the successor still says where it came from
    assert contents(ws.query("api version")) == {"api version is v1"}
    assert {h.memory.id: h.memory.status for h in ws.query("api version", include_superseded=True)} == {
        a.id: "active", b.id: "retracted"}

    # the revert is itself a ledger entry, holding both snapshots
    last = ws.ledger_entries(limit=1)[0]
    assert last.op == "revert" and last.reason == "migration rolled back"
    assert {m.id: m.status for m in last.memories} == {a.id: "active", b.id: "retracted"}
    # and a reverted memory can be corrected again
    c = ws.supersede(a.id, "api version is v3")
    assert ws.get(a.id).superseded_by == c.id


def test_history_of_a_reverted_memory_still_shows_its_former_successor(ws: Workspace) -> None:
    a = ws.record("queue is rabbitmq")
    b = ws.supersede(a.id, "queue is kafka", reason="scale")
    ws.revert(a.id, reason="kafka too heavy")
    want = [
        ("record", a.id, "active"),
        ("supersede", b.id, "active"),
        ("supersede", a.id, "superseded"),
        ("revert", a.id, "active"),
        ("revert", b.id, "retracted"),
    ]
    assert [(e.op, e.memory.id, e.memory.status) for e in ws.history(b.id)] == want
    assert [(e.op, e.memory.id, e.memory.status) for e in ws.history(a.id)] == want


def test_revert_refusals(ws: Workspace) -> None:
    a = ws.record("build with make")
    with pytest.raises(RevisionError, match="active"):
        ws.revert(a.id)
    b = ws.supersede(a.id, "build with just")
    c = ws.supersede(b.id, "build with nix")
    # reverting the root while its successor is itself superseded would fork the chain
    with pytest.raises(RevisionError, match=c.id):
        ws.revert(a.id)
    ws.revert(b.id)  # step back one correction at a time
    assert ws.get(c.id).status == "retracted" and ws.get(b.id).status == "active"
    ws.revert(a.id)
    assert ws.get(b.id).status == "retracted" and ws.get(a.id).status == "active"
    assert contents(ws.query("build with")) == {"build with make"}


# -- recall --------------------------------------------------------------------------------

def test_recall_returns_active_only_unless_asked(ws: Workspace, root: Path) -> None:
    a = ws.record("the cache is lru")
    b = ws.supersede(a.id, "the cache is lfu")
    c = ws.record("the cache holds 1000 entries")
    ws.retract(c.id)
    assert [h.memory.id for h in ws.query("cache")] == [b.id]
    every = {h.memory.id: h.memory.status for h in ws.query("cache", include_superseded=True)}
    assert every == {a.id: "superseded", b.id: "active", c.id: "retracted"}

    out = run(root, "query", "cache", "--include-superseded")
    assert {h["id"]: h["status"] for h in out["hits"]} == every
    old = next(h for h in out["hits"] if h["id"] == a.id)
    assert old["superseded_by"] == b.id and old["valid_until"] is not None
    text = CliRunner().invoke(cli, ["--root", str(root), "query", "cache", "--include-superseded"]).output
    short = ws.short_ids([a.id, b.id, c.id])  # the ids a person reads and types back
    assert f" {short[a.id]} (superseded)" in text and f" {short[c.id]} (retracted)" in text
    assert f" {short[b.id]} (" not in text
    assert f"SUPERSEDED by {short[b.id]} on " in text and b.id not in text  # its successor, as it is typed back
    assert [h["id"] for h in run(root, "query", "cache")["hits"]] == [b.id]


def test_as_of_two_interleaved_chains(ws: Workspace, root: Path) -> None:
    """Each instant gets the combination that held then, including ones no query now can give."""
    t0 = instant()
    a1 = ws.record("service port is 8080", tags=["cfg"])
    b1 = ws.record("service region is eu-west", tags=["cfg"])
    t1 = instant()
    a2 = ws.supersede(a1.id, "service port is 9090")
    t2 = instant()
    b2 = ws.supersede(b1.id, "service region is us-east")
    t3 = instant()
    a3 = ws.supersede(a2.id, "service port is 443")
    t4 = instant()
    ws.retract(b2.id, reason="region is per customer")
    t5 = instant()

    expected = {
        t0: set(),
        t1: {a1.content, b1.content},
        t2: {a2.content, b1.content},  # corrected port, original region
        t3: {a2.content, b2.content},
        t4: {a3.content, b2.content},
        t5: {a3.content},
    }
    for when, want in expected.items():
        assert contents(ws.query("service port region", k=10, as_of=when)) == want, when
        # an ISO string works the same
        assert contents(ws.query("service port region", k=10, as_of=when.isoformat())) == want, when
    # now: the same as t5, and include_superseded still shows all of them
    assert contents(ws.query("service port region", k=10)) == expected[t5]
    assert len(ws.query("service port region", k=10, include_superseded=True)) == 5

    # the CLI agrees
    for when in (t2, t3):
        out = run(root, "query", "service port region", "-k", "10", "--as-of", when.isoformat())
        assert {h["content"] for h in out["hits"]} == expected[when]


def test_as_of_hit_is_the_memory_as_it_stood_then(ws: Workspace, root: Path) -> None:
    """Asked what it believed at an instant, the store answers with the memory as it was then:
    active, unbounded, anchored as then; and an as-of read writes no drift back."""
    a = ws.record("the pool size is 10", anchors=["db.py"])
    t1 = instant()
    b = ws.supersede(a.id, "the pool size is 20")
    (root / "db.py").write_text("POOL_SIZE = 20\nTIMEOUT = 30\n")
    b2 = ws.reanchor(b.id)
    t2 = instant()

    [then] = ws.query("pool size", as_of=t1)
    assert then.memory.id == a.id and then.memory.status == "active"
    assert then.memory.valid_until is None and then.memory.superseded_by is None
    assert then.drift.value == "stale" and "[STALE" in then.envelope  # its ground moved since
    assert then.to_dict()["status"] == "active"
    [now] = ws.query("pool size")
    assert now.memory.id == b.id and now.drift.value == "fresh"
    assert ws.get(a.id).status == "superseded"  # the ledger is untouched by the as-of read

    (root / "db.py").write_text("POOL_SIZE = 30\nTIMEOUT = 30\n")
    c = ws.reanchor(b.id)  # re-anchored after t2: t2's anchors (POOL_SIZE = 20) are stale now
    assert c.anchors != b2.anchors
    [old] = ws.query("pool size", as_of=t2)
    assert old.memory.id == b.id and old.memory.anchors == b2.anchors
    assert old.drift.value == "stale"
    assert b.id not in {m.id for m in ws.list(drift="stale")}  # not written back: it is fresh now
    assert run(root, "query", "pool size", "--as-of", t2.isoformat())["hits"][0]["status"] == "active"


def test_as_of_respects_revert(ws: Workspace) -> None:
    a = ws.record("the linter is flake8")
    t1 = instant()
    ws.supersede(a.id, "the linter is ruff")
    t2 = instant()
    ws.revert(a.id)
    t3 = instant()
    assert contents(ws.query("linter", as_of=t1)) == {"the linter is flake8"}
    assert contents(ws.query("linter", as_of=t2)) == {"the linter is ruff"}
    assert contents(ws.query("linter", as_of=t3)) == {"the linter is flake8"}


def test_as_of_relative_and_bad_times(ws: Workspace, root: Path) -> None:
    ws.record("the scheduler runs hourly")
    # everything here was recorded after 7 days ago: the store then was empty
    assert ws.query("scheduler", as_of="7d") == []
    assert run(root, "query", "scheduler", "--as-of", "7d")["hits"] == []
    # an instant in the future sees what holds now
    later = (utcnow() + timedelta(days=1)).isoformat()
    assert contents(ws.query("scheduler", as_of=later)) == {"the scheduler runs hourly"}
    with pytest.raises(InputError):
        ws.query("scheduler", as_of="last tuesday")
    bad = CliRunner().invoke(cli, ["--root", str(root), "query", "scheduler", "--as-of", "yesterday-ish"])
    assert bad.exit_code != 0


# -- the CLI -------------------------------------------------------------------------------

def test_cli_supersede_retract_revert_history(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANCHORFS_ACTOR", "dana")
    first = run(root, "record", "session timeout is 15m", "--kind", "constraint", "--tag", "auth",
                "--anchor", "auth.py#issue")
    second = run(root, "supersede", first["id"], "session timeout is 30m", "--reason", "support tickets")
    assert second["supersedes"] == first["id"]
    assert second["kind"] == "constraint" and second["tags"] == ["auth"]
    assert [(a["path"], a["symbol"]) for a in second["anchors"]] == [("auth.py", "issue")]
    assert run(root, "show", first["id"])["status"] == "superseded"

    third = run(root, "supersede", second["id"], "session timeout is 1h", "--anchor", "auth.py:2",
                "--reason", "fewer logins")
    assert [(a["path"], a["lines"]) for a in third["anchors"]] == [("auth.py", [2, 2])]

    refused = CliRunner().invoke(cli, ["--root", str(root), "supersede", first["id"], "session timeout is 2h"])
    assert refused.exit_code != 0
    assert isinstance(refused.exception, RevisionError) and third["id"] in str(refused.exception)

    retracted = run(root, "retract", third["id"], "--reason", "not decided yet")
    assert retracted["status"] == "retracted" and retracted["valid_until"]
    reverted = run(root, "revert", third["id"])
    assert reverted["status"] == "active" and reverted["valid_until"] is None

    hist = run(root, "history", second["id"])
    assert hist["id"] == second["id"]
    ops = [(e["op"], e["id"], e["status"]) for e in hist["events"]]
    assert ops == [
        ("record", first["id"], "active"),
        ("supersede", second["id"], "active"),
        ("supersede", first["id"], "superseded"),
        ("supersede", third["id"], "active"),
        ("supersede", second["id"], "superseded"),
        ("retract", third["id"], "retracted"),
        ("revert", third["id"], "active"),
    ]
    assert all(e["actor"] == "dana" and e["at"] for e in hist["events"])
    assert [e["reason"] for e in hist["events"]] == [
        None, "support tickets", "support tickets", "fewer logins", "fewer logins", "not decided yet", None]
    assert hist["events"][0]["memory"]["content"] == "session timeout is 15m"

    text = CliRunner().invoke(cli, ["--root", str(root), "history", second["id"]]).output
    with anchorfs.open(root) as ws:
        shown = ws.short_ids([first["id"]])[first["id"]]  # as a person types it back: 6 characters or more
    assert "support tickets" in text and "dana" in text and f"{shown}: session timeout is 15m" in text

    entries = run(root, "ledger", "--since", "7d", "--limit", "3")["entries"]
    assert [e["op"] for e in entries] == ["revert", "retract", "supersede"]


# -- issue 37, item 1: a changed line anchor is re-taken where its text went, never at its old numbers

def _conf_repo(tmp_path: Path, *, commit: bool = True) -> Path:
    from conftest import git

    repo = tmp_path / "conf"
    repo.mkdir()
    (repo / "conf.py").write_text("A = 1\nB = 2\nTIMEOUT = 30\nC = 3\n")
    if commit:
        git(repo, "init", "-q")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "conf")
    anchorfs.init(repo)
    return repo


def _anchored_text(repo: Path, memory: anchorfs.Memory) -> list[str]:
    a, b = memory.anchors[0].lines or (0, 0)
    return (repo / memory.anchors[0].path).read_text().splitlines()[a - 1:b]


@pytest.mark.parametrize("how", ["supersede", "reanchor"])
def test_a_changed_line_anchor_is_retaken_where_its_text_went(tmp_path: Path, how: str) -> None:
    repo = _conf_repo(tmp_path)
    with anchorfs.open(repo) as w:
        old = w.record("TIMEOUT is 30 seconds", anchors=["conf.py:3"])
        (repo / "conf.py").write_text("# header\n# more\nA = 1\nB = 2\nTIMEOUT = 60\nC = 3\n")
        assert w.check(old).drift is anchorfs.Drift.STALE
        new = w.supersede(old.id, "TIMEOUT is 60 seconds", reason="raised") if how == "supersede" else w.reanchor(old.id)
        assert new.anchors[0].lines == (5, 5) and _anchored_text(repo, new) == ["TIMEOUT = 60"]
        assert w.check(new).drift is anchorfs.Drift.FRESH


def test_a_changed_line_anchor_whose_text_is_nowhere_near_is_refused(tmp_path: Path) -> None:
    repo = _conf_repo(tmp_path)
    with anchorfs.open(repo) as w:
        old = w.record("TIMEOUT is 30 seconds", anchors=["conf.py:3"])
        (repo / "conf.py").write_text("# rewritten\nRETRIES = 5\nHOST = 'db'\n")
        before = (repo / ".anchorfs" / "ledger.jsonl").read_bytes()
        with pytest.raises(anchorfs.AnchorError, match=r"cannot re-take conf\.py:3 .* --anchor SPEC"):
            w.supersede(old.id, "TIMEOUT is gone")
        assert (repo / ".anchorfs" / "ledger.jsonl").read_bytes() == before
        assert w.supersede(old.id, "TIMEOUT is gone", anchors=["conf.py:2"]).anchors[0].lines == (2, 2)


def test_without_git_a_changed_line_anchor_is_refused_in_one_line(tmp_path: Path) -> None:
    repo = _conf_repo(tmp_path, commit=False)
    with anchorfs.open(repo) as w:
        old = w.record("TIMEOUT is 30 seconds", anchors=["conf.py:3"])
    (repo / "conf.py").write_text("# header\n# more\nA = 1\nB = 2\nTIMEOUT = 60\nC = 3\n")
    import os
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "anchorfs", "--root", str(repo), "supersede", old.id,
                           "TIMEOUT is 60 seconds"], capture_output=True, text=True, check=False,
                          env={**os.environ, "ANCHORFS_NO_SERVER": "1"})
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr.count("\n") == 1 and "not in git" in proc.stderr and "--anchor SPEC" in proc.stderr
    with anchorfs.open(repo) as w:
        assert [m.id for m in w.list()] == [old.id]
