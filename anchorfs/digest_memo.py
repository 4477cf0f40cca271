"""The session-start digest's memo (`.anchorfs/digest.memo`): the last digest, replayed while
nothing it rested on changed, updated in place where only anchored files changed or the ledger
only grew, else the full digest composed again (`anchorfs.digest`) and kept.

Split out of `anchorfs.digest`, which composes a digest; `anchorfs.hook_agent` re-exports these
names, as `anchorfs.hook` does.
"""

from __future__ import annotations

import os
import stat

from .digest import DIGEST_KEY, _digest, _Entry, _Keys, _layout, _line_of, _session_output, _Shown, _SLACK
from .errors import AnchorfsError, WorkspaceError
from .jsonread import loads as _json_loads  # the memo's reader

TYPE_CHECKING = False  # not `typing`'s: its import is a sixth of a replayed hook's cost
if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Sequence
    from typing import Any

    from datetime import datetime

    from .drift import DriftReport, MemoryDrift
    from .model import AnchorCheck, Drift, Memory
    from .workspace import Workspace

__all__ = ["DIGEST_MEMO"]

_MEMO_LIMIT = 4 << 20  # a digest memo is small; a runaway file is not read to the end

# -- the session-start memo: the last digest, replayed while nothing it rested on changed ---------
#
# A session starts far more often than the code under the memories changes, so the digest is
# kept in `.anchorfs/digest.memo` with the `lstat` of everything it rested on, by the drift
# memo's own rules (`anchorfs.memo`: the ledger first, the config, the code that ran, every
# anchored file and folder on its way, each settled past the racy window; nothing a stat cannot
# vouch for), the hash cache's TTL, and the moment the first envelope's words would change
# with time (a memory reaching its kind's expiry, or an expired one's day count). JSON and
# bytes only: nothing in it runs. Anything else, or any doubt, is the full digest.
#
# When only anchored files and folders changed (the common case: the agent edited code), the
# memo is updated instead (`_update`): the memories resting on those paths alone are checked
# again, as `ws.drift()` would check them, and the digest is laid out again from the lines the
# memo keeps (`_Shown`) and theirs. The rest of the memo is what a full pass would find again:
# the same records (the ledger did not move), the same files (their stats did not), the same
# drift in `drift.json` (checked); a change the memo cannot place (a line past the ones it
# keeps, a moved anchor) is the full digest.
#
# When the ledger only grew (memories recorded, superseded, retracted during a session: the
# next session's start), the memo is updated too (`_update_grown`), when the fold snapshot is
# the one its digest was composed on: the memories the lines after that snapshot wrote are
# the only ones that can read otherwise, so they are placed again as re-checked ones are.

DIGEST_MEMO = "digest.memo"
_DIGEST_FORMAT = 4
_KEY_SIZE = 32  # `memo._PACKED` ("=qqqQ"): one stat as the C loop takes it
_SHA_SIZE = 32  # a SHA-256, raw
_AT_SIZE = 4  # an index into the memo's paths ("=I")


def _packed(keys: "Sequence[tuple[int, int, int, int]]") -> bytes:
    """The stats as the memo keeps them (`memo._PACKED` each): the C loop's own packing where
    it is built (a full digest packs thousands), else `struct`'s."""
    from . import memo

    packed = memo._pack(list(keys))
    if isinstance(packed, bytes):
        return packed
    from struct import pack

    return b"".join(pack(memo._PACKED, *k) for k in keys)


def _pack_hashed(hashed: "dict[int, bytes]") -> bytes:
    """The hashed files' part of a memo: their indexes ("=I" each), then their SHA-256s, raw."""
    from struct import pack

    at = sorted(hashed)
    return pack(f"={len(at)}I", *at) + b"".join(hashed[i] for i in at)


def _hashed(d: "dict[str, Any]") -> "dict[int, bytes]":
    """Index into the memo's paths -> the SHA-256 (raw) of that anchored file its digest rested on."""
    from struct import unpack_from

    m = d["hashed"]
    raw: bytes = d["shas"]
    at = unpack_from(f"={m}I", raw)
    start = _AT_SIZE * m
    return {i: raw[start + _SHA_SIZE * j:start + _SHA_SIZE * (j + 1)] for j, i in enumerate(at)}


