"""The hooks' re-check of the memories on a few paths, without the workspace.

Both the git post-commit hook and the agent's post-edit hook re-check only the memories
anchored to the paths a commit or an edit touched. The workspace (its config, its whole fold of
the ledger, its lock) is the general path; a hook needs far less, so this one reads only:

- the ledger's bytes, to see whether it names a path at all (`mentioned`: none named, no
  memory rests there, nothing else is read);
- the fold snapshot's index and the records it names for those paths (`foldsnap.on_paths`:
  the index's head and table checked against the header, one bucket per path against the
  table, each record against its blake3 in the bucket), never the plan nor the unrelated
  records; where the ledger grew since the snapshot, the lines after it, its prefix checked
  once against its checksum and then trusted on the stat that check saw (`fold.tail`);
- `drift.json` and the hash cache, then the drift checker on those memories alone.

A memory whose drift changed is judged under the events lock (`watch._events_fd`, the lock
`watch.record_transitions` takes), its drift written to `drift.json` (`writeback.write_back`,
its `pending` column for the store) and the transition appended to `events.jsonl`: what the
workspace's `record_transitions` writes, byte for byte but the time. So a watcher, the other
hook or a second run racing this one still logs each transition once. Any doubt (no snapshot
that holds the ledger as it is, a damaged `drift.json`, a read-only state folder, an error
before anything is written) answers None: the caller takes the workspace's path, which says
what went wrong. LanceDB is never imported here.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # not `typing`'s: its import is a sixth of a replayed hook's cost
if TYPE_CHECKING:
    from .drift import DriftChecker, MemoryDrift
    from .hashing import HashCache
    from .model import Memory
    from .watch import DriftEvent

__all__ = ["mentioned", "recheck_paths", "known_drift"]


SNAP_FORMAT, SNAP_VERSION = "anchorfs-fold", 8
"""`foldsnap.FORMAT` and `VERSION`, spelt out: importing foldsnap (the ledger, the model, blake3)
would cost an unanchored edit's hook more than the scan it saves (a test keeps them in step)."""
FINE_NS, COARSE_NS = 50_000_000, 2_000_000_000
"""`catchup.FINE_NS` and `hashing.DEFAULT_GRANULARITY_NS`: the racy windows `catchup.settled`
applies, spelt out for the same reason (a test keeps them in step)."""


def _settled(sig: tuple[int, ...], seen: object, seen_ns: int) -> bool:
    """`catchup.settled` on the ledger's stat `sig` (dev, ino, size, mtime, ctime) against a
    prefix's recorded stat `seen`, verified at `seen_ns`."""
    if type(seen) is not list or len(seen) != 5 or tuple(seen) != sig:
        return False
    mtime, ctime = sig[3], sig[4]
    gran = FINE_NS if mtime % 1_000_000 or ctime % 1_000_000 else COARSE_NS
    return max(mtime, ctime) + gran < seen_ns


