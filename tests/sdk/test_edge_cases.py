"""File edge cases for anchors (issue 9): empty files, no trailing newline, CRLF endings,
binary files, files above the size limit, and files replaced while being hashed.

The CRLF decision (anchors.py's docstring, docs/reliability.md): narrowed text is compared with
line endings normalized, so converting a file between CRLF and LF leaves a lines or symbol
anchor `fresh` (identical in place; the file changed elsewhere) while a whole-file anchor, whose contract is the
file's bytes, is `changed` (the memory is stale).

Real files in tmp_path; anchors taken with `take()` and judged by the drift pass
(`DriftChecker` over a `HashCache`), the same code every read runs.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import pytest

import anchorfs
import anchorfs.anchor.anchors as anchors_mod
import anchorfs.drift.check as drift_mod
import anchorfs.drift.probe as probe_mod
import anchorfs.drift.hashcache as hashing
from anchorfs.anchor.anchors import narrowed_text, parse_spec, take, text_hash
from anchorfs.drift import DriftChecker
from anchorfs.core.errors import AnchorError, SymbolNotFoundError
from anchorfs.drift.hashcache import HashCache
from anchorfs.core.model import AnchorCheck, AnchorRef, Drift, Verdict

PY = b"class Token:\n    def issue(self):\n        return 24\n\n\ndef helper():\n    return 1\n"
TEXT = b"alpha\nbeta\ngamma\ndelta\n"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "ws"
    (r / ".anchorfs").mkdir(parents=True)
    return r


def anchor(root: Path, spec: str) -> AnchorRef:
    return take(os.path.realpath(root), parse_spec(spec))


def check(root: Path, ref: AnchorRef, cache: HashCache | None = None) -> AnchorCheck:
    """One drift-pass verdict; a cold cache unless one is given."""
    cache = cache or HashCache(root / ".anchorfs" / "manifest.json")
    return DriftChecker(os.path.realpath(root), cache).check_anchor(ref)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- empty files

def test_an_empty_file_can_be_anchored_whole_and_judged(root: Path) -> None:
    (root / "empty.txt").write_bytes(b"")
    ref = anchor(root, "empty.txt")
    assert ref.sha256 == sha(b"")
    assert check(root, ref).verdict is Verdict.FRESH
    (root / "empty.txt").write_bytes(b"now something\n")
    assert check(root, ref).verdict is Verdict.CHANGED
    (root / "empty.txt").write_bytes(b"")
    assert check(root, ref).verdict is Verdict.FRESH


def test_an_empty_file_has_no_lines_or_symbols_to_anchor(root: Path) -> None:
    (root / "empty.txt").write_bytes(b"")
    (root / "empty.py").write_bytes(b"")
    with pytest.raises(AnchorError, match=r"past the end of empty.txt \(0 lines\)"):
        anchor(root, "empty.txt:1")
    with pytest.raises(SymbolNotFoundError):
        anchor(root, "empty.py#helper")


def test_a_file_emptied_under_a_lines_anchor_is_changed(root: Path) -> None:
    (root / "notes.txt").write_bytes(TEXT)
    ref = anchor(root, "notes.txt:2-3")
    (root / "notes.txt").write_bytes(b"")
    result = check(root, ref)
    assert result.verdict is Verdict.CHANGED


def test_a_file_emptied_under_a_symbol_anchor_is_symbol_missing(root: Path) -> None:
    (root / "t.py").write_bytes(PY)
    ref = anchor(root, "t.py#helper")
    (root / "t.py").write_bytes(b"")
    assert check(root, ref).verdict is Verdict.SYMBOL_MISSING


# --------------------------------------------------------------------------- trailing newline

def test_the_last_line_without_a_trailing_newline_can_be_anchored(root: Path) -> None:
    (root / "notes.txt").write_bytes(b"alpha\nbeta")
    ref = anchor(root, "notes.txt:2")
    assert narrowed_text(ref, b"alpha\nbeta")[0] == b"beta"
    assert ref.content_hash == text_hash(b"beta")


@pytest.mark.parametrize(("before", "after"), [(b"alpha\nbeta", b"alpha\nbeta\n"), (b"alpha\nbeta\n", b"alpha\nbeta")],
                         ids=["newline-added", "newline-removed"])
def test_adding_or_removing_the_final_newline_leaves_lines_fresh_and_the_file_changed(
        root: Path, before: bytes, after: bytes) -> None:
    (root / "notes.txt").write_bytes(before)
    lines, whole = anchor(root, "notes.txt:2"), anchor(root, "notes.txt")
    (root / "notes.txt").write_bytes(after)
    kept = check(root, lines)
    assert (kept.verdict, kept.lines_now) == (Verdict.FRESH, (2, 2))
    assert check(root, whole).verdict is Verdict.CHANGED


def test_editing_the_last_line_without_a_newline_is_changed(root: Path) -> None:
    (root / "notes.txt").write_bytes(b"alpha\nbeta")
    ref = anchor(root, "notes.txt:2")
    (root / "notes.txt").write_bytes(b"alpha\nbetA")
    assert check(root, ref).verdict is Verdict.CHANGED


def test_a_blank_last_line_is_a_line_but_a_final_newline_is_not(root: Path) -> None:
    (root / "notes.txt").write_bytes(b"alpha\n\n")
    assert anchor(root, "notes.txt:2").content_hash == text_hash(b"")
    with pytest.raises(AnchorError, match="past the end"):
        anchor(root, "notes.txt:3")


# --------------------------------------------------------------------------- CRLF endings

def crlf(data: bytes) -> bytes:
    return data.replace(b"\n", b"\r\n")


@pytest.mark.parametrize("to_crlf", [True, False], ids=["lf-to-crlf", "crlf-to-lf"])
@pytest.mark.parametrize(("name", "content", "spec"), [
    ("notes.txt", TEXT, "notes.txt:2-3"),
    ("t.py", PY, "t.py#Token.issue"),
    ("t.py", PY, "t.py#helper"),
])
def test_a_line_ending_conversion_leaves_narrowed_anchors_fresh(
        root: Path, to_crlf: bool, name: str, content: bytes, spec: str) -> None:
    before, after = (content, crlf(content)) if to_crlf else (crlf(content), content)
    (root / name).write_bytes(before)
    ref = anchor(root, spec)
    (root / name).write_bytes(after)
    result = check(root, ref)
    assert result.verdict is Verdict.FRESH, result.detail
    assert "unchanged" in result.detail


@pytest.mark.parametrize("to_crlf", [True, False], ids=["lf-to-crlf", "crlf-to-lf"])
def test_a_line_ending_conversion_changes_a_whole_file_anchor(root: Path, to_crlf: bool) -> None:
    before, after = (TEXT, crlf(TEXT)) if to_crlf else (crlf(TEXT), TEXT)
    (root / "notes.txt").write_bytes(before)
    ref = anchor(root, "notes.txt")
    (root / "notes.txt").write_bytes(after)
    assert check(root, ref).verdict is Verdict.CHANGED


def test_crlf_and_lf_copies_of_the_same_text_take_the_same_content_hash(root: Path) -> None:
    (root / "lf.py").write_bytes(PY)
    (root / "crlf.py").write_bytes(crlf(PY))
    for spec in ("{}#Token.issue", "{}:2-3"):
        a, b = anchor(root, spec.format("lf.py")), anchor(root, spec.format("crlf.py"))
        assert a.content_hash == b.content_hash
        assert a.sha256 != b.sha256


def test_a_crlf_conversion_plus_an_insertion_still_finds_the_lines(root: Path) -> None:
    (root / "notes.txt").write_bytes(TEXT)
    ref = anchor(root, "notes.txt:2-3")
    (root / "notes.txt").write_bytes(crlf(b"new first line\n" + TEXT))
    result = check(root, ref)
    assert (result.verdict, result.lines_now) == (Verdict.MOVED, (3, 4))


def test_a_crlf_conversion_with_a_real_edit_is_changed(root: Path) -> None:
    (root / "notes.txt").write_bytes(TEXT)
    ref = anchor(root, "notes.txt:2-3")
    (root / "notes.txt").write_bytes(crlf(TEXT.replace(b"gamma", b"GAMMA")))
    assert check(root, ref).verdict is Verdict.CHANGED


def test_mixed_line_endings_are_normalized_per_line(root: Path) -> None:
    (root / "notes.txt").write_bytes(b"alpha\r\nbeta\ngamma\r\n")
    ref = anchor(root, "notes.txt:1-3")
    assert ref.content_hash == text_hash(b"alpha\nbeta\ngamma")
    (root / "notes.txt").write_bytes(b"alpha\nbeta\r\ngamma\n")
    assert check(root, ref).verdict is Verdict.FRESH


def test_a_crlf_conversion_through_the_sdk_keeps_narrowed_memories_fresh(tmp_path: Path) -> None:
    """End to end: `drift()` and the query envelope, not just the verdicts."""
    root = tmp_path / "sdk"
    root.mkdir()
    (root / "notes.txt").write_bytes(TEXT)
    anchorfs.init(root)
    with anchorfs.open(root) as ws:
        narrow = ws.record("beta and gamma are the middle", anchors=["notes.txt:2-3"])
        whole = ws.record("the notes file is final", anchors=["notes.txt"])
        (root / "notes.txt").write_bytes(crlf(TEXT))
        drift = {m.memory.id: m.drift for m in ws.drift().memories}
        assert drift == {narrow.id: Drift.FRESH, whole.id: Drift.STALE}
        hits = {h.memory.id: h for h in ws.query("notes middle final", k=5)}
        assert hits[narrow.id].envelope.startswith("[fresh")
        assert hits[whole.id].envelope.startswith("[STALE")


# --------------------------------------------------------------------------- binary files

BINARY = bytes(range(256)) * 4 + b"\0\xff\xfe"


def test_a_binary_file_can_be_anchored_whole(root: Path) -> None:
    (root / "logo.png").write_bytes(BINARY)
    ref = anchor(root, "logo.png")
    assert ref.sha256 == sha(BINARY)
    assert check(root, ref).verdict is Verdict.FRESH
    flipped = bytearray(BINARY)
    flipped[100] ^= 1
    (root / "logo.png").write_bytes(bytes(flipped))
    assert check(root, ref).verdict is Verdict.CHANGED


def test_a_symbol_in_a_binary_file_is_refused(root: Path) -> None:
    (root / "blob.py").write_bytes(b"def f():\n    return 1\n" + BINARY)
    with pytest.raises(AnchorError, match="binary"):
        anchor(root, "blob.py#f")


def test_lines_of_a_file_that_is_not_utf8_are_bytes_and_judged_as_bytes(root: Path) -> None:
    data = b"caf\xe9\n\xff\xfe raw\nend\n"  # no NUL: a NUL makes it binary, and lines of those are refused
    (root / "latin1.txt").write_bytes(data)
    ref = anchor(root, "latin1.txt:2")
    assert ref.content_hash == text_hash(b"\xff\xfe raw")
    (root / "latin1.txt").write_bytes(b"new\n" + data)
    moved = check(root, ref)
    assert (moved.verdict, moved.lines_now) == (Verdict.MOVED, (3, 3))


def test_a_source_file_that_became_binary_is_unknown_not_stale(root: Path) -> None:
    (root / "t.py").write_bytes(PY)
    ref = anchor(root, "t.py#helper")
    (root / "t.py").write_bytes(PY + b"\0\0\0" + BINARY)
    result = check(root, ref)
    assert result.verdict is Verdict.UNREADABLE, result.detail


# --------------------------------------------------------------------------- size limit

LIMIT = 1024


@pytest.fixture
def small_limit(monkeypatch: pytest.MonkeyPatch) -> int:
    """The 64 MiB limit scaled down, so the tests write kilobytes, not 64 MiB."""
    monkeypatch.setattr(anchors_mod, "MAX_FILE_BYTES", LIMIT)
    monkeypatch.setattr(drift_mod, "MAX_FILE_BYTES", LIMIT)
    monkeypatch.setattr(probe_mod, "MAX_FILE_BYTES", LIMIT)  # the candidates' reads (`FileProbe._read`)
    return LIMIT


def test_a_file_at_the_limit_is_taken_and_one_byte_over_is_refused(root: Path, small_limit: int) -> None:
    (root / "at.txt").write_bytes(b"x\n" * (small_limit // 2))
    assert anchor(root, "at.txt:1").lines == (1, 1)
    (root / "over.txt").write_bytes(b"x\n" * (small_limit // 2) + b"y")
    for spec in ("over.txt", "over.txt:1"):
        with pytest.raises(AnchorError, match="larger than"):
            anchor(root, spec)


def test_a_file_grown_over_the_limit_is_unknown_for_narrowed_anchors(root: Path, small_limit: int) -> None:
    """Its narrowed text is never read (unreadable, so unknown, not stale); a whole-file anchor
    still has positive evidence, its streamed hash, so it is changed."""
    (root / "notes.txt").write_bytes(TEXT)
    lines, whole = anchor(root, "notes.txt:1-2"), anchor(root, "notes.txt")
    (root / "notes.txt").write_bytes(TEXT + b"z" * (small_limit * 2))
    narrowed = check(root, lines)
    assert narrowed.verdict is Verdict.UNREADABLE
    assert "larger than" in narrowed.detail
    assert check(root, whole).verdict is Verdict.CHANGED


def test_a_file_over_the_limit_that_is_unchanged_stays_fresh(root: Path, small_limit: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Anchored before the limit was lowered: the hash still proves it unchanged."""
    (root / "big.txt").write_bytes(b"b" * (small_limit * 3))
    monkeypatch.setattr(anchors_mod, "MAX_FILE_BYTES", small_limit * 4)
    ref = anchor(root, "big.txt")
    monkeypatch.setattr(anchors_mod, "MAX_FILE_BYTES", small_limit)
    assert check(root, ref).verdict is Verdict.FRESH


