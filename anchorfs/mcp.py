"""The MCP server: anchorfs's SDK as tools an agent can call, over stdio.

Each tool is one call into `Workspace` and returns structured results (the same dict forms as
the CLI's `--json`). The descriptions carry the discipline, since they are all an agent reads:
anchor a claim to the lines it rests on, supersede rather than edit when the code moved, and
re-verify a stale memory before relying on it.

The `mcp` package is imported here only, and only when a server is built; nothing else in
anchorfs pays for it. No `from __future__ import annotations` in this module: the SDK reads
the tools' signatures with `inspect.signature(eval_str=True)`, which cannot see names
imported inside `build_server`, so the annotations must be real objects.
"""

import json
import os
import shutil
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypedDict, TypeVar

from .errors import AnchorfsError, InputError
from .model import KINDS

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from .workspace import Workspace

__all__ = ["build_server", "serve", "write_mcp_config", "mcp_config", "SERVER_NAME", "WRITE_TOOLS", "INSTRUCTIONS"]

SERVER_NAME = "anchorfs"
WRITE_TOOLS = ("remember", "supersede", "retract", "reanchor")
MCP_CONFIG_FILE = ".mcp.json"

INSTRUCTIONS = """\
anchorfs is this repository's memory: decisions, constraints and facts about the code, each
anchored to the file, symbol or lines it rests on. Every read re-checks those anchors, so a
memory whose code changed comes back marked STALE instead of silently wrong.

Discipline:
- Before a task, call `context` (or `recall`) and read each memory's bracketed envelope.
- Anchor every claim about code to the lines it rests on (`path#Symbol` or `path:10-20`), so
  anchorfs can tell you when it stops being true. Never invent hashes; anchorfs takes them.
- A STALE memory may be wrong: re-read the anchored code before relying on it. If it still
  holds, `reanchor` it; if the world moved, `supersede` it with the corrected belief. Never
  record a duplicate instead: superseding keeps the history queryable.
- `retract` a belief that was simply wrong and has no successor. Nothing is ever deleted.
"""

_ANCHOR_HELP = (
    "Anchor specs, each `PATH` (whole file), `PATH#SYMBOL` (a function or class, dotted: "
    "`TokenIssuer.issue`), `PATH:START-END` or `PATH:LINE` (1-based lines), PATH relative to the "
    "workspace root. anchorfs reads and hashes the anchored content itself."
)

T = TypeVar("T")


class MemoryResult(TypedDict):
    memory: dict[str, Any]


class RecallResult(TypedDict):
    count: int
    hits: list[dict[str, Any]]


class ContextResult(TypedDict):
    markdown: str
    fresh: list[str]
    unknown: list[str]
    stale: list[str]
    omitted: list[str]
    tokens: int
    budget: int


class DriftResult(TypedDict):
    checked: int
    stale: int
    unknown: int
    fresh: int
    memories: list[dict[str, Any]]


class BisectOutput(TypedDict):
    result: dict[str, Any]


