"""The Workspace SDK: discovery, recording, refusals that write nothing, the ledger-then-store
order (with real crashes), reindex from the ledger alone, and hybrid retrieval.

Real files, real git and real LanceDB in tmp_path; the embedder is the deterministic default.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import git

import anchorfs
from anchorfs.core.errors import (
    AnchorError,
    InputError,
    LedgerError,
    SymbolNotFoundError,
    UnsafePathError,
    WorkspaceError,
)
from anchorfs.core.model import AnchorRef, Drift, Verdict
from anchorfs.store.table import Store
from anchorfs.sdk.workspace import Workspace, find_root

USERS_PY = '''class UserRepo:
    def getUserById(self, uid):
        return self.rows[uid]

    def delete(self, uid):
        del self.rows[uid]


def helper():
    return 1
'''

NOTES = "one\ntwo\nthree\nfour\nfive\n"


@pytest.fixture
def repo(git_repo: Path) -> Path:
    """A git repo with one commit holding a Python file and a text file."""
    (git_repo / "src").mkdir()
    (git_repo / "src" / "users.py").write_text(USERS_PY)
    (git_repo / "notes.txt").write_text(NOTES)
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "initial")
    return git_repo


@pytest.fixture
def ws(repo: Path) -> Iterator[Workspace]:
    anchorfs.init(repo)
    with anchorfs.open(repo) as w:
        yield w


def head(root: Path) -> str:
    return git(root, "rev-parse", "HEAD").strip()


def ledger_lines(root: Path) -> list[dict[str, Any]]:
    path = root / ".anchorfs" / "ledger.jsonl"
    if not path.exists():
        return []
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def store_ids(ws: Workspace) -> list[str] | None:
    """Ids in the LanceDB table as it is on disk, read without replaying the ledger."""
    if not (ws.state / "memories.lance").exists():
        return None
    table = Store(ws.state, ws.embedder).table(create=False)
    return sorted(table.to_arrow().column("id").to_pylist())


def snapshot(ws: Workspace) -> tuple[bytes | None, list[str] | None, list[str]]:
    """Everything a write could touch: ledger bytes, store ids, the state folder's entries."""
    ledger = ws.state / "ledger.jsonl"
    return (
        ledger.read_bytes() if ledger.exists() else None,
        store_ids(ws),
        sorted(os.listdir(ws.state)),
    )


# --------------------------------------------------------------------------- discovery


def test_init_is_idempotent_and_ignores_derived_state(tmp_path: Path) -> None:
    root = anchorfs.init(tmp_path)
    assert root == tmp_path.resolve()
    ignore = (tmp_path / ".anchorfs" / ".gitignore").read_text()
    assert "memories.lance/" in ignore and "manifest.json" in ignore
    assert "ledger.jsonl" not in ignore.splitlines()  # the ledger is the record: it may be committed
    (tmp_path / ".anchorfs" / ".gitignore").write_text("custom\n")
    assert anchorfs.init(tmp_path) == root
    assert (tmp_path / ".anchorfs" / ".gitignore").read_text() == "custom\n"


def test_init_refuses_a_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="is not a folder"):
        anchorfs.init(tmp_path / "missing")


def test_find_root_explicit_root(tmp_path: Path) -> None:
    anchorfs.init(tmp_path)
    assert find_root(tmp_path) == tmp_path.resolve()
    assert find_root(str(tmp_path)) == tmp_path.resolve()
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(WorkspaceError, match="not an anchorfs workspace"):
        find_root(plain)


def test_find_root_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    anchorfs.init(a)
    anchorfs.init(b)
    monkeypatch.chdir(b)
    monkeypatch.setenv("ANCHORFS_ROOT", str(a))
    assert find_root() == a.resolve()  # the env wins over the cwd
    assert find_root(b) == b.resolve()  # an explicit root wins over the env
    monkeypatch.setenv("ANCHORFS_ROOT", str(tmp_path))
    with pytest.raises(WorkspaceError, match="not an anchorfs workspace"):
        find_root()