# --------------------------------------------------------------------------- replaced while hashed

def _racing(monkeypatch: pytest.MonkeyPatch, path: Path, contents: list[bytes]) -> list[str]:
    """Make `sha256_file` replace `path` (a new inode, like an editor's save) right after each
    read, with the next of `contents`: the digest returned is of the bytes before the swap."""
    real: Callable[[str], str] = hashing.sha256_file
    calls: list[str] = []

    def racing(p: str) -> str:
        digest = real(p)
        if contents and os.fspath(p) == os.fspath(path):
            tmp = path.with_name(path.name + ".swap")
            tmp.write_bytes(contents.pop(0))
            os.replace(tmp, path)
        calls.append(digest)
        return digest

    monkeypatch.setattr(hashing, "sha256_file", racing)
    return calls


def test_a_file_replaced_mid_hash_is_rehashed_and_judged_by_its_new_bytes(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = root / "notes.txt"
    target.write_bytes(TEXT)
    ref = anchor(root, "notes.txt")
    calls = _racing(monkeypatch, target, [b"replaced\n"])
    cache = HashCache(root / ".anchorfs" / "manifest.json")
    result = check(root, ref, cache)
    # The first read saw the old bytes (the anchor's own hash): trusting it would say fresh.
    assert calls == [sha(TEXT), sha(b"replaced\n")]
    assert result.verdict is Verdict.CHANGED
    assert cache._entries["notes.txt"][4] in (None, sha(b"replaced\n"))  # never the stale digest
    cache.save()
    assert HashCache(root / ".anchorfs" / "manifest.json").sha256("notes.txt", target) == sha(b"replaced\n")


def test_a_file_that_keeps_moving_is_never_cached(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = root / "notes.txt"
    target.write_bytes(TEXT)
    ref = anchor(root, "notes.txt")
    calls = _racing(monkeypatch, target, [b"one\n", b"two\n", b"three\n"])
    cache = HashCache(root / ".anchorfs" / "manifest.json")
    result = check(root, ref, cache)
    assert len(calls) == 2  # hashed, moved, re-hashed once, moved again: give up caching
    assert result.verdict is Verdict.CHANGED
    assert "notes.txt" not in cache._entries
    cache.save()
    manifest = root / ".anchorfs" / "manifest.json"
    assert not manifest.exists() or b"notes.txt" not in manifest.read_bytes()


def test_a_file_rewritten_with_the_same_bytes_mid_hash_stays_fresh(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = root / "t.py"
    target.write_bytes(PY)
    refs = [anchor(root, "t.py"), anchor(root, "t.py#helper")]
    calls = _racing(monkeypatch, target, [PY])
    checker = DriftChecker(os.path.realpath(root), HashCache(root / ".anchorfs" / "manifest.json"))
    assert [checker.check_anchor(r).verdict for r in refs] == [Verdict.FRESH, Verdict.FRESH]
    assert len(calls) == 2


def test_a_lines_anchor_whose_file_is_replaced_mid_hash_is_judged_on_the_new_text(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = root / "notes.txt"
    target.write_bytes(TEXT)
    ref = anchor(root, "notes.txt:2-3")
    _racing(monkeypatch, target, [b"inserted\n" + TEXT])
    result = check(root, ref)
    assert (result.verdict, result.lines_now) == (Verdict.MOVED, (3, 4))


def test_a_file_deleted_mid_hash_is_deleted(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = root / "notes.txt"
    target.write_bytes(TEXT)
    ref = anchor(root, "notes.txt")
    real = hashing.sha256_file

    def vanishing(p: str) -> str:
        digest = real(p)
        os.unlink(p)
        return digest

    monkeypatch.setattr(hashing, "sha256_file", vanishing)
    cache = HashCache(root / ".anchorfs" / "manifest.json")
    assert check(root, ref, cache).verdict is Verdict.DELETED
    assert "notes.txt" not in cache._entries


def test_a_nul_in_text_or_tags_is_refused_and_nothing_written(tmp_path: Path) -> None:
    """A NUL would reach every reader of the memory (issue 37, item 9): one clear error, no line."""
    import anchorfs
    from anchorfs.core.errors import InputError

    anchorfs.init(tmp_path)
    ledger = tmp_path / ".anchorfs" / "ledger.jsonl"
    with anchorfs.open(tmp_path) as ws:
        for bad in ({"content": "deploy\0 with --force"}, {"content": "ok", "tags": ["a\0b"]}):
            with pytest.raises(InputError, match="NUL"):
                ws.record(**bad)
        assert not ledger.exists() or ledger.read_bytes() == b""
        assert ws.list() == []
