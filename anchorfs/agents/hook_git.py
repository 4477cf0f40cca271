"""The git hooks: post-commit says which memories a commit made stale; the opt-in pre-commit gate
refuses a commit whose staged changes would make one stale; the sync hooks keep the store
following the ledger after a checkout, merge or rewrite.

`install` writes a block between marker lines into the hook, keeping what it already holds;
`uninstall` removes only that block. The block calls the installing interpreter by absolute path
and ends in `|| true`: a memory check must never look like a failed commit. A link at a hook's
name is never followed or written through. `commit_main` runs before click is imported.
"""

from __future__ import annotations

import os
import stat
import sys

from ..core.errors import AnchorfsError, WorkspaceError
from ..core.model import cut as _short, one_line

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from pathlib import Path

    from .watch import DriftEvent
    from ..sdk.workspace import Workspace

__all__ = [
    "BEGIN", "END", "hook_path", "hook_command", "install", "uninstall", "is_installed", "committed_paths", "run",
    "commit_args", "commit_main", "SYNC_HOOKS", "sync_command", "install_sync", "uninstall_sync", "GATE_REFUSED",
    "gate_command", "gate",
]

BEGIN = "# >>> anchorfs >>>"
END = "# <<< anchorfs <<<"
_NOTE = "# Added by `anchorfs hook install`; `anchorfs hook uninstall` removes this block only."
_CREATED = "# (anchorfs created this hook file; uninstalling deletes it once nothing else is in it)"
_SHELLS = ("sh", "bash", "dash", "zsh", "ksh", "ash")


def _repo(root: Path) -> Path:
    from ..core.git import toplevel

    if toplevel(root) is None:
        raise WorkspaceError(f"{root} is not in a git repository; the hook needs one")
    return root


def hook_path(root: Path) -> Path:
    """The post-commit hook git will run for the repo holding `root` (core.hooksPath honoured)."""
    _repo(root)
    return _git_hook(root, "post-commit")


def _git_hook(root: Path, name: str) -> Path:
    """The hook file git runs for `name`: the folders on the way resolved, its own name not (a link is refused)."""
    from pathlib import Path

    from ..core.git import run_git

    out = run_git(root, "rev-parse", "--git-path", f"hooks/{name}").decode().strip()
    if os.path.isabs(out):
        return Path(out)
    where = root / out
    return Path(os.path.realpath(where.parent)) / where.name


def hook_command(root: Path) -> str:
    """The block's command line: this interpreter, by absolute path, on this workspace."""
    import shlex

    exe = shlex.quote(os.path.abspath(sys.executable))
    return f"{exe} -m anchorfs hook run --root {shlex.quote(str(root))} || true"


def _split(text: str) -> tuple[str, list[str], str] | None:
    """(before, block lines, after) of the hook's text, or None when there is no block."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.rstrip("\r\n") == BEGIN]
    if not starts:
        return None
    start = starts[0]
    ends = [i for i in range(start + 1, len(lines)) if lines[i].rstrip("\r\n") == END]
    if not ends:
        raise WorkspaceError(f"the anchorfs block in the hook has no `{END}` line; fix the hook by hand")
    end = ends[0]
    return "".join(lines[:start]), [line.rstrip("\r\n") for line in lines[start + 1:end]], "".join(lines[end + 1:])


def _is_shell(text: str) -> bool:
    first = text.splitlines()[0] if text.strip() else ""
    if not first.startswith("#!"):
        return True  # git runs a hook without a shebang through sh
    words = first[2:].split()
    if not words:
        return True
    prog = os.path.basename(words[0])
    if prog == "env" and len(words) > 1:
        prog = os.path.basename(words[-1] if words[1].startswith("-") else words[1])
    return prog in _SHELLS


_HOOK_MAX = 1 << 20  # the largest hook file read: no shell hook comes near it


def _read(path: Path) -> str:
    """A hook file byte for byte, through the guarded open (a link, FIFO or device refused)."""
    from ..core.guard import GuardError, SwappedError, read_guarded

    # the folders on the way resolved (a hooks folder may be a link), the hook's own name not
    where = os.path.join(os.path.realpath(path.parent), path.name)
    try:
        return read_guarded(where, max_bytes=_HOOK_MAX).decode("utf-8", "surrogateescape")
    except SwappedError:  # what the no-follow open says of a link at the hook's name
        raise GuardError(where, "a symbolic link, not followed") from None


def _write(path: Path, text: str) -> None:
    """Whole or not at all, keeping the file's mode and making it executable by whoever may read it."""
    from ..core.statefs import replace_state

    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(os.lstat(path).st_mode)
    except FileNotFoundError:
        mode = 0o755
    replace_state(path, text.encode("utf-8", "surrogateescape"), mode=mode | stat.S_IXUSR | ((mode & 0o044) >> 2))


