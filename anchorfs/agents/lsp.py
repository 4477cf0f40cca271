"""`anchorfs lsp`: a language server (pygls 2, stdio) that shows memories on the lines they rest on.

Diagnostics (a stale memory is a Warning at the lines its anchored text stands on now, line 1 for a
whole-file anchor; an unknown one is Information), hover, code lens and code actions (reanchor,
supersede, retract, history; "Remember this..." on a selection). An open file is judged from its
buffer, unsaved edits included (`DriftChecker.judge_bytes`: nothing written, no hash cached for
text that is not on disk); its memories' anchors on other files through the hash cache, as any
read. Verdicts are `model.drift_of`'s, envelopes `drift.report.envelope`'s, writes the SDK's
(anchors through the same guarded take as the CLI's). Every workspace call runs on one worker
thread, never on the message loop; keystrokes are debounced; the ledger's stat is polled, so a
write by another process refreshes what is shown. pygls is imported only when `serve` runs.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, NamedTuple

from ..core.errors import AnchorfsError, InputError, WorkspaceError
from ..core.guard import sha256_bytes
from ..core.model import AnchorCheck, AnchorRef, Drift, Memory, Verdict, cut, drift_of, one_line, utcnow
from ..drift import DriftChecker, MemoryDrift, envelope

if TYPE_CHECKING:
    from lsprotocol import types as lsp
    from pygls.lsp.server import LanguageServer

    from ..sdk.workspace import Workspace

__all__ = ["serve", "build_server", "Found", "judge_buffer", "diagnostics", "hover_text", "lenses", "COMMANDS",
           "DEBOUNCE", "POLL", "HOVER_CHARS", "DRAFT_MARK"]

DEBOUNCE = 0.25
"""Seconds a burst of keystrokes is waited out before the buffer is judged again."""
POLL = 1.0
"""Seconds between two looks at each ledger's stat (a write by another process)."""
HOVER_CHARS = 3000
"""The most characters a hover shows; the memories past it are counted."""
SOURCE = "anchorfs"
DRAFT_MARK = "# ---- anchorfs:"
"""The line under a draft's text (`_Server.ask`): what is above it is the memory's text."""
COMMANDS = ("anchorfs.reanchor", "anchorfs.supersede", "anchorfs.retract", "anchorfs.history",
            "anchorfs.remember", "anchorfs.show")
REASON = "in the editor (anchorfs lsp)"


class Found(NamedTuple):
    """One memory anchored in a buffer: its drift judged against the buffer, its envelope, and where
    its anchors on this file stand now (1-based lines; None: the whole file)."""

    drift: MemoryDrift
    envelope: str
    spans: tuple[tuple[int, int] | None, ...]

    @property
    def memory(self) -> Memory:
        return self.drift.memory


# -- judging a buffer --------------------------------------------------------------------------------

def judge_buffer(ws: "Workspace", rel: str, data: bytes, memories: Sequence[Memory]) -> list[Found]:
    """`memories` (anchored on `rel`) judged with `data` as `rel`'s bytes: its anchors by
    `DriftChecker.judge_bytes`, their other anchors on disk through the hash cache. Writes nothing."""
    checker = DriftChecker(ws.root_real, ws.cache, whitespace=str(ws.config["drift.whitespace"]))
    sha, now, out = sha256_bytes(data), utcnow(), []
    for m in memories:
        checks = tuple(_check(checker, ref, rel, data, sha) for ref in m.anchors)
        md = MemoryDrift(m, drift_of([c.verdict for c in checks]), checks).with_claims()
        env = envelope(m, md.drift, md.checks, now=now, expiry_days=ws.config.expiry_days(m.kind))
        out.append(Found(md, env, tuple(_span(c, data) for c in checks if c.anchor.path == rel)))
    return out


def _check(checker: DriftChecker, ref: AnchorRef, rel: str, data: bytes, sha: str) -> AnchorCheck:
    if ref.path != rel:
        return checker.check_anchor(ref)
    if ref.sha256 == sha:
        return AnchorCheck(ref, Verdict.FRESH, "unchanged", ref.lines)
    return checker.judge_bytes(ref, data)


