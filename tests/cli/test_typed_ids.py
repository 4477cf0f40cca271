"""Ids a person can type (issue 38): every surface that prints a memory's id prints its shortest
unique prefix (6 characters at least), and each one printed, typed back into `anchorfs show`,
finds that memory. The store's ids share their first 20 characters, as no fixed-length cut can
tell apart."""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import git

import anchorfs
import anchorfs.sdk.revision
import anchorfs.sdk.workspace
from anchorfs.agents import hook_agent, hook_git
from anchorfs.agents.digest import digest
from anchorfs.cli.commands import main
from anchorfs.core.model import new_id

ID_LIKE = re.compile(r"(?<![0-9a-z])[0-9a-z]{6,26}(?![0-9a-z])")


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A git workspace whose memories' ids all share their first 20 characters: two stale on
    a.py (an edit), two stale on b.py (a commit), one superseded by a third."""
    base = new_id()[:20]
    made = (base + new_id()[20:] for _ in itertools.count())
    for module in (anchorfs.sdk.workspace, anchorfs.sdk.revision):
        monkeypatch.setattr(module, "new_id", lambda: next(made))
    git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "a.py").write_text("TTL = 24\n")
    (tmp_path / "b.py").write_text("RETRIES = 3\n")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "start")
    anchorfs.init(tmp_path)
    with anchorfs.open(tmp_path) as ws:
        ws.record_many([{"content": f"the ttl is a day, fact {i}", "anchors": ["a.py"]} for i in range(2)]
                       + [{"content": f"three retries, fact {i}", "anchors": ["b.py"]} for i in range(2)])
        old = ws.record("we deploy on fridays")
        ws.supersede(old.id, "we deploy on thursdays")
        ws.drift()  # every one fresh, as last seen
    yield tmp_path


def _show(root: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    try:
        main(["--root", str(root), *args])
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    return code, capsys.readouterr().out


def _surfaces(root: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """What each surface prints, by name."""
    with anchorfs.open(root) as ws:
        ids = sorted(m.id for m in ws.list(status=None))
    old, new = ids[-2:]
    said = {name: _show(root, capsys, *args)[1] for name, args in (
        ("list", ["list", "--status", "all"]), ("query", ["query", "ttl retries deploy", "--all"]),
        ("history", ["history", new]), ("ledger", ["ledger"]), ("show old", ["show", old]), ("show new", ["show", new]))}
    event = {"session_id": "s1", "cwd": str(root), "tool_input": {"file_path": str(root / "a.py")}}
    with anchorfs.open(root) as ws:
        said["pre-read"] = hook_agent.pre_read(ws, event)
    (root / "a.py").write_text("TTL = 48\n")
    with anchorfs.open(root) as ws:
        said["post-edit"] = hook_agent.post_edit(ws, event)
    (root / "b.py").write_text("RETRIES = 5\n")
    git(root, "commit", "-qam", "more retries")
    capsys.readouterr()
    hook_git.commit_main(str(root))
    said["post-commit"] = capsys.readouterr().out
    said["drift"] = _show(root, capsys, "drift", "--all")[1]
    with anchorfs.open(root) as ws:
        said["digest"] = digest(ws)
        ws.export_to(root / "CLAUDE.md")
    said["export"] = (root / "CLAUDE.md").read_text()
    return said


def test_every_id_printed_is_its_shortest_unique_prefix_and_types_back(root: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    said = _surfaces(root, capsys)
    with anchorfs.open(root) as ws:
        everyone = {m.id for m in ws.list(status=None)}
        short = ws.short_ids(everyone)
    assert len({i[:20] for i in everyone}) == 1 and all(len(s) > 20 for s in short.values())
    for name, text in said.items():
        text = json.loads(text)["hookSpecificOutput"]["additionalContext"] if name in ("pre-read", "post-edit") else text
        printed = {w for w in ID_LIKE.findall(text) if any(m.startswith(w) for m in everyone)}
        assert printed, (name, text)
        for word in printed:
            full = next(m for m in everyone if m.startswith(word))
            assert word == short[full], (name, word, text)  # never the whole id, never a fixed-length cut
            code, out = _show(root, capsys, "show", word)
            assert code == 0 and out.split()[0] == word, (name, word)
    os.remove(root / "CLAUDE.md")


def test_a_hook_with_no_id_to_show_reads_nothing(root: Path) -> None:
    """A hook's workspace has not folded: no id to show costs no fold; one to show is cut as a fold cuts it."""
    with anchorfs.open(root) as ws:
        assert ws.short_ids([]) == {} and ws._fold is None
    with anchorfs.open(root) as ws:
        everyone = [m.id for m in ws.list(status=None)]
        folded = ws.short_ids(everyone)
    with anchorfs.open(root) as ws:
        assert ws.short_ids(everyone) == folded and ws._fold is None
