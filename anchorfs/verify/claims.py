"""Verify: check what a memory's text claims (paths, symbols, URLs) against the world.

One rule governs every verdict here: staleness needs positive evidence. A path is stale only
when it is missing from a folder that exists; a `file#Name` only when the file exists, parses,
and defines no such name; a URL only on 404 / 410. Anything ambiguous (another machine, a
template, a name found nowhere, a server error) is `unknown` or no claim at all, never `stale`.

Extraction (`extract_claims`) may over-collect; the checks decide what counts (`and/or` is not a
path unless `and/` is a folder here). Memories with no claims are only counted (`no_claims`). No
network is touched unless `net=True`; then URLs are checked concurrently, HEAD first.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
import stat
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from ..anchor.anchors import MAX_FILE_BYTES, STATE_DIR, resolve_path
from ..core.errors import AnchorError, AnchorfsError, SymbolNotFoundError, UnsafePathError
from ..core.model import Drift, Memory, StaleClaim
from .text import Claim, _has_extension, _prose_identifiers, extract_claims, remote_context

__all__ = [
    "CLAIM_KINDS", "Claim", "ClaimResult", "MemoryVerdict", "VerifyReport", "SymbolIndex", "extract_claims",
    "remote_context", "check_url", "check_urls", "check_memory", "verify", "verify_texts", "marked_claims",
    "mark_reason", "Suggestion", "SuggestReport", "suggest", "suggest_anchors", "suggest_report",
]

CLAIM_KINDS: tuple[str, ...] = ("path", "symbol", "url")
DEFAULT_TIMEOUT = 8.0
MAX_WORKERS = 8
INDEX_MAX_FILE_BYTES = 1024 * 1024
"""Source files above this are not parsed into the symbol index (generated or vendored)."""
INDEX_MAX_FILES = 50_000
"""The walk stops here; an index cut short never vouches that a name is unique."""
SKIP_DIRS = frozenset({"node_modules", "__pycache__", "venv", ".venv", "site-packages", ".git", ".hg", ".svn",
                       STATE_DIR})
USER_AGENT = "anchorfs-verify/0.1"


# -- values ----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ClaimResult:
    claim: Claim
    verdict: Drift
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.claim.kind, "value": self.claim.value, "verdict": self.verdict.value,
                "detail": self.detail}


@dataclass(frozen=True, slots=True)
class MemoryVerdict:
    """One memory's claims; `verdict` is None when its text makes no checkable claim."""

    id: str
    verdict: Drift | None
    claims: tuple[ClaimResult, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "verdict": self.verdict.value if self.verdict is not None else None,
                "claims": [c.to_dict() for c in self.claims]}


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """Memories with at least one claim; those without are only counted in `no_claims`."""

    results: tuple[MemoryVerdict, ...] = ()
    no_claims: int = 0

    def count(self, verdict: Drift) -> int:
        return sum(1 for r in self.results if r.verdict is verdict)

    @property
    def stale(self) -> list[MemoryVerdict]:
        return [r for r in self.results if r.verdict is Drift.STALE]

    @property
    def has_stale(self) -> bool:
        return any(r.verdict is Drift.STALE for r in self.results)

    def to_dict(self) -> dict[str, Any]:
        return {"checked": len(self.results), "stale": self.count(Drift.STALE), "unknown": self.count(Drift.UNKNOWN),
                "fresh": self.count(Drift.FRESH), "no_claims": self.no_claims,
                "results": [r.to_dict() for r in self.results]}


def _aggregate(results: Iterable[ClaimResult]) -> Drift | None:
    """The worst verdict (stale, then unknown, then fresh); None without claims."""
    verdicts = {r.verdict for r in results}
    return next((d for d in (Drift.STALE, Drift.UNKNOWN, Drift.FRESH) if d in verdicts), None)


# -- the workspace's files and symbols --------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _SymbolEntry:
    path: str
    name: str
    start_line: int
    end_line: int


