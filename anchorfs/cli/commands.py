"""The `anchorfs` command: each command parses, calls one Workspace method, formats.

Exit codes: 2 for a command line click refuses by its shape alone (unknown option, missing
argument, bad choice, unparsable time, empty text); 1 for what anchorfs finds doing the work,
as one line on stderr; 90 from `drift`, `verify` and `at` when something is stale. Anchor
paths are taken from the current folder first, as git takes pathspecs. `--json` for programs.
"""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from . import server
from ..core.model import DATA_LABEL, Drift, Memory, cut, drift_of, one_line, to_iso, under
from .base import (  # noqa: F401 (re-exported: the names of `anchorfs.cli.commands` before the split)
    _KIND, EXIT_STALE, _common, _Ctx, _echo, _emit, _emit_json, _from_cwd, _json_text, _print_memory, printable,
    _progress, _read_text, _session, _short, _split_spec, _styled, _table, _text_value, _time_value, cli, run,
    word_diff,
)

if TYPE_CHECKING:
    from ..drift import DriftReport
    from ..sdk.workspace import Workspace

__all__ = ["cli", "main", "EXIT_STALE"]


# -- commands ------------------------------------------------------------------------------

_HOST = click.Choice(["claude", "cursor", "vscode", "codex", "all", "neovim", "helix", "zed"])  # editors: `anchorfs lsp`


@cli.command()
@_common
@click.option("--for", "hosts", type=_HOST, multiple=True,
              help="Wire anchorfs into this agent host: its MCP config, its rules file, Claude Code's hooks (repeatable).")
@click.option("--absolute", is_flag=True,
              help="With --for: name this install's anchorfs and the workspace by absolute path (not portable).")
@click.option("--mcp", "write_mcp", is_flag=True, help="Also write a .mcp.json with absolute paths (the old form).")
@click.option("--nested", is_flag=True, help="Inside another workspace: make a separate one anyway (it hides the parent's memories here).")
@click.option("--shared/--private", "shared", default=None,
              help="Shared: the ledger is committed and merges by entry id (the default in git); private: all of .anchorfs/ ignored.")
@click.pass_context
def init(ctx: click.Context, root: str | None, as_json: bool, hosts: tuple[str, ...], absolute: bool,
         write_mcp: bool, nested: bool, shared: bool | None) -> None:
    """Create the .anchorfs/ state folder here (or at --root); --for HOST wires it into an agent host."""
    from ..sdk.workspace import init as init_ws

    if absolute and not hosts:
        raise click.UsageError("--absolute goes with --for HOST")
    with _session(ctx, root, as_json) as c:
        from ..agents.hosts import check_setup, server_command, setup, write_mcp_config
        from ..core.git import read_git
        from ..core.statedir import check_init
        from ..sdk.team import check_mode, init_mode
        # every refusal before the first write: a refused init leaves no .anchorfs/ behind
        planned = check_init(c.root, nested=nested)
        check_mode(planned, shared)
        if hosts:
            check_setup(planned, hosts)
        if write_mcp:
            check_setup(planned, ["claude"], mcp_only=True)
        path = init_ws(c.root, nested=nested)
        init_mode(path, shared)
        unwired = hosts and not absolute and shutil.which("anchorfs") is None  # the host would run nothing
        written = setup(path, hosts, absolute=absolute or bool(unwired)) if hosts else []
        mcp_path = write_mcp_config(path) if write_mcp else None
        said = (f"`anchorfs` is not on PATH: the host files name this install, {server_command(path, absolute=True)[0]}"
                " (install it on PATH, README: Install, and run init --for again for portable ones)") if unwired else None
        if c.json:
            _emit_json({"root": str(path), "mcp": str(mcp_path) if mcp_path else None,
                        "hosts": [w.to_dict() for w in written], "note": said})
        else:
            _echo(f"anchorfs workspace at {path}")
            if said:
                _echo(said, err=True)
            for w in written:
                _echo(w.note or f"{'wrote' if w.changed else 'unchanged'} {w.path}  ({w.host} {w.kind})")
            for p in (w.path for w in written if w.host == "vscode" and read_git(path, "check-ignore", "--", str(w.path))):
                _echo(f"warning: git ignores {p}: your team will never see it (see .gitignore)", err=True)
            if mcp_path:
                _echo(f"wrote {mcp_path}")


