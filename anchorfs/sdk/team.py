"""Team memory through git: the ledger merges, travels with branches, and never forks silently.

A workspace is *shared* (its ledger committed and merged like code) or *private* (`.anchorfs/`
ignored). Shared, the committed `.gitattributes` says `merge=union` for the ledger (git's own
union, which the fold reads as it reads the driver's output); a clone where anchorfs ran
overrides that locally with `merge_ledger`, so nothing committed ever names a command. A shared
workspace refuses text that looks like a secret (`detect-secrets`) unless `allow_secret`.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import orjson

from ..core.errors import AnchorfsError, InputError, WorkspaceError
from ..ledger.log import Entry, rank, redact_lines

if TYPE_CHECKING:
    from ..core.model import Memory
    from .workspace import Workspace

__all__ = [
    "DRIVER", "ATTRIBUTE", "LEGACY_ATTRIBUTE", "PRIVATE_IGNORE", "merge_ledger", "merged_lines", "is_ledger_path",
    "install_merge", "write_attributes", "write_local_attributes", "set_mode", "init_mode", "check_mode", "mode", "is_shared", "find_secrets", "secret_check", "SecretError",
]

DRIVER = "anchorfs-ledger"
LEDGER_PATH = ".anchorfs/ledger.jsonl"
ATTRIBUTE = f"{LEDGER_PATH} merge=union"
"""The committed line: git's built-in union wherever anchorfs is not installed."""
LEGACY_ATTRIBUTE = f"{LEDGER_PATH} merge={DRIVER}"
"""What earlier versions committed: still read as shared, and rewritten to ATTRIBUTE."""
PRIVATE_IGNORE = "# a private workspace: nothing here is committed\n*\n"
_ATTR_NOTE = ("# anchorfs: the memory ledger merges as a union of lines (git's own driver); "
              "a clone with anchorfs merges it by entry id")
_LEGACY_NOTE = "# anchorfs: the memory ledger merges by entry id (`anchorfs merge-ledger`)"
_LOCAL_NOTE = ("# anchorfs, this clone only: the ledger merges by entry id "
               f"(merge.{DRIVER}.driver in .git/config); the committed .gitattributes says union")


class SecretError(InputError):
    """Text that looks like a secret, refused by a shared workspace."""


# -- the merge driver ----------------------------------------------------------------------

def _lines(path: Path) -> list[bytes]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    return [line for line in data.split(b"\n") if line.strip()]


def merged_lines(*sides: list[bytes]) -> list[bytes]:
    """Every side's lines once (by entry id, else bytes): earlier-version lines first, then by rank."""
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


def is_ledger_path(path: str) -> bool:
    """Whether git's `%P` (repo-relative, `/`-separated) names an anchorfs ledger."""
    return tuple(path.replace("\\", "/").split("/")[-2:]) == (".anchorfs", "ledger.jsonl")


def merge_ledger(base: Path, ours: Path, theirs: Path, path: str | None = None) -> int:
    """git's merge driver (`%O %A %B %P`): the union of the three over OURS; another `path` gets a text merge."""
    if path is not None and not is_ledger_path(path):
        return _text_merge(Path(base), Path(ours), Path(theirs), path)
    out = redact_lines(merged_lines(_lines(Path(base)), _lines(Path(ours)), _lines(Path(theirs))))
    _write_over(Path(ours), b"".join(line + b"\n" for line in out))
    return 0


def _text_merge(base: Path, ours: Path, theirs: Path, path: str) -> int:
    """`git merge-file` into OURS: 0 when clean, 1 when it left conflict markers (or failed)."""
    import subprocess

    proc = subprocess.run(["git", "merge-file", "-L", f"ours:{path}", "-L", f"base:{path}", "-L",
                           f"theirs:{path}", "--", str(ours), str(base), str(theirs)], check=False)
    return 0 if proc.returncode == 0 else 1


def _write_over(target: Path, payload: bytes) -> None:
    """Replace `target` atomically (temp file beside it, fsync, mode kept, os.replace)."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        with contextlib.suppress(FileNotFoundError):
            os.chmod(tmp, os.stat(target).st_mode & 0o777)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


# -- shared or private ---------------------------------------------------------------------

def _driver_command() -> str:
    """`anchorfs merge-ledger %O %A %B %P`, by this interpreter's path when `anchorfs` is not on PATH."""
    if shutil.which("anchorfs"):
        return "anchorfs merge-ledger %O %A %B %P"
    import shlex

    return f"{shlex.quote(os.path.abspath(sys.executable))} -m anchorfs merge-ledger %O %A %B %P"