class SymbolIndex:
    """The workspace's files and the names its source files define, built on first use (pass one
    to several calls to share it). Hidden folders and vendored trees are skipped, symlinks are
    not followed, and source files above `max_file_bytes` are not parsed."""

    def __init__(self, root: str | os.PathLike[str], *, max_file_bytes: int = INDEX_MAX_FILE_BYTES,
                 max_files: int = INDEX_MAX_FILES) -> None:
        self.root_real = os.path.realpath(os.fspath(root))
        self.max_file_bytes = max_file_bytes
        self.max_files = max_files
        self._files: list[str] | None = None
        self._by_name: dict[str, list[str]] = {}
        self._complete = True
        self._symbols: list[_SymbolEntry] | None = None
        self._by_last: dict[str, list[_SymbolEntry]] = {}

    @property
    def files(self) -> list[str]:
        if self._files is None:
            self._walk()
        assert self._files is not None
        return self._files

    @property
    def complete(self) -> bool:
        """False when the walk stopped at `max_files`: absence and uniqueness prove nothing."""
        _ = self.files  # the walk sets `_complete`
        return self._complete

    def _walk(self) -> None:
        files: list[str] = []
        by_name: dict[str, list[str]] = {}
        for dirpath, dirnames, filenames in os.walk(self.root_real, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
            rel_dir = os.path.relpath(dirpath, self.root_real)
            for name in sorted(filenames):
                full = os.path.join(dirpath, name)
                try:
                    st = os.lstat(full)
                except OSError:
                    continue
                if not stat.S_ISREG(st.st_mode):
                    continue  # symlinks, sockets, fifos
                rel = name if rel_dir == os.curdir else posixpath.join(rel_dir.replace(os.sep, "/"), name)
                if len(files) >= self.max_files:
                    self._complete = False
                    break
                files.append(rel)
                by_name.setdefault(name, []).append(rel)
            if not self._complete:
                break
        self._files = files
        self._by_name = by_name

    def files_named(self, name: str) -> list[str]:
        _ = self.files  # the walk fills `_by_name`
        return list(self._by_name.get(name, ()))

    def _parse(self) -> None:
        from ..core.guard import read_guarded
        from ..anchor.symbols import language_for, list_symbols

        entries: list[_SymbolEntry] = []
        for rel in self.files:
            if language_for(rel) is None:
                continue
            full = os.path.join(self.root_real, rel)
            try:
                st = os.lstat(full)
                if st.st_size > self.max_file_bytes:
                    continue
                # Guarded: the walk's file may since be a link out, a FIFO or another file.
                data = read_guarded(full, root=self.root_real, expect=st, max_bytes=self.max_file_bytes)
                symbols = list_symbols(rel, data)
            except (OSError, AnchorfsError, ValueError, RuntimeError):
                continue  # unreadable, binary, not UTF-8: no names from it
            entries.extend(_SymbolEntry(rel, s.name, s.start_line, s.end_line) for s in symbols)
        self._symbols = entries
        for e in entries:
            self._by_last.setdefault(e.name.rsplit(".", 1)[-1], []).append(e)

    def lookup(self, name: str) -> list[_SymbolEntry]:
        """Definitions named `name`: its exact qualified name, or a dotted suffix of one."""
        if self._symbols is None:
            self._parse()
        last = name.rsplit(".", 1)[-1]
        return [e for e in self._by_last.get(last, ()) if e.name == name or e.name.endswith("." + name)]


# -- checks ----------------------------------------------------------------------------------

def _inside(path: str, base: str) -> bool:
    return path == base or path.startswith(base.rstrip(os.sep) + os.sep)


@dataclass(frozen=True, slots=True)
class _Where:
    """Where a path claim points: a verdict, and the workspace file when it is one."""

    verdict: Drift | None  # None: not a claim after all
    detail: str
    rel: str | None = None
    real: str | None = None
    is_file: bool = False


_NOT_A_CLAIM = _Where(None, "")


class _Checker:
    """Path and symbol checks for one call; URLs are checked apart, in a batch."""

    def __init__(self, root: str | os.PathLike[str], index: SymbolIndex | None) -> None:
        self.root_abs = os.path.abspath(os.fspath(root))
        self.root_real = os.path.realpath(self.root_abs)
        same_root = index is not None and index.root_real == self.root_real
        self.index = index if index is not None and same_root else SymbolIndex(self.root_real)
        self.since: str | None = None  # the commit the memory being checked was anchored at
        home = os.path.expanduser("~")
        if not home or home == "~" or os.path.abspath(home) == os.sep:
            self.home_abs: str | None = None
            self.home_real: str | None = None
        else:
            self.home_abs = os.path.abspath(home)
            self.home_real = os.path.realpath(self.home_abs)

    # paths

    def where(self, value: str) -> _Where:
        if value.startswith("~"):
            if not value.startswith("~/"):
                return _Where(Drift.UNKNOWN, f"{value} is in another user's home folder")
            if self.home_abs is None:
                return _Where(Drift.UNKNOWN, "no home folder to check against")
            return self._absolute(os.path.join(self.home_abs, value[2:]), value)
        if value.startswith("/"):
            return self._absolute(value, value)
        if "/" not in value:
            return self._bare(value)
        rel = value[2:] if value.startswith("./") else value
        if (not rel.endswith("/") and not rel.startswith("../") and not _has_extension(rel.rsplit("/", 1)[-1])
                and not os.path.lexists(os.path.join(self.root_real, rel.split("/", 1)[0]))):
            return _NOT_A_CLAIM  # prose like and/or, read/write
        return self._in_base(self.root_real, rel.rstrip("/") or ".", value, "workspace")

    def _absolute(self, full: str, shown: str) -> _Where:
        norm = os.path.normpath(full)
        for base in (self.root_abs, self.root_real):
            if _inside(norm, base):
                rel = os.path.relpath(norm, base)
                return self._in_base(self.root_real, rel, shown, "workspace")
        if self.home_abs is not None and self.home_real is not None:
            for base in (self.home_abs, self.home_real):
                if _inside(norm, base):
                    rel = os.path.relpath(norm, base)
                    return self._in_base(self.home_real, rel, shown, "home folder")
        return _Where(Drift.UNKNOWN,
                      f"{shown} is outside the workspace and the home folder; it likely describes another machine")

    def _in_base(self, base_real: str, rel: str, shown: str, label: str) -> _Where:
        if label == "workspace":
            if rel in (".", ""):
                return _Where(Drift.FRESH, "the workspace root")
            try:
                rel_posix, real = resolve_path(base_real, rel)
            except UnsafePathError:
                return _Where(Drift.UNKNOWN, self._why_unsafe(rel, shown))
            except AnchorError:
                return _Where(Drift.FRESH, "the workspace root")
        else:
            real = os.path.realpath(os.path.join(base_real, rel))
            if not _inside(real, base_real):
                return _Where(Drift.UNKNOWN, f"{shown} resolves outside the home folder; not checked")
            rel_posix = None
        try:
            st = os.stat(real)
        except FileNotFoundError:
            moved = self._moved(rel_posix) if rel_posix else None
            if moved is not None:
                return _Where(Drift.FRESH, f"{shown} moved to {moved} (git)", rel=moved,
                              real=os.path.join(base_real, moved), is_file=os.path.isfile(os.path.join(base_real, moved)))
            parent = os.path.dirname(real)
            if _inside(parent, base_real) and os.path.isdir(parent):
                shown_parent = os.path.relpath(parent, base_real).replace(os.sep, "/")
                where = f"the {label} root" if shown_parent == "." else f"its folder {shown_parent}/"
                return _Where(Drift.STALE, f"{shown} does not exist ({where} does)")
            return _Where(Drift.UNKNOWN, f"neither {shown} nor its folder exists in the {label}")
        except OSError as exc:
            return _Where(Drift.UNKNOWN, f"{shown} cannot be checked: {exc.strerror or exc}")
        is_file = stat.S_ISREG(st.st_mode)
        kind = "file" if is_file else "folder" if stat.S_ISDIR(st.st_mode) else "path"
        return _Where(Drift.FRESH, f"{kind} exists", rel=rel_posix, real=real, is_file=is_file)

    def _moved(self, rel: str) -> str | None:
        """Where git saw `rel` renamed since the memory's anchors were taken (HEAD without them),
        by the rule drift follows a gone file with (`renames_since`); None when git cannot say."""
        from pathlib import Path

        from ..core.git import renames_since

        try:
            new = renames_since(Path(self.root_real), [self.since or "HEAD"], untracked=False).renamed.get(rel)
        except (AnchorfsError, OSError):
            return None
        return new if new is not None and os.path.lexists(os.path.join(self.root_real, new)) else None

    def _why_unsafe(self, rel: str, shown: str) -> str:
        lexical = os.path.normpath(rel)
        if lexical == os.pardir or lexical.startswith(os.pardir + os.sep):
            return f"{shown} is outside the workspace; not checked"
        real = os.path.realpath(os.path.join(self.root_real, rel))
        if _inside(real, os.path.join(self.root_real, STATE_DIR)):
            return f"{shown} is inside anchorfs's own {STATE_DIR}/ folder; not checked"
        return f"{shown} resolves outside the workspace through a symlink; not followed"

    def _bare(self, name: str) -> _Where:
        """`settings.py` in prose: at the root, or anywhere in the workspace; else no claim."""
        at_root = self._in_base(self.root_real, name, name, "workspace")
        if at_root.verdict is Drift.FRESH:
            return replace(at_root, detail="exists at the workspace root")
        found = self.index.files_named(name)
        if not found:
            return _NOT_A_CLAIM
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        if len(found) == 1:
            real = os.path.join(self.root_real, found[0])
            return _Where(Drift.FRESH, f"found at {found[0]}", rel=found[0], real=real, is_file=True)
        return _Where(Drift.FRESH, f"found at {found[0]}{more}")

    # symbols

    def symbol(self, value: str) -> tuple[_Where, str | None]:
        """(verdict, resolved qualified name) of a `file#Name` or bare `Name` claim."""
        left, hash_, name = value.partition("#")
        if not hash_:
            return self._identifier(value)
        where = self.where(left)
        if where.verdict is not Drift.FRESH:
            return where, None
        if where.rel is None or where.real is None:
            if "/" not in left:
                return _Where(Drift.UNKNOWN, f"several files are named {left} ({where.detail})"), None
            detail = f"{left} is outside the workspace; symbols are only read there"
            return _Where(Drift.UNKNOWN, detail), None
        if not where.is_file:
            return _Where(Drift.UNKNOWN, f"{left} is not a regular file"), None
        return self._in_file(where.rel, where.real, name)

    def _in_file(self, rel: str, real: str, name: str) -> tuple[_Where, str | None]:
        from ..core.guard import EscapedError, NotRegularError, SwappedError, TooLargeError, read_guarded
        from ..anchor.symbols import find_symbol, language_for, list_symbols

        if language_for(rel) is None:
            return _Where(Drift.UNKNOWN, f"symbols in {rel} cannot be resolved (no grammar)"), None
        try:  # guarded: the file checked by `where` may since be a link out, a FIFO or another file
            data = read_guarded(real, root=self.root_real, max_bytes=MAX_FILE_BYTES)
        except TooLargeError:
            return _Where(Drift.UNKNOWN, f"{rel} is too large to read"), None
        except EscapedError:
            return _Where(Drift.UNKNOWN, f"{rel} now resolves outside the workspace; not followed"), None
        except NotRegularError:
            return _Where(Drift.UNKNOWN, f"{rel} is not a regular file"), None
        except SwappedError:
            return _Where(Drift.UNKNOWN, f"{rel} changed while being read"), None
        except OSError as exc:
            return _Where(Drift.UNKNOWN, f"{rel} cannot be read: {exc.strerror or exc}"), None
        try:
            sym = find_symbol(rel, data, name)
            detail = f"{name} found at {rel}:{sym.start_line}-{sym.end_line}"
            return _Where(Drift.FRESH, detail, rel, real, True), sym.name
        except SymbolNotFoundError:
            pass
        except AnchorfsError as exc:
            return _Where(Drift.UNKNOWN, str(exc)), None
        try:
            nested = [s for s in list_symbols(rel, data) if s.name.endswith("." + name)]
        except AnchorfsError as exc:  # pragma: no cover - find_symbol parsed it just now
            return _Where(Drift.UNKNOWN, str(exc)), None
        if len(nested) == 1:
            s = nested[0]
            detail = f"{name} found as {s.name} at {rel}:{s.start_line}-{s.end_line}"
            return _Where(Drift.FRESH, detail, rel, real, True), s.name
        if nested:
            more = len(nested) - 1
            return _Where(Drift.FRESH, f"{name} found as {nested[0].name} and {more} more in {rel}"), None
        # The parser may not list every kind of definition: a name still written in the file
        # is no positive evidence that it is gone.
        last = name.rsplit(".", 1)[-1]
        if re.search(rb"(?<![\w$])" + re.escape(last.encode()) + rb"(?![\w$])", data):
            detail = f"{name} is not a definition in {rel}, but the name still appears there"
            return _Where(Drift.UNKNOWN, detail), None
        return _Where(Drift.STALE, f"{name} is not defined in {rel}"), None

    def _identifier(self, name: str) -> tuple[_Where, str | None]:
        found = self.index.lookup(name)
        if not found:
            return _NOT_A_CLAIM, None  # a name found nowhere is ambiguous, not stale
        first = found[0]
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        detail = f"defined as {first.name} in {first.path}:{first.start_line}{more}"
        if len(found) == 1 and self.index.complete:
            real = os.path.join(self.root_real, first.path)
            return _Where(Drift.FRESH, detail, first.path, real, True), first.name
        return _Where(Drift.FRESH, detail), None

    # one memory, URLs pending

    def check(self, memory: Memory) -> list[tuple[Claim, _Where | None]]:
        """Each claim with its verdict (None for a URL, checked apart); non-claims dropped."""
        remote = remote_context(memory.content)
        self.since = next((a.commit for a in memory.anchors if a.commit), None)
        out: list[tuple[Claim, _Where | None]] = []
        for claim in extract_claims(memory.content):
            if claim.kind == "url":
                out.append((claim, None))
                continue
            if claim.kind == "path":
                where = self.where(claim.value)
                located_by_path = True
            else:
                where, _ = self.symbol(claim.value)
                located_by_path = "#" in claim.value
            if where.verdict is None:
                continue
            if remote and located_by_path:
                detail = f"the memory mentions {remote}: the path may be on another machine"
                where = _Where(Drift.UNKNOWN, detail)
            out.append((claim, where))
        return out


# -- URLs ------------------------------------------------------------------------------------

class _RedirectError(Exception):
    """A 3xx urllib could not follow (a loop, too many hops, no Location)."""


class _KeepHeadRedirects(urllib.request.HTTPRedirectHandler):
    """urllib turns a redirected HEAD into a GET (and downloads the body); keep it a HEAD."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and req.get_method() == "HEAD":
            new.method = "HEAD"
        return new


def _status(url: str, method: str, timeout: float) -> int:
    req = urllib.request.Request(url, method=method, headers={"User-Agent": USER_AGENT})
    opener = urllib.request.build_opener(_KeepHeadRedirects)  # per call: proxies from the env
    try:
        with opener.open(req, timeout=timeout) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        with contextlib.suppress(Exception):  # nothing to release
            exc.close()
        if exc.code < 400:
            raise _RedirectError(f"HTTP {exc.code} (a redirect that could not be followed)") from None
        return int(exc.code)


def check_url(url: str, *, timeout: float = DEFAULT_TIMEOUT) -> tuple[Drift, str]:
    """HEAD (GET when HEAD is refused); 404 / 410 stale, below 400 or 401 / 403 fresh."""
    if not url.lower().startswith(("http://", "https://")):
        return Drift.UNKNOWN, "only http(s) URLs are checked"
    try:
        code = _status(url, "HEAD", timeout)
        if code in (405, 501, 404, 410):
            # HEAD refused, or a server that only routes GET: ask again before calling it gone.
            code = _status(url, "GET", timeout)
    except _RedirectError as exc:
        return Drift.UNKNOWN, str(exc)
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, TimeoutError) or "timed out" in str(reason):
            return Drift.UNKNOWN, f"timed out after {timeout:g} s"
        return Drift.UNKNOWN, f"unreachable: {getattr(reason, 'strerror', None) or reason}"
    except TimeoutError:
        return Drift.UNKNOWN, f"timed out after {timeout:g} s"
    except Exception as exc:  # noqa: BLE001 - any failure to ask is ambiguous, never stale
        return Drift.UNKNOWN, f"unreachable: {type(exc).__name__}: {exc}"
    if code in (404, 410):
        return Drift.STALE, f"HTTP {code}"
    if code < 400:
        return Drift.FRESH, f"HTTP {code}"
    if code in (401, 403):
        return Drift.FRESH, f"HTTP {code} (behind an auth wall, but alive)"
    return Drift.UNKNOWN, f"HTTP {code}"


def check_urls(urls: Iterable[str], *, timeout: float = DEFAULT_TIMEOUT,
               max_workers: int = MAX_WORKERS) -> dict[str, tuple[Drift, str]]:
    """Each distinct URL checked once, at most `max_workers` at a time."""
    unique = list(dict.fromkeys(urls))
    if not unique:
        return {}
    with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(unique)))) as pool:
        results = pool.map(lambda u: check_url(u, timeout=timeout), unique)
        return dict(zip(unique, results))


_NOT_CHECKED = (Drift.UNKNOWN, "not checked: network checks are off (use --net)")


# -- marks: what `verify --mark` leaves on a memory ------------------------------------------

def marked_claims(memory: Memory, result: MemoryVerdict, now: datetime) -> tuple[StaleClaim, ...]:
    """The memory's `stale_claims` after a `verify --mark` that gave `result`: a claim found
    stale is marked (keeping when it was first found while its detail is the same); one found
    fresh is cleared; one found `unknown` now, or no longer a claim, keeps its mark."""
    before = {(c.kind, c.value): c for c in memory.stale_claims}
    out: list[StaleClaim] = []
    seen: set[tuple[str, str]] = set()
    for r in result.claims:
        key = (r.claim.kind, r.claim.value)
        seen.add(key)
        prev = before.get(key)
        if r.verdict is Drift.STALE:
            same = prev is not None and prev.detail == r.detail
            out.append(prev if same and prev is not None else StaleClaim(r.claim.kind, r.claim.value, r.detail, now))
        elif r.verdict is Drift.UNKNOWN and prev is not None:
            out.append(prev)
    out.extend(c for key, c in before.items() if key not in seen)
    return tuple(out)


def mark_reason(result: MemoryVerdict, before: tuple[StaleClaim, ...], after: tuple[StaleClaim, ...]) -> str:
    """The ledger reason of a mark: what was found stale, or which claims hold again."""
    if after:
        why = "; ".join(f"{c.value}: {c.detail}" for c in after[:3])
        return f"verify: stale ({why})"
    cleared = ", ".join(c.value for c in before[:3])
    verdict = result.verdict.value if result.verdict is not None else "none"
    return f"verify: {verdict} (claims hold again: {cleared})"


# -- public entry points ---------------------------------------------------------------------

def _assemble(memory: Memory, pending: list[tuple[Claim, _Where | None]],
              urls: Mapping[str, tuple[Drift, str]]) -> MemoryVerdict:
    results: list[ClaimResult] = []
    for claim, where in pending:
        if where is None:
            verdict, detail = urls.get(claim.value, _NOT_CHECKED)
        else:
            assert where.verdict is not None
            verdict, detail = where.verdict, where.detail
        results.append(ClaimResult(claim, verdict, detail))
    return MemoryVerdict(memory.id, _aggregate(results), tuple(results))


def verify(root: str | os.PathLike[str], memories: Iterable[Memory], *, net: bool = False,
           timeout: float = DEFAULT_TIMEOUT, index: SymbolIndex | None = None,
           max_workers: int = MAX_WORKERS) -> VerifyReport:
    """Check every memory's claims; URLs (only with `net`) in one concurrent batch."""
    checker = _Checker(root, index)
    pending = [(m, checker.check(m)) for m in memories]
    urls: dict[str, tuple[Drift, str]] = {}
    if net:
        urls = check_urls((c.value for _, claims in pending for c, w in claims if w is None),
                          timeout=timeout, max_workers=max_workers)
    results: list[MemoryVerdict] = []
    no_claims = 0
    for memory, claims in pending:
        if not claims:
            no_claims += 1
            continue
        results.append(_assemble(memory, claims, urls))
    return VerifyReport(tuple(results), no_claims)


def verify_texts(root: str | os.PathLike[str], texts: Iterable[tuple[str, str]], *, net: bool = False,
                 timeout: float = DEFAULT_TIMEOUT, index: SymbolIndex | None = None) -> VerifyReport:
    """The same claim checks on texts that are not memories: `(key, text)` pairs, each result's
    `id` being its key (`verify --file CLAUDE.md` keys each claim by `FILE:LINE`)."""
    return verify(root, (Memory(id=key, content=text) for key, text in texts), net=net, timeout=timeout, index=index)


def check_memory(root: str | os.PathLike[str], memory: Memory, *, net: bool = False,
                 timeout: float = DEFAULT_TIMEOUT, index: SymbolIndex | None = None) -> MemoryVerdict:
    """One memory's claims and verdict (None when it makes no checkable claim)."""
    claims = _Checker(root, index).check(memory)
    urls = check_urls((c.value for c, w in claims if w is None), timeout=timeout) if net else {}
    return _assemble(memory, claims, urls)


# -- anchors proposed for unanchored memories (`verify --suggest`, `import --apply`): what their text names
# that the workspace backs, each held back when the text makes a stale claim.

def suggest_anchors(root: str | os.PathLike[str], memory: Memory, index: SymbolIndex | None = None) -> list[str]:
    """Anchor specs the memory's text names and the workspace backs, deduplicated: a workspace
    file named by path (or a bare name found in exactly one place), a `file#Name` that resolves,
    and an identifier that names exactly one definition. Paths are not proposed when the memory
    talks about another machine; specs it is already anchored to are left out."""
    checker = _Checker(root, index)
    remote = remote_context(memory.content)
    have = {a.spec for a in memory.anchors}
    specs: list[str] = []
    names: list[str] = []
    for claim in extract_claims(memory.content):
        if claim.kind == "url":
            continue
        if claim.kind == "path":
            if remote:
                continue
            where = checker.where(claim.value)
            if (where.verdict is Drift.FRESH and where.is_file and where.rel is not None
                    and os.path.getsize(where.real or "") <= MAX_FILE_BYTES):
                specs.append(where.rel)
        elif "#" in claim.value:
            if remote:
                continue
            where, qualified = checker.symbol(claim.value)
            if where.verdict is Drift.FRESH and where.rel is not None and qualified is not None:
                specs.append(f"{where.rel}#{qualified}")
        else:
            names.append(claim.value)
    names.extend(_prose_identifiers(memory.content))
    for name in dict.fromkeys(names):
        where, qualified = checker.symbol(name)
        if where.verdict is Drift.FRESH and where.rel is not None and qualified is not None:
            specs.append(f"{where.rel}#{qualified}")
    return [s for s in dict.fromkeys(specs) if s not in have]


@dataclass(frozen=True, slots=True)
class Suggestion:
    """Anchors proposed for one unanchored memory. `held` names the claims of its text that are
    stale (found now, or marked by `verify --mark`): such a memory is never anchored, because
    an anchor to whatever else it names would serve a claim about something gone as fresh."""

    id: str
    anchors: tuple[str, ...]
    held: tuple[tuple[str, str], ...] = ()
    """(claim, detail) of each stale claim; empty when the anchors may be taken."""
    applied: bool = False

    @property
    def why(self) -> str | None:
        """Why it was not anchored, in one line; None when nothing holds it back."""
        if not self.held:
            return None
        gone = "; ".join(f"claims `{value}`, which is gone: {detail}" for value, detail in self.held[:3])
        more = f" and {len(self.held) - 3} more" if len(self.held) > 3 else ""
        return f"{gone}{more}; not anchored: fix the text (supersede) or retract it first"

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "anchors": list(self.anchors), "applied": self.applied, "why": self.why}


