"""Corrupt state (issue 9): garbage, truncated or future-version ledger, store, manifest, drift
cache, checkpoint and config. Each one recovers by itself or fails with one line that says how
to repair it (`anchorfs reindex`), never a traceback, and `reindex` then fixes it.

One workspace is built once (three memories, real LanceDB) and copied into each test.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
import warnings
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

import anchorfs
from anchorfs.cli.commands import main
from anchorfs.core.errors import ConfigError, LedgerError, StoreError
from anchorfs.drift.hashcache import MANIFEST_VERSION, HashCache
from anchorfs.ledger.log import Entry, Ledger
from anchorfs.core.model import Drift, Memory, new_id, utcnow
from anchorfs.sdk.workspace import Workspace

pytestmark = pytest.mark.usefixtures("no_racy_window")

NOTES = b"alpha\nbeta\ngamma\ndelta\n"
CONTENTS = {
    "notes": ("beta and gamma sit in the middle of the notes", ["notes.txt:2-3"]),
    "whole": ("the notes file lists four greek letters", ["notes.txt"]),
    "free": ("always run the linter before a commit", []),
}


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A workspace with three memories, built once; tests get a copy."""
    root = tmp_path_factory.mktemp("template") / "ws"
    root.mkdir()
    (root / "notes.txt").write_bytes(NOTES)
    anchorfs.init(root)
    with pytest.MonkeyPatch.context() as mp:  # conftest's isolation is per test; this runs before it
        mp.setenv("HOME", str(root.parent))
        mp.setenv("XDG_CACHE_HOME", str(root.parent / ".cache"))
        for key in [k for k in os.environ if k.startswith("ANCHORFS_")]:
            mp.delenv(key)
        with anchorfs.open(root) as ws:
            ids = {name: ws.record(text, anchors=specs).id for name, (text, specs) in CONTENTS.items()}
    return root, ids