def install_merge(root: Path) -> bool:
    """Commit-side `.gitattributes` (union) and this clone's override (the driver); False outside git."""
    from ..core.git import run_git, toplevel

    root = Path(root)
    top = toplevel(root)
    if top is None:
        return False
    _check_merge(root)  # both attributes files readable and writable before git's config is touched
    run_git(root, "config", "--local", f"merge.{DRIVER}.name", "anchorfs ledger: union by entry id")
    run_git(root, "config", "--local", f"merge.{DRIVER}.driver", _driver_command())
    write_attributes(root)
    write_local_attributes(root, top)
    return True


_ATTRIBUTES_MAX = 1 << 20  # the largest attributes file read


def _check_merge(root: Path) -> None:
    """Raise what `install_merge` would refuse with once it had begun writing."""
    for path in (Path(root) / ".gitattributes", _local_attributes_path(root)):
        _check_replaceable(path)
        _read_text(path)


def check_mode(root: Path, shared: bool | None) -> None:
    """Raise what `init_mode(root, shared)` would refuse with, writing nothing."""
    from ..core.git import toplevel

    root = Path(root)
    if shared is False:
        return
    in_git = toplevel(root) is not None
    if shared and not in_git:
        raise WorkspaceError(_NOT_IN_GIT.format(root=root))
    if in_git and (shared or mode(root) != "private"):
        _check_merge(root)


def _read_text(path: Path) -> str:
    """A text file as it is (line ends kept, any bytes round-trip); "" when absent."""
    from ..core.guard import read_guarded

    try:  # a crafted clone's link to /dev/zero or a fifo is refused, not read
        return read_guarded(path, max_bytes=_ATTRIBUTES_MAX).decode("utf-8", "surrogateescape")
    except FileNotFoundError:
        return ""


def _is(line: str, attribute: str) -> bool:
    return line.split() == attribute.split()


def write_attributes(root: Path) -> bool:
    """Put the ledger's union line in `.gitattributes` (an earlier version's rewritten); True when changed."""
    path = Path(root) / ".gitattributes"
    text = _read_text(path)
    lines = text.splitlines(keepends=True)
    have = any(_is(line, ATTRIBUTE) for line in lines)
    out: list[str] = []
    for line in lines:
        body = line.rstrip("\r\n")
        eol = line[len(body):]
        if _is(body, LEGACY_ATTRIBUTE):
            if not have:
                out.append(ATTRIBUTE + eol)
                have = True
        elif body == _LEGACY_NOTE:
            out.append(_ATTR_NOTE + eol)
        else:
            out.append(line)
    new = "".join(out)
    if not have:
        if new and not new.endswith("\n"):
            new += "\n"
        new += f"{_ATTR_NOTE}\n{ATTRIBUTE}\n"
    if new == text:
        return False
    _replace(path, new)
    return True


def _pattern(rel: str) -> str:
    """A gitattributes pattern matching exactly the repo-relative path `rel`."""
    escaped = "".join("\\" + c if c in "*?[]\\!#" else c for c in rel)
    pattern = "/" + escaped
    if any(c in pattern for c in ' \t"'):
        pattern = '"' + pattern.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return pattern


def write_local_attributes(root: Path, top: Path | None = None) -> bool:
    """Name this clone's driver for the ledger in `$GIT_DIR/info/attributes`; True when it changed."""
    from ..core.git import toplevel

    root = Path(root)
    top = top if top is not None else toplevel(root)
    if top is None:
        return False
    path = _local_attributes_path(root)
    rel = os.path.relpath(os.path.realpath(root), os.path.realpath(top)).replace(os.sep, "/")
    line = f"{_pattern(LEDGER_PATH if rel == os.curdir else f'{rel}/{LEDGER_PATH}')} merge={DRIVER}"
    text = _read_text(path)
    if any(x.rstrip("\r\n") == line for x in text.splitlines()):
        return False
    if text and not text.endswith("\n"):
        text += "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    _replace(path, text + f"{_LOCAL_NOTE}\n{line}\n")
    return True


def _local_attributes_path(root: Path) -> Path:
    """This clone's `$GIT_DIR/info/attributes` (a worktree's or a submodule's own included)."""
    from ..core.git import run_git

    out = os.fsdecode(run_git(root, "rev-parse", "--git-path", "info/attributes").strip())
    return Path(out) if os.path.isabs(out) else Path(root) / out


def _check_replaceable(path: Path) -> None:
    if path.is_symlink():
        raise WorkspaceError(f"{path} is a link; refusing to write through it")


def _replace(path: Path, text: str) -> None:
    """`path` replaced whole (`statefs.replace_state`: an exclusive temp under a random name)."""
    from ..core.statefs import replace_state

    _check_replaceable(path)
    replace_state(path, text.encode("utf-8", "surrogateescape"))