def _span(check: AnchorCheck, data: bytes) -> tuple[int, int] | None:
    """Where an anchor's text stands in the buffer: where its check found it (the drift report's
    "nearest now" for changed lines), else its symbol by name, else its recorded lines; None: whole file."""
    ref = check.anchor
    if check.lines_now is not None and check.path_now in (None, ref.path):
        return check.lines_now
    if ref.symbol:
        from ..anchor.symbols import find_symbol

        try:
            sym = find_symbol(ref.path, data, ref.symbol)
        except AnchorfsError:  # gone, or no grammar: said on line 1
            return None
        return sym.start_line, sym.end_line
    if ref.lines is None:
        return None
    last = data.count(b"\n") + 1
    return min(ref.lines[0], last), min(ref.lines[1], last)


def _md(text: str) -> str:
    """Data for markdown: one line, its markup characters escaped."""
    return re.sub(r"([\\`*_\[\]<>#|~])", r"\\\1", one_line(text))


def _lines_of(found: Sequence[Found], line: int) -> list[Found]:
    """The memories with an anchor standing on `line` (1-based); a whole-file anchor stands on line 1."""
    return [f for f in found if any((s or (1, 1))[0] <= line <= (s or (1, 1))[1] for s in f.spans)]


def _order(found: Sequence[Found]) -> list[Found]:
    rank = {Drift.STALE: 0, Drift.UNKNOWN: 1}
    return sorted(found, key=lambda f: (rank.get(f.drift.drift, 2), f.memory.id))


def diagnostics(found: Sequence[Found], text: str) -> list["lsp.Diagnostic"]:
    """A Warning per stale memory and an Information per unknown one, at each place its anchors on
    this file stand now (line 1 for the whole file); fresh memories raise none."""
    from lsprotocol import types as lsp

    lines = text.split("\n")
    out = []
    for f in found:
        if f.drift.drift not in (Drift.STALE, Drift.UNKNOWN):
            continue
        severity = lsp.DiagnosticSeverity.Warning if f.drift.drift is Drift.STALE else lsp.DiagnosticSeverity.Information
        message = f"{cut(f.memory.content, 400)} {f.envelope}"
        for span in f.spans or (None,):
            out.append(lsp.Diagnostic(_range(span, lines), message, severity=severity, code=f.memory.id,
                                      source=SOURCE, data={"id": f.memory.id}))
    return out


def _range(span: tuple[int, int] | None, lines: list[str]) -> "lsp.Range":
    from lsprotocol import types as lsp

    last = max(len(lines), 1)
    a, b = span or (1, 1)
    a, b = min(a, last), min(b, last)
    end = len(lines[b - 1].rstrip("\r").encode("utf-16-le")) // 2 if lines else 0  # LSP counts UTF-16 units
    return lsp.Range(lsp.Position(a - 1, 0), lsp.Position(b - 1, end))


def hover_text(found: Sequence[Found], line: int, cap: int = HOVER_CHARS) -> str | None:
    """Markdown for the memories anchored on `line` (1-based), the stale first, within `cap` characters."""
    here = _order(_lines_of(found, line))
    if not here:
        return None
    n = len(here)
    head = f"**anchorfs** · {n} memor{'y' if n == 1 else 'ies'} here (data, not instructions)"
    parts = [f"- `{f.memory.id}` **{f.drift.drift.value}** {_md(f.envelope)}\n  > {_md(cut(f.memory.content, 600))}"
             for f in here]
    shown, room = [head], cap - len(head)
    for part in parts:
        if len(part) > room and len(shown) > 1:
            shown.append(f"- {n - len(shown) + 1} more (`anchorfs list`)")
            break
        shown.append(part)
        room -= len(part) + 2
    return "\n\n".join(shown)


def lenses(found: Sequence[Found]) -> list[tuple[int, str, list[str]]]:
    """(1-based line, title, memory ids) above each anchored span: "2 memories · 1 stale"."""
    at: dict[int, list[Found]] = {}
    for f in found:
        for start in dict.fromkeys((s or (1, 1))[0] for s in f.spans):
            at.setdefault(start, []).append(f)
    out = []
    for line, here in sorted(at.items()):
        n = len(here)
        counts = [(sum(f.drift.drift is d for f in here), d.value) for d in (Drift.STALE, Drift.UNKNOWN)]
        title = " · ".join([f"{n} memor{'y' if n == 1 else 'ies'}"] + [f"{k} {word}" for k, word in counts if k])
        out.append((line, title, [f.memory.id for f in _order(here)]))
    return out


# -- the server ---------------------------------------------------------------------------------------

class _Doc(NamedTuple):
    ws: "Workspace"
    rel: str
    version: int | None
    found: list[Found]


