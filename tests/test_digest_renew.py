"""A session start after a pause (`digest_memo._renew`): the digest memo lapsed only because the
hash cache's TTL ran out, so every anchored file it rests on is read again and hashed, and while
each hashes as it did under the digest (the memo keeps the SHA-256s, the full digest's and those
of the files an update re-checked), the memo's digest is served again (the full pass would say
the same) and kept until the new TTL, the manifest neither read nor written. Anything else is
the full digest: a file that hashes otherwise, the envelopes' words due, a file changed, no C
loop."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

import anchorfs
import anchorfs.digest_memo as digest_memo
from anchorfs.hashing import HashCache

TTL_S = 0.6


@pytest.fixture
def ws(tmp_path: Path, short_window: None) -> Path:
    root = tmp_path / "ws"
    (root / "src" / "deep").mkdir(parents=True)
    (root / "src" / "a.py").write_text("def f():\n    return 1\n")
    (root / "src" / "deep" / "b.py").write_text("def g():\n    return 2\n")
    anchorfs.init(root)
    (root / ".anchorfs.toml").write_text(f"[drift]\ncache_ttl = {TTL_S}\n")
    with anchorfs.open(root) as w:
        w.record("f returns one", anchors=["src/a.py#f"])
        w.record("all of b", anchors=["src/deep/b.py"])
        w.record("an unanchored note")
    time.sleep(0.05)  # past the (short) racy window: the memo's grounds settle
    return Path(os.path.realpath(root))


@pytest.fixture
def full(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many full digests ran (the workspace opened)."""
    calls: list[int] = []
    real = digest_memo._digest

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(digest_memo, "_digest", counted)
    return calls


def _start(root: Path) -> str:
    return digest_memo._session_start_memoized(str(root))


def _lapse() -> None:
    time.sleep(TTL_S + 0.1)


def _reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files `_statmatch.reread` is asked to read again, in order."""
    import anchorfs.filehash as filehash

    asked: list[str] = []
    real = filehash._statmatch.reread

    def reread(root: str, rels: list[str], *args: Any) -> Any:
        asked.extend(rels)
        return real(root, rels, *args)

    monkeypatch.setattr(filehash._statmatch, "reread", reread)
    return asked


def _no_manifest(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any read or write of the hash cache's manifest fails the test."""
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the manifest was touched")

    monkeypatch.setattr(HashCache, "_load", refuse)
    monkeypatch.setattr(HashCache, "save", refuse)