@cli.command()
@_common
@click.argument("text", required=False, callback=_text_value)
@click.option("--file", "from_file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Read the text from this file (UTF-8) instead of TEXT.")
@click.option("--kind", type=_KIND, default="note", show_default=True)
@click.option("--tag", "tags", multiple=True, help="A tag (repeatable).")
@click.option("--anchor", "anchors", multiple=True, metavar="SPEC",
              help="PATH, PATH#SYMBOL, PATH:START-END (repeatable; paths from the current folder first).")
@click.option("--author", default=None)
@click.option("--allow-secret", is_flag=True, help="Record text a shared workspace's secret check flags (the ledger says so).")
@click.pass_context
def record(ctx: click.Context, root: str | None, as_json: bool, text: str | None, from_file: str | None, kind: str,
           tags: tuple[str, ...], anchors: tuple[str, ...], author: str | None, allow_secret: bool) -> None:
    """Record a memory, anchored to what it rests on. TEXT `-` reads stdin."""
    content = _read_text(text, from_file)
    with _session(ctx, root, as_json) as c:
        ws = c.ws()
        m = ws.record(content, kind=kind, tags=tags, anchors=_from_cwd(ws, anchors), author=author,
                      allow_secret=allow_secret)
        _emit(c, m.to_dict(), f"recorded {ws.short_ids([m.id])[m.id]} ({len(m.anchors)} anchor{'s' if len(m.anchors) != 1 else ''})"
              + _candidates_text(ws, m))


def _candidates_text(ws: "Workspace", m: Memory) -> str:
    """The memories on the same ground a write may repeat or contradict, each with why and its settling command."""
    short = ws.short_ids(c.id for c in m.candidates)
    return "".join(f"\n  {'conflicts with' if c.kind == 'conflicts' else 'similar to'} {short[c.id]}: "
                   f"{one_line(c.why)}\n    settle: {c.settle}" for c in m.candidates)


@cli.command()
@_common
@click.argument("text", callback=_text_value)
@click.option("-k", "k", type=click.IntRange(1, 1000), default=None, help="How many hits.")
@click.option("--include-superseded", is_flag=True, help="Also superseded and retracted memories, marked.")
@click.option("--as-of", "as_of", default=None, metavar="TIME", callback=_time_value,
              help="The store as it stood then: ISO 8601 or 7d, 12h.")
@click.option("--stale", type=click.Choice(["include", "exclude", "only"]), default="include", show_default=True,
              help="Keep stale hits (demoted), leave them out, or show them alone.")
@click.option("--all", "every", is_flag=True, help="Also the weak matches (below the relevance floor), marked.")
@click.pass_context
def query(ctx: click.Context, root: str | None, as_json: bool, text: str, k: int | None,
          include_superseded: bool, as_of: str | None, stale: str, every: bool) -> None:
    """Search memories; every hit is re-checked against its anchors."""
    with _session(ctx, root, as_json) as c:
        hits = c.ws().query(text, k=k, include_superseded=include_superseded, as_of=as_of, stale=stale)
        server.start_behind(c.ws())  # the next query in this workspace is answered warm
        if c.json:
            _emit_json({"hits": [h.to_dict() for h in hits]})
            return
        if not hits:
            _echo("no memories found")
            return
        _echo(DATA_LABEL)
        shown = hits if every else [h for h in hits if not h.weak] or hits[:3]
        if all(h.weak for h in shown):  # the closest things are listed, and called what they are
            _echo("no memory matches well; closest:")
        short = c.ws().short_ids(i for h in shown for i in (h.memory.id, h.memory.superseded_by) if i)
        for h in shown:
            mark, by = "" if h.memory.status == "active" else f" ({h.memory.status})", h.memory.superseded_by
            env = h.envelope.replace(f" by {by} ", f" by {short[by]} ") if by else h.envelope  # the successor too
            _echo(f"{h.score:.3f}  (relevance {h.relevance:.3f})  {short[h.memory.id]}{mark}  {env}")
            _echo(f"       {under(h.memory.content, '       ')}")
        if len(shown) < len(hits):
            n = len(hits) - len(shown)
            _echo(f"{n} weak match{'es' if n > 1 else ''} left out (--all shows them)")


