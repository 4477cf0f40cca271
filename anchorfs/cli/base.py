"""The plumbing every `anchorfs` command module shares: the click group `cli`, the options
each command takes (`_common`), the session that opens the workspace at most once and closes
it (`_session`), and the output helpers (terminal-safe text, JSON, tables).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click
import orjson

from ..core.errors import AnchorfsError, InputError, printable, warn_line
from ..core.model import KINDS, cut as _short, one_line, parse_time, under

if TYPE_CHECKING:
    from ..core.model import Memory
    from ..drift import MemoryDrift
    from ..sdk.workspace import Workspace

__all__ = ["cli", "EXIT_STALE"]

EXIT_STALE = 90


_VERDICT = re.compile(r"\[(?:STALE|UNKNOWN|fresh|stale|unknown)\b|(?<=  )(?:stale|unknown|fresh)(?=  |$)", re.M)
_COLOUR = {"stale": "red", "unknown": "yellow", "fresh": "green"}


def _width() -> int:
    """The columns stdout's lines must fit: its terminal's (or COLUMNS'); 0 for a pipe."""
    return shutil.get_terminal_size().columns if sys.stdout.isatty() or "COLUMNS" in os.environ else 0


def _fill(line: str, width: int) -> str:
    """`line` wrapped by words to `width`, what continues it indented past where it starts."""
    if len(line) <= width:
        return line
    import textwrap

    indent = line[:min(len(line) - len(line.lstrip(" ")), width // 2)] + "    "
    return textwrap.fill(line, width, subsequent_indent=indent, break_on_hyphens=False)


def _echo(text: str = "", *, err: bool = False) -> None:
    """Terminal-safe text; at a terminal each line fitted to it (`_fill`) and (not under NO_COLOR)
    each verdict in its colour: stale red."""
    click.echo(_styled(text, err=err), err=err)


def _styled(text: str, *, err: bool = False) -> str:
    """`_echo`'s text before it is written: printable, fitted and coloured where a terminal shows it."""
    text = printable(text)
    if not err and sys.stdout.isatty():  # a pipe's lines stay whole: a program reads them
        text = "\n".join(_fill(line, _width()) for line in text.split("\n"))
    if not os.environ.get("NO_COLOR") and (sys.stderr if err else sys.stdout).isatty():
        text = _VERDICT.sub(lambda m: click.style(m[0], fg=_COLOUR[m[0].lstrip("[").lower()], bold=True), text)
    return text


def word_diff(old: str, new: str) -> str:
    """`new` with what changed from `old` marked as git's `--word-diff` does: `[-gone-]{+added+}`."""
    import difflib

    a, b = old.split(" "), new.split(" ")
    parts = ((" ".join(a[i:j]), " ".join(b[k:m]), tag) for tag, i, j, k, m in
             difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes())
    return " ".join(y if tag == "equal" else f"[-{x}-]" * bool(x) + f"{{+{y}+}}" * bool(y) for x, y, tag in parts)


def _json_text(data: Any) -> str:
    return orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n"


def _emit_json(data: Any) -> None:
    sys.stdout.write(_json_text(data))


def _table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    """Padded columns; on a terminal (or with COLUMNS) the widest cut with `…` until a row fits."""
    cells = [[str(h) for h in headers]] + [["" if c is None else one_line(str(c)) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    room = max(_width() - 2 * (len(widths) - 1), 0)
    while room and sum(widths) > room and max(widths) > 8:
        widths[widths.index(max(widths))] -= 1
    cells = [[c if len(c) <= w else c[:w - 1] + "…" for c, w in zip(r, widths)] for r in cells]
    lines = []
    for n, r in enumerate(cells):
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


class _Ctx:
    opener: "Callable[..., Workspace] | None" = None
    """Set by `anchorfs serve` (`anchorfs.cli.server`) in its own process: its warm workspace."""

    def __init__(self, root: str | None, as_json: bool) -> None:
        self.root = root
        self.json = as_json
        self._ws: Workspace | None = None

    def ws(self, **kwargs: Any) -> "Workspace":
        if self._ws is None:
            from ..sdk.workspace import open as open_ws

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
    """Anchor specs with their paths taken from the current folder first, as git pathspecs are."""
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
    """A memory's text: the argument, `-` for stdin, or `--file PATH`, as UTF-8, trailing newlines dropped."""
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


_SESSION = "anchorfs.session"
"""`ctx.meta` key of the command's `_Ctx` (`_session`), for the helpers a command calls."""


@contextmanager
def _session(ctx: click.Context, root: str | None, as_json: bool) -> Iterator[_Ctx]:
    parent: _Ctx = ctx.obj
    c = ctx.meta[_SESSION] = _Ctx(root or parent.root, as_json or parent.json)
    try:
        yield c
    finally:
        c.close()


SECTIONS = (
    ("Start", ("init", "doctor", "demo", "record", "query", "drift")),
    ("Remember and correct", ("supersede", "reanchor", "retract", "revert", "accept", "reject", "tidy", "redact", "import",
                              "export")),
    ("Inspect", ("show", "list", "context", "verify", "history", "ledger", "watch")),
    ("History (git)", ("bisect", "log", "at")),
    ("Agents", ("mcp", "lsp", "hook", "serve", "reindex")),
    ("Team", ("share", "conflicts")),
)
"""`anchorfs --help`: the commands by task, in the order a person meets them."""


EXAMPLES = {
    "init": "anchorfs init --for claude", "doctor": "anchorfs doctor --json", "demo": "anchorfs demo --keep /tmp/tour",
    "record": 'anchorfs record "Tokens expire after 24h" --kind constraint --anchor src/auth/token.py#TokenIssuer.issue',
    "query": 'anchorfs query "when do tokens expire" -k 5', "drift": "anchorfs drift || test $? -eq 90",
    "supersede": 'anchorfs supersede 1qm0a2 "Tokens expire after 7 days" --reason "raised in 9f8e7d6"',
    "reanchor": 'anchorfs reanchor 1qm0a2 --reason "still true after the refactor"',
    "retract": 'anchorfs retract 1qm0a2 --reason "never true"', "revert": "anchorfs revert 1qm0a2",
    "accept": "anchorfs accept 1qm0a2", "reject": 'anchorfs reject 1qm0a2 --reason "duplicate"',
    "tidy": "anchorfs tidy --apply", "redact": 'anchorfs redact 1qm0a2 --reason "a leaked API key"',
    "import": "anchorfs import CLAUDE.md --apply", "export": "anchorfs export --to CLAUDE.md",
    "show": "anchorfs show 1qm0a2", "list": "anchorfs list --drift stale --unused 28d",
    "context": 'anchorfs context "add refresh tokens" --budget 1500', "verify": "anchorfs verify --mark",
    "history": "anchorfs history 1qm0a2", "ledger": "anchorfs ledger --limit 20", "watch": "anchorfs watch",
    "bisect": "anchorfs bisect 1qm0a2", "log": "anchorfs log 1qm0a2", "at": "anchorfs at HEAD~20 --json",
    "mcp": "anchorfs mcp --read-only", "lsp": "anchorfs lsp", "hook": "anchorfs hook install --gate", "serve": "anchorfs serve --detach",
    "reindex": "anchorfs reindex --embedder hashing", "share": "anchorfs share", "conflicts": "anchorfs conflicts",
}
"""One example per command, shown under its `--help` (`_Grouped.get_command`)."""


class _Grouped(click.Group):
    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None and cmd_name in EXAMPLES and not command.epilog:
            command.epilog = f"\b\nExample: {EXAMPLES[cmd_name]}"  # \b: click keeps the line as it is
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        for title, names in SECTIONS:
            rows = [(n, self.commands[n].get_short_help_str(formatter.width - 16)) for n in names if n in self.commands]
            with formatter.section(title):
                formatter.write_dl(rows)


@click.group(cls=_Grouped, context_settings={"help_option_names": ["-h", "--help"], "show_default": True},
             epilog="Start: `anchorfs init --for claude` in your repository; `anchorfs COMMAND -h` for one command.")
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


def _print_memory(m: "Memory", md: "MemoryDrift | None" = None, envelope: str | None = None) -> None:
    """`show`'s text: each id as the session's workspace abbreviates it (`Workspace.short_ids`)."""
    ws = click.get_current_context().meta[_SESSION].ws()
    short = ws.short_ids(i for i in (m.id, m.supersedes, m.superseded_by) if i)
    drift = "" if md is None else f"  drift: {md.drift.value if m.anchors or m.stale_claims else 'unanchored'}"
    _echo(f"{short[m.id]}  [{m.kind}] {m.status}{drift}")
    _echo(f"  {under(m.content, '  ')}")
    if envelope and m.superseded_by:  # the envelope names the successor whole
        envelope = envelope.replace(f" by {m.superseded_by} ", f" by {short[m.superseded_by]} ")
    if envelope:
        _echo(f"  {envelope}")
    if m.tags:
        _echo(f"  tags: {', '.join(m.tags)}")
    checks = md.checks if md is not None else ()
    for n, a in enumerate(m.anchors):
        commit = f" @ {a.commit[:7]}" if a.commit else ""
        dirty = " (taken on uncommitted changes)" if a.dirty else ""
        ch = checks[n] if n < len(checks) else None  # one check per anchor, in order
        now = f"  now {ch.verdict.value}: {one_line(ch.detail)}" if ch is not None else ""
        _echo(f"  anchor: {one_line(a.spec)}  sha256 {a.sha256[:12] if a.sha256 else '?'}{commit}{dirty}{now}")
    for c in m.stale_claims:  # what `verify --mark` found gone in its text
        _echo(f"  {one_line(c.words)} (found by verify {c.found_at.isoformat(timespec='seconds')})")
    _echo(f"  recorded {m.recorded_at.isoformat(timespec='seconds')} by {m.author or '?'}")
    if m.valid_until:
        _echo(f"  valid until {m.valid_until.isoformat(timespec='seconds')}")
    if m.supersedes:
        _echo(f"  supersedes {short[m.supersedes]}")
    if m.superseded_by:
        _echo(f"  superseded by {short[m.superseded_by]}")
    if m.reason:
        _echo(f"  reason: {one_line(m.reason)}")


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


def run(argv: Sequence[str] | None = None) -> None:
    """Run the `anchorfs` group on `argv`: user errors are one line on stderr and exit 1."""
    from . import usable_stdout

    warnings.showwarning = warn_line
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
        sys.stderr.write(printable(f"anchorfs: error: {exc}") + "\n")
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        os._exit(0)
    sys.exit(code if isinstance(code, int) else 0)
