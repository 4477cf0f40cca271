"""Reading `.anchorfs/manifest.json`, the hash cache's file (`anchorfs.drift.hashcache`: its rules).

Manifest layout, one JSON object, `entries` last so its bytes can be checksummed as written:
`{"format": "anchorfs.manifest", "version": 3, "owner": [...], "crc32": N, "newest": T, "moves": [[key,
path, path_now, sha256_now, gone], ...], "moves_crc32": M, "entries": {rel: [size, mtime_ns, ctime_ns,
inode, sha256 or null, checked_at]}}`. The CRC lets a load skip validating every entry: only the
hash cache's own writes pass it, anything else is a cold cache. `moves` (absent when empty, a
list so that no key can precede `entries`) are the drift pass's found moves (`HashCache.move_of`);
a bad moves CRC drops only them. `newest` is the latest mtime or ctime of an entry holding a
hash: a cache that decoded a few entries (`only`) saves by splicing theirs into the bytes it read
(`splice`) while no entry kept as bytes is racy against the old file.

Two readers of the same bytes: `parse`, every entry (a drift pass over the workspace), and
`parse_only`, the entries of a few paths (a hook re-checking one edited file). Both trust the
entries only under the CRC, poison the racy ones against the file's own mtime, and read anything
unexpected as a cold cache: the same answers for every path both read.
"""

from __future__ import annotations

import zlib

from collections.abc import Iterable
from typing import Any

import orjson

Parsed = tuple[dict[str, list[Any]], dict[str, tuple[str, str, str, bool]], bool]
"""(entries with racy ones poisoned, found moves, whether of an older version)."""

__all__ = ["FORMAT", "ENTRIES_KEY", "READABLE", "MANIFEST_VERSION", "parse", "parse_only", "splice", "assemble",
           "newest_hashed", "moves_of", "plain_rel"]

MANIFEST_VERSION = 3
"""Bumped on any incompatible change; other versions load as a cold cache (3: the head names its `owner`)."""
READABLE = (MANIFEST_VERSION,)
"""Versions whose layout this module reads."""
FORMAT = "anchorfs.manifest"
ENTRIES_KEY = b'"entries":'


def _head_ok(doc: Any, owner: list[Any] | None) -> bool:
    """A head this writer wrote for this clone and this anchorfs (`owner`, None: nobody)."""
    return (type(doc) is dict and doc.get("format") == FORMAT and type(doc.get("version")) is int
            and doc["version"] in READABLE and type(doc.get("crc32")) is int
            and owner is not None and doc.get("owner") == owner)


def _body(data: bytes, crc: int) -> memoryview | None:
    """The entries object's bytes when the CRC over them holds, else None."""
    start = data.find(ENTRIES_KEY)  # the first: only fixed keys and the `moves` list come before
    end = data.rfind(b"}")
    if start < 0 or end < start:
        return None
    body = memoryview(data)[start + len(ENTRIES_KEY):end]
    return body if zlib.crc32(body) == crc else None


def _poison(entries: Iterable[list[Any]], mtime_ns: int, gran: int) -> bool:
    """Clear the hash of every entry racy against a manifest of `mtime_ns`; False when one is not ours."""
    limit = mtime_ns - gran
    try:
        for e in entries:
            if e[1] >= limit or e[2] >= limit:
                e[4] = None  # racy against this manifest (mtime or ctime): it cannot vouch for the hash
            if not e[5] >= 0.0:  # a number, or this is not our shape after all
                raise TypeError
    except (TypeError, IndexError, KeyError):
        return False
    return True


def _tail(doc: dict[str, Any], entries: dict[str, list[Any]]) -> Parsed:
    old = doc["version"] != MANIFEST_VERSION
    return entries, ({} if old else moves_of(doc.get("moves"), doc.get("moves_crc32"))), old


