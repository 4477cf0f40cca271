"""Thin git plumbing: the few facts anchorfs needs from a repo, through the `git` binary
(it reads every repo format exactly as the user's git does, and costs nothing to import).
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Sequence
from contextlib import suppress

from .errors import HistoryError
from .statedir import STATE_DIR

from typing import TYPE_CHECKING, Any
if TYPE_CHECKING:
    import subprocess
    from pathlib import Path  # annotations only: costly to import in a commit hook

__all__ = [
    "run_git", "read_git", "read_git_each", "git_env", "popen_git", "toplevel", "prefix_of", "head_commit", "current_head",
    "head_and_dirty", "is_ancestor", "Renames", "renames_since", "untracked_files", "Change",
    "tree_changes", "worktree_changes", "branches_containing", "is_tracked", "_Blobs",
]


def git_env() -> dict[str, str]:
    """A stable, non-interactive environment: no optional locks, C locale, no pager or prompt."""
    env = dict(os.environ)
    env.setdefault("GIT_OPTIONAL_LOCKS", "0")
    env["LC_ALL"] = "C"
    env["GIT_TERMINAL_PROMPT"] = "0"
    env.pop("GIT_PAGER", None)
    return env


def popen_git(cwd: Path, *args: str, stdin: int | None = -1) -> subprocess.Popen[bytes]:
    """A streaming git process (binary pipes; `stdin` -1 is `subprocess.PIPE`)."""
    import subprocess  # here, not at import: a post-edit hook runs no git, a post-commit one `read_git`

    try:
        return subprocess.Popen(
            ["git", *args], cwd=cwd, env=git_env(), stdin=stdin,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
    except FileNotFoundError as exc:  # no git on this machine
        raise HistoryError("git is not installed") from exc


def _command(args: tuple[str, ...]) -> str:
    """The subcommand, past any leading `-c key=value` options, for error messages."""
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] == "-c" else 1
    return args[i] if i < len(args) else (args[0] if args else "")


def run_git(cwd: str | os.PathLike[str], *args: str, check: bool = True, input: bytes | None = None) -> bytes:
    """Run git with a stable, non-interactive environment; stdout as bytes."""
    import subprocess

    try:
        proc = subprocess.run(["git", *args], cwd=cwd, env=git_env(), input=input, capture_output=True, check=False)
    except FileNotFoundError as exc:  # no git on this machine
        raise HistoryError("git is not installed") from exc
    if check and proc.returncode != 0:
        msg = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise HistoryError(f"git {_command(args)} failed: {msg[-1] if msg else proc.returncode}")
    return proc.stdout


def read_git(cwd: str | os.PathLike[str], *args: str) -> bytes:
    """git's stdout for a command whose failure reads as no output (stderr discarded, no stdin),
    spawned without importing `subprocess` (costly for a hook); `run_git(..., check=False)`
    where `posix_spawnp` is missing."""
    return read_git_each(cwd, args)[0]


def read_git_each(cwd: str | os.PathLike[str], *commands: Sequence[str]) -> list[bytes]:
    """`read_git` of each command, all started at once: each waits only for its own output to
    be read, so they run side by side (the move search's rename diff and untracked listing)."""
    spawn = getattr(os, "posix_spawnp", None)
    if spawn is None:
        return [run_git(cwd, *args, check=False) for args in commands]
    started: list[tuple[int, int]] = []
    try:
        for args in commands:
            out_r, out_w = os.pipe()  # both close-on-exec: the child keeps only its dup as stdout
            try:
                # `-C`: as if started there (posix_spawnp has no cwd before Python 3.13)
                pid = spawn("git", ["git", "-C", os.fspath(cwd), *args], git_env(), file_actions=[
                    (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_DUP2, out_w, 1),
                    (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
                ])
            except FileNotFoundError as exc:  # no git on this machine
                os.close(out_r)
                raise HistoryError("git is not installed") from exc
            finally:
                os.close(out_w)
            started.append((pid, out_r))
        outs = []
        for _, out_r in started:
            chunks = []
            while chunk := os.read(out_r, 1 << 16):
                chunks.append(chunk)
            outs.append(b"".join(chunks))
        return outs
    finally:
        for pid, out_r in started:
            os.close(out_r)
            os.waitpid(pid, 0)


_MOVES_TOP = re.compile(rb"worktree|bare\s*=\s*true|include", re.I)
"""Config that can put the work tree elsewhere: `toplevel` asks git then."""


def toplevel(root: Path) -> Path | None:
    """The enclosing repo's top level, or None when `root` is not in a git work tree. A `.git`
    folder in `root` itself, ours, its config and the environment moving nothing, answers
    without a process: every walk and hook asks."""
    from pathlib import Path

    config = os.path.join(root, ".git", "config")
    try:
        mine = os.stat(root).st_uid == os.stat(config).st_uid == os.geteuid()  # else git may refuse it
    except OSError:
        mine = False
    if mine and not {"GIT_DIR", "GIT_WORK_TREE"} & os.environ.keys() and not _MOVES_TOP.search(
            _read_small(config, 1 << 20) or b"worktree"):
        return Path(os.path.realpath(root))
    probe = root
    while not (probe / ".git").exists():
        if probe.parent == probe:
            return None
        probe = probe.parent
    out = read_git(root, "rev-parse", "--show-toplevel").strip()
    return Path(os.fsdecode(out)) if out else None


def head_commit(root: Path) -> str | None:
    """HEAD's full hash; None outside a repo or before the first commit."""
    out = run_git(root, "rev-parse", "--verify", "-q", "HEAD", check=False).strip()
    return out.decode() if out else None


_RACY_NS = 2_000_000_000
"""A ref file changed this recently may change again within its timestamp's granularity."""
_git_dirs: dict[str, tuple[str, str] | None] = {}
_heads: dict[str, tuple[tuple[object, ...], str | None]] = {}


def _sig(path: str) -> tuple[int, int, int, int] | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _read_small(path: str, size: int = 4096) -> bytes | None:
    """A small git file's start, never through a link nor blocking on a FIFO; None if odd."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, size)
    except OSError:
        return None
    finally:
        os.close(fd)


def _head_key(top: str) -> tuple[object, ...] | None:
    """What HEAD's hash rests on, read without a process: HEAD's text and the stat of the
    branch's loose ref and of packed-refs. None when it cannot be trusted: an unusual layout
    (reftable, symbolic refs, refs outside refs/heads/, GIT_DIR set) or a racy file."""
    if top not in _git_dirs:
        try:
            out = run_git(top, "rev-parse", "--absolute-git-dir", "--git-common-dir", check=False)
            lines = os.fsdecode(out).splitlines()
            _git_dirs[top] = (lines[0], os.path.join(top, lines[1])) if len(lines) == 2 else None
        except HistoryError:
            _git_dirs[top] = None
    dirs = _git_dirs[top]
    if dirs is None or "GIT_DIR" in os.environ or "GIT_COMMON_DIR" in os.environ:
        return None
    gitdir, common = dirs
    if os.path.lexists(os.path.join(common, "reftable")):
        return None
    text = _read_small(os.path.join(gitdir, "HEAD"))
    if text is None:
        return None
    paths = [os.path.join(gitdir, "HEAD"), os.path.join(common, "packed-refs")]
    if text.startswith(b"ref: "):
        ref = text[5:].strip().decode("utf-8", "replace")
        if not ref.startswith("refs/heads/") or ".." in ref.split("/"):
            return None
        loose = os.path.join(common, *ref.split("/"))
        if os.path.lexists(loose):  # else packed only, or unborn
            body = _read_small(loose)
            if body is None or body.startswith(b"ref: "):
                return None  # a link, a FIFO, or a branch that is itself a symbolic ref
        paths.append(loose)
    sigs = [_sig(p) for p in paths]
    now = time.time_ns()
    if any(s is not None and now - max(s[2], s[3]) < _RACY_NS for s in sigs):
        return None
    return (text, *sigs)


def current_head(top: Path) -> str | None:
    """HEAD's full hash like `head_commit`, but a process only when HEAD may have moved since
    the last call for this repo (see `_head_key`): a query pays no git process per call."""
    key_top = os.fspath(top)
    key = _head_key(key_top)
    if key is not None:
        known = _heads.get(key_top)
        if known is not None and known[0] == key:
            return known[1]
    head = head_commit(top)
    if key is not None and _head_key(key_top) == key:  # nothing moved while git answered
        _heads[key_top] = (key, head)
    return head


def prefix_of(root: Path, top: Path) -> str:
    """`root`'s place inside the repo at `top` as a git path prefix (`""` or `"sub/dir/"`)."""
    rel = os.path.relpath(os.path.realpath(root), os.path.realpath(top))
    return "" if rel == os.curdir else rel.replace(os.sep, "/") + "/"


def head_and_dirty(root: Path, paths: Sequence[str], *, prefix: str | None = None) -> tuple[str | None, set[str]]:
    """HEAD's hash (None before the first commit) and which of `paths` (relative to `root`)
    differ from it or are untracked, from one `git status`. `prefix` is `prefix_of(root, top)`,
    looked up here (one more process) when the caller has not kept it."""
    if not paths:
        return head_commit(root), set()
    out = run_git(
        root, "status", "--porcelain=v2", "--branch", "-z", "--untracked-files=all", "--no-renames",
        "--", *(":(literal)" + p for p in paths), check=False,
    )
    if prefix is None:
        top = toplevel(root)
        prefix = prefix_of(root, top) if top is not None else ""
    head: str | None = None
    dirty: set[str] = set()
    for entry in out.split(b"\0"):
        if entry.startswith(b"# branch.oid "):
            oid = entry[len(b"# branch.oid "):].strip().decode("ascii", "replace")
            head = oid if oid and oid != "(initial)" else None
            continue
        kind = entry[:1]
        fields = {b"1": 8, b"2": 9, b"u": 10, b"?": 1}.get(kind)
        if fields is None or entry[1:2] != b" ":
            continue  # another header, an ignored entry, or a rename's source (none: --no-renames)
        parts = entry.split(b" ", fields)
        if len(parts) <= fields:
            continue
        name = os.fsdecode(parts[fields])
        if prefix and name.startswith(prefix):
            name = name[len(prefix):]
        dirty.add(name)
    return head, dirty


def is_ancestor(cwd: Path, ancestor: str, descendant: str) -> bool:
    """True when `ancestor` is reachable from `descendant` (a commit is its own ancestor)."""
    import subprocess

    try:
        proc = subprocess.run(
            ["git", "merge-base", "--is-ancestor", ancestor, descendant],
            cwd=cwd, env=git_env(), capture_output=True, check=False,
        )
    except FileNotFoundError as exc:  # no git on this machine
        raise HistoryError("git is not installed") from exc
    return proc.returncode == 0


class Renames:
    """What git says became of files since some commits, as paths relative to the workspace
    root: `renamed` old -> new (rename detection, working tree and index included), `added`
    the files that appeared (added, copied, renamed to, or untracked and not ignored),
    `modified` the files that were there and changed (where a moved function may have gone)."""

    __slots__ = ("renamed", "added", "modified", "untracked")

    def __init__(self) -> None:
        self.renamed: dict[str, str] = {}
        self.added: list[str] = []
        self.modified: list[str] = []
        self.untracked: list[str] | None = None  # listed too (`renames_since(untracked=True)`)


def renames_since(root: Path, commits: Sequence[str], *, untracked: bool = True) -> Renames:
    """Renames, new and changed files between each of `commits` and the working tree, under
    `root`: one `git diff -M` per distinct commit and, with `untracked`, one `git ls-files
    --others`, run side by side. A commit git does not know adds nothing; every answer is a
    candidate the caller verifies."""
    found = Renames()
    added: dict[str, None] = {}
    modified: dict[str, None] = {}
    # a plain `mv` shows as a deletion here and as untracked below
    diffs = [("diff", "--name-status", "-z", "-M", "--relative", "--no-ext-diff", commit, "--")
             for commit in dict.fromkeys(commits)]
    outs = read_git_each(root, *diffs, *([_UNTRACKED] if untracked else []))
    for out in outs[:len(diffs)]:
        fields = out.split(b"\0")
        i = 0
        while i < len(fields) - 1:
            status = fields[i][:1]
            if status in (b"R", b"C") and i + 2 < len(fields):
                old, new = os.fsdecode(fields[i + 1]), os.fsdecode(fields[i + 2])
                if status == b"R":
                    found.renamed.setdefault(old, new)
                added[new] = None
                i += 3
                continue
            if status == b"A":
                added[os.fsdecode(fields[i + 1])] = None
            elif status in (b"M", b"T"):
                modified[os.fsdecode(fields[i + 1])] = None
            i += 2
    if untracked:
        found.untracked = [os.fsdecode(name) for name in outs[-1].split(b"\0") if name]
        added.update(dict.fromkeys(found.untracked))
    found.added, found.modified = list(added), list(modified)
    return found


_UNTRACKED = ("ls-files", "--others", "--exclude-standard", "-z")


def untracked_files(root: Path) -> list[str]:
    """Files under `root` that git does not track and does not ignore, relative to `root`."""
    out = read_git(root, *_UNTRACKED)
    return [os.fsdecode(name) for name in out.split(b"\0") if name]


class Change:
    """One entry of a rename-detecting raw diff, as repo paths (relative to the top level):
    `status` (`A`, `C`, `D`, `M`, `R`, `T`, ...), `old` and `new` path (the same but for a
    rename or copy), `oid` the new blob (all zeros when git did not hash it: the working tree)."""

    __slots__ = ("status", "old", "new", "oid")

    def __init__(self, status: str, old: str, new: str, oid: str) -> None:
        self.status, self.old, self.new, self.oid = status, old, new, oid

    def __repr__(self) -> str:
        return f"Change({self.status!r}, {self.old!r}, {self.new!r})"


def _parse_raw_z(out: bytes) -> list[Change]:
    """`--raw -z` output: `:<modes> <oids> <status>\\0<path>[\\0<path>]\\0` per entry."""
    fields = out.split(b"\0")
    found: list[Change] = []
    i = 0
    while i < len(fields) - 1:
        meta = fields[i]
        if not meta.startswith(b":"):
            i += 1
            continue
        parts = meta[1:].split()
        if len(parts) < 5:
            i += 1
            continue
        status = parts[4][:1].decode("ascii", "replace")
        oid = parts[3].decode("ascii", "replace")
        if status in ("R", "C") and i + 2 < len(fields):
            found.append(Change(status, os.fsdecode(fields[i + 1]), os.fsdecode(fields[i + 2]), oid))
            i += 3
        else:
            path = os.fsdecode(fields[i + 1])
            found.append(Change(status, path, path, oid))
            i += 2
    return found


def tree_changes(top: Path, old: str, new: str) -> list[Change]:
    """What one step did to the whole tree, renames detected (`git diff-tree -M`): where a
    file went when history loses it."""
    out = run_git(top, "-c", "core.quotepath=false", "diff-tree", "-r", "-M", "--raw", "-z",
                  "--no-abbrev", "--no-ext-diff", old, new, check=False)
    return _parse_raw_z(out)


def worktree_changes(top: Path, commit: str) -> list[Change]:
    """The working tree and index against `commit`, renames detected, plus untracked files
    (status `?`): a history walk's last step. Paths relative to `top`."""
    out = run_git(top, "-c", "core.quotepath=false", "diff", "-M", "--raw", "-z", "--no-abbrev",
                  "--no-relative", "--no-ext-diff", commit, "--", check=False)
    found = _parse_raw_z(out)
    others = run_git(top, "ls-files", "--others", "--exclude-standard", "-z", "--full-name", check=False)
    for name in others.split(b"\0"):
        if name:
            path = os.fsdecode(name)
            found.append(Change("?", path, path, "0" * 40))
    return found


def branches_containing(cwd: Path, commit: str) -> list[str]:
    """The local branches whose tip has `commit` in its history (none when it is unknown)."""
    out = run_git(cwd, "for-each-ref", "--contains", commit, "--format=%(refname:short)", "refs/heads", check=False)
    return [line for line in out.decode("utf-8", "replace").splitlines() if line.strip()]


def is_tracked(cwd: Path, path: str) -> bool:
    """Whether git tracks `path` (relative to `cwd`) in the index."""
    return bool(run_git(cwd, "ls-files", "--", path, check=False).strip())


def elsewhere(root: str, commit: str | None, path: str) -> str | None:
    """Why a `deleted` anchor is not evidence, or None when it is: in a private (untracked)
    ledger, an anchor taken at a commit not in HEAD's history rests on another branch."""
    if not commit:
        return None
    from pathlib import Path

    top = Path(root)
    try:
        where = toplevel(top)
        if where is None or is_tracked(top, f"{STATE_DIR}/ledger.jsonl"):
            return None
        head = current_head(Path(os.path.realpath(where)))
        if head is None or is_ancestor(top, commit, head):
            return None
        tips = branches_containing(top, commit)
    except HistoryError:
        return None
    on = f"branch {', '.join(tips)}" if tips else "no local branch"
    return (f"{path} is absent here, and its anchor was taken at {commit[:12]} (on {on}), which is not in "
            f"HEAD's history: the private ledger is served on every branch")


_OID_RE = re.compile(rb"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")


def _header(line: bytes) -> tuple[str, str, int] | None:
    """`<oid> <type> <size>` from cat-file; None for `<name> missing`, `<name> ambiguous` and
    anything else (a name with spaces in it echoes back as more than three words)."""
    parts = line.split()
    if len(parts) != 3 or not _OID_RE.match(parts[0]) or not parts[2].isdigit():
        return None
    return parts[0].decode(), parts[1].decode("ascii", "replace"), int(parts[2])


class _Blobs:
    """Objects on demand for a walk, through one long-lived `git cat-file --batch-command` (before
    git 2.36: `--batch-check` and `--batch`, side by side). A blob's size is known before a byte
    of it is read, so one over the size bound is never read."""

    def __init__(self, top: Path, limit: int) -> None:
        self._top = top
        self.limit = limit  # the size bound: a larger blob is never read
        self._procs: dict[str, Any] = {}  # by question: "info", "contents" (one process for both)
        self._split = False  # an older git: one process per question
        self._info: dict[str, tuple[str, str, int] | None] = {}
        self._data: dict[str, bytes] = {}
        self.read_bytes = 0
        """Blob bytes read so far (what the size bound keeps small)."""

    def info(self, spec: str) -> tuple[str, str, int] | None:
        """(oid, type, size) of any object name git understands; None when missing or bad."""
        if spec in self._info:
            return self._info[spec]
        if "\n" in spec or "\0" in spec or not spec:
            return None
        found = _header(self._ask("info", spec))
        if len(self._info) >= 4096:
            del self._info[next(iter(self._info))]
        self._info[spec] = found
        return found

    def size(self, spec: str) -> int | None:
        """A blob's size in bytes; None when missing or not a blob."""
        found = self.info(spec)
        return found[2] if found is not None and found[1] == "blob" else None

    def oid(self, spec: str) -> str | None:
        """A blob's oid (e.g. of `rev:path`); None when missing or not a blob."""
        found = self.info(spec)
        return found[0] if found is not None and found[1] == "blob" else None

    def too_large(self, spec: str) -> bool:
        size = self.size(spec)
        return size is not None and size > self.limit

    def why_missing(self, spec: str | None, path: str) -> str:
        """The detail of an unreadable step whose blob `get` did not give."""
        size = self.size(spec) if spec else None
        if size is not None and size > self.limit:
            return f"{path} is too large to judge ({size} bytes, over {self.limit})"
        return f"{path}: the blob is missing"

    def get(self, spec: str) -> bytes | None:
        """The blob named by an oid or `rev:path`; None when missing, not a blob, or over the size bound."""
        found = self.info(spec)
        if found is None or found[1] != "blob" or found[2] > self.limit:
            return None
        oid, _, size = found
        if oid in self._data:
            return self._data[oid]
        got = _header(self._ask("contents", oid))
        if got is None or got[2] != size:
            raise HistoryError(f"git cat-file gave {oid} as {got!r}, not a {size}-byte blob")
        body = self._procs["contents"].stdout.read(size + 1)[:size]
        if len(body) != size:
            raise HistoryError("git cat-file stopped unexpectedly")
        self.read_bytes += size
        if len(self._data) >= 16:
            del self._data[next(iter(self._data))]
        self._data[oid] = body
        return body

    def _ask(self, verb: str, spec: str) -> bytes:
        """The header line answering `verb spec`, the process started on first use."""
        proc: Any = self._procs.get(verb)
        if proc is None:
            if self._split:
                proc = self._procs[verb] = popen_git(self._top, "cat-file", f"--batch{'-check' * (verb == 'info')}")
            else:
                proc = self._procs["info"] = self._procs["contents"] = popen_git(self._top, "cat-file", "--batch-command")
        try:
            proc.stdin.write((spec if self._split else f"{verb} {spec}").encode("utf-8", "surrogateescape") + b"\n")
            proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # gone: said below, once its output is read to its end
        header = proc.stdout.readline()
        if not header and not self._split and proc.wait() == 129:  # an older git: no --batch-command
            self.close()
            self._split = True
            return self._ask(verb, spec)
        if not header:
            raise HistoryError("git cat-file stopped unexpectedly")
        return header

    def close(self) -> None:
        """Told at once, then reaped by a blocking wait (a timed one polls with sleeps: 1-2 ms)."""
        procs = list({id(p): p for p in self._procs.values()}.values())
        self._procs = {}
        for proc in procs:  # its output too: a walk stopped mid-blob must not leave it blocked writing the rest
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:
                    with suppress(OSError):  # gone already (the walk's HistoryError says so)
                        pipe.close()
        for proc in procs:
            proc.wait()  # cat-file ends at the end of its input