def _index_mentions(state: str, rels: list[str]) -> set[str] | None:
    """The paths of `rels` the fold snapshot's index names (an anchored path, or a folder above
    one) or the ledger's lines after the snapshot name, where the snapshot holds the ledger by
    the stat alone (its prefix settled, or grown since as `fold.tail` vouches: the rules of
    `snapindex.on_paths`); None when it cannot be told so (the ledger is scanned then). At 10,000
    memories the scan of a path named late in the ledger was 7M instructions of a hook; this
    reads a page, the index's table and one bucket per key, whatever the size."""
    import zlib

    import blake3

    from .jsonread import loads
    from .statefs import open_state

    fd = open_state(os.path.join(state, "fold.snap"), os.O_RDONLY)
    try:
        st = os.fstat(fd)
        first = os.pread(fd, 4096, 0)
        cut = first.find(b"\n")
        header = loads(first[:cut]) if cut > 0 else None
        if not isinstance(header, dict) or header.get("format") != SNAP_FORMAT or header.get("v") != SNAP_VERSION \
                or header.get("size") != st.st_size - cut - 1:
            return None
        folder = os.lstat(state)
        if header.get("folder") != [folder.st_dev, folder.st_ino]:
            return None
        prefix = header["prefix"]
        led = os.lstat(os.path.join(state, "ledger.jsonl"))
        sig = (led.st_dev, led.st_ino, led.st_size, led.st_mtime_ns, led.st_ctime_ns)
        start = end = prefix["offset"]
        if not _settled(sig, prefix["stat"], st.st_mtime_ns):
            tfd = open_state(os.path.join(state, "fold.tail"), os.O_RDONLY)
            try:
                vouch = loads(os.read(tfd, 1 << 16))
                tail_ns = os.fstat(tfd).st_mtime_ns
            finally:
                os.close(tfd)
            grown = vouch["prefix"]
            if vouch.get("v") != 1 or vouch.get("snap") != [st.st_dev, st.st_ino, st.st_size, header["body"]] \
                    or grown.get("v") != prefix.get("v") or not _settled(sig, grown["stat"], tail_ns):
                return None
            end = grown["offset"]
            if type(start) is not int or type(end) is not int or not 0 <= start <= end == sig[2]:
                return None
        off, checked, _, digest = header["ix"]
        region = os.pread(fd, checked, cut + 1 + off)
        if len(region) != checked or blake3.blake3(region).hexdigest() != digest:
            return None
        nl = region.index(b"\n")
        n = loads(region[:nl])["b"]
        table = region[nl + 1:]
        if type(n) is not int or n < 1 or len(table) != 28 * n:
            return None
        seen: dict[int, list[object]] = {}
        found: set[str] = set()
        for rel in rels:
            for key in ("p:" + rel, "d:" + rel):
                h = zlib.crc32(key.encode("utf-8", "surrogatepass")) % n  # `foldsnap.ix_bucket`
                if h not in seen:
                    at = int.from_bytes(table[8 * h:8 * h + 8], "little")
                    size = int.from_bytes(table[8 * n + 4 * h:8 * n + 4 * h + 4], "little")
                    blob = os.pread(fd, size, cut + 1 + off + checked + at)
                    if len(blob) != size or blake3.blake3(blob).digest(16) != table[12 * n + 16 * h:12 * n + 16 * (h + 1)]:
                        return None
                    seen[h] = loads(blob)
                if any(item[0] == key for item in seen[h]):  # type: ignore[index, union-attr]
                    found.add(rel)
    finally:
        os.close(fd)
    if end > start:  # the lines since the snapshot, read through one fd whose stat must still be the vouched one
        lfd = open_state(os.path.join(state, "ledger.jsonl"), os.O_RDONLY)
        try:
            data = os.pread(lfd, end - start, start)
            after = os.fstat(lfd)
            if len(data) != end - start or (after.st_dev, after.st_ino, after.st_size, after.st_mtime_ns,
                                            after.st_ctime_ns) != sig:
                return None
        finally:
            os.close(lfd)
        found.update(r for r in rels if data.find(('"' + r + '"').encode("utf-8", "surrogateescape")) >= 0)
    return found


def mentioned(root_real: str, rels: list[str]) -> list[str]:
    """The paths of `rels` the ledger's bytes may name (one read for all): a path left out was
    never anchored, so no memory on it can have changed. Anything unusual (a name JSON would
    escape, an unreadable or odd ledger) is kept, leaving the judgement to the full check.
    The ledger is opened as every state file is (no link followed, regular files only).

    Where the fold snapshot holds the ledger (`_index_mentions`), its index says it instead:
    the paths the active memories rest on, and any path the lines after it name; the ledger
    is scanned otherwise (a path named only by memories no longer active is kept by the scan,
    dropped by the index: either way nothing active rests there)."""
    import mmap
    from .errors import WorkspaceError
    from .locate import STATE_DIR
    from .statefs import open_state

    odd = {r for r in rels if any(c in r for c in '"\\') or any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in r)}
    if not rels or len(odd) == len(set(rels)):
        return list(rels)
    try:
        known = _index_mentions(os.path.join(root_real, STATE_DIR), [r for r in rels if r not in odd])
    except Exception:  # noqa: BLE001 - no snapshot, a link, torn, odd: the scan below judges
        known = None
    if known is not None:
        return [r for r in rels if r in odd or r in known]
    try:
        fd = open_state(os.path.join(root_real, STATE_DIR, "ledger.jsonl"), os.O_RDONLY)
    except (FileNotFoundError, NotADirectoryError):
        return [r for r in rels if r in odd]
    except (OSError, WorkspaceError):  # a link, not a file, an I/O error: the full check says what is wrong
        return list(rels)
    try:
        st = os.fstat(fd)
        if st.st_size == 0:
            return [r for r in rels if r in odd]
        # mapped, not read: at 10,000 memories a read and its copy were a fifth of an edit's hook
        with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as data:
            return [r for r in rels if r in odd or data.find(('"' + r + '"').encode("utf-8", "surrogateescape")) >= 0]
    except (OSError, ValueError):  # unmappable (another kind of file system), shrunk meanwhile: say maybe
        return list(rels)
    finally:
        os.close(fd)