def build_server(root: str | os.PathLike[str] | None = None, *, read_only: bool = False,
                 workspace: "Workspace | None" = None) -> "MCPServer":
    """An MCP server over the workspace at `root` (found like git when None).

    The workspace is opened here, before any transport starts, so a server started outside a
    workspace fails at once with anchorfs's one-line error. `read_only` leaves out the tools
    that write memories (remember, supersede, retract, reanchor).
    """
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import CallToolResult, TextContent, ToolAnnotations
    from pydantic import Field

    from .workspace import open as open_ws

    ws = workspace if workspace is not None else open_ws(root)
    lock = threading.Lock()  # the SDK runs sync tools on worker threads; a Workspace is not thread-safe

    def call(fn: Callable[[], T]) -> T:
        try:
            with lock:
                return fn()
        except AnchorfsError as exc:
            raise ToolError(str(exc)) from None

    server: MCPServer = MCPServer(
        SERVER_NAME,
        instructions=INSTRUCTIONS + ("\nThis server is read-only: it cannot record or change memories.\n" if read_only else ""),
        version=_version(),
        log_level="WARNING",
    )
    reading = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    writing = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
    Id = Annotated[str, Field(description="A memory id, or a unique prefix of at least 4 characters.")]
    Anchors = Annotated[list[str], Field(description=_ANCHOR_HELP)]

    # -- reading ---------------------------------------------------------------------------

    def recall(
        query: Annotated[str, Field(description="What you want to know, in words.")],
        k: Annotated[int, Field(ge=1, le=100, description="How many memories at most.")] = 10,
        include_superseded: Annotated[bool, Field(description="Also past beliefs (superseded, retracted), marked so.")] = False,
        as_of: Annotated[str | None, Field(description="Recall as the memory stood then: ISO 8601 time or a span back like `7d`, `12h`.")] = None,
    ) -> RecallResult:
        hits = call(lambda: ws.query(query, k=k, include_superseded=include_superseded, as_of=as_of))
        return {"count": len(hits), "hits": [h.to_dict() for h in hits]}

    server.add_tool(recall, name="recall", title="Recall memories", annotations=reading, description=(
        "Search the repository's memories. Every hit was just re-checked against its anchors: "
        "`drift` is fresh, stale or unknown, `anchors` give each anchor's verdict and detail "
        "(what changed), and `envelope` is one line to read before trusting the memory. A stale "
        "hit is demoted, never hidden: re-read the anchored code before relying on it, then "
        "`reanchor` it if it still holds or `supersede` it if not."
    ))

    def context(
        task: Annotated[str, Field(description="The task at hand or a question: what the memories should be about.")],
        budget: Annotated[int, Field(ge=100, le=100_000, description="Token budget for the block (about 4 characters a token).")] = 1500,
    ) -> Annotated[CallToolResult, ContextResult]:
        block = call(lambda: ws.context(task, budget=budget))
        data = block.to_dict()
        out: ContextResult = {key: data[key] for key in ContextResult.__annotations__}  # type: ignore[assignment]
        return CallToolResult(content=[TextContent(type="text", text=block.markdown)], structured_content=dict(out))

    server.add_tool(context, name="context", title="Memories for a prompt", annotations=reading, description=(
        "One markdown block of the memories relevant to a task, ready to put in a prompt: "
        "fresh memories first, each with its status envelope, then stale ones under a warning "
        "banner that says what changed in the code. Call it when starting a task."
    ))

    def check_drift(
        id: Annotated[str | None, Field(description="One memory to re-check; leave out to check every anchored memory.")] = None,  # noqa: A002
    ) -> DriftResult:
        if id is not None:
            md, env = call(lambda: ws.check_id(id))
            one = {**md.to_dict(), "status": md.memory.status, "envelope": env}
            counts = {d: int(md.drift.value == d) for d in ("stale", "unknown", "fresh")}
            return {"checked": 1, **counts, "memories": [one]}  # type: ignore[typeddict-item]
        report = call(lambda: ws.drift())
        return report.to_dict()  # type: ignore[return-value]

    server.add_tool(check_drift, name="check_drift", title="Re-check anchors", annotations=reading, description=(
        "Re-check memories against the code now: one by id, or every anchored memory. Each "
        "comes back fresh, stale (an anchor changed, was deleted or its symbol is gone; the "
        "anchor's `detail` says which) or unknown (an anchor could not be read). Use it after "
        "editing code to see which memories your change made stale."
    ))

    if hasattr(ws, "bisect"):  # git history support (anchorfs.history), when the SDK offers it
        def bisect(id: Id) -> BisectOutput:  # noqa: A002
            result: Any = call(lambda: ws.bisect(id))  # type: ignore[attr-defined]
            return {"result": result.to_dict() if hasattr(result, "to_dict") else result}

        server.add_tool(bisect, name="bisect", title="Find the commit that staled a memory", annotations=reading,
                        description=(
                            "For a stale memory, walk git history to the commit that changed the "
                            "anchored code (`culprit`: commit, author, date, subject, the hunk). "
                            "Read it to decide whether to reanchor or supersede."
                        ))

    # -- writing ---------------------------------------------------------------------------

    if not read_only:
        def remember(
            content: Annotated[str, Field(description="The memory: one claim, stated so it can be checked against the code.")],
            kind: Annotated[Literal[KINDS], Field(description="What sort of memory; expiry and ranking depend on it.")] = "note",  # type: ignore[valid-type]
            tags: Annotated[list[str], Field(description="Free tags.")] = [],  # noqa: B006
            anchors: Anchors = [],  # noqa: B006
        ) -> MemoryResult:
            m = call(lambda: ws.record(content, kind=kind, tags=tags, anchors=anchors))
            return {"memory": m.to_dict()}

        server.add_tool(remember, name="remember", title="Record a memory", annotations=writing, description=(
            "Record a memory about this repository. Anchor every claim about code to what it "
            "rests on, as narrowly as is true: a symbol (`src/auth.py#TokenIssuer.issue`) or "
            "lines (`src/auth.py:40-52`) rather than a whole file. `@anchor(file=PATH, "
            "symbol=NAME)` markers in the content count too. anchorfs hashes the anchored code "
            "now, and every later read tells you if it changed. An anchor that cannot be taken "
            "(missing file, unknown symbol, outside the repo) is an error, never dropped. To "
            "correct an existing memory use `supersede`, not a new `remember`."
        ))

        def supersede(
            id: Id,  # noqa: A002
            content: Annotated[str, Field(description="The corrected memory, replacing the old one.")],
            reason: Annotated[str | None, Field(description="Why the old belief no longer holds (what changed).")] = None,
            anchors: Annotated[list[str] | None, Field(description=_ANCHOR_HELP + " Leave out to keep the old anchors, re-taken on the code as it is now.")] = None,
        ) -> MemoryResult:
            m = call(lambda: ws.supersede(id, content, reason=reason, anchors=anchors))
            return {"memory": m.to_dict()}

        server.add_tool(supersede, name="supersede", title="Correct a memory", annotations=writing, description=(
            "Replace a memory whose claim no longer holds (typically a stale one, after reading "
            "the changed code) with the corrected belief. The old memory is kept as superseded, "
            "valid until now, so history stays queryable; the new one wins every recall. Prefer "
            "this to recording a second, contradicting memory."
        ))

        def retract(
            id: Id,  # noqa: A002
            reason: Annotated[str | None, Field(description="Why it was wrong.")] = None,
        ) -> MemoryResult:
            m = call(lambda: ws.retract(id, reason=reason))
            return {"memory": m.to_dict()}

        server.add_tool(retract, name="retract", title="Withdraw a memory", annotations=writing, description=(
            "Withdraw a memory that was wrong and has no replacement. It stays in the history, "
            "marked retracted. If there is a corrected belief, use `supersede` instead."
        ))

        def reanchor(
            id: Id,  # noqa: A002
            anchors: Annotated[list[str] | None, Field(description=_ANCHOR_HELP + " Leave out to re-take the same anchors on the code as it is now.")] = None,
            reason: Annotated[str | None, Field(description="What you checked.")] = None,
        ) -> MemoryResult:
            m = call(lambda: ws.reanchor(id, anchors=anchors, reason=reason))
            return {"memory": m.to_dict()}

        server.add_tool(reanchor, name="reanchor", title="Confirm a memory still holds", annotations=writing, description=(
            "After re-reading the anchored code of a stale memory and confirming the claim still "
            "holds, anchor it to the code as it is now, so it reads fresh again. Only after "
            "checking: if the claim changed, `supersede` it instead."
        ))

    return server