def _file_hashes(paths: list[str], base: str, shas: "dict[str, str]", into: "dict[int, bytes]",
                 at: "Iterable[int]") -> None:
    """`into[i]` = the raw SHA-256 `shas` holds for `paths[i]` (relative to `base`), for each
    index `i` in `at`; an index whose path `shas` does not name is dropped (a folder, a file gone)."""
    cut, get, fromhex = len(base), shas.get, bytes.fromhex  # bound once: a full digest runs this for thousands
    for i in at:
        p = paths[i]
        sha = get(p[cut:]) if p.startswith(base) else None
        if sha is None:
            into.pop(i, None)
        else:
            into[i] = fromhex(sha)


def _digest_memo_path(root_real: str) -> str:
    from .locate import STATE_DIR

    return os.path.join(root_real, STATE_DIR, DIGEST_MEMO)


def _plain(value: "Any") -> "Any":
    """`value` as JSON gives it back (tuples as lists), to compare with what a memo holds."""
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def _read_memo(root_real: str, *, lapsed: bool = False) -> "dict[str, Any] | None":
    """The digest memo, checked for shape and for this workspace, Python and code, within its
    time (with `lapsed`, past it too, `d["lapsed"]` then True: `_renew` may serve it again); its
    stats as tuples under `keys`. None for anything else. Never raises."""
    import time

    from . import memo
    from .locate import STATE_DIR
    from .statefs import open_state

    try:
        if not stat.S_ISDIR(os.lstat(os.path.join(root_real, STATE_DIR)).st_mode):
            return None
        with os.fdopen(open_state(_digest_memo_path(root_real), os.O_RDONLY), "rb") as fh:
            data = fh.read(_MEMO_LIMIT)
        cut = data.find(b"\n")
        if cut < 0:
            return None
        d = _json_loads(data[:cut])
        if not isinstance(d, dict) or d.get("format") != _DIGEST_FORMAT or d.get("root") != root_real:
            return None
        if d.get("environment") != _plain(memo._environment()):
            return None
        written, until, n, size, absent, out = (d[k] for k in ("written", "until", "n", "size", "absent", "out"))
        now = time.time()
        if not (type(written) in (int, float) and type(until) in (int, float) and written <= now):
            return None
        d["lapsed"] = not now < until
        if d["lapsed"] and not lapsed:
            return None
        if not (type(n) is int and type(size) is int and type(absent) is list and type(out) is str):
            return None
        m = d.get("hashed")
        if not (type(m) is int and 0 <= m < n):
            return None
        body = cut + 1 + size + _KEY_SIZE * n
        if n < 1 or size < 0 or len(data) != body + (_AT_SIZE + _SHA_SIZE) * m:
            return None  # torn, or cut at the read limit
        paths = data[cut + 1:cut + 1 + size].decode("utf-8").split("\0")  # no path holds a NUL
        if len(paths) != n or paths[0] != os.path.join(root_real, STATE_DIR, "ledger.jsonl"):
            return None
        if not all(type(p) is str for p in absent):
            return None
        d["paths"], d["keys"], d["shas"] = paths, data[cut + 1 + size:body], data[body:]
        return d
    except (OSError, WorkspaceError, ValueError, TypeError, KeyError, RecursionError):
        return None


def _changed_grounds(d: "dict[str, Any]", skip: "Collection[int]" = ()) -> "list[int] | None":
    """The indexes of the memo's paths whose stat is not the one it holds ([] when none), but
    those in `skip`; None when one is gone or a path it needs absent is there (a deleted or
    created file: the full digest). Never raises."""
    from . import memo

    paths, packed = d["paths"], d["keys"]
    try:
        if any(os.path.lexists(p) for p in d["absent"]):
            return None
        if skip:
            kept = [i for i in range(len(paths)) if i not in skip]
            rest = _changed_grounds({"paths": [paths[i] for i in kept], "absent": (),
                                     "keys": b"".join(packed[_KEY_SIZE * i:_KEY_SIZE * (i + 1)] for i in kept)})
            return None if rest is None else [kept[i] for i in rest]
        if memo._statmatch is not None:
            got = memo._statmatch.match(paths, packed)
            if got is not None:
                return [i for i, same in enumerate(got) if not same]
        from struct import iter_unpack

        out = []
        for i, (p, k) in enumerate(zip(paths, iter_unpack(memo._PACKED, packed))):
            if memo._key(os.lstat(p)) != k:
                out.append(i)
        return out
    except (OSError, ValueError, TypeError):
        return None


def _replay_digest(root_real: str) -> str | None:
    """The session-start output of the last full digest if nothing it rested on changed, else
    None. Never raises: any doubt is the full digest."""
    d = _read_memo(root_real)
    if d is None or _changed_grounds(d) != []:
        return None
    out: str = d["out"]
    return out