@cli.command()
@_common
@click.argument("memory_id", metavar="ID")
@click.pass_context
def show(ctx: click.Context, root: str | None, as_json: bool, memory_id: str) -> None:
    """One memory, whole, with its drift checked now."""
    with _session(ctx, root, as_json) as c:
        ws = c.ws()
        m = ws.get(memory_id)
        md = ws.check(m)  # a fresh check of this one memory, not the last pass's
        at, by = ws.last_handed().get(m.id, (None, None))
        if c.json:
            _emit_json({**m.to_dict(), "drift": md.drift.value if m.anchors or m.stale_claims else "unanchored",
                        "checks": [ch.to_dict() for ch in md.checks],
                        "last_handed": {"at": to_iso(at), "by": by} if at else None})
        else:
            from ..drift.report import envelope

            _print_memory(m, md, envelope(m, md.drift, md.checks, expiry_days=ws.config.expiry_days(m.kind)))
            _echo(f"  last handed to an agent {at.isoformat(timespec='seconds')} by {by}" if at else
                  "  never handed to an agent (recall, context, hooks) since this clone's usage record began")


@cli.command(name="list")
@_common
@click.option("--limit", type=click.IntRange(1), default=None)
@click.option("--status", type=click.Choice(["active", "proposed", "superseded", "retracted", "all"]), default="active",
              show_default=True, help="proposed: written by an agent under review (`mcp --propose`), drift checked now.")
@click.option("--drift", "drift_filter", type=click.Choice(["fresh", "stale", "unknown", "unanchored"]), default=None,
              help="Keep the memories of this drift, checked now; unanchored: no anchors.")
@click.option("--unused", metavar="SPAN", default=None,
              help="Keep the memories no agent was handed (recall, context, hooks) for SPAN (28d) or since a time.")
@click.pass_context
def list_cmd(ctx: click.Context, root: str | None, as_json: bool, limit: int | None, status: str,
             drift_filter: str | None, unused: str | None) -> None:
    """Memories, newest first, with their drift checked now."""
    with _session(ctx, root, as_json) as c:
        ws = c.ws()
        mems = ws.list(status=status, unused=unused)
        drifts = ws.drift_of(mems)  # one pass: the filter and the column read the same check
        if drift_filter is not None:
            mems = [m for m in mems if drifts[m.id] == drift_filter]
        mems = mems[:limit] if limit else mems
        if c.json:
            _emit_json({"memories": [{**m.to_dict(), "drift": drifts[m.id]} for m in mems]})
            return
        short = ws.short_ids(m.id for m in mems)
        rows = [(short[m.id], m.kind, m.status, drifts[m.id], len(m.anchors), _short(m.content)) for m in mems]
        _echo(_table(rows, ["id", "kind", "status", "drift", "anchors", "content"]))


@cli.command()
@_common
@click.option("--embedder", default=None, help="Rebuild with this embedder (hashing, e5, minilm).")
@click.pass_context
def reindex(ctx: click.Context, root: str | None, as_json: bool, embedder: str | None) -> None:
    """Rebuild the LanceDB store from the ledger alone."""
    from ..sdk.workspace import Workspace

    with _session(ctx, root, as_json) as c:
        ws = c.ws(embedder=embedder)
        advance, finish = _progress("reindexing")
        try:
            n = ws.reindex(embedder=embedder, progress=advance)
        finally:
            finish()
        built = ws.embedder.name
        wanted = Workspace(ws.root).embedder.name
        if c.json:
            _emit_json({"memories": n, "embedder": built, "next_embedder": wanted})
        else:
            _echo(f"reindexed {n} memories with the {built} embedder")
        if wanted != built:
            _echo(f"anchorfs: warning: `embedder =` in .anchorfs.toml or ANCHORFS_EMBEDDER asks for {wanted!r}, "
                  f"so later commands will refuse this {built} store; set `embedder = \"{built}\"` "
                  f"(or ANCHORFS_EMBEDDER={built})", err=True)


