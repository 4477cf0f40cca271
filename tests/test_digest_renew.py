"""A session start after a pause (`digest_memo._renew`): the digest memo lapsed only because the
hash cache's TTL ran out, so every anchored file it rests on is read again and hashed, and while
each hashes as the cache held it when the memo was written, the memo's digest is served again
(the full pass would say the same) and kept until the new TTL. Anything else is the full digest:
a hash that moved, a cache re-hashed by a later pass, a cold manifest, the envelopes' words due,
a file changed."""

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


def _entries(root: Path) -> dict[str, list[Any]]:
    data = json.loads((root / ".anchorfs" / "manifest.json").read_bytes())
    return data["entries"]


def test_a_start_past_the_ttl_reads_every_file_again_and_serves_the_memo(ws: Path, full: list[int]) -> None:
    first = _start(ws)
    assert full == [1] and "f returns one" in first
    written = digest_memo._read_memo(str(ws))
    assert written is not None and not written["lapsed"]
    _lapse()
    assert digest_memo._read_memo(str(ws)) is None  # lapsed: no replay
    before = _entries(ws)
    assert _start(ws) == first and full == [1]  # renewed: no full digest
    after = _entries(ws)
    for rel in ("src/a.py", "src/deep/b.py"):  # each read again now: its entry stamped anew, the same hash
        assert after[rel][4] == before[rel][4] and after[rel][5] > before[rel][5]
    again = digest_memo._read_memo(str(ws))
    assert again is not None and not again["lapsed"] and again["until"] > written["until"]
    assert again["paths"] == written["paths"] and again["keys"] == written["keys"]
    assert _start(ws) == first and full == [1]  # and replayed while the new TTL runs


def test_a_hash_that_moved_under_the_same_stat_is_the_full_digest(ws: Path, full: list[int]) -> None:
    """The cache held another hash than the bytes now give (a stat that lied): the full pass
    judges, and the cache keeps the true hash."""
    first = _start(ws)
    cache = HashCache(ws / ".anchorfs" / "manifest.json")
    true_sha = cache.sha256("src/deep/b.py", str(ws / "src" / "deep" / "b.py"))
    cache._entries["src/deep/b.py"][4] = "0" * 64
    cache._touched.add("src/deep/b.py")
    cache._dirty = True
    assert cache.save()
    _lapse()
    got = _start(ws)
    assert full == [1, 1] and got == first  # the full pass, which finds b as recorded
    assert _entries(ws)["src/deep/b.py"][4] == true_sha


def test_a_cache_re_hashed_after_the_memo_is_the_full_digest(ws: Path, full: list[int]) -> None:
    """Another pass re-hashed a file after the memo was written: its hash is no longer surely
    the one the digest rested on."""
    _start(ws)
    d = digest_memo._read_memo(str(ws))
    assert d is not None
    cache = HashCache(ws / ".anchorfs" / "manifest.json", ttl=TTL_S)
    cache._load()
    cache._whole()
    cache._entries["src/a.py"][5] = d["written"] + 0.5
    cache._touched.add("src/a.py")
    cache._dirty = True
    assert cache.save()
    _lapse()
    _start(ws)
    assert full == [1, 1]


def test_a_cold_manifest_is_the_full_digest(ws: Path, full: list[int]) -> None:
    _start(ws)
    (ws / ".anchorfs" / "manifest.json").write_bytes(b"{torn")
    _lapse()
    _start(ws)
    assert full == [1, 1]


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
    monkeypatch.setattr(hashing, "_statmatch", None)
    _lapse()
    assert _start(ws) == first and full == [1, 1]
