"""Watch mode on real files: transitions reported once, logged, the cache kept warm, clean stop."""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from conftest import read_events, shown

import anchorfs
from anchorfs.agents.watch import IGNORE_DIRS, DriftEvent, _Index, _wanted, record_transitions, watch

TOKEN = """class TokenIssuer:
    def issue(self, user):
        return sign(user, hours=24)
"""
WAIT = 60.0  # seconds before a test gives up on an event that never came (not a speed check)


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[anchorfs.Workspace]:
    root = tmp_path / "ws"
    (root / "auth").mkdir(parents=True)
    (root / "auth" / "token.py").write_text(TOKEN)
    (root / "notes.txt").write_text("not anchored\n")
    anchorfs.init(root)
    with anchorfs.open(root) as w:
        yield w


class Watcher:
    """`watch` on a thread, driven by a stop event; events arrive on a queue."""

    def __init__(self, ws: anchorfs.Workspace, **kwargs: object) -> None:
        self.events: queue.Queue[DriftEvent] = queue.Queue()
        self.ready = threading.Event()
        self.stop = threading.Event()
        self.error: BaseException | None = None
        kwargs.setdefault("debounce_ms", 100)
        kwargs.setdefault("tick_ms", 200)

        def target() -> None:
            try:
                watch(ws, on_event=self.events.put, on_ready=lambda m, f: self.ready.set(),
                      stop_event=self.stop, **kwargs)  # type: ignore[arg-type]
            except BaseException as exc:  # surfaced by the test thread
                self.error = exc

        self.thread = threading.Thread(target=target, daemon=True)

    def __enter__(self) -> "Watcher":
        self.thread.start()
        assert self.ready.wait(WAIT), "watcher never became ready"
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(WAIT)
        assert not self.thread.is_alive(), "watcher did not stop on the stop event"
        if self.error is not None:
            raise self.error

    def next(self) -> DriftEvent:
        try:
            return self.events.get(timeout=WAIT)
        except queue.Empty:
            raise AssertionError("no drift event arrived") from None


def test_edit_reports_fresh_to_stale_then_back_once_each(ws: anchorfs.Workspace) -> None:
    m = ws.record("token expiry is 24 hours", anchors=["auth/token.py#TokenIssuer.issue"])
    token = ws.root / "auth" / "token.py"
    with Watcher(ws) as w:
        (ws.root / "notes.txt").write_text("edited, but nothing rests on it\n")
        token.write_text(TOKEN.replace("24", "12"))
        e = w.next()
        assert (e.id, e.before, e.after, e.source) == (m.id, "fresh", "stale", "watch")
        assert e.detail == "auth/token.py#TokenIssuer.issue changed"
        token.write_text(TOKEN.replace("24", "6"))  # still stale: no new event
        token.write_text(TOKEN)
        e = w.next()
        assert (e.id, e.before, e.after) == (m.id, "stale", "fresh")
    assert w.events.empty()
    logged = read_events(ws)
    assert [(x["id"], x["from"], x["to"], x["source"]) for x in logged] == [
        (m.id, "fresh", "stale", "watch"), (m.id, "stale", "fresh", "watch")]
    assert set(logged[0]) >= {"at", "id", "from", "to", "source", "detail"}
    assert ws.last_drift()[m.id] == "fresh"


def test_a_transition_already_reported_is_not_reported_again(ws: anchorfs.Workspace) -> None:
    m = ws.record("token expiry is 24 hours", anchors=["auth/token.py"])
    with Watcher(ws) as w:
        (ws.root / "auth" / "token.py").write_text("changed\n")
        assert w.next().after == "stale"
    with anchorfs.open(ws.root) as other:  # the hook, or another watcher, later
        assert record_transitions(other, None, source="hook") == []
        assert other.drift().stale[0].memory.id == m.id
    assert len(read_events(ws)) == 1


def test_changes_made_while_not_watching_are_reported_at_start(ws: anchorfs.Workspace) -> None:
    m = ws.record("token expiry is 24 hours", anchors=["auth/token.py"])
    (ws.root / "auth" / "token.py").unlink()
    with Watcher(ws) as w:
        e = w.next()
    assert (e.id, e.after, e.detail) == (m.id, "stale", "auth/token.py deleted")