def _envelopes_until(ws: "Workspace", active: "_Keys | Sequence[Memory]", now: float) -> float:
    """The first moment an active memory's envelope would read otherwise with time alone: its
    kind's expiry reached, or, past it, the next whole day of `unverified for N days`."""
    return _until_of(ws.config, active if isinstance(active, _Keys) else _Keys.of(active), now)


def _until_of(config: "Any", keys: _Keys, now: float) -> float:
    """`_envelopes_until` by `config`'s expiry days (no workspace at an update)."""
    day = 86400.0
    until = float("inf")
    try:
        expiry = [config.expiry_days(k) * day for k in keys.kinds]
        if len(expiry) == 1 and len(keys):  # one kind: the oldest says it, unless it expired
            oldest = min(keys.ts)
            if now <= oldest + expiry[0]:
                return oldest + expiry[0]
        for since, k in zip(keys.ts, keys.kind):
            ends = since + expiry[k]
            if now > ends:
                ends = since + (int((now - since) / day) + 1) * day
            if ends < until:
                until = ends
    except IndexError:
        raise WorkspaceError("a memory of no kind the plan names") from None
    return until


def _update_part(shown: "_Shown | None", report: "DriftReport", known: "dict[str, str] | None",
                 paths: list[str], root_real: str) -> "dict[str, Any] | None":
    """What `_update` needs of a full digest, or None when it could not be trusted to update it:
    an anchor followed to another file (where content went depends on files no stat here covers),
    or a `drift.json` that does not read cleanly."""
    if shown is None or known is None or report.paths_now() or root_real not in paths:
        return None
    return {"first": paths.index(root_real) + 1, "cap": shown.cap, "total": shown.total, "known": known,
            "sections": shown.sections, "entries": [list(e) for e in shown.entries], "base": shown.base}


def _write_memo(root_real: str, paths: list[str], packed: bytes, absent: list[str], until: float,
                out: str, update: "dict[str, Any] | None", words: float | None, ttl: float,
                hashed: "dict[int, bytes]") -> None:
    """The memo's file: a line of JSON (what the digest said, how to update it, and how many
    paths follow, in how many bytes), then the paths NUL-joined in UTF-8, their stats packed
    (`memo._PACKED`), and the anchored files' SHA-256s (`hashed`, by index into `paths`: every
    anchored file, what `_renew` reads again): a memo of 10,000 files reads as one split of its
    bytes, neither scanned nor escaped as JSON strings (their 300 KB were a tenth of a replay's
    own work). `words` is when the first envelope's words change with time alone (None: never),
    the one bound of `until` that `_renew` cannot lift; `ttl` the hash cache's
    (`drift.cache_ttl`), which the config file among the grounds and the environment fix while
    the memo holds."""
    import time

    from . import memo
    from .jsonwrite import json_dumps  # json.dumps' text without the json package (issue 20)
    from .statefs import replace_state

    if any("\0" in p for p in paths):
        raise ValueError("a path with a NUL")
    blob = "\0".join(paths).encode("utf-8")  # a name that is no UTF-8: a ValueError, no memo
    if len(packed) != _KEY_SIZE * len(paths):
        raise ValueError("paths and stats differ in length")
    if any(not 0 <= i < len(paths) or len(sha) != _SHA_SIZE for i, sha in hashed.items()):
        raise ValueError("a hashed file out of the memo's paths")
    payload = {"format": _DIGEST_FORMAT, "root": root_real, "environment": _plain(memo._environment()),
               "written": time.time(), "until": until, "n": len(paths), "size": len(blob),
               "absent": absent, "out": out, "update": update,
               "words": None if words is None or words == float("inf") else words, "ttl": ttl,
               "hashed": len(hashed)}
    head = json_dumps(payload).encode()
    if b"\n" in head:
        raise ValueError("a memo head of more than one line")
    replace_state(_digest_memo_path(root_real), b"".join((head, b"\n", blob, packed, _pack_hashed(hashed))))


