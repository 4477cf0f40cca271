"""`anchorfs` commands over git: the `hook` group (post-commit report, agent hooks), `bisect`,
`log`, `at`, and team memory (`merge-ledger`, `conflicts`, `share`) (registered on `cli` when imported).
"""

from __future__ import annotations

import sys
from typing import Any

import click

from .base import EXIT_STALE, _common, _Ctx, _echo, _emit_json, _session, _short, _table, cli
from ..core.model import span_text

__all__ = ["at", "bisect", "conflicts", "hook", "log_cmd", "merge_ledger_cmd", "mode_of", "share"]


@cli.group()
@_common
@click.pass_context
def hook(ctx: click.Context, root: str | None, as_json: bool) -> None:
    """Hooks: git's post-commit report; Claude Code's session-start digest, pre-read memories, post-edit check."""
    parent: _Ctx = ctx.obj
    ctx.obj = _Ctx(root or parent.root, as_json or parent.json)  # `hook --root R install` as `hook install --root R`


def _agent_hook(name: str, doc: str) -> None:
    """An agent hook's command: `agents.hook_agent` answers it (always exits 0)."""

    @hook.command(name, help=doc)
    @_common
    @click.pass_context
    def command(ctx: click.Context, root: str | None, as_json: bool) -> None:
        from ..agents.hook_agent import agent_main

        agent_main(name, root or ctx.obj.root)


_agent_hook("session-start", "Claude Code's SessionStart hook: a digest of stale, then recent memories "
            "(always exits 0).")
_agent_hook("pre-read", "Claude Code's PreToolUse hook: the memories resting on the file about to be read or "
            "edited, once per file per session (always exits 0).")
_agent_hook("post-edit", "Claude Code's PostToolUse hook: the memories the edited file's change made stale "
            "(always exits 0).")


@hook.command("install")
@_common
@click.option("--gate", is_flag=True, help="Also a pre-commit gate: refuse a commit whose staged changes make a memory "
              "stale (`git commit --no-verify` passes).")
@click.pass_context
def hook_install(ctx: click.Context, root: str | None, as_json: bool, gate: bool) -> None:
    """Add anchorfs to the repo's post-commit hook (an existing hook's content is kept)."""
    from ..agents.hook_git import install

    with _session(ctx, root, as_json) as c:
        path, changed = install(c.ws().root)
        gated = install(c.ws().root, gate=True) if gate else None
        from ..agents.hook_git import install_sync
        from ..sdk.team import install_merge

        synced = install_sync(c.ws().root)  # post-checkout, post-merge, post-rewrite: the store follows the ledger
        if mode_of(c.ws().root) != "private":
            install_merge(c.ws().root)
        if c.json:
            _emit_json({"hook": str(path), "changed": changed, "sync": [str(p) for p in synced],
                        **({"gate": str(gated[0]), "gate_changed": gated[1]} if gated else {})})
        else:
            done = [p.name for p in ([path] if changed else []) + ([gated[0]] if gated and gated[1] else []) + synced]
            _echo(f"installed: {', '.join(done)} in {path.parent}" if done else f"already installed in {path.parent}")


@hook.command("uninstall")
@_common
@click.pass_context
def hook_uninstall(ctx: click.Context, root: str | None, as_json: bool) -> None:
    """Remove anchorfs's part of the post-commit hook and of the sync hooks, and nothing else."""
    from ..agents.hook_git import uninstall, uninstall_sync

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
    from ..agents.hook_git import commit_main

    parent = ctx.obj  # the installed hook's own path (`anchorfs.__main__` takes that before click)
    commit_main(root or parent.root, rev, as_json or parent.json)


@cli.command()
@_common
@click.argument("memory_id", metavar="ID")
@click.pass_context
def bisect(ctx: click.Context, root: str | None, as_json: bool, memory_id: str) -> None:
    """The commit that staled a memory (git), with its hunk; the working tree counts too."""
    from ..history import progress_bar

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
    from ..history import progress_bar

    with _session(ctx, root, as_json) as c:
        with progress_bar() as progress:
            result = c.ws().log(memory_id, progress=progress)
        if c.json:
            _emit_json(result.to_dict())
            return
        d = result.to_dict()
        if not d["anchors"]:
            _echo(f"{memory_id} has no anchors: there is no history to walk")
        for anchor in d["anchors"]:
            _echo(f"{anchor.get('anchor') or anchor.get('path')}:")
            # `moved` marks the steps that moved the text; a rename names the file it went to
            rows = [(s.get("short"), (s.get("date") or "")[:10], s.get("verdict"), (span_text(s["lines_before"]) if s.get("lines_before") else "-"),
                     (span_text(s["lines_after"]) if s.get("lines_after") else "-") + (f" -> {s['path_now']}" if s.get("path_now") else ""),
                     _short(s.get("subject") or "", 40)) for s in anchor.get("steps", [])]
            _echo(_table(rows, ["commit", "date", "verdict", "lines before", "lines after", "subject"]))


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


# -- team memory through git (anchorfs.sdk.team) -----------------------------------------------

def mode_of(root: Any) -> str:
    from ..sdk.team import mode

    return mode(root)


@cli.command("merge-ledger", hidden=True)
@_common
@click.argument("base", type=click.Path(dir_okay=False))
@click.argument("ours", type=click.Path(dir_okay=False))
@click.argument("theirs", type=click.Path(dir_okay=False))
@click.argument("path", required=False)
def merge_ledger_cmd(root: str | None, as_json: bool, base: str, ours: str, theirs: str, path: str | None) -> None:
    """git's merge driver for the ledger (%O %A %B %P): both sides' entries once, in one order, into OURS.

    PATH (git's %P) not a ledger: git's plain text merge, as without the driver."""
    from pathlib import Path

    from ..sdk.team import merge_ledger

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
        short = c.ws().short_ids({i for f in forks for i in (f.memory.id, *(side.id for side in f.sides))})
        for f in forks:
            _echo(f"{short[f.memory.id]} forked: {_short(f.memory.content)}")
            for side in f.sides:
                what = "retracted it" if side.memory.status == "retracted" else (
                    "kept it" if side.id == f.memory.id else f"superseded it with {short[side.id]}")
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
