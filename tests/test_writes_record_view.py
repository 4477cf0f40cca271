"""A new process's `record` answers from the fold snapshot's matching records, not the whole fold
(issue 19: `anchorfs record` at 10,000 memories decoded every record of fold.snap, 31x
`python3 -c pass`).

Each case compares the one-shot record with what the full fold says of the same ledger (a
read-only workspace: it writes nothing): the duplicate it returns (or none), the `seq` and
`deps` of the line it appends, and that the snapshot's records were not decoded.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import anchorfs
from anchorfs import foldsnap
from anchorfs.__main__ import main as entry
from anchorfs.locate import STATE_DIR
from anchorfs.model import claim_key
from anchorfs.workspace import Workspace

ODD = 'a "quoted" back\\slash, a\nnewline, a\ttab, é, 😀, \u2028 and \x01'
SEED = 70  # past foldsnap.MIN_LINES: a snapshot is written


def ledger_lines(root: Path) -> list[dict[str, Any]]:
    data = (root / STATE_DIR / "ledger.jsonl").read_bytes()
    return [json.loads(line) for line in data.split(b"\n") if line]  # not splitlines: U+2028 is no line end


@pytest.fixture
def snap_root(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.py").write_text("x = 1\n")
    anchorfs.init(root)
    with anchorfs.open(root) as ws:  # the store exists: a one-shot record writes the ledger alone
        ws.record_many([{"content": f"seed memory {i}"} for i in range(SEED)])
        ws.record("  spaced text \n")
        ws.record(ODD)
        ws.record("anchored text", anchors=["a.py"])
        ws.record("a decision", kind="decision")
        ws.record("to supersede")
        ws.record("to retract")
        ws.record("under review", propose=True)
    with anchorfs.open(root) as ws:
        ws._memories()  # a new process's fold: written as the snapshot
    assert (root / STATE_DIR / foldsnap.SNAP_FILE).exists()
    return root


def _by_text(root: Path, text: str) -> str:
    with anchorfs.open(root) as ws:
        return next(m.id for m in ws.list(status="all") if m.content == text)


Setup = Callable[[Path], None]

AFTER: dict[str, Setup] = {  # lines appended after the snapshot, before the record
    "nothing": lambda root: None,
    "a supersede": lambda root: anchorfs.open(root).supersede(_by_text(root, "to supersede"), "superseding"),
    "a retract": lambda root: anchorfs.open(root).retract(_by_text(root, "to retract")),
    "a retract then a revert": lambda root: (anchorfs.open(root).retract(_by_text(root, "to retract")),
                                             anchorfs.open(root).revert(_by_text(root, "to retract"))),
    "a record": lambda root: anchorfs.open(root).record("recorded since"),
    "a record and its retract": lambda root: anchorfs.open(root).retract(
        anchorfs.open(root).record("recorded since").id),
}

ASKED: list[tuple[str, str, bool]] = [  # text, kind, propose
    ("a new text", "note", False),
    ("seed memory 17", "note", False),
    ("spaced text", "note", False),
    (f"  {ODD}  ", "note", False),
    ("anchored text", "note", False),  # the same text without the anchor: another claim
    ("a decision", "note", False),  # another kind: another claim
    ("a decision", "decision", False),
    ("to supersede", "note", False),
    ("superseding", "note", False),
    ("to retract", "note", False),
    ("recorded since", "note", False),
    ("under review", "note", False),
    ("under review", "note", True),
    ("seed memory", "note", False),  # a prefix of many texts: candidates, none the same
]


def _count_decodes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    real = foldsnap._state

    def counted(*a: Any, **k: Any) -> Any:
        calls[0] += 1
        return real(*a, **k)

    monkeypatch.setattr(foldsnap, "_state", counted)
    return calls


@pytest.mark.parametrize("after", list(AFTER), ids=list(AFTER))
@pytest.mark.parametrize(("text", "kind", "propose"), ASKED, ids=[f"{t[:14]}-{k}-{p}" for t, k, p in ASKED])
def test_a_one_shot_record_answers_as_the_full_fold(snap_root: Path, after: str, text: str, kind: str,
                                                    propose: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    root = snap_root
    AFTER[after](root)
    full = Workspace(root, read_only=True)._memories()  # the full fold, writing nothing
    held = ("active", "proposed") if propose else ("active",)
    expected: dict[Any, str] = {}
    for m in full.values():
        if m.status in held and m.content.strip() == text.strip():
            expected[claim_key(m.content, m.kind, m.anchors)] = m.id
    want_dup = expected.get(claim_key(text, kind, ()))
    lines_before = ledger_lines(root)
    decodes = _count_decodes(monkeypatch)
    with anchorfs.open(root) as ws:
        got = ws.record(text, kind=kind, propose=propose)
    assert decodes[0] == 0, "the snapshot's records were decoded"
    lines = ledger_lines(root)
    if want_dup is not None:
        assert got.duplicate and got.id == want_dup
        assert lines == lines_before
    else:
        assert not got.duplicate and got.id not in full
        assert lines[:-1] == lines_before
        assert (lines[-1]["seq"], lines[-1]["deps"]) == (getattr(full, "top") + 1, {got.id: []})
        assert lines[-1]["memories"][0]["content"] == text


def test_the_cli_record_reads_no_record_it_does_not_need(snap_root: Path, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    decodes = _count_decodes(monkeypatch)
    for text in ("one more", "one more", "seed memory 3"):
        with pytest.raises(SystemExit) as exc:
            entry(["--root", str(snap_root), "--json", "record", text])
        assert exc.value.code in (0, None)
        capsys.readouterr()
    assert decodes[0] == 0
    texts = [line["memories"][0]["content"] for line in ledger_lines(snap_root)]
    assert texts.count("one more") == 1 and texts.count("seed memory 3") == 1


def test_enough_lines_since_the_snapshot_take_the_full_fold_which_writes_it_again(
        snap_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The one-shot record never lets the snapshot fall behind further than the full path did:
    the record that brings the lines since it to the full path's rewrite threshold folds and
    writes it anew; every other one leaves it as it is and decodes nothing."""
    snap = snap_root / STATE_DIR / foldsnap.SNAP_FILE
    decodes = _count_decodes(monkeypatch)
    folded_at = []
    for i in range(2 * foldsnap.MIN_LINES):
        before, seen = snap.read_bytes(), decodes[0]
        with anchorfs.open(snap_root) as ws:
            ws.record(f"one-shot {i}")
        if decodes[0] != seen:
            assert decodes[0] == seen + 1 and snap.read_bytes() != before, "a fold that did not write the snapshot"
            folded_at.append(i)
        else:
            assert snap.read_bytes() == before
    assert folded_at and len(folded_at) <= 2
    if len(folded_at) == 2:  # the fixture's snapshot had lines after it already; then a full stretch
        assert folded_at[1] - folded_at[0] == foldsnap.MIN_LINES


