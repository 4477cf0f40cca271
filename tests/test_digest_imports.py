"""What a session start's full digest imports (issue 20: 5x `python3 -c pass`): opening the
workspace loads none of the modules only other paths use (`recall`, `revision`, `storesync`,
`writes`, `hits`, `forks`), so neither `dataclasses` nor orjson."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import git

import anchorfs

_PROBE = ("import io, sys\n"
          "import anchorfs.foldsnap as foldsnap\n"
          "foldsnap.MIN_LINES = 0  # a small ledger snapshotted too, as a large one is\n"
          "from anchorfs.__main__ import main\n"
          "sys.stdin = io.TextIOWrapper(io.BytesIO(sys.argv[1].encode()))\n"
          "try:\n    main(sys.argv[2:])\nexcept SystemExit:\n    pass\n"
          "mods = sorted(sys.modules)  # before `json`, which imports `re`\n"
          "import json\n"
          "sys.stderr.write(json.dumps(mods))\n")


@pytest.fixture
def token(git_repo: Path) -> Path:
    """A committed file with a symbol memory and a whole-file memory on it, and a session start
    already run (the fold's snapshot written, as any earlier read would have)."""
    token = git_repo / "auth" / "token.py"
    token.parent.mkdir()
    token.write_text("def issue(user):\n    return sign(user, hours=24)\n")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-qm", "initial")
    anchorfs.init(git_repo)
    with anchorfs.open(git_repo) as ws:
        ws.record("token expiry is 24 hours", anchors=["auth/token.py#issue"])
        ws.record("tokens are signed", anchors=["auth/token.py"])
    _session_start(git_repo)
    return token


def _session_start(root: Path, *, probe: str = _PROBE) -> tuple[str, list[str]]:
    """`anchorfs hook session-start` in a process of its own: (its answer, the modules it loaded)."""
    start = json.dumps({"session_id": "s", "cwd": str(root), "hook_event_name": "SessionStart", "source": "startup"})
    proc = subprocess.run([sys.executable, "-c", probe, start, "hook", "session-start"], cwd=root,
                          capture_output=True, text=True, timeout=60, check=True)
    return proc.stdout, json.loads(proc.stderr)


def test_a_full_session_start_digest_imports_no_dataclasses(token: Path) -> None:
    token.write_text("def issue(user):\n    return sign(user, hours=24)\n\n# edited\n")
    out, mods = _session_start(token.parent.parent)
    said = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert "token expiry is 24 hours" in said and "tokens are signed" in said
    assert "anchorfs.workspace" in mods  # the full digest, not a replay
    gone = {"dataclasses", "orjson", "anchorfs.recall", "anchorfs.revision", "anchorfs.storesync", "anchorfs.writes",
            "anchorfs.hits", "anchorfs.forks"}
    assert gone.isdisjoint(mods), sorted(gone & set(mods))


def test_a_full_digest_over_unchanged_files_imports_no_typing(token: Path) -> None:
    """`typing` (about 12M instructions) is imported only for the type checker in every module
    a session start runs; tree-sitter imports it too, so only a digest that parses no file
    shows it: here every anchored file hashes as recorded."""
    token.write_text(token.read_text())  # the same bytes: no memo holds, every memory still fresh
    out, mods = _session_start(token.parent.parent)
    assert "0 stale" in out and "anchorfs.workspace" in mods
    assert "typing" not in mods


def test_a_full_digest_imports_no_pathlib_nor_re(token: Path) -> None:
    """`pathlib` with its `re`, `enum`-built flags, `fnmatch` and `urllib.parse` costs 0.8x
    `python3 -c pass`: the workspace a digest opens keeps its paths as str, and an anchor spec
    is parsed (the one use of `re` there) only where one is written. (A digest that parses a
    changed file loads tree-sitter, whose `typing` imports `re`.)"""
    token.write_text(token.read_text())  # the same bytes: the full pass hashes every anchored file
    out, mods = _session_start(token.parent.parent)
    assert "token expiry is 24 hours" in out and "anchorfs.workspace" in mods
    assert "anchorfs.hashing" in mods and "anchorfs.symbols" not in mods
    assert {"pathlib", "re", "fnmatch", "urllib.parse"}.isdisjoint(mods), sorted(
        {"pathlib", "re", "fnmatch", "urllib.parse"} & set(mods))
    # the locks are `_thread`'s, the snapshot's file closes in `__del__`: about 1.2 ms of imports
    assert {"threading", "weakref"}.isdisjoint(mods), sorted({"threading", "weakref"} & set(mods))


def test_a_start_past_the_ttl_renews_the_memo_without_the_workspace(token: Path) -> None:
    """Past the hash cache's TTL, with nothing changed, the memo is renewed (`digest_memo._renew`):
    every anchored file read and hashed again, the workspace never opened, and none of `pathlib`,
    `re`, the config's parser, the model's `datetime` and `enum` or the hash cache loaded."""
    import time

    root = token.parent.parent
    (root / ".anchorfs.toml").write_text("[drift]\ncache_ttl = 1.0\n")
    time.sleep(2.1)  # the files past the hash cache's racy window (two seconds): their hashes kept
    first, _ = _session_start(root)  # the full digest, its memo written under the new TTL
    assert (root / ".anchorfs" / "digest.memo").is_file()
    time.sleep(1.1)  # past the TTL
    plain = _PROBE.replace("import anchorfs.foldsnap as foldsnap\n", "").replace("foldsnap.MIN_LINES = 0", "pass")
    out, mods = _session_start(root, probe=plain)  # foldsnap (the ledger, the model) not imported by the probe
    assert out == first
    heavy = {"anchorfs.workspace", "anchorfs.config", "anchorfs.model", "pathlib", "re", "enum", "datetime"}
    assert heavy.isdisjoint(mods), sorted(heavy & set(mods))
    assert "anchorfs.filehash" in mods  # the files read again: no replay
    assert "anchorfs.hashing" not in mods and "anchorfs.manifestfile" not in mods  # the hash cache never loaded


def test_a_digest_after_a_memory_was_recorded_imports_no_typing(token: Path) -> None:
    """The ledger grown past its snapshot: the tail is overlaid on the snapshot's plan
    (`planoverlay`), which imports `typing` only for the type checker too."""
    root = token.parent.parent
    with anchorfs.open(root) as ws:
        ws.record("the nightly export runs at 2 am", kind="note")
    out, mods = _session_start(root)
    said = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert "the nightly export runs at 2 am" in said and "token expiry is 24 hours" in said
    assert "anchorfs.planoverlay" in mods and "anchorfs.workspace" in mods  # the full digest over the tail
    assert "typing" not in mods


_EXIT_GC = ("import atexit, gc, io, os, sys\n"
            "def said():\n"
            "    sys.stderr.write('collector on' if gc.isenabled() else 'collector off')\n"
            "    sys.stderr.flush()\n"
            "atexit.register(said)\n"
            "_exit = os._exit\n"
            "os._exit = lambda code: (said(), _exit(code))  # a hook's process skips the teardown\n"
            "sys.stdin = io.TextIOWrapper(io.BytesIO(sys.argv[1].encode()))\n"
            "sys.argv = ['anchorfs', *sys.argv[2:]]\n"
            "from anchorfs.__main__ import main\n"
            "main()\n")


def test_a_hooks_process_runs_without_the_collector(git_repo: Path) -> None:
    """A hook's process builds the fold and the hash cache's entries, then exits: the cyclic
    collector is off in it (the agent hooks and the post-commit hook), never in a caller's
    process that calls `main([...])`."""
    anchorfs.init(git_repo)
    edit = json.dumps({"session_id": "s", "cwd": str(git_repo), "hook_event_name": "PostToolUse", "tool_name": "Edit",
                       "tool_input": {"file_path": str(git_repo / "README")}})
    for stdin, argv in ((edit, ["hook", "post-edit"]), ("", ["hook", "run", "--root", str(git_repo)]),
                        ("", ["list"])):
        proc = subprocess.run([sys.executable, "-c", _EXIT_GC, stdin, *argv], cwd=git_repo, capture_output=True,
                              text=True, timeout=60, check=False)
        assert proc.stderr.endswith("collector on" if argv == ["list"] else "collector off"), (argv, proc.stderr[-300:])


def test_a_full_digest_after_an_edit_elsewhere_in_a_file_parses_it_once(token: Path) -> None:
    """A symbol memory on a file edited elsewhere: the first full digest parses the file
    (tree-sitter), and the next process's full digest takes the verdict kept for those bytes
    (`anchorfs.judged`), importing no tree-sitter: about a fifth of a first session's digest."""
    import time

    token.write_text(token.read_text() + "\n# edited elsewhere\n")
    time.sleep(2.1)  # past the real racy window: the file's new hash is kept, and the verdict with it
    out, mods = _session_start(token.parent.parent)
    assert "token expiry is 24 hours" in out and "anchorfs.symbols" in mods
    (token.parent.parent / ".anchorfs" / "digest.memo").unlink(missing_ok=True)
    again, mods = _session_start(token.parent.parent)
    assert again == out and "anchorfs.workspace" in mods  # the full digest again, the same answer
    assert "anchorfs.symbols" not in mods and not any(m.startswith("tree_sitter") for m in mods)


def test_a_full_digest_over_unchanged_files_imports_no_lock_or_unicode_tables(token: Path) -> None:
    """A digest that writes nothing under the ledger's lock takes neither `contextlib` (the lock
    is a plain context manager) nor `fcntl`, and one whose paths are ASCII never reads the
    Unicode tables (`unicodedata`, for the state folder's name on folding filesystems)."""
    token.write_text(token.read_text())  # the same bytes: the full pass, every memory still fresh
    out, mods = _session_start(token.parent.parent)
    assert "0 stale" in out and "anchorfs.workspace" in mods
    assert {"contextlib", "fcntl", "unicodedata"}.isdisjoint(mods), sorted({"contextlib", "fcntl", "unicodedata"} & set(mods))