@cli.command()
@_common
@click.option("--all", "every", is_flag=True, help="List every checked memory, fresh ones too (default: the counts and the others).")
@click.option("--rehash", is_flag=True, help="Hash every anchored file again, trusting no cached hash (a write the file's "
              "times do not show: a shared mmap, a hard link written elsewhere).")
@click.pass_context
def drift(ctx: click.Context, root: str | None, as_json: bool, every: bool, rehash: bool) -> None:
    """Check every active anchored memory now; exit 90 when any is stale."""
    with _session(ctx, root, as_json) as c:
        ws = c.ws()
        advance, finish = _progress("checking anchors")
        try:
            report = ws.drift(progress=advance, rehash=rehash)
        finally:
            finish()
        d = report.to_dict(every=every)
        # the text stream, not click's: its error handler escapes what the terminal cannot show
        sys.stdout.write(_json_text(d) if c.json else _styled(_drift_text(report, d, ws, every=every)) + "\n")
        if report.stale:
            ctx.exit(EXIT_STALE)


@cli.command()
@_common
@click.option("--apply", is_flag=True, help="Merge each near-duplicate cluster into its newest memory (never a conflict).")
@click.option("--keep", metavar="ID", default=None, help="Settle ID's conflicts: it supersedes the memories it contradicts.")
@click.pass_context
def tidy(ctx: click.Context, root: str | None, as_json: bool, apply: bool, keep: str | None) -> None:
    """Near-duplicates and candidate conflicts among the active memories, grouped by ground."""
    with _session(ctx, root, as_json) as c:
        ws = c.ws()
        report = ws.tidy(apply=apply, keep=keep)
        if c.json:
            return _emit_json(report.to_dict())
        if keep is not None:
            return _echo(f"kept {keep}; superseded by it: {', '.join(ws.short_ids(report.merged).values())}")
        texts = ws._memories()
        short = ws.short_ids({i for cl in [*report.similar, *report.conflicts] for i in cl.ids})
        out = [f"{report.checked} active memories: {len(report.similar)} near-duplicate cluster(s), "
               f"{len(report.conflicts)} candidate conflict(s)"]
        for title, clusters in (("near-duplicates", report.similar), ("conflicts", report.conflicts)):
            for cl in clusters:
                out.append(f"{title} on {cl.ground.split(' ', 2)[-1]}: {cl.why}; {cl.action}")
                out.extend(f"  {short[i]}  {under(cut(texts[i].content, 100), '    ')}" for i in cl.ids)
        if report.merged:
            out.append(f"merged {len(report.merged)} near-duplicate(s) into their cluster's newest memory")
        sys.stdout.write(printable("\n".join(out)) + "\n")


def _drift_text(report: "DriftReport", d: dict[str, Any], ws: "Workspace", *, every: bool = False) -> str:
    """`drift`'s output for people: the memories that are not fresh (`every`: all), then the counts."""
    bad = report.memories if every else report.flagged
    short, rows = ws.short_ids(md.memory.id for md in bad) if bad else {}, []
    for md in bad:  # why = the anchors that are not fresh by drift (moved, reformatted: fresh)
        why = [ch.detail for ch in md.checks if drift_of((ch.verdict,)) is not Drift.FRESH]
        why += [f"claim `{c.value}`: {c.detail}" for c in md.memory.stale_claims]  # found by verify --mark
        rows.append((short[md.memory.id], md.drift.value, _short(md.memory.content, 40), "; ".join(why)))
    text = _table(rows, ["id", "drift", "memory", "why"]) + "\n" if rows else ""
    return text + f"checked {d['checked']}: {d['stale']} stale, {d['unknown']} unknown, {d['fresh']} fresh"