def test_deleting_the_folder_stales_what_rests_in_it(ws: anchorfs.Workspace) -> None:
    m = ws.record("token expiry is 24 hours", anchors=["auth/token.py#TokenIssuer.issue"])
    with Watcher(ws) as w:
        shutil.rmtree(ws.root / "auth")
        e = w.next()
    assert (e.id, e.after, e.detail) == (m.id, "stale", "auth/token.py deleted")


def test_a_memory_recorded_while_watching_is_followed(ws: anchorfs.Workspace) -> None:
    (ws.root / "later.py").write_text("X = 1\n")
    with Watcher(ws) as w:
        with anchorfs.open(ws.root) as other:
            m = other.record("X is one", anchors=["later.py"])
        (ws.root / "later.py").write_text("X = 2\n")
        e = w.next()
    assert (e.id, e.after) == (m.id, "stale")


def test_the_cache_is_warm_after_an_edit(ws: anchorfs.Workspace) -> None:
    """A file hashed just after an edit is racy (not cacheable); the watcher hashes it again."""
    ws.record("token expiry is 24 hours", anchors=["auth/token.py"])
    manifest = ws.state / "manifest.json"

    def cached_hash() -> str | None:
        try:
            entries = orjson.loads(manifest.read_bytes())["entries"]
        except (OSError, orjson.JSONDecodeError, KeyError):
            return None
        return (entries.get("auth/token.py") or [None] * 5)[4]

    with Watcher(ws) as w:  # hashes it again once the timestamp granularity (2 s) has passed
        (ws.root / "auth" / "token.py").write_text("edited\n")
        assert w.next().after == "stale"
        deadline = time.monotonic() + WAIT
        while cached_hash() is None and time.monotonic() < deadline:
            time.sleep(0.2)
    from anchorfs.drift.hashcache import sha256_bytes

    assert cached_hash() == sha256_bytes(b"edited\n")


def test_filter_ignores_state_git_and_unanchored_paths(ws: anchorfs.Workspace) -> None:
    ws.record("token", anchors=["auth/token.py"])
    (ws.root / "node_modules" / "auth").mkdir(parents=True)
    index = _Index(ws)
    index.refresh()
    root = ws.root_real
    ignored = frozenset(IGNORE_DIRS)
    assert _wanted(root, ignored, index, os.path.join(root, "auth", "token.py"))
    assert _wanted(root, ignored, index, os.path.join(root, "auth"))  # the folder, removed whole
    assert not _wanted(root, ignored, index, os.path.join(root, "notes.txt"))
    assert not _wanted(root, ignored, index, os.path.join(root, ".anchorfs", "manifest.json"))
    assert not _wanted(root, ignored, index, os.path.join(root, ".git", "index"))
    assert not _wanted(root, ignored, index, os.path.join(root, "node_modules", "auth", "token.py"))
    assert not _wanted(root, ignored, index, os.path.dirname(root))
    assert index.anchored(["auth"]) == {"auth/token.py"}
    assert index.anchored(["notes.txt"]) == set()


def test_cli_watch_stops_cleanly_on_ctrl_c(ws: anchorfs.Workspace) -> None:
    m = ws.record("token expiry is 24 hours", anchors=["auth/token.py"])
    proc = subprocess.Popen(
        [sys.executable, "-m", "anchorfs.cli.commands", "watch", "--root", str(ws.root)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # A suite started in the background (`.ci/run &`) ignores SIGINT, and a child inherits
        # that: Python then installs no Ctrl-C handler and the signal below would do nothing.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    guard = threading.Timer(2 * WAIT, proc.kill)  # a hung watcher fails the test instead of hanging it
    guard.start()
    try:
        assert proc.stderr is not None and proc.stdout is not None
        line = proc.stderr.readline()
        assert line.startswith("watching 1 memory anchored to 1 file in "), line
        (ws.root / "auth" / "token.py").write_text("changed\n")
        out = proc.stdout.readline()
        assert f"  {shown(ws.root, m.id)}  fresh -> stale" in out and "auth/token.py changed" in out
        proc.send_signal(signal.SIGINT)
        rest_out, rest_err = proc.communicate(timeout=WAIT)
    finally:
        guard.cancel()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    assert "Traceback" not in rest_err and rest_err.strip().endswith("stopped")
    assert [e["to"] for e in read_events(ws)] == ["stale"]