def test_find_root_nearest_parent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outer = tmp_path / "outer"
    inner = outer / "pkg" / "inner"
    deep = inner / "src" / "deep"
    deep.mkdir(parents=True)
    anchorfs.init(outer)
    monkeypatch.chdir(outer / "pkg")
    assert find_root() == outer.resolve()
    anchorfs.init(inner, nested=True)  # a workspace inside another: on purpose
    monkeypatch.chdir(deep)
    assert find_root() == inner.resolve()
    with anchorfs.open() as w:
        assert w.root == inner.resolve()


def test_find_root_outside_any_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nowhere = tmp_path / "nowhere"
    nowhere.mkdir()
    monkeypatch.chdir(nowhere)
    with pytest.raises(WorkspaceError, match="no anchorfs workspace in .*nowhere.*anchorfs init"):
        find_root()
    with pytest.raises(WorkspaceError):
        anchorfs.open()


# --------------------------------------------------------------------------- recording


def test_record_takes_anchors_with_head_and_writes_ledger_then_store(ws: Workspace, repo: Path) -> None:
    m = ws.record(
        "getUserById reads the replica",
        kind="decision",
        tags=["db", " db ", "perf"],
        anchors=["src/users.py#UserRepo.getUserById", "notes.txt:2-3"],
        author="ana",
    )
    assert (m.kind, m.tags, m.author, m.status) == ("decision", ("db", "perf"), "ana", "active")
    sym, lines = m.anchors
    assert (sym.path, sym.symbol, sym.lines) == ("src/users.py", "UserRepo.getUserById", None)
    assert (lines.path, lines.symbol, lines.lines) == ("notes.txt", None, (2, 3))
    for a in m.anchors:
        assert a.commit == head(repo)
        assert a.dirty is False
        assert a.sha256 and a.content_hash
    lines_out = ledger_lines(repo)
    assert len(lines_out) == 1
    assert lines_out[0]["op"] == "record"
    assert lines_out[0]["memories"][0]["id"] == m.id
    assert store_ids(ws) == [m.id]
    assert ws.get(m.id) == m
    assert ws.get(m.id[:8].upper()) == m


def test_record_reads_head_per_write_and_flags_dirty_files(ws: Workspace, repo: Path) -> None:
    first = ws.record("notes are five lines", anchors=["notes.txt"])
    (repo / "notes.txt").write_text(NOTES + "six\n")
    dirty = ws.record("notes are six lines now", anchors=["notes.txt"])
    assert dirty.anchors[0].dirty is True
    assert dirty.anchors[0].commit == first.anchors[0].commit
    git(repo, "commit", "-q", "-am", "six")
    (repo / "new.txt").write_text("untracked\n")
    after = ws.record("after the commit", anchors=["notes.txt", "new.txt"])
    assert after.anchors[0].commit == head(repo) != first.anchors[0].commit
    assert [a.dirty for a in after.anchors] == [False, True]


