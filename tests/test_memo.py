"""The drift memo: `anchorfs drift` replays its last output only while nothing it rested on moved.

A file's ctime cannot be set back, so these tests cannot age files past the default two-second
racy window without sleeping; they shrink the granularity the memo assumes instead
(`GRAN_NS`) and wait that long after each change, as the real default waits two seconds.
"""

from __future__ import annotations

import json
import marshal
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import anchorfs
import anchorfs.hashing as hashing
from anchorfs import memo
from anchorfs.__main__ import drift_args
from anchorfs.__main__ import main as entry
from anchorfs.cli import EXIT_STALE
from anchorfs.locate import STATE_DIR
from anchorfs.workspace import Workspace

GRAN_NS = 30_000_000
"""The racy window these tests assume: well above a coarse kernel clock tick (1-10 ms)."""

HOUR_NS = 3_600 * 1_000_000_000

PY = "def helper(x):\n    return x + 1\n\n\ndef other():\n    return 2\n"


@pytest.fixture(autouse=True)
def _short_racy_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hashing, "DEFAULT_GRANULARITY_NS", GRAN_NS)  # the memo's
    kwdefaults = hashing.HashCache.__init__.__kwdefaults__
    assert kwdefaults is not None
    monkeypatch.setitem(kwdefaults, "granularity_ns", GRAN_NS)  # the hash cache's


def settle() -> None:
    """Let every change so far leave the racy window (the real default: two seconds)."""
    time.sleep(GRAN_NS / 1e9 * 1.5)


def backdate(*paths: Path) -> None:
    """Age mtimes by an hour, so the hash cache (mtime-based racy rule) trusts what it hashes."""
    old = time.time_ns() - HOUR_NS
    for p in paths:
        os.utime(p, ns=(old, old))


def make_workspace(root: Path) -> Path:
    """A symbol, a line range and a whole file anchored, every file out of the racy window."""
    (root / "src" / "auth").mkdir(parents=True)
    (root / "src" / "auth" / "token.py").write_text(PY)
    (root / "README.md").write_text("one\ntwo\nthree\n")
    backdate(root / "src" / "auth" / "token.py", root / "README.md")
    anchorfs.init(root)
    with anchorfs.open(root) as ws:
        ws.record("helper adds one", anchors=["src/auth/token.py#helper"])
        ws.record("the readme has three lines", anchors=["README.md:1-3"])
        ws.record("the token module", anchors=["src/auth/token.py"])
    settle()
    return root


@pytest.fixture
def ws_root(tmp_path: Path) -> Path:
    return make_workspace(tmp_path / "ws")