def mode(root: Path) -> str:
    """`private` (`.anchorfs/.gitignore` ignores everything), `shared` (the ledger's attribute), else `unset`."""
    from ..core.statedir import STATE_DIR
    from ..core.statefs import read_state

    root = Path(root)
    try:  # a state file: read without following a link
        ignore = (read_state(root / STATE_DIR / ".gitignore") or b"").decode("utf-8")
    except (OSError, UnicodeDecodeError):
        ignore = ""
    if "*" in (line.strip() for line in ignore.splitlines()):
        return "private"
    try:
        attrs = _read_text(root / ".gitattributes")
    except (OSError, AnchorfsError):  # a link, not a file, too large: nothing it says counts
        return "unset"
    return "shared" if any(_is(x, ATTRIBUTE) or _is(x, LEGACY_ATTRIBUTE) for x in attrs.splitlines()) else "unset"


def init_mode(root: Path, shared: bool | None) -> None:
    """`init`'s choice: `--shared` or `--private`; neither, in git, the driver unless private."""
    from ..core.git import toplevel

    if shared is not None:
        set_mode(root, shared)
    elif mode(root) != "private" and toplevel(Path(root)) is not None:
        install_merge(root)


def is_shared(root: Path) -> bool:
    return mode(root) == "shared"


_NOT_IN_GIT = "{root} is not in a git repository; a shared workspace's ledger is committed there"


def set_mode(root: Path, shared: bool) -> str:
    """Make the workspace shared or private; a one-line note of what to do in git, if anything."""
    from ..core.git import run_git, toplevel
    from ..core.statedir import _GITIGNORE, STATE_DIR

    root = Path(root)
    ignore = root / STATE_DIR / ".gitignore"
    in_git = toplevel(root) is not None
    if shared:
        if not in_git:
            raise WorkspaceError(_NOT_IN_GIT.format(root=root))
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

_SCAN_NAME = "memory.txt"
"""The name a memory is scanned under: plain text, so every filename filter lets it through."""
_DEFERRED = {"requests": frozenset({"Response"}), "multiprocessing": frozenset()}
"""Modules detect-secrets imports but a scan never uses (most of its import time): each gets a
stand-in while detect-secrets loads (`_Deferred`)."""


class _Deferred(ModuleType):
    """A module's stand-in during one import, importing the real one at its first use (annotations excepted)."""

    def __init__(self, name: str, placeholders: frozenset[str]) -> None:
        super().__init__(name)
        self.__dict__["_placeholders"] = placeholders
        self.__dict__["_real"] = None
        self.__dict__["_window"] = True

    def __getattr__(self, attr: str) -> Any:
        real = self.__dict__["_real"]
        if real is None:
            if attr.startswith("__"):
                raise AttributeError(attr)
            if self.__dict__["_window"] and attr in self.__dict__["_placeholders"]:
                return type(attr, (), {"__module__": self.__name__, "__doc__": "an annotation's placeholder"})
            import importlib

            held = sys.modules.get(self.__name__)
            if held is None or held is self:
                sys.modules.pop(self.__name__, None)
            real = self.__dict__["_real"] = importlib.import_module(self.__name__)
        return getattr(real, attr)


@functools.cache
def _detector() -> Callable[[str], list[str]]:
    """detect-secrets' own file scan, over the text in memory; loaded once per process."""
    placed = {name: _Deferred(name, ph) for name, ph in _DEFERRED.items() if name not in sys.modules}
    sys.modules.update(placed)
    try:
        from detect_secrets.core import scan
        from detect_secrets.settings import default_settings, get_filters, get_plugins
        from detect_secrets.transformers.config import ConfigFileTransformer, EagerConfigFileTransformer
        from detect_secrets.transformers.exceptions import ParsingError

        with default_settings():  # every plugin and filter module, imported while the stand-ins hold
            get_plugins()
            get_filters()
    finally:
        for name, module in placed.items():
            module.__dict__["_window"] = False
            if sys.modules.get(name) is module:
                del sys.modules[name]

    # `transformers.get_transformed_file` over those that take a `.txt` file (the INI reader,
    # plain then eager; tests/sdk/test_team.py checks the list against get_transformers()).
    transformers = (ConfigFileTransformer(), EagerConfigFileTransformer())

    def transformed(fh: io.StringIO, eager: bool) -> list[str] | None:
        for transformer in transformers:
            if not transformer.should_parse_file(_SCAN_NAME) or transformer.is_eager != eager:
                continue
            try:
                return transformer.parse_file(fh)  # type: ignore[arg-type]
            except ParsingError:
                pass
            finally:
                fh.seek(0)
        return None

    def detect(text: str) -> list[str]:
        # As `open()` reads the file scan_file is given: universal newlines.
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        found: set[str] = set()
        with default_settings() as settings:
            # `is_invalid_file` judges a file on disk; the other filename filters judge the name.
            settings.disable_filters("detect_secrets.filters.common.is_invalid_file")
            if scan._is_filtered_out(required_filter_parameters=["filename"], filename=_SCAN_NAME):
                return []
            for eager in (False, True):  # `scan._get_lines_from_file`, over the text
                fh = io.StringIO(text)
                lines = transformed(fh, eager)
                if not lines:
                    if eager:
                        break
                    lines = io.StringIO(text).readlines()
                found = {s.type for s in scan._process_line_based_plugins(
                    lines=list(enumerate(lines, start=1)), filename=_SCAN_NAME)}
                if found:
                    break
        return sorted(found)

    return detect


