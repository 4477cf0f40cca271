"""`drift --rehash` (issue 37, item 3): a write the file's times do not show (a second write
through a shared mmap to a page already dirty changes neither mtime nor ctime) is served from
the hash cache until `drift.cache_ttl` runs out; a rehash trusts no cached hash."""

from __future__ import annotations

import json
import mmap
import os
import subprocess
import sys
import time
from pathlib import Path

import anchorfs


def _workspace(tmp_path: Path) -> tuple[Path, str]:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "conf.py").write_text("TIMEOUT = 30\nRETRIES = 3\n")
    anchorfs.init(root)
    with anchorfs.open(root) as ws:
        mid = ws.record("TIMEOUT is 30 seconds", anchors=["conf.py"]).id
    return root, mid


def test_a_write_the_stat_does_not_show_is_found_by_a_rehash(tmp_path: Path) -> None:
    root, mid = _workspace(tmp_path)
    path = root / "conf.py"
    with open(path, "r+b") as f, mmap.mmap(f.fileno(), 0) as mm:
        mm[:12] = b"TIMEOUT = 30"  # the same bytes: the page dirty, the times taken now
        time.sleep(2.1)  # past the hash cache's racy window for these times (coarse ones too)
        with anchorfs.open(root) as ws:
            assert ws.drift().count(anchorfs.Drift.FRESH) == 1  # hashed, and its stat cached
        before = os.stat(path)
        mm[:12] = b"TIMEOUT = 90"  # the same dirty page: no fault, so no new times
        after = os.stat(path)
        with anchorfs.open(root) as ws:
            cached = ws.drift()
            if (before.st_mtime_ns, before.st_ctime_ns, before.st_size) == (after.st_mtime_ns, after.st_ctime_ns,
                                                                             after.st_size):
                assert cached.count(anchorfs.Drift.FRESH) == 1  # the limit docs/reliability.md names
            rehashed = ws.drift(rehash=True)
            assert [md.memory.id for md in rehashed.stale] == [mid]
            assert [md.memory.id for md in ws.drift().stale] == [mid]  # the new hash is what is cached now


def test_the_cli_rehash_flag_answers_as_the_sdk(tmp_path: Path) -> None:
    root, mid = _workspace(tmp_path)
    (root / "conf.py").write_text("TIMEOUT = 60\nRETRIES = 3\n")
    proc = subprocess.run([sys.executable, "-m", "anchorfs", "--root", str(root), "drift", "--rehash", "--json"],
                          capture_output=True, text=True, env={**os.environ, "ANCHORFS_NO_SERVER": "1"}, check=False)
    assert proc.returncode == 90, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["stale"], [m["id"] for m in out["memories"]]) == (1, [mid])