def parse(data: bytes, mtime_ns: int, gran: int, owner: list[Any] | None) -> Parsed:
    """Every entry of the manifest `data` (its file's mtime `mtime_ns`), racy ones poisoned."""
    try:
        doc: Any = orjson.loads(data)
    except ValueError:  # a JSONDecodeError, a UnicodeDecodeError, a nesting too deep
        return {}, {}, False
    if not _head_ok(doc, owner) or type(doc.get("entries")) is not dict or _body(data, doc["crc32"]) is None:
        return {}, {}, False  # not written by us (or edited by hand): trust nothing in it
    entries: dict[str, list[Any]] = doc["entries"]
    if not _poison(entries.values(), mtime_ns, gran):
        return {}, {}, False
    return _tail(doc, entries)


_LAST: tuple[object, Any] = (None, None)
"""The last bytes `_split` judged, and its answer: a hook's save splices the very bytes object its
partial load checked, whose CRC need not be computed twice. Kept by identity, of `bytes` only."""


def _split(data: bytes) -> tuple[Any, int, bytes | None] | None:
    """(the head, decoded alone; where the entries start; their bytes, None unless the CRC over
    them holds and they are one object) of a manifest as this project's writer lays it out;
    None when its head does not read so (`parse` then judges the whole file)."""
    global _LAST
    last = _LAST
    if last[0] is data:
        return last[1]  # type: ignore[no-any-return]
    out = _split_new(data)
    if type(data) is bytes:
        _LAST = (data, out)
    return out


def _split_new(data: bytes) -> tuple[Any, int, bytes | None] | None:
    start = data.find(ENTRIES_KEY)
    if start < 1 or data[start - 1:start] != b",":
        return None
    try:
        doc: Any = orjson.loads(data[:start - 1] + b"}")
    except ValueError:  # JSONDecodeError, UnicodeDecodeError
        return None
    if not _head_ok(doc, doc.get("owner") if type(doc) is dict else None):  # whose: the callers' to judge
        return None
    body = _body(data, doc["crc32"])
    ok = body is not None and body[:1] == b"{" and body[-1:] == b"}"
    return doc, start, bytes(body) if ok and body is not None else None


def _spelt(rel: str) -> bytes | None:
    """`rel` as a key as orjson spells it; None for what is never written (a lone surrogate)."""
    try:
        return orjson.dumps(rel)
    except TypeError:
        return None


def _find(raw: bytes, spelt: bytes) -> tuple[int, int, int] | None:
    """(where the key starts, where its value starts, where the value ends) of the entry keyed
    `spelt` in the entries' bytes `raw` (`{` or `,`, the key, `:[`), None when there is none.
    Raises ValueError when its value does not end."""
    key = spelt + b":["
    at = 1 if raw.startswith(key, 1) else raw.find(b"," + key) + 1
    if at <= 0:
        return None
    stop = raw.find(b"]", at + len(key))  # after the key, which may hold a `]`
    if stop < 0:
        raise ValueError("an entry that does not end")
    return at, at + len(key) - 1, stop + 1


def parse_only(data: bytes, mtime_ns: int, gran: int, only: Iterable[str], owner: list[Any] | None) -> Parsed | None:
    """`parse`, keeping the entries of `only` alone and decoding no other (each found by its
    key as the writer spells it, `_find`). None when this cannot be read so (the caller takes
    `parse`)."""
    split = _split(data)
    if split is None:
        return None
    doc, _, raw = split
    if raw is None or doc.get("owner") != owner:
        return {}, {}, False  # as `parse`: a file not ours is a cold cache
    entries: dict[str, list[Any]] = {}
    for rel in only:
        spelt = _spelt(rel)
        try:
            found = _find(raw, spelt) if spelt is not None else None
            if found is None:
                continue
            entry = orjson.loads(raw[found[1]:found[2]])
        except ValueError:
            return None
        if type(entry) is not list:
            return None
        entries[rel] = entry
    if not _poison(entries.values(), mtime_ns, gran):
        return {}, {}, False
    return _tail(doc, entries)


