"""The git hooks: post-commit says which memories a commit made stale; the sync hooks keep
the store following the ledger after a checkout, merge or rewrite.

`install` writes a block between marker lines into the repo's post-commit hook (honouring
`core.hooksPath`), keeping whatever the hook already holds; `uninstall` removes only that
block. The block calls the interpreter that installed it, by absolute path, so the hook works
from any shell without anchorfs on PATH, and ends in `|| true`: a post-commit hook cannot
stop a commit, and a memory check must never look like a failed one. A hook file is read
through the one guarded open (no link followed, regular files only, 1 MiB at most: a hooks
folder inside a crafted clone can hold a link to /dev/zero) and written whole (an exclusive
temp beside it, then `os.replace`); a link there is never written through.

`commit_main` is what the installed line runs (`python -m anchorfs hook run`, handed over by
`anchorfs.__main__` before click is imported). It re-checks only the memories anchored to the
paths the new commit touched (the working tree is what is checked, as everywhere in
anchorfs) and logs each transition to `.anchorfs/events.jsonl`. LanceDB is never imported.
"""

from __future__ import annotations

import os
import stat
import sys

from ..core.errors import AnchorfsError, WorkspaceError

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from .watch import DriftEvent
    from ..sdk.workspace import Workspace

__all__ = [
    "BEGIN", "END", "hook_path", "hook_command", "install", "uninstall", "is_installed", "committed_paths", "run",
    "commit_args", "commit_main", "SYNC_HOOKS", "sync_command", "install_sync", "uninstall_sync",
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
    from ..core.git import run_git

    _repo(root)
    out = run_git(root, "rev-parse", "--git-path", "hooks/post-commit").decode().strip()
    return _hook_file(root, out)


def _hook_file(root: Path, out: str) -> Path:
    """The hook file at git's `out` (relative to `root`): the folders on the way resolved, its
    own name not, so a link there is met by the guarded read (and refused), never followed to
    a file elsewhere that anchorfs would then write into."""
    from pathlib import Path

    if os.path.isabs(out):
        return Path(out)
    where = root / out
    return Path(os.path.realpath(where.parent)) / where.name


def hook_command(root: Path) -> str:
    """The block's command line: this interpreter, by absolute path, on this workspace.

    `-m anchorfs` (not `-m anchorfs.cli.commands`): `anchorfs.__main__` hands `hook run` to `commit_main`
    before click is imported, a third of a quiet commit's cost. An installed `-m anchorfs.cli.commands`
    line still works and is refreshed in place by the next `install`."""
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
    """A hook file as it is: line ends kept (no newline translation) and any byte round-trips,
    so that what anchorfs did not write is written back byte for byte. Through the one guarded
    open: a link at the hook's name, a FIFO or a device there is refused (`GuardError`), never
    followed or read forever; a missing hook is `FileNotFoundError`."""
    from ..core.guard import GuardError, SwappedError, read_guarded

    # the folders on the way resolved (a hooks folder may be a link), the hook's own name not
    where = os.path.join(os.path.realpath(path.parent), path.name)
    try:
        return read_guarded(where, max_bytes=_HOOK_MAX).decode("utf-8", "surrogateescape")
    except SwappedError:  # what the no-follow open says of a link at the hook's name
        raise GuardError(where, "a symbolic link, not followed") from None


def _write(path: Path, text: str) -> None:
    """Whole or not at all (an exclusive temp beside it, then `os.replace`; a link at the hook's
    name refused), keeping the file's mode and making it executable by whoever may read it."""
    from ..core.statefs import replace_state

    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(os.lstat(path).st_mode)
    except FileNotFoundError:
        mode = 0o755
    replace_state(path, text.encode("utf-8", "surrogateescape"), mode=mode | stat.S_IXUSR | ((mode & 0o044) >> 2))


def is_installed(root: Path) -> bool:
    """Whether the post-commit hook holds this workspace's line (a hook anchorfs could not
    have written, a link or no regular file, does not)."""
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


def install(root: Path) -> tuple[Path, bool]:
    """Add (or refresh) this workspace's line in the post-commit hook; (hook path, changed)."""
    from pathlib import Path

    root = Path(root)
    path = hook_path(root)
    command = hook_command(root)
    try:
        text = _read(path)
    except FileNotFoundError:
        text = ""
    except AnchorfsError as exc:  # a link, a FIFO, a device, too large: never written through
        raise WorkspaceError(f"refusing the hook {exc}; add this line to it yourself: {command}") from None
    except OSError as exc:
        raise WorkspaceError(f"cannot read the hook {path}: {exc.strerror}") from None
    if text and not _is_shell(text):
        raise WorkspaceError(
            f"{path} is not a shell script; add this line to it yourself: {command}"
        )
    parts = _split(text)
    if parts is None:
        body = [_NOTE, command]
        if not text.strip():
            new = "#!/bin/sh\n" + _block([_NOTE, _CREATED, command])
        else:
            # Right after the shebang: a hook that ends in `exit` would never reach the end.
            lines = text.splitlines(keepends=True)
            if lines[0].startswith("#!"):
                head = lines[0] if lines[0].endswith("\n") else lines[0] + "\n"
                new = head + _block(body) + "".join(lines[1:])
            else:
                new = _block(body) + text
    else:
        before, body, after = parts
        new = before + _block(_refreshed(body, root, command)) + after
    if new == text:
        return path, False
    _write(path, new)
    return path, True


def _refreshed(body: list[str], root: Path, command: str) -> list[str]:
    """The block's lines with this workspace's line replaced by `command` where it stood (an
    older form, such as `-m anchorfs.cli.commands hook run`, upgraded in place), or added at the end."""
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


def uninstall(root: Path) -> tuple[Path, bool]:
    """Remove this workspace's line from the post-commit hook (and the block once empty);
    (hook path, changed). The sync hooks go with `uninstall_sync`.

    A hook that held nothing but our block is deleted; anything else in it stays as it was.
    """
    from pathlib import Path

    root = Path(root)
    path = hook_path(root)
    return path, _remove(path, root)


def _remove(path: Path, root: Path) -> bool:
    """Take this workspace's line out of the anchorfs block of the hook at `path`; the block
    goes once no other workspace's line is in it, and the file once it holds nothing but
    what anchorfs wrote (the block, and the `#!/bin/sh` it added to a file it created).
    Everything else stays byte for byte. True when the file changed."""
    try:
        text = _read(path)
    except FileNotFoundError:
        return False
    except AnchorfsError:  # a link or no regular file: anchorfs never wrote there, so nothing of it is ours
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
    """(root, rev, as_json) when `argv` is `hook run` with at most `--root R`, `--rev REV` and
    `--json` around it (as the CLI places them); None for anything else, which click parses."""
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


_UNPRINTABLE = "[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]"  # as `anchorfs.cli.commands._printable`


def _printable(text: str) -> str:
    """Text for a terminal, control characters as escapes (`anchorfs.cli.commands._printable`'s rule)."""
    import re

    return re.sub(_UNPRINTABLE, lambda m: repr(m.group())[1:-1], text)


def _short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def commit_main(root: str | None, rev: str = "HEAD", as_json: bool = False) -> int:
    """`anchorfs hook run` without click (what the installed post-commit line runs): what the
    CLI's `hook run` prints, and 0 whatever the check met (a missing workspace included)."""
    import warnings

    def warn(message: "Any", category: "Any", filename: str, lineno: int, file: "Any" = None,
             line: "Any" = None) -> None:
        sys.stderr.write(_printable(f"anchorfs: warning: {message}") + "\n")

    warnings.showwarning = warn  # as `anchorfs.cli.commands.main` says a warning
    out: list[str] = []
    try:
        from ..core.statedir import STATE_DIR, locate
        from ..core.statefs import check_state
        from ..ledger.log import Ledger

        found = locate(root)
        state = os.path.join(found, STATE_DIR)
        check_state(state)  # as opening the workspace would: a link there is refused first
        events: list["DriftEvent"] = []
        if Ledger(state).mentions(committed_paths(found, rev)):  # else no memory rests on what it touched
            from ..sdk.workspace import Workspace

            with Workspace(found) as ws:
                events = run(ws, rev)
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
        out += [f"  {e.id}  {e.detail}  · {_short(e.content, 50)}" for e in stale]
        out.append("anchorfs: re-verify each; `anchorfs reanchor ID` if it holds, `anchorfs supersede ID TEXT` if not")
    out += [f"anchorfs: {e.id} is {e.after} again ({e.detail})  · {_short(e.content, 50)}"
            for e in events if e.after != "stale"]
    if out:
        sys.stdout.write("".join(_printable(line) + "\n" for line in out))
        sys.stdout.flush()
    return 0


# -- the store follows git (post-checkout, post-merge, post-rewrite) ------------------------

SYNC_HOOKS = ("post-checkout", "post-merge", "post-rewrite")


def sync_command(root: Path) -> str:
    """The sync block's command line: the store follows the ledger as it is now."""
    import shlex

    exe = shlex.quote(os.path.abspath(sys.executable))
    return f"{exe} -m anchorfs.agents.hook_git sync --root {shlex.quote(str(root))} >/dev/null 2>&1 || true"


def _git_hook(root: Path, name: str) -> Path:
    """The hook file git runs for `name` in the repo holding `root` (core.hooksPath honoured)."""
    from ..core.git import run_git

    out = run_git(root, "rev-parse", "--git-path", f"hooks/{name}").decode().strip()
    return _hook_file(root, out)


def install_sync(root: Path) -> list[Path]:
    """Add (or refresh) this workspace's line in git's post-checkout, post-merge and
    post-rewrite hooks (a read would catch up anyway; these make it eager). Returns the hooks
    changed; a hook that is not a shell script is left alone."""
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
            if not text.strip():
                new = "#!/bin/sh\n" + _block([_NOTE, _CREATED, command])
            else:
                lines = text.splitlines(keepends=True)
                head = lines[0] if lines[0].endswith("\n") else lines[0] + "\n"
                new = head + _block([_NOTE, command]) + "".join(lines[1:]) if lines[0].startswith("#!") \
                    else _block([_NOTE, command]) + text
        else:
            before, body, after = parts
            kept = [line for line in body if not _for_root(line, root)]
            new = before + _block([*kept, command]) + after
        if new != text:
            _write(path, new)
            changed.append(path)
    return changed


def uninstall_sync(root: Path) -> list[Path]:
    """Take this workspace's line out of the post-checkout, post-merge and post-rewrite hooks
    (`install_sync`'s); every other line stays byte for byte, and a hook file goes only when
    nothing but what anchorfs wrote is left in it. Returns the hooks changed."""
    from pathlib import Path

    root = Path(root)
    _repo(root)
    return [path for path in (_git_hook(root, name) for name in SYNC_HOOKS) if _remove(path, root)]


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
    if len(argv) == 3 and argv[0] == "sync" and argv[1] == "--root":
        try:
            return sync(argv[2])
        except Exception as exc:  # a git hook must never fail the checkout or merge it follows
            print(f"anchorfs: {exc}", file=sys.stderr)
            return 0
    print("usage: python -m anchorfs.agents.hook_git sync --root ROOT", file=sys.stderr)
    return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(_main(sys.argv[1:]))
