"""The drift memo: the last `anchorfs drift` output, replayed while nothing it rested on changed.

`anchorfs drift` runs in git hooks and cron, so a warm run must cost about a Python start-up,
and a full pass cannot: importing its dependencies and folding the ledger alone take several
times that (`docs/benchmarks.md`). So after a full pass the CLI saves, in `.anchorfs/drift.memo`,
what it printed (both forms) and its exit code, with the `lstat` of everything the pass rested
on: the ledger, the config file, every anchored file and each folder on its way, the code that
ran (anchorfs and every other non-standard module loaded). The next `anchorfs drift` replays
that output only when every one of those stats is unchanged, the environment is the same
(`ANCHORFS_*` variables, user and groups, Python, this copy of anchorfs and its import path)
and the hash cache's TTL has not run out for any of the files; anything else runs the full
pass, the only thing that ever judges an anchor.

Why an unchanged stat proves the pass saw what is there now: a memo is saved only when every
recorded path's mtime and ctime are older than the start of the pass by more than the
timestamp granularity (the racy-git rule of `anchorfs.hashing`): `catchup.FINE_NS` for a stat
whose ctime has digits below the millisecond (a filesystem that keeps fine timestamps, stamped
from the kernel's coarse clock: the window the fold snapshot trusts the ledger by), the hash
cache's two seconds otherwise. No change can set a ctime in the past, so nothing moved while
the pass read; from then on, an equal stat is the trust the hash cache puts in every warm
check. (With two seconds everywhere, a pass run within two seconds of a `record` never left
a memo: on a quiet machine every `drift` after a one-shot record was a full pass.)

What a stat cannot vouch for is never memoized: a symlink on an anchor's way (its target can
change behind an unchanged link), anything that is neither a regular file nor a folder, an
anchor path that is not plainly inside the root, an anchor that could not be read (a read
error can clear while the stat stays). Nor is a pass
that must say something on every run: one that warned (a damaged ledger line), or that found
the ledger ending in a torn line (not reported while another process holds the writer lock).

`replay` imports nothing heavy (`anchorfs.__main__` calls it before importing the CLI). The
file is `marshal` data only this module writes: marshal never runs code, and a damaged,
foreign or other-version file fails to load or to validate, which means a full pass. It is
opened without following a link (nor is a linked state folder entered): a link there is left
to the full pass, which refuses it. A memo committed to a clone cannot be replayed either: the
first path it rests on must be this ledger, whose ctime a checkout sets and no one can forge.
"""

from __future__ import annotations

import marshal
import os
import stat
import sys
import time

from .errors import AnchorfsError
from .locate import STATE_DIR, locate

try:  # the same C stat loop the hash cache uses
    from . import _statmatch
except ImportError:  # pragma: no cover - exercised where no C compiler built it
    _statmatch = None  # type: ignore[assignment]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .drift import DriftReport
    from .hashing import HashCache
    from .workspace import Workspace

__all__ = ["MEMO_FILE", "Witness", "fine_limit", "replay", "save"]

MEMO_FILE = "drift.memo"
_FORMAT = 2
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_Key = tuple[int, int, int, int]  # (size, mtime_ns, ctime_ns, inode): the hash cache's entry key


def _memo_path(root_real: str) -> str:
    return os.path.join(root_real, STATE_DIR, MEMO_FILE)


def _key(st: os.stat_result) -> _Key:
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def _environment() -> tuple[Any, ...]:
    """Everything outside the files that a pass's output could depend on: the `ANCHORFS_*`
    variables, who runs it, which Python, and which code. The last is this copy of anchorfs
    and the import path after the script's own folder: the files the writing pass loaded are
    recorded, but another install or a path that shadows a module would load others."""
    env = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("ANCHORFS_")))
    ids = (os.getuid(), os.geteuid(), os.getgid(), os.getegid(), tuple(sorted(os.getgroups())))
    code = (os.path.realpath(__file__), tuple(sys.path[1:]))
    return (sys.hexversion, sys.implementation.cache_tag, marshal.version, ids, env, code)


_PACKED = "=qqqQ"  # one key as `_statmatch.pack` lays it out: size, mtime_ns, ctime_ns (int64), inode (uint64)


def _pack(keys: list[_Key]) -> bytes | list[_Key]:
    """The keys as the C loop takes them (a memo of 10,000 files loads in a fraction of the
    time as one bytes object than as 10,000 tuples), or as they are where that cannot be had."""
    packed = _statmatch.pack(keys) if _statmatch is not None else None
    return keys if packed is None else packed