def test_record_outside_git_has_no_commit(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a\n")
    anchorfs.init(tmp_path)
    with anchorfs.open(tmp_path) as w:
        m = w.record("plain folder", anchors=["a.txt"])
    assert m.anchors[0].commit is None
    assert m.anchors[0].dirty is None


def test_record_markers_in_text(ws: Workspace, repo: Path) -> None:
    text = (
        "Lookups go through @anchor( file = src/users.py , symbol = UserRepo.getUserById ) and the "
        "list in @anchor(file=notes.txt, lines=2-4); deletes in @anchor(file=src/users.py,symbol=UserRepo.delete)"
        " and the whole @anchor(file=notes.txt) and @anchor(file=notes.txt, lines=5)."
    )
    m = ws.record(text, anchors=["src/users.py#helper"])
    assert [a.spec for a in m.anchors] == [
        "src/users.py#helper",
        "src/users.py#UserRepo.getUserById",
        "notes.txt:2-4",
        "src/users.py#UserRepo.delete",
        "notes.txt",
        "notes.txt:5",
    ]
    assert m.content == text  # markers stay in the text
    assert len({a.content_hash for a in m.anchors if a.content_hash}) == 5


def test_record_deduplicates_the_same_anchor(ws: Workspace) -> None:
    m = ws.record("twice @anchor(file=./notes.txt, lines=1-2)", anchors=["notes.txt:1-2", AnchorRef("notes.txt", lines=(1, 2))])
    assert [a.spec for a in m.anchors] == ["notes.txt:1-2"]


def test_record_accepts_a_single_spec_string_and_anchorref(ws: Workspace) -> None:
    assert [a.spec for a in ws.record("one", anchors="notes.txt:3").anchors] == ["notes.txt:3"]
    assert [a.spec for a in ws.record("two", anchors=[AnchorRef("src/users.py", symbol="helper")]).anchors] == [
        "src/users.py#helper"
    ]


def test_record_many_is_one_append_of_several_memories(ws: Workspace, repo: Path) -> None:
    ms = ws.record_many([{"content": "alpha", "anchors": ["notes.txt"]}, {"content": "beta", "kind": "goal"}])
    assert [m.content for m in ms] == ["alpha", "beta"]
    assert [line["memories"][0]["id"] for line in ledger_lines(repo)] == [m.id for m in ms]
    assert store_ids(ws) == sorted(m.id for m in ms)
    assert ws.record_many([]) == []


# --------------------------------------------------------------------------- bad input


def _bad_cases(outside: Path) -> dict[str, tuple[dict[str, Any], type[Exception], str]]:
    """name -> (record kwargs, error type, a fragment of the message naming the problem)."""
    return {
        "outside-relative": ({"anchors": ["../outside.txt"]}, UnsafePathError, "'../outside.txt' resolves outside"),
        "dotdot-leaving": ({"anchors": ["src/../../outside.txt"]}, UnsafePathError, "resolves outside the workspace"),
        "absolute-outside": ({"anchors": [str(outside)]}, UnsafePathError, "resolves outside the workspace"),
        "symlink-out": ({"anchors": ["src/link.txt"]}, UnsafePathError, "'src/link.txt' resolves outside"),
        "symlinked-dir-out": ({"anchors": ["out/outside.txt"]}, UnsafePathError, "resolves outside the workspace"),
        "state-folder": ({"anchors": [".anchorfs/ledger.jsonl"]}, UnsafePathError, "own .anchorfs/ folder"),
        "state-folder-itself": ({"anchors": [".anchorfs"]}, UnsafePathError, "own .anchorfs/ folder"),
        "missing-file": ({"anchors": ["src/nope.py"]}, AnchorError, "'src/nope.py' does not exist"),
        "directory": ({"anchors": ["src"]}, AnchorError, "'src' is a directory"),
        "nul": ({"anchors": ["notes.txt\0.py"]}, UnsafePathError, "NUL byte"),
        "unknown-symbol": ({"anchors": ["src/users.py#UserRepo.nope"]}, SymbolNotFoundError,
                           "'UserRepo.nope' not found in src/users.py"),
        "lines-past-end": ({"anchors": ["notes.txt:4-9"]}, AnchorError, "past the end of notes.txt (5 lines)"),
        "line-past-end": ({"anchors": ["notes.txt:6"]}, AnchorError, "past the end of notes.txt"),
        "start-after-end": ({"anchors": ["notes.txt:4-2"]}, AnchorError, "start 4 is after end 2"),
        "start-after-end-ref": ({"anchors": [AnchorRef("notes.txt", lines=(4, 2))]}, AnchorError,
                                "start 4 is after end 2"),
        "symbol-in-binary": ({"anchors": ["blob.py#f"]}, AnchorError, "blob.py is a binary file"),
        "symbol-no-grammar": ({"anchors": ["notes.txt#one"]}, AnchorError, "no grammar for '.txt'"),
        "malformed-marker": ({"content": "see @anchor(file=notes.txt"}, AnchorError, "malformed marker"),
        "marker-bad-key": ({"content": "see @anchor(path=notes.txt)"}, AnchorError, "unknown key 'path'"),
        "marker-missing-file": ({"content": "ok @anchor(file=notes.txt) bad @anchor(file=gone.txt)"}, AnchorError,
                                "'gone.txt' does not exist"),
        "marker-unknown-symbol": ({"content": "@anchor(file=src/users.py, symbol=Nope)"}, SymbolNotFoundError,
                                  "'Nope' not found"),
        "marker-bad-lines": ({"content": "@anchor(file=notes.txt, lines=3-99)"}, AnchorError, "past the end"),
        "marker-unsafe": ({"content": "@anchor(file=../outside.txt)"}, UnsafePathError, "resolves outside"),
        "hash-disagrees": ({"anchors": [AnchorRef("notes.txt", sha256="0" * 64)]}, AnchorError,
                           "given sha256 for notes.txt does not match"),
        "bad-anchor-type": ({"anchors": [42]}, AnchorError, "spec string or an AnchorRef"),
        "empty-content": ({"content": ""}, InputError, "needs content"),
        "blank-content": ({"content": "  \n\t "}, InputError, "needs content"),
        "unknown-kind": ({"kind": "fact"}, InputError, "unknown kind 'fact'"),
    }


BAD_CASE_NAMES = list(_bad_cases(Path("/x")))


@pytest.fixture
def hostile(ws: Workspace, repo: Path, tmp_path: Path) -> Path:
    """Traps next to the good files: a file outside the root, symlinks out, a binary .py."""
    outside = tmp_path / "outside.txt"
    outside.write_text("secret\n")
    (repo / "src" / "link.txt").symlink_to(outside)
    (repo / "out").symlink_to(tmp_path, target_is_directory=True)
    (repo / "blob.py").write_bytes(b"def f():\n    return 1\n\0\x00\x01")
    return outside


@pytest.mark.parametrize("case", BAD_CASE_NAMES)
def test_bad_input_is_refused_and_writes_nothing(ws: Workspace, hostile: Path, case: str) -> None:
    kwargs, error, fragment = _bad_cases(hostile)[case]
    ws.record("an earlier good memory", anchors=["notes.txt"])
    before = snapshot(ws)
    assert before[0] and before[1]
    call = {"content": "a memory", **kwargs}
    with pytest.raises(error) as info:
        ws.record(call.pop("content"), **call)
    assert fragment in str(info.value)
    if error is not InputError:
        assert isinstance(info.value, AnchorError)
    assert "\n" not in str(info.value)
    assert snapshot(ws) == before
    assert len(ws.list()) == 1


@pytest.mark.parametrize("case", ["symlink-out", "missing-file", "unknown-symbol", "empty-content"])
def test_bad_input_in_a_new_workspace_creates_no_ledger_and_no_store(ws: Workspace, hostile: Path, case: str) -> None:
    kwargs, error, _ = _bad_cases(hostile)[case]
    before = snapshot(ws)
    assert before[:2] == (None, None)
    call = {"content": "a memory", **kwargs}
    with pytest.raises(error):
        ws.record(call.pop("content"), **call)
    assert snapshot(ws) == before


def test_a_batch_with_one_bad_item_writes_nothing(ws: Workspace, hostile: Path) -> None:
    ws.record("an earlier good memory")
    before = snapshot(ws)
    items = [
        {"content": "good one", "anchors": ["notes.txt"]},
        {"content": "good two", "anchors": ["src/users.py#helper"]},
        {"content": "bad three", "anchors": ["src/link.txt"]},
    ]
    with pytest.raises(UnsafePathError):
        ws.record_many(items)
    with pytest.raises(InputError):
        ws.record_many([items[0], {"content": "x", "kind": "nonsense"}])
    assert snapshot(ws) == before


def test_supersede_with_a_bad_anchor_writes_nothing(ws: Workspace, hostile: Path) -> None:
    old = ws.record("helper returns one", anchors=["src/users.py#helper"])
    before = snapshot(ws)
    with pytest.raises(SymbolNotFoundError):
        ws.supersede(old.id, "helper returns two", anchors=["src/users.py#helpr"])
    assert snapshot(ws) == before
    assert ws.get(old.id).status == "active"


# --------------------------------------------------------------------------- ledger, then store


def _run_cli(root: Path, *args: str, fault: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if fault:
        env["ANCHORFS_TEST_FAULT"] = fault
    return subprocess.run(
        [sys.executable, "-m", "anchorfs.cli.commands", "--root", str(root), *args],
        env=env, capture_output=True, text=True, timeout=120,
    )


def test_a_crash_after_the_ledger_append_is_repaired_on_open(ws: Workspace, repo: Path) -> None:
    first = ws.record("the retry budget is three attempts", anchors=["notes.txt"])
    ws.close()
    proc = _run_cli(repo, "record", "getUserById hits the read replica", "--anchor", "src/users.py#UserRepo.getUserById",
                    fault="kill-after-ledger")
    assert proc.returncode == 137, proc.stderr

    lines = ledger_lines(repo)
    assert len(lines) == 2  # the ledger has the record ...
    lost = lines[1]["memories"][0]
    assert lost["content"] == "getUserById hits the read replica"

    fresh = anchorfs.open(repo)
    assert store_ids(fresh) == [first.id]  # ... the store does not
    assert [m.id for m in fresh.list()] == [lost["id"], first.id]  # the ledger-backed reads see it at once
    applied = orjson.loads((repo / ".anchorfs" / "applied").read_bytes())["offset"]
    assert applied < fresh.ledger.size()

    # opening the store replays the missed tail: the repair
    assert fresh.store.count() == 2
    assert store_ids(fresh) == sorted([first.id, lost["id"]])
    assert orjson.loads((repo / ".anchorfs" / "applied").read_bytes())["offset"] == fresh.ledger.size()
    hits = fresh.query("read replica")
    assert hits[0].memory.id == lost["id"]
    assert hits[0].drift is Drift.FRESH
    fresh.close()


def test_a_failed_ledger_append_means_the_write_did_not_happen(
    ws: Workspace, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = ws.record("kept memory")
    before = snapshot(ws)
    monkeypatch.setenv("ANCHORFS_TEST_FAULT", "ledger-append")
    with pytest.raises(LedgerError, match="nothing was written"):
        ws.record("lost memory", anchors=["notes.txt"])
    with pytest.raises(LedgerError):
        ws.supersede(kept.id, "a correction")
    assert snapshot(ws)[:2] == before[:2]
    assert ws.store.count() == 1
    assert [h.memory.id for h in ws.query("memory")] == [kept.id]
    assert ws.get(kept.id).status == "active"
    monkeypatch.delenv("ANCHORFS_TEST_FAULT")
    ws.record("works again")
    assert ws.store.count() == 2


# --------------------------------------------------------------------------- reindex


CORPUS = [
    ("getUserById reads from the replica, never the primary", ["src/users.py#UserRepo.getUserById"]),
    ("Deleting a user removes the row outright; there is no soft delete", ["src/users.py#UserRepo.delete"]),
    ("helper always returns one; callers rely on it", ["src/users.py#helper"]),
    ("the notes file lists the numbers one to five", ["notes.txt"]),
    ("lines two to four of the notes are the middle", ["notes.txt:2-4"]),
    ("token expiry is 24 hours for access tokens", []),
    ("refresh tokens last thirty days", []),
    ("the build uses ninja and ccache", []),
    ("retry the payment webhook three times with backoff", []),
    ("the database pool size is twenty connections", []),
    ("logging goes to stderr in JSON lines", []),
    ("feature flags live in the flags service", []),
    ("the cache key for sessions is the session id", []),
    ("rate limit is 100 requests per minute per key", []),
    ("migrations run before the app starts", []),
    ("the replica lag alarm fires at 30 seconds", []),
    ("we prefer composition over inheritance in services", []),
    ("the CLI exits 90 when a memory is stale", []),
    ("the primary database is in eu-west-1", []),
    ("user ids are ULIDs, sortable by time", []),
]
QUERIES = ["user replica", "how long do tokens last", "the notes numbers"]


def _results(w: Workspace) -> list[list[tuple[str, float, str]]]:
    # no scores: a rebuilt index reads the anchored code as it is now (its words are in the
    # full-text index), which moves a changed memory's relevance a little, not the order
    return [
        [(h.memory.id, round(h.similarity, 6), h.drift.value) for h in w.query(q, k=8)]
        for q in QUERIES
    ]


def test_reindex_from_the_ledger_alone_gives_the_same_results(ws: Workspace, repo: Path) -> None:
    for content, anchors in CORPUS:
        ws.record(content, anchors=anchors)
    (repo / "notes.txt").write_text("uno\ndos\n")  # two memories go stale: demoted in scores
    before = _results(ws)
    assert any(d == "stale" for res in before for *_, d in res)
    assert all(len(res) >= 3 for res in before)
    ws.close()

    state = repo / ".anchorfs"
    shutil.rmtree(state / "memories.lance")
    with anchorfs.open(repo) as w:
        assert w.reindex() == len(CORPUS)
        assert len(store_ids(w) or []) == len(CORPUS)
        assert _results(w) == before
    with anchorfs.open(repo) as w2:  # and a later process sees the same
        assert _results(w2) == before

    # the ledger alone: every derived file gone (store, checkpoint, hash cache, last drift)
    for entry in state.iterdir():
        if entry.name not in ("ledger.jsonl", ".gitignore"):
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    with anchorfs.open(repo) as w3:
        assert w3.reindex() == len(CORPUS)
        assert _results(w3) == before


def test_reindex_keeps_superseded_memories_out_of_default_results(ws: Workspace) -> None:
    old = ws.record("the cache ttl is five minutes")
    new = ws.supersede(old.id, "the cache ttl is ten minutes")
    ws.reindex()
    assert [h.memory.id for h in ws.query("cache ttl")] == [new.id]
    both = {h.memory.id: h.memory.status for h in ws.query("cache ttl", include_superseded=True)}
    assert both == {new.id: "active", old.id: "superseded"}


# --------------------------------------------------------------------------- hybrid retrieval


def test_hybrid_retrieval_finds_an_identifier_by_its_parts(
    ws: Workspace, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = ws.record("getUserById reads from the replica, never the primary")
    for content, _ in CORPUS[5:19]:  # none of these mention a user
        ws.record(content)
    assert ws.query("user")[0].memory.id == target.id
    assert ws.query("get user by id")[0].memory.id == target.id
    assert ws.query("USER")[0].memory.id == target.id
    assert ws.query("getUserById(uid)?")[0].memory.id == target.id  # punctuation never breaks full-text

    # the full-text half alone finds it: the identifier was split for the index
    monkeypatch.setenv("ANCHORFS_SEARCH_VECTOR_WEIGHT", "0")
    with anchorfs.open(repo) as text_only:
        hits = text_only.query("user")
    assert hits[0].memory.id == target.id
    assert hits[0].score > 0
    assert all(h.score == 0 for h in hits[1:])


def test_hybrid_retrieval_finds_words_by_an_identifier_query(ws: Workspace) -> None:
    target = ws.record("to load one user by id use the repository")
    for content, _ in CORPUS[5:12]:
        ws.record(content)
    assert ws.query("loadUserById")[0].memory.id == target.id


# --------------------------------------------------------------------------- drift through the SDK


def test_drift_flags_a_changed_anchor_and_query_demotes_it(ws: Workspace, repo: Path) -> None:
    stale = ws.record("helper returns one", anchors=["src/users.py#helper"])
    fresh = ws.record("helper is documented in the notes", anchors=["notes.txt:1"])
    ws.record("helper has no anchor here")
    (repo / "src" / "users.py").write_text(USERS_PY.replace("return 1", "return 2"))
    report = ws.drift()
    by_id = {md.memory.id: md for md in report.memories}
    assert set(by_id) == {stale.id, fresh.id}  # unanchored memories are not checked
    assert by_id[stale.id].drift is Drift.STALE
    assert by_id[stale.id].checks[0].verdict is Verdict.CHANGED
    assert by_id[fresh.id].drift is Drift.FRESH
    assert [m.id for m in ws.list(drift="stale")] == [stale.id]
    hits = {h.memory.id: h for h in ws.query("helper")}
    assert hits[stale.id].drift is Drift.STALE
    assert hits[stale.id].score == pytest.approx(hits[stale.id].relevance * 0.7)  # demoted (drift.stale_factor), not buried
    assert "stale" in hits[stale.id].envelope.lower()
    assert "stale" not in hits[fresh.id].envelope.lower()


def test_the_fold_grows_with_the_ledger_and_sees_other_writers(tmp_path: Path) -> None:
    """A long-lived workspace extends its view by the ledger's new lines, from any process."""
    root = tmp_path / "grow"
    root.mkdir()
    anchorfs.init(root)
    with anchorfs.open(root) as mine, anchorfs.open(root) as other:
        a = mine.record("first")
        assert [m.id for m in mine.list()] == [a.id]
        b = other.record("second, from another writer")
        mine_view = mine.list()
        assert [m.id for m in mine_view] == [b.id, a.id]
        c = other.supersede(a.id, "first, corrected")
        assert mine.get(a.id).status == "superseded"
        assert mine.get(c.id).supersedes == a.id
        with open(root / ".anchorfs" / "ledger.jsonl", "ab") as fh:
            fh.write(b'{"v": 1, "tx": "half a line')  # a write still in flight
        assert {m.id for m in mine.list(status="all")} == {a.id, b.id, c.id}


# --------------------------------------------------------------------------- every input honoured or refused (issue 16)


def test_an_empty_anchor_list_leaves_anchors_as_they_are(ws: Workspace, repo: Path) -> None:
    """`anchors=[]` means "leave as is" in supersede and reanchor; `drop_anchors=True` drops."""
    a = ws.record("helper returns one", anchors=["src/users.py#helper", "notes.txt:2"])
    b = ws.supersede(a.id, "helper returns 1", anchors=[])
    assert [(x.path, x.symbol, x.lines) for x in b.anchors] == [("src/users.py", "helper", None), ("notes.txt", None, (2, 2))]
    (repo / "notes.txt").write_text("zero\n" + NOTES)  # line 2 moved to 3
    again = ws.reanchor(b.id, anchors=[])
    assert [(x.path, x.lines) for x in again.anchors] == [("src/users.py", None), ("notes.txt", (3, 3))]
    c = ws.supersede(b.id, "helper returns one, documented")  # and a later supersede inherits them
    assert [x.path for x in c.anchors] == ["src/users.py", "notes.txt"]

    bare = ws.reanchor(c.id, drop_anchors=True)
    assert bare.anchors == () and ws.get(c.id).anchors == ()
    d = ws.record("pool size is 10", anchors=["notes.txt:1"])
    e = ws.supersede(d.id, "pool size is 12", drop_anchors=True)
    assert e.anchors == ()
    before = snapshot(ws)
    for refused in (lambda: ws.supersede(e.id, "x", anchors=["notes.txt"], drop_anchors=True),
                    lambda: ws.reanchor(e.id, anchors=["notes.txt"], drop_anchors=True),
                    lambda: ws.reanchor(e.id, drop_anchors="yes")):  # type: ignore[arg-type]
        with pytest.raises(InputError, match="drop_anchors"):
            refused()
    assert snapshot(ws) == before


def test_reanchor_refuses_a_retired_memory_naming_the_head(ws: Workspace) -> None:
    from anchorfs.core.errors import RevisionError

    a = ws.record("retry 3 times", anchors=["notes.txt:1"])
    b = ws.supersede(a.id, "retry 5 times")
    c = ws.supersede(b.id, "retry 5 times with backoff")
    gone = ws.record("deploys on fridays", anchors=["notes.txt:2"])
    ws.retract(gone.id)
    before = snapshot(ws)
    with pytest.raises(RevisionError, match=f"{a.id} is superseded; re-anchor the head of its chain, {c.id}"):
        ws.reanchor(a.id)
    with pytest.raises(RevisionError, match=c.id):
        ws.reanchor(b.id, anchors=["notes.txt:3"])
    with pytest.raises(RevisionError, match=f"{gone.id} is retracted; only an active memory can be re-anchored"):
        ws.reanchor(gone.id)
    assert snapshot(ws) == before
    assert ws.reanchor(c.id).verified_at is not None  # the head itself is fine


def test_revert_of_a_successor_undoes_the_supersede_it_came_from(ws: Workspace) -> None:
    from anchorfs.core.errors import RevisionError

    a = ws.record("api version is v1")
    b = ws.supersede(a.id, "api version is v2")
    back = ws.revert(b.id, reason="v2 rolled back")
    assert back.id == a.id and back.status == "active"
    with anchorfs.open(ws.root) as fresh:
        assert fresh.get(a.id).status == "active" and fresh.get(a.id).superseded_by is None
        assert fresh.get(b.id).status == "retracted"
        assert [h.memory.id for h in fresh.query("api version")] == [a.id]
        last = fresh.ledger_entries(limit=1)[0]
        assert (last.op, last.reason) == ("revert", "v2 rolled back")
    lone = ws.record("a memory that replaced nothing")
    before = snapshot(ws)
    with pytest.raises(RevisionError, match="replaced nothing; nothing to revert"):
        ws.revert(lone.id)
    with pytest.raises(RevisionError, match="replaced nothing"):
        ws.revert(a.id)  # active again, and it replaced nothing itself
    assert snapshot(ws) == before


def test_the_same_claim_twice_returns_the_existing_memory_flagged(ws: Workspace, repo: Path) -> None:
    a = ws.record("token expiry is 24h", kind="constraint", anchors=["src/users.py#helper", "notes.txt:2"])
    assert a.duplicate is False and "duplicate" not in a.to_dict()
    before = snapshot(ws)
    again = ws.record("  token expiry is 24h\n", kind="constraint", anchors=["notes.txt:2", "src/users.py#helper"])
    assert again.id == a.id and again.duplicate is True and again == a
    assert again.to_dict()["duplicate"] is True  # what the CLI's --json and MCP report
    assert snapshot(ws) == before
    # another kind, other anchors, no anchors: other claims, written
    assert not ws.record("token expiry is 24h", anchors=["src/users.py#helper", "notes.txt:2"]).duplicate
    assert not ws.record("token expiry is 24h", kind="constraint", anchors=["notes.txt:2"]).duplicate
    # the anchored text changed since: a new claim on new ground
    (repo / "notes.txt").write_text(NOTES.replace("two", "TWO"))
    fresh = ws.record("token expiry is 24h", kind="constraint", anchors=["src/users.py#helper", "notes.txt:2"])
    assert fresh.id != a.id and not fresh.duplicate
    # a retired memory is no duplicate; a repeat inside one batch is written once
    ws.retract(fresh.id)
    batch = ws.record_many([{"content": "queue is sqs"}, {"content": "queue is sqs"}, {"content": "queue is kafka"}])
    assert [m.duplicate for m in batch] == [False, True, False] and batch[0].id == batch[1].id
    with anchorfs.open(ws.root) as other:
        assert len([m for m in other.list() if m.content == "queue is sqs"]) == 1
        assert other.record("queue is sqs").duplicate


def test_content_over_the_cap_is_refused_in_one_line(repo: Path) -> None:
    (repo / ".anchorfs.toml").write_text("[limits]\ncontent_chars = 100\n")
    anchorfs.init(repo)
    with anchorfs.open(repo) as ws:
        ok = ws.record("x" * 100)
        before = snapshot(ws)
        for refused in (lambda: ws.record("y" * 101), lambda: ws.supersede(ok.id, "z" * 5000),
                        lambda: ws.record_many([{"content": "fine"}, {"content": "w" * 101}])):
            with pytest.raises(InputError) as info:
                refused()
            assert "over the limit of 100 (limits.content_chars); nothing was written" in str(info.value)
            assert "\n" not in str(info.value)
            assert snapshot(ws) == before
    (repo / ".anchorfs.toml").unlink()
    with anchorfs.open(repo) as ws:  # the default: 32 KiB
        assert ws.config["limits.content_chars"] == 32768
        ws.record("v" * 32768)
        with pytest.raises(InputError, match="32,769 characters, over the limit of 32,768"):
            ws.record("v" * 32769)


def test_short_ids_resolve_from_two_characters_and_ambiguity_names_the_candidates(ws: Workspace) -> None:
    from anchorfs.core.errors import NotFoundError

    a = ws.record("the first memory")
    assert ws.get(a.id[:2]) == a  # `show 01`: every id made now starts with 01
    assert ws.get(a.id[:2].upper()) == a
    b = ws.record("the second memory")
    common = next(i for i in range(26) if a.id[i] != b.id[i])
    with pytest.raises(NotFoundError) as info:
        ws.get(a.id[:max(2, common)])
    message = str(info.value)
    assert "is ambiguous: 2 memories start with it" in message and a.id in message and b.id in message
    assert "\n" not in message
    assert ws.get(b.id[:common + 1]) == b
    with pytest.raises(NotFoundError, match="needs 2\\+ characters"):
        ws.get(a.id[:1])
    with pytest.raises(NotFoundError, match="no memory 'zz'"):
        ws.get("zz")


def test_reindex_reports_progress_batch_by_batch(tmp_path: Path) -> None:
    """A real model takes minutes over a large ledger: `reindex` says how far it is (issue 16)."""
    anchorfs.init(tmp_path)
    with anchorfs.open(tmp_path) as ws:
        ws.record_many([{"content": f"fact number {i}"} for i in range(600)])
        seen: list[tuple[int, int]] = []
        assert ws.reindex(progress=lambda done, total: seen.append((done, total))) == 600
    assert seen == [(256, 600), (512, 600), (600, 600)]
