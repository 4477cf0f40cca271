"""The ledger is the record: appends fsynced before the store is touched, torn lines survived,
crashes between ledger and store repaired on open, the store rebuilt from it alone, and
several writer processes at once losing nothing.

Real processes, real files, the offline hashing embedder. Faults are injected through
ANCHORFS_TEST_FAULT (tests only): `ledger-append` makes the append fail, `kill-after-ledger`
kills the process between the ledger append and the store write.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
import warnings
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

import anchorfs
from anchorfs.cli.commands import cli, main
from anchorfs.core.errors import LedgerError
from anchorfs.ledger.log import Entry, Ledger, current_actor, fold
from anchorfs.core.statefs import FAULT_ENV
from anchorfs.core.model import Memory, new_id, utcnow
from anchorfs.store.table import Store
from anchorfs.sdk.workspace import Workspace

PY = sys.executable


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "proj"
    path.mkdir()
    (path / "app.py").write_text("def handler(event):\n    return event['body']\n")
    anchorfs.init(path)
    return path


@pytest.fixture
def ws(root: Path) -> Iterator[Workspace]:
    with anchorfs.open(root) as w:
        yield w


def ledger_lines(root: Path) -> list[dict]:
    raw = (root / ".anchorfs" / "ledger.jsonl").read_bytes()
    assert raw == b"" or raw.endswith(b"\n")
    return [orjson.loads(line) for line in raw.splitlines()]


def store_state(ws: Workspace) -> dict[str, str]:
    """id -> status of every row in the store (any status), read from LanceDB itself."""
    table = ws.store.table()
    rows = table.search().select(["id", "status"]).limit(max(1, table.count_rows())).to_list()
    return {r["id"]: r["status"] for r in rows}


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANCHORFS_")}
    env.update(extra)
    return env


def run_cli(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "anchorfs.cli.commands", "--root", str(root), *args],
                          env=child_env(**env), capture_output=True, text=True, timeout=120)


def mem(content: str) -> Memory:
    now = utcnow()
    return Memory(id=new_id(), content=content, recorded_at=now, valid_from=now)


# -- entries and lines ---------------------------------------------------------------------

def test_every_mutation_appends_one_full_snapshot_line(ws: Workspace, root: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANCHORFS_ACTOR", "ci-bot")
    a = ws.record("retries are capped at 3", kind="constraint", tags=["net"], anchors=["app.py#handler"])
    b = ws.supersede(a.id, "retries are capped at 5", reason="flaky upstream")
    ws.retract(b.id, reason="cap removed")
    ws.revert(b.id, reason="cap is back")
    ws.reanchor(b.id)

    lines = ledger_lines(root)
    assert [line["op"] for line in lines] == ["record", "supersede", "retract", "revert", "reanchor"]
    assert [line["reason"] for line in lines] == [None, "flaky upstream", "cap removed", "cap is back", None]
    assert all(line["actor"] == "ci-bot" and line["v"] == 1 for line in lines)
    assert len({line["tx"] for line in lines}) == 5
    ats = [line["at"] for line in lines]
    assert ats == sorted(ats)
    # full snapshots: every field of every memory touched, enough to rebuild it
    first = lines[0]["memories"][0]
    assert first["id"] == a.id and first["content"] == a.content and first["kind"] == "constraint"
    assert first["tags"] == ["net"] and first["anchors"][0]["symbol"] == "handler"
    assert first["anchors"][0]["sha256"] == a.anchors[0].sha256
    assert {m["id"]: m["status"] for m in lines[1]["memories"]} == {a.id: "superseded", b.id: "active"}
    assert Memory.from_dict(lines[1]["memories"][1]) == ws.history(a.id)[2].memory
    for line in lines:
        for m in line["memories"]:
            assert set(m) >= {"id", "content", "kind", "tags", "anchors", "author", "recorded_at",
                              "valid_from", "valid_until", "status", "supersedes", "superseded_by"}
    # the fold of the ledger is the state
    assert fold(ws.ledger.read()) == {m.id: m for m in ws.list(status="all")}


def test_actor_defaults_to_the_user_name(ws: Workspace, root: Path) -> None:
    import getpass

    assert "ANCHORFS_ACTOR" not in os.environ
    ws.record("the actor is whoever runs it")
    assert current_actor() == getpass.getuser()
    assert ledger_lines(root)[0]["actor"] == getpass.getuser()


def test_entry_round_trip_and_unknown_versions() -> None:
    e = Entry.new("record", [mem("x")], reason="why", actor="me")
    assert Entry.from_dict(orjson.loads(orjson.dumps(e.to_dict()))) == e
    with pytest.raises(ValueError):
        Entry.from_dict({**e.to_dict(), "v": 99})
    with pytest.raises(ValueError):
        Entry.from_dict({**e.to_dict(), "op": "delete"})


def test_the_ledger_is_fsynced_before_the_store_is_touched(ws: Workspace, root: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    a = ws.record("warm up the store")
    ledger_path = root / ".anchorfs" / "ledger.jsonl"
    events: list[str] = []
    real_fsync, real_add, real_upsert = os.fsync, Store.add, Store.upsert

    def fsync(fd: int) -> None:
        real_fsync(fd)
        if os.path.samestat(os.fstat(fd), ledger_path.stat()):
            events.append("fsync")

    def add(self: Store, memories: list[Memory]) -> None:
        events.append("add")
        real_add(self, memories)

    def upsert(self: Store, memories: list[Memory]) -> None:
        if memories:
            events.append("upsert")
        real_upsert(self, memories)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(Store, "add", add)
    monkeypatch.setattr(Store, "upsert", upsert)
    ws.record("one more")
    ws.supersede(a.id, "warm up the store first")
    assert events == ["fsync", "add", "fsync", "upsert"]


# -- a failed append means nothing happened -------------------------------------------------

def _snapshot(ws: Workspace, root: Path) -> tuple[bytes, dict[str, str], list[str]]:
    ledger_path = root / ".anchorfs" / "ledger.jsonl"
    raw = ledger_path.read_bytes() if ledger_path.is_file() else b"<dir>"
    return raw, store_state(ws), [m.id + m.status for m in ws.list(status="all")]


def test_an_unwritable_ledger_refuses_every_mutation(ws: Workspace, root: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    a = ws.record("the api is rest", anchors=["app.py"])
    b = ws.record("the queue is sqs")
    ws.retract(b.id)
    before = _snapshot(ws, root)

    monkeypatch.setenv(FAULT_ENV, "ledger-append")
    attempts = [
        lambda: ws.record("the api is graphql"),
        lambda: ws.record_many([{"content": "x"}, {"content": "y"}]),
        lambda: ws.supersede(a.id, "the api is grpc"),
        lambda: ws.retract(a.id),
        lambda: ws.revert(b.id),
        lambda: ws.reanchor(a.id),
    ]
    for attempt in attempts:
        with pytest.raises(LedgerError, match="nothing was written"):
            attempt()
        assert _snapshot(ws, root) == before
    # a fresh process-like open sees the same, untouched store
    with anchorfs.open(root) as again:
        assert _snapshot(again, root) == before
        assert [h.memory.id for h in again.query("api")] == [a.id]

    # the CLI: one clear line on stderr, exit 1, no traceback
    r = run_cli(root, "supersede", a.id, "the api is soap", **{FAULT_ENV: "ledger-append"})
    assert r.returncode == 1
    assert r.stderr.startswith("anchorfs: error: cannot append to the ledger") and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1

    monkeypatch.delenv(FAULT_ENV)
    c = ws.supersede(a.id, "the api is grpc")
    assert ws.get(a.id).superseded_by == c.id
    assert len(ledger_lines(root)) == 4


def test_a_ledger_replaced_by_a_folder_refuses_writes(ws: Workspace, root: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    ws.record("the api is rest")
    rows = store_state(ws)
    ledger_path = root / ".anchorfs" / "ledger.jsonl"
    saved = ledger_path.read_bytes()
    ledger_path.unlink()
    ledger_path.mkdir()
    with pytest.raises(LedgerError):
        ws.record("the api is graphql")
    with pytest.raises(LedgerError):
        anchorfs.open(root).record("the api is graphql")
    with pytest.raises(SystemExit) as exc:
        main(["--root", str(root), "record", "the api is soap"])
    assert exc.value.code == 1
    err = capsys.readouterr().err
    assert "ledger" in err and "Traceback" not in err
    ledger_path.rmdir()
    ledger_path.write_bytes(saved)
    with anchorfs.open(root) as again:
        assert store_state(again) == rows


def test_a_failed_fsync_leaves_no_half_record(ws: Workspace, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws.record("first")
    before = _snapshot(ws, root)

    def broken(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(LedgerError, match="Input/output error"):
        ws.record("second")
    monkeypatch.undo()
    assert _snapshot(ws, root) == before


# -- torn and bad lines ---------------------------------------------------------------------

def test_a_torn_last_line_is_skipped_with_a_warning_then_cut_off(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    first = Entry.new("record", [mem("one")])
    second = Entry.new("record", [mem("two")])
    ledger.append([first, second])
    with open(ledger.path, "ab") as fh:
        fh.write(b'{"v": 1, "tx": "01torn", "op": "record", "memo')
    with pytest.warns(UserWarning, match="torn"):
        assert list(ledger.read()) == [first, second]

    third = Entry.new("record", [mem("three")])
    with ledger.lock():
        size = ledger.append([third])
    assert size == ledger.size()
    lines = ledger.path.read_bytes().splitlines(keepends=True)
    assert all(line.endswith(b"\n") for line in lines) and len(lines) == 3
    assert [orjson.loads(line)["tx"] for line in lines] == [first.tx, second.tx, third.tx]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert list(ledger.read()) == [first, second, third]


def test_a_ledger_that_is_only_a_torn_line(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    ledger.path.write_bytes(b'{"v": 1, "op": "rec')
    with pytest.warns(UserWarning, match="torn"):
        assert list(ledger.read()) == []
    e = Entry.new("record", [mem("one")])
    ledger.append([e])
    assert list(ledger.read()) == [e]


def test_a_bad_line_in_the_middle_is_skipped_not_fatal(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    a, b = Entry.new("record", [mem("a")]), Entry.new("record", [mem("b")])
    ledger.append([a])
    with open(ledger.path, "ab") as fh:
        fh.write(b"this is not json\n")
        fh.write(b'{"v": 7, "tx": "x"}\n')
    ledger.append([b])
    with pytest.warns(UserWarning, match="bad line"):
        assert list(ledger.read()) == [a, b]


def test_read_until_keeps_entries_written_out_of_time_order(tmp_path: Path) -> None:
    """Writers take their time before the lock, so `at` need not grow along the file."""
    ledger = Ledger(tmp_path)
    t0 = utcnow()
    late = Entry.new("record", [mem("late")], at=t0 + timedelta(seconds=10))
    early = Entry.new("record", [mem("early")], at=t0 + timedelta(seconds=1))
    ledger.append([late])
    ledger.append([early])
    assert [e.tx for e in ledger.read(until=t0 + timedelta(seconds=5))] == [early.tx]
    assert [e.tx for e in ledger.read(until=t0 + timedelta(seconds=20))] == [late.tx, early.tx]
    assert list(ledger.read(until=t0)) == []


def test_a_workspace_survives_a_torn_ledger(ws: Workspace, root: Path) -> None:
    a = ws.record("alpha memory")
    with open(root / ".anchorfs" / "ledger.jsonl", "ab") as fh:
        fh.write(b'{"v": 1, "tx": "01torn", "op": "supers')
    with pytest.warns(UserWarning, match="torn"):
        again = anchorfs.open(root)
        assert [m.id for m in again.list()] == [a.id]
        assert [h.memory.id for h in again.query("alpha")] == [a.id]
    b = again.record("beta memory")  # cuts the torn tail off before appending
    lines = ledger_lines(root)
    assert [line["memories"][0]["id"] for line in lines] == [a.id, b.id]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fresh = anchorfs.open(root)
        assert {m.id for m in fresh.list()} == {a.id, b.id}
        assert store_state(fresh) == {a.id: "active", b.id: "active"}


# -- crash between ledger and store ----------------------------------------------------------

def _applied(root: Path) -> int:
    return orjson.loads((root / ".anchorfs" / "applied").read_bytes())["offset"]


def test_a_process_killed_after_the_ledger_append_is_repaired_on_open(ws: Workspace, root: Path) -> None:
    first = ws.record("the first memory, stored normally")
    assert store_state(ws) == {first.id: "active"}

    r = run_cli(root, "record", "the webhook secret rotates monthly", "--anchor", "app.py#handler",
                **{FAULT_ENV: "kill-after-ledger"})
    assert r.returncode == 137, r.stderr
    lines = ledger_lines(root)
    assert len(lines) == 2
    lost = lines[1]["memories"][0]
    assert lost["content"] == "the webhook secret rotates monthly"
    # the store is behind the ledger: the write never reached it
    assert _applied(root) < (root / ".anchorfs" / "ledger.jsonl").stat().st_size
    raw = Store(root / ".anchorfs", ws.embedder)
    assert raw.count() == 1

    with anchorfs.open(root) as fresh:
        assert store_state(fresh) == {first.id: "active", lost["id"]: "active"}
        hits = fresh.query("webhook secret rotation")
        assert hits[0].memory.id == lost["id"]
        assert hits[0].memory.anchors[0].symbol == "handler"
    assert _applied(root) == (root / ".anchorfs" / "ledger.jsonl").stat().st_size
    with anchorfs.open(root) as again:  # replaying is idempotent: nothing doubled
        assert again.store.count() == 2
    assert sum(1 for line in ledger_lines(root) for m in line["memories"] if m["id"] == lost["id"]) == 1

    # a crashed supersede is repaired too, statuses and all
    r = run_cli(root, "supersede", first.id, "the first memory, corrected", "--reason", "typo",
                **{FAULT_ENV: "kill-after-ledger"})
    assert r.returncode == 137, r.stderr
    new_id_ = ledger_lines(root)[-1]["memories"][0]["id"]
    with anchorfs.open(root) as fresh:
        assert store_state(fresh) == {first.id: "superseded", lost["id"]: "active", new_id_: "active"}
        assert [h.memory.id for h in fresh.query("the first memory")][0] == new_id_
        assert fresh.get(first.id).superseded_by == new_id_


def test_a_crash_into_a_torn_ledger_is_still_repaired(ws: Workspace, root: Path) -> None:
    """Torn tail read (and checkpointed past), then a crash after the next append: nothing lost."""
    a = ws.record("alpha")
    with open(root / ".anchorfs" / "ledger.jsonl", "ab") as fh:
        fh.write(b'{"v": 1, "op": "rec')
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        anchorfs.open(root).store  # noqa: B018 - opening the store catches up with the ledger
    # the checkpoint stays at the last whole line, never inside the torn tail
    assert _applied(root) == (root / ".anchorfs" / "ledger.jsonl").stat().st_size - len(b'{"v": 1, "op": "rec')
    r = run_cli(root, "record", "a memory whose line is longer than the torn tail",
                **{FAULT_ENV: "kill-after-ledger"})
    assert r.returncode == 137, r.stderr
    lines = ledger_lines(root)
    assert len(lines) == 2
    with anchorfs.open(root) as fresh:
        assert store_state(fresh) == {a.id: "active", lines[1]["memories"][0]["id"]: "active"}


def test_a_missing_store_is_rebuilt_on_open(ws: Workspace, root: Path) -> None:
    a = ws.record("gamma")
    b = ws.supersede(a.id, "delta")
    shutil.rmtree(root / ".anchorfs" / "memories.lance")
    with anchorfs.open(root) as fresh:
        assert store_state(fresh) == {a.id: "superseded", b.id: "active"}


# -- reindex from the ledger alone ----------------------------------------------------------

def _answers(ws: Workspace, ids: list[str], instants: list) -> dict:
    texts = ["port", "region", "cache", "retry backoff", "service config"]
    return {
        "query": {t: [(h.memory.id, h.memory.status, h.score) for h in ws.query(t, k=20)] for t in texts},
        "all": {t: [(h.memory.id, h.memory.status) for h in ws.query(t, k=20, include_superseded=True)]
                for t in texts},
        "history": {i: [e.to_dict() for e in ws.history(i)] for i in ids},
        "as_of": {str(w): {t: [h.memory.id for h in ws.query(t, k=20, as_of=w)] for t in texts} for w in instants},
        "list": [m.to_dict() for m in ws.list(status="all")],
    }


def _same_answers(got: dict, want: dict) -> None:
    """Equal answers: the same hits in the same order, the same scores (float noise aside). A
    store written row by row folds each write into its full-text index (`Store.settle`), so it
    scores BM25 as a reindexed one does; unindexed rows scored otherwise (0.234 against 0.373
    for the same "retry backoff" memory), which once made this tolerance 0.15."""
    assert {k: v for k, v in got.items() if k != "query"} == {k: v for k, v in want.items() if k != "query"}
    for text, hits in want["query"].items():
        assert [h[:2] for h in got["query"][text]] == [h[:2] for h in hits], text
        assert all(abs(a[2] - b[2]) <= 1e-9 for a, b in zip(got["query"][text], hits)), text


def test_reindex_from_the_ledger_alone_gives_the_same_answers(ws: Workspace, root: Path) -> None:
    def instant():  # noqa: ANN202
        time.sleep(0.002)
        return utcnow()

    instants = [instant()]
    p1 = ws.record("service port is 8080", tags=["service", "config"], anchors=["app.py#handler"])
    r1 = ws.record("service region is eu-west", tags=["service", "config"])
    c1 = ws.record("cache is lru with 1000 entries")
    ws.record_many([{"content": f"retry backoff step {i}"} for i in range(5)])
    instants.append(instant())
    p2 = ws.supersede(p1.id, "service port is 9090", reason="conflict")
    instants.append(instant())
    r2 = ws.supersede(r1.id, "service region is us-east")
    instants.append(instant())
    p3 = ws.supersede(p2.id, "service port is 443", reason="tls")
    ws.retract(c1.id, reason="cache removed")
    instants.append(instant())
    ws.revert(r1.id)
    ws.revert(c1.id)
    instants.append(instant())
    ids = [p1.id, p2.id, p3.id, r1.id, r2.id, c1.id]
    before = _answers(ws, ids, instants)
    assert before["as_of"][str(instants[2])]["service config"] != before["query"]["service config"]

    shutil.rmtree(root / ".anchorfs" / "memories.lance")
    (root / ".anchorfs" / "applied").unlink()
    with anchorfs.open(root) as fresh:
        assert fresh.reindex() == 11
        _same_answers(_answers(fresh, ids, instants), before)
    # the CLI command, on a store that is gone again
    shutil.rmtree(root / ".anchorfs" / "memories.lance")
    out = CliRunner().invoke(cli, ["--root", str(root), "--json", "reindex"])
    assert out.exit_code == 0, out.output
    assert orjson.loads(out.stdout)["memories"] == 11
    with anchorfs.open(root) as fresh:
        _same_answers(_answers(fresh, ids, instants), before)
        assert fresh.store.count() == 11


# -- the audit trail -------------------------------------------------------------------------

def test_ledger_entries_newest_first_with_since_and_limit(ws: Workspace, root: Path) -> None:
    a = ws.record("one")
    ws.record("two")
    time.sleep(0.002)
    cut = utcnow()
    ws.supersede(a.id, "one, corrected", reason="fix")
    ws.record("three")

    every = ws.ledger_entries()
    assert [e.op for e in every] == ["record", "supersede", "record", "record"]
    assert [e.at for e in every] == sorted((e.at for e in every), reverse=True)
    assert [e.memories[0].content for e in ws.ledger_entries(since=cut)] == ["three", "one, corrected"]
    assert [e.memories[0].content for e in ws.ledger_entries(since=cut.isoformat())] == ["three", "one, corrected"]
    assert [e.memories[0].content for e in ws.ledger_entries(limit=1)] == ["three"]
    assert len(ws.ledger_entries(since="7d")) == 4
    assert len(ws.ledger_entries(since="2000-01-01")) == 4
    assert ws.ledger_entries(since=utcnow() + timedelta(hours=1)) == []

    out = CliRunner().invoke(cli, ["--root", str(root), "ledger", "--since", "7d", "--limit", "3", "--json"])
    assert out.exit_code == 0, out.output
    entries = orjson.loads(out.stdout)["entries"]
    assert [e["op"] for e in entries] == ["record", "supersede", "record"]
    assert entries[1]["reason"] == "fix" and len(entries[1]["memories"]) == 2
    assert all(e["actor"] and e["at"] and e["tx"] for e in entries)
    text = CliRunner().invoke(cli, ["--root", str(root), "ledger", "--limit", "2"]).output
    assert "supersede" in text and "fix" in text
    bad = CliRunner().invoke(cli, ["--root", str(root), "ledger", "--since", "soon"])
    assert bad.exit_code != 0


# -- several processes at once ---------------------------------------------------------------

WORKER = textwrap.dedent(
    """
    import sys, time
    import anchorfs
    from anchorfs.core.errors import RevisionError

    root, mode, tag, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    ws = anchorfs.open(root)
    start = time.monotonic()
    if mode == "record":
        for i in range(n):
            ws.record(f"memory {tag} number {i}", tags=[tag])
    elif mode == "supersede":  # correct the head of one chain n times
        head = sys.argv[5]
        for i in range(n):
            head = ws.supersede(head, f"chain {tag} version {i + 1}", reason=f"step {i + 1}").id
    elif mode == "burst":  # everybody starts at the same instant on a workspace with no store yet
        import lancedb  # noqa: F401 - imported before the start line, so nobody lags behind
        time.sleep(max(0.0, float(sys.argv[5]) - time.time()))
        for i in range(n):
            ws.record(f"burst {tag} {i}")
    elif mode == "race":  # everybody corrects the same chain: re-aim at the head when refused
        head = sys.argv[5]
        done = 0
        while done < n:
            try:
                head = ws.supersede(head, f"contested {tag} {done}").id
                done += 1
            except RevisionError as exc:
                head = str(exc).rsplit(" ", 1)[-1]
    print(f"{tag} {time.monotonic() - start:.2f}")
    """
)


def _spawn(tmp_path: Path, root: Path, *args: str) -> subprocess.Popen[str]:
    script = tmp_path / "worker.py"
    if not script.exists():
        script.write_text(WORKER)
    return subprocess.Popen([PY, str(script), str(root), *args], env=child_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(procs: list[subprocess.Popen[str]]) -> list[str]:
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
        outs.append(out.strip())
    return outs


def test_four_processes_recording_at_once_lose_nothing(tmp_path: Path, root: Path) -> None:
    start = time.monotonic()
    per = 60  # four writers at once for seconds: as racy as 120 each, at half the suite time
    procs = [_spawn(tmp_path, root, "record", f"p{i}", str(per)) for i in range(4)]
    outs = _finish(procs)
    took = time.monotonic() - start
    print(f"4 x {per} records: {took:.1f}s wall ({', '.join(outs)})")

    lines = ledger_lines(root)
    assert len(lines) == 4 * per
    ids = [m["id"] for line in lines for m in line["memories"]]
    assert len(ids) == 4 * per and len(set(ids)) == 4 * per
    contents = {m["content"] for line in lines for m in line["memories"]}
    assert contents == {f"memory p{i} number {j}" for i in range(4) for j in range(per)}
    with anchorfs.open(root) as ws:
        assert store_state(ws) == {i: "active" for i in ids}
        assert ws.store.count() == 4 * per
        assert len(ws.list()) == 4 * per
        assert _applied(root) == ws.ledger.size()
        hits = ws.query(f"memory p2 number {per - 3}", k=5)
        assert f"memory p2 number {per - 3}" in {h.memory.content for h in hits}


def test_first_writers_racing_to_create_the_store(tmp_path: Path, root: Path) -> None:
    for attempt in range(2):
        ws_root = tmp_path / f"fresh{attempt}"
        ws_root.mkdir()
        anchorfs.init(ws_root)
        go = f"{time.time() + 2.5:.3f}"
        _finish([_spawn(tmp_path, ws_root, "burst", f"b{i}", "3", go) for i in range(4)])
        with anchorfs.open(ws_root) as ws:
            assert ws.store.count() == 12 == len(ledger_lines(ws_root))
            # one full-text index and one on the status filter, neither built twice
            assert sorted(i.columns for i in ws.store.table().list_indices()) == [["status"], ["text"]]


def test_processes_superseding_chains_while_others_record(tmp_path: Path, root: Path) -> None:
    with anchorfs.open(root) as ws:
        heads = [ws.record(f"chain {c} version 0", tags=[c]) for c in ("a", "b")]
    procs = [_spawn(tmp_path, root, "supersede", c, "15", h.id) for c, h in zip("ab", heads)]
    procs += [_spawn(tmp_path, root, "record", f"r{i}", "40") for i in range(2)]
    _finish(procs)

    lines = ledger_lines(root)
    assert len(lines) == 2 + 2 * 15 + 2 * 40
    with anchorfs.open(root) as ws:
        state = fold(ws.ledger.read())
        assert len(state) == 2 + 2 * 15 + 2 * 40
        assert store_state(ws) == {m.id: m.status for m in state.values()}
        for c, root_memory in zip("ab", heads):
            cur, versions = state[root_memory.id], []
            while True:
                versions.append(cur.content)
                if not cur.superseded_by:
                    break
                assert state[cur.superseded_by].supersedes == cur.id
                cur = state[cur.superseded_by]
            assert versions == [f"chain {c} version {i}" for i in range(16)]
            assert len({e.memory.id for e in ws.history(cur.id)}) == 16
            live = [m for m in state.values() if m.content.startswith(f"chain {c} ") and m.status == "active"]
            assert [m.content for m in live] == [f"chain {c} version 15"]
            assert [h.memory.content for h in ws.query(f"chain {c} version", k=50)
                    if h.memory.content.startswith(f"chain {c} ")] == [f"chain {c} version 15"]


def test_processes_racing_to_correct_the_same_memory_keep_one_chain(tmp_path: Path, root: Path) -> None:
    with anchorfs.open(root) as ws:
        first = ws.record("contested belief")
    procs = [_spawn(tmp_path, root, "race", f"w{i}", "8", first.id) for i in range(3)]
    _finish(procs)
    with anchorfs.open(root) as ws:
        state = fold(ws.ledger.read())
        assert len(state) == 1 + 3 * 8
        successors: dict[str, list[str]] = {}
        for m in state.values():
            if m.supersedes:
                successors.setdefault(m.supersedes, []).append(m.id)
        forks = {k: v for k, v in successors.items() if len(v) > 1}
        assert forks == {}, "two corrections of the same memory were both accepted"
        assert [m.status for m in state.values()].count("active") == 1
        for m in state.values():
            if m.supersedes:
                assert state[m.supersedes].superseded_by == m.id


# -- a fold that does not care about line order (issue 21) ----------------------------------

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from anchorfs.ledger.log import FoldState, refold  # noqa: E402


def _two_sides(tmp: Path) -> tuple[list[bytes], list[bytes], list[bytes]]:
    """A common prefix and two sides' appended lines, written by the SDK as two clones would:
    both supersede one memory (a fork), one retracts what the other supersedes (a fork)."""
    tmp.mkdir(parents=True, exist_ok=True)
    anchorfs.init(tmp)
    path = tmp / ".anchorfs" / "ledger.jsonl"
    with anchorfs.open(tmp) as w:
        m1, m2 = w.record("port is 8080"), w.record("retry twice")
        prefix = path.read_bytes()
        w.supersede(m1.id, "port is 9090", author="alice")
        w.supersede(m2.id, "retry three times", author="alice")
        w.record("alice's note")
        ours = path.read_bytes()
    path.write_bytes(prefix)
    with anchorfs.open(tmp) as w:
        w.supersede(m1.id, "port is 443", author="bob")
        w.retract(m2.id, reason="no retries")
        b = w.record("bob's note")
        w.supersede(b.id, "bob's note, corrected", author="bob")
        theirs = path.read_bytes()
    cut = len(prefix)
    return prefix.splitlines(), ours[cut:].splitlines(), theirs[cut:].splitlines()


_SIDES: dict[str, tuple[list[bytes], list[bytes], list[bytes]]] = {}


def _sides(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[bytes], list[bytes], list[bytes]]:
    if "x" not in _SIDES:
        _SIDES["x"] = _two_sides(tmp_path_factory.mktemp("sides"))
    return _SIDES["x"]


def _fold_lines(lines: list[bytes]) -> FoldState:
    return fold([Entry.from_dict(orjson.loads(x)) for x in lines])


def _view(state: FoldState) -> tuple[dict[str, dict], list[tuple[str, list[str]]]]:
    return ({i: m.to_dict() for i, m in state.items()},
            [(f.memory.id, sorted(s.id for s in f.sides)) for f in state.forks()])


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_any_interleaving_a_union_merge_can_produce_folds_the_same(tmp_path_factory: pytest.TempPathFactory,
                                                                  data: st.DataObject) -> None:
    prefix, ours, theirs = _sides(tmp_path_factory)
    want = _view(_fold_lines(prefix + ours + theirs))
    assert len(want[1]) == 2  # both forks are there to be kept
    order = data.draw(st.permutations([0] * len(ours) + [1] * len(theirs)))
    it = [iter(ours), iter(theirs)]
    merged = prefix + [next(it[side]) for side in order]
    dup = data.draw(st.lists(st.sampled_from(merged), max_size=3))  # union keeps a line both sides added twice
    assert _view(_fold_lines(merged + dup)) == want
    # read incrementally, as a long-lived reader takes a ledger that grew: the same fold
    cut = data.draw(st.integers(0, len(merged)))
    head = _fold_lines(merged[:cut])
    grown = refold(head, [Entry.from_dict(orjson.loads(x)) for x in merged[cut:]])
    assert isinstance(grown, FoldState) and _view(grown) == want


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_any_permutation_at_all_folds_the_same(tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    prefix, ours, theirs = _sides(tmp_path_factory)
    lines = prefix + ours + theirs
    assert _view(_fold_lines(data.draw(st.permutations(lines)))) == _view(_fold_lines(lines))


def test_clock_skew_cannot_put_a_supersede_before_its_record(ws: Workspace, root: Path) -> None:
    m = ws.record("tokens last 24h")
    n = ws.supersede(m.id, "tokens last 1h")
    path = root / ".anchorfs" / "ledger.jsonl"
    lines = [orjson.loads(x) for x in path.read_bytes().splitlines()]
    lines[1]["at"] = "2001-01-01T00:00:00Z"  # the superseding machine's clock is years behind
    skewed = [Entry.from_dict(x) for x in reversed(lines)]
    state = fold(skewed)
    assert state[m.id].status == "superseded" and state[m.id].superseded_by == n.id and state[n.id].status == "active"
    assert state.forks() == []


def test_an_earlier_ledger_without_the_new_fields_folds_in_line_order_as_before() -> None:
    now = utcnow()
    a = Memory(id=new_id(), content="v1", recorded_at=now, valid_from=now)
    entries = [Entry.new("record", [a], at=now), Entry.new("reanchor", [a.replace(content="v2")], at=now - timedelta(days=1)),
               Entry.new("reanchor", [a.replace(content="v3")], at=now - timedelta(days=2))]
    lines = [orjson.loads(orjson.dumps(e.to_dict())) for e in entries]
    assert all("seq" not in x and "deps" not in x for x in lines)
    state = fold([Entry.from_dict(x) for x in lines])
    assert state[a.id].content == "v3" and state.forks() == []  # the last line wins, whatever its time
    # a new entry written on top of it outranks every earlier-version line
    from anchorfs.ledger.log import stamped

    top = stamped(Entry.new("reanchor", [a.replace(content="v4")]), state)
    assert top.seq == 1 and top.deps_of(a.id) == (entries[2].tx,)
    assert fold([top, *[Entry.from_dict(x) for x in lines]])[a.id].content == "v4"


def test_bad_dependency_fields_are_a_bad_line(root: Path) -> None:
    now = utcnow()
    a = Memory(id=new_id(), content="x", recorded_at=now, valid_from=now)
    good = Entry.new("record", [a], at=now).to_dict()
    for seq, deps in ((0, {}), ("1", {}), (1, {a.id: "tx"}), (1, [a.id])):
        with pytest.raises(ValueError):
            Entry.from_dict({**good, "seq": seq, "deps": deps})
    e = Entry.from_dict({**good, "seq": 3, "deps": {a.id: ["t1", "t2"]}, "allow_secret": "because"})
    assert e.seq == 3 and e.deps_of(a.id) == ("t1", "t2") and e.allow_secret == "because"
    assert Entry.from_dict(orjson.loads(orjson.dumps(e.to_dict()))) == e


def test_mentions_names_only_the_paths_the_ledger_spells(tmp_path: Path) -> None:
    """What lets a hook answer an edit of a file no memory names without folding: a path the
    ledger's bytes never spell as a JSON string is left out (a text that only mentions it does
    not anchor it); an odd name is kept, for the full path to judge."""
    from anchorfs.core.model import AnchorRef

    state = tmp_path / ".anchorfs"
    state.mkdir()
    led = Ledger(state)
    assert led.mentions(["a.py"]) == []  # no ledger yet
    anchored = Memory(id="m1", content="see b.py too", anchors=(AnchorRef("src/ünï.py", "0" * 64),))
    led.append([Entry.new("record", [anchored])])
    assert led.mentions(["src/ünï.py", "a.py", "b.py", 'odd"name.py']) == ["src/ünï.py", 'odd"name.py']


@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.tuples(st.sampled_from(["record", "supersede", "retract", "revert", "reanchor"]),
                              st.integers(0, 3), st.integers(0, 50)), min_size=1, max_size=12))
def test_fold_on_paths_is_the_whole_fold_of_those_memories(tmp_path_factory: pytest.TempPathFactory,
                                                          ops: list[tuple[str, int, int]]) -> None:
    """What a hook folds for the files it touched (`Ledger.fold_on`) is, memory for memory, what
    the whole fold says, and holds every memory anchored there now (supersedes that move a
    memory to another file, retracts and reverts among them)."""
    import anchorfs

    root = tmp_path_factory.mktemp("foldon")
    paths = ["a.py", "b.py", "src/c.py", "src/d.py"]
    for p in paths:
        (root / p).parent.mkdir(parents=True, exist_ok=True)
        (root / p).write_text(f"{p} = 1\n")
    anchorfs.init(root)
    with anchorfs.open(root) as ws:
        ids: list[str] = []
        for op, where, pick in ops:
            try:
                if op == "record" or not ids:
                    ids.append(ws.record(f"note {len(ids)} on {paths[where]}", anchors=[paths[where]]).id)
                elif op == "supersede":
                    ids.append(ws.supersede(ids[pick % len(ids)], f"moved to {paths[where]}", anchors=[paths[where]]).id)
                elif op == "retract":
                    ws.retract(ids[pick % len(ids)])
                elif op == "revert":
                    ws.revert(ids[pick % len(ids)])
                else:
                    ws.reanchor(ids[pick % len(ids)], anchors=[paths[where]])
            except anchorfs.AnchorfsError:
                pass  # a refused door (a retracted memory superseded, ...): nothing written
        whole = fold(ws.ledger.read())
        for asked in (["a.py"], ["src"], ["src/d.py", "b.py"], ["nothing.py"]):
            got = ws.ledger.fold_on(asked)
            assert all(got[i] == whole[i] for i in got), asked
            on = {i for i, m in whole.items()
                  if any(a.path == p or a.path.startswith(p + "/") for a in m.anchors for p in asked)}
            assert on <= set(got), asked
