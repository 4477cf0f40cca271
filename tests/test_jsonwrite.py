"""`anchorfs.jsonwrite` and `jsonread.loads_as_orjson`: orjson's bytes and values without its
import, so a hook that makes a memory stale (the hash cache's manifest, `drift.json`, the events
log) or answers a session start never loads orjson (issue 20)."""

from __future__ import annotations

import dataclasses
import enum
import json
import random
import time
from datetime import datetime, timezone
from pathlib import Path

import orjson
import pytest
from conftest import git, hook_probe

import anchorfs
from anchorfs import hashing, manifestfile


def dumps(value: object) -> bytes:
    from anchorfs.jsonwrite import dumps  # here: the hooks' test below runs on the code before it too

    return dumps(value)


def loads_as_orjson(data: bytes) -> object:
    from anchorfs.jsonread import loads_as_orjson

    return loads_as_orjson(data)

TOKEN = "class TokenIssuer:\n    def issue(self, user):\n        return sign(user, hours=24)\n"


class _Color(enum.Enum):
    RED = 1


class _Kind(enum.StrEnum):
    FACT = "fact"


@dataclasses.dataclass
class _Point:
    x: int


def _outcome(fn: object, value: object) -> object:
    assert callable(fn)
    try:
        return fn(value)
    except Exception as e:  # the error's type is part of what must match
        return type(e)


_ODD = [None, True, False, 0, -1, 2**63 - 1, -2**63, 2**64 - 1, 2**64, -2**63 - 1, 1764690000123456789,
        0.0, -0.0, 1.5, 1e15, 1e16, 1e-4, 1e-5, 1.7646e9, 5e-324, 1e308, float("nan"), float("inf"), -float("inf"),
        "", "a\"b\\c", "\x00\x1f\x7f\u2028\u2029é😀", "\n\r\t\b\f", "\ud800", "1e-5", "x" + "1" * 25,
        [], (), {}, [1, [2, [3]]], (1, "a"), {"k": {"j": [None]}}, {"e": 1e-7}, {"big": [2**70]},
        datetime(2026, 1, 2, tzinfo=timezone.utc), _Color.RED, _Kind.FACT, _Point(1), b"bytes", {1, 2}, object()]


@pytest.mark.parametrize("value", _ODD, ids=range(len(_ODD)))
def test_dumps_writes_orjsons_bytes_or_raises_its_error(value: object) -> None:
    assert _outcome(dumps, value) == _outcome(orjson.dumps, value)


def test_dumps_matches_orjson_on_random_values() -> None:
    r = random.Random(20)

    def make(depth: int = 0) -> object:
        k = r.randrange(8 if depth < 4 else 5)
        if k == 0:
            return r.choice([None, True, False])
        if k == 1:
            return r.choice([r.randrange(-10**6, 10**6), r.getrandbits(64), -r.getrandbits(63), r.getrandbits(66)])
        if k == 2:
            return r.choice([r.random(), r.uniform(0, 2e9), 10 ** r.uniform(-9, 20), -(10 ** r.uniform(-9, 20))])
        if k in (3, 4):
            return "".join(chr(r.randrange(0, 0x3000)) for _ in range(r.randrange(6)))
        if k == 5:
            return [make(depth + 1) for _ in range(r.randrange(4))]
        if k == 6:
            return tuple(make(depth + 1) for _ in range(r.randrange(3)))
        return {"".join(chr(r.randrange(32, 0x3000)) for _ in range(r.randrange(4))): make(depth + 1)
                for _ in range(r.randrange(4))}

    for _ in range(3000):
        value = make()
        assert _outcome(dumps, value) == _outcome(orjson.dumps, value), value