@cli.command()
@_common
@click.argument("memory_id", metavar="ID")
@click.option("--to", "--anchor", "anchors", multiple=True, metavar="SPEC",
              help="New anchors (repeatable; paths from the current folder first; default: the old ones, as they are now).")
@click.option("--reason", default=None)
@click.pass_context
def reanchor(ctx: click.Context, root: str | None, as_json: bool, memory_id: str, anchors: tuple[str, ...],
             reason: str | None) -> None:
    """Anchor a re-verified memory to the content as it is now."""
    with _session(ctx, root, as_json) as c:
        ws = c.ws()
        m = ws.reanchor(memory_id, anchors=_from_cwd(ws, anchors) or None, reason=reason)
        _emit(c, m.to_dict(), f"reanchored {ws.short_ids([m.id])[m.id]}: {', '.join(a.spec for a in m.anchors)}")


@cli.command()
@_common
@click.argument("memory_id", metavar="ID")
@click.argument("text", callback=_text_value)
@click.option("--reason", default=None)
@click.option("--anchor", "anchors", multiple=True, metavar="SPEC",
              help="Anchors for the successor (repeatable; paths from the current folder first; default: inherited).")
@click.option("--kind", type=_KIND, default=None, help="Default: the old memory's.")
@click.option("--tag", "tags", multiple=True, help="Default: the old memory's.")
@click.option("--allow-secret", is_flag=True, help="Record text a shared workspace's secret check flags (the ledger says so).")
@click.pass_context
def supersede(ctx: click.Context, root: str | None, as_json: bool, memory_id: str, text: str,
              reason: str | None, anchors: tuple[str, ...], kind: str | None, tags: tuple[str, ...],
              allow_secret: bool) -> None:
    """Correct a memory: the new one wins, the old one keeps its validity bounds."""
    with _session(ctx, root, as_json) as c:
        ws = c.ws()
        m = ws.supersede(memory_id, text, reason=reason, anchors=_from_cwd(ws, anchors) or None, kind=kind,
                         tags=tags or None, allow_secret=allow_secret)
        short = ws.short_ids([m.id, m.supersedes or m.id])
        _emit(c, m.to_dict(), f"{short[m.id]} supersedes {short[m.supersedes or m.id]}" + _candidates_text(ws, m))


def _decision(name: str, doc: str, said: str) -> None:
    """`retract`, `accept`, `reject`: one memory, an optional reason, the SDK method of that name."""

    @cli.command(name, help=doc)
    @_common
    @click.argument("memory_id", metavar="ID")
    @click.option("--reason", default=None, help="Why (kept in the ledger).")
    @click.pass_context
    def command(ctx: click.Context, root: str | None, as_json: bool, memory_id: str, reason: str | None) -> None:
        with _session(ctx, root, as_json) as c:
            ws = c.ws()
            m = getattr(ws, name)(memory_id, reason=reason)
            short = ws.short_ids([m.id, m.supersedes or m.id])
            retired = f"; {short[m.supersedes]} is superseded by it" if name == "accept" and m.supersedes else ""
            _emit(c, m.to_dict(), f"{said} {short[m.id]}{retired}")


_decision("retract", "Withdraw a belief with no successor.", "retracted")
_decision("accept", "Accept a proposed memory (from `mcp --propose`): served from now on; a proposed supersede "
          "retires its predecessor now.", "accepted")
_decision("reject", "Turn down a proposed memory: retracted with the reason, never served.", "rejected")