def _save_digest(ws: "Workspace", report: "DriftReport | None", active: "_Keys | Sequence[Memory]", out: str,
                 started_ns: int, shown: "_Shown | None" = None) -> None:
    """Keep `out` as the digest memo when every ground can be vouched for; else drop the last one."""
    import time

    from . import memo
    from .drift import DriftReport
    from .hashing import DEFAULT_GRANULARITY_NS
    from .hook_recheck import known_drift
    from .statefs import read_state

    path = _digest_memo_path(ws.root_real)
    try:
        report = report if report is not None else DriftReport([])
        shas: dict[str, str] = {}
        grounds = memo._grounds(ws, report, started_ns - DEFAULT_GRANULARITY_NS, started_ns=started_ns, shas=shas)
        if grounds is not None:
            paths, keys, absent, until = grounds
            hashed: dict[int, bytes] = {}
            root = ws.root_real
            _file_hashes(paths, root if root.endswith("/") else root + "/", shas, hashed,
                         range(paths.index(root) + 1, len(paths)))
            now = time.time()
            words = _envelopes_until(ws, active, now)
            until = min(until, words)
            if until > now:
                known = known_drift(read_state(os.path.join(ws.state_dir, "drift.json"))) if shown is not None else None
                update = _update_part(shown, report, known, paths, ws.root_real)
                _write_memo(ws.root_real, paths, _packed(keys), absent, until, out, update, words,
                            float(ws.config["drift.cache_ttl"]), hashed)
                return
    except (OSError, ValueError, AnchorfsError):
        pass
    try:
        os.unlink(path)
    except OSError:
        pass


def _entries(raw: "Any") -> "list[_Entry] | None":
    """A memo's kept lines, checked for shape; None when one is not as `_compose` writes it."""
    if type(raw) is not list:
        return None
    out: list[_Entry] = []
    for e in raw:
        if not (type(e) is list and len(e) == 5 and type(e[0]) is str and type(e[1]) is int and 0 <= e[1] <= 2
                and type(e[2]) in (int, float) and type(e[3]) is int and type(e[4]) is str):
            return None
        out.append((e[0], e[1], float(e[2]), e[3], e[4]))
    return out


def _newest(e: "_Entry") -> tuple[float, int, str]:
    return (-e[2], -e[3], e[0])


def _entry(m: "Memory", drift: "Drift", checks: "tuple[AnchorCheck, ...]", config: "Any", now: "datetime") -> "_Entry":
    """A re-checked memory's digest line as the memo keeps it (its drift as reads serve it)."""
    from .model import Drift

    section = 0 if drift is Drift.STALE else 1 if drift is Drift.UNKNOWN else 2
    return (m.id, section, (m.verified_at or m.recorded_at).timestamp(), len(m.anchors),
            _line_of(m, drift, checks, config.expiry_days(m.kind), now))


def _place(kept: "list[_Entry]", sections: dict[str, int], total: int, total_now: int, mine: "Collection[str]",
           cap: int, made: "list[_Entry]") -> "tuple[str, list[_Entry], dict[str, int], list[_Entry]] | None":
    """(the digest's text, its lines in order as far as known, each flagged memory's section, the
    lines it read) from the memo's kept lines (each section in its order, `total` memories then)
    less those of `mine`, with `made` (the lines of those of `mine` still active) placed among
    them, `total_now` memories now; None when a line it would show is not kept."""
    from bisect import insort

    counts = [0, 0, total - len(sections)]
    for v in sections.values():
        counts[v] += 1
    parts: list[list[_Entry]] = [[], [], []]
    for e in kept:
        parts[e[1]].append(e)
    complete = [len(parts[s]) == counts[s] for s in range(3)]  # every line of the section kept
    horizon = [_newest(parts[s][-1]) if parts[s] else None for s in range(3)]  # else up to here
    parts = [[e for e in part if e[0] not in mine] for part in parts]
    sections = {k: v for k, v in sections.items() if k not in mine}
    for entry in made:
        section = entry[1]
        if section < 2:
            sections[entry[0]] = section
        edge = horizon[section]
        if complete[section] or (edge is not None and _newest(entry) < edge):
            insort(parts[section], entry, key=_newest)
    seq: list[_Entry] = []
    whole = True
    for s in range(3):
        seq.extend(parts[s])
        if not complete[s]:
            whole = False
            break
    counts = [0, 0, total_now - len(sections)]
    for v in sections.values():
        counts[v] += 1
    taken: list[_Entry] = []
    text, ran_out = _layout(cap, (counts[0], counts[1], counts[2]), total_now, seq, taken)
    if ran_out and not whole:
        return None
    return text, seq, sections, taken