_RAW = [b"[]", b"{}", b'{"a":[1,2.5,null,true,false,"x"]}', b"[NaN]", b"[Infinity]", b"[-Infinity]", b"[1e400]",
        b"[1e5]", b"[1E-3]", b"[18446744073709551615]", b"[18446744073709551616]", b"[-9223372036854775808]",
        b"[-9223372036854775809]", b'["\\ud800"]', b'["\\ud83d\\ude00"]', b'["\\uD83D\\uDE00"]', b'"\\u00e9"',
        b"\xef\xbb\xbf[1]", b"[\xff]", b'["\x01"]', b"[1,]", b"[1] x", b"", b"  ", b"[01]", b"[-0]", b"[-0.0]",
        b"[" * 3000 + b"]" * 3000, b'{"a":1,"a":2}', b' {"k" : [ 1 , 2 ] } ',
        # a bare number at the very start (no separator before it), and after whitespace
        b"18446744073709551616", b"-9223372036854775809", b"18446744073709551615", b" 18446744073709551616",
        b"\n-9223372036854775809", b'"\\ud800"', b'"a\\\\ud800"']


@pytest.mark.parametrize("raw", _RAW, ids=range(len(_RAW)))
def test_loads_as_orjson_reads_or_refuses_as_orjson(raw: bytes) -> None:
    def ref(data: bytes) -> object:
        try:
            return repr(orjson.loads(data))
        except orjson.JSONDecodeError:
            return ValueError

    def ours(data: bytes) -> object:
        try:
            return repr(loads_as_orjson(data))
        except ValueError:
            return ValueError

    assert ours(raw) == ref(raw)


def test_the_manifest_is_written_byte_for_byte_as_orjson_wrote_it(tmp_path: Path) -> None:
    """The payload `HashCache._write` built with orjson (a Fragment for the moves), against what
    it writes now, with moves and without."""
    (tmp_path / ".anchorfs").mkdir()
    cache = hashing.HashCache(tmp_path / ".anchorfs" / "manifest.json")
    entries = {"a.py": [10, 1764690000123456789, 1764690000123456789, 42, "f" * 64, 1764690000.25],
               "dir/é b.py": [0, 1, 2, 3, None, 0.5]}
    for moves in ({}, {"k1": ("old.py", "new.py", "0" * 64, False)}):
        cache._entries, cache._moves, cache._dirty, cache._rest = dict(entries), dict(moves), True, None
        assert cache.save(strict=True)
        body = orjson.dumps(entries)
        head: dict[str, object] = {"format": manifestfile.FORMAT, "version": manifestfile.MANIFEST_VERSION,
                                   "crc32": __import__("zlib").crc32(body),
                                   "newest": 1764690000123456789}  # the hashed entries' latest mtime/ctime
        if moves:
            listed = orjson.dumps([[key, *m] for key, m in moves.items()])
            head["moves"] = orjson.Fragment(listed)
            head["moves_crc32"] = __import__("zlib").crc32(listed)
        want = orjson.dumps(head)[:-1] + b"," + manifestfile.ENTRIES_KEY + body + b"}"
        data = (tmp_path / ".anchorfs" / "manifest.json").read_bytes()
        assert data == want
        got, got_moves, old = manifestfile.parse(data, time.time_ns() + 10**10, 0)
        assert got == entries and got_moves == {k: tuple(m) for k, m in moves.items()} and not old


