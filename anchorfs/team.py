"""Team memory through git: the ledger merges, travels with branches, and never forks silently.

A workspace is *shared* (its ledger committed, reviewed and merged like code) or *private*
(the whole `.anchorfs/` ignored, one clone's memories served on every branch). Shared:

- `.gitattributes` at the workspace root names the merge driver for the ledger
  (`.anchorfs/ledger.jsonl merge=anchorfs-ledger`) and the repo's local git config defines it
  (`merge.anchorfs-ledger.driver`). A clone that never ran `anchorfs init` has the attribute
  but not the driver: git then does its plain text merge, which conflicts when both sides
  appended; `merge=union` in that clone's `.git/info/attributes` avoids it, and the fold reads
  what union leaves (both sides' lines, in any order, a line twice) exactly as the driver's.
- `merge_ledger` is the driver: both sides' lines, deduplicated by entry id, in one
  canonical order (earlier-version lines first in their order, then by rank), written over
  OURS atomically.
- A write refuses text that looks like a secret (`detect-secrets`, imported only then), unless
  `allow_secret`, whose reason is kept in the ledger entry.

`sync` is what git's post-checkout, post-merge and post-rewrite hooks call: the store follows
the ledger as it is now (`Workspace.store`); a read would do it anyway, lazily.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from .errors import InputError, WorkspaceError
from .ledger import Entry, rank

if TYPE_CHECKING:
    from .model import Memory
    from .workspace import Workspace

__all__ = [
    "DRIVER", "ATTRIBUTE", "PRIVATE_IGNORE", "merge_ledger", "merged_lines", "install_merge", "write_attributes",
    "set_mode", "init_mode", "mode", "is_shared", "find_secrets", "secret_check", "sync", "elsewhere", "SecretError",
]

DRIVER = "anchorfs-ledger"
LEDGER_PATH = ".anchorfs/ledger.jsonl"
ATTRIBUTE = f".anchorfs/ledger.jsonl merge={DRIVER}"
PRIVATE_IGNORE = "# a private workspace: nothing here is committed\n*\n"
_ATTR_NOTE = "# anchorfs: the memory ledger merges by entry id (`anchorfs merge-ledger`)"


class SecretError(InputError):
    """Text that looks like a secret, refused by a shared workspace."""


# -- the merge driver ----------------------------------------------------------------------

def _lines(path: Path) -> list[bytes]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    out = data.split(b"\n")
    if out and out[-1] == b"":
        out.pop()
    return [line for line in out if line.strip()]


def merged_lines(*sides: list[bytes]) -> list[bytes]:
    """Every side's lines once (by entry id; an unreadable line by its bytes), canonical order:
    earlier-version lines first, in the order the sides give them, then the rest by rank."""
    legacy: list[bytes] = []
    ranked: list[tuple[tuple[object, ...], bytes]] = []
    seen: set[object] = set()
    for lines in sides:
        for raw in lines:
            try:
                entry = Entry.from_dict(orjson.loads(raw))
            except (ValueError, KeyError, TypeError, AttributeError, orjson.JSONDecodeError):
                entry = None
            key: object = entry.tx if entry is not None else raw
            if key in seen:
                continue
            seen.add(key)
            if entry is None or entry.seq is None:
                legacy.append(raw)
            else:
                ranked.append((rank(entry), raw))
    ranked.sort(key=lambda item: item[0])
    return legacy + [raw for _, raw in ranked]


def merge_ledger(base: Path, ours: Path, theirs: Path) -> int:
    """git's merge driver (`%O %A %B`): the union of the three, written over OURS; exit 0."""
    out = merged_lines(_lines(Path(base)), _lines(Path(ours)), _lines(Path(theirs)))
    payload = b"".join(line + b"\n" for line in out)
    target = Path(ours)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.chmod(tmp, os.stat(target).st_mode & 0o777)
        except FileNotFoundError:
            pass
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return 0


# -- shared or private ---------------------------------------------------------------------

def _driver_command() -> str:
    """`anchorfs merge-ledger %O %A %B`, by this interpreter's path when `anchorfs` is not on
    PATH (git runs the driver from any shell)."""
    if shutil.which("anchorfs"):
        return "anchorfs merge-ledger %O %A %B"
    import shlex

    return f"{shlex.quote(os.path.abspath(sys.executable))} -m anchorfs merge-ledger %O %A %B"


def install_merge(root: Path) -> bool:
    """Register the driver in the repo's local git config and name it in `.gitattributes`;
    False outside git (nothing to merge)."""
    from .git import run_git, toplevel

    root = Path(root)
    if toplevel(root) is None:
        return False
    run_git(root, "config", "--local", f"merge.{DRIVER}.name", "anchorfs ledger: union by entry id")
    run_git(root, "config", "--local", f"merge.{DRIVER}.driver", _driver_command())
    write_attributes(root)
    return True


def write_attributes(root: Path) -> bool:
    """Add the ledger's line to `.gitattributes` at the workspace root (kept otherwise)."""
    path = Path(root) / ".gitattributes"
    try:
        text = path.read_text()
    except FileNotFoundError:
        text = ""
    if any(line.split() == ATTRIBUTE.split() for line in text.splitlines()):
        return False
    if text and not text.endswith("\n"):
        text += "\n"
    _replace(path, text + f"{_ATTR_NOTE}\n{ATTRIBUTE}\n")
    return True