def _restat(paths: list[str], changed: list[int], base: str, limit: int,
            keys: bytearray) -> "dict[str, tuple[int, int, int, int]] | None":
    """The memo's changed grounds (`changed`, indexes into `paths`; 0 is the ledger) stat-ed
    again as `memo._grounds` records them, each packed into `keys` in its place; the files'
    new stats by repo-relative path (what the hash cache is asked to vouch for). None when one
    has not settled past `limit`: the memo is then not written again."""
    from struct import pack_into

    from . import memo

    present: dict[str, tuple[int, int, int, int]] = {}
    for i in changed:
        got: list[str] = []
        got_keys: list[tuple[int, int, int, int]] = []
        folder = i > 0 and stat.S_ISDIR(os.lstat(paths[i]).st_mode)
        if not memo._record(paths[i], limit, got, got_keys, folder=folder):
            return None
        pack_into(memo._PACKED, keys, _KEY_SIZE * i, *got_keys[0])
        if i > 0 and not folder:
            present[paths[i][len(base):]] = got_keys[0]
    return present


def _update(root_real: str, d: "dict[str, Any]", changed: list[int], started_ns: int) -> str | None:
    """The session-start output when only anchored files and folders changed since the memo
    (`changed`: their indexes in it), from the memo and a check of the memories resting on them
    alone; writes what the full digest writes (the hash cache, `drift.json`) and the memo again
    when the new stats settled. None, having written nothing, when it cannot be told so: the
    full digest then."""
    up = d.get("update")
    if type(up) is not dict:
        return None
    first, cap, total, then, sections = (up.get(k) for k in ("first", "cap", "total", "known", "sections"))
    kept = _entries(up.get("entries"))
    if kept is None or not (type(first) is int and type(cap) is int and type(total) is int and type(then) is dict
                            and type(sections) is dict and all(v in (0, 1) and type(v) is int for v in sections.values())):
        return None
    paths: list[str] = d["paths"]
    base = root_real if root_real.endswith("/") else root_real + "/"
    if changed and changed[0] == 0:  # the ledger moved (its index is the first)
        return _update_grown(root_real, d, up, kept, changed, started_ns)
    if not changed or min(changed) < first or not all(paths[i].startswith(base) for i in changed):
        return None  # the config, the code or the root folder: the full digest
    import time
    from struct import error as StructError

    from . import foldsnap, memo
    from .config import load_config
    from .drift_check import DriftChecker
    from .hashing import DEFAULT_GRANULARITY_NS, HashCache
    from .hook_recheck import known_drift
    from .ledger import Ledger
    from .locate import STATE_DIR
    from .model import utcnow
    from .statefs import check_state, read_state
    from .writeback import write_back

    rels = [paths[i][len(base):] for i in changed]
    state = os.path.join(root_real, STATE_DIR)
    check_state(state)
    if not os.access(state, os.W_OK):
        return None
    targets = foldsnap.on_paths(Ledger(state), rels, remember=True)  # a grown ledger's check kept for the next hook
    if targets is None:
        return None
    known = known_drift(read_state(os.path.join(state, "drift.json")))
    if known is None:
        return None
    mine = {m.id for m in targets}
    if any(known.get(k, "fresh") != then.get(k, "fresh") for k in known.keys() | then.keys() if k not in mine):
        return None  # drift.json moved on for a memory not re-checked here: the full pass judges it
    config = load_config(root_real)
    if int(config[DIGEST_KEY]) != cap:
        return None
    cache = HashCache(os.path.join(state, "manifest.json"), ttl=float(config["drift.cache_ttl"]),
                      only={a.path for m in targets for a in m.anchors})
    checker = DriftChecker(root_real, cache, whitespace=str(config["drift.whitespace"]))
    results = checker.check_all(targets).memories
    if any(c.path_now is not None for r in results for c in r.checks):
        return None
    now = utcnow()
    placed = _place(kept, sections, total, total, mine, cap, [
        _entry(md.memory, md.drift, md.checks, config, now) for md in (r.with_claims() for r in results)])
    if placed is None:
        return None  # the lines it would show next are not kept: the full digest
    text, seq, sections, taken = placed
    out = _session_output(text)
    cache.save()
    write_back(state, results, store=None, read_only=False)
    # the memo again, when the changed paths' new stats settled (else the last one stays: it
    # still holds for every path but these, which the next start re-checks again)
    try:
        limit = started_ns - DEFAULT_GRANULARITY_NS
        keys = bytearray(d["keys"])
        present = _restat(paths, changed, base, limit, keys)
        if present is None:
            return out
        shas: dict[str, str] = {}
        trusted = cache.trusted_until(present, shas) if present else float("inf")
        known_now = known_drift(read_state(os.path.join(state, "drift.json")))
        if trusted is None or known_now is None:
            return out
        until = min(float(d["until"]), trusted)
        if until > time.time():
            update = dict(up, known=known_now, sections=sections, entries=[list(e) for e in seq[:len(taken) + _SLACK]])
            hashed = _hashed(d)
            _file_hashes(paths, base, shas, hashed, changed)
            _write_memo(root_real, paths, bytes(keys), d["absent"], until, out, update, _words(d),
                        float(config["drift.cache_ttl"]), hashed)
    except (OSError, ValueError, memo._Unvouched, AnchorfsError, StructError):
        pass
    return out