@pytest.fixture
def ws_root(template: tuple[Path, dict[str, str]], tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    shutil.copytree(template[0], root, symlinks=True)
    return root


@pytest.fixture
def ids(template: tuple[Path, dict[str, str]]) -> dict[str, str]:
    return template[1]


def state(root: Path) -> Path:
    return root / ".anchorfs"


def query_ids(root: Path, text: str = "notes linter greek middle", k: int = 10) -> set[str]:
    with anchorfs.open(root) as ws:
        return {h.memory.id for h in ws.query(text, k=k)}


def reindex(root: Path) -> int:
    with anchorfs.open(root) as ws:
        return ws.reindex()


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The CLI entry point in-process: anything but SystemExit escaping would be a traceback."""
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    out, err = capsys.readouterr()
    code = exit_info.value.code
    return (code if isinstance(code, int) else 0), out, err


def assert_one_error_line(code: int, err: str, fragment: str) -> None:
    assert code == 1, err
    lines = [ln for ln in err.splitlines() if not ln.startswith("anchorfs: warning:")]
    assert len(lines) == 1, err
    assert lines[0].startswith("anchorfs: error: ")
    assert fragment in lines[0]
    assert "Traceback" not in err


def ledger_lines(root: Path) -> list[bytes]:
    return (state(root) / "ledger.jsonl").read_bytes().splitlines(keepends=True)


# --------------------------------------------------------------------------- the ledger

def _entry_with(memory_changes: dict[str, Any], anchor_changes: dict[str, Any] | None = None) -> bytes:
    """A ledger line that is valid JSON of the right shape but carries one wrong-typed field."""
    m = Memory(id=new_id(), content="a snapshot with a bad field", recorded_at=utcnow(), valid_from=utcnow()).to_dict()
    m["anchors"] = [{"path": "notes.txt", "sha256": "0" * 64, "symbol": None, "lines": [1, 2],
                     "content_hash": "1" * 64, "commit": None, "dirty": None, **(anchor_changes or {})}]
    m.update(memory_changes)
    line = Entry.new("record", [], actor="me").to_dict()
    line["memories"] = [m]
    return orjson.dumps(line) + b"\n"


BAD_LINES = {
    "garbage-bytes": b"\x00\xff garbage \xfe{\n",
    "not-json": b'{"v": 1, "tx": \n',
    "json-array": b"[1, 2, 3]\n",
    "future-version": orjson.dumps({"v": 2, "tx": "x", "op": "record", "at": "2026-01-01T00:00:00Z", "memories": []}) + b"\n",
    "unknown-op": orjson.dumps({"v": 1, "tx": "x", "op": "delete", "at": "2026-01-01T00:00:00Z", "memories": []}) + b"\n",
    "tags-not-strings": _entry_with({"tags": [1, None]}),
    "content-a-number": _entry_with({"content": 7}),
    "recorded-at-null": _entry_with({"recorded_at": None}),
    "time-out-of-range": _entry_with({"recorded_at": "0001-01-01T00:00:00+01:00"}),
    "lines-one-number": _entry_with({}, {"lines": [5]}),
    "lines-reversed": _entry_with({}, {"lines": [9, 2]}),
    "path-a-list": _entry_with({}, {"path": ["notes.txt"]}),
    "memories-a-dict": orjson.dumps({**Entry.new("record", [], actor="me").to_dict(), "memories": {"a": 1}}) + b"\n",
}


@pytest.mark.parametrize("bad", list(BAD_LINES.values()), ids=list(BAD_LINES))
def test_a_bad_ledger_line_in_the_middle_is_skipped_with_a_warning(ws_root: Path, ids: dict[str, str], bad: bytes) -> None:
    lines = ledger_lines(ws_root)
    (state(ws_root) / "ledger.jsonl").write_bytes(b"".join([lines[0], bad, *lines[1:]]))
    with pytest.warns(UserWarning, match="skipping a bad line at byte"):
        with anchorfs.open(ws_root) as ws:
            assert {m.id for m in ws.list()} == set(ids.values())
            report = ws.drift()
    assert {m.memory.id: m.drift for m in report.memories} == {ids["notes"]: Drift.FRESH, ids["whole"]: Drift.FRESH}


def test_wrong_typed_snapshots_never_reach_the_store_or_the_drift_pass(ws_root: Path, ids: dict[str, str]) -> None:
    """Found by the ledger property: these lines used to pass the read and crash reindex/query."""
    lines = ledger_lines(ws_root)
    (state(ws_root) / "ledger.jsonl").write_bytes(b"".join([lines[0], *BAD_LINES.values(), *lines[1:]]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert reindex(ws_root) == 3
        assert query_ids(ws_root) == set(ids.values())
        with anchorfs.open(ws_root) as ws:
            assert ws.drift().count(Drift.FRESH) == 2


def test_a_torn_last_line_is_skipped_then_cut_by_the_next_write(ws_root: Path, ids: dict[str, str]) -> None:
    ledger = state(ws_root) / "ledger.jsonl"
    whole = ledger_lines(ws_root)[0]
    with ledger.open("ab") as fh:
        fh.write(whole[: len(whole) // 2])  # a crash mid-append
    with pytest.warns(UserWarning, match="torn last line"):
        with anchorfs.open(ws_root) as ws:
            assert {m.id for m in ws.list()} == set(ids.values())
            added = ws.record("written after the crash")
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*(skipping|torn)")  # the torn tail is gone: no warning any more
        with anchorfs.open(ws_root) as ws:
            assert {m.id for m in ws.list()} == {*ids.values(), added.id}
    assert ledger.read_bytes().endswith(b"\n")


def test_a_ledger_of_garbage_reads_as_empty_and_reindex_follows_it(ws_root: Path) -> None:
    (state(ws_root) / "ledger.jsonl").write_bytes(os.urandom(4096).replace(b"\n", b"\r") + b"\n" + b"\xff" * 100)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with anchorfs.open(ws_root) as ws:
            assert ws.list() == []
            assert ws.drift().memories == []
            ws.query("notes")  # the store still holds the old rows: served, never a crash
        assert reindex(ws_root) == 0
        assert query_ids(ws_root) == set()


def test_a_ledger_that_is_a_folder_is_one_error_line(ws_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ledger = state(ws_root) / "ledger.jsonl"
    ledger.unlink()
    ledger.mkdir()
    with pytest.raises(LedgerError, match="cannot read the ledger"):
        with anchorfs.open(ws_root) as ws:
            ws.list()
    code, _, err = cli(capsys, "--root", str(ws_root), "list")
    assert_one_error_line(code, err, "cannot read the ledger")


# --------------------------------------------------------------------------- the store

def _data_files(root: Path) -> list[Path]:
    return sorted((state(root) / "memories.lance" / "data").glob("*"))


def _all_files(root: Path) -> list[Path]:
    return sorted(p for p in (state(root) / "memories.lance").rglob("*") if p.is_file())


def _remove_table(root: Path) -> None:
    shutil.rmtree(state(root) / "memories.lance")


def _table_is_a_file(root: Path) -> None:
    _remove_table(root)
    (state(root) / "memories.lance").write_bytes(b"not a table")


def _empty_table_folder(root: Path) -> None:
    _remove_table(root)
    (state(root) / "memories.lance").mkdir()


STORE_DAMAGE: dict[str, Callable[[Path], None]] = {
    "folder-missing": _remove_table,
    "data-deleted": lambda r: [p.unlink() for p in _data_files(r)] and None,
    "data-garbage": lambda r: [p.write_bytes(b"garbage" * 10) for p in _data_files(r)] and None,
    "versions-garbage": lambda r: [p.write_bytes(b"\0garbage") for p in (state(r) / "memories.lance" / "_versions").glob("*")] and None,
    "versions-deleted": lambda r: shutil.rmtree(state(r) / "memories.lance" / "_versions"),
    "all-truncated": lambda r: [p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]) for p in _all_files(r)] and None,
    "empty-folder": _empty_table_folder,
    "a-file-instead": _table_is_a_file,
}


@pytest.mark.parametrize("damage", list(STORE_DAMAGE.values()), ids=list(STORE_DAMAGE))
def test_a_damaged_store_says_reindex_and_reindex_repairs_it(ws_root: Path, ids: dict[str, str],
                                                              damage: Callable[[Path], None]) -> None:
    damage(ws_root)
    try:
        found = query_ids(ws_root)
    except StoreError as exc:
        assert "anchorfs reindex" in str(exc)
        assert "\n" not in str(exc)
    else:
        assert found == set(ids.values())  # recovered by itself, from the ledger
    assert reindex(ws_root) == 3
    assert query_ids(ws_root) == set(ids.values())


def test_a_missing_store_is_rebuilt_from_the_ledger_by_itself(ws_root: Path, ids: dict[str, str]) -> None:
    _remove_table(ws_root)
    assert query_ids(ws_root) == set(ids.values())


def test_writes_to_a_damaged_store_say_reindex_not_a_traceback(ws_root: Path, ids: dict[str, str]) -> None:
    STORE_DAMAGE["data-deleted"](ws_root)
    with anchorfs.open(ws_root) as ws, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            ws.supersede(ids["free"], "always run the linter and the tests before a commit")
        except StoreError as exc:
            assert "anchorfs reindex" in str(exc)
        else:  # the write is in the ledger; the store may lag, and then says so
            assert all("anchorfs reindex" in str(w.message) for w in caught if "index lags" in str(w.message))
    # The ledger took the write first (or nothing happened): reindex serves the truth either way.
    assert reindex(ws_root) >= 3
    with anchorfs.open(ws_root) as ws:
        assert {m.id for m in ws.list(status=None)} >= set(ids.values())
        assert ws.store.count() == len(ws.list(status=None))


def _proc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "anchorfs", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "RUST_LOG": "error"})


def test_the_cli_on_a_damaged_store_prints_one_line_and_reindex_repairs_it(ws_root: Path, ids: dict[str, str]) -> None:
    """Through a real process: the user sees one line and exit 1, no traceback."""
    STORE_DAMAGE["data-deleted"](ws_root)
    broken = _proc("--root", str(ws_root), "query", "notes")
    assert broken.returncode == 1, broken.stderr
    assert "Traceback" not in broken.stderr
    errors = [ln for ln in broken.stderr.splitlines() if ln.startswith("anchorfs: error: ")]
    assert len(errors) == 1 and "anchorfs reindex" in errors[0], broken.stderr
    assert broken.stdout == ""
    fixed = _proc("--root", str(ws_root), "reindex")
    assert fixed.returncode == 0, fixed.stderr
    again = _proc("--root", str(ws_root), "--json", "query", "notes linter greek middle")
    assert again.returncode == 0, again.stderr
    assert {h["id"] for h in orjson.loads(again.stdout)["hits"]} == set(ids.values())


# --------------------------------------------------------------------------- the hash cache's manifest

def _manifest_with(root: Path, version: int, sha: str, owner: list | None = None) -> bytes:
    """A manifest the cache would trust (right CRC, old mtime, this clone's owner), vouching
    `sha` for notes.txt."""
    from anchorfs.core import __version__

    st = (root / "notes.txt").stat()
    folder = os.lstat(state(root))
    body = orjson.dumps({"notes.txt": [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, sha, time.time()]})
    head = orjson.dumps({"format": "anchorfs.manifest", "version": version,
                         "owner": owner or [__version__, folder.st_dev, folder.st_ino], "crc32": zlib.crc32(body)})
    return head[:-1] + b',"entries":' + body + b"}"


def _prime_manifest(root: Path) -> bytes:
    with anchorfs.open(root) as ws:
        ws.drift()
    return (state(root) / "manifest.json").read_bytes()


MANIFEST_DAMAGE: dict[str, Callable[[bytes], bytes]] = {
    "garbage": lambda good: os.urandom(64),
    "empty": lambda good: b"",
    "truncated": lambda good: good[: len(good) // 2],
    "json-array": lambda good: b"[]",
    "bad-crc": lambda good: good[:-3] + (b"0" if good[-3:-2] != b"0" else b"1") + good[-2:],
    "future-version": lambda good: good.replace(b'"version":%d' % MANIFEST_VERSION, b'"version":99'),
    "foreign-format": lambda good: good.replace(b'"anchorfs.manifest"', b'"other.manifest"'),
}


@pytest.mark.parametrize("damage", list(MANIFEST_DAMAGE.values()), ids=list(MANIFEST_DAMAGE))
def test_a_damaged_manifest_is_a_cold_cache(ws_root: Path, ids: dict[str, str], damage: Callable[[bytes], bytes]) -> None:
    good = _prime_manifest(ws_root)
    manifest = state(ws_root) / "manifest.json"
    manifest.write_bytes(damage(good))
    (ws_root / "notes.txt").write_bytes(NOTES.replace(b"delta", b"DELTA"))
    with anchorfs.open(ws_root) as ws:
        report = ws.drift()
        assert ws.cache.hashes >= 1  # re-hashed: nothing in the damaged file was believed
    assert {m.memory.id: m.drift for m in report.memories} == {ids["notes"]: Drift.FRESH, ids["whole"]: Drift.STALE}
    entries, _ = HashCache(manifest)._read_disk()
    assert "notes.txt" in entries  # rewritten whole by this process


@pytest.mark.parametrize(("version", "owner", "believed"),
                         [(99, None, False), (3, ["0.0.1", 0, 0], False), (2, None, False), (3, None, True)],
                         ids=["future-version", "another-owner", "earlier-version", "control"])
def test_a_future_version_manifest_is_not_believed(ws_root: Path, ids: dict[str, str], version: int,
                                                   owner: list | None, believed: bool) -> None:
    """An entry that matches the edited file's stat but carries the old hash: written by this
    anchorfs for this clone it is trusted (the control: this is what a cache is for); of
    another version, another anchorfs or another clone (a copy by git, rsync, a tarball) never."""
    old_sha = hashlib.sha256(NOTES).hexdigest()
    (ws_root / "notes.txt").write_bytes(NOTES.replace(b"delta", b"DELTA"))
    long_ago = time.time_ns() - 3600 * 10**9
    os.utime(ws_root / "notes.txt", ns=(long_ago, long_ago))
    (state(ws_root) / "manifest.json").write_bytes(_manifest_with(ws_root, version, old_sha, owner))
    with anchorfs.open(ws_root) as ws:
        drift = {m.memory.id: m.drift for m in ws.drift().memories}
    assert drift[ids["whole"]] is (Drift.FRESH if believed else Drift.STALE)


def test_a_manifest_that_is_a_folder_never_fails_a_read(ws_root: Path, ids: dict[str, str],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    (state(ws_root) / "manifest.json").mkdir()
    (ws_root / "notes.txt").write_bytes(b"")
    code, out, err = cli(capsys, "--root", str(ws_root), "--json", "drift")
    assert code == 90, err
    assert orjson.loads(out)["stale"] == 2
    assert "Traceback" not in err


# --------------------------------------------------------------------------- drift.json

DRIFT_DAMAGE: dict[str, Callable[[dict[str, str]], bytes]] = {
    "garbage": lambda ids: os.urandom(50),
    "truncated": lambda ids: orjson.dumps({"v": 1, "drift": {ids["notes"]: "stale"}})[:20],
    "json-array": lambda ids: b"[1, 2]",
    "future-version": lambda ids: orjson.dumps({"v": 2, "drift": {ids["notes"]: "stale", ids["whole"]: "stale"}}),
    "wrong-types": lambda ids: orjson.dumps({"v": 1, "drift": {ids["notes"]: [1], ids["whole"]: {"a": 1}},
                                             "pending": {ids["notes"]: [1], ids["whole"]: 5}}),
    "drift-a-string": lambda ids: orjson.dumps({"v": 1, "drift": "stale", "pending": "x"}),
    "another-clone": lambda ids: orjson.dumps({"v": 2, "owner": ["0.1.0", 0, 0], "drift": {ids["notes"]: "stale"},
                                               "pending": {}}),
}


@pytest.mark.parametrize("damage", list(DRIFT_DAMAGE.values()), ids=list(DRIFT_DAMAGE))
def test_a_damaged_drift_cache_is_cold_and_rebuilt_by_the_next_check(ws_root: Path, ids: dict[str, str],
                                                                      damage: Callable[[dict[str, str]], bytes]) -> None:
    path = state(ws_root) / "drift.json"
    path.write_bytes(damage(ids))
    with anchorfs.open(ws_root) as ws:
        assert ws.list(drift="stale") == []  # nothing in it was believed: no memory is stale
        assert set(ws.last_drift().values()) <= {"fresh", "stale", "unknown"}
        ws.drift()
        assert ws.last_drift() == {}  # all fresh, as when recorded: nothing to remember
    kept = orjson.loads(path.read_bytes())
    assert (kept["v"], kept["drift"], kept["pending"]) == (2, {}, {})  # rewritten whole
    assert kept["owner"][1:] == [os.lstat(state(ws_root)).st_dev, os.lstat(state(ws_root)).st_ino]


def test_a_drift_cache_with_wrong_types_never_reaches_the_store(ws_root: Path, ids: dict[str, str]) -> None:
    """Found while testing: `[1]` as a drift value reached the store's update as a dict key."""
    (state(ws_root) / "drift.json").write_bytes(DRIFT_DAMAGE["wrong-types"](ids))
    assert query_ids(ws_root) == set(ids.values())  # opening the store flushes `pending`
    assert reindex(ws_root) == 3


# --------------------------------------------------------------------------- the checkpoint (`applied`)

APPLIED_DAMAGE: dict[str, Callable[[int], bytes]] = {
    "garbage": lambda size: os.urandom(20),
    "truncated": lambda size: orjson.dumps({"offset": size})[:5],
    "negative": lambda size: orjson.dumps({"offset": -5}),
    "past-the-end": lambda size: orjson.dumps({"offset": 10**15}),
    "mid-record": lambda size: orjson.dumps({"offset": size + 10}),
    "future-version": lambda size: orjson.dumps({"v": 2, "checkpoint": size}),
}


@pytest.mark.parametrize("damage", list(APPLIED_DAMAGE.values()), ids=list(APPLIED_DAMAGE))
def test_a_damaged_checkpoint_replays_the_ledger(ws_root: Path, ids: dict[str, str], damage: Callable[[int], bytes]) -> None:
    """The ledger is ahead of the store (a crash between the two) and the checkpoint is damaged:
    the next open must still replay the record the store missed, never skip it."""
    ledger = Ledger(state(ws_root))
    size = ledger.size()
    zebra = Memory(id=new_id(), content="zebras graze on the striped lawn", recorded_at=utcnow(), valid_from=utcnow())
    with ledger.lock():
        ledger.append([Entry.new("record", [zebra], actor="me")])
    (state(ws_root) / "applied").write_bytes(damage(size))
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*skipping")  # replayed from a record boundary: no line skipped
        assert zebra.id in query_ids(ws_root, "zebras striped lawn")
        assert query_ids(ws_root) == {*ids.values(), zebra.id}


# --------------------------------------------------------------------------- the config file

CONFIG_DAMAGE = {
    "garbage-bytes": b"\xff\xfe\x00garbage[[",
    "bad-toml": b"drift = [unclosed\n",
    "deep-nesting": b"x = " + b"[" * 5000 + b"]" * 5000,
    "deep-dotted-key": b"a" + b".a" * 3000 + b" = 1",
    "huge-int": b"[drift]\ncache_ttl = " + b"9" * 400,
    "int-too-long": b"search.k = " + b"9" * 5000,
    "unknown-key": b"[drift]\nstale_facter = 0.5\n",
    "wrong-type": b'[search]\nk = "ten"\n',
}


@pytest.mark.parametrize("raw", list(CONFIG_DAMAGE.values()), ids=list(CONFIG_DAMAGE))
def test_a_bad_config_file_is_one_config_error_line(ws_root: Path, capsys: pytest.CaptureFixture[str], raw: bytes) -> None:
    (ws_root / ".anchorfs.toml").write_bytes(raw)
    with pytest.raises(ConfigError, match=r"\.anchorfs\.toml"):
        Workspace(ws_root)
    code, out, err = cli(capsys, "--root", str(ws_root), "list")
    assert_one_error_line(code, err, ".anchorfs.toml")
    assert out == ""