def is_installed(root: Path) -> bool:
    """Whether the post-commit hook holds this workspace's line."""
    path = hook_path(root)
    try:
        parts = _split(_read(path))
    except (OSError, AnchorfsError):
        return False
    return parts is not None and any(_for_root(line, root) for line in parts[1])


def _for_root(line: str, root: Path) -> bool:
    import shlex

    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        return False
    return "--root" in words and words.index("--root") + 1 < len(words) and \
        words[words.index("--root") + 1] == str(root)


def install(root: Path, *, gate: bool = False) -> tuple[Path, bool]:
    """Add (or refresh) this workspace's line in the post-commit hook, or with `gate` in the pre-commit
    one; (hook path, changed)."""
    from pathlib import Path

    root = Path(root)
    path = _git_hook(_repo(root), "pre-commit") if gate else hook_path(root)
    command = gate_command(root) if gate else hook_command(root)
    try:
        text = _read(path)
    except FileNotFoundError:
        text = ""
    except AnchorfsError as exc:  # a link, a FIFO, a device, too large: never written through
        raise WorkspaceError(f"refusing the hook {exc}; add this line to it yourself: {command}") from None
    except OSError as exc:
        raise WorkspaceError(f"cannot read the hook {path}: {exc.strerror}") from None
    if text and not _is_shell(text):
        raise WorkspaceError(f"{path} is not a shell script; add this line to it yourself: {command}")
    parts = _split(text)
    if parts is None:
        new = _added(text, command)
    else:
        before, body, after = parts
        new = before + _block(_refreshed(body, root, command)) + after
    if new == text:
        return path, False
    _write(path, new)
    return path, True


def _refreshed(body: list[str], root: Path, command: str) -> list[str]:
    """The block's lines with this workspace's line replaced by `command` where it stood, or added."""
    out: list[str] = []
    placed = False
    for line in body:
        if _for_root(line, root):
            if not placed:
                out.append(command)
                placed = True
        else:
            out.append(line)
    if not placed:
        out.append(command)
    if _NOTE not in out:
        out.insert(0, _NOTE)
    return out


def _block(body: list[str]) -> str:
    return "\n".join([BEGIN, *body, END]) + "\n"


def _added(text: str, command: str) -> str:
    """`text` with a new block holding `command`, right after any shebang (a hook may end in `exit`)."""
    if not text.strip():
        return "#!/bin/sh\n" + _block([_NOTE, _CREATED, command])
    lines = text.splitlines(keepends=True)
    if lines[0].startswith("#!"):
        head = lines[0] if lines[0].endswith("\n") else lines[0] + "\n"
        return head + _block([_NOTE, command]) + "".join(lines[1:])
    return _block([_NOTE, command]) + text


def uninstall(root: Path) -> tuple[Path, bool]:
    """Remove this workspace's line from the post-commit hook; (hook path, changed)."""
    from pathlib import Path

    root = Path(root)
    path = hook_path(root)
    return path, _remove(path, root)


def _remove(path: Path, root: Path) -> bool:
    """Take this workspace's line out of the hook at `path`, and what anchorfs alone wrote; True when changed."""
    try:
        text = _read(path)
    except (FileNotFoundError, AnchorfsError):  # a link or no regular file: nothing of it is ours
        return False
    parts = _split(text)
    if parts is None:
        return False
    before, body, after = parts
    kept = [line for line in body if not _for_root(line, root)]
    if len(kept) == len(body):
        return False
    if any(line.strip() and not line.startswith("#") for line in kept):
        new = before + _block(kept) + after
    else:
        new = before + after
    if not new.strip() or (_CREATED in body and new.strip() == "#!/bin/sh"):
        path.unlink()
    else:
        _write(path, new)
    return True


def committed_paths(root: str | os.PathLike[str], rev: str = "HEAD") -> list[str]:
    """Workspace-relative paths the commit touched (against its first parent; all for a root commit)."""
    from ..core.git import read_git

    out = read_git(
        root, "diff-tree", "--no-commit-id", "--name-only", "-r", "-z", "--no-renames", "--relative",
        "--root", "-m", "--first-parent", rev,
    )
    return sorted({os.fsdecode(p) for p in out.split(b"\0") if p})


def run(ws: "Workspace", rev: str = "HEAD") -> list["DriftEvent"]:
    """The hook's work: re-check the memories on the paths `rev` touched, log transitions."""
    from .watch import record_transitions

    paths = ws.ledger.mentions(committed_paths(ws.root, rev))  # a path the ledger never names holds no memory
    return record_transitions(ws, paths, source="hook") if paths else []