def _update_grown(root_real: str, d: "dict[str, Any]", up: "dict[str, Any]", kept: "list[_Entry]",
                  changed: list[int], started_ns: int) -> str | None:
    """`_update` when the ledger grew since the memo (memories recorded, superseded, retracted
    during a session; anchored files may have changed too). The plan of the fold snapshot the
    memo's digest was composed on, with the lines after it folded in (`snapplan.read_plan`):
    a memory those lines did not write reads as it did for the memo's digest (the same
    snapshot), so it keeps its section and its kept line unless it rests on a changed file. The
    memories the lines wrote (`OverlayPlan.touched`) and those on changed files are checked
    again and placed among the kept lines (`_place`), the active count taken from the plan. A
    line it must show and does not have, another snapshot, or any doubt: None, the full digest."""
    import time
    from struct import error as StructError

    from . import memo
    from .config import load_config
    from .hashing import DEFAULT_GRANULARITY_NS
    from .hook_recheck import known_drift
    from .ledger import Ledger
    from .locate import STATE_DIR
    from .model import Drift, Verdict, utcnow
    from .snapplan import covered_by, read_plan
    from .statefs import check_state, read_state

    first: int = up["first"]  # `_update` checked these
    cap: int = up["cap"]
    total: int = up["total"]
    then: dict[str, str] = up["known"]
    sections: dict[str, int] = up["sections"]
    mark = up.get("base")
    if not (type(mark) is list and len(mark) == 3 and type(mark[0]) is int and type(mark[1]) is int
            and type(mark[2]) is str):
        return None  # composed from the full fold, not a snapshot's plan
    paths: list[str] = d["paths"]
    base = root_real if root_real.endswith("/") else root_real + "/"
    files = changed[1:]
    if (files and files[0] < first) or not all(paths[i].startswith(base) for i in files):
        return None  # the config, the code or the root folder: the full digest
    state = os.path.join(root_real, STATE_DIR)
    check_state(state)
    if not os.access(state, os.W_OK):
        return None
    plan: "Any" = read_plan(Ledger(state))  # a `SnapPlan`, or an `OverlayPlan` (`touched`, `base`)
    if plan is None:
        return None
    try:
        touched_by = getattr(plan, "touched", None)  # an `OverlayPlan`: the lines after its snapshot
        under = plan.base.prefix if touched_by is not None else plan.prefix
        if [under.offset, under.digest.hex()] != mark[1:] or plan.prefix.offset < mark[0]:
            return None  # another snapshot (or a shorter ledger): what changed since is not known here
        if touched_by is None:
            if plan.prefix.offset != mark[0]:
                return None
            touched: dict[str, Memory] = {}
            total_now = total
        else:
            touched = touched_by()
            total_now = plan.active_count()
        known = known_drift(read_state(os.path.join(state, "drift.json")))
        if known is None:
            return None
        config = load_config(root_real)
        if int(config[DIGEST_KEY]) != cap:
            return None
        again = {mid: m for mid, m in sorted(touched.items()) if m.status == "active"}  # judged again
        if files:
            hit = covered_by(paths[i][len(base):] for i in files)
            picks: set[int] = set()
            for k, path in enumerate(plan.paths):
                if hit(path):
                    picks.update(plan.owners(k))
            for pos in sorted(picks):
                m = plan.memory(pos)
                if not any(hit(a.path) for a in m.anchors):
                    return None  # the plan says it rests there and it does not
                again.setdefault(m.id, m)
        mine = touched.keys() | again.keys()
        if any(known.get(k, "fresh") != then.get(k, "fresh") for k in known.keys() | then.keys() if k not in mine):
            return None  # drift.json moved on for a memory not judged here: the full pass judges it
        targets = [m for m in again.values() if m.anchors]
        cache = None
        results: list[MemoryDrift] = []
        if targets:  # the checker's modules only when a memory rests on a file
            from .drift_check import DriftChecker
            from .hashing import HashCache

            cache = HashCache(os.path.join(state, "manifest.json"), ttl=float(config["drift.cache_ttl"]),
                              only={a.path for m in targets for a in m.anchors})
            results = DriftChecker(root_real, cache, whitespace=str(config["drift.whitespace"])).check_all(targets).memories
            if any(c.path_now is not None for r in results for c in r.checks):
                return None
        served: list[tuple[Memory, Drift, tuple[AnchorCheck, ...]]] = [
            (md.memory, md.drift, md.checks) for md in (r.with_claims() for r in results)]
        served += [(m, Drift.STALE if m.stale_claims else Drift.FRESH, ())  # as `DriftReport.with_claims` serves it
                   for m in again.values() if not m.anchors]
        now = utcnow()
        made = [_entry(m, drift, checks, config, now) for m, drift, checks in served]
        placed = _place(kept, sections, total, total_now, mine, cap, made)
        if placed is None:
            return None  # a line it would show is not kept: the full digest
        text, seq, sections, taken = placed
        out = _session_output(text)
        if cache is not None:
            from .writeback import write_back

            cache.save()
            write_back(state, results, store=None, read_only=False)
        # the memo again, when every new stat settled (else the last one stays: the next start updates again)
        try:
            limit = started_ns - DEFAULT_GRANULARITY_NS
            keys = bytearray(d["keys"])
            present = _restat(paths, changed, base, limit, keys)
            if present is None:
                return out
            if not memo._ends_a_line(paths[0]):
                return out
            if any(c.verdict is Verdict.UNREADABLE for _, _, checks in served for c in checks):
                return out  # a read error can clear while the stat stays
            more: list[str] = []
            more_keys: list[tuple[int, int, int, int]] = []
            news = [rel for rel in dict.fromkeys(a.path for m in targets for a in m.anchors)]
            if news:
                have = set(paths)
                for rel in news:
                    full = base + rel
                    if full in have:
                        continue
                    parts = rel.split("/")
                    if rel.startswith("/") or "" in parts or "." in parts or ".." in parts or parts[0] == STATE_DIR:
                        return out  # `unsafe` and its kin: for the full pass to judge each time
                    cut = full.find("/", len(base))
                    while cut >= 0:  # each folder on the way, as `memo._grounds` records them
                        if full[:cut] not in have:
                            if not memo._record(full[:cut], limit, more, more_keys, folder=True):
                                return out  # a folder gone: the full digest records what must stay absent
                            have.add(full[:cut])
                        cut = full.find("/", cut + 1)
                    if not memo._record(full, limit, more, more_keys, folder=False):
                        return out
                    have.add(full)
                    present[rel] = more_keys[-1]
            shas: dict[str, str] = {}
            trusted = cache.trusted_until(present, shas) if present and cache is not None else float("inf")
            if present and cache is None:
                return out
            known_now = known_drift(read_state(os.path.join(state, "drift.json"))) if cache is not None else known
            if trusted is None or known_now is None:
                return out
            now_s = time.time()
            words = min(_words(d), _until_of(config, _Keys.of(list(again.values())), now_s))
            until = min(float(d["until"]), trusted, words)
            if until > now_s:
                update = dict(up, known=known_now, sections=sections, total=total_now,
                              base=[plan.prefix.offset, *mark[1:]],
                              entries=[list(e) for e in seq[:len(taken) + _SLACK]])
                from itertools import chain

                hashed = _hashed(d)
                grown = paths + more
                _file_hashes(grown, base, shas, hashed, chain((i for i in changed if i > 0),  # not the ledger
                                                             range(len(paths), len(grown))))
                _write_memo(root_real, paths + more, bytes(keys) + _packed(more_keys), d["absent"], until, out,
                            update, words, float(config["drift.cache_ttl"]), hashed)
        except (OSError, ValueError, memo._Unvouched, AnchorfsError, StructError):
            pass
        return out
    finally:
        plan.close()


