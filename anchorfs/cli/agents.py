"""`anchorfs` commands that serve agents and their files: `context`, `mcp`, `serve`, `watch`,
and `import` / `export` of CLAUDE.md and AGENTS.md claims (registered on `cli` when imported).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click
import orjson

from . import server
from ..core.model import DATA_LABEL
from .base import _KIND, _common, _echo, _emit_json, _session, _short, _text_value, cli

__all__ = ["context", "doctor", "export", "import_cmd", "lsp", "mcp", "serve", "watch"]


@cli.command(name="import")
@_common
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--apply", "apply_", is_flag=True, help="Take the anchors suggested from each claim's text.")
@click.option("--kind", type=_KIND, default="note", show_default=True, help="The kind of the memories recorded.")
@click.pass_context
def import_cmd(ctx: click.Context, root: str | None, as_json: bool, files: tuple[str, ...], apply_: bool,
               kind: str) -> None:
    """Import the claims of CLAUDE.md / AGENTS.md files as memories (again: idempotent)."""
    with _session(ctx, root, as_json) as c:
        ws = c.ws()
        results = [ws.import_file(f, apply=apply_, kind=kind) for f in files]
        if c.json:
            _emit_json({"files": [r.to_dict() for r in results]})
            return
        for r in results:
            _echo(f"{r.file}: {len(r.recorded)} recorded, {len(r.unchanged)} unchanged, "
                  f"{len(r.superseded)} superseded"
                  + (f", {r.not_in_file} no longer in the file (kept)" if r.not_in_file else ""))
            short = ws.short_ids(r.suggestions)
            for mid, specs in r.suggestions.items():
                _echo(f"  {short[mid]}: {', '.join(specs)}")
            if r.suggestions:
                n = len(r.suggestions)
                _echo(f"  {'anchored' if r.applied else 'could anchor'} {n} memor{'y' if n == 1 else 'ies'}"
                      + ("" if r.applied else " (--apply takes these anchors)"))


@cli.command()
@_common
@click.option("--to", "to", required=True, type=click.Path(dir_okay=False),
              help="The instructions file to write the block into (created when missing).")
@click.pass_context
def export(ctx: click.Context, root: str | None, as_json: bool, to: str) -> None:
    """Write the active memories with their freshness into a managed block of a file (CLAUDE.md)."""
    with _session(ctx, root, as_json) as c:
        r = c.ws().export_to(to)
        if c.json:
            _emit_json(r.to_dict())
        else:
            n = r.memories
            _echo(f"{'wrote' if r.changed else 'unchanged:'} {n} memor{'y' if n == 1 else 'ies'}"
                  f" ({r.stale} stale) {'to' if r.changed else 'in'} {r.path}")


@cli.command()
@_common
@click.argument("task", callback=_text_value)
@click.option("--budget", type=click.IntRange(1), default=None, help="Token budget (about 4 characters a token; default 1500).")
@click.pass_context
def context(ctx: click.Context, root: str | None, as_json: bool, task: str, budget: int | None) -> None:
    """A markdown block of the memories for TASK, ready for a prompt (stale ones flagged)."""
    with _session(ctx, root, as_json) as c:
        block = c.ws().context(task, budget=budget)
        server.start_behind(c.ws())  # the next one in this workspace is answered warm
        if c.json:
            _emit_json(block.to_dict())
        else:
            _echo(DATA_LABEL + "\n\n" + block.markdown)


@cli.command()
@_common
@click.option("--read-only", is_flag=True,
              help="Leave out the tools that write (remember, supersede, retract, reanchor, revert); write nothing.")
@click.option("--propose", is_flag=True, default=None,
              help="The agent's remember and supersede land as proposed, served only after `anchorfs accept ID` "
                   "(default: the mcp.propose key).")
@click.pass_context
def mcp(ctx: click.Context, root: str | None, as_json: bool, read_only: bool, propose: bool | None) -> None:
    """Run the MCP server on stdio (for agent hosts; see `anchorfs init --mcp`)."""
    from ..agents.mcp import serve

    if as_json:  # taken by every command (`_common`), but here it could only be ignored
        raise click.UsageError("--json does not apply to mcp: the server always speaks JSON-RPC on stdio")
    if read_only and propose:
        raise click.UsageError("--propose and --read-only exclude each other: a read-only server writes nothing")
    with _session(ctx, root, as_json) as c:
        serve(c.root, read_only=read_only, propose=propose)


@cli.command()
@_common
@click.pass_context
def lsp(ctx: click.Context, root: str | None, as_json: bool) -> None:
    """Run the language server on stdio, for editors: memories on the lines they rest on, stale ones
    as warnings (`anchorfs init --for neovim|helix|zed|vscode`; docs/editors.md). Needs `anchorfs[lsp]`."""
    from ..agents.lsp import serve as serve_lsp

    if as_json:
        raise click.UsageError("--json does not apply to lsp: the server always speaks JSON-RPC on stdio")
    with _session(ctx, root, as_json) as c:
        serve_lsp(c.root)


@cli.command()
@_common
@click.option("--idle-timeout", type=click.FloatRange(min=0), default=1800.0, show_default=True, metavar="SECONDS",
              help="Exit after this long without a request (0: never).")
@click.option("--detach", is_flag=True, help="Start it in the background and return once it answers.")
@click.option("--status", is_flag=True, help="Say whether a server runs for this workspace (exit 1 if none).")
@click.option("--stop", "stop_", is_flag=True, help="Ask this workspace's server to exit.")
@click.pass_context
def serve(ctx: click.Context, root: str | None, as_json: bool, idle_timeout: float, detach: bool, status: bool,
          stop_: bool) -> None:
    """Keep this workspace warm for the CLI: `query`, `context`, `list`, `record` and `show`
    are handed to this process (a Unix socket in .anchorfs/) and answer in milliseconds.

    The answers are the in-process CLI's own: the server runs the same command with the
    caller's arguments, folder and output encodings. Without a server, or when it is busy,
    slow, gone, or the caller's environment differs from the server's, the command runs in
    process as before. Only the same user is served; set ANCHORFS_NO_SERVER=1 to bypass it.
    """
    if sum((detach, status, stop_)) > 1:
        raise click.UsageError("--detach, --status and --stop exclude each other")
    with _session(ctx, root, as_json) as c:
        if status or stop_:
            info = server.ping(c.root) if status else None
            stopped = server.stop(c.root) if stop_ else False
            if c.json:
                _emit_json({"running": info is not None, **(info or {})} if status else {"stopped": stopped})
            elif status:
                _echo(f"serving {info['root']} on {info['socket']} (pid {info['pid']}, {info['served']} served)"
                      if info else "no server runs for this workspace")
            else:
                _echo("stopped" if stopped else "no server runs for this workspace")
            if not (info or stopped):
                ctx.exit(1)
            return
        if detach:
            info = server.detach(c.root, idle_timeout=idle_timeout)
        else:
            def ready(s: "server.Server") -> None:
                if c.json:
                    sys.stdout.write(orjson.dumps({"root": s.root_real, "socket": s.path, "pid": os.getpid()}).decode()
                                     + "\n")
                    sys.stdout.flush()
                else:
                    _echo(f"serving {s.root_real} on {s.path} (pid {os.getpid()}; Ctrl-C to stop)", err=True)

            server.Server(c.root, idle_timeout=idle_timeout, on_ready=ready).serve()
            return
        if c.json:
            _emit_json(info)
        else:
            _echo(f"serving {info['root']} on {info['socket']} (pid {info['pid']})")


def _event_line(event: Any, short: str) -> str:
    when = event.at.astimezone().strftime("%H:%M:%S")
    return f"{when}  {short}  {event.before} -> {event.after}  {event.detail}  · {_short(event.content, 50)}"


@cli.command()
@_common
@click.pass_context
def watch(ctx: click.Context, root: str | None, as_json: bool) -> None:
    """Re-check memories as the files under them change; report each drift change once."""
    import logging

    from ..agents.watch import watch as watch_ws

    logging.getLogger("watchfiles").setLevel(logging.ERROR)  # its Ctrl-C notice; we say "stopped"
    with _session(ctx, root, as_json) as c:
        ws = c.ws()

        def on_event(event: Any) -> None:
            if c.json:
                sys.stdout.write(orjson.dumps(event.to_dict()).decode() + "\n")
                sys.stdout.flush()
            else:
                _echo(_event_line(event, ws.short_ids([event.id])[event.id]))

        def on_ready(memories: int, files: int) -> None:
            if not c.json:
                mems = f"{memories} memor{'y' if memories == 1 else 'ies'}"
                _echo(f"watching {mems} anchored to {files} file{'' if files == 1 else 's'} in {ws.root}"
                           " (Ctrl-C to stop)", err=True)

        try:
            watch_ws(ws, on_event=on_event, on_ready=on_ready)
        except KeyboardInterrupt:
            pass
        if not c.json:
            _echo("stopped", err=True)


@cli.command()
@_common
@click.pass_context
def doctor(ctx: click.Context, root: str | None, as_json: bool) -> None:
    """Check the install end to end: on PATH, the workspace, each host file's command, hooks, store.

    Example: `anchorfs doctor` after `anchorfs init --for claude`; exit 1 when something needs a fix.
    """
    from ..agents.hosts import doctor as check

    with _session(ctx, root, as_json) as c:
        found = check(c.root)
        if c.json:
            _emit_json({"ok": all(f.ok for f in found), "checks": [f._asdict() for f in found]})
        else:
            for f in found:
                _echo(f"{'ok ' if f.ok else 'FIX'}  {f.name}: {f.detail}" + (f"\n     -> {f.fix}" if f.fix else ""))
        if not all(f.ok for f in found):
            ctx.exit(1)
