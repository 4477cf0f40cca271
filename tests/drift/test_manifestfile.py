"""The hash cache's file read and spliced as bytes (`anchorfs.drift.manifest`)."""

from __future__ import annotations

import zlib
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from anchorfs.drift import manifest as manifestfile
from anchorfs.drift.manifest import ENTRIES_KEY, MANIFEST_VERSION, newest_hashed

OWNER = ["0.1.0", 1, 2]
"""The owner these tests' manifests name: the anchorfs version and a state folder's device and inode."""


def parse(data: bytes, mtime: int, gran: int) -> Any:
    return manifestfile.parse(data, mtime, gran, OWNER)


def parse_only(data: bytes, mtime: int, gran: int, only: list[str]) -> Any:
    return manifestfile.parse_only(data, mtime, gran, only, OWNER)


def splice(data: bytes, mtime: int, gran: int, changes: dict[str, Any]) -> bytes | None:
    return manifestfile.splice(data, mtime, gran, changes, OWNER)


def assemble(body: bytes, newest: int, moves: bytes = b"") -> bytes:
    return manifestfile.assemble(body, newest, OWNER, moves)

GRAN = 1_000
MTIME = 10_000_000  # the manifest file's mtime in these tests: entries before MTIME - GRAN are not racy

_names = st.text(st.sampled_from(list('ab/."\\,:[]{}ü会 x')), min_size=1, max_size=8)
_stamps = st.integers(min_value=0, max_value=MTIME - GRAN - 1)
_entry = st.builds(lambda size, m, c, ino, h, at: [size, m, c, ino, h, at],
                   st.integers(0, 1 << 40), _stamps, _stamps, st.integers(0, 1 << 40),
                   st.one_of(st.none(), st.text("0123456789abcdef", min_size=64, max_size=64)),
                   st.floats(min_value=0, max_value=2e9, allow_nan=False))


def _file(entries: dict[str, list[Any]], moves: list[list[Any]] | None = None) -> bytes:
    """A manifest as `HashCache._write` writes it."""
    part = b""
    if moves:
        listed = orjson.dumps(moves)
        part = b',"moves":' + listed + b',"moves_crc32":' + orjson.dumps(zlib.crc32(listed))
    return assemble(orjson.dumps(entries), newest_hashed(entries.values()), part)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(_names, _entry, max_size=12), st.dictionaries(_names, st.one_of(st.none(), _entry), max_size=5))
def test_a_splice_reads_back_as_the_whole_file_written_again(entries: dict[str, list[Any]],
                                                             changes: dict[str, list[Any] | None]) -> None:
    spliced = splice(_file(entries), MTIME, GRAN, changes)
    assert spliced is not None
    want = {k: v for k, v in entries.items() if k not in changes} | {k: v for k, v in changes.items() if v is not None}
    got, moves, old = parse(spliced, MTIME, GRAN)
    assert got == want and moves == {} and old is False
    assert parse_only(spliced, MTIME, GRAN, list(want) + ["absent"]) == (want, {}, False)
    doc = orjson.loads(spliced)
    kept_and_new = [*entries.values(), *(v for v in changes.values() if v is not None)]
    assert newest_hashed(want.values()) <= doc["newest"] == newest_hashed(kept_and_new)  # a bound: never below an entry


def test_a_splice_keeps_the_moves_bytes_their_crc_is_over() -> None:
    moves = [["key1", "a.py", "b.py", "f" * 64, True]]
    entries = {"a.py": [1, 5, 5, 7, "a" * 64, 1.5], "b.py": [2, 6, 6, 8, None, 2.5]}
    spliced = splice(_file(entries, moves), MTIME, GRAN, {"b.py": [3, 9, 9, 8, "b" * 64, 3.5]})
    assert spliced is not None
    got, found, _ = parse(spliced, MTIME, GRAN)
    assert found == {"key1": ("a.py", "b.py", "f" * 64, True)}
    assert got == {"a.py": entries["a.py"], "b.py": [3, 9, 9, 8, "b" * 64, 3.5]}


