"""The MCP server: anchorfs's SDK as tools an agent can call, over stdio.

Each tool is one call into `Workspace`; the descriptions carry the discipline, since they are
all an agent reads. Arguments are checked against the closed schemas (`mcp_results`). The `mcp`
package is imported only when a server is built.

No `from __future__ import annotations`: the SDK reads the tools' signatures with
`inspect.signature(eval_str=True)`, which cannot see names imported inside `build_server`.
"""

import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar, cast

from ..core.errors import AnchorfsError, InputError, NotFoundError, WorkspaceError
from ..core.statedir import ROOT_ENV, locate
from .hosts import MCP_CONFIG_FILE, mcp_config, write_mcp_config  # noqa: F401 (re-exported)
from .mcp_results import (
    _PAGE, _SHORT_CHARS, DATA_LABEL, HIT_CHARS, SHOW_CHARS, BisectOutput, ContextResult, DriftResult, HistoryResult,
    RecallResult, ShowResult, WriteResult, _capped_hit, _close, _cut, _json, _listed, _memory_view, _read_text,
    _reverify_text, _short_strings, _written, check_arguments,
)
from ..core.model import KINDS, Drift

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from ..core.model import Memory
    from ..sdk.workspace import Workspace

__all__ = [
    "build_server", "serve", "write_mcp_config", "mcp_config", "check_arguments",
    "SERVER_NAME", "WRITE_TOOLS", "TOOL_ORDER", "INSTRUCTIONS", "READ_ONLY_INSTRUCTIONS", "PROPOSE_INSTRUCTIONS",
    "DATA_LABEL", "STALE_URI", "MEMORY_URI", "REVERIFY_PROMPT", "HIT_CHARS", "SHOW_CHARS",
]

SERVER_NAME = "anchorfs"
WRITE_TOOLS = ("remember", "supersede", "retract", "reanchor", "revert")
TOOL_ORDER = ("recall", "context", "check_drift", "show", "history", "bisect", *WRITE_TOOLS)
"""The order `tools/list` gives, whatever order they were added in: reading first, as an agent uses them."""
RESOURCE_NOT_FOUND = -32002  # the MCP specification's error for a resource that does not exist
STALE_URI = "anchorfs://stale"
MEMORY_URI = "anchorfs://memory/{id}"
REVERIFY_PROMPT = "reverify_stale"
_PROPOSED_NOTE = "proposed: a person reviews it (`anchorfs accept {id}` or `reject {id}`); no recall serves it before"
_MCP_SETTLE = {
    "conflicts": "if this memory is right: retract {new}, then supersede {old} with its text; if not: retract {new}",
    "similar": "it repeats {old}: retract {new}, or supersede {old} if this wording is better",
}

_ABOUT = """\
anchorfs is this repository's memory: decisions, constraints and facts about the code, each
anchored to the file, symbol or lines it rests on. Every read re-checks those anchors, so a
memory whose code changed comes back marked STALE instead of silently wrong.
"""

INSTRUCTIONS = _ABOUT + """
Discipline:
- Before a task, call `context` (or `recall`) and read each memory's bracketed envelope.
- Anchor every claim about code to the lines it rests on (`path#Symbol` or `path:10-20`), so
  anchorfs can tell you when it stops being true. Never invent hashes; anchorfs takes them.
- A STALE memory may be wrong: re-read the anchored code before relying on it. If it still
  holds, `reanchor` it; if the world moved, `supersede` it with the corrected belief. Never
  record a duplicate instead: superseding keeps the history queryable.
- `retract` a belief that was simply wrong and has no successor. Nothing is ever deleted;
  `revert` undoes a supersede or a retract, `history` shows a memory's chain.
"""

PROPOSE_INSTRUCTIONS = """
This server asks first: what you `remember` or `supersede` lands as `proposed`, for a person
to review. A proposal is drift-checked at once but served by no `recall` or `context` until it
is accepted (`anchorfs accept ID`); a proposed supersede leaves the old memory in force until
then. `show ID` gives a proposal as it stands; do not record it again.
"""