def serve(root: str | os.PathLike[str] | None = None, *, read_only: bool = False) -> None:
    """Run the server on stdio until the client hangs up."""
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise InputError("the MCP server needs the `mcp` package: install anchorfs with its `mcp` extra") from None
    server = build_server(root, read_only=read_only)
    server.run("stdio")


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("anchorfs")
    except Exception:
        return "0"


def _command() -> list[str]:
    """How an agent host should start this anchorfs: its own script, else this interpreter."""
    script = Path(sys.executable).with_name("anchorfs")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    found = shutil.which("anchorfs")
    if found:
        return [found]
    return [os.path.abspath(sys.executable), "-m", "anchorfs.cli"]


def mcp_config(root: str | os.PathLike[str]) -> dict[str, Any]:
    """The `mcpServers` entry for this workspace, as agent hosts read it from `.mcp.json`."""
    command = _command()
    return {
        "type": "stdio",
        "command": command[0],
        "args": [*command[1:], "mcp", "--root", str(Path(root).resolve())],
    }


def write_mcp_config(root: str | os.PathLike[str]) -> Path:
    """Write (or update) `.mcp.json` at the workspace root; other servers in it are kept."""
    root = Path(root)
    path = root / MCP_CONFIG_FILE
    data: dict[str, Any] = {}
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as exc:
        raise InputError(f"{path} exists but is not readable JSON ({exc}); fix or remove it first") from None
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers", {}), dict):
        raise InputError(f"{path} exists but has no `mcpServers` object; fix or remove it first")
    data.setdefault("mcpServers", {})[SERVER_NAME] = mcp_config(root)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)
    return path
