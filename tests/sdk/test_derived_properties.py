"""Every derived file in `.anchorfs/` answers as a from-scratch pass does (issue 36).

Random workspaces, random edits (same-size edits with the old mtime put back among them),
random records, and random damage to each derived file (`manifest.json`, `fold.snap`,
`drift.json`, `applied`: truncated, a byte flipped, zeroed, deleted, or replaced by the same
file of another clone): after every step, `drift()` and `list()` with the caches equal the same
calls on a copy of the workspace with every derived file deleted.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import anchorfs
from anchorfs.ledger import foldsnap

DERIVED = ("manifest.json", "fold.snap", "drift.json", "applied")
FILES = ("a.py", "b.py", "c.txt")


def _lines(name: str) -> list[str]:
    """Text of its own in each file: where the anchored text went is a question for the move
    rules (issue 37), not for the caches, so no file's lines stand in another."""
    stem = name.split(".")[0]
    return [f"{stem}_value_{i} = {i}\n" for i in range(12)]

_edit = st.tuples(st.just("edit"), st.sampled_from(FILES), st.integers(0, 11), st.booleans())
_record = st.tuples(st.just("record"), st.sampled_from(FILES), st.integers(0, 11), st.booleans())
_damage = st.tuples(st.just("damage"), st.sampled_from(DERIVED),
                    st.sampled_from(["truncate", "flip", "zero", "delete", "foreign"]), st.integers(0, 1 << 16))
_steps = st.lists(st.one_of(_edit, _record, _damage), min_size=1, max_size=8)


def _answers(root: Path) -> dict[str, Any]:
    with anchorfs.open(root) as ws:
        report = ws.drift()
        checks = {md.memory.id: (md.drift.value, [c.verdict.value for c in md.checks]) for md in report.memories}
        listed = {m.id: d for m, d in ((m, ws.drift_of([m])[m.id]) for m in ws.list())}
        stale = sorted(m.id for m in ws.list(drift="stale"))
    return {"drift": checks, "list": listed, "stale": stale}


def _from_scratch(root: Path, scratch: Path) -> dict[str, Any]:
    if scratch.exists():
        shutil.rmtree(scratch)
    shutil.copytree(root, scratch, symlinks=True)
    for name in DERIVED:
        (scratch / ".anchorfs" / name).unlink(missing_ok=True)
    return _answers(scratch)


def _damage(path: Path, how: str, at: int, foreign: Path) -> None:
    if how == "delete":
        path.unlink(missing_ok=True)
        return
    if how == "foreign":
        if (foreign / path.name).exists():
            shutil.copyfile(foreign / path.name, path)
        return
    if not path.exists():
        return
    data = bytearray(path.read_bytes())
    if how == "truncate":
        data = data[: at % (len(data) + 1)]
    elif how == "zero":
        data = bytearray(len(data))
    elif data:
        data[at % len(data)] ^= 0x20
    st_ = path.stat()
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st_.st_atime_ns, st_.st_mtime_ns))  # a damage the mtime does not show


@settings(max_examples=50, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(steps=_steps)
def test_every_derived_file_answers_as_a_pass_from_scratch(tmp_path_factory: pytest.TempPathFactory,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          steps: list[tuple[Any, ...]]) -> None:
    monkeypatch.setattr(foldsnap, "MIN_LINES", 0)  # a small ledger snapshotted too, as a large one is
    base = tmp_path_factory.mktemp("derived")
    root, foreign, scratch = base / "ws", base / "other", base / "scratch"
    for where in (root, foreign):
        where.mkdir()
        for name in FILES:
            (where / name).write_text("".join(_lines(name)))
        anchorfs.init(where)
        with anchorfs.open(where) as ws:
            ws.record("a whole file", anchors=["a.py"])
            ws.record("two lines", anchors=["b.py:3-4"])
            ws.drift()
    for step in steps:
        if step[0] == "edit":
            _, name, line, keep_mtime = step
            path = root / name
            before = path.stat()
            lines = path.read_text().splitlines(keepends=True)
            lines[line] = lines[line].replace("=", "+", 1) if "=" in lines[line] else lines[line].replace("+", "=", 1)
            path.write_text("".join(lines))  # the same size: one character for another
            if keep_mtime:
                os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        elif step[0] == "record":
            _, name, line, whole = step
            with anchorfs.open(root) as ws:
                ws.record(f"about {name} {line} {whole} {len(steps)}",
                          anchors=[name if whole else f"{name}:{line + 1}"])
        else:
            _, name, how, at = step
            _damage(root / ".anchorfs" / name, how, at, foreign / ".anchorfs")
        assert _answers(root) == _from_scratch(root, scratch), step