def _words(d: "dict[str, Any]") -> float:
    """The memo's envelope bound (`_write_memo`'s `words`): infinity for none; a memo from before
    the bound was kept, 0 (due: never renewed)."""
    if "words" not in d:
        return 0.0
    words = d["words"]
    if words is None:
        return float("inf")
    return float(words) if type(words) in (int, float) else 0.0


def _renew(root_real: str, d: "dict[str, Any]", hashed: "dict[int, bytes] | None" = None) -> str | None:
    """The lapsed memo's output, when only the hash cache's TTL lapsed it (its envelopes' words
    still stand, and `_changed_grounds` found every stat it rests on but the anchored files' as
    it was): every anchored file it rests on is read again and hashed (the TTL's promise, in one
    C loop: `filehash.reread_digests`, whose checks include the file's stat being the one the
    memo holds), and when each hashes as it did under the digest (the memo keeps the SHA-256s),
    the digest is what the full pass would say again, and the memo is kept until the new TTL.
    Neither the hash cache's manifest nor the workspace is read or written: at 10,000 memories
    their parse and write were a third of the renewal. None when the words are due or a file
    could not be read again or hashes otherwise: the full digest. A session start after a pause
    (five minutes by default) is this, not the full digest."""
    import time
    from struct import iter_unpack

    from . import memo
    from .filehash import reread_digests
    from .locate import STATE_DIR
    from .statefs import check_state

    words, kept = _words(d), d.get("ttl")
    if not time.time() < words or not isinstance(kept, (int, float)) or not kept >= 0:
        return None  # due, or a memo written before it kept the TTL
    ttl = float(kept)
    state = os.path.join(root_real, STATE_DIR)
    check_state(state)
    if not os.access(state, os.W_OK):
        return None
    base = root_real if root_real.endswith("/") else root_real + "/"
    paths: list[str] = d["paths"]
    if root_real not in paths:
        return None
    first = paths.index(root_real) + 1
    hashed = _hashed(d) if hashed is None else hashed  # (`_hashed(d)`, already read)
    at = sorted(hashed)
    if at and (at[0] < first or not all(paths[i].startswith(base) for i in at)):
        return None  # not as `_save_digest` writes it
    for i in range(first, len(paths)):  # a few folders: every anchored file must be read again
        if i not in hashed and not stat.S_ISDIR(os.lstat(paths[i]).st_mode):
            return None  # an anchored file the memo kept no hash for: the full digest
    keys = list(iter_unpack(memo._PACKED, d["keys"]))
    got = reread_digests(root_real, [paths[i][len(base):] for i in at], [keys[i] for i in at]) if at else (
        time.time_ns(), [])
    if got is None:
        return None  # no C loop here, or a batch it refused: the full digest judges each file
    started, digests = got
    if any(digest != hashed[i] for i, digest in zip(at, digests)):
        return None  # read again otherwise (a new stat, a link, gone) or hashed otherwise: the full digest
    out: str = d["out"]
    until = min(started / 1e9 + ttl, words)
    if until > time.time():
        _write_memo(root_real, paths, d["keys"], d["absent"], until, out, d.get("update"), words, ttl, hashed)
    return out