def newest_hashed(entries: Iterable[list[Any]]) -> int:
    """The latest mtime or ctime of an entry that holds a hash (0 when none): the head's
    `newest`, which tells `splice` whether any entry it would keep as bytes is racy."""
    newest = 0
    for e in entries:
        if e[4] is not None:
            t = e[1] if e[1] > e[2] else e[2]
            if t > newest:
                newest = t
    return newest


def assemble(body: bytes, newest: int, owner: list[Any], moves: bytes = b"") -> bytes:
    """The manifest's bytes from the entries' (`body`, which the CRC is over), `newest`, and the
    moves' part as it stands (`,"moves":[...],"moves_crc32":M`, or nothing)."""
    head = orjson.dumps({"format": FORMAT, "version": MANIFEST_VERSION, "owner": owner, "crc32": zlib.crc32(body),
                         "newest": newest})
    return head[:-1] + moves + b"," + ENTRIES_KEY + body + b"}"


def splice(data: bytes, mtime_ns: int, gran: int, changes: dict[str, list[Any] | None],
           owner: list[Any]) -> bytes | None:
    """The manifest `data` (its file's mtime `mtime_ns`) with the entries of `changes` replaced
    (None: dropped), every other entry's bytes kept as they are. None when it cannot be told
    safe, and the caller writes the whole file: a head not of this version or without `newest`,
    a CRC that does not hold, or an entry kept as bytes that is racy against `mtime_ns` (under
    the new file's mtime its hash would be trusted)."""
    split = _split(data)
    if split is None:
        return None
    doc, start, raw = split
    if raw is None or doc["version"] != MANIFEST_VERSION or type(doc.get("newest")) is not int \
            or doc.get("owner") != owner:
        return None
    newest: int = doc["newest"]
    if newest >= mtime_ns - gran:
        return None
    moves = b""
    if "moves" in doc:
        at = data.find(b',"moves":', 0, start)
        if at < 0:
            return None
        moves = data[at:start - 1]  # the moves' bytes as they are, which their own CRC is over
    cuts: list[tuple[int, int]] = []
    added: list[bytes] = []
    for rel, entry in changes.items():
        spelt = _spelt(rel)
        if spelt is None:
            return None
        try:
            found = _find(raw, spelt)
        except ValueError:
            return None
        if found is not None:
            cuts.append((found[0], found[2]))
        if entry is not None:
            value = orjson.dumps(entry)
            if value[:1] != b"[" or b"]" in value[1:-1]:
                return None
            added.append(spelt + b":" + value)
            if entry[4] is not None:
                newest = max(newest, entry[1], entry[2])
    kept: list[bytes] = []
    pos = 1
    for at, stop in sorted(cuts):
        if at < pos:
            return None  # two keys in one place: not this writer's file
        kept.append(raw[pos:at])
        pos = stop + 1 if raw[stop:stop + 1] == b"," else stop
    kept.append(raw[pos:-1])
    items = [p.strip(b",") for p in kept]
    new_body = b"{" + b",".join([p for p in items if p] + added) + b"}"
    return assemble(new_body, newest, owner, moves)


def moves_of(listed: Any, crc: Any) -> dict[str, tuple[str, str, str, bool]]:
    """The found moves of a manifest, or none at all unless their CRC and every one's shape
    hold: `[key, path, path_now, sha256_now, gone]`, plain relative paths (`plain_rel`)."""
    if type(listed) is not list or type(crc) is not int:
        return {}
    if zlib.crc32(orjson.dumps(listed)) != crc:
        return {}
    out: dict[str, tuple[str, str, str, bool]] = {}
    for item in listed:
        if (type(item) is not list or len(item) != 5 or not all(type(v) is str for v in item[:4])
                or type(item[4]) is not bool or not plain_rel(item[1]) or not plain_rel(item[2])
                or len(item[3]) != 64):
            return {}
        out[item[0]] = (item[1], item[2], item[3], item[4])
    return out


def plain_rel(path: str) -> bool:
    """A repo-relative POSIX path that names nothing outside by its own spelling."""
    return bool(path) and "\0" not in path and path[:1] != "/" and ".." not in path.split("/")