def commit_args(argv: list[str]) -> tuple[str | None, str, bool] | None:
    """(root, rev, as_json) when `argv` is a plain `hook run`; None for anything else, which click parses."""
    values: dict[str, str] = {}
    as_json = False
    words: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        name = arg.split("=", 1)[0]
        if arg == "--json":
            as_json = True
        elif name in ("--root", "--rev"):
            if "=" in arg:
                value = arg.split("=", 1)[1]
            else:
                i += 1
                if i == len(argv):
                    return None
                value = argv[i]
            if not value or value.startswith("-") or name in values:
                return None  # the odd and the repeated: the CLI's parser and its errors
            values[name] = value
        elif arg.startswith("-"):
            return None
        else:
            words.append(arg)
        i += 1
    if words != ["hook", "run"]:
        return None
    return values.get("--root"), values.get("--rev", "HEAD"), as_json


def commit_main(root: str | None, rev: str = "HEAD", as_json: bool = False) -> int:
    """`anchorfs hook run` without click: what the CLI's `hook run` prints, and 0 whatever happened."""
    import warnings

    from ..core.errors import printable, warn_line

    warnings.showwarning = warn_line  # as the CLI says a warning
    out: list[str] = []
    try:
        from ..core.statedir import STATE_DIR, locate
        from ..core.statefs import check_state
        from ..ledger.log import Ledger

        found = locate(root)
        state = os.path.join(found, STATE_DIR)
        check_state(state)  # as opening the workspace would: a link there is refused first
        events: list["DriftEvent"] = []
        short: dict[str, str] = {}
        if Ledger(state).mentions(committed_paths(found, rev)):  # else no memory rests on what it touched
            from ..sdk.workspace import Workspace

            with Workspace(found) as ws:
                events = run(ws, rev)
                short = ws.short_ids(e.id for e in events)
    except (AnchorfsError, OSError) as exc:  # a post-commit check must never look like a failure
        sys.stderr.write(f"anchorfs: hook: {exc}\n")
        return 0
    if as_json:
        import orjson

        sys.stdout.write(orjson.dumps({"events": [e.to_dict() for e in events]}, option=orjson.OPT_INDENT_2).decode()
                         + "\n")
        return 0
    stale = [e for e in events if e.after == "stale"]
    if stale:
        n = len(stale)
        out.append(f"anchorfs: this commit made {n} memor{'y' if n == 1 else 'ies'} stale:")
        out += [f"  {short[e.id]}  {one_line(e.detail)}  · {_short(e.content, 50)}" for e in stale]
        out.append("anchorfs: re-verify each; `anchorfs reanchor ID` if it holds, `anchorfs supersede ID TEXT` if not")
    out += [f"anchorfs: {short[e.id]} is {e.after} again ({one_line(e.detail)})  · {_short(e.content, 50)}"
            for e in events if e.after != "stale"]
    if out:
        sys.stdout.write("".join(printable(line) + "\n" for line in out))
        sys.stdout.flush()
    return 0


# -- the store follows git (post-checkout, post-merge, post-rewrite) ------------------------

SYNC_HOOKS = ("post-checkout", "post-merge", "post-rewrite")


def sync_command(root: Path) -> str:
    """The sync block's command line: the store follows the ledger as it is now."""
    import shlex

    exe = shlex.quote(os.path.abspath(sys.executable))
    return f"{exe} -m anchorfs.agents.hook_git sync --root {shlex.quote(str(root))} >/dev/null 2>&1 || true"


def install_sync(root: Path) -> list[Path]:
    """Add (or refresh) this workspace's line in the sync hooks that are shell scripts; the hooks changed."""
    from pathlib import Path

    root = Path(root)
    _repo(root)
    command = sync_command(root)
    changed: list[Path] = []
    for name in SYNC_HOOKS:
        path = _git_hook(root, name)
        try:
            text = _read(path)
        except FileNotFoundError:
            text = ""
        except AnchorfsError:  # a link or no regular file: left alone, as a hook in another language is
            continue
        if text and not _is_shell(text):
            continue
        parts = _split(text)
        if parts is None:
            new = _added(text, command)
        else:
            before, body, after = parts
            kept = [line for line in body if not _for_root(line, root)]
            new = before + _block([*kept, command]) + after
        if new != text:
            _write(path, new)
            changed.append(path)
    return changed