def run(root: Path, *args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """The `anchorfs` entry point in this process: (exit code, stdout)."""
    with pytest.raises(SystemExit) as exc:
        entry(["--root", str(root), "drift", *args])
    code = exc.value.code
    return (code if isinstance(code, int) else 0), capsys.readouterr().out


def full(root: Path, *args: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    """What a full pass prints, the memo left untouched."""
    memo_file = root / STATE_DIR / memo.MEMO_FILE
    kept = memo_file.read_bytes() if memo_file.exists() else None
    with monkeypatch.context() as m:
        m.setattr(memo, "replay", lambda root, as_json: None)
        m.setattr(memo, "save", lambda *a, **k: False)
        got = run(root, *args, capsys=capsys)
    if kept is not None:
        memo_file.write_bytes(kept)
    return got


def replays(root: Path, *args: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    """Run `drift` with the full pass forbidden: only a replay can answer."""
    def no_pass(self: Workspace, **kw: Any) -> None:
        raise AssertionError("the full pass ran")

    with monkeypatch.context() as m:
        m.setattr(Workspace, "drift", no_pass)
        return run(root, *args, capsys=capsys)


def saved(root: Path) -> bool:
    return (root / STATE_DIR / memo.MEMO_FILE).exists()


# --------------------------------------------------------------------------- replay


def test_a_warm_drift_replays_the_last_output_byte_for_byte(
        ws_root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    first_json = run(ws_root, "--json", capsys=capsys)
    assert saved(ws_root)
    assert first_json[0] == 0 and json.loads(first_json[1])["fresh"] == 3
    first_text = full(ws_root, capsys=capsys, monkeypatch=monkeypatch)
    assert replays(ws_root, "--json", capsys=capsys, monkeypatch=monkeypatch) == first_json
    assert replays(ws_root, capsys=capsys, monkeypatch=monkeypatch) == first_text
    assert first_text[1] == "checked 3: 0 stale, 0 unknown, 3 fresh\n"


def test_the_replay_imports_neither_the_cli_nor_the_workspace(
        ws_root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    expected = run(ws_root, "--json", capsys=capsys)
    for name in ("anchorfs.cli", "anchorfs.workspace", "click", "orjson"):
        monkeypatch.setitem(sys.modules, name, None)  # importing any of them now raises ImportError
    assert run(ws_root, "--json", capsys=capsys) == expected


def test_a_stale_result_replays_with_its_exit_code(
        ws_root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    token = ws_root / "src" / "auth" / "token.py"
    token.write_text(PY.replace("x + 1", "x + 9"))
    backdate(token)
    settle()
    code, out = run(ws_root, "--json", capsys=capsys)
    assert code == EXIT_STALE and json.loads(out)["stale"] == 2
    assert saved(ws_root)
    assert replays(ws_root, "--json", capsys=capsys, monkeypatch=monkeypatch) == (code, out)


# --------------------------------------------------------------------------- what voids it


def _edit_same_size(root: Path) -> None:
    token = root / "src" / "auth" / "token.py"
    st = token.stat()
    token.write_text(PY.replace("x + 1", "x - 1"))  # same size; the old mtime forced back
    os.utime(token, ns=(st.st_atime_ns, st.st_mtime_ns))


def _move_folder_out_behind_a_link(root: Path) -> None:
    outside = root.parent / "elsewhere"
    shutil.move(str(root / "src" / "auth"), str(outside))
    (root / "src" / "auth").symlink_to(outside, target_is_directory=True)


CHANGES = {
    "an edit of the same size, mtime forced back": _edit_same_size,
    "a deleted anchored file": lambda root: (root / "README.md").unlink(),
    "a chmod": lambda root: (root / "README.md").chmod(0o600),
    "a config file created": lambda root: (root / ".anchorfs.toml").write_text("[drift]\ncache_ttl = 60\n"),
    "a memory recorded": lambda root: anchorfs.open(root).record("another", anchors=["README.md"]),
    "a folder moved out, a link left in its place": _move_folder_out_behind_a_link,
    "a file added next to an anchored one": lambda root: (root / "src" / "auth" / "new.py").write_text(""),
}


@pytest.mark.parametrize("change", list(CHANGES), ids=list(CHANGES))
def test_any_change_under_the_pass_means_a_full_pass(
        ws_root: Path, change: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    run(ws_root, "--json", capsys=capsys)
    assert memo.replay(str(ws_root), True) is not None
    CHANGES[change](ws_root)
    assert memo.replay(str(ws_root), True) is None
    settle()
    assert run(ws_root, "--json", capsys=capsys) == full(ws_root, "--json", capsys=capsys, monkeypatch=monkeypatch)


def test_the_full_pass_after_a_change_reports_it(
        ws_root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    run(ws_root, "--json", capsys=capsys)
    _edit_same_size(ws_root)
    code, out = run(ws_root, "--json", capsys=capsys)
    assert code == EXIT_STALE
    d = json.loads(out)
    assert (d["checked"], d["stale"], d["unknown"], d["fresh"]) == (3, 2, 0, 1)
    verdicts = {m["content"]: m["drift"] for m in d["memories"]}
    assert verdicts == {"helper adds one": "stale", "the token module": "stale"}  # the fresh one is counted only
    code, out = run(ws_root, "--json", "--all", capsys=capsys)
    assert code == EXIT_STALE
    verdicts = {m["content"]: m["drift"] for m in json.loads(out)["memories"]}
    assert verdicts == {"helper adds one": "stale", "the readme has three lines": "fresh", "the token module": "stale"}


def test_drift_lists_counts_and_the_memories_not_fresh_and_all_lists_every_one(
        ws_root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """At scale the fresh memories are nearly all of the output and say nothing: `drift` prints
    the counts and the others, `--all` every one (never from the memo, which keeps the short form)."""
    code, out = run(ws_root, "--json", capsys=capsys)
    assert code == 0
    assert json.loads(out) == {"checked": 3, "stale": 0, "unknown": 0, "fresh": 3, "memories": []}
    code, text = run(ws_root, capsys=capsys)
    assert (code, text) == (0, "checked 3: 0 stale, 0 unknown, 3 fresh\n")
    size = (ws_root / STATE_DIR / memo.MEMO_FILE).stat().st_size
    code, out = run(ws_root, "--json", "--all", capsys=capsys)
    every = json.loads(out)
    assert code == 0 and (every["checked"], every["fresh"]) == (3, 3)
    assert sorted(m["content"] for m in every["memories"]) == [
        "helper adds one", "the readme has three lines", "the token module"]
    assert {m["drift"] for m in every["memories"]} == {"fresh"}
    assert all(a["verdict"] == "fresh" for m in every["memories"] for a in m["anchors"])
    code, text = run(ws_root, "--all", capsys=capsys)
    assert code == 0 and text.count("fresh") >= 3 and text.endswith("checked 3: 0 stale, 0 unknown, 3 fresh\n")
    assert (ws_root / STATE_DIR / memo.MEMO_FILE).stat().st_size == size  # the memo holds the short forms only
    code, out = replays(ws_root, "--json", capsys=capsys, monkeypatch=monkeypatch)  # and it still replays
    assert code == 0 and json.loads(out)["memories"] == [] and json.loads(out)["fresh"] == 3


def test_a_folder_behind_a_link_is_unsafe_and_never_memoized(
        ws_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _move_folder_out_behind_a_link(ws_root)
    settle()
    code, out = run(ws_root, "--json", capsys=capsys)
    verdicts = {a["verdict"] for m in json.loads(out)["memories"] for a in m["anchors"]}
    assert "unsafe" in verdicts
    assert not saved(ws_root)


def test_an_environment_variable_the_config_reads_voids_it(
        ws_root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    run(ws_root, "--json", capsys=capsys)
    monkeypatch.setenv("ANCHORFS_DRIFT_CACHE_TTL", "60")
    assert memo.replay(str(ws_root), True) is None
    monkeypatch.delenv("ANCHORFS_DRIFT_CACHE_TTL")
    assert memo.replay(str(ws_root), True) is not None


def test_it_lives_no_longer_than_the_hash_cache_trusts_the_files(
        ws_root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    run(ws_root, "--json", capsys=capsys)
    with anchorfs.open(ws_root) as ws:
        ttl = float(ws.config["drift.cache_ttl"])
        until = ws.cache.trusted_until({rel: memo._key(os.lstat(ws_root / rel)) for rel in ("src/auth/token.py", "README.md")})
    assert until is not None and until <= time.time() + ttl
    now = time.time()
    monkeypatch.setattr(memo.time, "time", lambda: until + 0.001)
    assert memo.replay(str(ws_root), True) is None
    monkeypatch.setattr(memo.time, "time", lambda: now - 3600)  # a clock set back before the memo
    assert memo.replay(str(ws_root), True) is None


def test_another_copy_of_anchorfs_or_another_import_path_does_not_replay_it(
        ws_root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    run(ws_root, "--json", capsys=capsys)
    assert memo.replay(str(ws_root), True) is not None
    with monkeypatch.context() as m:
        m.setattr(memo, "__file__", "/opt/other-install/anchorfs/memo.py")  # a pipx copy, a second checkout
        assert memo.replay(str(ws_root), True) is None
    with monkeypatch.context() as m:
        m.setattr(sys, "path", [*sys.path, "/opt/shadowing-modules"])
        assert memo.replay(str(ws_root), True) is None
    assert memo.replay(str(ws_root), True) is not None


def test_a_read_error_is_never_memoized(
        ws_root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    token = ws_root / "src" / "auth" / "token.py"
    token.write_text(PY.replace("x + 1", "x + 7"))  # stale; the cache cannot vouch for it
    backdate(token)
    settle()

    def eio(*args: Any, **kwargs: Any) -> Any:
        raise OSError(5, "Input/output error")

    with monkeypatch.context() as m:  # a passing EIO: the stat will not change when it clears
        m.setattr(hashing.HashCache, "sha256", eio)
        m.setattr(hashing.HashCache, "hash_many", lambda self, rels, paths, stats, **kw: [None] * len(rels))
        code, out = run(ws_root, "--json", capsys=capsys)
    assert code == 0 and json.loads(out)["unknown"] == 3  # no file could be read
    assert not saved(ws_root)
    code, out = run(ws_root, "--json", capsys=capsys)
    assert code == EXIT_STALE and json.loads(out)["stale"] == 2


def test_a_pass_that_warned_is_not_memoized_so_every_run_warns(
        ws_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with (ws_root / STATE_DIR / "ledger.jsonl").open("a") as fh:
        fh.write('{"bad": 1}\n')
    settle()
    for _ in range(2):
        with pytest.raises(SystemExit):
            entry(["--root", str(ws_root), "drift", "--json"])
        out, err = capsys.readouterr()
        assert json.loads(out)["fresh"] == 3
        assert "skipping a bad line" in err
        assert not saved(ws_root)


def test_a_torn_ledger_tail_seen_while_a_writer_held_the_lock_is_not_memoized(
        ws_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with (ws_root / STATE_DIR / "ledger.jsonl").open("a") as fh:
        fh.write('{"op": "rec')  # a torn last line
    settle()
    with anchorfs.open(ws_root).ledger.lock():  # `reindex` holds it: the tail looks like an append under way
        with pytest.raises(SystemExit):
            entry(["--root", str(ws_root), "drift", "--json"])
        assert "torn" not in capsys.readouterr().err
    assert not saved(ws_root)
    with pytest.raises(SystemExit):
        entry(["--root", str(ws_root), "drift", "--json"])
    assert "skipping a torn last line" in capsys.readouterr().err  # the lock gone, it is reported


def test_a_warning_filtered_out_still_keeps_the_pass_from_being_memoized(
        ws_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import warnings

    with (ws_root / STATE_DIR / "ledger.jsonl").open("a") as fh:
        fh.write("this is not json\n")
    settle()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PYTHONWARNINGS=ignore
        with pytest.raises(SystemExit):
            entry(["--root", str(ws_root), "drift", "--json"])
        assert capsys.readouterr().err == ""
    assert not saved(ws_root)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # PYTHONWARNINGS=error: the full pass raises, as before the memo
        with pytest.raises(UserWarning, match="skipping a bad line"):
            entry(["--root", str(ws_root), "drift", "--json"])


def test_a_change_to_code_that_ran_voids_it(
        ws_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    plugin = tmp_path / "plugin_mod.py"
    plugin.write_text("X = 1\n")
    module = type(sys)("plugin_mod")
    module.__file__ = str(plugin)
    monkeypatch.setitem(sys.modules, "plugin_mod", module)
    settle()
    run(ws_root, "--json", capsys=capsys)
    assert memo.replay(str(ws_root), True) is not None
    plugin.write_text("X = 2\n")
    assert memo.replay(str(ws_root), True) is None


def test_a_damaged_foreign_or_moved_memo_is_ignored(
        ws_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    expected = run(ws_root, "--json", capsys=capsys)
    memo_file = ws_root / STATE_DIR / memo.MEMO_FILE
    good = memo_file.read_bytes()
    for bad in (good[: len(good) // 2], b"", b"\x00garbage", marshal.dumps((99,) + marshal.loads(good)[1:]),
                marshal.dumps([1, 2, 3]), marshal.dumps(marshal.loads(good)[:-1] + ("0",))):
        memo_file.write_bytes(bad)
        assert memo.replay(str(ws_root), True) is None
        assert run(ws_root, "--json", capsys=capsys) == expected  # the full pass answers, and mends it
        assert memo_file.read_bytes() != bad
    copy = tmp_path / "copy"
    shutil.copytree(ws_root, copy, symlinks=True)
    assert memo.replay(str(copy), True) is None  # another root: its own files, its own memo


# --------------------------------------------------------------------------- when none is saved


def test_nothing_is_memoized_inside_the_racy_window(
        ws_root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    (ws_root / "README.md").write_text("one\ntwo\nthree\n")  # just now: a stat cannot vouch for it yet
    backdate(ws_root / "README.md")  # the mtime looks old; the ctime cannot
    run(ws_root, "--json", capsys=capsys)
    assert not saved(ws_root)
    settle()
    run(ws_root, "--json", capsys=capsys)
    assert saved(ws_root)


def test_a_stale_memo_is_removed_when_the_next_pass_cannot_save_one(
        ws_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run(ws_root, "--json", capsys=capsys)
    assert saved(ws_root)
    readme = ws_root / "README.md"
    readme.write_text("changed\n")
    later = time.time() + 3600  # dated ahead of the pass: no stat can vouch for it, however slow the run
    os.utime(readme, (later, later))
    run(ws_root, "--json", capsys=capsys)
    assert not saved(ws_root)


def test_an_unwritable_state_folder_never_fails_the_command(
        ws_root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANCHORFS_TEST_FAULT", "memo-write")
    monkeypatch.setattr("anchorfs.writes.fault", lambda point: (_ for _ in ()).throw(OSError(28, "No space left")))
    code, out = run(ws_root, "--json", capsys=capsys)
    assert code == 0 and json.loads(out)["fresh"] == 3
    assert not saved(ws_root)
    assert not list((ws_root / STATE_DIR).glob("*.tmp"))


# --------------------------------------------------------------------------- the entry's parse


@pytest.mark.parametrize(("argv", "expected"), [
    (["drift"], (None, False)),
    (["drift", "--json"], (None, True)),
    (["--json", "drift"], (None, True)),
    (["--root", "a", "drift"], ("a", False)),
    (["--root=a", "--json", "drift", "--root", "b"], ("b", True)),
    (["drift", "--root=b", "--json"], ("b", True)),
    (["drift", "--root", "a", "--root", "b"], None),  # repeated: the CLI's parser decides
    (["drift", "--root"], None),
    (["drift", "--root", "--json"], None),
    (["drift", "--root="], None),
    (["drift", "-h"], None),
    (["drift", "--help"], None),
    (["--version"], None),
    (["drift", "drift"], None),
    (["drift", "--jso"], None),
    (["list", "--json"], None),
    (["drift", "--"], None),
    ([], None),
])
def test_only_a_plain_drift_command_line_takes_the_replay(argv: list[str], expected: object) -> None:
    assert drift_args(argv) == expected


def test_the_entry_hands_anything_else_to_the_cli(
        ws_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        entry(["--root", str(ws_root), "--json", "list"])
    assert exc.value.code in (0, None)
    assert len(json.loads(capsys.readouterr().out)["memories"]) == 3


# --------------------------------------------------------------------------- the property


def _mutations(root: Path) -> dict[str, Any]:
    token = root / "src" / "auth" / "token.py"
    readme = root / "README.md"
    return {
        "edit": lambda: token.write_text(PY.replace("x + 1", "x + 2")),
        "edit back": lambda: token.write_text(PY),
        "same size, old mtime": lambda: _edit_same_size(root),
        "move lines down": lambda: readme.write_text("zero\none\ntwo\nthree\n"),
        "lines back": lambda: readme.write_text("one\ntwo\nthree\n"),
        "delete readme": lambda: readme.unlink(missing_ok=True),
        "lock readme": lambda: readme.exists() and readme.chmod(0o000),
        "unlock readme": lambda: readme.exists() and readme.chmod(0o644),
        "rename helper": lambda: token.write_text(PY.replace("helper", "helped")),
        "touch": lambda: os.utime(token),
        "config": lambda: (root / ".anchorfs.toml").write_text("[drift]\ncache_ttl = 100\n"),
        "nothing": lambda: None,
    }


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.sampled_from(sorted(_mutations(Path("/")))), min_size=1, max_size=6),
       as_json=st.booleans())
def test_whatever_changes_a_replay_equals_a_full_pass(
        tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, steps: list[str], as_json: bool) -> None:
    root = make_workspace(tmp_path_factory.mktemp("prop") / "ws")
    args = ("--json",) if as_json else ()
    mutate = _mutations(root)
    run(root, *args, capsys=capsys)  # a full pass that saves a memo
    for step in steps:
        mutate[step]()
        # At once: whatever answers (a replay where nothing it rested on moved, else a full
        # pass), it must say what a full pass says.
        assert run(root, *args, capsys=capsys) == full(root, *args, capsys=capsys, monkeypatch=monkeypatch), step
        settle()
        assert run(root, *args, capsys=capsys) == full(root, *args, capsys=capsys, monkeypatch=monkeypatch), step
        assert memo.replay(str(root), as_json) is not None, step  # that pass could vouch for all it read
    if (root / "README.md").exists():
        (root / "README.md").chmod(0o644)


def test_an_earlier_gitignore_learns_of_the_memo_and_an_edited_one_is_left_alone(
        ws_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from anchorfs.workspace import _GITIGNORE_BEFORE

    ignore = ws_root / STATE_DIR / ".gitignore"
    ignore.write_text(_GITIGNORE_BEFORE[0])
    settle()
    run(ws_root, "--json", capsys=capsys)
    assert saved(ws_root)
    assert memo.MEMO_FILE in ignore.read_text().splitlines()
    edited = _GITIGNORE_BEFORE[0] + "my-notes.txt\n"
    ignore.write_text(edited)
    (ws_root / STATE_DIR / memo.MEMO_FILE).unlink()
    settle()
    run(ws_root, "--json", capsys=capsys)
    assert saved(ws_root)
    assert ignore.read_text() == edited


def test_a_memo_replays_without_the_c_loop_and_still_sees_a_change(
        ws_root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The memo keeps its stats packed as the C loop takes them; without the C loop they are
    unpacked and compared in Python, with the same answers."""
    first = run(ws_root, "--json", capsys=capsys)
    with monkeypatch.context() as m:
        m.setattr(memo, "_statmatch", None)
        assert replays(ws_root, "--json", capsys=capsys, monkeypatch=monkeypatch) == first
        _edit_same_size(ws_root)
        assert memo.replay(str(ws_root), True) is None
