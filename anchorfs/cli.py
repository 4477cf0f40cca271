"""The `anchorfs` command: each command parses, calls one Workspace method, formats.

No logic lives here. Exit codes follow one rule: 2 for a command line click can refuse by its
shape alone (an unknown command or option, a missing argument, a value outside its choices or
range, a time that does not parse, empty text); 1 for what anchorfs finds doing the work (an
unknown id, a bad anchor, a refused change), as one line on stderr; 90 from `drift`, `verify`
and `at` when something is stale. Anchor paths are taken from the current folder first, as git
takes pathspecs. Output for people is plain aligned text (no heavy imports: `drift` runs in
git hooks and cron); `--json` for programs.
"""

from __future__ import annotations

import os
import re
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click
import orjson

from .errors import AnchorfsError, InputError
from .model import KINDS, parse_time

if TYPE_CHECKING:
    from .drift import DriftReport, MemoryDrift
    from .model import Memory
    from .workspace import Workspace

__all__ = ["cli", "main", "EXIT_STALE"]

EXIT_STALE = 90


_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _printable(text: str) -> str:
    """Text for a terminal: control characters shown as escapes, never sent raw.

    Memory text comes from agents and cloned ledgers: `\\033]0;...\\007` would retitle the
    terminal, `\\033[2J` clear it, a bidi override reorder what the reader sees. Newlines and
    tabs stay; JSON output needs none of this (orjson escapes every control character).
    """
    return _UNPRINTABLE.sub(lambda m: repr(m.group())[1:-1], text)


def _echo(text: str = "", *, err: bool = False) -> None:
    click.echo(_printable(text), err=err)


def _json_text(data: Any) -> str:
    return orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n"


def _emit_json(data: Any) -> None:
    sys.stdout.write(_json_text(data))