def test_a_damaged_snapshot_is_left_to_the_full_fold(snap_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    snap = snap_root / STATE_DIR / foldsnap.SNAP_FILE
    data = bytearray(snap.read_bytes())
    at = data.index(b"seed memory 17")
    data[at:at + 4] = b"SEED"  # the body's checksum no longer holds
    snap.write_bytes(bytes(data))
    with anchorfs.open(snap_root) as ws:
        got = ws.record("seed memory 17")
    assert got.duplicate  # the ledger says so: the full fold found it


def test_another_writer_between_the_view_and_the_append(snap_root: Path) -> None:
    """Under the lock the view's `top` is brought up to the lines another writer appended since
    (the new entry is stamped past them, as the full fold stamps it)."""
    from anchorfs.ledger import Ledger
    from anchorfs.recordview import top_now, view

    ledger = Ledger(snap_root / STATE_DIR)
    seen = view(ledger, {"racing"}, ("active",))
    assert seen is not None and seen.known == []
    with anchorfs.open(snap_root) as ws:
        ws.retract(_by_text(snap_root, "to retract"))
        ws.record("racing")
    full = Workspace(snap_root, read_only=True)._memories()
    assert top_now(ledger, seen) == getattr(full, "top") > seen.top
    (snap_root / STATE_DIR / "ledger.jsonl").write_bytes(b"")  # rewritten: only the full fold can say
    assert top_now(ledger, seen) is None


@pytest.mark.parametrize("line", [b"not json at all\n", b'{"v":1,"tx":"x"}\n'], ids=["garbage", "bad entry"])
def test_a_bad_line_after_the_snapshot_is_said_once_by_the_full_path(
        snap_root: Path, line: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    with (snap_root / STATE_DIR / "ledger.jsonl").open("ab") as fh:
        fh.write(line)
    decodes = _count_decodes(monkeypatch)
    with pytest.warns(UserWarning, match="skipping a bad line") as said:
        with anchorfs.open(snap_root) as ws:
            got = ws.record("seed memory 5")
    assert got.duplicate and decodes[0] == 1  # the full fold's answer, from the full fold
    assert len([w for w in said if "skipping a bad line" in str(w.message)]) == 1


def test_a_line_without_seq_after_the_snapshot_takes_the_full_fold(snap_root: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    lines = (snap_root / STATE_DIR / "ledger.jsonl").read_bytes().split(b"\n")
    old = json.loads(lines[3])  # a line as an earlier version wrote it: no seq, no deps
    old.pop("seq"), old.pop("deps")
    old["tx"] = "01aaaaaaaaaaaaaaaaaaaaaaaa"
    with (snap_root / STATE_DIR / "ledger.jsonl").open("ab") as fh:
        fh.write(json.dumps(old).encode() + b"\n")
    full = Workspace(snap_root, read_only=True)._memories()
    decodes = _count_decodes(monkeypatch)
    with anchorfs.open(snap_root) as ws:
        got = ws.record("a text never seen")
    assert decodes[0] == 1
    assert ledger_lines(snap_root)[-1]["seq"] == getattr(full, "top") + 1 and not got.duplicate
