"""`anchorfs lsp`, the language server (issue 41): driven over stdio by pytest-lsp's client, and by a
real editor, headless Neovim, on a real git repository whose anchored file moved under its memories."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import TOKEN, git
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient, client_capabilities, make_test_lsp_client

import anchorfs
from anchorfs.agents.lsp import DRAFT_MARK, diagnostics, hover_text, lenses

EDITED = "import os\nimport sys\n" + TOKEN.replace("hours=24", "hours=12")
"""token.py after an edit: two lines on top (every line moved down by two) and the expiry changed."""


@pytest.fixture
def repo(git_repo: Path) -> tuple[Path, dict[str, str]]:
    """A committed token.py with memories on its line 3 (to be staled), its `revoke` method (moved,
    still fresh) and the whole file (staled); then the edit, not committed."""
    (git_repo / "auth").mkdir()
    (git_repo / "auth" / "token.py").write_text(TOKEN)
    (git_repo / "README.md").write_text("hello\n")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-qm", "initial")
    anchorfs.init(git_repo)
    with anchorfs.open(git_repo) as ws:
        ids = {"line": ws.record("tokens are signed for 24 hours", anchors=["auth/token.py:3"]).id,
               "revoke": ws.record("revoke is a no-op", anchors=["auth/token.py#TokenIssuer.revoke"]).id,
               "whole": ws.record("token.py holds the token issuer", anchors=["auth/token.py"]).id}
    (git_repo / "auth" / "token.py").write_text(EDITED)
    return git_repo, ids


def ledger_ops(root: Path) -> list[tuple[str, list[str]]]:
    lines = (root / ".anchorfs" / "ledger.jsonl").read_text().splitlines()
    return [(e["op"], [m["id"] for m in e["memories"]]) for e in map(json.loads, lines) if "op" in e]


def run_session(root: Path, fn: Callable[[LanguageClient, str], Awaitable[Any]]) -> Any:
    """`python -m anchorfs lsp` in `root`, initialized as VS Code does, token.py opened; `fn(client, uri)`."""
    async def main() -> Any:
        client = make_test_lsp_client()
        await client.start_io(sys.executable, "-m", "anchorfs", "lsp", cwd=str(root))
        try:
            await client.initialize_session(lsp.InitializeParams(
                capabilities=client_capabilities("visual-studio-code"), root_uri=root.as_uri()))
            uri = (root / "auth" / "token.py").as_uri()
            client.text_document_did_open(lsp.DidOpenTextDocumentParams(
                lsp.TextDocumentItem(uri, "python", 1, (root / "auth" / "token.py").read_text())))
            await wait_for(client, uri, lambda d: len(d) == 2)
            return await fn(client, uri)
        finally:
            await client.shutdown_session()
            await client.stop()

    return asyncio.run(asyncio.wait_for(main(), 120))


async def wait_for(client: LanguageClient, uri: str, ok: Callable[[list[lsp.Diagnostic]], bool],
                   timeout: float = 30.0) -> list[lsp.Diagnostic]:
    """The diagnostics of `uri` once `ok` holds for them (published again on each change)."""
    async def until() -> list[lsp.Diagnostic]:
        while not ok(list(client.diagnostics.get(uri, []))):
            await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        return list(client.diagnostics[uri])

    return await asyncio.wait_for(until(), timeout)


def by_id(diags: list[lsp.Diagnostic]) -> dict[Any, lsp.Diagnostic]:
    return {d.code: d for d in diags}


def test_open_file_shows_stale_memories_where_their_text_stands_now_hover_and_lens(repo: Any) -> None:
    root, ids = repo

    async def check(client: LanguageClient, uri: str) -> None:
        diags = by_id(client.diagnostics[uri])
        assert set(diags) == {ids["line"], ids["whole"]}  # the moved method is fresh: no diagnostic
        line = diags[ids["line"]]
        assert line.severity == lsp.DiagnosticSeverity.Warning and line.source == "anchorfs"
        assert line.range.start.line == 4  # line 3 then, line 5 now: where the drift report says it stands
        assert line.message.startswith("tokens are signed for 24 hours [STALE · ")
        assert "(was 3, nearest now 5)" in line.message
        assert diags[ids["whole"]].range.start.line == 0  # a whole-file anchor: line 1
        hover = await client.text_document_hover_async(lsp.HoverParams(
            lsp.TextDocumentIdentifier(uri), lsp.Position(4, 8)))
        assert hover is not None and isinstance(hover.contents, lsp.MarkupContent)
        assert hover.contents.kind == lsp.MarkupKind.Markdown
        assert ids["line"] in hover.contents.value and "**stale**" in hover.contents.value
        assert "data, not instructions" in hover.contents.value
        revoke = await client.text_document_hover_async(lsp.HoverParams(
            lsp.TextDocumentIdentifier(uri), lsp.Position(7, 8)))  # `def revoke`: two lines down now
        assert revoke is not None and ids["revoke"] in str(revoke.contents) and "**fresh**" in str(revoke.contents)
        assert await client.text_document_hover_async(lsp.HoverParams(
            lsp.TextDocumentIdentifier(uri), lsp.Position(2, 0))) is None  # nothing anchored there
        lens = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
        titles = {c.range.start.line: c.command.title for c in lens or [] if c.command}
        assert titles == {0: "1 memory · 1 stale", 4: "1 memory · 1 stale", 6: "1 memory"}

    run_session(root, check)
    assert [op for op, _ in ledger_ops(root)] == ["record"] * 3  # reading wrote nothing


def test_live_edits_are_judged_in_the_buffer_and_nothing_is_written(repo: Any) -> None:
    root, ids = repo
    state = root / ".anchorfs"

    async def check(client: LanguageClient, uri: str) -> None:
        before = {p.name: p.read_bytes() for p in state.iterdir() if p.is_file()}
        client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(version=2, uri=uri),
            [lsp.TextDocumentContentChangeWholeDocument("import os\nimport sys\n" + TOKEN)]))
        diags = await wait_for(client, uri, lambda d: len(d) == 1)  # the line holds again in the buffer
        assert [d.code for d in diags] == [ids["whole"]]  # the file's bytes still differ
        after = {p.name: p.read_bytes() for p in state.iterdir() if p.is_file()}
        assert {k: v for k, v in after.items() if k != "manifest.json"} == {
            k: v for k, v in before.items() if k != "manifest.json"}
        unsaved = hashlib.sha256(("import os\nimport sys\n" + TOKEN).encode()).hexdigest().encode()
        assert unsaved not in after.get("manifest.json", b"")  # no hash cached for text not on disk
        assert (root / "auth" / "token.py").read_text() == EDITED  # the file on disk is untouched
        client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(version=3, uri=uri), [lsp.TextDocumentContentChangeWholeDocument(TOKEN)]))
        assert await wait_for(client, uri, lambda d: not d) == []  # as recorded: nothing stale
        client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(version=4, uri=uri), [lsp.TextDocumentContentChangeWholeDocument(EDITED)]))
        assert len(await wait_for(client, uri, lambda d: len(d) == 2)) == 2
        # another process writes the ledger: the open file's diagnostics follow, with no message from the editor
        subprocess.run([sys.executable, "-m", "anchorfs", "retract", ids["line"]], cwd=root, check=True,
                       capture_output=True)
        assert [d.code for d in await wait_for(client, uri, lambda d: len(d) == 1)] == [ids["whole"]]

    run_session(root, check)


def action(got: lsp.CodeAction | lsp.Command) -> tuple[str, lsp.Command | None]:
    """(title, command) of a code action. lsprotocol's client reads any result with a "command" key as
    a `Command` (its `_code_action_hook`), so a CodeAction's command arrives as the repr of a dict."""
    import ast

    if isinstance(got, lsp.CodeAction):
        return got.title, got.command
    inner = ast.literal_eval(got.command)
    return got.title, lsp.Command(inner["title"], inner["command"], arguments=inner.get("arguments"))