def test_hooks_that_make_a_memory_stale_do_not_import_orjson(git_repo: Path) -> None:
    token = git_repo / "auth" / "token.py"
    token.parent.mkdir()
    token.write_text(TOKEN)
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-qm", "initial")
    anchorfs.init(git_repo)
    with anchorfs.open(git_repo) as ws:
        ws.record("token expiry is 24 hours", anchors=["auth/token.py#TokenIssuer.issue"])
    edit = json.dumps({"session_id": "s", "cwd": str(git_repo), "hook_event_name": "PostToolUse", "tool_name": "Edit",
                       "tool_input": {"file_path": str(token)}})
    hook_probe(git_repo, edit, "hook", "post-edit")
    token.write_text(TOKEN.replace("hours=24", "hours=12"))
    time.sleep(hashing.DEFAULT_GRANULARITY_NS / 1e9 + 0.1)  # past the racy window: the new hash is saved
    out, report = hook_probe(git_repo, edit, "hook", "post-edit")
    mods = report["all"]
    assert "made 1 memory stale" in out
    assert "orjson" not in mods and "dataclasses" not in mods
    assert "hashlib" not in mods  # the edited file hashed by the built-in SHA-256 (`hashing.new_sha256`)
    assert "json" not in mods  # the manifest, drift.json and the answer by json's C parts alone (`_json`)
    manifest = git_repo / ".anchorfs" / "manifest.json"
    data = manifest.read_bytes()
    assert data == orjson.dumps(orjson.loads(data))  # the hash cache saved it, as orjson spells it
    git(git_repo, "commit", "-qam", "shorter expiry")
    token.write_text(TOKEN)
    git(git_repo, "commit", "-qam", "back to 24 hours")
    time.sleep(hashing.DEFAULT_GRANULARITY_NS / 1e9 + 0.1)
    out, report = hook_probe(git_repo, "", "hook", "run", "--root", str(git_repo))  # the post-commit hook
    mods = report["all"]
    assert "orjson" not in mods and "dataclasses" not in mods, out
    events = (git_repo / ".anchorfs" / "events.jsonl").read_bytes().splitlines()
    assert events and all(line == orjson.dumps(orjson.loads(line)) for line in events)
    drift = (git_repo / ".anchorfs" / "drift.json").read_bytes()
    assert drift == orjson.dumps(orjson.loads(drift)) and orjson.loads(drift)["drift"]


def test_session_start_answer_is_orjsons_bytes() -> None:
    from anchorfs.digest import _session_output

    text = "anchorfs: 2 memories\n- \"quoted\" é \x01 1e-05"
    want = orjson.dumps({"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}})
    assert _session_output(text) == want.decode() + "\n" and _session_output("") == ""


_PLAIN = [None, True, 1, -2**70, 1.5, 1e-7, float("nan"), float("inf"), "é\ud800\x00\"", [1, [2, {"a": ()}]],
          {"k": "v", "é": [None, 0.1]}, {1: 2, None: 3, 1.5: 4, True: 5}, {(1,): 2}, b"bytes", object(),
          datetime(2026, 1, 2, tzinfo=timezone.utc)]


@pytest.mark.parametrize("value", _PLAIN, ids=range(len(_PLAIN)))
@pytest.mark.parametrize("ascii_", [True, False])
@pytest.mark.parametrize("separators", [(", ", ": "), (",", ":")])
def test_json_dumps_is_json_dumps(value: object, ascii_: bool, separators: tuple[str, str]) -> None:
    from anchorfs.jsonwrite import json_dumps

    def ours(v: object) -> object:
        try:
            return json_dumps(v, ensure_ascii=ascii_, separators=separators)
        except Exception as e:
            return type(e), str(e)

    def theirs(v: object) -> object:
        try:
            return json.dumps(v, ensure_ascii=ascii_, separators=separators)
        except Exception as e:
            return type(e), str(e)

    assert ours(value) == theirs(value)
    cyclic: list[object] = []
    cyclic.append(cyclic)
    assert ours(cyclic) == theirs(cyclic)


@pytest.mark.parametrize("raw", [b'{"a": NaN}', b"[Infinity]", b"[-Infinity]", b'{"a": 1e400}', b'{"v": 1}'])
def test_loads_without_constants_refuses_what_json_takes_only_as_constants(raw: bytes) -> None:
    from anchorfs.jsonread import loads

    def refused(name: str) -> None:
        raise ValueError(name)

    try:
        want: object = json.loads(raw.decode(), parse_constant=refused)
    except ValueError:
        want = ValueError
    try:
        got: object = loads(raw, constants=False)
    except ValueError:
        got = ValueError
    assert repr(got) == repr(want)