READ_ONLY_INSTRUCTIONS = _ABOUT + """
This server is read-only: it cannot record or change memories.
- Before a task, call `context` (or `recall`) and read each memory's bracketed envelope.
- A STALE memory may be wrong: re-read the anchored code before relying on it, and tell the
  user which memories look stale or wrong (`bisect` names the commit that staled one).
"""

_ANCHOR_HELP = (
    "Anchor specs, each `PATH` (whole file), `PATH#SYMBOL` (a function or class, dotted: "
    "`TokenIssuer.issue`), `PATH:START-END` or `PATH:LINE` (1-based lines), PATH relative to the "
    "workspace root. anchorfs reads and hashes the anchored content itself."
)

T = TypeVar("T")


def _for_agent(message: str, root: Path) -> str:
    """An SDK error in the words of this server: its tools, not CLI flags it does not have."""
    message = message.replace("give some with --anchor", "give them in `anchors`")
    return message.replace("run `anchorfs reindex`",
                           f"run `anchorfs reindex --root {root}` in a shell (this server has no reindex tool)")


class _Deferred:
    """The workspace of a server started outside one (no `--root`, no ANCHORFS_ROOT): the first of the
    client's roots (`roots/list`) that is or lies in a workspace, found at the first call."""

    def __init__(self, read_only: bool) -> None:
        self.read_only = read_only
        self.target: Workspace | None = None

    async def find(self, context: Any) -> None:
        import warnings
        from urllib.parse import unquote, urlparse

        from ..sdk.workspace import Workspace

        roots: list[Any] = []
        if getattr(getattr(context, "client_capabilities", None), "roots", None) is not None:
            with warnings.catch_warnings():  # deprecated by the 2026-07-28 revision; earlier clients still answer
                warnings.simplefilter("ignore")
                try:
                    roots = (await context.session.list_roots()).roots
                except Exception:  # noqa: BLE001 - a client that cannot be asked has no roots to give
                    roots = []
        for uri in (urlparse(str(r.uri)) for r in roots):
            try:
                self.target = Workspace(locate(None, start=unquote(uri.path)), read_only=self.read_only)
                return
            except (WorkspaceError, OSError):
                continue
        raise WorkspaceError(f"no anchorfs workspace in the folder this server started in ({os.getcwd()}) nor in "
                             "the client's roots; start it with --root or ANCHORFS_ROOT, or `anchorfs init` there")

    def __getattr__(self, name: str) -> Any:
        if self.target is None:
            raise WorkspaceError("no workspace found yet")
        return getattr(self.target, name)