def test_a_start_past_the_ttl_reads_every_file_again_and_serves_the_memo(
        ws: Path, full: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    first = _start(ws)
    assert full == [1] and "f returns one" in first
    written = digest_memo._read_memo(str(ws))
    assert written is not None and not written["lapsed"] and written["hashed"] == 2
    _lapse()
    assert digest_memo._read_memo(str(ws)) is None  # lapsed: no replay
    manifest = (ws / ".anchorfs" / "manifest.json").read_bytes()
    asked = _reads(monkeypatch)
    with monkeypatch.context() as m:
        _no_manifest(m)
        assert _start(ws) == first and full == [1]  # renewed: no full digest, no manifest
    assert sorted(asked) == ["src/a.py", "src/deep/b.py"]  # each anchored file read again
    assert (ws / ".anchorfs" / "manifest.json").read_bytes() == manifest
    again = digest_memo._read_memo(str(ws))
    assert again is not None and not again["lapsed"] and again["until"] > written["until"]
    assert again["paths"] == written["paths"] and again["keys"] == written["keys"]
    assert digest_memo._hashed(again) == digest_memo._hashed(written)
    asked.clear()
    assert _start(ws) == first and full == [1] and asked == []  # and replayed while the new TTL runs


def _memo_with(root: Path, rel: str, sha: bytes) -> None:
    """The digest memo with `rel`'s kept SHA-256 replaced by `sha`."""
    d = digest_memo._read_memo(str(root), lapsed=True)
    assert d is not None
    hashed = digest_memo._hashed(d)
    (i,) = [i for i in hashed if d["paths"][i] == str(root / rel)]
    hashed[i] = sha
    memo = root / ".anchorfs" / "digest.memo"
    data = memo.read_bytes()
    memo.write_bytes(data[:len(data) - len(d["shas"])] + digest_memo._pack_hashed(hashed))
    assert digest_memo._hashed(digest_memo._read_memo(str(root), lapsed=True) or {}) == hashed


def test_a_file_that_hashes_otherwise_under_the_same_stat_is_the_full_digest(ws: Path, full: list[int]) -> None:
    """The bytes read again under the memo's stat hash otherwise than the digest rested on (a
    stat that lied): the full pass judges."""
    first = _start(ws)
    _memo_with(ws, "src/deep/b.py", b"\0" * 32)
    _lapse()
    got = _start(ws)
    assert full == [1, 1] and got == first  # the full pass, which finds b as recorded


def test_the_manifest_is_not_what_the_renewal_rests_on(ws: Path, full: list[int]) -> None:
    """A torn (or re-hashed, or cold) manifest does not stop the renewal: the memo keeps the
    hashes its digest rested on, and the files are read again."""
    first = _start(ws)
    (ws / ".anchorfs" / "manifest.json").write_bytes(b"{torn")
    _lapse()
    assert _start(ws) == first and full == [1]
    assert (ws / ".anchorfs" / "manifest.json").read_bytes() == b"{torn"


def _snapshot(root: Path) -> None:
    """The fold snapshot an update reads its memories from (a ledger this small has none)."""
    from anchorfs import catchup, foldsnap
    from anchorfs.ledger import Ledger

    time.sleep(catchup.FINE_NS / 1e9 + 0.02)
    ledger = Ledger(root / ".anchorfs")
    assert foldsnap.save(ledger, foldsnap.current(ledger, write=False))
    time.sleep(catchup.FINE_NS / 1e9 + 0.02)


def test_a_memo_updated_for_a_changed_file_keeps_its_new_hash(ws: Path, full: list[int],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The memo updated in place (`_update`: an anchored file rewritten, its memories re-checked)
    keeps the file's new hash, and a later renewal reads it again against that hash."""
    _snapshot(ws)
    _start(ws)
    (ws / "src" / "a.py").write_text("def f():\n    return 7\n")
    time.sleep(0.05)
    updated = _start(ws)
    assert full == [1] and "stale" in updated.lower()  # updated in place
    d = digest_memo._read_memo(str(ws))
    assert d is not None
    from anchorfs.hashing import sha256_bytes

    want = bytes.fromhex(sha256_bytes((ws / "src" / "a.py").read_bytes()))
    assert [sha for i, sha in digest_memo._hashed(d).items() if d["paths"][i] == str(ws / "src" / "a.py")] == [want]
    _lapse()
    asked = _reads(monkeypatch)
    assert _start(ws) == updated and full == [1]
    assert sorted(asked) == ["src/a.py", "src/deep/b.py"]


def test_a_memo_updated_for_a_new_memory_hashes_its_new_file(ws: Path, full: list[int],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The memo updated for the ledger's growth (`_update_grown`: a memory anchored to a file no
    memory rested on) keeps that file's hash too: the renewal reads it again."""
    _snapshot(ws)
    _start(ws)
    (ws / "src" / "c.py").write_text("def h():\n    return 3\n")
    time.sleep(0.05)
    with anchorfs.open(ws) as w:
        w.record("h returns three", anchors=["src/c.py#h"])
    time.sleep(0.05)
    grown = _start(ws)
    assert full == [1] and "h returns three" in grown  # updated for the growth
    _lapse()
    asked = _reads(monkeypatch)
    assert _start(ws) == grown and full == [1]
    assert sorted(asked) == ["src/a.py", "src/c.py", "src/deep/b.py"]


def test_the_envelopes_words_due_is_the_full_digest(ws: Path, full: list[int]) -> None:
    _start(ws)
    memo = ws / ".anchorfs" / "digest.memo"
    head, _, rest = memo.read_bytes().partition(b"\n")
    d = json.loads(head)
    assert type(d["words"]) is float and d["words"] > time.time() + 86_400  # the notes' expiry, days away
    d["words"] = time.time() + TTL_S / 2  # due before the TTL's lapse is seen
    memo.write_bytes(json.dumps(d).encode() + b"\n" + rest)
    _lapse()
    _start(ws)
    assert full == [1, 1]
    del d["words"]  # a memo written before the bound was kept: never renewed
    memo.write_bytes(json.dumps(d).encode() + b"\n" + rest)
    assert digest_memo._words(d) == 0.0


def test_a_changed_file_past_the_ttl_is_the_full_digest(ws: Path, full: list[int]) -> None:
    _start(ws)
    _lapse()
    (ws / "src" / "a.py").write_text("def f():\n    return 2\n")
    got = _start(ws)
    assert full == [1, 1] and "stale" in got.lower()


def test_without_the_c_loop_the_full_digest_says_the_same(ws: Path, full: list[int],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import anchorfs.hashing as hashing

    first = _start(ws)
    import anchorfs.filehash as filehash

    monkeypatch.setattr(hashing, "_statmatch", None)
    monkeypatch.setattr(filehash, "_statmatch", None)
    _lapse()
    assert _start(ws) == first and full == [1, 1]
