"""`anchorfs demo`: the whole idea in thirty seconds, on a throwaway git workspace."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["run_demo"]

TOKEN_PY = '''"""Token issuing for the API."""

import jwt


class TokenIssuer:
    """Issues signed JWTs for logged-in users."""

    EXPIRY_HOURS = 24

    def issue(self, user_id: str) -> str:
        return jwt.encode({"sub": user_id, "exp": self.EXPIRY_HOURS * 3600}, "secret")


def get_user_by_id(user_id: str) -> dict:
    return {"id": user_id}
'''

CONFIG_TOML = '''[server]
port = 8080
workers = 4

[auth]
provider = "jwt"
'''


def _git(root: Path, *args: str) -> None:
    env = dict(os.environ, GIT_AUTHOR_NAME="anchorfs demo", GIT_AUTHOR_EMAIL="demo@example.com",
               GIT_COMMITTER_NAME="anchorfs demo", GIT_COMMITTER_EMAIL="demo@example.com")
    subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)


def run_demo(keep: str | None = None, *, as_json: bool = False, echo: Callable[[str], Any] = print) -> dict[str, Any]:
    """Run the demo; returns what it saw. `keep` must be a new or empty folder: the demo writes
    files, makes a git repo and commits, which would harm an existing project."""
    import anchorfs
    from ..core.errors import WorkspaceError

    tmp = None
    if keep:
        root = Path(keep)
        try:
            present: bool | None = None
            if root.is_dir():
                with os.scandir(root) as entries:
                    present = next(entries, None) is not None
        except OSError as exc:
            raise WorkspaceError(f"cannot read {root}: {exc.strerror}") from None
        if present:
            raise WorkspaceError(f"{root} is not empty; the demo (--keep or --root) builds its workspace in a new "
                                 "or empty folder, never in an existing project")
        if present is None and os.path.lexists(root):
            raise WorkspaceError(f"{root} is not a folder")
        root.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.mkdtemp(prefix="anchorfs-demo-")
        root = Path(tmp)
    say = (lambda *_: None) if as_json else echo
    out: dict[str, Any] = {"root": str(root)}
    try:
        (root / "auth").mkdir(exist_ok=True)
        (root / "config").mkdir(exist_ok=True)
        (root / "auth" / "token.py").write_text(TOKEN_PY)
        (root / "config" / "app.toml").write_text(CONFIG_TOML)
        have_git = shutil.which("git") is not None
        if have_git:
            _git(root, "init", "-q", "-b", "main")
            _git(root, "add", ".")
            _git(root, "commit", "-q", "-m", "token issuing")
        anchorfs.init(root, nested=True)  # its own git repo and workspace, wherever it is built
        say(f"workspace: {root}{' (git repo)' if have_git else ''}\n")
        with anchorfs.open(root) as ws:
            say("1. record three anchored memories")
            a = ws.record("Token expiry is 24h (TokenIssuer.EXPIRY_HOURS)", kind="constraint",
                          anchors=["auth/token.py#TokenIssuer"], tags=["auth"])
            b = ws.record("The API server listens on port 8080 @anchor(file=config/app.toml, lines=1-3)",
                          kind="reference")
            c = ws.record("User lookup goes through get_user_by_id in auth/token.py",
                          kind="note", anchors=["auth/token.py#get_user_by_id"])
            for m in (a, b, c):
                say(f"   {m.id}  {m.content}  -> {', '.join(x.spec for x in m.anchors)}")
            def ask(key: str, k: int) -> None:  # the one query, its hits shown and kept under `key`
                hits = ws.query("when do tokens expire", k=k)
                for h in hits:
                    say(f"   {h.score:.3f} {h.envelope} {h.memory.content}")
                out[key] = [h.to_dict() for h in hits]

            say("\n2. query 'when do tokens expire' while the code still says so")
            ask("before", 1)

            say("\n3. someone edits the code: expiry becomes 168 hours, a comment is added to the config")
            path = root / "auth" / "token.py"
            path.write_text(path.read_text().replace("EXPIRY_HOURS = 24", "EXPIRY_HOURS = 168"))
            cfg = root / "config" / "app.toml"
            cfg.write_text("# production settings\n" + cfg.read_text())
            if have_git:
                _git(root, "commit", "-qam", "raise token expiry to a week")

            say("\n4. the same query: the memory is served, flagged and demoted, never hidden")
            ask("after", 3)

            say("\n5. the drift check over everything (exit code 90 in the CLI when stale)")
            report = ws.drift()
            for md in report.memories:
                say(f"   {md.drift.value:7} {md.memory.content}")
            out["drift"] = report.to_dict()

            say("\n6. correct it: supersede keeps the old belief with its validity bounds")
            new = ws.supersede(a.id, "Token expiry is 7 days (168h, TokenIssuer.EXPIRY_HOURS)",
                               reason="expiry raised")
            ask("final", 1)
            out["superseded"] = a.id
            out["successor"] = new.id
        if as_json:
            import orjson

            echo(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())
        elif tmp is not None:
            say("\n(the throwaway workspace is removed; `anchorfs demo --keep DIR` keeps one)")
        return out
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