class _Server:
    """The state behind the handlers: the workspaces of the open files, each file's judged memories,
    the debounced refreshes, the drafts asked for text. Workspace calls run in `pool` (one thread)."""

    def __init__(self, ls: "LanguageServer", root: str | None) -> None:
        self.ls, self.root = ls, root
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="anchorfs-lsp")
        self.spaces: dict[str, "Workspace"] = {}
        self.roots: dict[str, str | None] = {}  # folder -> its workspace's root (None: in none)
        self.index: dict[str, tuple[Any, dict[str, list[str]] | None]] = {}  # root -> (ledger stat, path -> ids)
        self.docs: dict[str, _Doc] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.dirty: set[str] = set()  # uris with edits not saved
        self.drafts: dict[str, Callable[[str], str]] = {}  # draft uri -> what its saved text does
        self.draft_dir: str | None = None
        self.poller: asyncio.Task[None] | None = None

    # -- off the loop (the worker thread) --

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)

    def place(self, uri: str) -> tuple["Workspace", str] | None:
        """(workspace, repo-relative path) of a file's uri; None outside every workspace or in `.anchorfs/`."""
        from pygls.uris import to_fs_path

        from ..anchor.anchors import resolve_path
        from ..core.statedir import locate
        from ..sdk.workspace import Workspace

        path = to_fs_path(uri)
        if not path:
            return None
        folder = os.path.dirname(os.path.realpath(path))
        if folder not in self.roots:
            try:
                self.roots[folder] = locate(self.root) if self.root else locate(None, start=folder)
            except WorkspaceError:
                self.roots[folder] = None
        root = self.roots[folder]
        if root is None:
            return None
        ws = self.spaces.get(root)
        if ws is None:
            ws = self.spaces[root] = Workspace(root)
        try:
            rel, _ = resolve_path(ws.root_real, path)  # the guard of every anchor: no escape, no state folder
        except AnchorfsError:
            return None
        return ws, rel

    def on(self, ws: "Workspace", rel: str) -> list[Memory]:
        """The active memories anchored on `rel`, from an index kept while the ledger's stat holds."""
        sig = _ledger_sig(ws)
        held = self.index.get(ws.root_real)
        paths = held[1] if held is not None and held[0] == sig else None
        if paths is None:
            paths = ws.anchored_paths()
            self.index[ws.root_real] = (sig, paths)
        return [ws.get(i) for i in paths.get(rel, ())]

    def judge(self, uri: str, text: str, version: int | None) -> _Doc | None:
        placed = self.place(uri)
        if placed is None:
            return None
        ws, rel = placed
        doc = _Doc(ws, rel, version, judge_buffer(ws, rel, text.encode("utf-8", "surrogateescape"), self.on(ws, rel)))
        self.docs[uri] = doc
        return doc

    # -- on the loop --

    def text(self, uri: str) -> tuple[str, int | None]:
        doc = self.ls.workspace.get_text_document(uri)
        return doc.source, doc.version

    async def found(self, uri: str) -> _Doc | None:
        """The file's judged memories for its buffer as it is now (judged again when it changed)."""
        text, version = self.text(uri)
        doc = self.docs.get(uri)
        if doc is not None and doc.version == version and doc.version is not None:
            return doc
        got: _Doc | None = await self.run(self.judge, uri, text, version)
        return got

    def schedule(self, uri: str, delay: float = 0.0) -> None:
        old = self.tasks.pop(uri, None)
        if old is not None:
            old.cancel()
        self.tasks[uri] = asyncio.get_running_loop().create_task(self.refresh(uri, delay))

    async def refresh(self, uri: str, delay: float) -> None:
        from lsprotocol import types as lsp

        if delay:
            await asyncio.sleep(delay)
        if uri in self.drafts:
            return
        text, version = self.text(uri)
        try:
            doc: _Doc | None = await self.run(self.judge, uri, text, version)
        except Exception as exc:  # noqa: BLE001 - said in one line; the server goes on
            self.say(str(exc) or type(exc).__name__, error=True)
            return
        if doc is not None:
            self.ls.text_document_publish_diagnostics(
                lsp.PublishDiagnosticsParams(uri, diagnostics(doc.found, text), version=version))

    def refresh_all(self) -> None:
        for uri in list(self.ls.workspace.text_documents):
            self.schedule(uri)
        caps = self.ls.client_capabilities.workspace
        if caps is not None and caps.code_lens is not None and caps.code_lens.refresh_support:
            self.ls.workspace_code_lens_refresh(None)

    async def poll(self) -> None:
        """Refresh every open file when a ledger's stat moves (a write here or by another process)."""
        while True:
            await asyncio.sleep(POLL)
            moved = False
            for root, ws in list(self.spaces.items()):
                sig, held = _ledger_sig(ws), self.index.get(root)
                if held is not None and held[0] != sig:
                    moved, self.index[root] = True, (sig, None)  # once: the refresh builds it anew
            if moved:
                self.refresh_all()

    def say(self, message: str, *, error: bool = False) -> None:
        from lsprotocol import types as lsp

        kind = lsp.MessageType.Error if error else lsp.MessageType.Info
        self.ls.window_show_message(lsp.ShowMessageParams(kind, f"anchorfs: {one_line(message)}"))

    # -- commands --

    async def command(self, name: str, args: Sequence[Any]) -> Any:
        """Run one of `COMMANDS`; an anchorfs error is said in one line, never a traceback."""
        try:
            return await getattr(self, "do_" + name.rpartition(".")[2])(*args)
        except (AnchorfsError, TypeError, ValueError) as exc:
            self.say(str(exc) if isinstance(exc, AnchorfsError) else f"bad arguments to {name}: {exc}", error=True)
            return None

    def memory_of(self, memory_id: str) -> tuple["Workspace", Memory]:
        """The workspace (of the open files') holding `memory_id`, and the memory (worker thread)."""
        if not isinstance(memory_id, str):
            raise InputError("a memory id is a string")
        for ws in list(self.spaces.values()):
            try:
                return ws, ws.get(memory_id)
            except AnchorfsError:
                continue
        raise InputError(f"no memory {memory_id!r} in the workspaces of the open files")

    def saved(self, ws: "Workspace", m: Memory) -> None:
        """Refuse a write that takes anchors from a file whose buffer has unsaved edits."""
        for uri in self.dirty:
            doc = self.docs.get(uri)
            if doc is not None and doc.ws is ws and any(a.path == doc.rel for a in m.anchors):
                raise InputError(f"{doc.rel} has unsaved edits: save it first (anchors are taken from the file)")

    async def write(self, fn: Callable[[], Memory], said: Callable[[Memory], str]) -> dict[str, Any]:
        m: Memory = await self.run(fn)
        self.say(said(m))
        self.refresh_all()
        return m.to_dict()

    async def do_reanchor(self, memory_id: str) -> Any:
        ws, m = await self.run(self.memory_of, memory_id)
        self.saved(ws, m)
        return await self.write(lambda: ws.reanchor(m.id, reason="re-verified " + REASON),
                                lambda new: f"re-anchored {new.id} to the code as it is now")

    async def do_supersede(self, memory_id: str, text: str | None = None) -> Any:
        ws, m = await self.run(self.memory_of, memory_id)
        self.saved(ws, m)
        if text is None:
            return await self.ask(f"supersede-{m.id}", m.content, f"supersede {m.id}", lambda content: (
                f"superseded {m.id} by {ws.supersede(m.id, content, reason='superseded ' + REASON).id}"))
        return await self.write(lambda: ws.supersede(m.id, text, reason="superseded " + REASON),
                                lambda new: f"superseded {m.id} by {new.id}")

    async def do_retract(self, memory_id: str) -> Any:
        ws, m = await self.run(self.memory_of, memory_id)
        return await self.write(lambda: ws.retract(m.id, reason="retracted " + REASON),
                                lambda new: f"retracted {new.id} (`anchorfs revert {new.id}` undoes it)")

    async def do_history(self, memory_id: str) -> Any:
        ws, m = await self.run(self.memory_of, memory_id)
        events = await self.run(ws.history, m.id)
        self.say(f"history of {m.id}: " + " | ".join(
            f"{e.at.date().isoformat()} {e.op} {e.memory.id} [{e.memory.status}] {cut(e.memory.content, 80)}"
            for e in events))
        return [e.to_dict() for e in events]

    async def do_show(self, uri: str, *ids: str) -> Any:
        """The lens's memories as judged in the buffer: id, envelope, text."""
        doc = self.docs.get(uri)
        shown = [f"{f.memory.id} {f.envelope} {cut(f.memory.content, 200)}"
                 for f in (doc.found if doc is not None else []) if f.memory.id in ids]
        self.say(" | ".join(shown) or "no memory here now")
        return shown

    async def do_remember(self, uri: str, start: int, end: int, text: str | None = None) -> Any:
        """Record a memory anchored to lines `start`-`end` (1-based) of `uri`; a selection of no
        characters (`end` < `start`) anchors the innermost symbol around line `start`, else that line."""
        placed = await self.run(self.place, uri)
        if placed is None:
            raise InputError("this file is in no anchorfs workspace (`anchorfs init` at the repository's root)")
        ws, rel = placed
        if uri in self.dirty:
            raise InputError(f"{rel} has unsaved edits: save it first (anchors are taken from the file)")
        spec = f"{rel}:{start}-{max(start, end)}" if end >= start else await self.run(_enclosing, ws, rel, start)
        if text is None:
            return await self.ask("remember", "", f"remember it, anchored to {spec}",
                                  lambda content: f"recorded {ws.record(content, anchors=[spec]).id} on {spec}")
        return await self.write(lambda: ws.record(text, anchors=[spec]), lambda m: f"recorded {m.id} on {spec}")

    async def ask(self, name: str, initial: str, what: str, then: Callable[[str], str]) -> Any:
        """Ask for a memory's text: a draft file opened in the editor (`window/showDocument`); saving
        it runs `then` with the text above `DRAFT_MARK` (an empty text: nothing written)."""
        from lsprotocol import types as lsp
        from pygls.uris import from_fs_path

        caps = self.ls.client_capabilities.window
        if caps is None or caps.show_document is None or not caps.show_document.support:
            raise InputError("this editor cannot open a draft for the text: pass the text as the command's last "
                             "argument, or use the anchorfs command line")
        if self.draft_dir is None:
            self.draft_dir = tempfile.mkdtemp(prefix="anchorfs-lsp-")
        path = os.path.join(self.draft_dir, f"{name}.md")
        with open(path, "w", encoding="utf-8") as f:
            f.write(f"{initial}\n{DRAFT_MARK} write the text above, save to {what}; close unsaved to cancel ----\n")
        uri = from_fs_path(path) or path
        self.drafts[uri] = then
        await self.ls.window_show_document_async(lsp.ShowDocumentParams(uri, take_focus=True))
        return {"draft": uri}

    async def draft_saved(self, uri: str) -> None:
        then = self.drafts.pop(uri)
        content = self.text(uri)[0].split("\n" + DRAFT_MARK)[0].strip()
        if not content:
            self.say("nothing written: the draft's text was empty")
            return
        try:
            self.say(await self.run(then, content))
        except AnchorfsError as exc:
            self.drafts[uri] = then  # said why; saved again, it is tried again
            self.say(str(exc), error=True)
            return
        self.refresh_all()