def _unchanged(paths: list[str], keys: bytes | list[_Key]) -> bool:
    if isinstance(keys, bytes):
        import struct

        if len(keys) != struct.calcsize(_PACKED) * len(paths):
            return False
        if _statmatch is not None:
            got = _statmatch.match(paths, keys)  # None: a path is gone, or a name C cannot pass
            if got is not None:
                return 0 not in got
        keys = list(struct.iter_unpack(_PACKED, keys))
    elif _statmatch is not None:
        packed = _statmatch.pack(keys)
        if packed is not None:
            got = _statmatch.match(paths, packed)
            if got is not None:
                return 0 not in got
    try:
        return all(_key(os.lstat(p)) == k for p, k in zip(paths, keys, strict=True))
    except (OSError, ValueError):
        return False


def replay(root: str | os.PathLike[str] | None, as_json: bool) -> tuple[str, int] | None:
    """(output, exit code) of the last full pass if nothing it rested on has changed, else None.

    Never raises: whatever goes wrong here (no workspace, no memo, a damaged one) is for the
    full pass to report or to mend.
    """
    try:
        root_real = locate(root)
        state = os.path.join(root_real, STATE_DIR)
        if not stat.S_ISDIR(os.lstat(state).st_mode):
            return None  # a link (or no folder): the full pass refuses it in one line
        fd = os.open(_memo_path(root_real), os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            memo = marshal.loads(fh.read())
        fmt, environment, memo_root, written, until, paths, keys, absent, outputs, code = memo
        if fmt != _FORMAT or memo_root != root_real or environment != _environment():
            return None
        if not written <= time.time() < until:  # the TTL, and a clock that went backwards
            return None
        if type(paths) is not str or type(keys) not in (bytes, list) or type(absent) is not list:
            return None
        paths = paths.split("\0")  # one string: no path holds a NUL, and it loads at once
        if not paths or paths[0] != os.path.join(state, "ledger.jsonl"):
            return None  # every memo `save` writes rests on the ledger first: anything else is not ours
        if not _unchanged(paths, keys) or any(os.path.lexists(p) for p in absent):
            return None
        out = outputs["json" if as_json else "text"]
        if type(out) is not str or type(code) is not int:
            return None
        return out, code
    except (OSError, ValueError, TypeError, EOFError, KeyError, AnchorfsError):
        return None


class _Unvouched(Exception):
    """A path whose stat cannot prove what the pass saw: no memo this time."""


def fine_limit(started_ns: int) -> int:
    """The racy limit for a stat with fine timestamps, for a pass that began at `started_ns`:
    `catchup.FINE_NS` before it (never a wider window than the coarse one, which tests shrink)."""
    from .catchup import FINE_NS
    from .hashing import DEFAULT_GRANULARITY_NS

    return started_ns - min(FINE_NS, DEFAULT_GRANULARITY_NS)  # read at call time: tests shorten it


def _settled(mtime_ns: int, ctime_ns: int, limit_ns: int, fine_limit_ns: int | None) -> bool:
    """Whether a stat's last change is older than the racy limit that applies to it: `fine_limit_ns`
    when its ctime (which no one can set) has digits below the millisecond, else `limit_ns`."""
    bound = limit_ns
    if fine_limit_ns is not None and ctime_ns % 1_000_000:
        bound = max(limit_ns, fine_limit_ns)
    return mtime_ns < bound and ctime_ns < bound


def _record(path: str, limit_ns: int, paths: list[str], keys: list[_Key], *, folder: bool,
            fine_limit_ns: int | None = None) -> bool:
    """Add `path`'s stat; False when it does not exist. Raises `_Unvouched` for anything else
    a stat cannot vouch for."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except (OSError, ValueError):
        raise _Unvouched(path) from None
    kind = stat.S_IFMT(st.st_mode)
    if kind != (stat.S_IFDIR if folder else stat.S_IFREG) or not _settled(st.st_mtime_ns, st.st_ctime_ns, limit_ns,
                                                                          fine_limit_ns):
        raise _Unvouched(path)
    paths.append(path)
    keys.append(_key(st))
    return True


def _code_files() -> list[str]:
    """The files of the code that ran: anchorfs and every non-standard module loaded (tree-sitter
    grammars judge symbols, orjson writes the JSON); the standard library goes with the
    Python version."""
    stdlib = os.path.dirname(os.__file__) + os.sep
    site = ("site-packages", "dist-packages")
    files = set()
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and (not file.startswith(stdlib) or any(s in file for s in site)):
            files.add(os.path.abspath(file))
    return sorted(files)


class Witness:
    """Watches a full pass for what a memo of it needs: when it started (before the workspace
    reads its config), and whether anchorfs warned (a damaged ledger line must be said on
    every run, or raise under `-W error`, so such a pass is not memoized).

    Warnings are caught whatever the filters, then issued again through the filters in force
    on the way out, as if never caught.
    """

    def __enter__(self) -> "Witness":
        import warnings

        self.started_ns = time.time_ns()
        self._catching = warnings.catch_warnings(record=True)
        self.warned = self._catching.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, *exc: object) -> None:
        import warnings

        self._catching.__exit__(None, None, None)
        for w in self.warned or ():
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)

    def save(self, ws: "Workspace", report: "DriftReport", outputs: dict[str, str], code: int) -> bool:
        if any(issubclass(w.category, UserWarning) for w in self.warned or ()):
            _forget(ws.root_real)
            return False
        return save(ws, report, outputs, code, self.started_ns)


def save(ws: "Workspace", report: "DriftReport", outputs: dict[str, str], code: int, started_ns: int) -> bool:
    """Memoize a full pass's `outputs` ({"json": ..., "text": ...}) and exit `code`.

    `started_ns` is `time.time_ns()` taken before the pass read anything (the workspace's
    config included). Returns whether a memo was written. It is not when something the pass
    rested on cannot be vouched for by its stat; the last memo is then removed (it could not
    hold either). Never fails the command.
    """

    from .hashing import DEFAULT_GRANULARITY_NS
    from .workspace import _replace_atomic, upgrade_gitignore

    limit = started_ns - DEFAULT_GRANULARITY_NS  # read at call time: tests shorten it
    try:
        grounds = _grounds(ws, report, limit, fine_limit(started_ns), started_ns)
        if grounds is not None:
            paths, keys, absent, until = grounds
            memo = (_FORMAT, _environment(), ws.root_real, time.time(), until, "\0".join(paths), _pack(keys), absent,
                    {"json": outputs["json"], "text": outputs["text"]}, code)
            upgrade_gitignore(ws.state_dir)  # a workspace made before the memo must not offer it for commit
            _replace_atomic(_memo_path(ws.root_real), marshal.dumps(memo), "memo-write")
            return True
    except OSError:
        pass
    _forget(ws.root_real)
    return False


def _grounds(ws: "Workspace", report: "DriftReport", limit_ns: int, fine_limit_ns: int | None = None,
             started_ns: int | None = None, shas: dict[str, str] | None = None
             ) -> tuple[list[str], list[_Key], list[str], float] | None:
    """(paths, their stats, paths that must stay absent, valid until) for what the pass rested
    on, or None when a stat cannot vouch for one of them. A stat must be older than `limit_ns`,
    or than `fine_limit_ns` (`fine_limit`) where its timestamps are fine; without it, `limit_ns`
    judges every stat. `started_ns`: when the pass began; the anchored files' stats its hash
    cache compared since then are recorded as compared (`_record_files`). `shas` receives each
    anchored file's hash, by repo-relative path, as the hash cache holds it for that stat."""
    from itertools import chain

    from .config import CONFIG_FILE
    from .model import Verdict

    root = ws.root_real
    paths: list[str] = []
    keys: list[_Key] = []
    absent: dict[str, None] = {}  # ordered, and a set: thousands of deleted anchors stay linear
    try:
        ledger = os.path.join(root, STATE_DIR, os.path.basename(ws.ledger.file))  # first: `replay` insists on it
        if not _record(ledger, limit_ns, paths, keys, folder=False, fine_limit_ns=fine_limit_ns):
            return None  # no ledger yet: nothing worth replaying
        if keys[-1][0] and not _ends_a_line(ledger):
            return None  # a torn tail is not reported while a writer holds the lock: let a pass look again
        config = os.path.join(root, CONFIG_FILE)
        if not _record(config, limit_ns, paths, keys, folder=False, fine_limit_ns=fine_limit_ns):
            absent[config] = None
        for file in _code_files():
            if not _record(file, limit_ns, paths, keys, folder=False, fine_limit_ns=fine_limit_ns):
                absent[file] = None  # loaded from no file (a zip, a folder since removed): it must stay so
        _record(root, limit_ns, paths, keys, folder=True, fine_limit_ns=fine_limit_ns)
        if any(check.verdict is Verdict.UNREADABLE for result in report.flagged for check in result.checks):
            return None  # EIO, EMFILE, a stale NFS handle: a read error can pass while the stat stays
        walked: set[str] = set()  # folders recorded, and paths found absent
        present: dict[str, _Key] = {}
        files: list[str] = []  # the anchored files, recorded after their folders
        base = root if root.endswith("/") else root + "/"
        start = len(base)
        # a rel's folder part ("src/deep/", "" at the top) -> whether every folder on its way was
        # recorded present: the walk below runs once per folder, not once per file
        heads: dict[str, bool] = {}
        plain = ("", ".", "..")
        # the distinct files (100,000 memories rest on a few thousand), read off the report's plan
        for rel in dict.fromkeys(chain(report.anchored_paths(), report.paths_now())):  # and where moved ones are now
            head = rel[:rel.rfind("/") + 1]
            whole = heads.get(head)
            if whole is None:
                parts = rel.split("/")
                if rel.startswith("/") or "" in parts or "." in parts or ".." in parts or parts[0] == STATE_DIR:
                    return None  # `unsafe` and its kin: for the full pass to judge each time
                full = base + rel
                # each folder on the way, from the top, by its place in `full` (its parts are plain:
                # the folder is the prefix up to a "/", as joining part by part would build it)
                whole = True
                cut = full.find("/", start)
                while cut >= 0:
                    path = full[:cut]
                    if path in walked:
                        if path in absent:
                            whole = False  # gone: what it is was recorded
                            break
                    elif _record(path, limit_ns, paths, keys, folder=True, fine_limit_ns=fine_limit_ns):
                        walked.add(path)
                    else:
                        walked.add(path)
                        absent[path] = None  # its parent is recorded: a file created there changes it
                        whole = False
                        break
                    cut = full.find("/", cut + 1)
                heads[head] = whole
            elif rel[len(head):] in plain or (not head and rel == STATE_DIR):
                return None  # its folder part was judged plain; its last part is judged here
            if not whole:
                continue
            full = base + rel
            if full in walked:
                continue  # a file where a folder was: what it is was recorded
            walked.add(full)
            files.append(rel)
        _record_files(ws.cache, base, files, limit_ns, fine_limit_ns, paths, keys, present, absent, started_ns)
    except _Unvouched:
        return None
    until = ws.cache.trusted_until(present, shas)
    if until is None:
        return None  # a file the cache holds no hash for, as it stands now: no TTL to bound the memo by
    return paths, keys, list(absent), until


def _record_files(cache: "HashCache", base: str, rels: list[str], limit_ns: int, fine_limit_ns: int | None,
                  paths: list[str], keys: list[_Key], present: dict[str, _Key], absent: dict[str, None],
                  started_ns: int | None = None) -> None:
    """`_record` for the anchored files (`base + rel`, their folders recorded). A file the
    pass's hash cache found unchanged since `started_ns` (`HashCache.seen_since`) is recorded
    by the stat it was judged by, with no second `lstat`: a full digest records thousands.
    The others are `lstat`-ed in one C loop and compared with the stat the hash cache holds
    for them, a match recorded from that key; anything else (no entry, a new stat, a file
    gone, no C loop) by `_record`, one by one."""
    fulls = [base + rel for rel in rels]
    matched: dict[int, _Key] = {}
    if started_ns is not None:
        seen = cache.seen_since(started_ns)
        if seen:
            from operator import itemgetter  # not at the top: a replay never gets here

            first, second, third = itemgetter(0), itemgetter(1), itemgetter(2)
            was: list[Any] = list(map(seen.get, rels))  # (path, key) or None, by rel
            if rels and None not in was and list(map(first, was)) == fulls:
                # every file judged by this pass (path, key): in C-level maps, each stat settled
                # past `limit_ns` (no racy limit is earlier: `_settled`), as a full digest's thousands are
                found: list[_Key] = list(map(second, was))
                if max(map(second, found)) < limit_ns and max(map(third, found)) < limit_ns:  # mtime, ctime
                    paths.extend(fulls)
                    keys.extend(found)
                    present.update(zip(rels, found))
                    return
            for i, one in enumerate(was):
                if one is not None and one[0] == fulls[i]:
                    matched[i] = one[1]  # type: ignore[assignment]  # (size, mtime_ns, ctime_ns, inode)
    known = cache.keys_of(rels) if len(matched) < len(rels) else []
    if _statmatch is not None and known:
        held = [(i, key) for i, key in enumerate(known) if key is not None and i not in matched]
        packed = _statmatch.pack([key for _, key in held]) if held else None
        got = _statmatch.match([fulls[i] for i, _ in held], packed) if packed is not None else None
        if got is not None:  # None: a file gone, a name C cannot pass
            matched.update((i, key) for (i, key), ok in zip(held, got) if ok)
    for i, (rel, full) in enumerate(zip(rels, fulls)):
        key = matched.get(i)
        if key is not None:  # the stat the hash was taken under: a regular file's
            if not _settled(key[1], key[2], limit_ns, fine_limit_ns):
                raise _Unvouched(full)
            paths.append(full)
            keys.append(key)
            present[rel] = key
        elif _record(full, limit_ns, paths, keys, folder=False, fine_limit_ns=fine_limit_ns):
            present[rel] = keys[-1]
        else:
            absent[full] = None


def _ends_a_line(path: str) -> bool:
    from .statefs import open_state

    fd = open_state(path, os.O_RDONLY)
    try:
        return os.pread(fd, 1, os.fstat(fd).st_size - 1) == b"\n"
    finally:
        os.close(fd)


def _forget(root_real: str) -> None:
    """Drop a memo that no longer matches (it would fail validation anyway: this saves the read)."""
    try:
        os.unlink(_memo_path(root_real))
    except OSError:
        pass
