"""Faults at each state file: a full disk or a failed write must never leave anything
half-written that is later read back as valid, never lose an acknowledged write, and never
surface as a traceback.

Injected through the test-only switch ANCHORFS_TEST_FAULT (see `anchorfs.core.statefs.fault`):
`ledger-append` (the append refused), `ledger-partial` (half the record lands, then ENOSPC),
`store-write` (every LanceDB write), `applied-write`, `drift-write` and `manifest-write` (half
of the temp file lands, then ENOSPC), `kill-after-ledger` / `kill-after-store` (the process
dies between two steps). Real short writes come from RLIMIT_FSIZE in a child process: the
kernel then writes part of a buffer and fails the rest with EFBIG, like a disk filling up.

After every fault the same check runs (`assert_consistent`): no temp file left, the ledger
ends on a whole line and parses without a warning, every acknowledged memory is in the ledger
and in the store exactly once with the ledger's status, the checkpoint matches the ledger
once a workspace is opened again, and the caches are either the old ones or cold.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from conftest import drift_column

import anchorfs
from anchorfs.sdk import storesync
from anchorfs.core.errors import LedgerError, StoreError
from anchorfs.drift.hashcache import HashCache
from anchorfs.ledger.log import Ledger, fold
from anchorfs.core.statefs import FAULT_ENV, armed, fault
from anchorfs.core.model import Drift, Verdict
from anchorfs.sdk.workspace import Workspace

APP = "def handler(event):\n    return event['body']\n"
LIB = "def helper():\n    return 42\n"
CACHES = ("manifest.json", "drift.json", "applied")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "proj"
    path.mkdir()
    (path / "app.py").write_text(APP)
    (path / "lib.py").write_text(LIB)
    anchorfs.init(path)
    return path


@pytest.fixture
def ws(root: Path) -> Iterator[Workspace]:
    """A workspace with every state file present: ledger, store, checkpoint, drift, manifest."""
    with anchorfs.open(root) as w:
        w.record("the handler returns the body", anchors=["app.py#handler"])
        w.record("the helper returns 42", anchors=["lib.py"])
        w.record("an unanchored note about deployment")
        assert w.query("handler body")
        (root / "lib.py").write_text(LIB + "# edited\n")  # a drift change, so drift.json exists
        w.drift()
        (root / "lib.py").write_text(LIB)
        w.drift()
        w.cache.save()
        for name in ("ledger.jsonl", *CACHES):
            assert (root / ".anchorfs" / name).is_file(), name
        yield w


def state_bytes(root: Path) -> dict[str, bytes | None]:
    state = root / ".anchorfs"
    return {n: (state / n).read_bytes() if (state / n).exists() else None for n in ("ledger.jsonl", *CACHES)}


def acked(ws: Workspace) -> dict[str, str]:
    return {m.id: m.status for m in ws.list(status="all")}


def store_rows(ws: Workspace) -> list[tuple[str, str]]:
    table = ws.store.table()
    rows = table.search().select(["id", "status"]).limit(max(1, table.count_rows())).to_list()
    return [(r["id"], r["status"]) for r in rows]


def assert_consistent(root: Path, expected: dict[str, str]) -> None:
    """Everything on disk reads back valid, and `expected` (id -> status) is all there."""
    state = root / ".anchorfs"
    assert sorted(p.name for p in state.iterdir() if p.name.endswith(".tmp")) == []
    raw = (state / "ledger.jsonl").read_bytes()
    assert raw.endswith(b"\n"), "the ledger ends in half a record"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a torn or bad line would warn
        entries = list(Ledger(state).read())
    assert len(entries) == raw.count(b"\n")
    folded = {mid: m.status for mid, m in fold(entries).items()}
    for mid, status in expected.items():
        assert folded.get(mid) == status, f"acknowledged {mid} ({status}) is not in the ledger as such"
    if (state / "manifest.json").exists():
        assert HashCache(state / "manifest.json")._read_disk()[0], "the manifest does not load"
    if (state / "drift.json").exists():
        data = orjson.loads((state / "drift.json").read_bytes())
        assert data["v"] == 2 and set(data["drift"].values()) <= {d.value for d in Drift}
    with anchorfs.open(root) as again:
        rows = store_rows(again)  # opening the store replays any tail it missed
        assert len(rows) == len({i for i, _ in rows}), "a memory is in the store twice"
        assert dict(rows) == folded
        assert storesync.applied(again.state) == again.ledger.size()


def test_the_switch_is_off_unless_a_test_arms_it(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not armed("ledger-append")
    fault("ledger-append")  # no-op
    monkeypatch.setenv(FAULT_ENV, "drift-write,ledger-append")
    assert armed("ledger-append") and not armed("ledger")
    with pytest.raises(OSError, match="injected fault at ledger-append"):
        fault("ledger-append")


# -- the ledger: a refused or half-written append means nothing happened -----------------------


@pytest.mark.parametrize("point", ["ledger-append", "ledger-partial"])
def test_a_failed_ledger_append_leaves_no_trace(ws: Workspace, root: Path, monkeypatch: pytest.MonkeyPatch,
                                                point: str) -> None:
    before, known = state_bytes(root), acked(ws)
    target = next(m for m in ws.list() if m.anchors)
    monkeypatch.setenv(FAULT_ENV, point)
    with pytest.raises(LedgerError, match="nothing was written"):
        ws.record("x " * 2000)  # big enough that half of it is a real partial write
    with pytest.raises(LedgerError, match="nothing was written"):
        ws.supersede(target.id, "the handler returns the parsed body")  # two snapshots in one line
    with pytest.raises(LedgerError):
        ws.retract(target.id)
    assert state_bytes(root)["ledger.jsonl"] == before["ledger.jsonl"]  # cut back to the byte
    assert acked(ws) == known
    monkeypatch.delenv(FAULT_ENV)
    new = ws.supersede(target.id, "the handler returns the parsed body")
    assert_consistent(root, {**known, target.id: "superseded", new.id: "active"})


# -- the store: the write stands once the ledger has it; the index catches up ----------------


def test_a_failed_store_write_keeps_the_write_and_the_next_use_repairs_it(
        ws: Workspace, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    known = acked(ws)
    target = next(m for m in ws.list() if not m.anchors)
    applied_before = state_bytes(root)["applied"]
    monkeypatch.setenv(FAULT_ENV, "store-write")
    with pytest.warns(UserWarning, match="recorded, but the search index lags"):
        added = ws.record("the retry budget is three attempts")
    assert acked(ws)[added.id] == "active"  # acknowledged, and in the ledger
    assert state_bytes(root)["applied"] == applied_before  # the checkpoint did not move past it
    with pytest.raises(StoreError):  # the store still cannot be written: no silently partial answer
        ws.query("retry budget")
    monkeypatch.delenv(FAULT_ENV)
    assert [h.memory.id for h in ws.query("retry budget attempts", k=1)] == [added.id]  # same process
    monkeypatch.setenv(FAULT_ENV, "store-write")
    with pytest.warns(UserWarning, match="supersede is recorded"):
        new = ws.supersede(target.id, "deployment runs from CI only")
    monkeypatch.delenv(FAULT_ENV)
    assert_consistent(root, {**known, added.id: "active", target.id: "superseded", new.id: "active"})


def test_a_failed_drift_write_back_to_the_store_never_fails_the_read(
        ws: Workspace, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    anchored = next(m for m in ws.list() if m.anchors and m.anchors[0].path == "lib.py")
    (root / "lib.py").write_text("def helper():\n    return 43\n")
    monkeypatch.setenv(FAULT_ENV, "store-write")
    hits = ws.query("helper returns 42")
    assert any(h.memory.id == anchored.id and h.drift is Drift.STALE for h in hits)
    assert ws.last_drift()[anchored.id] == "stale"  # drift.json has it, waiting for the store
    assert drift_column(ws.store)[anchored.id] == "fresh"
    monkeypatch.delenv(FAULT_ENV)
    with anchorfs.open(root) as again:
        assert drift_column(again.store)[anchored.id] == "stale"  # mirrored when the store opens
    assert_consistent(root, acked(ws))


def test_a_rebuild_cut_short_is_redone_not_trusted(ws: Workspace, root: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    known = acked(ws)
    monkeypatch.setenv(FAULT_ENV, "store-write")
    with pytest.raises(StoreError):
        ws.reindex()
    monkeypatch.delenv(FAULT_ENV)
    assert_consistent(root, known)  # the half-built store was replayed from the start
    with anchorfs.open(root) as again:
        assert {h.memory.id for h in again.query("handler helper deployment note", k=10)} == set(known)


# -- caches written by temp file + replace: the old file or none, never half a new one --------


def test_a_failed_checkpoint_never_fails_a_write_and_is_repaired(
        ws: Workspace, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    known = acked(ws)
    before = state_bytes(root)["applied"]
    monkeypatch.setenv(FAULT_ENV, "applied-write")
    a = ws.record("the cache ttl is five minutes")
    b = ws.record("the queue is drained nightly")
    assert state_bytes(root)["applied"] == before  # the old checkpoint, not half a new one
    assert storesync.applied(ws.state) < ws.ledger.size()
    monkeypatch.delenv(FAULT_ENV)
    # The replay re-applies records the store already holds: by id, so nothing doubles.
    assert_consistent(root, {**known, a.id: "active", b.id: "active"})


def test_a_failed_drift_json_write_keeps_the_old_file_and_the_read_answers(
        ws: Workspace, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = state_bytes(root)["drift.json"]
    anchored = next(m for m in ws.list() if m.anchors and m.anchors[0].path == "app.py")
    (root / "app.py").write_text("def handler(event):\n    return event['json']\n")
    monkeypatch.setenv(FAULT_ENV, "drift-write")
    report = ws.drift()
    assert {m.memory.id: m.drift for m in report.memories}[anchored.id] is Drift.STALE
    hits = ws.query("handler returns the body")
    assert any(h.memory.id == anchored.id and h.drift is Drift.STALE for h in hits)
    assert state_bytes(root)["drift.json"] == before
    assert ws.last_drift().get(anchored.id, "fresh") == "fresh"  # the last drift written stands
    monkeypatch.delenv(FAULT_ENV)
    ws.drift()  # the next read writes what the failed one could not
    assert ws.last_drift()[anchored.id] == "stale"
    assert_consistent(root, acked(ws))


def test_a_failed_manifest_write_keeps_the_old_manifest(ws: Workspace, root: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    manifest = root / ".anchorfs" / "manifest.json"
    before = manifest.read_bytes()
    old_entries = HashCache(manifest)._read_disk()[0]
    (root / "lib.py").write_text("def helper():\n    return 44\n")  # a new hash: the cache is dirty
    monkeypatch.setenv(FAULT_ENV, "manifest-write")
    report = ws.drift()  # saves the cache: the save fails, the read does not
    assert Drift.STALE in {m.drift for m in report.memories}
    assert ws.cache.save() is False
    with pytest.raises(OSError, match="manifest-write"):
        ws.cache.save(strict=True)
    assert manifest.read_bytes() == before
    assert HashCache(manifest)._read_disk()[0] == old_entries
    monkeypatch.delenv(FAULT_ENV)
    assert ws.cache.save() is True  # the pending changes were kept for a later save
    assert "lib.py" in HashCache(manifest)._read_disk()[0]
    assert_consistent(root, acked(ws))


def test_every_cache_failing_at_once_loses_no_acknowledged_write(
        ws: Workspace, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    known = acked(ws)
    target = next(m for m in ws.list() if not m.anchors)
    monkeypatch.setenv(FAULT_ENV, "store-write,applied-write,drift-write,manifest-write")
    with pytest.warns(UserWarning):
        a = ws.record("the api answers in json", anchors=["app.py#handler"])
    ledger = state_bytes(root)["ledger.jsonl"]
    with pytest.raises(StoreError):  # the store cannot catch up first: refused before the ledger
        ws.supersede(target.id, "deployment runs from CI, never by hand")
    assert state_bytes(root)["ledger.jsonl"] == ledger
    (root / "app.py").write_text(APP + "\n# tail\n")
    report = ws.drift()
    assert {m.memory.id: m.drift for m in report.memories}[a.id] is Drift.FRESH  # moved, not changed
    assert all(c.verdict in (Verdict.FRESH, Verdict.MOVED) for m in report.memories for c in m.checks)
    ws.close()
    monkeypatch.delenv(FAULT_ENV)
    assert_consistent(root, {**known, a.id: "active"})
    with anchorfs.open(root) as again:
        b = again.supersede(target.id, "deployment runs from CI, never by hand")
    assert_consistent(root, {**known, a.id: "active", target.id: "superseded", b.id: "active"})


# -- processes: killed between steps, and real short writes -----------------------------------


CHILD = textwrap.dedent(
    """
    import sys, anchorfs
    with anchorfs.open(sys.argv[1]) as ws:
        m = ws.record(sys.argv[2])
        print(m.id, flush=True)
    """
)


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANCHORFS_")}
    env.update(extra)
    return env


@pytest.mark.parametrize("point", ["kill-after-ledger", "kill-after-store"])
def test_a_process_killed_between_steps_is_repaired_on_the_next_open(ws: Workspace, root: Path,
                                                                      point: str) -> None:
    known = acked(ws)
    proc = subprocess.run([sys.executable, "-c", CHILD, str(root), "written just before the crash"],
                          env=child_env(**{FAULT_ENV: point}), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 137, proc.stderr
    assert proc.stdout == ""  # never acknowledged ...
    entries = list(Ledger(root / ".anchorfs").read())
    crashed = entries[-1].memories[0]
    assert crashed.content == "written just before the crash"  # ... but the ledger has it, so it stands
    assert_consistent(root, {**known, crashed.id: "active"})


def _limited(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))  # Python ignores SIGXFSZ: writes get EFBIG


def test_a_real_short_write_to_the_ledger_is_cut_back(ws: Workspace, root: Path) -> None:
    known = acked(ws)
    before = state_bytes(root)
    limit = len(before["ledger.jsonl"] or b"") + 300  # room for part of the record, not all of it
    proc = subprocess.run([sys.executable, "-m", "anchorfs.cli.commands", "--root", str(root), "record", "y " * 3000],
                          env=child_env(), capture_output=True, text=True, timeout=120,
                          preexec_fn=lambda: _limited(limit))
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1
    assert "nothing was written" in proc.stderr
    assert state_bytes(root)["ledger.jsonl"] == before["ledger.jsonl"]
    assert_consistent(root, known)


def test_a_full_disk_for_every_cache_never_fails_a_check(ws: Workspace, root: Path) -> None:
    before = state_bytes(root)
    (root / "lib.py").write_text("def helper():\n    return 45\n")
    proc = subprocess.run([sys.executable, "-m", "anchorfs", "--root", str(root), "--json", "drift"],
                          env=child_env(), capture_output=True, text=True, timeout=120,
                          preexec_fn=lambda: _limited(16))  # no state file fits in 16 bytes
    assert proc.returncode == 90, proc.stderr  # the stale memory is still reported
    assert "Traceback" not in proc.stderr
    assert orjson.loads(proc.stdout)["stale"] == 1
    after = state_bytes(root)
    for name in CACHES:
        assert after[name] == before[name], name  # the old file, not a truncated new one
    assert_consistent(root, acked(ws))


def test_an_append_in_flight_is_not_reported_as_a_torn_line(ws: Workspace, root: Path) -> None:
    """Readers take no lock, so they can catch a writer's append half-copied into the file: that
    line is left out quietly; only a partial line no writer is working on is worth a warning."""
    known = set(acked(ws))
    ledger = Ledger(root / ".anchorfs")
    at = ledger.size()
    with ledger.path.open("ab") as fh:
        fh.write(b'{"v": 1, "tx": "half')
    with ledger.lock():  # a writer is at work: the half line is its append, not damage
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert set(fold(Ledger(root / ".anchorfs").read())) == known
    with pytest.warns(UserWarning, match="torn last line"):  # nobody is writing: it is torn
        assert set(fold(ledger.read())) == known
    assert not ledger._in_flight(at)
    with ledger.path.open("ab") as fh:  # finished between the read and the look: in flight after all
        fh.write(b'"}\n')
    assert ledger._in_flight(at)