def uninstall_sync(root: Path) -> list[Path]:
    """Take this workspace's line out of the sync hooks and the gate (as `_remove` does); the hooks changed."""
    from pathlib import Path

    root = Path(root)
    _repo(root)
    return [path for path in (_git_hook(root, n) for n in (*SYNC_HOOKS, "pre-commit")) if _remove(path, root)]


# -- the commit gate (pre-commit, opt-in: `anchorfs hook install --gate`) -------------------

GATE_REFUSED = 3
"""The gate's exit code when it refuses; any other lets the commit through (a broken anchorfs fails open)."""


def gate_command(root: Path) -> str:
    import shlex

    exe = shlex.quote(os.path.abspath(sys.executable))
    where = shlex.quote(str(root))
    return f"{exe} -m anchorfs.agents.hook_git gate --root {where} ; [ $? -ne {GATE_REFUSED} ] || exit 1"


def gate(root: str | os.PathLike[str]) -> list[str]:
    """The memories the staged changes would make stale, one line each (what changed), judged on the
    staged blobs, not the work tree, by the same rules as drift (a text moved into another staged
    file is followed); a memory already stale at HEAD is not this commit's doing."""
    from contextlib import closing
    from pathlib import Path

    from ..anchor.anchors import MAX_FILE_BYTES, judge
    from ..core.git import Change, _Blobs, _parse_raw_z, prefix_of, read_git, toplevel
    from ..core.model import AnchorRef, Drift, Verdict, drift_of
    from ..sdk.workspace import Workspace

    top = toplevel(Path(root)) or Path(root)
    pre = prefix_of(Path(root), top)
    out = read_git(root, "diff", "--cached", "-M", "--raw", "-z", "--no-abbrev", "--relative")
    staged = {c.old: c for c in _parse_raw_z(out) if c.status != "C"}  # a copy leaves its source as it was
    said: list[str] = []

    def verdict(a: AnchorRef, c: Change) -> tuple[Verdict, str] | None:  # None: no staged bytes (deleted, too large)
        data = blobs.get(c.oid) if c.status != "D" else None
        return None if data is None else judge(a.replace(path=c.new), data)[:2]

    with Workspace(root) as ws, closing(_Blobs(top, MAX_FILE_BYTES)) as blobs:  # its cat-file reaped
        for m in ws._anchored_on(ws.ledger.mentions(list(staged))) if staged else ():
            for a in (a for a in m.anchors if a.path in staged):
                own = verdict(a, staged[a.path])
                if own is not None and drift_of([own[0]]) is not Drift.STALE:
                    continue
                if any((v := verdict(a, c)) is not None and drift_of([v[0]]) is Drift.FRESH
                       for c in staged.values() if c is not staged[a.path]):
                    continue  # its text is in another staged file: moved, as drift follows it
                head = blobs.get(f"HEAD:{pre}{a.path}")
                if head is not None and drift_of([judge(a, head)[0]]) is not Drift.STALE:  # not stale before
                    what = one_line(own[1] if own else a.path + " deleted")
                    said.append(f"  {ws.short_ids([m.id])[m.id]}  {what}  · {_short(m.content, 50)}")
                    break
    return said


def sync(root: str | os.PathLike[str]) -> int:
    """Bring the store to the ledger as it is now (git's post-checkout/merge/rewrite hooks)."""
    from ..sdk.workspace import Workspace

    ws = Workspace(root)
    try:
        ws.store  # noqa: B018 — the property follows the ledger (anchorfs.ledger.catchup)
    finally:
        ws.close()
    return 0


def _main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "gate" and argv[1] == "--root":
        try:
            said = gate(argv[2])
        except Exception as exc:  # noqa: BLE001 - a broken gate lets the commit through, saying why
            why = " ".join(str(exc).split()) or type(exc).__name__
            print(f"anchorfs: gate: {why} (the commit goes on)", file=sys.stderr)
            return 0
        if said:
            n = len(said)
            head = f"anchorfs: this commit would make {n} memor{'y' if n == 1 else 'ies'} stale:"
            print("\n".join([head, *said, "anchorfs: re-read each; if it still holds `anchorfs reanchor ID`, if not "
                             "`anchorfs supersede ID TEXT` (or `anchorfs retract ID`); `git commit --no-verify` skips "
                             "this check"]), file=sys.stderr)
        return GATE_REFUSED if said else 0
    if len(argv) == 3 and argv[0] == "sync" and argv[1] == "--root":
        try:
            return sync(argv[2])
        except Exception as exc:  # a git hook must never fail the checkout or merge it follows
            print(f"anchorfs: {exc}", file=sys.stderr)
            return 0
    print("usage: python -m anchorfs.agents.hook_git sync|gate --root ROOT", file=sys.stderr)
    return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(_main(sys.argv[1:]))
