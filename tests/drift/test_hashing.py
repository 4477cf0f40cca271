from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
import time
import zlib
from pathlib import Path

import orjson
import pytest

import anchorfs.drift.hashcache as hashing
from anchorfs.drift.hashcache import MANIFEST_VERSION, HashCache, sha256_bytes, sha256_file

pytestmark = pytest.mark.usefixtures("no_racy_window")

DAY_NS = 86_400 * 1_000_000_000
TICK_S = 0.012
"""Longer than a coarse kernel clock tick (4 ms at HZ=250, 10 ms at HZ=100)."""
WINDOW_NS = 150_000_000
"""A racy window for tests of the rule itself: files older than it are trusted, newer ones not."""
REPO_ROOT = Path(hashing.__file__).resolve().parents[1]


def write(path: Path, data: bytes, *, age_ns: int | None = DAY_NS) -> Path:
    """Write `data`; by default backdate it a day so it is far outside any racy window.

    The racy rule also judges the ctime, which cannot be backdated: the module runs with a racy
    window of 0 (`no_racy_window`) and an aged file waits out one coarse kernel clock tick, so
    that a manifest saved after it is stamped later than its ctime."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if age_ns is not None:
        old = time.time_ns() - age_ns
        os.utime(path, ns=(old, old))
        time.sleep(TICK_S)
    return path


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_manifest(path: Path) -> dict:
    return orjson.loads(path.read_bytes())


def write_manifest(path: Path, entries: dict, *, version: int = MANIFEST_VERSION) -> None:
    """A manifest in the documented layout, CRC included (what `save` writes)."""
    body = orjson.dumps(entries)
    head = orjson.dumps({"format": "anchorfs.manifest", "version": version, "owner": _owner(path),
                         "crc32": zlib.crc32(body)})
    path.write_bytes(head[:-1] + b',"entries":' + body + b"}")


def _owner(manifest_path: Path) -> list:
    """The owner a manifest in this state folder names (`HashCache._owner`)."""
    from anchorfs.core import __version__

    st = os.lstat(manifest_path.parent)
    return [__version__, st.st_dev, st.st_ino]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / ".anchorfs").mkdir()
    return tmp_path


def manifest(ws: Path) -> Path:
    return ws / ".anchorfs" / "manifest.json"


# -- plain hashing --------------------------------------------------------------------------


def test_sha256_helpers_match_hashlib_including_big_streamed_files(tmp_path: Path) -> None:
    assert sha256_bytes(b"") == sha(b"")
    assert sha256_bytes(b"abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    big = os.urandom(3 * 1024 * 1024 + 17)
    p = write(tmp_path / "big.bin", big)
    assert sha256_file(p) == sha(big)
    assert sha256_file(str(p)) == sha(big)


# -- a partial load: a hook's few files decoded, the rest only when asked for -----------------

_ODD_NAMES = ["a.py", "a.py.bak", "b/a.py", 'q"uote.py', "back\\slash.py", "comma,\"x\":[.py", "ünï.py", "z.py"]


def _warm_manifest(ws: Path) -> dict[str, Path]:
    files = {rel: write(ws / rel, f"body of {rel}\n".encode()) for rel in _ODD_NAMES}
    full = HashCache(manifest(ws))
    for rel, path in files.items():
        full.sha256(rel, path)
    assert full.save(strict=True)
    time.sleep(TICK_S)
    return files


def test_a_partial_load_answers_as_the_whole_one_without_decoding_the_rest(ws: Path) -> None:
    files = _warm_manifest(ws)
    for pick in (["a.py"], ['q"uote.py', "back\\slash.py"], ["comma,\"x\":[.py", "ünï.py"], ["z.py", "missing.py"]):
        part = HashCache(manifest(ws), only=pick)
        for rel in pick:
            if rel in files:
                assert part.sha256(rel, files[rel]) == sha(f"body of {rel}\n".encode())
        assert part.vouch([r for r in pick if r in files], [str(files[r]) for r in pick if r in files]) == [
            sha(f"body of {r}\n".encode()) for r in pick if r in files]
        assert part.hashes == 0 and part._rest is not None  # nothing re-hashed, nothing else decoded
        assert set(part._entries) == {r for r in pick if r in files}
        assert part.save() is False  # nothing changed: nothing written
        other = next(r for r in _ODD_NAMES if r not in pick)
        assert part.sha256(other, files[other]) == sha(f"body of {other}\n".encode())  # the rest, on demand
        assert part.hashes == 0 and part._rest is None and set(part._entries) == set(_ODD_NAMES)
        assert part.paths_for(sha(b"body of a.py\n")) == ["a.py"]


def test_a_partial_load_of_many_paths_is_one_whole_parse(ws: Path) -> None:
    """Each path of a partial load is looked up in the manifest's bytes: past `_ONLY_MAX` paths
    (a renewal asks for thousands) the manifest is parsed whole once, with the same answers."""
    files = _warm_manifest(ws)
    many = [*_ODD_NAMES, *(f"absent{i}.py" for i in range(hashing._ONLY_MAX))]
    part = HashCache(manifest(ws), only=many)
    assert part.vouch(list(files), [str(p) for p in files.values()]) == [sha(f"body of {r}\n".encode()) for r in files]
    assert part._rest is None and set(part._entries) == set(_ODD_NAMES) and part.hashes == 0
    few = HashCache(manifest(ws), only=many[:hashing._ONLY_MAX])
    few.vouch(["a.py"], [str(files["a.py"])])
    assert few._rest is not None  # within the bound: a partial load


def test_a_partial_load_saves_what_a_whole_one_would(ws: Path) -> None:
    files = _warm_manifest(ws)
    before = manifest(ws).read_bytes()
    results = []
    for only in (None, ["a.py"]):
        manifest(ws).write_bytes(before)
        old = time.time_ns() - DAY_NS
        os.utime(manifest(ws), ns=(old + 5 * 1_000_000_000, old + 5 * 1_000_000_000))  # as saved after the files
        write(files["a.py"], b"changed\n")
        cache = HashCache(manifest(ws), only=only)
        assert cache.sha256("a.py", files["a.py"]) == sha(b"changed\n")
        assert cache.save(strict=True)
        results.append(read_manifest(manifest(ws)))
        assert HashCache(manifest(ws)).sha256("z.py", files["z.py"]) == sha(b"body of z.py\n")
    whole, part = results
    assert set(part["entries"]) == set(_ODD_NAMES) and part["entries"].keys() == whole["entries"].keys()
    for rel in _ODD_NAMES[1:]:  # the entries not re-hashed: kept as they were on disk
        assert part["entries"][rel] == whole["entries"][rel], rel
    assert part["entries"]["a.py"][4] == whole["entries"]["a.py"][4] == sha(b"changed\n")


def _entry_bytes(data: bytes, rel: str) -> bytes:
    key = orjson.dumps(rel) + b":["
    at = data.index(key)
    return data[at:data.index(b"]", at + len(key)) + 1]


def test_a_partial_load_saves_by_splicing_and_never_un_poisons_a_racy_entry(ws: Path) -> None:
    """A hook that re-hashed one file rewrites only that entry's bytes (issue 20); when an entry
    kept as bytes is racy against the old file, the whole file is written, that entry poisoned."""
    files = _warm_manifest(ws)
    before = manifest(ws).read_bytes()
    write(files["a.py"], b"changed\n")
    part = HashCache(manifest(ws), only=["a.py"])
    assert part.sha256("a.py", files["a.py"]) == sha(b"changed\n") and part.hashes == 1
    assert part.save(strict=True)
    after = manifest(ws).read_bytes()
    assert part._rest is not None and part._rest[0] == after  # spliced: the rest never decoded
    for rel in _ODD_NAMES[1:]:
        assert _entry_bytes(after, rel) == _entry_bytes(before, rel), rel
    assert _entry_bytes(after, "a.py") != _entry_bytes(before, "a.py")
    whole = HashCache(manifest(ws))
    for rel, path in files.items():
        assert whole.sha256(rel, path) == sha(b"changed\n" if rel == "a.py" else f"body of {rel}\n".encode())
    assert whole.hashes == 0  # every entry, spliced or kept, trusted by a whole load
    assert read_manifest(manifest(ws))["newest"] == max(
        max(e[1], e[2]) for e in read_manifest(manifest(ws))["entries"].values())

    manifest(ws).write_bytes(before)  # the old bytes, stamped before the files' ctimes: all racy
    old = time.time_ns() - DAY_NS
    os.utime(manifest(ws), ns=(old, old))
    part = HashCache(manifest(ws), only=["a.py"])
    assert part.sha256("a.py", files["a.py"]) == sha(b"changed\n")
    assert part.save(strict=True)
    assert part._rest is None  # refused: the whole file written
    assert all(e[4] is None or rel == "a.py" for rel, e in read_manifest(manifest(ws))["entries"].items())
    again = HashCache(manifest(ws))
    assert again.sha256("z.py", files["z.py"]) == sha(b"body of z.py\n") and again.hashes == 1


def test_a_partial_load_of_a_damaged_or_racy_manifest_trusts_what_the_whole_one_does(ws: Path) -> None:
    files = _warm_manifest(ws)
    good = manifest(ws).read_bytes()
    forged = good.replace(sha(b"body of z.py\n").encode(), b"0" * 64)  # the entries' CRC no longer holds
    for data in (forged, b"{", good[:-1], b""):
        manifest(ws).write_bytes(data)
        part = HashCache(manifest(ws), only=["a.py", "z.py"])
        assert part.sha256("z.py", files["z.py"]) == sha(b"body of z.py\n") and part.hashes == 1  # cold: re-hashed
    manifest(ws).write_bytes(good)  # written now: every entry is racy against it
    part = HashCache(manifest(ws), only=["a.py"], granularity_ns=DAY_NS * 2)
    assert part.sha256("a.py", files["a.py"]) == sha(b"body of a.py\n") and part.hashes == 1


# -- cold, warm, warm start -----------------------------------------------------------------


def test_cold_then_warm_does_not_rehash(ws: Path) -> None:
    a = write(ws / "a.py", b"print('a')\n")
    b = write(ws / "src" / "b.py", b"print('b')\n")
    cache = HashCache(manifest(ws))
    assert cache.sha256("a.py", a) == sha(b"print('a')\n")
    assert cache.sha256("src/b.py", str(b)) == sha(b"print('b')\n")
    assert cache.hashes == 2
    for _ in range(3):
        assert cache.sha256("a.py", a) == sha(b"print('a')\n")
        assert cache.sha256("src/b.py", b) == sha(b"print('b')\n")
    assert cache.hashes == 2


def test_changed_file_is_rehashed(ws: Path) -> None:
    p = write(ws / "a.py", b"one\n")
    cache = HashCache(manifest(ws))
    assert cache.sha256("a.py", p) == sha(b"one\n")
    write(p, b"three\n")
    assert cache.sha256("a.py", p) == sha(b"three\n")
    # replaced by another file of the same size and times (new inode): still re-hashed
    other = write(ws / "tmp.py", b"thre3\n")
    st = p.stat()
    os.utime(other, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(other, p)
    assert cache.sha256("a.py", p) == sha(b"thre3\n")
    assert cache.hashes == 3


def test_warm_start_from_saved_manifest(ws: Path) -> None:
    files = {f"pkg/m{i}.py": write(ws / "pkg" / f"m{i}.py", b"x = %d\n" % i) for i in range(20)}
    first = HashCache(manifest(ws))
    expected = {rel: first.sha256(rel, p) for rel, p in files.items()}
    assert first.hashes == 20
    assert first.save() is True
    assert manifest(ws).exists()

    second = HashCache(manifest(ws))
    assert {rel: second.sha256(rel, p) for rel, p in files.items()} == expected
    assert second.hashes == 0

    write(files["pkg/m3.py"], b"x = 3000\n")
    third = HashCache(manifest(ws))
    got = {rel: third.sha256(rel, p) for rel, p in files.items()}
    assert third.hashes == 1
    assert got["pkg/m3.py"] == sha(b"x = 3000\n")
    assert {k: v for k, v in got.items() if k != "pkg/m3.py"} == {
        k: v for k, v in expected.items() if k != "pkg/m3.py"
    }


def test_warm_start_across_a_real_process(ws: Path) -> None:
    files = {f"m{i}.py": write(ws / f"m{i}.py", b"y = %d\n" % i) for i in range(5)}
    with HashCache(manifest(ws)) as cache:  # saves on exit
        expected = {rel: cache.sha256(rel, p) for rel, p in files.items()}
    code = textwrap.dedent(
        """
        import json, sys
        from pathlib import Path
        from anchorfs.drift.hashcache import HashCache
        ws = Path(sys.argv[1])
        cache = HashCache(ws / ".anchorfs" / "manifest.json", granularity_ns=0)  # as `no_racy_window`
        got = {f"m{i}.py": cache.sha256(f"m{i}.py", ws / f"m{i}.py") for i in range(5)}
        print(json.dumps({"hashes": cache.hashes, "got": got}))
        """
    )
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    out = subprocess.run(
        [sys.executable, "-c", code, str(ws)], env=env, check=True, capture_output=True, text=True
    ).stdout
    result = orjson.loads(out)
    assert result["hashes"] == 0
    assert result["got"] == expected


# -- the racy rule ---------------------------------------------------------------------------


def test_racy_rewrite_with_same_size_and_forced_old_mtime_is_seen(ws: Path) -> None:
    p = write(ws / "a.py", b"AAAA\n", age_ns=None)  # just written: racy
    cache = HashCache(manifest(ws))
    assert cache.sha256("a.py", p) == sha(b"AAAA\n")
    st = p.stat()
    p.write_bytes(b"BBBB\n")  # same size
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))  # and the old mtime forced back
    assert p.stat().st_mtime_ns == st.st_mtime_ns
    assert cache.sha256("a.py", p) == sha(b"BBBB\n")


def test_racy_rewrite_is_seen_after_save_and_reload(ws: Path) -> None:
    p = write(ws / "a.py", b"AAAA\n", age_ns=None)
    first = HashCache(manifest(ws))
    assert first.sha256("a.py", p) == sha(b"AAAA\n")
    first.save()
    st = p.stat()
    p.write_bytes(b"BBBB\n")
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    second = HashCache(manifest(ws))
    assert second.sha256("a.py", p) == sha(b"BBBB\n")
    assert second.hashes == 1


def test_racy_entry_is_never_trusted_in_process(ws: Path) -> None:
    old = write(ws / "old.py", b"o\n")
    time.sleep(WINDOW_NS / 1e9 * 1.5)  # the old file leaves the window (its ctime cannot be backdated)
    fresh = write(ws / "fresh.py", b"f\n", age_ns=None)
    cache = HashCache(manifest(ws), granularity_ns=WINDOW_NS)
    for _ in range(3):
        assert cache.sha256("fresh.py", fresh) == sha(b"f\n")
        assert cache.sha256("old.py", old) == sha(b"o\n")
    assert cache.hashes == 3 + 1  # the racy file every time, the old one once


def test_racy_entries_are_poisoned_on_save(ws: Path) -> None:
    old = write(ws / "old.py", b"o\n")
    time.sleep(WINDOW_NS / 1e9 * 1.5)
    fresh = write(ws / "fresh.py", b"f\n", age_ns=None)  # not older than the save by the window
    first = HashCache(manifest(ws), granularity_ns=WINDOW_NS)
    first.sha256("fresh.py", fresh)
    first.sha256("old.py", old)
    assert first.save() is True

    entries = read_manifest(manifest(ws))["entries"]
    assert entries["fresh.py"][4] is None  # kept, without a trusted hash
    assert entries["old.py"][4] == sha(b"o\n")
    assert entries["old.py"][:4] == [old.stat().st_size, old.stat().st_mtime_ns,
                                     old.stat().st_ctime_ns, old.stat().st_ino]

    # a fresh instance (default granularity) re-hashes the poisoned file only
    second = HashCache(manifest(ws))
    assert second.sha256("old.py", old) == sha(b"o\n")
    assert second.hashes == 0
    assert second.sha256("fresh.py", fresh) == sha(b"f\n")
    assert second.hashes == 1


def test_manifest_mtime_bounds_trust_in_loaded_entries(ws: Path) -> None:
    """A loaded hash is trusted only if the file's mtime is older than the manifest's own
    mtime by more than the granularity. A planted (wrong) hash shows which side trusted it."""
    gran = 5_000_000_000
    man = manifest(ws)
    base = time.time_ns() + 2 * gran  # the manifest stamped after every file's ctime (now) by over `gran`
    planted = "0" * 64

    def served(file_mtime_ns: int) -> tuple[str, int]:
        p = write(ws / "a.py", b"real\n")
        os.utime(p, ns=(file_mtime_ns, file_mtime_ns))
        st = p.stat()
        write_manifest(man, {"a.py": [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, planted, 1000.0]})
        os.utime(man, ns=(base, base))
        cache = HashCache(man, granularity_ns=gran, clock=lambda: 1000.0)
        return cache.sha256("a.py", p), cache.hashes

    assert served(base - gran - 1) == (planted, 0)  # old enough: the cache vouches
    assert served(base - gran) == (sha(b"real\n"), 1)  # inside the window: re-hashed
    assert served(base + gran) == (sha(b"real\n"), 1)  # newer than the manifest


@pytest.mark.parametrize("field", [None, 0, 1, 2, 3])  # None: all match; else size/mtime/ctime/inode
def test_every_stat_field_must_match(ws: Path, field: int | None) -> None:
    p = write(ws / "a.py", b"real\n")
    st = p.stat()
    entry: list[object] = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, "0" * 64, time.time()]
    if field is not None:
        entry[field] = int(entry[field]) + 1  # type: ignore[call-overload]
    write_manifest(manifest(ws), {"a.py": entry})
    cache = HashCache(manifest(ws))
    if field is None:
        assert cache.sha256("a.py", p) == "0" * 64  # the planted hash: the cache vouched
        assert cache.hashes == 0
    else:
        assert cache.sha256("a.py", p) == sha(b"real\n")
        assert cache.hashes == 1


def test_file_with_future_mtime_is_always_rehashed(ws: Path) -> None:
    p = write(ws / "a.py", b"future\n")
    future = time.time_ns() + DAY_NS
    os.utime(p, ns=(future, future))
    with HashCache(manifest(ws)) as cache:
        cache.sha256("a.py", p)
        cache.sha256("a.py", p)
        assert cache.hashes == 2
    again = HashCache(manifest(ws))
    again.sha256("a.py", p)
    assert again.hashes == 1


# -- TTL -------------------------------------------------------------------------------------


def test_ttl_bounds_an_entry_life(ws: Path) -> None:
    now = [1_000_000.0]
    p = write(ws / "a.py", b"t\n")
    cache = HashCache(manifest(ws), ttl=300.0, clock=lambda: now[0])
    cache.sha256("a.py", p)
    now[0] += 299.0
    cache.sha256("a.py", p)
    assert cache.hashes == 1
    now[0] += 1.0  # 300 s old: expired
    assert cache.sha256("a.py", p) == sha(b"t\n")
    assert cache.hashes == 2
    cache.sha256("a.py", p)
    assert cache.hashes == 2  # the re-hash renewed it
    now[0] -= 10.0  # the clock went backwards: doubt means re-hash
    cache.sha256("a.py", p)
    assert cache.hashes == 3


def test_ttl_applies_to_loaded_entries_and_zero_ttl_never_trusts(ws: Path) -> None:
    now = [5_000.0]
    p = write(ws / "a.py", b"t\n")
    with HashCache(manifest(ws), clock=lambda: now[0]) as cache:
        cache.sha256("a.py", p)
    now[0] += 400.0
    later = HashCache(manifest(ws), clock=lambda: now[0])
    later.sha256("a.py", p)
    assert later.hashes == 1

    never = HashCache(manifest(ws), ttl=0.0)
    never.sha256("a.py", p)
    never.sha256("a.py", p)
    assert never.hashes == 2


def test_window_still_expires_the_oldest_entry(ws: Path) -> None:
    """Entries added later must not let an older, expired one through."""
    now = [0.0]
    a = write(ws / "a.py", b"a\n")
    b = write(ws / "b.py", b"b\n")
    cache = HashCache(manifest(ws), ttl=100.0, clock=lambda: now[0])
    cache.sha256("a.py", a)
    now[0] = 60.0
    cache.sha256("b.py", b)
    now[0] = 120.0  # a is 120 s old, b 60 s
    cache.sha256("b.py", b)
    assert cache.hashes == 2
    cache.sha256("a.py", a)
    assert cache.hashes == 3


# -- a file that moves while being hashed ---------------------------------------------------


def test_file_moving_during_hash_is_rehashed_once(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = write(ws / "a.py", b"before\n")
    real = hashing.sha256_file
    calls = []

    def racing(path: str | os.PathLike[str]) -> str:
        digest = real(path)
        if not calls:
            write(p, b"after, longer\n")  # the writer lands mid-read
        calls.append(digest)
        return digest

    monkeypatch.setattr(hashing, "sha256_file", racing)
    cache = HashCache(manifest(ws))
    assert cache.sha256("a.py", p) == sha(b"after, longer\n")
    assert cache.hashes == 2
    assert cache.sha256("a.py", p) == sha(b"after, longer\n")
    assert cache.hashes == 2  # the stable second result was cached


def test_file_that_keeps_moving_is_returned_but_not_cached(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = write(ws / "a.py", b"0\n")
    real = hashing.sha256_file
    n = [0]

    def racing(path: str | os.PathLike[str]) -> str:
        digest = real(path)
        n[0] += 1
        write(p, b"%d\n" % (n[0] * 100))  # moves every time
        return digest

    monkeypatch.setattr(hashing, "sha256_file", racing)
    with HashCache(manifest(ws)) as cache:
        assert cache.sha256("a.py", p) == sha(b"100\n")  # the hash of what it read last
        assert cache.hashes == 2
        cache.sha256("a.py", p)
        assert cache.hashes == 4  # nothing was cached
    assert not manifest(ws).exists() or "a.py" not in read_manifest(manifest(ws))["entries"]


# -- bad manifests ---------------------------------------------------------------------------


def _good_manifest_bytes(ws: Path, p: Path) -> bytes:
    with HashCache(manifest(ws)) as cache:
        cache.sha256("a.py", p)
    return manifest(ws).read_bytes()


def _bad_manifests(good: bytes, st: os.stat_result) -> dict[str, bytes]:
    doc = orjson.loads(good)
    doc["entries"]["a.py"][4] = "f" * 64  # a hand edit: the CRC no longer matches
    return {
        "torn": good[: len(good) // 2],
        "torn_at_end": good[:-1],
        "empty": b"",
        "garbage": os.urandom(64) + b"\x00\xff",
        "json_list": b"[1, 2, 3]",
        "json_string": b'"anchorfs.manifest"',
        "foreign_object": b'{"files": {"a.py": "abc"}}',
        "future_version": good.replace(b'"version":%d' % MANIFEST_VERSION, b'"version":99'),
        "version_as_string": good.replace(b'"version":%d' % MANIFEST_VERSION, b'"version":"%d"' % MANIFEST_VERSION),
        "hand_edited": orjson.dumps(doc),
        "no_crc": good.replace(b'"crc32"', b'"crc"'),
    }


@pytest.mark.parametrize(
    "kind",
    ["torn", "torn_at_end", "empty", "garbage", "json_list", "json_string", "foreign_object",
     "future_version", "version_as_string", "hand_edited", "no_crc"],
)
def test_bad_manifest_is_a_cold_cache_and_the_next_save_fixes_it(ws: Path, kind: str) -> None:
    p = write(ws / "a.py", b"content\n")
    good = _good_manifest_bytes(ws, p)
    bad = _bad_manifests(good, p.stat())[kind]
    assert bad != good
    manifest(ws).write_bytes(bad)

    cache = HashCache(manifest(ws))
    assert cache.sha256("a.py", p) == sha(b"content\n")
    assert cache.hashes == 1  # cold: nothing in the bad file was trusted
    assert cache.save() is True
    doc = read_manifest(manifest(ws))
    assert doc["format"] == "anchorfs.manifest" and doc["version"] == MANIFEST_VERSION

    warm = HashCache(manifest(ws))
    assert warm.sha256("a.py", p) == sha(b"content\n")
    assert warm.hashes == 0


@pytest.mark.parametrize(
    "entry",
    ["x", 7, None, [], [1, 2], {"size": 1}, ["1", "2", "3", "4", None, 0.0], [1, 2, 3, 4, None, "soon"]],
)
def test_odd_entries_with_a_valid_crc_never_crash(ws: Path, entry: object) -> None:
    p = write(ws / "a.py", b"content\n")
    write_manifest(manifest(ws), {"a.py": entry})
    cache = HashCache(manifest(ws))
    assert cache.sha256("a.py", p) == sha(b"content\n")
    assert cache.hashes == 1
    assert cache.save() is True


def test_manifest_that_is_a_directory_is_cold_and_save_reports_failure(ws: Path) -> None:
    manifest(ws).mkdir()
    p = write(ws / "a.py", b"d\n")
    cache = HashCache(manifest(ws))
    assert cache.sha256("a.py", p) == sha(b"d\n")
    assert cache.save() is False
    assert [x.name for x in (ws / ".anchorfs").iterdir()] == ["manifest.json"]  # no temp left


# -- saving ------------------------------------------------------------------------------------


def test_save_writes_only_when_something_changed(ws: Path) -> None:
    files = [write(ws / f"f{i}.py", b"%d\n" % i) for i in range(5)]
    cache = HashCache(manifest(ws))
    assert cache.save() is False  # nothing yet
    assert not manifest(ws).exists()
    for i, p in enumerate(files):
        cache.sha256(f"f{i}.py", p)
    assert cache.save() is True
    before = manifest(ws).stat()

    for i, p in enumerate(files):  # warm pass, same instance
        cache.sha256(f"f{i}.py", p)
    assert cache.save() is False
    warm = HashCache(manifest(ws))  # warm pass, new instance
    for i, p in enumerate(files):
        warm.sha256(f"f{i}.py", p)
    assert warm.hashes == 0
    assert warm.save() is False
    after = manifest(ws).stat()
    assert (after.st_ino, after.st_mtime_ns, after.st_size) == (
        before.st_ino, before.st_mtime_ns, before.st_size
    )

    warm.forget("f0.py")
    assert warm.save() is True
    assert manifest(ws).stat().st_ino != before.st_ino  # replaced, not rewritten in place
    assert "f0.py" not in read_manifest(manifest(ws))["entries"]
    assert sorted(x.name for x in (ws / ".anchorfs").iterdir()) == ["manifest.json"]


def test_re_seeing_a_poisoned_entry_unchanged_does_not_rewrite(ws: Path) -> None:
    p = write(ws / "a.py", b"edit\n", age_ns=None)
    cache = HashCache(manifest(ws), granularity_ns=3_600 * 1_000_000_000)
    cache.sha256("a.py", p)
    assert cache.save() is True
    cache.sha256("a.py", p)
    assert cache.hashes == 2
    assert cache.save() is False


def test_forget_makes_the_next_call_hash(ws: Path) -> None:
    p = write(ws / "a.py", b"a\n")
    cache = HashCache(manifest(ws))
    cache.sha256("a.py", p)
    cache.forget("a.py")
    cache.forget("never-seen.py")
    cache.sha256("a.py", p)
    assert cache.hashes == 2


def test_save_failure_returns_false_and_keeps_changes_pending(tmp_path: Path) -> None:
    state = tmp_path / ".anchorfs"  # does not exist yet
    p = write(tmp_path / "a.py", b"a\n")
    cache = HashCache(state / "manifest.json")
    cache.sha256("a.py", p)
    assert cache.save() is False
    with pytest.raises(FileNotFoundError):
        cache.save(strict=True)
    state.mkdir()
    assert cache.save() is True
    again = HashCache(state / "manifest.json")
    again.sha256("a.py", p)
    assert again.hashes == 0


def test_context_manager_saves_on_exit_even_after_an_error(ws: Path) -> None:
    p = write(ws / "a.py", b"a\n")
    with pytest.raises(RuntimeError):
        with HashCache(manifest(ws)) as cache:
            cache.sha256("a.py", p)
            raise RuntimeError("boom")
    assert "a.py" in read_manifest(manifest(ws))["entries"]


def test_two_instances_saving_merge_their_entries(ws: Path) -> None:
    a = write(ws / "a.py", b"a\n")
    b = write(ws / "b.py", b"b\n")
    c = write(ws / "c.py", b"c\n")
    with HashCache(manifest(ws)) as seed:
        seed.sha256("c.py", c)
    one = HashCache(manifest(ws))
    two = HashCache(manifest(ws))
    one.sha256("a.py", a)
    two.sha256("b.py", b)
    two.forget("c.py")
    assert one.save() is True
    assert two.save() is True  # merges one's a.py, keeps its own removal of c.py
    entries = read_manifest(manifest(ws))["entries"]
    assert set(entries) == {"a.py", "b.py"}
    fresh = HashCache(manifest(ws))
    assert fresh.sha256("a.py", a) == sha(b"a\n")
    assert fresh.sha256("b.py", b) == sha(b"b\n")
    assert fresh.hashes == 0


def test_odd_relative_paths_round_trip(ws: Path) -> None:
    rels = ['we"ird/"entries":x.py', "ünï cødé/ß.py", "a\\b.py", "}.py"]
    paths = {rel: write(ws / f"f{i}", rel.encode()) for i, rel in enumerate(rels)}
    with HashCache(manifest(ws)) as cache:
        for rel, p in paths.items():
            cache.sha256(rel, p)
    fresh = HashCache(manifest(ws))
    for rel, p in paths.items():
        assert fresh.sha256(rel, p) == sha(rel.encode())
    assert fresh.hashes == 0


def test_concurrent_saves_never_corrupt_the_manifest(ws: Path) -> None:
    shared = [write(ws / f"shared{i}.py", b"s%d\n" % i) for i in range(5)]
    for w in range(4):
        write(ws / f"own{w}.py", b"own %d\n" % w)
    code = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from anchorfs.drift.hashcache import HashCache
        ws, me = Path(sys.argv[1]), sys.argv[2]
        man = ws / ".anchorfs" / "manifest.json"
        for _ in range(15):
            cache = HashCache(man, granularity_ns=0)  # as `no_racy_window` in this process
            for rel in [f"shared{i}.py" for i in range(5)] + [f"own{me}.py"]:
                cache.forget(rel)
                cache.sha256(rel, ws / rel)
            assert cache.save(strict=True)
        """
    )
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(ws), str(w)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for w in range(4)
    ]
    seen = 0
    while any(pr.poll() is None for pr in procs):
        if manifest(ws).exists():
            reader = HashCache(manifest(ws))
            for i, p in enumerate(shared):  # every version on disk is whole and ours
                assert reader.sha256(f"shared{i}.py", p) == sha(b"s%d\n" % i)
            assert reader.hashes == 0
            seen += 1
    for pr in procs:
        _, err = pr.communicate()
        assert pr.returncode == 0, err.decode()
    doc = read_manifest(manifest(ws))
    assert doc["version"] == MANIFEST_VERSION
    assert {f"shared{i}.py" for i in range(5)} <= set(doc["entries"])
    assert sorted(x.name for x in (ws / ".anchorfs").iterdir()) == ["manifest.json"]
    final = HashCache(manifest(ws))
    for i, p in enumerate(shared):
        final.sha256(f"shared{i}.py", p)
    assert final.hashes == 0