@dataclass(frozen=True, slots=True)
class SuggestReport:
    """Every suggestion, those that may be anchored and those held back (`Suggestion.held`)."""

    suggestions: tuple[Suggestion, ...] = ()
    applied: bool = False

    @property
    def proposals(self) -> dict[str, list[str]]:
        """memory id -> specs, for the memories that may be anchored."""
        return {s.id: list(s.anchors) for s in self.suggestions if not s.held}

    @property
    def held(self) -> list[Suggestion]:
        return [s for s in self.suggestions if s.held]

    def to_dict(self) -> dict[str, Any]:
        return {"suggestions": [s.to_dict() for s in self.suggestions], "applied": self.applied,
                "held": len(self.held)}


def suggest_report(root: str | os.PathLike[str], memories: Iterable[Memory], *,
                   index: SymbolIndex | None = None) -> SuggestReport:
    """Suggestions for the memories without anchors that name something here, each held back
    when its text makes a stale claim: checked now (paths and symbols; URLs are not fetched
    here), or marked stale by an earlier `verify --mark` (a URL found 404 by `--net`)."""
    index = index if index is not None else SymbolIndex(root)
    checker = _Checker(root, index)
    out: list[Suggestion] = []
    for memory in memories:
        if memory.anchors:
            continue
        specs = suggest_anchors(root, memory, index)
        if not specs:
            continue
        held = {c.value: c.detail for c in memory.stale_claims}
        for claim, where in checker.check(memory):
            if where is not None and where.verdict is Drift.STALE:
                held.setdefault(claim.value, where.detail)
        out.append(Suggestion(memory.id, tuple(specs), tuple(held.items())))
    return SuggestReport(tuple(out))


def suggest(root: str | os.PathLike[str], memories: Iterable[Memory], *,
            index: SymbolIndex | None = None) -> dict[str, list[str]]:
    """memory id -> proposed specs, for the memories `suggest_report` does not hold back."""
    return suggest_report(root, memories, index=index).proposals