def _session_start_memoized(root_real: str) -> str:
    """The SessionStart answer: the memo's when it holds, updated when only anchored files
    changed (`_update`), else the full digest (then memoized, unless its pass warned: a
    damaged ledger line is said on every run)."""
    import time
    import warnings

    import gc

    started = time.time_ns()  # before anything is read, the memo included
    paused = gc.isenabled()  # nothing here builds a cycle worth a collection (the memo's lists included)
    if paused:
        gc.disable()
    try:
        d = _read_memo(root_real, lapsed=True)
        # lapsed: the anchored files' stats are checked where `_renew` reads them again
        hashed = _hashed(d) if d is not None and d["lapsed"] else None
        changed = None if d is None else _changed_grounds(d, hashed or ())
        if d is not None and changed == []:
            if not d["lapsed"]:
                out: str = d["out"]
                return out
            try:
                renewed = _renew(root_real, d, hashed)
            except Exception:  # noqa: BLE001 - a doubt here is the full digest, which says what went wrong
                renewed = None
            if renewed is not None:
                return renewed
            started = time.time_ns()
        elif d is not None and d["lapsed"]:
            d = None  # lapsed and changed: the full digest
        if d is not None and changed:
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    updated = _update(root_real, d, changed, started)
                if updated is not None and not caught:
                    return updated
            except Exception:  # noqa: BLE001 - a doubt here is the full digest, which says what went wrong
                pass
            started = time.time_ns()
        from .workspace import Workspace

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with Workspace(root_real) as ws:
                text, report, active, shown = _digest(ws)
                out = _session_output(text)
                if not any(issubclass(w.category, UserWarning) for w in caught):
                    _save_digest(ws, report, active, out, started, shown)
    finally:
        if paused:
            gc.enable()
    for w in caught:  # said as if never caught, through the filters in force
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return out
