"""What an anchored edit's and commit's hooks import and build (issue 20: 5x `python3 -c pass`):
no dataclass at all (the values they fold and check are `model.Value` classes, which behave as
the frozen dataclasses they were), so the diet cannot regress unnoticed."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import orjson
import pytest
from conftest import git, hook_probe

import anchorfs
from anchorfs import catchup
from anchorfs.config import Config, load_config
from anchorfs.errors import HistoryError
from anchorfs.git import read_git, run_git
from anchorfs.hashing import DEFAULT_GRANULARITY_NS
from anchorfs.ledger import Entry, stamped
from anchorfs.model import AnchorRef, Memory, StaleClaim
from anchorfs.symbols import Symbol

TOKEN = "class TokenIssuer:\n    def issue(self, user):\n        return sign(user, hours=24)\n"

@pytest.fixture
def repo(git_repo: Path) -> Path:
    (git_repo / "auth").mkdir()
    (git_repo / "auth" / "token.py").write_text(TOKEN)
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-qm", "initial")
    anchorfs.init(git_repo)
    with anchorfs.open(git_repo) as ws:
        ws.record("token expiry is 24 hours", anchors=["auth/token.py#TokenIssuer.issue"])
        ws.record("the issuer's first lines", anchors=["auth/token.py:1-2"])
    return git_repo


def test_anchored_edit_and_commit_hooks_build_no_dataclass(repo: Path) -> None:
    token = repo / "auth" / "token.py"
    edit = json.dumps({"session_id": "s", "cwd": str(repo), "hook_event_name": "PostToolUse", "tool_name": "Edit",
                       "tool_input": {"file_path": str(token)}})
    time.sleep(catchup.FINE_NS / 1e9 + 0.05)
    hook_probe(repo, edit, "hook", "post-edit", count_dataclasses=True)  # no snapshot yet: the workspace's path writes it
    token.write_text(TOKEN + "# a trailing comment: the symbol is unchanged\n")
    time.sleep(DEFAULT_GRANULARITY_NS / 1e9 + 0.1)
    runs = [(edit, ["hook", "post-edit"], "")]  # anchored, every memory still fresh
    for stdin, argv, said in runs:
        out, report = hook_probe(repo, stdin, *argv, count_dataclasses=True)
        assert said in out and report["made"] == [], (argv, out, report["made"])
    token.write_text(TOKEN.replace("hours=24", "hours=12"))
    out, report = hook_probe(repo, edit, "hook", "post-edit", count_dataclasses=True)
    # a drift change writes its events (`anchorfs.watch`, whose `DriftEvent` is still a dataclass)
    assert "made 1 memory stale" in out and set(report["made"]) <= {"DriftEvent"}, (out, report["made"])
    token.write_text(TOKEN + "# another trailing comment\n")
    hook_probe(repo, edit, "hook", "post-edit", count_dataclasses=True)  # fresh again: a drift change back
    git(repo, "commit", "-qam", "a comment")  # no hook installed: run by hand
    out, report = hook_probe(repo, "", "hook", "run", "--root", str(repo), count_dataclasses=True)  # anchored, still fresh
    assert out == "" and report["made"] == [], (out, report["made"])
    assert "subprocess" not in report["all"]  # its one `git diff-tree` spawned directly (`git.read_git`)
    assert "anchorfs.workspace" not in report["all"] and "lancedb" not in report["all"]


def _anchor() -> AnchorRef:
    return AnchorRef("a.py", "s" * 64, "f", None, "c" * 64, "abc", False, "t" * 64)


def _memory(**kw: object) -> Memory:
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    claim = StaleClaim("path", "old.py", "old.py does not exist", at)
    base: dict[str, object] = dict(id="01abc", content="c", kind="decision", tags=("t",), anchors=(_anchor(),),
                                   author="me", recorded_at=at, valid_from=at, stale_claims=(claim,))
    base.update(kw)
    return Memory(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize("make", [_anchor, _memory,
                                  lambda: Entry("tx1", "record", datetime(2026, 1, 1, tzinfo=timezone.utc), "me", None,
                                                (_memory(),), 3, (("01abc", ("tx0",)),), "why"),
                                  lambda: Symbol("A.b", "method", 1, 2, 0, 10)])
def test_values_behave_as_the_frozen_dataclasses_they_were(make: object) -> None:
    assert callable(make)
    v = make()
    same = make()
    assert v == same and hash(v) == hash(same) and v is not same and {v: 1}[same] == 1
    assert v != (1,) and (v == (1,)) is False
    assert pickle.loads(pickle.dumps(v)) == v and copy.copy(v) == v and copy.deepcopy(v) == v
    names = [f.name for f in dataclasses.fields(v)]
    assert names == list(type(v).__slots__) and dataclasses.is_dataclass(v)
    first = names[0]
    other = dataclasses.replace(v, **{first: "other"})
    assert getattr(other, first) == "other" and other != v and v.replace(**{first: "other"}) == other
    assert all(getattr(other, n) == getattr(v, n) for n in names[1:])
    assert repr(v) == f"{type(v).__qualname__}(" + ", ".join(f"{n}={getattr(v, n)!r}" for n in names) + ")"
    assert dataclasses.asdict(v)[first] == getattr(v, first)
    with pytest.raises(AttributeError):
        setattr(v, first, "x")
    with pytest.raises(AttributeError):
        delattr(v, first)
    with pytest.raises(TypeError):
        dataclasses.replace(v, nothing=1)
    assert not hasattr(v, "__dict__")
    match v:
        case AnchorRef(path, sha):
            assert (path, sha) == (v.path, v.sha256)  # type: ignore[union-attr]
        case _:
            pass


def test_memory_defaults_equality_and_forms() -> None:
    m = Memory("x", "c")
    assert (m.kind, m.status, m.tags, m.anchors, m.duplicate) == ("note", "active", (), (), False)
    assert m.recorded_at.tzinfo is not None and m.valid_from >= m.recorded_at
    assert Memory("x", "c", recorded_at=None).recorded_at is None  # type: ignore[arg-type]  # None kept, as given
    d = _memory(duplicate=True)
    assert d == _memory() and hash(d) == hash(_memory())  # `duplicate` is outside equality
    assert [f.compare for f in dataclasses.fields(d)][-1] is False
    assert Memory.from_dict(d.to_dict()) == d
    # orjson serializes them as it did the dataclasses: every field, by name
    assert orjson.loads(orjson.dumps(_anchor())) == {n: getattr(_anchor(), n) for n in AnchorRef.__slots__}
    with pytest.raises(TypeError):
        Memory("x")  # type: ignore[call-arg]


def test_entry_stamped_and_config(tmp_path: Path) -> None:
    e = Entry("tx1", "record", datetime(2026, 1, 1, tzinfo=timezone.utc), "me", None, (_memory(),))
    s = stamped(e, {})
    assert (s.seq, s.deps, s.tx) == (1, (("01abc", ()),), "tx1") and Entry.from_dict(s.to_dict()) == s
    assert Config().values == load_config(tmp_path, environ={}).values and Config() == Config()
    assert Config({"a": 1})["a"] == 1
    with pytest.raises(TypeError):
        hash(Config())  # its values are a dict, as the dataclass's were


def test_read_git_says_what_run_git_says(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (repo / "auth" / "more.py").write_text("x = 1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "more")
    args = ("diff-tree", "--no-commit-id", "--name-only", "-r", "-z", "--relative", "--root", "HEAD")
    assert read_git(repo / "auth", *args) == run_git(repo / "auth", *args) == b"more.py\0"  # relative to the folder
    assert read_git(repo, "rev-parse", "--verify", "-q", "nothing") == b""  # a failure: no output, no error
    big = read_git(repo, "log", "-p", "--all")  # more than a pipe's buffer is read whole
    assert big == run_git(repo, "log", "-p", "--all")
    monkeypatch.setenv("PATH", "")
    with pytest.raises(HistoryError, match="not installed"):
        read_git(repo, "status")


def test_the_hook_modules_import_neither_orjson_nor_dataclasses() -> None:
    """What a hook loads to read the fold snapshot's plan, `drift.json` and the manifest: orjson
    (which pulls `dataclasses`, `inspect`, `uuid`, `platform`) only where a write or a bulk read
    needs it. `catchup` and `snapplan` (imported by `foldsnap`) still import it at the top."""
    code = ("import sys\n"
            "import anchorfs.model, anchorfs.ledger, anchorfs.hashing, anchorfs.manifestfile, anchorfs.config\n"
            "import anchorfs.hook_recheck, anchorfs.symbols, anchorfs.git, anchorfs.hook_agent, anchorfs.hook_git\n"
            "print(sorted({'orjson', 'dataclasses', 'inspect', 'subprocess'} & set(sys.modules)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def _known_by_orjson(raw: bytes | None) -> dict[str, str] | None:
    """`hook_recheck.known_drift` as it read with orjson (the workspace's reader): the reference."""
    if raw is None:
        return {}
    try:
        data = orjson.loads(raw)
        if not isinstance(data, dict) or data.get("v") != 1 or not isinstance(data["drift"], dict):
            return None
        known, pending = data["drift"], data.get("pending") or {}
    except (ValueError, KeyError):
        return None
    drifts = ("fresh", "stale", "unknown")
    if not isinstance(pending, dict) or not all(type(v) is str and v in drifts for v in (*known.values(), *pending.values())):
        return None
    return known  # type: ignore[no-any-return]


@pytest.mark.parametrize("raw", [
    None, b"", b"{", b"[]", b'{"v":1,"drift":{}}', b'{"v":1,"drift":{"a":"stale","b":"fresh"},"pending":{"a":"stale"}}',
    b'{"v":1.0,"drift":{"a":"unknown"}}', b'{"v":true,"drift":{}}', b'{"v":2,"drift":{}}', b'{"v":1,"drift":[]}',
    b'{"v":1,"drift":{"a":"gone"}}', b'{"v":1,"drift":{"a":NaN}}', b'{"v":1,"drift":{},"pending":Infinity}',
    b'{"v":1,"drift":{"\\ud800":"stale"}}', b'{"v":1,"drift":{"\\ud83d\\ude00":"stale"}}',
    b'{"v":1,"drift":{"\xff":"stale"}}', b'\xef\xbb\xbf{"v":1,"drift":{}}', b'{"v":1,"drift":{"a":"stale"}} x',
    b'{"v":1,"drift":{"a":"stale"},"big":123456789012345678901234567890}', b'{"v":1,"drift":{},"pending":[1]}',
    b'{"v":1,"drift":{"a":"stale"},"pending":null}', b'{"v":1,"drift":{"a":"stale","a":"fresh"}}',
    b'{"v":1,"drift":{},"deep":' + b"[" * 5000 + b"]" * 5000 + b"}",
    '{"v":1,"drift":{"ünï\\n\\"q":"stale"}}'.encode(),
])
def test_known_drift_reads_drift_json_as_orjson_does(raw: bytes | None) -> None:
    from anchorfs.hook_recheck import known_drift

    assert known_drift(raw) == _known_by_orjson(raw)


def test_a_partial_manifest_read_finds_every_key_as_orjson_spells_it(tmp_path: Path) -> None:
    from anchorfs.hashing import HashCache
    from anchorfs.manifestfile import parse, parse_only

    names = ["tab\there.py", "ctl\x01\x1f.py", "del\x7f.py", "sep\u2028\u2029.py", "emoji\U0001f600.py", "é/ü.py",
             'q"\\.py', "plain.py"]
    cache = HashCache(tmp_path / "manifest.json")
    for i, rel in enumerate(names):
        path = tmp_path / "files" / f"{i}.py"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(rel.encode())
        cache.sha256(rel, path)
    assert cache.save(strict=True)
    data = (tmp_path / "manifest.json").read_bytes()
    whole = parse(data, 0, 0)[0]
    assert set(whole) == set(names)
    for rel in names:
        part = parse_only(data, 0, 0, [rel])
        assert part is not None and part[0] == {rel: whole[rel]}, rel
    assert parse_only(data, 0, 0, ["lone\ud800.py", "missing.py"]) == ({}, {}, False)


def test_post_edit_output_is_the_bytes_orjson_wrote() -> None:
    from types import SimpleNamespace

    from anchorfs.hook_agent import _post_edit_output

    events = [SimpleNamespace(after="stale", id="01a", detail='a.py#f changed "here"', content="ünï\tx\x01 \u2028 😀 \\ end"),
              SimpleNamespace(after="fresh", id="01b", detail="anchors match again", content="plain")]
    out = _post_edit_output("dir/ä.py", events)  # type: ignore[arg-type]
    data = orjson.loads(out)
    assert out == orjson.dumps(data).decode() + "\n" and "made 1 memory stale" in data["hookSpecificOutput"]["additionalContext"]
    assert _post_edit_output("a.py", []) == ""


@pytest.mark.parametrize("make", [_anchor, _memory])
def test_every_compared_field_counts_in_equality(make: object) -> None:
    """`AnchorRef` and `Memory` write their equality and hash out (the drift pass and the fold
    compare them in bulk): none of their fields is left out but `duplicate`."""
    assert callable(make)
    v = make()
    for f in dataclasses.fields(v):
        other = dataclasses.replace(v, **{f.name: object()})
        assert (other != v) is f.compare and (other == v) is not f.compare, f.name
        if not f.compare:
            assert hash(other) == hash(v)


def test_an_unanchored_edit_imports_neither_json_nor_re(repo: Path) -> None:
    (repo / "NOTES").write_text("not anchored\n")
    edit = json.dumps({"session_id": "s", "cwd": str(repo), "hook_event_name": "PostToolUse", "tool_name": "Edit",
                       "tool_input": {"file_path": str(repo / "NOTES")}})
    code = ("import io, sys\nsys.stdin = io.TextIOWrapper(io.BytesIO(sys.argv[1].encode()))\n"
            "from anchorfs.__main__ import main\ntry:\n    main(['hook', 'post-edit'])\nexcept SystemExit:\n    pass\n"
            "print(sorted({'json', 're', 'orjson', 'enum'} & set(sys.modules)))\n")
    got = subprocess.run([sys.executable, "-c", code, edit], cwd=repo, capture_output=True, text=True, check=True)
    assert got.stdout.strip() == "[]", got


@pytest.mark.parametrize("raw", [b'{"a": 1}', b'\xef\xbb\xbf{"a": 1}', '{"a": "ü"}'.encode("utf-16"),
                                 b' {"a": [1, 2.5, null, true]} \n', b'{"a": NaN}', b"[1]", b"{", b'{"a": 1} x',
                                 b'{"a": "\xff"}', b"[" * 100000 + b"]" * 100000])
def test_the_hooks_stdin_is_read_as_json_loads_reads_it(raw: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from anchorfs.errors import WorkspaceError
    from anchorfs.hook_agent import _read_stdin

    try:
        want: object = json.loads(raw)
    except (ValueError, RecursionError):
        want = WorkspaceError
    if not isinstance(want, (dict, type)):
        want = WorkspaceError  # not an object: refused too
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(raw)))
    if want is WorkspaceError:
        with pytest.raises(WorkspaceError):
            _read_stdin()
    else:
        got = _read_stdin()
        assert repr(got) == repr(want)  # NaN included (it equals nothing)