def known_drift(raw: bytes | None) -> dict[str, str] | None:
    """`drift.json`'s last known drift per memory as the workspace reads it; None when it is
    anything but a clean version-1 file (the full path then rewrites it). Read with the standard
    `json` (orjson's import would be a fifth of the hook), held to what orjson, the workspace's
    reader, accepts: UTF-8 text, no `NaN` or `Infinity`, no lone surrogate in a key."""
    from .jsonread import loads  # json's C scanner without the json package (issue 20)

    if raw is None:
        return {}
    try:
        data = loads(raw, constants=False)
        if not isinstance(data, dict) or data.get("v") != 1 or not isinstance(data["drift"], dict):
            return None
        known, pending = data["drift"], data.get("pending") or {}
        for key in (*known, *pending):
            key.encode("utf-8")  # a lone surrogate (an escape json takes, orjson refuses) raises
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):  # UnicodeError is a ValueError
        return None
    drifts = ("fresh", "stale", "unknown")  # `writeback.DRIFTS`: any other value marks the file damaged
    if not isinstance(pending, dict) or not all(type(v) is str and v in drifts for v in (*known.values(), *pending.values())):
        return None
    return known


def _changed(known: dict[str, str], results: "list[MemoryDrift]") -> "list[tuple[str, MemoryDrift]]":
    """(drift before, result) of each memory whose drift is not the one last recorded (a
    memory never checked was fresh: its anchors were hashed when it was recorded)."""
    return [(known.get(md.memory.id, "fresh"), md) for md in results if known.get(md.memory.id, "fresh") != md.drift.value]


def recheck_paths(root_real: str, paths: list[str], *, source: str,
                  exact: str | None = None) -> "list[DriftEvent] | None":
    """Re-check the active memories anchored to `paths` (a folder covers the files under it)
    and log each drift transition, as `watch.record_transitions(ws, paths, source=...)` does,
    from the fold snapshot's records for those paths alone; the transitions, [] when there is
    none, None when this cannot be judged here (the caller opens the workspace then).

    `exact`: say nothing (and write nothing) unless some memory rests on that very path, as
    the post-edit hook does (`anchored_paths` names files, not the folders above them)."""
    try:
        from . import foldsnap
        from .config import load_config
        from .drift import DriftChecker
        from .hashing import HashCache
        from .ledger import Ledger
        from .locate import STATE_DIR
        from .statefs import check_state, read_state

        state = os.path.join(root_real, STATE_DIR)
        check_state(state)  # a link at any state path: the full path refuses it, as always
        if not os.access(state, os.W_OK):
            return None
        targets = foldsnap.on_paths(Ledger(state), paths, remember=True)  # the ledger's check kept for the next hook
        if targets is None:
            return None
        if exact is not None and not any(a.path == exact for m in targets for a in m.anchors):
            return []  # nothing rests on that file itself (an empty list included): nothing to say
        if not targets:
            return []
        known = known_drift(read_state(os.path.join(state, "drift.json")))
        if known is None:
            return None
        # only these memories' files decoded from the manifest (the rest if a check asks for more)
        cache = HashCache(os.path.join(state, "manifest.json"), ttl=float(load_config(root_real)["drift.cache_ttl"]),
                          only={a.path for m in targets for a in m.anchors})
        checker = DriftChecker(root_real, cache)
        if not _changed(known, checker.check_all(targets).memories):
            cache.save()
            return []  # the common case: every memory kept its drift, nothing to write but the cache
    except Exception:  # noqa: BLE001 - a doubt here is the full path, which says what went wrong
        return None
    return _log_transitions(state, targets, checker, cache, source)


def _log_transitions(state: str, targets: "list[Memory]", checker: "DriftChecker", cache: "HashCache",
                     source: str) -> "list[DriftEvent] | None":
    """A drift changed: judge it again under the events lock (the files may have moved on, and
    another process may have logged it meanwhile), write `drift.json` and append the events.
    None (nothing written) when `drift.json` turns out damaged under the lock."""
    from .statefs import read_state
    from .watch import _events_fd, log_transitions
    from .writeback import write_back

    with _events_fd(state) as fd:
        known = known_drift(read_state(os.path.join(state, "drift.json")))
        if known is None:
            return None
        changed = _changed(known, checker.check_all(targets).memories)
        cache.save()
        write_back(state, [md for _, md in changed], store=None, read_only=False)
        return log_transitions(fd, changed, source=source)