def _ledger_sig(ws: "Workspace") -> Any:
    try:
        st = os.stat(ws.ledger.file)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns, st.st_ino


def _enclosing(ws: "Workspace", rel: str, line: int) -> str:
    """`rel#SYMBOL` for the innermost symbol around `line`, else `rel:LINE` (no grammar, no symbol)."""
    from ..anchor.symbols import language_for, list_symbols
    from ..core.guard import read_guarded

    if language_for(rel) is not None:
        data = read_guarded(os.path.join(ws.root_real, rel), root=ws.root_real, max_bytes=64 << 20)
        around = [s for s in list_symbols(rel, data) if s.start_line <= line <= s.end_line]
        if around:
            return f"{rel}#{min(around, key=lambda s: s.end_line - s.start_line).name}"
    return f"{rel}:{line}"


# -- wiring --------------------------------------------------------------------------------------------

def _build(root: str | None) -> tuple["LanguageServer", _Server]:
    """The language server and its state: each handler is a call into `_Server`."""
    from lsprotocol import types as lsp
    from pygls.lsp.server import LanguageServer

    from ..core import __version__

    ls = LanguageServer("anchorfs", __version__, text_document_sync_kind=lsp.TextDocumentSyncKind.Full)
    s = _Server(ls, root)

    @ls.feature(lsp.INITIALIZED)
    async def initialized(ls: LanguageServer, params: lsp.InitializedParams) -> None:
        s.poller = asyncio.get_running_loop().create_task(s.poll())

    @ls.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(ls: LanguageServer, params: lsp.DidOpenTextDocumentParams) -> None:
        s.dirty.discard(params.text_document.uri)
        if params.text_document.uri not in s.drafts:
            s.schedule(params.text_document.uri)

    @ls.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    async def did_change(ls: LanguageServer, params: lsp.DidChangeTextDocumentParams) -> None:
        s.dirty.add(params.text_document.uri)
        s.schedule(params.text_document.uri, DEBOUNCE)

    @ls.feature(lsp.TEXT_DOCUMENT_DID_SAVE, lsp.SaveOptions(include_text=False))
    async def did_save(ls: LanguageServer, params: lsp.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        s.dirty.discard(uri)
        if uri in s.drafts:
            await s.draft_saved(uri)
        else:
            s.schedule(uri)

    @ls.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    async def did_close(ls: LanguageServer, params: lsp.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        s.dirty.discard(uri)
        s.docs.pop(uri, None)
        if uri in s.drafts:
            s.drafts.pop(uri)
            s.say("nothing written: the draft was closed")
        ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri, []))

    @ls.feature(lsp.TEXT_DOCUMENT_HOVER)
    async def hover(ls: LanguageServer, params: lsp.HoverParams) -> lsp.Hover | None:
        doc = await s.found(params.text_document.uri)
        said = hover_text(doc.found, params.position.line + 1) if doc is not None else None
        return lsp.Hover(lsp.MarkupContent(lsp.MarkupKind.Markdown, said)) if said else None

    @ls.feature(lsp.TEXT_DOCUMENT_CODE_LENS, lsp.CodeLensOptions(resolve_provider=False))
    async def code_lens(ls: LanguageServer, params: lsp.CodeLensParams) -> list[lsp.CodeLens]:
        uri = params.text_document.uri
        doc = await s.found(uri)
        return [lsp.CodeLens(lsp.Range(lsp.Position(line - 1, 0), lsp.Position(line - 1, 0)),
                             lsp.Command(title, "anchorfs.show", arguments=[uri, *ids]))
                for line, title, ids in (lenses(doc.found) if doc is not None else [])]

    kinds = [lsp.CodeActionKind.QuickFix, lsp.CodeActionKind.Refactor]

    @ls.feature(lsp.TEXT_DOCUMENT_CODE_ACTION, lsp.CodeActionOptions(code_action_kinds=kinds))
    async def code_action(ls: LanguageServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        uri, r = params.text_document.uri, params.range
        doc = await s.found(uri)
        if doc is None:
            return []
        named = {d.data.get("id") for d in params.context.diagnostics if isinstance(d.data, dict)}
        here = [f for f in doc.found if f.memory.id in named or any(
            (sp or (1, 1))[0] <= r.end.line + 1 and r.start.line + 1 <= (sp or (1, 1))[1] for sp in f.spans)]
        out = []
        for f in _order(here):
            mid, diags = f.memory.id, [d for d in params.context.diagnostics if d.code == f.memory.id]
            acts = [("reanchor", f"reanchor {mid}: it still holds")] if f.drift.drift is Drift.STALE else []
            acts += [("supersede", f"supersede {mid}..."), ("retract", f"retract {mid}"),
                     ("history", f"history of {mid}")]
            out += [lsp.CodeAction(f"anchorfs: {title}", kind=lsp.CodeActionKind.QuickFix, diagnostics=diags or None,
                                   command=lsp.Command(title, f"anchorfs.{verb}", arguments=[mid])) for verb, title in acts]
        last = r.end.line - (r.end.character == 0 and r.end.line > r.start.line)  # whole lines: up to column 0
        lines = [r.start.line + 1, 0 if r.start == r.end else last + 1]  # no characters: the symbol around it
        out.append(lsp.CodeAction("anchorfs: remember this...", kind=lsp.CodeActionKind.Refactor,
                                  command=lsp.Command("remember this", "anchorfs.remember", arguments=[uri, *lines])))
        return out

    for name in COMMANDS:
        def bind(name: str) -> Callable[..., Any]:
            async def run(ls: Any, *args: Any) -> Any:  # `Any`: pygls resolves the hints at module level
                return await s.command(name, args)
            return run
        ls.command(name)(bind(name))
    return ls, s


def build_server(root: str | None = None) -> "LanguageServer":
    """The language server (`root`: one workspace for every file; else each file's own, found like git)."""
    return _build(root)[0]


def serve(root: str | None = None) -> None:
    """Run the language server on stdio until the client says exit. A missing pygls is one line."""
    try:
        ls, s = _build(root)
    except ImportError as exc:
        if exc.name and exc.name.split(".")[0] in ("pygls", "lsprotocol", "cattrs", "attrs"):
            raise AnchorfsError("the language server needs pygls: pip install 'anchorfs[lsp]'") from None
        raise
    try:
        ls.start_io()
    finally:
        s.pool.shutdown(wait=True, cancel_futures=True)
        for ws in s.spaces.values():
            ws.close()
        if s.draft_dir is not None:
            shutil.rmtree(s.draft_dir, ignore_errors=True)
