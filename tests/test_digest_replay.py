"""A replayed session-start digest's memo (`.anchorfs/digest.memo`) is read by the C JSON
scanner alone: the `json` package (and the `re` it compiles its patterns with, together a
third of a replay's own cost) is not imported for it; its values read back as `json.loads`
gives them."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import anchorfs
import anchorfs.hashing as hashing
from anchorfs.digest_memo import _json_loads

_REPLAY = ("import os, sys\n"
           "from anchorfs.digest_memo import _replay_digest\n"
           "out = _replay_digest(os.path.realpath(sys.argv[1]))\n"
           "sys.stdout.write(out if out is not None else 'none')\n"
           "sys.stderr.write(repr(sorted(m for m in ('json', 're', 'anchorfs.workspace') if m in sys.modules)))\n")
_PROBE = ("import io, sys\n"
          "from anchorfs.__main__ import main\n"
          "sys.stdin = io.TextIOWrapper(io.BytesIO(sys.argv[1].encode()))\n"
          "try:\n    main(['hook', 'session-start'])\nexcept SystemExit:\n    pass\n"
          "sys.stderr.write(repr(sorted(m for m in ('json', 're', 'anchorfs.workspace') if m in sys.modules)))\n")


def test_a_replayed_digest_imports_no_json_package(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("def f():\n    return 1\n")
    anchorfs.init(root)
    with anchorfs.open(root) as ws:
        ws.record("f returns one", anchors=["src/a.py#f"])
        ws.record("an unanchored one, \"quoted\" and caf\u00e9")
    time.sleep(hashing.DEFAULT_GRANULARITY_NS / 1e9 + 0.1)  # the real racy window, once
    event = json.dumps({"session_id": "s", "cwd": str(root), "hook_event_name": "SessionStart", "source": "startup"})

    def start() -> tuple[str, str]:
        proc = subprocess.run([sys.executable, "-c", _PROBE, event], cwd=root, capture_output=True, text=True,
                              timeout=60, check=False)
        return proc.stdout, proc.stderr

    full, loaded = start()
    assert "anchorfs.workspace" in loaded and (root / ".anchorfs" / "digest.memo").is_file()
    assert start()[0] == full  # replayed, the same bytes
    proc = subprocess.run([sys.executable, "-c", _REPLAY, str(root)], cwd=root, capture_output=True, text=True,
                          timeout=60, check=False)
    assert (proc.stdout, proc.stderr) == (full, "[]")  # the memo read without json or re


@pytest.mark.parametrize("value", [
    {"format": 1, "root": "/tmp/x", "written": 1.7e9, "until": float("inf"), "paths": ["/a", "/b\u00e9"],
     "keys": [[1, 2, 3, 4]], "absent": [], "out": "line\n\"two\"\t\u2026 \ud83d\ude00"},
    [], {}, [1, -2, 3.5e-7, True, False, None, "", [[]]], "text", 7, -0.0, 1e308,
])
def test_the_memo_reads_as_json_loads_reads_it(value: object) -> None:
    for text in (json.dumps(value), json.dumps(value, indent=1), " \n" + json.dumps(value) + "\r\n\t"):
        got = _json_loads(text.encode())
        assert repr(got) == repr(json.loads(text))


@pytest.mark.parametrize("bad", [b"", b" ", b"{", b'{"a": 1} x', b"[1,]", b'"\\x"', b"\xff\xfe", b"nul",
                                 b'{"a" 1}', b"[1] [2]", b"01"])
def test_what_json_loads_refuses_it_refuses(bad: bytes) -> None:
    with pytest.raises(ValueError):
        json.loads(bad)
    with pytest.raises(ValueError):
        _json_loads(bad)


def test_the_constants_read_as_json_reads_them() -> None:
    got = _json_loads(b"[NaN, Infinity, -Infinity]")
    assert isinstance(got, list) and math.isnan(got[0]) and got[1:] == [math.inf, -math.inf]


def test_json_nested_past_the_recursion_limit_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        _json_loads(b"[" * 100_000 + b"]" * 100_000)