def test_what_a_splice_cannot_vouch_for_is_left_to_the_whole_write() -> None:
    entries = {"a.py": [1, 5, 5, 7, "a" * 64, 1.5], "b.py": [2, 6, 6, 8, "b" * 64, 2.5]}
    good = _file(entries)
    change = {"a.py": None}
    assert splice(good, MTIME, GRAN, change) is not None
    racy = dict(entries, b=[2, MTIME - GRAN, 6, 8, "b" * 64, 2.5])  # kept as bytes, racy: a reader poisons it
    assert splice(_file(racy), MTIME, GRAN, change) is None
    ctime_racy = dict(entries, b=[2, 6, MTIME, 8, "b" * 64, 2.5])
    assert splice(_file(ctime_racy), MTIME, GRAN, change) is None
    unhashed = dict(entries, b=[2, MTIME, MTIME, 8, None, 2.5])  # racy but holding no hash: nothing to poison
    assert splice(_file(unhashed), MTIME, GRAN, change) is not None
    body = orjson.dumps(entries)
    no_newest = orjson.dumps({"format": manifestfile.FORMAT, "version": MANIFEST_VERSION, "owner": OWNER,
                              "crc32": zlib.crc32(body)})
    assert splice(no_newest[:-1] + b"," + ENTRIES_KEY + body + b"}", MTIME, GRAN, change) is None
    assert splice(good.replace(b'"version":3', b'"version":2'), MTIME, GRAN, change) is None
    assert splice(good.replace(b"a" * 64, b"c" * 64), MTIME, GRAN, change) is None  # the CRC fails
    assert splice(b"{", MTIME, GRAN, change) is None


def test_a_splice_that_empties_or_fills_an_empty_manifest() -> None:
    one = {"a.py": [1, 5, 5, 7, "a" * 64, 1.5]}
    emptied = splice(_file(one), MTIME, GRAN, {"a.py": None})
    assert emptied is not None and parse(emptied, MTIME, GRAN)[0] == {}
    filled = splice(emptied, MTIME, GRAN, one)
    assert filled is not None and parse(filled, MTIME, GRAN)[0] == one


def test_a_splice_of_the_bytes_a_partial_load_read_checks_their_crc_once(monkeypatch: Any) -> None:
    """A hook's save splices the very bytes its load read and checked (`HashCache._rest`): their
    CRC is not computed again (at 10,000 files, 400 KB each time); other bytes, even equal ones,
    are checked anew, and a damaged copy is still refused."""
    entries = {f"src/m{i}.py": [i, 1, 1, i, "a" * 64, 1.0] for i in range(50)}
    data = _file(entries)
    calls: list[int] = []
    real = zlib.crc32
    monkeypatch.setattr(zlib, "crc32", lambda b, *a: calls.append(len(b)) or real(b, *a))
    assert parse_only(data, MTIME, GRAN, ["src/m3.py"]) == ({"src/m3.py": entries["src/m3.py"]}, {}, False)
    assert len(calls) == 1
    new = [3, 1, 1, 3, "b" * 64, 2.0]
    spliced = splice(data, MTIME, GRAN, {"src/m3.py": new})
    assert spliced is not None and len(calls) == 2  # the new body's CRC only
    assert parse(spliced, MTIME, GRAN)[0] == {**entries, "src/m3.py": new} and len(calls) == 3
    copy = bytes(bytearray(data))
    assert splice(copy, MTIME, GRAN, {"src/m3.py": new}) == spliced and len(calls) == 5  # other bytes: checked
    i = copy.index(b"src/m7.py")
    damaged = copy[:i] + b"X" + copy[i + 1:]
    assert splice(damaged, MTIME, GRAN, {"src/m3.py": new}) is None


def test_a_number_orjson_refuses_makes_the_whole_file_a_cold_cache() -> None:
    """NaN, the infinities and a float past float's range are refused anywhere in the file, as
    orjson refuses them: no entry of it is trusted."""
    entries = {"a.py": [1, 5, 5, 7, "a" * 64, 1.5], "b.py": [2, 6, 6, 8, "b" * 64, 2.5]}
    good = _file(entries)
    assert parse(good, MTIME, GRAN)[0] == entries
    for bad in (b"NaN", b"Infinity", b"-Infinity", b"1e400"):
        damaged = good.replace(b"2.5]", bad + b"]")
        body = damaged[damaged.find(ENTRIES_KEY) + len(ENTRIES_KEY):damaged.rfind(b"}")]
        head = orjson.loads(damaged[:damaged.find(ENTRIES_KEY) - 1] + b"}")
        restamped = damaged.replace(b'"crc32":%d' % head["crc32"], b'"crc32":%d' % zlib.crc32(body))
        assert parse(restamped, MTIME, GRAN) == ({}, {}, False), bad


def test_a_manifest_of_another_owner_is_a_cold_cache() -> None:
    """A copy from another clone (another state folder) or of another anchorfs vouches for nothing."""
    entries = {"a.py": [1, 2, 3, 4, "a" * 64, 1.0]}
    data = _file(entries)
    assert parse(data, MTIME, GRAN)[0] == entries
    for other in (["0.1.0", 1, 3], ["9.9.9", 1, 2], None):
        assert manifestfile.parse(data, MTIME, GRAN, other) == ({}, {}, False)
        assert manifestfile.parse_only(data, MTIME, GRAN, ["a.py"], other) in (None, ({}, {}, False))
