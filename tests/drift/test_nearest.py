"""A changed line anchor names where its text is best matched now (issue 37, items 1 and 7):
`app.py:213 changed (was 213, nearest now 219)` and `lines_now` in the JSON, so an agent reads
the right line; a supersede re-takes it there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anchorfs
from anchorfs.anchor.anchors import nearest_block
from conftest import git


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "app.py").write_text("".join(f"value_{i} = {i}\n" for i in range(1, 301)))
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "app")
    anchorfs.init(root)
    return root


def _edit(root: Path) -> None:
    lines = (root / "app.py").read_text().splitlines()
    lines[212] = "value_213 = 2130  # raised"
    (root / "app.py").write_text("\n".join(["# header"] * 6 + lines) + "\n")


def test_a_stale_line_anchor_names_its_nearest_place_now(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    with anchorfs.open(root) as ws:
        m = ws.record("value_213 is 213", anchors=["app.py:213"])
    _edit(root)
    with anchorfs.open(root) as ws:
        check = ws.check(m).checks[0]
        assert (check.verdict.value, check.lines_now) == ("changed", (219, 219))
        assert check.detail == "app.py:213 changed (was 213, nearest now 219)"
    proc = subprocess.run([sys.executable, "-m", "anchorfs", "--root", str(root), "drift", "--json"],
                          capture_output=True, text=True, env={**os.environ, "ANCHORFS_NO_SERVER": "1"}, check=False)
    anchor = json.loads(proc.stdout)["memories"][0]["anchors"][0]
    assert (anchor["lines_now"], anchor["detail"]) == ([219, 219], "app.py:213 changed (was 213, nearest now 219)")
    with anchorfs.open(root) as ws:
        new = ws.supersede(m.id, "value_213 is 2130")
        assert new.anchors[0].lines == (219, 219)


def test_without_its_old_text_a_stale_line_anchor_says_only_what_it_knows(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    root.mkdir()
    (root / "app.py").write_text("".join(f"value_{i} = {i}\n" for i in range(1, 301)))
    anchorfs.init(root)  # no git: the text of then is not kept anywhere
    with anchorfs.open(root) as ws:
        m = ws.record("value_213 is 213", anchors=["app.py:213"])
    _edit(root)
    with anchorfs.open(root) as ws:
        check = ws.check(m).checks[0]
        assert (check.verdict.value, check.lines_now, check.detail) == ("changed", None, "app.py:213 changed")


def test_the_nearest_block_follows_the_lines_around_it_then_likeness() -> None:
    then = b"a = 1\nb = 2\nTIMEOUT = 30\nc = 3\n"
    # two lines above, the line itself changed: aligned by the lines around it
    assert nearest_block(b"# x\n# y\na = 1\nb = 2\nTIMEOUT = 60\nc = 3\n", then, (3, 3)) == (5, 5)
    # its place rewritten past recognition, the text a few lines away: the most alike near there
    assert nearest_block(b"a = 1\nb = 2\nzzz\nc = 3\nTIMEOUT = 31\n", then, (3, 3)) == (5, 5)
    assert nearest_block(b"a = 1\nb = 2\nc = 3\n", then, (3, 3)) is None  # deleted, nothing alike
    assert nearest_block(b"x\n", then, (2, 3)) is None  # shorter than the text
