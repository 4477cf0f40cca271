"""The anchors' verdicts kept across processes (`anchorfs.judged`): a narrowed anchor on a file
that changed elsewhere is judged (read, parsed) once, and every later pass takes the kept verdict
while the hash cache holds the file as it was judged; a file rewritten since, another whitespace
rule, a record from elsewhere (a crafted clone), a torn record: judged again, the same answers."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import TOKEN

import anchorfs
import anchorfs.drift_check as drift_check
from anchorfs import judged
from anchorfs.model import Drift, Verdict


@pytest.fixture
def ws(tmp_path: Path, short_window: None) -> Path:
    root = tmp_path / "ws"
    (root / "auth").mkdir(parents=True)
    (root / "auth" / "token.py").write_text(TOKEN)
    anchorfs.init(root)
    with anchorfs.open(root) as w:
        w.record("tokens last 24 hours", anchors=["auth/token.py#TokenIssuer.issue"])
        w.record("revoke returns nothing", anchors=["auth/token.py:5-6"])
        w.record("the whole token file", anchors=["auth/token.py"])
    return Path(os.path.realpath(root))


@pytest.fixture
def judgements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every anchor judged against a file's bytes (read, and parsed for a symbol), by spec."""
    seen: list[str] = []
    real = drift_check.DriftChecker._judged

    def counted(self: Any, ref: Any, st: Any) -> Any:
        seen.append(ref.spec)
        return real(self, ref, st)

    monkeypatch.setattr(drift_check.DriftChecker, "_judged", counted)
    return seen


def _edit(root: Path, text: str) -> None:
    (root / "auth" / "token.py").write_text(text)
    time.sleep(0.05)  # past the (short) racy window: the new hash is kept


def _drift(root: Path) -> dict[str, tuple[Drift, tuple[Verdict, ...]]]:
    """A new workspace's pass (as a new process's): memory content -> (drift, its verdicts)."""
    with anchorfs.open(root) as w:
        return {md.memory.content: (md.drift, tuple(c.verdict for c in md.checks)) for md in w.drift().memories}


def test_a_verdict_is_judged_once_then_kept_across_passes(ws: Path, judgements: list[str]) -> None:
    _edit(ws, TOKEN + "# a trailing comment: the symbol and the lines unchanged\n")
    first = _drift(ws)
    assert sorted(judgements) == ["auth/token.py#TokenIssuer.issue", "auth/token.py:5-6"]
    assert first["tokens last 24 hours"] == (Drift.FRESH, (Verdict.FRESH,))
    assert first["the whole token file"][0] is Drift.STALE  # a whole-file anchor: no judging, no record
    records = list((ws / ".anchorfs" / judged.FOLDER).iterdir())
    assert len(records) == 1 and json.loads(records[0].read_text())["path"] == "auth/token.py"
    judgements.clear()
    assert _drift(ws) == first and judgements == []  # kept: nothing read or parsed again
    _edit(ws, TOKEN.replace("hours=24", "hours=12") + "# a trailing comment\n")
    again = _drift(ws)
    assert sorted(judgements) == ["auth/token.py#TokenIssuer.issue", "auth/token.py:5-6"]  # another file now
    assert again["tokens last 24 hours"] == (Drift.STALE, (Verdict.CHANGED,))
    judgements.clear()
    assert _drift(ws) == again and judgements == []


def test_a_verdict_is_kept_for_its_whitespace_rule_only(ws: Path, judgements: list[str]) -> None:
    _edit(ws, TOKEN + "\n")
    _drift(ws)
    judgements.clear()
    (ws / ".anchorfs.toml").write_text('[drift]\nwhitespace = "strict"\n')
    _drift(ws)
    assert sorted(judgements) == ["auth/token.py#TokenIssuer.issue", "auth/token.py:5-6"]


def test_a_record_from_elsewhere_is_never_taken(ws: Path, judgements: list[str]) -> None:
    """A crafted clone's record claiming an anchor fresh against the file's very bytes, under a
    stat no file here has: the anchor is judged, and stale it is."""
    _edit(ws, TOKEN.replace("hours=24", "hours=1") + "# a trailing comment\n")
    truth = _drift(ws)
    assert truth["tokens last 24 hours"][0] is Drift.STALE
    (record,) = (ws / ".anchorfs" / judged.FOLDER).iterdir()
    doc = json.loads(record.read_text())
    doc["key"][3] += 1  # another inode: the stat a clone's author could not know
    for verdict in doc["verdicts"].values():
        verdict[0], verdict[1] = "fresh", "planted"
    record.write_text(json.dumps(doc))
    judgements.clear()
    assert _drift(ws) == truth and judgements  # judged again, not taken


@pytest.mark.parametrize("damage", [b"", b"{torn", b'{"format": 1, "path": "elsewhere.py"}', b"[1, 2]",
                                    b'{"format": 1, "path": "auth/token.py", "key": [1, 2, 3], "sha256": "x", '
                                    b'"verdicts": {}}'])
def test_a_damaged_record_is_judged_again_and_rewritten(ws: Path, judgements: list[str], damage: bytes) -> None:
    _edit(ws, TOKEN + "# a trailing comment\n")
    truth = _drift(ws)
    (record,) = (ws / ".anchorfs" / judged.FOLDER).iterdir()
    record.write_bytes(damage)
    judgements.clear()
    assert _drift(ws) == truth and judgements
    judgements.clear()
    assert _drift(ws) == truth and judgements == []  # rewritten whole by the last pass


def test_a_linked_verdicts_folder_is_refused(ws: Path, tmp_path: Path) -> None:
    """A clone that plants a link at `.anchorfs/judged` fails the workspace's open in one line,
    nothing written through it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws / ".anchorfs" / judged.FOLDER).symlink_to(outside)
    with pytest.raises(anchorfs.AnchorfsError, match="symbolic link"):
        anchorfs.open(ws)
    assert list(outside.iterdir()) == []


def test_the_verdicts_folder_is_git_ignored(ws: Path) -> None:
    assert "judged/" in (ws / ".anchorfs" / ".gitignore").read_text().splitlines()


def test_a_verdict_is_kept_only_against_the_bytes_the_cache_holds(ws: Path) -> None:
    """`Judged.put` keeps nothing for a hash the cache does not hold for the file, and `get`
    serves nothing for one."""
    _edit(ws, TOKEN + "# a trailing comment\n")
    with anchorfs.open(ws) as w:
        w.drift()
        verdicts = w.cache.verdicts
        held = w.cache.held("auth/token.py")
        assert held is not None
        _, sha = held
        verdicts.put("auth/token.py", "0" * 64, "k", "fresh", "planted", None)
        assert verdicts.get("auth/token.py", "0" * 64, "k") is None
        verdicts.put("auth/token.py", sha, "k", "unreadable", "environmental", None)
        assert verdicts.get("auth/token.py", sha, "k") is None  # never kept: not a function of the bytes
        verdicts.put("auth/token.py", sha, "k", "moved", "at other lines", (7, 8))
        assert verdicts.get("auth/token.py", sha, "k") == ("moved", "at other lines", (7, 8))
        w.cache.forget("auth/token.py")
        assert verdicts.get("auth/token.py", sha, "k") is None  # the entry gone: nothing it rested on