@cli.command()
@_common
@click.argument("memory_id", metavar="ID")
@click.option("--reason", required=True, help="Why the text must go (kept in the ledger).")
@click.option("--anchors", "with_anchors", is_flag=True, help="Remove its anchors too (their paths and symbols).")
@click.pass_context
def redact(ctx: click.Context, root: str | None, as_json: bool, memory_id: str, reason: str,
           with_anchors: bool) -> None:
    """Purge a memory's text from the ledger (a leaked secret); the ledger keeps that it was there."""
    with _session(ctx, root, as_json) as c:
        ws = c.ws()
        m = ws.redact(memory_id, reason=reason, anchors=with_anchors)
        from ..sdk.team import is_shared

        rewrite = None
        if is_shared(ws.root):
            rewrite = ("git filter-repo --replace-text <(printf '%s\\n' "
                       f"'regex:(\"id\":\"{m.id}\",\"content\":)\"(?:[^\"\\\\]|\\\\.)*\"==>\\1\"[redacted]\"')")
        _emit(c, {**m.to_dict(), "history_command": rewrite}, f"redacted {m.id}: its text is gone from the ledger and the store"
              + (f"\nthe ledger is committed: git history still holds the text. To remove it there (git-filter-repo):"
                 f"\n  {rewrite}\nclones made before keep it." if rewrite else ""))


@cli.command()
@_common
@click.argument("memory_id", metavar="ID")
@click.option("--reason", default=None)
@click.pass_context
def revert(ctx: click.Context, root: str | None, as_json: bool, memory_id: str, reason: str | None) -> None:
    """Undo a supersede or a retract; ID may be the old memory or its successor."""
    with _session(ctx, root, as_json) as c:
        ws = c.ws()
        before = ws.get(memory_id)
        successor = before.superseded_by if before.status == "superseded" else (
            before.id if before.status == "active" and before.supersedes else None)
        m = ws.revert(memory_id, reason=reason)
        short = ws.short_ids([m.id, successor or m.id])
        undone = (f"; its successor {short[successor]} is retracted" if successor and successor != m.id
                  and ws.get(successor).status == "retracted" else "")
        _emit(c, m.to_dict(), f"{short[m.id]} is active again{undone}")


@cli.command()
@_common
@click.argument("memory_id", metavar="ID")
@click.pass_context
def history(ctx: click.Context, root: str | None, as_json: bool, memory_id: str) -> None:
    """A memory's whole supersede chain, oldest first."""
    with _session(ctx, root, as_json) as c:
        events = c.ws().history(memory_id)
        if c.json:
            _emit_json({"id": memory_id, "events": [e.to_dict() for e in events]})
            return
        short = c.ws().short_ids(e.memory.id for e in events)
        rows = [(e.at.isoformat(timespec="minutes")[:16], e.op, short[e.memory.id], e.memory.status, e.actor,
                 _short(e.reason or "", 20)) for e in events]
        _echo(_table(rows, ["at", "op", "id", "status", "actor", "reason"]))
        texts: dict[str, str] = {}
        for m in (e.memory for e in events):  # each text once, a successor's as a word diff on the one it replaced
            if m.id not in texts:
                texts[m.id] = m.content
                was = texts.get(m.supersedes or "")
                _echo(textwrap.fill(f"{short[m.id]}: {word_diff(was, m.content) if was else m.content}",
                                    shutil.get_terminal_size().columns, subsequent_indent=" " * 10))


@cli.command()
@_common
@click.option("--since", default=None, metavar="TIME", callback=_time_value, help="ISO 8601 or 7d, 12h.")
@click.option("--limit", type=click.IntRange(1), default=None)
@click.pass_context
def ledger(ctx: click.Context, root: str | None, as_json: bool, since: str | None, limit: int | None) -> None:
    """The audit trail, newest first."""
    with _session(ctx, root, as_json) as c:
        entries = c.ws().ledger_entries(since=since, limit=limit)
        if c.json:
            _emit_json({"entries": [e.to_dict() for e in entries]})
            return
        short = c.ws().short_ids(m.id for e in entries for m in e.memories)
        rows = [(e.at.isoformat(timespec="minutes")[:16], e.op, e.actor, short[m.id], m.status, _short(m.content, 50),
                 e.reason or "") for e in entries for m in e.memories]
        _echo(_table(rows, ["at", "op", "actor", "memory", "status", "content", "reason"]))


@cli.command()
@_common
@click.option("--keep", type=click.Path(file_okay=False), default=None,
              help="Build the demo workspace in this new or empty folder and keep it (same as --root).")