def build_server(root: str | os.PathLike[str] | None = None, *, read_only: bool = False,
                 workspace: "Workspace | None" = None, propose: bool | None = None) -> "MCPServer":
    """An MCP server over the workspace at `root` (found like git when None), opened first so a server
    outside a workspace fails at once. `read_only` leaves out `WRITE_TOOLS` and writes nothing; `propose`
    (None: the `mcp.propose` key) makes `remember` and `supersede` write `proposed` memories."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ResourceError, ToolError, UnexpectedToolError
    from mcp.shared.exceptions import MCPError
    from mcp.types import CallToolResult, TextContent, ToolAnnotations
    from pydantic import Field

    from ..sdk.workspace import Workspace, find_root

    try:
        ws = workspace if workspace is not None else Workspace(find_root(root), read_only=read_only)
    except WorkspaceError:
        if root is not None or os.environ.get(ROOT_ENV):
            raise
        ws = cast("Workspace", _Deferred(read_only))  # started outside one: the client's roots, at the first call
    if propose is None:
        propose = bool(ws.config["mcp.propose"]) if not isinstance(ws, _Deferred) else False
    propose = propose and not read_only
    lock = threading.Lock()  # the SDK runs sync tools on worker threads; a Workspace is not thread-safe

    def call(fn: Callable[[], T], error: type[Exception] = ToolError) -> T:
        try:
            with lock:
                return fn()
        except AnchorfsError as exc:
            if error is ResourceError and isinstance(exc, NotFoundError):  # the spec's resource-not-found
                raise MCPError(RESOURCE_NOT_FOUND, _for_agent(str(exc), ws.root)) from None
            raise error(_for_agent(str(exc), ws.root)) from None

    def result(data: Mapping[str, Any], text: str | None = None) -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text=_json(data) if text is None else text)],
                              structured_content=dict(data))

    def written(m: "Memory", **extra: Any) -> CallToolResult:
        """A write's result; a re-check failing after the write reads unknown, never an error."""
        from ..drift import MemoryDrift

        try:
            with lock:
                md = ws.check(m)
        except AnchorfsError:
            md = MemoryDrift(m, Drift.UNKNOWN, ())
        found = {kind: [{**c.to_dict(), "settle": _MCP_SETTLE[kind].format(old=c.id, new=m.id)}
                        for c in m.candidates if c.kind == kind] for kind in ("similar", "conflicts")}
        return result({"memory": _written(m, md), **extra, **{k: v for k, v in found.items() if v}})

    class _Server(MCPServer):
        """Checks every call's arguments against the tool's closed schema, and lists tools in `TOOL_ORDER`."""

        async def read_resource(self, uri: Any, context: Any = None) -> Any:
            if isinstance(ws, _Deferred) and ws.target is None:
                try:
                    await ws.find(context)
                except WorkspaceError as exc:
                    raise ResourceError(str(exc)) from None
            return await super().read_resource(uri, context)

        async def get_prompt(self, name: str, arguments: Any = None, context: Any = None) -> Any:
            if isinstance(ws, _Deferred) and ws.target is None:
                await ws.find(context)  # a prompt's error is the SDK's: this one line
            return await super().get_prompt(name, arguments, context)

        async def list_tools(self) -> Any:
            tools = await super().list_tools()
            rank = {name: i for i, name in enumerate(TOOL_ORDER)}
            return sorted(tools, key=lambda t: (rank.get(t.name, len(rank)), t.name))

        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            if isinstance(ws, _Deferred) and ws.target is None:
                try:
                    await ws.find(context)
                except WorkspaceError as exc:
                    raise ToolError(str(exc)) from None
            tool = self._tool_manager.get_tool(name)
            if tool is not None:
                try:
                    arguments = check_arguments(name, tool.parameters, arguments)
                except InputError as exc:
                    raise ToolError(str(exc)) from None
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as exc:
                # The SDK prefixes "Error executing tool NAME: "; ours is the whole sentence.
                cause = exc.__cause__
                if isinstance(cause, ToolError) and not isinstance(exc, UnexpectedToolError):
                    raise ToolError(str(cause)) from None
                raise

    server: MCPServer = _Server(
        SERVER_NAME,
        instructions=READ_ONLY_INSTRUCTIONS if read_only else INSTRUCTIONS + (PROPOSE_INSTRUCTIONS if propose else ""),
        version=_version(),
        log_level="WARNING",
    )
    # Hints for the host: nothing reaches outside the repository, no write destroys anything.
    reading = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
    writing = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
    # The same call again changes nothing (a duplicate claim is returned as such).
    repeatable = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                 open_world_hint=False)
    Id = Annotated[str, Field(description="A memory id, or a unique prefix of at least 4 characters.")]
    Anchors = Annotated[list[str], Field(description=_ANCHOR_HELP)]
    after_stale = ("tell the user which memories are stale" if read_only else
                   "`reanchor` it if it still holds or `supersede` it if not")

    def add(fn: Callable[..., Any], name: str, title: str, annotations: Any, description: str) -> None:
        if propose and name in ("remember", "supersede"):
            description += (" This server asks first: the memory lands as `proposed`, served by no recall "
                            "until a person accepts it.")
        server.add_tool(fn, name=name, title=title, annotations=annotations, description=description)
        tool = server._tool_manager.get_tool(name)
        assert tool is not None
        tool.parameters = _close(tool.parameters)

    # -- reading ---------------------------------------------------------------------------

    def recall(
        query: Annotated[str, Field(description="What you want to know, in words.")],
        k: Annotated[int, Field(ge=1, le=100, description="How many memories at most.")] = 10,
        include_superseded: Annotated[bool, Field(description="Also past beliefs (superseded, retracted), marked so.")] = False,
        as_of: Annotated[str | None, Field(description="Recall as the memory stood then: ISO 8601 time or a span back like `7d`, `12h`.")] = None,
        include_weak: Annotated[bool, Field(description="Also the hits below the relevance floor (`weak`), left out by default.")] = False,
    ) -> Annotated[CallToolResult, RecallResult]:
        hits = call(lambda: ws.query(query, k=k, include_superseded=include_superseded, as_of=as_of))
        hits = hits if include_weak else [h for h in hits if not h.weak] or hits[:1]  # else the closest, marked weak
        ws.handed([h.memory.id for h in hits], "recall")
        data: RecallResult = {"count": len(hits), "hits": [_capped_hit(h.to_dict()) for h in hits]}
        return result(data, _read_text("recall", data))

    add(recall, "recall", "Recall memories", reading, (
        "Search the repository's memories. Every hit was just re-checked against its anchors: "
        "`drift` is fresh, stale or unknown, `anchors` give each anchor's verdict and detail "
        "(what changed), and `envelope` is one line to read before trusting the memory. A stale "
        "hit is demoted, never hidden: re-read the anchored code before relying on it, then "
        f"{after_stale}. A long memory's content is cut at {HIT_CHARS:,} characters (`content_cut`); "
        "`show` gives more. Weak matches are left out (`include_weak` keeps them); when none clears the "
        "relevance floor, the closest one comes, marked `weak`."
    ))

    def context(
        task: Annotated[str, Field(description="The task at hand or a question: what the memories should be about.")],
        budget: Annotated[int, Field(ge=100, le=100_000, description="Token budget for the block (about 4 characters a token).")] = 1500,
    ) -> Annotated[CallToolResult, ContextResult]:
        from ..sdk.recall import estimate_tokens

        head = DATA_LABEL + "\n\n"  # labelled inside the block, which is what lands in a prompt
        block = call(lambda: ws.context(task, budget=max(1, budget - estimate_tokens(head))))
        ws.handed([*block.fresh, *block.unknown, *block.stale], "context")
        data = block.to_dict()
        data["markdown"] = head + block.markdown
        data["tokens"], data["budget"] = estimate_tokens(data["markdown"]), budget
        out: ContextResult = {key: data[key] for key in ContextResult.__annotations__}  # type: ignore[assignment]
        return result(out, _read_text("context", out))

    add(context, "context", "Memories for a prompt", reading, (
        "One markdown block of the memories relevant to a task, ready to put in a prompt: "
        "fresh memories first, each with its status envelope, then stale ones under a warning "
        "banner that says what changed in the code. Call it when starting a task."
    ))

    def check_drift(
        id: Annotated[str | None, Field(description="One memory to re-check; leave out to check every anchored memory.")] = None,  # noqa: A002
        all: Annotated[bool, Field(description="List every checked memory, fresh ones too (paged); by default only the stale and unknown ones are listed.")] = False,  # noqa: A002
        offset: Annotated[int, Field(ge=0, description="Where the page of listed memories starts.")] = 0,
        limit: Annotated[int, Field(ge=1, le=500, description="How many memories a page lists.")] = _PAGE,
    ) -> Annotated[CallToolResult, DriftResult]:
        if id is not None:
            if all or offset or limit != _PAGE:
                raise ToolError("give `id` to re-check one memory, or `all`/`offset`/`limit` to page the list, not both")
            md, env = call(lambda: ws.check_id(id))
            one = {**_listed(md), "status": md.memory.status, "envelope": env}
            counts = {d: int(md.drift.value == d) for d in ("stale", "unknown", "fresh")}
            data: DriftResult = {"checked": 1, **counts, "memories": [one]}  # type: ignore[typeddict-item]
            return result(data, _read_text("check_drift", data))
        report = call(lambda: ws.drift())
        rows = report.memories if all else report.flagged
        page = rows[offset:offset + limit]
        more = offset + limit < len(rows)
        data = {
            "checked": len(report.checked), "stale": report.count(Drift.STALE),
            "unknown": report.count(Drift.UNKNOWN), "fresh": report.count(Drift.FRESH),
            "memories": [_listed(md) for md in page], "listed": len(rows), "offset": offset,
            "next_offset": offset + limit if more else None,
            "conflicts": len(ws.open_conflicts()),
        }
        return result(data, _read_text("check_drift", data))

    add(check_drift, "check_drift", "Re-check anchors", reading, (
        "Re-check memories against the code now: one by id, or every anchored memory. Each "
        "comes back fresh, stale (an anchor changed, was deleted or its symbol is gone; the "
        "anchor's `detail` says which) or unknown (an anchor could not be read). Without `id` "
        "it returns the counts and lists only the stale and unknown memories, a page at a time "
        "(`offset`, `limit`; `next_offset` is null on the last page); `all: true` lists every "
        "one. Use it after editing code to see which memories your change made stale. `conflicts` counts the pairs "
        "of active memories found to contradict each other when written (`anchorfs tidy` lists them)."
    ))

    def show(id: Id) -> Annotated[CallToolResult, ShowResult]:  # noqa: A002
        md, env = call(lambda: ws.check_id(id))
        return result({"memory": _memory_view(md, env)})

    add(show, "show", "Show one memory", reading, (
        "One memory in full: its text, status, drift now with each anchor's verdict, who "
        "recorded it and when, and what it supersedes or was superseded by."
    ))

    def history(id: Id) -> Annotated[CallToolResult, HistoryResult]:  # noqa: A002
        events = call(lambda: ws.history(id))
        target = call(lambda: ws.get(id))
        rows = []
        for e in events:
            row = {k: v for k, v in e.to_dict().items() if k in ("op", "at", "actor", "reason", "id", "status")}
            row["content"] = _cut(" ".join(e.memory.content.split()), _SHORT_CHARS)[0]
            row["anchors"] = [a.spec for a in e.memory.anchors]
            rows.append(row)
        return result({"id": target.id, "events": rows})

    add(history, "history", "A memory's history", reading, (
        "The whole chain of a memory, oldest first: every record, supersede, retract, revert "
        "and reanchor, with time, actor, reason and the memory's status after it."
    ))

    if hasattr(Workspace, "bisect"):  # git history support (anchorfs.history), when the SDK offers it
        def bisect(id: Id) -> Annotated[CallToolResult, BisectOutput]:  # noqa: A002
            found: Any = call(lambda: ws.bisect(id))
            return result({"result": _short_strings(found.to_dict() if hasattr(found, "to_dict") else found)})

        add(bisect, "bisect", "Find the commit that staled a memory", reading, (
            "For a stale memory, walk git history to the commit that changed the anchored code "
            "(`culprit`: commit, author, date, subject, the hunk). Read it to decide "
            + ("what to tell the user." if read_only else "whether to reanchor or supersede.")
        ))

    # -- resources, and the prompt that walks the stale memories ---------------------------

    @server.resource(STALE_URI, name="stale", title="Stale memories", mime_type="application/json",
                     description="The memories whose anchored code changed (stale) or could not be read "
                                 "(unknown), checked now, with what changed; JSON.")
    def stale_memories() -> str:
        report = call(lambda: ws.drift(), ResourceError)
        flagged = report.flagged
        return _json({
            "about": DATA_LABEL, "checked": len(report.checked), "stale": report.count(Drift.STALE),
            "unknown": report.count(Drift.UNKNOWN), "memories": [_listed(md) for md in flagged[:4 * _PAGE]],
            "listed": len(flagged),
        })

    @server.resource(MEMORY_URI, name="memory", title="One memory", mime_type="application/json",
                     description="One memory in full by id (or a unique prefix), its drift checked now; JSON.")
    def one_memory(id: str) -> str:  # noqa: A002
        md, env = call(lambda: ws.check_id(id), ResourceError)
        return _json({"about": DATA_LABEL, "memory": _memory_view(md, env)})

    @server.prompt(REVERIFY_PROMPT, title="Re-verify stale memories",
                   description="Walk through the memories whose code changed: re-read each anchor, then "
                               + ("report which no longer hold." if read_only else
                                  "reanchor what still holds, supersede what changed, retract what was wrong."))
    def reverify_stale() -> str:
        flagged = call(lambda: ws.drift(), ResourceError).flagged
        return _reverify_text(flagged, read_only=read_only, propose=bool(propose))

    # -- writing ---------------------------------------------------------------------------

    if read_only:
        return server

    def remember(
        content: Annotated[str, Field(description="The memory: one claim, stated so it can be checked against the code.")],
        kind: Annotated[Literal[KINDS], Field(description="What sort of memory; expiry and ranking depend on it.")] = "note",  # type: ignore[valid-type]
        tags: Annotated[list[str], Field(description="Free tags.")] = [],  # noqa: B006
        anchors: Anchors = [],  # noqa: B006
        allow_secret: Annotated[bool, Field(description=(
            "true: record it although it looks like a secret, which a shared workspace (its ledger "
            "committed to git) refuses otherwise; the ledger keeps why. Only when the user said so."))] = False,
    ) -> Annotated[CallToolResult, WriteResult]:
        m = call(lambda: ws.record(content, kind=kind, tags=tags, anchors=anchors, propose=propose,
                                   allow_secret=allow_secret))
        if m.duplicate:  # the SDK found the same claim on the same anchors: nothing was written
            held = "proposed" if m.status == "proposed" else "remembered"
            return written(m, duplicate=True, note=f"already {held} as {m.id}; nothing written")
        if m.status == "proposed":
            return written(m, duplicate=False, note=_PROPOSED_NOTE.format(id=m.id))
        return written(m, duplicate=False)

    add(remember, "remember", "Record a memory", repeatable, (
        "Record a memory about this repository. Anchor every claim about code to what it "
        "rests on, as narrowly as is true: a symbol (`src/auth.py#TokenIssuer.issue`) or "
        "lines (`src/auth.py:40-52`) rather than a whole file. `@anchor(file=PATH, "
        "symbol=NAME)` markers in the content count too. anchorfs hashes the anchored code "
        "now, and every later read tells you if it changed. An anchor that cannot be taken "
        "(missing file, unknown symbol, outside the repo) is an error, never dropped. The same "
        "claim with the same anchors again returns the existing memory (`duplicate: true`). To "
        "correct an existing memory use `supersede`, not a new `remember`. The result names the "
        "active memories on the same ground this one may repeat (`similar`) or contradict "
        "(`conflicts`), each with why and how to settle it; nothing is retired on its own."
    ))

    def supersede(
        id: Id,  # noqa: A002
        content: Annotated[str, Field(description="The corrected memory, replacing the old one.")],
        reason: Annotated[str | None, Field(description="Why the old belief no longer holds (what changed).")] = None,
        anchors: Annotated[list[str] | None, Field(description=_ANCHOR_HELP + " Left out, null or []: keep the old anchors, re-taken on the code as it is now.")] = None,
        drop_anchors: Annotated[bool, Field(description="true: the new memory rests on no anchors (only the `@anchor` markers in its content), on purpose.")] = False,
    ) -> Annotated[CallToolResult, WriteResult]:
        if drop_anchors and anchors:
            raise ToolError("give either `anchors` (the new memory's anchors) or `drop_anchors: true` (none), not both")
        new = call(lambda: ws.supersede(id, content, reason=reason, anchors=anchors or None,
                                        drop_anchors=drop_anchors, propose=propose))
        if new.status == "proposed":
            return written(new, note=_PROPOSED_NOTE.format(id=new.id) + f"; {new.supersedes} stays in force until then")
        return written(new)

    add(supersede, "supersede", "Correct a memory", writing, (
        "Replace a memory whose claim no longer holds (typically a stale one, after reading "
        "the changed code) with the corrected belief. The old memory is kept as superseded, "
        "valid until now, so history stays queryable; the new one wins every recall. Prefer "
        "this to recording a second, contradicting memory. Without `anchors` (or with []) the "
        "new memory keeps the old one's anchors; `drop_anchors: true` leaves it unanchored."
    ))

    def retract(
        id: Id,  # noqa: A002
        reason: Annotated[str | None, Field(description="Why it was wrong.")] = None,
    ) -> Annotated[CallToolResult, WriteResult]:
        return written(call(lambda: ws.retract(id, reason=reason)))

    add(retract, "retract", "Withdraw a memory", repeatable, (
        "Withdraw a memory that was wrong and has no replacement. It stays in the history, "
        "marked retracted (`revert` brings it back). If there is a corrected belief, use "
        "`supersede` instead."
    ))

    def reanchor(
        id: Id,  # noqa: A002
        anchors: Annotated[list[str] | None, Field(description=_ANCHOR_HELP + " Left out, null or []: re-take the same anchors on the code as it is now.")] = None,
        reason: Annotated[str | None, Field(description="What you checked.")] = None,
        drop_anchors: Annotated[bool, Field(description="true: the memory rests on no anchors from now on, on purpose.")] = False,
    ) -> Annotated[CallToolResult, WriteResult]:
        if drop_anchors and anchors:
            raise ToolError("give either `anchors` (the memory's new anchors) or `drop_anchors: true` (none), not both")
        return written(call(lambda: ws.reanchor(id, anchors=anchors or None, reason=reason, drop_anchors=drop_anchors)))

    add(reanchor, "reanchor", "Confirm a memory still holds", writing, (
        "After re-reading the anchored code of a stale memory and confirming the claim still "
        "holds, anchor it to the code as it is now, so it reads fresh again; `anchors` moves it "
        "to other anchors (`anchors: []` or leaving it out keeps its own); `drop_anchors: true` "
        "leaves it unanchored on purpose. Only after checking: if the claim changed, `supersede` "
        "it instead."
    ))

    def revert(
        id: Id,  # noqa: A002
        reason: Annotated[str | None, Field(description="Why the supersede or retract is undone.")] = None,
    ) -> Annotated[CallToolResult, WriteResult]:
        return written(call(lambda: ws.revert(id, reason=reason)))

    add(revert, "revert", "Undo a supersede or retract", writing, (
        "Make a superseded or retracted memory active again: a supersede is undone (its "
        "successor is retracted), a retract is withdrawn. The ledger keeps every step; "
        "`history` shows them."
    ))

    return server


def serve(root: str | os.PathLike[str] | None = None, *, read_only: bool = False, propose: bool | None = None) -> None:
    """Run the server on stdio until the client hangs up; `propose` as in `build_server`."""
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise InputError("the MCP server needs the `mcp` package: install anchorfs with its `mcp` extra") from None
    server = build_server(root, read_only=read_only, propose=propose)
    server.run("stdio")


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("anchorfs")
    except Exception:
        return "0"