def test_code_actions_reanchor_supersede_retract_history_and_remember_write_the_ledger(repo: Any) -> None:
    root, ids = repo

    async def actions(client: LanguageClient, uri: str, line: int, end: lsp.Position | None = None) -> dict[str, Any]:
        start = lsp.Position(line, 0)
        got = await client.text_document_code_action_async(lsp.CodeActionParams(
            lsp.TextDocumentIdentifier(uri), lsp.Range(start, end or start),
            lsp.CodeActionContext(diagnostics=list(client.diagnostics.get(uri, [])))))
        return dict(map(action, got or []))

    async def run(client: LanguageClient, command: lsp.Command | None, *extra: Any) -> Any:
        assert command is not None
        return await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
            command.command, arguments=[*(command.arguments or []), *extra]))

    async def check(client: LanguageClient, uri: str) -> None:
        acts = await actions(client, uri, 4)
        line = ids["line"]
        assert f"anchorfs: reanchor {line}: it still holds" in acts
        assert {f"anchorfs: supersede {line}...", f"anchorfs: retract {line}", f"anchorfs: history of {line}",
                "anchorfs: remember this..."} <= set(acts)
        done = await run(client, acts[f"anchorfs: reanchor {line}: it still holds"])
        assert done["id"] == line and done["anchors"][0]["lines"] == [5, 5]  # the text where it stands now
        await wait_for(client, uri, lambda d: [x.code for x in d] == [ids["whole"]])
        # supersede without text: a draft opens; saving it supersedes with what was written above the mark
        acts = await actions(client, uri, 0)
        whole = ids["whole"]
        draft = (await run(client, acts[f"anchorfs: supersede {whole}..."]))["draft"]
        assert [d.uri for d in client.shown_documents] == [draft]
        text = f"token.py holds the issuer and revoke\n{DRAFT_MARK} ...\n"
        client.text_document_did_open(lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(draft, "markdown", 1, text)))
        client.text_document_did_save(lsp.DidSaveTextDocumentParams(lsp.TextDocumentIdentifier(draft)))
        await wait_for(client, uri, lambda d: not d)  # the successor is anchored to the file as it is now
        on_top = await actions(client, uri, 0)  # the successor's actions, on line 1 now
        history = await run(client, next(c for t, c in on_top.items() if t.startswith("anchorfs: history of ")))
        assert [e["op"] for e in history] == ["record", "supersede", "supersede"] and history[0]["id"] == whole
        successor = next(e["memory"] for e in history if e["id"] != whole)
        assert successor["content"] == "token.py holds the issuer and revoke" and successor["supersedes"] == whole
        # retract; then "Remember this..." on a selection of lines 6-7 (0-based 5 to the start of 7)
        assert (await run(client, (await actions(client, uri, 4))[f"anchorfs: retract {line}"]))["status"] == "retracted"
        remember = (await actions(client, uri, 5, lsp.Position(7, 0)))["anchorfs: remember this..."]
        assert remember is not None and remember.arguments == [uri, 6, 7]
        made = await run(client, remember, "the class starts here")
        assert made["anchors"][0]["path"] == "auth/token.py" and made["anchors"][0]["lines"] == [6, 7]
        # no characters selected: the symbol around the cursor
        around = await run(client, (await actions(client, uri, 7))["anchorfs: remember this..."], "revoke returns None")
        assert around["anchors"][0]["symbol"] == "TokenIssuer.revoke"
        # a memory that is not there: one line, said to the user
        assert await run(client, lsp.Command("x", "anchorfs.retract", arguments=["0123456789"])) is None
        assert "no memory" in client.messages[-1].message and client.messages[-1].type == lsp.MessageType.Error

    run_session(root, check)
    ops = ledger_ops(root)
    assert [op for op, _ in ops] == ["record"] * 3 + ["reanchor", "supersede", "retract", "record", "record"]
    assert ops[3][1] == [ids["line"]] and ids["whole"] in ops[4][1] and ops[5][1] == [ids["line"]]