@click.pass_context
def demo(ctx: click.Context, root: str | None, as_json: bool, keep: str | None) -> None:
    """Build a throwaway git workspace, record anchored memories, edit the code, query.

    `--root DIR` (like `--keep DIR`) is where the demo runs: a new or empty folder, kept.
    """
    from .demo import run_demo

    parent: _Ctx = ctx.obj
    where = root or parent.root  # never ANCHORFS_ROOT or the cwd's workspace: the demo makes its own
    if where and keep and os.path.abspath(where) != os.path.abspath(keep):
        raise click.UsageError("--root and --keep both name where the demo runs; give one")
    with _session(ctx, root, as_json) as c:
        run_demo(keep or where, as_json=c.json, echo=click.echo)


@cli.command()
@_common
@click.option("--net", is_flag=True, help="Also check URLs (HEAD, then GET; 8 s timeout).")
@click.option("--mark", is_flag=True, help="Record the verdicts in the ledger.")
@click.option("--suggest", "suggest_", is_flag=True, help="Propose anchors for unanchored memories.")
@click.option("--apply", "apply_", is_flag=True, help="With --suggest: anchor them (a reanchor entry).")
@click.option("--file", "from_file", type=click.Path(dir_okay=False), default=None,
              help="Check the claims of this instructions file (CLAUDE.md, AGENTS.md) instead, without importing it.")
@click.pass_context
def verify(ctx: click.Context, root: str | None, as_json: bool, net: bool, mark: bool, suggest_: bool,
           apply_: bool, from_file: str | None) -> None:
    """Check what memories' prose claims (paths, symbols, URLs); exit 90 when any is stale."""
    if apply_ and not suggest_:
        raise click.UsageError("--apply goes with --suggest")
    if from_file is not None and (mark or suggest_):
        raise click.UsageError("--file checks a file's claims; --mark and --suggest are for memories")
    with _session(ctx, root, as_json) as c:
        ws = c.ws()
        if suggest_:
            found = ws.suggest(apply=apply_)
            if c.json:
                _emit_json({**found.to_dict(), "applied": apply_})
            else:
                short = ws.short_ids(s.id for s in found.suggestions)
                for s in found.suggestions:  # one whose text claims something gone is held, saying why
                    _echo(f"{short[s.id]}: {', '.join(s.anchors)}" + (f" — {s.why}" if s.why else ""))
                n, held = len(found.proposals), len(found.held)
                verb = "anchored" if apply_ else "could anchor"
                _echo(f"{verb} {n} memor{'y' if n == 1 else 'ies'}"
                      + (f"; {held} not anchored: {'its' if held == 1 else 'their'} text claims something gone"
                         if held else ""))
            return
        report = ws.verify_file(from_file, net=net) if from_file is not None else ws.verify(net=net, mark=mark)
        if c.json:
            _emit_json(report.to_dict())
        else:
            rows = []
            short = {} if from_file is not None else ws.short_ids(r.id for r in report.results)  # FILE:LINE as is
            for r in report.results:
                for cl in r.claims:
                    rows.append((short.get(r.id, r.id), cl.claim.kind, _short(cl.claim.value, 40), cl.verdict.value, cl.detail))
            if rows:
                _echo(_table(rows, ["id", "kind", "claim", "verdict", "detail"]))
            d = report.to_dict()
            _echo(f"checked {d['checked']}: {d['stale']} stale, {d['unknown']} unknown, {d['fresh']} fresh"
                       f" ({d['no_claims']} without claims)")
        if report.has_stale:
            ctx.exit(EXIT_STALE)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: every command registered (below), then `base.run`."""
    run(argv)


# The other command modules register their commands on `cli` as they are imported.
from .agents import context, doctor, export, import_cmd, lsp, mcp, serve, watch  # noqa: E402, F401
from .git import at, bisect, conflicts, hook, log_cmd, merge_ledger_cmd, mode_of, share  # noqa: E402, F401

if __name__ == "__main__":  # pragma: no cover
    from anchorfs.cli.commands import main as _main  # the module proper: `-m anchorfs.cli.commands` runs as a copy, __main__

    _main()