# -- errors the caller maps to verdicts --------------------------------------------------------


def test_missing_file_raises_file_not_found(ws: Path) -> None:
    cache = HashCache(manifest(ws))
    with pytest.raises(FileNotFoundError):
        cache.sha256("gone.py", ws / "gone.py")


def test_file_deleted_after_caching_raises_not_the_cached_hash(ws: Path) -> None:
    p = write(ws / "a.py", b"a\n")
    cache = HashCache(manifest(ws))
    cache.sha256("a.py", p)
    p.unlink()
    with pytest.raises(FileNotFoundError):
        cache.sha256("a.py", p)


def test_directory_raises_is_a_directory(ws: Path) -> None:
    (ws / "pkg").mkdir()
    cache = HashCache(manifest(ws))
    with pytest.raises(IsADirectoryError):
        cache.sha256("pkg", ws / "pkg")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fifo_raises_instead_of_blocking(ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    cache = HashCache(manifest(ws))
    with pytest.raises(OSError):
        cache.sha256("pipe", ws / "pipe")
    assert cache.hashes == 0


def test_constructor_rejects_nonsense(ws: Path) -> None:
    with pytest.raises(ValueError):
        HashCache(manifest(ws), ttl=-1.0)
    with pytest.raises(ValueError):
        HashCache(manifest(ws), granularity_ns=-1)


def test_a_stat_passed_by_the_caller_is_used_and_a_wrong_one_is_not_trusted(ws: Path) -> None:
    p = write(ws / "a.py", b"a\n")
    other = write(ws / "b.py", b"bb\n")
    cache = HashCache(manifest(ws))
    assert cache.sha256("a.py", p, st=os.stat(p)) == sha(b"a\n")
    assert cache.sha256("a.py", p, st=os.stat(p)) == sha(b"a\n")
    assert cache.hashes == 1
    # a stat that is not this file's: never matches the entry, and the hash is of `path`
    assert cache.sha256("a.py", p, st=os.stat(other)) == sha(b"a\n")
    assert cache.sha256("a.py", p) == sha(b"a\n")
    assert cache.hashes == 3  # hashed, saw the stat move, hashed again; then cached


def backdate(path: Path, seconds: int = 3600) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - seconds * 1_000_000_000))