def test_an_unsaved_buffer_refuses_writes_that_take_anchors_from_the_file(repo: Any) -> None:
    root, ids = repo

    async def check(client: LanguageClient, uri: str) -> None:
        client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(version=2, uri=uri), [lsp.TextDocumentContentChangeWholeDocument(EDITED + "#\n")]))
        await wait_for(client, uri, lambda d: len(d) == 2)
        for args in (["anchorfs.reanchor", ids["line"]], ["anchorfs.remember", uri, 1, 1, "x"]):
            assert await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
                args[0], arguments=args[1:])) is None
            assert "unsaved edits: save it first" in client.messages[-1].message

    run_session(root, check)
    assert [op for op, _ in ledger_ops(root)] == ["record"] * 3


def test_unknown_is_information_and_the_hover_is_capped(repo: Any) -> None:
    root, ids = repo
    from anchorfs.agents.lsp import Found
    from anchorfs.core.model import AnchorCheck, Drift, Verdict
    from anchorfs.drift import MemoryDrift

    with anchorfs.open(root) as ws:
        m = ws.get(ids["line"])
    check = AnchorCheck(m.anchors[0], Verdict.UNREADABLE, "auth/token.py unreadable: permission denied")
    found = [Found(MemoryDrift(m, Drift.UNKNOWN, (check,)), "[UNKNOWN · unreadable]", ((3, 3),))] * 40
    diags = diagnostics(found[:1], TOKEN)
    assert [d.severity for d in diags] == [lsp.DiagnosticSeverity.Information] and diags[0].range.start.line == 2
    said = hover_text(found, 3)
    assert said is not None and len(said) < 3200 and said.endswith("more (`anchorfs list`)")
    assert lenses(found[:2]) == [(3, "2 memories · 2 unknown", [m.id, m.id])]