# -- the pre-screen: text no default plugin could flag never pays detect-secrets' import ----
#
# Each condition below is implied by every pattern of its plugin, on the plugin's own characters
# and flags, and matches none of the separators the INI readers join a key and value with
# (` = "`, `"`, a `\` before a `"`); without a `%` (interpolation) every piece is from one line.
# So if a plugin flags a line, its condition matches the text. Derived from detect-secrets
# _SCREENED_FOR; under any other version every text is scanned.
_SCREENED_FOR = "1.5.0"
_KEYWORDS = (  # plugins/keyword.py DENYLIST (tests/sdk/test_team.py checks it is the same)
    "api_?key", "auth_?key", "service_?key", "account_?key", "db_?key", "database_?key", "priv_?key",
    "private_?key", "client_?key", "db_?pass", "database_?pass", "key_?pass", "password", "passwd", "pwd",
    "secret", "contraseña", "contrasena",
)
_SCREEN_EXACT = "|".join((
    r"A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA",  # AWS access key
    r"AKC|AP[\dABCDEF]",  # Artifactory
    r"AccountKey=",  # Azure storage
    r"[A-Za-z0-9+/\\\-_=]{22}",  # Base64 high entropy: > 4.5 bits needs 23 distinct characters (one may be an added \)
    r"://",  # basic auth
    r"[MNO][a-zA-Z\d_-]{23}",  # Discord
    r"(?:ghp|gho|ghu|ghs|ghr)_",  # GitHub
    r"gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-|GR1348941",  # GitLab
    r"[0-9a-fA-F]{9}",  # hex high entropy: > 3 bits needs 9 distinct characters
    r"eyJ",  # JWT
    r"-us[0-9]",  # Mailchimp
    r"_authToken=",  # npm
    r"T3BlbkFJ",  # OpenAI
    r"PRIVATE KEY|PuTTY-User-Key-File-2",  # private keys
    r"[0-9]\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]",  # public IPv4
    r"pypi-AgE",  # PyPI
    r"SG\.",  # SendGrid
    r"sq0csp-",  # Square
    r"[rs]k_live_",  # Stripe
    r"\d{8}:",  # Telegram
    r"(?:AC|SK)[a-z0-9]{32}",  # Twilio
))
_SCREEN_FOLDED = "|".join((
    r"aws",  # AWS secret access key (its keyword)
    r"[a-z0-9_\-]{24}",  # Cloudant, IBM Cloud IAM, IBM COS HMAC, SoftLayer: their secrets' characters, shortest
    r"xox[abposr]-|hooks\.slack\.com",  # Slack
    *_KEYWORDS,  # every keyword pattern holds one
))


@functools.cache
def _screen() -> Callable[[str], bool] | None:
    """`could_hold(text)`, or None under another detect-secrets version than `_SCREENED_FOR`."""
    import importlib.util
    import re

    spec = importlib.util.find_spec("detect_secrets")
    where = spec.submodule_search_locations if spec is not None else None
    if not where:
        return None
    try:
        version = Path(next(iter(where)), "__version__.py").read_text()
    except OSError:
        return None
    if re.fullmatch(r"VERSION = '([^']*)'\s*", version) is None or f"'{_SCREENED_FOR}'" not in version:
        return None
    exact, folded = re.compile(_SCREEN_EXACT), re.compile(_SCREEN_FOLDED, re.IGNORECASE)

    def could_hold(text: str) -> bool:
        return "%" in text or exact.search(text) is not None or folded.search(text) is not None

    return could_hold


def find_secrets(text: str) -> list[str]:
    """The kinds of secret `detect-secrets` sees in `text`, sorted (the pre-screen spares its import)."""
    screen = _screen()
    if screen is not None and not screen(text):
        return []
    return _detector()(text)


def secret_check(ws: "Workspace", memories: "list[Memory]", allow: bool) -> str | None:
    """Refuse (SecretError) a shared workspace's text that looks like a secret; with `allow`, the reason kept."""
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