@pytest.fixture(params=["c", "python"])
def loop(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """`vouch` compares a batch in `_statmatch`'s C loop, or in Python where it is not built:
    both must give the same answers."""
    if request.param == "python":

        monkeypatch.setattr(hashing, "_statmatch", None)
    return str(request.param)


def test_the_c_loop_is_built() -> None:
    """The install builds `_statmatch` wherever a C compiler is at hand (CI has one): without
    this, every other test here would only exercise the Python fallback."""
    assert hashing._statmatch is not None, "anchorfs.drift._statmatch is not built: reinstall with a C compiler"


def test_statmatch_compares_every_field_and_refuses_what_it_cannot_judge(tmp_path: Path) -> None:
    from anchorfs.drift import _statmatch

    files = [write(tmp_path / f"s{i}.txt", b"x" * i) for i in range(4)]
    paths = [str(p) for p in files]
    keys = [(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino) for st in map(os.lstat, paths)]
    packed = _statmatch.pack(keys)
    assert packed is not None and _statmatch.match(paths, packed) == b"\x01" * 4
    for field in range(4):  # each field alone decides
        off = [list(k) for k in keys]
        off[field][field] += 1
        got = _statmatch.match(paths, _statmatch.pack([tuple(k) for k in off]))
        assert got is not None and list(got) == [int(i != field) for i in range(4)]
    assert _statmatch.match([*paths[:3], str(tmp_path / "gone")], packed) is None  # lstat failed
    assert _statmatch.match([*paths[:3], None], packed) is None
    assert _statmatch.match([*paths[:3], paths[3] + "\0x"], packed) is None  # embedded NUL
    assert _statmatch.match([*paths[:3], str(tmp_path) + "/\udcff"], packed) is None  # not UTF-8
    with pytest.raises(ValueError):
        _statmatch.match(paths[:3], packed)
    assert _statmatch.pack([(1, 2, 3)]) is None
    assert _statmatch.pack([(1, 2, 3, -1)]) is None  # an inode is never negative
    assert _statmatch.pack([(1, 2, 3, 2**64)]) is None
    assert _statmatch.pack([(1, 2, "3", 4)]) is None
    assert _statmatch.pack([]) == b"" and _statmatch.match([], b"") == b""


def test_statmatch_threads_split_a_large_batch_and_agree(tmp_path: Path) -> None:
    """Batches of 4,096+ files are split over threads: every share must land in its place."""
    from anchorfs.drift import _statmatch

    paths = []
    for i in range(5000):
        p = tmp_path / f"t{i}"
        p.write_bytes(b"")
        paths.append(str(p))
    keys = [(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino) for st in map(os.lstat, paths)]
    wrong = {0, 2047, 2048, 2500, 4095, 4999}
    for i in wrong:
        keys[i] = (keys[i][0] + 1, *keys[i][1:])
    got = _statmatch.match(paths, _statmatch.pack(keys))
    assert got is not None and [i for i, ok in enumerate(got) if not ok] == sorted(wrong)
    os.unlink(paths[4900])  # a file gone in the last share: the whole answer is refused
    assert _statmatch.match(paths, _statmatch.pack(keys)) is None


def test_vouch_agrees_with_the_warm_path(tmp_path: Path, loop: str) -> None:
    clock = [1_000_000.0]
    cache = HashCache(tmp_path / "manifest.json", ttl=60, clock=lambda: clock[0])
    files = []
    for i in range(3):
        p = tmp_path / f"v{i}.txt"
        p.write_text(f"{i}\n")
        backdate(p)
        files.append(p)
    shas = [cache.sha256(p.name, str(p)) for p in files]
    paths = [str(p) for p in files]
    names = [p.name for p in files]
    assert cache.vouch(names, paths) == shas
    seen: dict[str, os.stat_result] = {}
    assert cache.vouch(["v0.txt", "nope", "v2.txt"], paths, seen=seen) == [shas[0], None, shas[2]]
    assert list(seen) == ["nope"] and seen["nope"].st_ino == os.lstat(paths[1]).st_ino
    assert cache.vouch(names, [paths[0], None, str(tmp_path / "gone")]) == [shas[0], None, None]
    assert cache.vouch(["v0.txt", "v1.txt"], [paths[1], paths[0]]) == [None, None]  # stat of another file
    link = tmp_path / "link"
    link.symlink_to(files[0])
    assert cache.vouch(["v0.txt"], [str(link)]) == [None]  # a link is seen as itself
    clock[0] += 61  # past the TTL: nothing is vouched for, as `sha256` would re-hash
    assert cache.vouch(names, paths) == [None, None, None]


def test_vouch_never_serves_keys_of_a_replaced_entry(tmp_path: Path, loop: str) -> None:
    """`vouch` keeps a batch's entry keys between passes; any change to the entries drops them."""
    cache = HashCache(tmp_path / "manifest.json")
    p = tmp_path / "a.txt"
    p.write_text("one\n")
    backdate(p)
    rels, paths = ["a.txt"], [str(p)]
    first = cache.sha256("a.txt", str(p))
    assert cache.vouch(rels, paths) == [first]
    assert cache.vouch(rels, paths) == [first]  # from the kept keys
    p.write_text("two\n")
    backdate(p)
    assert cache.vouch(rels, paths) == [None]  # the stat moved: not vouched for
    second = cache.sha256("a.txt", str(p))
    assert second != first and cache.vouch(rels, paths) == [second]


def test_vouch_batch_path_comes_back_after_the_ttl_refresh(tmp_path: Path, loop: str) -> None:
    """Entries past their TTL are re-hashed; then the whole-batch path must serve again (the
    TTL window is made exact again), not fall back to one file at a time for good."""
    clock = [1_000_000.0]
    cache = HashCache(tmp_path / "manifest.json", ttl=60, clock=lambda: clock[0])
    names = [f"f{i}.txt" for i in range(3)]
    paths = []
    for name in names:
        (tmp_path / name).write_text(name)
        backdate(tmp_path / name)
        paths.append(str(tmp_path / name))
    shas = [cache.sha256(n, p) for n, p in zip(names, paths)]
    clock[0] += 61
    assert cache.vouch(names, paths) == [None, None, None]  # expired
    assert [cache.sha256(n, p) for n, p in zip(names, paths)] == shas and cache.hashes == 6
    assert not cache._lo <= clock[0] < cache._hi  # closed: the oldest entry it knew expired
    assert cache.vouch(names, paths) == shas
    assert cache._lo <= clock[0] < cache._hi  # open again: the next pass compares in C


def test_hash_many_checks_each_file_is_the_one_stat_ed(tmp_path: Path) -> None:
    cache = HashCache(tmp_path / "manifest.json")
    names = ["a.txt", "b.txt", "c.txt", "new.txt"]
    for name in names:
        (tmp_path / name).write_text(f"{name}\n")
    for name in names[:3]:
        backdate(tmp_path / name)
    future = time.time_ns() + 3600 * 10**9  # new.txt stays racy however slow the test runs
    os.utime(tmp_path / "new.txt", ns=(future, future))
    paths = [str(tmp_path / n) for n in names]
    stats = [os.lstat(p) for p in paths]
    (tmp_path / "b.txt").write_text("b.txt moved on\n")  # changed after its stat was taken
    os.mkfifo(tmp_path / "fifo")
    got = cache.hash_many([*names, "fifo"], [*paths, str(tmp_path / "fifo")], [*stats, os.lstat(tmp_path / "fifo")])
    want_a = sha256_bytes(b"a.txt\n")
    assert got == [want_a, None, sha256_bytes(b"c.txt\n"), sha256_bytes(b"new.txt\n"), None]
    assert cache.hashes == 4  # the FIFO is never opened
    assert cache.vouch(["a.txt", "b.txt", "new.txt"], [paths[0], paths[1], paths[3]]) == [want_a, None, None]
    assert cache._entries["new.txt"][4] is None  # racy (mtime not yet past): kept poisoned
    assert cache.save() is True and HashCache(tmp_path / "manifest.json").vouch(["a.txt"], [paths[0]]) == [want_a]


def _coarse(st: os.stat_result) -> os.stat_result:
    """`st` as a filesystem with 1-second timestamps reports it (ext3, HFS+, some network mounts)."""
    sec = 1_000_000_000
    fields = list(st[:10]) + [None] * (os.stat_result.n_fields - 10)
    names = ["st_atime", "st_mtime", "st_ctime", "st_atime_ns", "st_mtime_ns", "st_ctime_ns"]
    at, mt, ct = (st.st_atime_ns // sec * sec, st.st_mtime_ns // sec * sec, st.st_ctime_ns // sec * sec)
    for name, value in zip(names, [at / sec, mt / sec, ct / sec, at, mt, ct]):
        fields[10 + names.index(name)] = value
    return os.stat_result(fields)


def test_racy_rule_judges_ctime_when_mtime_was_set_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An edit of the same size that restores the mtime (`touch -d`, `cp -p`, `tar -x`) within the
    second of the last hash keeps every stat field on a 1-second filesystem; only a ctime that is
    recent at hash time shows the window is open (issue 15, item 5)."""
    f = write(tmp_path / "a.py", b"TTL = 24\n")  # mtime a day back, ctime now: as `tar -x` leaves it
    frozen = _coarse(os.stat(f))
    monkeypatch.setattr(hashing, "_stat", lambda path: frozen)  # the filesystem shows one second throughout
    cache = HashCache(tmp_path / "manifest.json", granularity_ns=2_000_000_000)  # the real default
    assert cache.sha256("a.py", f) == sha(b"TTL = 24\n")
    f.write_bytes(b"TTL = 48\n")  # same size, in place, same inode, mtime restored below
    os.utime(f, ns=(frozen.st_mtime_ns, frozen.st_mtime_ns))
    assert cache.sha256("a.py", f) == sha(b"TTL = 48\n")


def test_manifest_entry_with_a_recent_ctime_is_not_trusted(tmp_path: Path) -> None:
    """A loaded entry is judged against the manifest's own mtime on ctime too, not mtime alone."""
    f = write(tmp_path / "a.py", b"TTL = 24\n")  # mtime a day back, ctime now
    st = os.stat(f)
    manifest = tmp_path / "manifest.json"
    write_manifest(manifest, {"a.py": [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, sha(b"TTL = 24\n"),
                                       time.time()]})
    f.write_bytes(b"TTL = 48\n")
    os.utime(f, ns=(st.st_mtime_ns, st.st_mtime_ns))
    # A 1-second filesystem shows the stat the entry holds, ctime included: pass exactly that.
    assert HashCache(manifest, granularity_ns=WINDOW_NS).sha256("a.py", f, st=st) == sha(b"TTL = 48\n")


# -- found moves (issue 18): kept in the manifest for the next process --------------------------

def _moves_manifest(entries: dict, moves: list, path: Path) -> bytes:
    """A manifest with `moves`, both CRCs right (what `save` writes), for the state folder of `path`."""
    body = orjson.dumps(entries)
    listed = orjson.dumps(moves)
    head = orjson.dumps({"format": "anchorfs.manifest", "version": MANIFEST_VERSION, "owner": _owner(path),
                         "crc32": zlib.crc32(body),
                         "moves": orjson.Fragment(listed), "moves_crc32": zlib.crc32(listed)})
    return head[:-1] + b',"entries":' + body + b"}"


@pytest.mark.parametrize("lead", [
    ["k", "gone.py", "../outside.py", "b" * 64, True],
    ["k", "gone.py", "/etc/passwd", "b" * 64, True],
    ["k", "gone.py", "a/\0b.py", "b" * 64, True],
    ["k", "../gone.py", "moved.py", "b" * 64, True],
    ["k", "gone.py", "moved.py", "short", True],
    ["k", "gone.py", "moved.py", "b" * 64, 1],
    ["k", "gone.py", "moved.py", "b" * 64],
    "not a list",
], ids=["dotdot", "absolute", "nul", "dotdot-source", "bad-sha", "int-flag", "short", "string"])
def test_a_crafted_move_with_a_right_crc_drops_the_moves_and_keeps_the_entries(ws: Path, lead: object) -> None:
    p = write(ws / "a.py", b"a\n")
    st = p.stat()
    entries = {"a.py": [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, sha(b"a\n"), time.time()]}
    manifest(ws).write_bytes(_moves_manifest(entries, [lead], manifest(ws)))
    cache = HashCache(manifest(ws))
    assert cache.move_of("k") is None and cache.moved_from() == frozenset()
    assert cache.sha256("a.py", p) == sha(b"a\n") and cache.hashes == 0  # the entries' own CRC still holds


def test_moves_with_a_wrong_crc_are_dropped_and_unsafe_moves_are_never_noted(ws: Path) -> None:
    p = write(ws / "a.py", b"a\n")
    st = p.stat()
    entries = {"a.py": [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, sha(b"a\n"), time.time()]}
    good = _moves_manifest(entries, [["k", "gone.py", "moved.py", "b" * 64, True]], manifest(ws))
    assert HashCache(manifest(ws)).move_of("k") is None  # no manifest yet
    manifest(ws).write_bytes(good)
    assert HashCache(manifest(ws)).move_of("k") == ("gone.py", "moved.py", "b" * 64, True)
    manifest(ws).write_bytes(good.replace(b'"moved.py"', b'"mover.py"'))  # a hand edit of the moves
    cache = HashCache(manifest(ws))
    assert cache.move_of("k") is None
    assert cache.sha256("a.py", p) == sha(b"a\n") and cache.hashes == 0
    for path, now in [("gone.py", "../x.py"), ("gone.py", "/x.py"), ("/gone.py", "x.py"), ("gone.py", "x\udcff.py")]:
        cache.note_move("k2", path, now, "c" * 64, True)
        assert cache.move_of("k2") is None


def test_two_instances_saving_merge_their_moves(ws: Path) -> None:
    one, two = HashCache(manifest(ws)), HashCache(manifest(ws))
    one.note_move("a", "a.py", "x/a.py", "a" * 64, True)
    two.note_move("b", "b.py", "x/b.py", "b" * 64, False)
    assert one.save() and two.save()
    merged = HashCache(manifest(ws))
    assert merged.move_of("a") == ("a.py", "x/a.py", "a" * 64, True)
    assert merged.move_of("b") == ("b.py", "x/b.py", "b" * 64, False)
    assert merged.moved_from() == frozenset({"a.py"})


def test_vouch_with_the_root_renews_expired_entries_in_one_batch(tmp_path: Path, loop: str) -> None:
    """Past the TTL, a pass that names its root has the files whose stat still holds read again
    in `_statmatch.reread` and hashed there: the true bytes decide (a hash cached under a stat
    that lied is replaced), the entries are stamped anew, and a file with a new stat, or one not
    at `root/rel`, is left to the caller with its stat. Without the C loop, all go one by one."""
    root = Path(os.path.realpath(tmp_path)) / "ws"
    clock = [1_000_000.0]
    cache = HashCache(tmp_path / "manifest.json", ttl=60, clock=lambda: clock[0])
    rels = ["d/a.txt", "d/e/b.txt", "c.txt", "moved.txt"]
    for rel in rels:
        write(root / rel, f"{rel}\n".encode())
    paths = [str(root / rel) for rel in rels]
    want = [sha(f"{rel}\n".encode()) for rel in rels]
    assert [cache.sha256(r, p) for r, p in zip(rels, paths)] == want
    cache._entries["c.txt"][4] = "0" * 64  # cached under a stat that lied about a change
    write(root / "moved.txt", b"moved on\n")  # a new stat: never renewed here
    clock[0] += 61
    seen: dict[str, os.stat_result] = {}
    got = cache.vouch(rels, [*paths[:3], paths[3]], seen=seen, root=str(root))
    if loop == "c":
        assert got == [*want[:3], None]
        assert set(seen) == {"moved.txt"} and cache.hashes == 4 + 3
        assert all(cache._entries[r][5] == clock[0] for r in rels[:3])  # stamped anew
        assert cache.vouch(rels[:3], paths[:3], root=str(root)) == want[:3] and cache.hashes == 7
    else:
        assert got == [None] * 4 and set(seen) == set(rels) and cache.hashes == 4
    clock[0] += 61
    elsewhere = tmp_path / "copy.txt"
    elsewhere.write_bytes(b"d/a.txt\n")
    os.utime(elsewhere, ns=(os.stat(paths[0]).st_atime_ns, os.stat(paths[0]).st_mtime_ns))
    # a path that is not root/rel is never renewed, whatever its stat
    assert cache.vouch(["d/a.txt"], [str(elsewhere)], root=str(root)) == [None]
    assert cache.save() is True
    assert HashCache(tmp_path / "manifest.json", ttl=60, clock=lambda: clock[0] - 61).vouch(rels[:1], paths[:1]) == (
        want[:1] if loop == "c" else [None])
    cache._entries["c.txt"][3] = -1  # a key C cannot pack (an inode below zero): left to the one-by-one path
    clock[0] += 61
    seen = {}
    assert cache.vouch(["c.txt"], [paths[2]], seen=seen, root=str(root)) == [None] and set(seen) == {"c.txt"}