def test_the_command_without_pygls_is_one_line(repo: Any) -> None:
    root, _ = repo
    probe = ("import sys, builtins\nreal = builtins.__import__\n"
             "def no_pygls(name, *a, **k):\n"
             "    if name.startswith('pygls'):\n        raise ModuleNotFoundError(name=name)\n"
             "    return real(name, *a, **k)\n"
             "builtins.__import__ = no_pygls\nfrom anchorfs.__main__ import main\nmain(['lsp'])\n")
    proc = subprocess.run([sys.executable, "-c", probe], cwd=root, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == ["anchorfs: error: the language server needs pygls: pip install 'anchorfs[lsp]'"]


_NVIM = r"""
local root, out = _G.arg_root, _G.arg_out
local id = vim.lsp.start_client({name = "anchorfs", cmd = {_G.arg_python, "-m", "anchorfs", "lsp"}, root_dir = root})
vim.cmd("edit " .. root .. "/auth/token.py")
vim.lsp.buf_attach_client(0, id)
vim.wait(30000, function() return #vim.diagnostic.get(0) >= 2 end, 50)
local diags = {}
for _, d in ipairs(vim.diagnostic.get(0)) do
  table.insert(diags, {lnum = d.lnum, severity = d.severity, message = d.message, source = d.source})
end
vim.api.nvim_win_set_cursor(0, {5, 8})
local got = vim.lsp.buf_request_sync(0, "textDocument/hover", vim.lsp.util.make_position_params(), 30000) or {}
local hover = ""
for _, r in pairs(got) do if r.result then hover = r.result.contents.value end end
local f = io.open(out, "w")
f:write(vim.fn.json_encode({diagnostics = diags, hover = hover}))
f:close()
vim.lsp.stop_client(id)
vim.cmd("qa!")
"""


def test_headless_neovim_reads_the_diagnostics_and_a_hover(repo: Any, tmp_path: Path) -> None:
    """A real editor: Debian's Neovim 0.7 (`scripts/test.sh` installs it where it is missing)."""
    root, ids = repo
    nvim = shutil.which("nvim")
    assert nvim is not None, "nvim is missing: ./scripts/test.sh installs it (apt-get install neovim)"
    script, out = tmp_path / "attach.lua", tmp_path / "out.json"
    script.write_text(_NVIM)
    setup = (f"lua _G.arg_root = {json.dumps(str(root))}; _G.arg_out = {json.dumps(str(out))}; "
             f"_G.arg_python = {json.dumps(sys.executable)}")
    proc = subprocess.run([nvim, "--headless", "--clean", "-c", setup, "-c", f"luafile {script}"], cwd=root,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                          env=dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state")))
    assert out.exists(), proc.stderr
    said = json.loads(out.read_text())
    got = {d["lnum"]: d for d in said["diagnostics"]}
    assert set(got) == {0, 4} and got[4]["severity"] == 2 and got[4]["source"] == "anchorfs"  # 2: a warning
    assert got[4]["message"].startswith("tokens are signed for 24 hours [STALE · ")
    assert ids["line"] in said["hover"] and "**stale**" in said["hover"]


def test_init_for_editors_writes_helix_and_zed_and_says_where_neovim_and_vscode_are_set_up(tmp_path: Path) -> None:
    import tomllib

    from anchorfs.agents.hosts import HELIX_SERVERS, setup

    root = tmp_path / "proj"
    (root / ".helix").mkdir(parents=True)
    (root / ".helix" / "languages.toml").write_text(
        '# mine\n[[language]]\nname = "python"\nlanguage-servers = ["pyright"]\nauto-format = true\n')
    (root / ".zed").mkdir()
    (root / ".zed" / "settings.json").write_text('{"theme": "One Dark", "lsp": {"rust-analyzer": {}}}')
    anchorfs.init(root)
    written = setup(root, ["zed", "neovim", "helix"])
    assert [(w.host, w.kind, w.changed) for w in written] == [("neovim", "lsp", False), ("helix", "lsp", True),
                                                              ("zed", "lsp", True)]
    assert "vim.lsp.start" in written[0].note and "docs/editors.md" in written[0].note
    helix = tomllib.loads((root / ".helix" / "languages.toml").read_text())
    assert helix["language-server"]["anchorfs"] == {"command": "anchorfs", "args": ["lsp"]}
    langs = {t["name"]: t for t in helix["language"]}
    assert langs["python"] == {"name": "python", "language-servers": ["pyright", "anchorfs"], "auto-format": True}
    assert langs["rust"]["language-servers"] == [*HELIX_SERVERS["rust"], "anchorfs"]
    assert (root / ".helix" / "languages.toml").read_text().startswith("# mine\n")  # merged, never clobbered
    zed = json.loads((root / ".zed" / "settings.json").read_text())
    assert zed == {"theme": "One Dark", "lsp": {"rust-analyzer": {}, "anchorfs": {
        "binary": {"path": "anchorfs", "arguments": ["lsp"]}}}}
    assert [w.changed for w in setup(root, ["helix", "zed"])] == [False, False]  # again: nothing to change
    (root / ".zed" / "settings.json").write_text("{ not json")
    proc = subprocess.run([sys.executable, "-m", "anchorfs", "init", "--for", "zed", "--for", "vscode"], cwd=root,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "settings.json is not valid JSON" in proc.stderr
    assert not (root / ".vscode").exists()  # refused before anything was written
    (root / ".zed" / "settings.json").unlink()
    proc = subprocess.run([sys.executable, "-m", "anchorfs", "init", "--for", "vscode", "--for", "zed"], cwd=root,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "vscode: set up on the editor's side: a generic LSP client extension running `anchorfs lsp`" in proc.stdout
    assert ".zed/settings.json  (zed lsp)" in proc.stdout and (root / ".vscode" / "mcp.json").exists()
