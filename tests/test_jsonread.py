"""`anchorfs.jsonread`: the hooks' JSON reads without a JSON package, and `drift.json` read by it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from anchorfs import writeback


def _orjson_read(raw: bytes) -> tuple[dict[str, str], dict[str, str], bool]:
    """`writeback.read` as it was, with orjson: the reference."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {}, {}, True
    try:
        if data.get("v") != 1:
            raise ValueError("unknown version")
        raw_known, raw_pending = dict(data["drift"]), dict(data.get("pending") or {})
        known = {k: v for k, v in raw_known.items() if isinstance(v, str) and v in writeback.DRIFTS}
        pending = {k: v for k, v in raw_pending.items() if isinstance(v, str) and v in writeback.DRIFTS}
        return known, pending, len(known) != len(raw_known) or len(pending) != len(raw_pending)
    except (ValueError, KeyError, TypeError, AttributeError):
        return {}, {}, True


@pytest.mark.parametrize("raw", [
    b'{"v":1,"drift":{"01a":"stale","01b":"fresh"},"pending":{"01a":"stale"}}',
    b'{"v": 1, "drift": {}, "pending": {}}',
    b'{"v":1,"drift":{"01a":"weird","01b":"fresh"}}',
    b'{"v":2,"drift":{}}', b'[1, 2]', b'{"v":1}', b'{"v":1,"drift":[1]}', b'', b'{', b'\xff\xfe',
    b'{"v":1,"drift":{"\\ud800":"stale"}}',  # a lone surrogate: orjson refuses it, so must this
    b'{"v":1,"drift":{"caf\xc3\xa9":"stale"}} ', b'{"v":1,"drift":{}} x',
    b'[' * 5000 + b']' * 5000,
])
def test_drift_json_reads_as_it_did_with_orjson(tmp_path: Path, raw: bytes) -> None:
    (tmp_path / "drift.json").write_bytes(raw)
    assert writeback.read(tmp_path) == _orjson_read(raw)


def test_the_drift_write_modules_import_neither_orjson_nor_dataclasses() -> None:
    """A hook that reads drift.json, or finds a memory's drift changed, builds its events and
    reads the file without orjson (whose import pulls dataclasses, uuid and json)."""
    probe = ("import sys\nimport anchorfs.writeback, anchorfs.watch, anchorfs.jsonread\n"
             "e = anchorfs.watch.DriftEvent(None, 'id', 'fresh', 'stale', 'hook', 'd', 'c')\n"
             "assert e.replace(after='fresh').after == 'fresh' and e == anchorfs.watch.DriftEvent(*anchorfs.watch.DriftEvent._all(e))\n"
             "print(sorted(m for m in ('orjson', 'dataclasses') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