def _table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for n, r in enumerate(cells):
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _short(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


class _Ctx:
    opener: "Callable[..., Workspace] | None" = None
    """Set by `anchorfs serve` (`anchorfs.server`) in its own process: its warm workspace."""

    def __init__(self, root: str | None, as_json: bool) -> None:
        self.root = root
        self.json = as_json
        self._ws: Workspace | None = None

    def ws(self, **kwargs: Any) -> "Workspace":
        if self._ws is None:
            from .workspace import open as open_ws

            self._ws = (_Ctx.opener or open_ws)(self.root, **kwargs)
        return self._ws

    def close(self) -> None:
        if self._ws is not None:
            self._ws.close()


def _time_value(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A TIME option (`--since`, `--as-of`) that does not parse is a usage error (exit 2)."""
    if value is not None:
        try:
            parse_time(value)
        except InputError as exc:
            raise click.BadParameter(str(exc)) from None
    return value


def _text_value(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Empty text where text is needed (`query ""`, `record ""`) is a usage error (exit 2)."""
    if value is not None and not value.strip():
        raise click.BadParameter("empty text given")
    return value


_KIND = click.Choice(KINDS)
_LINES_SPEC = re.compile(r"^(?P<path>.+?):\d+(?:-\d+)?$")  # as anchors.parse_spec splits `PATH:START-END`


def _split_spec(spec: str) -> tuple[str, str]:
    """(path, the rest) of an anchor spec: `a.py#Cls.fn` -> (`a.py`, `#Cls.fn`)."""
    text = spec.strip()
    if "#" in text:
        path, _, symbol = text.partition("#")
        return path.strip(), "#" + symbol
    m = _LINES_SPEC.match(text)
    if m:
        return m.group("path"), text[m.end("path"):]
    return text, ""


def _from_cwd(ws: "Workspace", specs: Sequence[str]) -> list[str]:
    """Anchor specs with their paths taken from the current folder first, as git pathspecs are:
    in `src/flask/`, `app.py#Flask.run` is `src/flask/app.py#Flask.run`. A path that names
    nothing there but does from the workspace root keeps its root-relative meaning; one that
    names nothing either way is passed on resolved, so the error shows it as resolved."""
    try:
        rel = os.path.relpath(os.path.realpath(os.getcwd()), ws.root_real)
    except (OSError, ValueError):
        return list(specs)
    if rel == os.curdir or rel == os.pardir or rel.startswith(os.pardir + os.sep) or os.path.isabs(rel):
        return list(specs)  # at the root, or outside the workspace: nothing to re-base
    out = []
    for spec in specs:
        path, rest = _split_spec(spec)
        if not path or os.path.isabs(path) or "\0" in path:
            out.append(spec)
            continue
        here = os.path.normpath(os.path.join(rel, path))
        if os.path.lexists(os.path.join(ws.root_real, here)) or not os.path.lexists(os.path.join(ws.root_real, path)):
            out.append(here.replace(os.sep, "/") + rest)
        else:
            out.append(spec)
    return out


def _read_text(text: str | None, from_file: str | None) -> str:
    """A memory's text: the argument, `-` for stdin, or `--file PATH` (long text, no argv
    limit). Read as UTF-8; trailing newlines dropped (`echo ... | anchorfs record -`)."""
    if from_file is not None and text is not None:
        raise click.UsageError("give the text, - (stdin) or --file PATH, not two of them")
    if from_file is None and text is None:
        raise click.UsageError("Missing argument 'TEXT' (or - to read stdin, --file PATH to read a file)")
    if text is not None and text != "-":
        return text
    where = "stdin" if from_file is None else from_file
    try:
        if from_file is None:
            raw = sys.stdin.buffer.read()
        else:
            with open(from_file, "rb") as fh:  # noqa: PTH123 - a user's file, named by the user
                raw = fh.read()
    except OSError as exc:
        raise InputError(f"cannot read {where}: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError as exc:
        raise InputError(f"{where} is not UTF-8 text (byte {exc.start})") from None


def _common(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Every command takes --root and --json (DESIGN.md), after the command name too."""
    fn = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")(fn)
    fn = click.option("--root", type=click.Path(file_okay=False), help="Workspace root (default: found like git).")(fn)
    return fn


@contextmanager
def _session(ctx: click.Context, root: str | None, as_json: bool) -> Iterator[_Ctx]:
    parent: _Ctx = ctx.obj
    c = _Ctx(root or parent.root, as_json or parent.json)
    try:
        yield c
    finally:
        c.close()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--root", type=click.Path(file_okay=False), help="Workspace root (default: found like git).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.version_option(package_name="anchorfs")
@click.pass_context
def cli(ctx: click.Context, root: str | None, as_json: bool) -> None:
    """Memories for coding agents, anchored to the code they rest on."""
    ctx.obj = _Ctx(root, as_json)


# -- formatting helpers ---------------------------------------------------------------------

def _emit(c: "_Ctx", data: Any, text: str) -> None:
    """The command's result: JSON for programs, one line for people."""
    if c.json:
        _emit_json(data)
    else:
        _echo(text)


def _print_memory(m: "Memory", md: "MemoryDrift | None" = None) -> None:
    drift = "" if md is None else f"  drift: {md.drift.value if m.anchors or m.stale_claims else 'unanchored'}"
    _echo(f"{m.id}  [{m.kind}] {m.status}{drift}")
    _echo(f"  {m.content}")
    if m.tags:
        _echo(f"  tags: {', '.join(m.tags)}")
    checks = md.checks if md is not None else ()
    for n, a in enumerate(m.anchors):
        commit = f" @ {a.commit[:7]}" if a.commit else ""
        dirty = " (taken on uncommitted changes)" if a.dirty else ""
        ch = checks[n] if n < len(checks) else None  # one check per anchor, in order
        now = f"  now {ch.verdict.value}: {ch.detail}" if ch is not None else ""
        _echo(f"  anchor: {a.spec}  sha256 {a.sha256[:12] if a.sha256 else '?'}{commit}{dirty}{now}")
    for c in m.stale_claims:  # what `verify --mark` found gone in its text
        _echo(f"  {c.words} (found by verify {c.found_at.isoformat(timespec='seconds')})")
    _echo(f"  recorded {m.recorded_at.isoformat(timespec='seconds')} by {m.author or '?'}")
    if m.valid_until:
        _echo(f"  valid until {m.valid_until.isoformat(timespec='seconds')}")
    if m.supersedes:
        _echo(f"  supersedes {m.supersedes}")
    if m.superseded_by:
        _echo(f"  superseded by {m.superseded_by}")
    if m.reason:
        _echo(f"  reason: {m.reason}")


def _progress(label: str) -> tuple[Callable[[int, int], None], Callable[[], None]]:
    """A progress bar on a terminal, shown only once the work has taken more than a second."""
    import time

    start = time.monotonic()
    state: dict[str, Any] = {"bar": None}

    def update(done: int, total: int) -> None:
        bar = state["bar"]
        if bar is None:
            if time.monotonic() - start <= 1.0 or not sys.stderr.isatty():
                return
            from rich.progress import Progress

            bar = state["bar"] = Progress(transient=True)
            bar.start()
            state["task"] = bar.add_task(label, total=total)
        bar.update(state["task"], completed=done)

    def finish() -> None:
        if state["bar"] is not None:
            state["bar"].stop()

    return update, finish


# -- commands ------------------------------------------------------------------------------

_HOST = click.Choice(["claude", "cursor", "vscode", "codex", "all"])


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
    from .workspace import init as init_ws

    if absolute and not hosts:
        raise click.UsageError("--absolute goes with --for HOST")
    with _session(ctx, root, as_json) as c:
        from .hosts import check_setup
        from .statedir import check_init
        from .team import check_mode, init_mode

        # every refusal before the first write: a refused init leaves no .anchorfs/ behind
        planned = check_init(c.root, nested=nested)
        check_mode(planned, shared)
        if hosts:
            check_setup(planned, hosts)
        if write_mcp:
            check_setup(planned, ["claude"], mcp_only=True)
        path = init_ws(c.root, nested=nested)
        init_mode(path, shared)
        mcp_path = None
        written = []
        if hosts:
            from .hosts import setup

            written = setup(path, hosts, absolute=absolute)
        if write_mcp:
            from .mcp import write_mcp_config

            mcp_path = write_mcp_config(path)
        if c.json:
            _emit_json({"root": str(path), "mcp": str(mcp_path) if mcp_path else None,
                        "hosts": [w.to_dict() for w in written]})
        else:
            _echo(f"anchorfs workspace at {path}")
            for w in written:
                _echo(f"{'wrote' if w.changed else 'unchanged'} {w.path}  ({w.host} {w.kind})")
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
        _emit(c, m.to_dict(), f"recorded {m.id} ({len(m.anchors)} anchor{'s' if len(m.anchors) != 1 else ''})")


@cli.command()
@_common
@click.argument("text", callback=_text_value)
@click.option("-k", "k", type=click.IntRange(1, 1000), default=None, help="How many hits.")
@click.option("--include-superseded", is_flag=True, help="Also superseded and retracted memories, marked.")
@click.option("--as-of", "as_of", default=None, metavar="TIME", callback=_time_value,
              help="The store as it stood then: ISO 8601 or 7d, 12h.")
@click.option("--stale", type=click.Choice(["include", "exclude", "only"]), default="include", show_default=True,
              help="Keep stale hits (demoted), leave them out, or show them alone.")
@click.pass_context
def query(ctx: click.Context, root: str | None, as_json: bool, text: str, k: int | None,
          include_superseded: bool, as_of: str | None, stale: str) -> None:
    """Search memories; every hit is re-checked against its anchors."""
    with _session(ctx, root, as_json) as c:
        hits = c.ws().query(text, k=k, include_superseded=include_superseded, as_of=as_of, stale=stale)
        if c.json:
            _emit_json({"hits": [h.to_dict() for h in hits]})
            return
        if not hits:
            _echo("no memories found")
            return
        if all(h.weak for h in hits):  # the closest things are listed, and called what they are
            _echo("no memory matches well; closest:")
        for h in hits:
            mark = "" if h.memory.status == "active" else f" ({h.memory.status})"
            _echo(f"{h.score:.3f}  (relevance {h.relevance:.3f})  {h.memory.id}{mark}  {h.envelope}")
            _echo(f"       {h.memory.content}")


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
        if c.json:
            _emit_json({**m.to_dict(), "drift": md.drift.value if m.anchors or m.stale_claims else "unanchored",
                        "checks": [ch.to_dict() for ch in md.checks]})
        else:
            _print_memory(m, md)


@cli.command(name="list")
@_common
@click.option("--limit", type=click.IntRange(1), default=None)
@click.option("--status", type=click.Choice(["active", "proposed", "superseded", "retracted", "all"]), default="active",
              show_default=True, help="proposed: written by an agent under review (`mcp --propose`), drift checked now.")
@click.option("--drift", "drift_filter", type=click.Choice(["fresh", "stale", "unknown", "unanchored"]), default=None,
              help="Filter on the drift found by the last check (no re-check); unanchored: no anchors.")
@click.pass_context
def list_cmd(ctx: click.Context, root: str | None, as_json: bool, limit: int | None, status: str,
             drift_filter: str | None) -> None:
    """Memories, newest first, with the drift the last check found."""
    with _session(ctx, root, as_json) as c:
        ws = c.ws()
        mems = ws.list(limit=limit, status=status, drift=drift_filter)
        known = ws.last_drift()

        def drift_of(m: "Memory") -> str:
            if m.status == "proposed" and m.anchors:  # under review, in no drift pass: checked now
                return ws.check(m).drift.value
            return ws.last_drift_of(m, known)

        drifts = {m.id: drift_of(m) for m in mems}
        if c.json:
            _emit_json({"memories": [{**m.to_dict(), "drift": drifts[m.id]} for m in mems]})
            return
        rows = [(m.id, m.kind, m.status, drifts[m.id], len(m.anchors), _short(m.content)) for m in mems]
        _echo(_table(rows, ["id", "kind", "status", "drift", "anchors", "content"]))


@cli.command()
@_common
@click.option("--embedder", default=None, help="Rebuild with this embedder (hashing, e5, minilm).")
@click.pass_context
def reindex(ctx: click.Context, root: str | None, as_json: bool, embedder: str | None) -> None:
    """Rebuild the LanceDB store from the ledger alone."""
    from .workspace import Workspace

    with _session(ctx, root, as_json) as c:
        ws = c.ws(embedder=embedder)
        advance, finish = _progress("reindexing")
        try:
            n = ws.reindex(embedder=embedder, progress=advance)
        finally:
            finish()
        built = ws.embedder.name
        # The next command picks its embedder as a fresh workspace does: the store's own, unless
        # `embedder =` or ANCHORFS_EMBEDDER names another, which would refuse this store.
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
@click.pass_context
def drift(ctx: click.Context, root: str | None, as_json: bool, every: bool) -> None:
    """Check every active anchored memory now; exit 90 when any is stale."""
    from .memo import Witness, replay

    with _session(ctx, root, as_json) as c:
        replayed = None if every else replay(c.root, c.json)  # the last pass's output, while nothing it rested on moved
        if replayed is not None:
            out, code = replayed
        else:
            with Witness() as witness:
                ws = c.ws()
                advance, finish = _progress("checking anchors")
                try:
                    report = ws.drift(progress=advance)
                finally:
                    finish()
            d = report.to_dict()
            outputs = {"json": _json_text(d), "text": _printable(_drift_text(report, d))}
            code = EXIT_STALE if report.stale else 0
            witness.save(ws, report, outputs, code)  # the memo keeps the short forms only: `--all` is never replayed
            if every:
                d = report.to_dict(every=True)
                out = _json_text(d) if c.json else _printable(_drift_text(report, d, every=True))
            else:
                out = outputs["json" if c.json else "text"]
        sys.stdout.write(out)
        if code:
            ctx.exit(code)


def _drift_text(report: "DriftReport", d: dict[str, Any], *, every: bool = False) -> str:
    """`drift`'s output for people: the memories that are not fresh (`every`: all), then the counts."""
    from .model import Drift, drift_of

    text = ""
    bad = report.memories if every else report.flagged
    if bad:
        rows = []
        for md in bad:  # why = the anchors that are not fresh by drift (moved, reformatted: fresh)
            why = [ch.detail for ch in md.checks if drift_of((ch.verdict,)) is not Drift.FRESH]
            why += [f"claim `{c.value}`: {c.detail}" for c in md.memory.stale_claims]  # found by verify --mark
            detail = "; ".join(why)
            rows.append((md.memory.id, md.drift.value, _short(md.memory.content, 40), detail))
        text = _table(rows, ["id", "drift", "memory", "why"]) + "\n"
    return text + f"checked {d['checked']}: {d['stale']} stale, {d['unknown']} unknown, {d['fresh']} fresh\n"


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
        _emit(c, m.to_dict(), f"reanchored {m.id}: {', '.join(a.spec for a in m.anchors)}")


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
        _emit(c, m.to_dict(), f"{m.id} supersedes {m.supersedes}")


@cli.command()
@_common
@click.argument("memory_id", metavar="ID")
@click.option("--reason", default=None)
@click.pass_context
def retract(ctx: click.Context, root: str | None, as_json: bool, memory_id: str, reason: str | None) -> None:
    """Withdraw a belief with no successor."""
    with _session(ctx, root, as_json) as c:
        m = c.ws().retract(memory_id, reason=reason)
        _emit(c, m.to_dict(), f"retracted {m.id}")


@cli.command()
@_common
@click.argument("memory_id", metavar="ID")
@click.option("--reason", default=None)
@click.pass_context
def accept(ctx: click.Context, root: str | None, as_json: bool, memory_id: str, reason: str | None) -> None:
    """Accept a proposed memory (from `mcp --propose`): served from now on; a proposed
    supersede retires its predecessor now."""
    with _session(ctx, root, as_json) as c:
        m = c.ws().accept(memory_id, reason=reason)
        retired = f"; {m.supersedes} is superseded by it" if m.supersedes else ""
        _emit(c, m.to_dict(), f"accepted {m.id}{retired}")


@cli.command()
@_common
@click.argument("memory_id", metavar="ID")
@click.option("--reason", default=None, help="Why it was turned down (kept in the ledger).")
@click.pass_context
def reject(ctx: click.Context, root: str | None, as_json: bool, memory_id: str, reason: str | None) -> None:
    """Turn down a proposed memory: retracted with the reason, never served."""
    with _session(ctx, root, as_json) as c:
        m = c.ws().reject(memory_id, reason=reason)
        _emit(c, m.to_dict(), f"rejected {m.id}")


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
        undone = f"; its successor {successor} is retracted" if successor and successor != m.id else ""
        _emit(c, m.to_dict(), f"{m.id} is active again{undone}")


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
        rows = [(e.at.isoformat(timespec="seconds"), e.op, e.memory.id, e.memory.status, e.actor,
                 e.reason or "", _short(e.memory.content, 40)) for e in events]
        _echo(_table(rows, ["at", "op", "id", "status", "actor", "reason", "content"]))


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
        rows = [(e.at.isoformat(timespec="seconds"), e.op, e.actor, m.id, m.status, _short(m.content, 50),
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
                for s in found.suggestions:  # one whose text claims something gone is held, saying why
                    _echo(f"{s.id}: {', '.join(s.anchors)}" + (f" — {s.why}" if s.why else ""))
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
            for r in report.results:
                for cl in r.claims:
                    rows.append((r.id, cl.claim.kind, _short(cl.claim.value, 40), cl.verdict.value, cl.detail))
            if rows:
                _echo(_table(rows, ["id", "kind", "claim", "verdict", "detail"]))
            d = report.to_dict()
            _echo(f"checked {d['checked']}: {d['stale']} stale, {d['unknown']} unknown, {d['fresh']} fresh"
                       f" ({d['no_claims']} without claims)")
        if report.has_stale:
            ctx.exit(EXIT_STALE)


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
            for mid, specs in r.suggestions.items():
                _echo(f"  {mid}: {', '.join(specs)}")
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
@click.argument("task")
@click.option("--budget", type=click.IntRange(1), default=None, help="Token budget (about 4 characters a token; default 1500).")
@click.pass_context
def context(ctx: click.Context, root: str | None, as_json: bool, task: str, budget: int | None) -> None:
    """A markdown block of the memories for TASK, ready for a prompt (stale ones flagged)."""
    with _session(ctx, root, as_json) as c:
        block = c.ws().context(task, budget=budget)
        if c.json:
            _emit_json(block.to_dict())
        else:
            _echo(block.markdown)


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
    from .mcp import serve

    if as_json:  # taken by every command (`_common`), but here it could only be ignored
        raise click.UsageError("--json does not apply to mcp: the server always speaks JSON-RPC on stdio")
    if read_only and propose:
        raise click.UsageError("--propose and --read-only exclude each other: a read-only server writes nothing")
    with _session(ctx, root, as_json) as c:
        serve(c.root, read_only=read_only, propose=propose)


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
    from . import server

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


def _event_line(event: Any) -> str:
    when = event.at.astimezone().strftime("%H:%M:%S")
    return f"{when}  {event.id}  {event.before} -> {event.after}  {event.detail}  · {_short(event.content, 50)}"


@cli.command()
@_common
@click.pass_context
def watch(ctx: click.Context, root: str | None, as_json: bool) -> None:
    """Re-check memories as the files under them change; report each drift change once."""
    import logging

    from .watch import watch as watch_ws

    logging.getLogger("watchfiles").setLevel(logging.ERROR)  # its Ctrl-C notice; we say "stopped"
    with _session(ctx, root, as_json) as c:
        ws = c.ws()

        def on_event(event: Any) -> None:
            if c.json:
                sys.stdout.write(orjson.dumps(event.to_dict()).decode() + "\n")
                sys.stdout.flush()
            else:
                _echo(_event_line(event))

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


@cli.group()
@_common
@click.pass_context
def hook(ctx: click.Context, root: str | None, as_json: bool) -> None:
    """Hooks: git's post-commit report, and Claude Code's session-start digest and post-edit check."""
    parent: _Ctx = ctx.obj
    ctx.obj = _Ctx(root or parent.root, as_json or parent.json)  # `hook --root R install` as `hook install --root R`


@hook.command("session-start")
@_common
@click.pass_context
def hook_session_start(ctx: click.Context, root: str | None, as_json: bool) -> None:
    """Claude Code's SessionStart hook: a digest of stale, then recent memories (always exits 0)."""
    from .hook import agent_main

    parent: _Ctx = ctx.obj
    agent_main("session-start", root or parent.root)


@hook.command("post-edit")
@_common
@click.pass_context
def hook_post_edit(ctx: click.Context, root: str | None, as_json: bool) -> None:
    """Claude Code's PostToolUse hook: the memories the edited file's change made stale (always exits 0)."""
    from .hook import agent_main

    parent: _Ctx = ctx.obj
    agent_main("post-edit", root or parent.root)


@hook.command("install")
@_common
@click.pass_context
def hook_install(ctx: click.Context, root: str | None, as_json: bool) -> None:
    """Add anchorfs to the repo's post-commit hook (an existing hook's content is kept)."""
    from .hook import install

    with _session(ctx, root, as_json) as c:
        path, changed = install(c.ws().root)
        from .hook import install_sync
        from .team import install_merge

        install_sync(c.ws().root)  # post-checkout, post-merge, post-rewrite: the store follows the ledger
        if mode_of(c.ws().root) != "private":
            install_merge(c.ws().root)
        if c.json:
            _emit_json({"hook": str(path), "changed": changed})
        else:
            _echo(f"{'installed' if changed else 'already installed'}: {path}")


@hook.command("uninstall")
@_common
@click.pass_context
def hook_uninstall(ctx: click.Context, root: str | None, as_json: bool) -> None:
    """Remove anchorfs's part of the post-commit hook and of the sync hooks, and nothing else."""
    from .hook import uninstall, uninstall_sync

    with _session(ctx, root, as_json) as c:
        path, changed = uninstall(c.ws().root)
        synced = uninstall_sync(c.ws().root)  # post-checkout, post-merge, post-rewrite
        if c.json:
            _emit_json({"hook": str(path), "changed": changed, "sync": [str(p) for p in synced]})
        else:
            _echo(f"{'removed from' if changed else 'not installed in'} {path}")
            for p in synced:
                _echo(f"removed from {p}")


@hook.command("run")
@_common
@click.option("--rev", default="HEAD", show_default=True, help="The commit to report on.")
@click.pass_context
def hook_run(ctx: click.Context, root: str | None, as_json: bool, rev: str) -> None:
    """What the hook runs: the memories the commit made stale (always exits 0)."""
    from .hook import run

    with _session(ctx, root, as_json) as c:
        try:
            events = run(c.ws(), rev)
        except (AnchorfsError, OSError) as exc:  # a post-commit check must never look like a failure
            sys.stderr.write(f"anchorfs: hook: {exc}\n")
            return
        if c.json:
            _emit_json({"events": [e.to_dict() for e in events]})
            return
        stale = [e for e in events if e.after == "stale"]
        other = [e for e in events if e.after != "stale"]
        if stale:
            n = len(stale)
            _echo(f"anchorfs: this commit made {n} memor{'y' if n == 1 else 'ies'} stale:")
            for e in stale:
                _echo(f"  {e.id}  {e.detail}  · {_short(e.content, 50)}")
            _echo("anchorfs: re-verify each; `anchorfs reanchor ID` if it holds, `anchorfs supersede ID TEXT` if not")
        for e in other:
            _echo(f"anchorfs: {e.id} is {e.after} again ({e.detail})  · {_short(e.content, 50)}")


@cli.command()
@_common
@click.argument("memory_id", metavar="ID")
@click.pass_context
def bisect(ctx: click.Context, root: str | None, as_json: bool, memory_id: str) -> None:
    """The commit that staled a memory (git), with its hunk; the working tree counts too."""
    from .history import progress_bar

    with _session(ctx, root, as_json) as c:
        with progress_bar() as progress:
            result = c.ws().bisect(memory_id, progress=progress)
        if c.json:
            _emit_json(result.to_dict())
        else:
            _echo(result.describe())


@cli.command(name="log")
@_common
@click.argument("memory_id", metavar="ID")
@click.pass_context
def log_cmd(ctx: click.Context, root: str | None, as_json: bool, memory_id: str) -> None:
    """Every commit that touched a memory's anchors, with the verdict each earned."""
    from .history import progress_bar

    with _session(ctx, root, as_json) as c:
        with progress_bar() as progress:
            result = c.ws().log(memory_id, progress=progress)
        if c.json:
            _emit_json(result.to_dict())
            return
        d = result.to_dict()
        for anchor in d["anchors"]:
            _echo(f"{anchor.get('anchor') or anchor.get('path')}:")
            # `moved` marks the steps that moved the text; a rename names the file it went to
            rows = [(s.get("short"), (s.get("date") or "")[:10], s.get("verdict"), _lines(s.get("lines_before")),
                     _lines(s.get("lines_after")) + (f" -> {s['path_now']}" if s.get("path_now") else ""),
                     _short(s.get("subject") or "", 40)) for s in anchor.get("steps", [])]
            _echo(_table(rows, ["commit", "date", "verdict", "lines before", "lines after", "subject"]))


def _lines(span: Any) -> str:
    if not span:
        return "-"
    a, b = span
    return f"{a}" if a == b else f"{a}-{b}"


@cli.command()
@_common
@click.argument("rev", metavar="REV")
@click.pass_context
def at(ctx: click.Context, root: str | None, as_json: bool, rev: str) -> None:
    """What `drift` would have said at a git revision, for the memories that existed then;
    exit 90 when any was stale, as `drift` does."""
    with _session(ctx, root, as_json) as c:
        report = c.ws().at(rev)
        d = report.to_dict()
        if c.json:
            _emit_json(d)
        else:
            rows = [(m["id"], m["drift"], _short(m["content"], 50),
                     ", ".join(f"{a['path']} -> {a['path_now']}" for a in m.get("anchors", []) if a.get("path_now")))
                    for m in d["memories"]]
            _echo(_table(rows, ["id", "drift", "memory", "moved"]))
            _echo(f"at {d['short']} ({(d.get('date') or '')[:10]}): checked {d['checked']}: "
                  f"{d['stale']} stale, {d['unknown']} unknown, {d['fresh']} fresh")
        if d["stale"]:
            ctx.exit(EXIT_STALE)


def _warning(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
    sys.stderr.write(_printable(f"anchorfs: warning: {message}") + "\n")


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: user errors are one line on stderr and exit 1, never a traceback."""
    from .__main__ import usable_stdout

    warnings.showwarning = _warning
    usable_stdout()
    try:
        # Without standalone mode click returns a `ctx.exit(code)` (drift's 90) instead of raising.
        code = cli.main(args=list(argv) if argv is not None else None, prog_name="anchorfs", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        sys.stderr.write("anchorfs: aborted\n")
        sys.exit(130)
    except AnchorfsError as exc:
        sys.stderr.write(_printable(f"anchorfs: error: {exc}") + "\n")
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        os._exit(0)
    sys.exit(code if isinstance(code, int) else 0)


# -- team memory through git (anchorfs.team) -----------------------------------------------

def mode_of(root: Any) -> str:
    from .team import mode

    return mode(root)


@cli.command("merge-ledger")
@_common
@click.argument("base", type=click.Path(dir_okay=False))
@click.argument("ours", type=click.Path(dir_okay=False))
@click.argument("theirs", type=click.Path(dir_okay=False))
@click.argument("path", required=False)
def merge_ledger_cmd(root: str | None, as_json: bool, base: str, ours: str, theirs: str, path: str | None) -> None:
    """git's merge driver for the ledger (%O %A %B %P): both sides' entries once, in one order, into OURS.

    PATH (git's %P) not a ledger: git's plain text merge, as without the driver."""
    from pathlib import Path

    from .team import merge_ledger

    if root is not None or as_json:  # taken by every command (`_common`), but here they could only be ignored
        raise click.UsageError("--root and --json do not apply to merge-ledger: git passes it the three files")
    sys.exit(merge_ledger(Path(base), Path(ours), Path(theirs), path))


@cli.command()
@_common
@click.pass_context
def conflicts(ctx: click.Context, root: str | None, as_json: bool) -> None:
    """List forks: one memory with two successors, or a supersede racing a retract (after a merge)."""
    with _session(ctx, root, as_json) as c:
        forks = c.ws().conflicts()
        if c.json:
            _emit_json({"conflicts": [f.to_dict() for f in forks]})
            return
        if not forks:
            _echo("no conflicts")
            return
        for f in forks:
            _echo(f"{f.memory.id} forked: {_short(f.memory.content)}")
            for side in f.sides:
                what = "retracted it" if side.memory.status == "retracted" else (
                    "kept it" if side.id == f.memory.id else f"superseded it with {side.id}")
                who = side.memory.author if side.id != f.memory.id else (side.actor or side.memory.author)
                _echo(f"  {who} {what}: {_short(side.memory.content)}")
        _echo("resolve: supersede one side (the successor replaces every side) or retract one")


@cli.command()
@_common
@click.option("--private", "private", is_flag=True, help="Make it private instead: the whole .anchorfs/ ignored.")
@click.pass_context
def share(ctx: click.Context, root: str | None, as_json: bool, private: bool) -> None:
    """Share this workspace's memories through git (ledger committed, merge driver installed)."""
    with _session(ctx, root, as_json) as c:
        note = c.ws().share(not private)
        if c.json:
            _emit_json({"mode": "private" if private else "shared", "note": note})
        else:
            _echo(f"the workspace is {'private' if private else 'shared'}" + (f"; {note}" if note else ""))


if __name__ == "__main__":  # pragma: no cover
    main()