def _replace(path: Path, text: str) -> None:
    if path.is_symlink():
        raise WorkspaceError(f"{path} is a link; refusing to write through it")
    tmp = path.with_name(f".{path.name}.anchorfs.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def mode(root: Path) -> str:
    """`private` when `.anchorfs/.gitignore` ignores everything (or the root is not in git),
    `shared` when `.gitattributes` names the driver, else `unset` (an earlier init)."""
    from .workspace import STATE_DIR

    root = Path(root)
    from .statefs import read_state

    try:  # a state file: read without following a link, as every other one is
        ignore = (read_state(root / STATE_DIR / ".gitignore") or b"").decode("utf-8")
    except (OSError, UnicodeDecodeError):
        ignore = ""
    if "*" in (line.strip() for line in ignore.splitlines()):
        return "private"
    try:
        attrs = (root / ".gitattributes").read_text()
    except (OSError, UnicodeDecodeError):
        return "unset"
    return "shared" if any(line.split() == ATTRIBUTE.split() for line in attrs.splitlines()) else "unset"


def init_mode(root: Path, shared: bool | None) -> None:
    """`init`'s choice: `--shared` or `--private` as asked; neither, in git, the merge driver
    for a workspace not made private (an earlier init's ledger is committable as it is)."""
    from .git import toplevel

    if shared is not None:
        set_mode(root, shared)
    elif mode(root) != "private" and toplevel(Path(root)) is not None:
        install_merge(root)


def is_shared(root: Path) -> bool:
    return mode(root) == "shared"


def set_mode(root: Path, shared: bool) -> str:
    """Make the workspace shared (ledger committed, driver installed) or private (the whole
    state folder ignored). Returns a one-line note of what to do in git, if anything."""
    from .git import run_git, toplevel
    from .workspace import _GITIGNORE, STATE_DIR

    root = Path(root)
    ignore = root / STATE_DIR / ".gitignore"
    in_git = toplevel(root) is not None
    if shared:
        if not in_git:
            raise WorkspaceError(f"{root} is not in a git repository; a shared workspace's ledger is committed there")
        _replace(ignore, _GITIGNORE)
        install_merge(root)
        return "commit .anchorfs/ledger.jsonl, .anchorfs/.gitignore and .gitattributes to share the memories"
    _replace(ignore, PRIVATE_IGNORE)
    if in_git:
        tracked = run_git(root, "ls-files", "--", f"{STATE_DIR}/", check=False).strip()
        if tracked:
            return f"git still tracks {STATE_DIR}/ files: `git rm -r --cached {STATE_DIR}` to stop sharing them"
    return ""


# -- secrets -------------------------------------------------------------------------------

def find_secrets(text: str) -> list[str]:
    """The kinds of secret `detect-secrets` sees in `text` (its default plugins and filters),
    sorted; imported here only, since it costs most of a second."""
    from detect_secrets import SecretsCollection
    from detect_secrets.settings import default_settings

    with tempfile.TemporaryDirectory(prefix="anchorfs-secrets-") as d:
        Path(d, "memory.txt").write_text(text, encoding="utf-8", errors="surrogatepass")
        found = SecretsCollection(root=d)
        with default_settings():
            found.scan_file("memory.txt")
        return sorted({s.type for s in found["memory.txt"]})


def secret_check(ws: "Workspace", memories: "list[Memory]", allow: bool) -> str | None:
    """Refuse (SecretError, nothing written) a shared workspace's new text that looks like a
    secret; with `allow`, the reason the ledger keeps. None when nothing was flagged."""
    if type(allow) is not bool:
        raise InputError(f"allow_secret must be true or false, got {type(allow).__name__}")
    if not memories or not is_shared(ws.root):
        return None
    kinds = sorted({k for m in memories for k in find_secrets(m.content)})
    if not kinds:
        return None
    if not allow:
        raise SecretError(f"this looks like a secret ({', '.join(kinds)}) and the workspace is shared (its ledger is "
                          "committed); nothing was written. Leave the secret out, or pass --allow-secret "
                          "(SDK allow_secret=True)")
    return f"recorded with allow_secret despite: {', '.join(kinds)}"


# -- a private ledger across branches ------------------------------------------------------

def elsewhere(root: str, commit: str | None, path: str) -> str | None:
    """Why a `deleted` anchor is not evidence, or None when it is: in a private ledger (not
    tracked by git, so served on every branch) an anchor taken at a commit that is not in
    HEAD's history, whose file is absent, rests on another branch. The detail names the
    branch tips that hold its commit."""
    if not commit:
        return None
    from .errors import HistoryError
    from .git import branches_containing, current_head, is_ancestor, is_tracked, toplevel

    top = Path(root)
    try:
        where = toplevel(top)
        if where is None or is_tracked(top, LEDGER_PATH):
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


# -- git hooks -----------------------------------------------------------------------------

def sync(root: Path) -> int:
    """Bring the store to the ledger as it is now (git's post-checkout/merge/rewrite hooks)."""
    from .workspace import Workspace

    ws = Workspace(Path(root))
    try:
        ws.store  # noqa: B018 — the property follows the ledger (anchorfs.catchup)
    finally:
        ws.close()
    return 0


def _main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "sync" and argv[1] == "--root":
        try:
            return sync(Path(argv[2]))
        except Exception as exc:  # a git hook must never fail the checkout or merge it follows
            print(f"anchorfs: {exc}", file=sys.stderr)
            return 0
    print("usage: python -m anchorfs.team sync --root ROOT", file=sys.stderr)
    return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(_main(sys.argv[1:]))
