"""The warm local server (`anchorfs serve`, issue 19): the CLI hands it `query`, `context`,
`list`, `record` and `show`, and what comes back is exactly what the in-process CLI prints.

Every client here is a real `python -m anchorfs` process with one fixed environment (the
server serves only callers whose environment matches its own); "served" is proven by the
server's own request count, "in process" by ANCHORFS_NO_SERVER=1 or by no server to ask.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from anchorfs.cli import server
from tests.conftest import git


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANCHORFS_")}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), GIT_CONFIG_GLOBAL=str(home / ".gitconfig"),
               GIT_CONFIG_NOSYSTEM="1", COLUMNS="100")
    env.update(extra)
    return env


def _cli(env: dict[str, str], cwd: Path, *args: str, served: bool | None = None) -> subprocess.CompletedProcess[str]:
    """One `anchorfs` process; `served=False` keeps it in process."""
    if served is False:
        env = {**env, server.NO_SERVER_ENV: "1"}
    return subprocess.run([sys.executable, "-m", "anchorfs", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def _served(root: Path) -> int:
    info = server.ping(root)
    assert info is not None, "the server should answer"
    return int(info["served"])


def _start(root: Path, env: dict[str, str], *extra: str) -> subprocess.Popen[str]:
    """`anchorfs serve` in the foreground of a child process, returned once it answers."""
    proc = subprocess.Popen([sys.executable, "-m", "anchorfs", "serve", "--root", str(root), *extra], env=env,
                            cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(1200):
        if server.ping(root) is not None:
            return proc
        if proc.poll() is not None:
            raise AssertionError(f"serve ended: {proc.communicate()}")
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("serve never answered")


def _workspace(root: Path) -> None:
    """A git repo with three anchored memories, made through the SDK (in this process: fast)."""
    import anchorfs

    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "src").mkdir()
    (root / "src" / "auth.py").write_text("def issue():\n    return 24 * 3600\n\n\ndef revoke():\n    pass\n")
    (root / "README.md").write_text("hello\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "init")
    anchorfs.init(root)
    with anchorfs.open(root) as ws:
        for text, anchor in (("token expiry is 24h", "src/auth.py:1-2"), ("revoke drops the session", "src/auth.py"),
                             ("the readme greets", "README.md")):
            ws.record(text, anchors=[anchor], kind="constraint")


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    """One workspace with a server, shared by the module's read-mostly tests."""
    base = tmp_path_factory.mktemp("served")
    home = base / "home"
    home.mkdir()
    env = _env(home)
    root = base / "ws"
    _workspace(root)
    proc = _start(root, env, "--idle-timeout", "600")
    yield root, env
    stopped = _cli(env, root, "serve", "--stop")
    assert (stopped.returncode, stopped.stdout) == (0, "stopped\n")
    assert proc.wait(timeout=60) == 0
    assert not os.path.lexists(root / ".anchorfs" / server.SOCKET_NAME)


@pytest.mark.parametrize("args", [
    ("query", "token expiry"),
    ("--json", "query", "how long do tokens last", "-k", "2"),
    ("context", "token lifetime"),
    ("context", "token lifetime", "--json", "--budget", "50"),
    ("list", "--json", "--limit", "2"),
    ("show", "no-such-id"),
    ("query", ""),
])
def test_served_output_is_the_in_process_output(warm: tuple[Path, dict[str, str]], args: tuple[str, ...]) -> None:
    root, env = warm
    before = _served(root)
    served = _cli(env, root / "src", *args)
    assert _served(root) == before + 1  # it was the server's answer
    alone = _cli(env, root / "src", *args, served=False)
    assert (served.returncode, served.stdout, served.stderr) == (alone.returncode, alone.stdout, alone.stderr)
    assert served.stdout or served.stderr


def test_show_of_a_real_id_and_record_from_a_subfolder(warm: tuple[Path, dict[str, str]]) -> None:
    """`record` anchors from the caller's folder (as git pathspecs), served or not."""
    root, env = warm
    before = _served(root)
    rec = _cli(env, root / "src", "record", "issue returns seconds", "--anchor", "auth.py#issue", "--json")
    assert rec.returncode == 0, rec.stderr
    assert _served(root) == before + 1
    import json

    memory = json.loads(rec.stdout)
    assert memory["anchors"][0]["path"] == "src/auth.py" and memory["anchors"][0]["symbol"] == "issue"
    shown = _cli(env, root, "show", memory["id"])
    alone = _cli(env, root, "show", memory["id"], served=False)
    assert shown.returncode == 0 and (shown.stdout, shown.stderr) == (alone.stdout, alone.stderr)
    assert "issue returns seconds" in shown.stdout
    bad = _cli(env, root, "record", "x", "--anchor", "nope.py")
    bad_alone = _cli(env, root, "record", "x", "--anchor", "nope.py", served=False)
    assert bad.returncode == 1 and (bad.stdout, bad.stderr) == (bad_alone.stdout, bad_alone.stderr)


def test_a_write_by_another_process_is_seen_by_the_next_served_query(warm: tuple[Path, dict[str, str]]) -> None:
    root, env = warm
    assert "zebra" not in _cli(env, root, "query", "zebra crossing").stdout
    import anchorfs

    with anchorfs.open(root) as ws:  # this process, which has not opened the store: the ledger only
        ws.record("the zebra crossing is painted weekly")
    before = _served(root)
    hit = _cli(env, root, "--json", "query", "zebra crossing", "-k", "1")
    assert _served(root) == before + 1
    assert "the zebra crossing is painted weekly" in hit.stdout
    # and the file under a memory edited by another process: the served drift verdict follows
    (root / "README.md").write_text("goodbye\n")
    try:
        shown = _cli(env, root, "--json", "query", "the readme greets", "-k", "1")
        assert '"drift": "stale"' in shown.stdout
    finally:
        (root / "README.md").write_text("hello\n")


def test_a_config_change_is_seen_by_the_next_served_query(warm: tuple[Path, dict[str, str]]) -> None:
    root, env = warm
    import json

    assert len(json.loads(_cli(env, root, "--json", "query", "token session readme").stdout)["hits"]) > 1
    config = root / ".anchorfs.toml"
    config.write_text("[search]\nk = 1\n")
    try:
        before = _served(root)
        out = _cli(env, root, "--json", "query", "token session readme")
        assert _served(root) == before + 1
        assert len(json.loads(out.stdout)["hits"]) == 1
        config.write_text("[search]\nk = oops\n")
        broken = _cli(env, root, "query", "token")
        alone = _cli(env, root, "query", "token", served=False)
        assert broken.returncode == 1 and broken.stderr == alone.stderr and "anchorfs: error:" in broken.stderr
    finally:
        config.unlink()


def test_the_client_imports_neither_click_nor_lancedb(warm: tuple[Path, dict[str, str]]) -> None:
    """Nor the model (nor `datetime`): a served command's client is the socket and the state folder (issue 38)."""
    root, env = warm
    probe = (
        "import atexit, sys\n"
        "atexit.register(lambda: sys.stderr.write('HEAVY=' + ','.join(sorted({k for k in sys.modules"
        " if k.split('.')[0] in ('click', 'lancedb', 'pyarrow', 'numpy', 'orjson', 'datetime')"
        " or k == 'anchorfs.core.model'}))))\n"
        f"sys.argv = ['anchorfs', '--root', {str(root)!r}, 'query', 'token expiry']\n"
        "from anchorfs.__main__ import main\n"
        "main()\n"
    )
    before = _served(root)
    out = subprocess.run([sys.executable, "-c", probe], env=env, cwd=root, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert _served(root) == before + 1
    assert "token expiry is 24h" in out.stdout
    assert out.stderr.endswith("HEAVY=")


def test_a_request_for_another_workspace_is_declined(warm: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    """The server opens no workspace but its own, whatever the argv says."""
    root, env = warm
    other = tmp_path / "other"
    _workspace(other)
    before = _served(root)
    info = server.ping(root)
    assert info is not None
    sock = server._connect(str(root))
    assert sock is not None
    try:
        req: dict[str, Any] = {**server._request(["--root", str(other), "query", "token"], str(root)),
                               "env": server._relevant_env(env), "cols": 80, "cwd": str(root),
                               "install": info["install"]}
        server._send(sock, req)
        first = server._recv(sock)
        if first.get("accept"):
            first = server._recv(sock)
    finally:
        sock.close()
    assert "decline" in first and "code" not in first
    assert _served(root) == before
    # through the CLI: the other workspace's own answer, in process
    out = _cli(env, root, "--root", str(other), "list")
    assert out.returncode == 0 and "token expiry is 24h" in out.stdout and _served(root) == before


def test_the_callers_output_encoding_is_the_one_written(warm: tuple[Path, dict[str, str]]) -> None:
    """A caller whose stdout is ASCII gets the JSON `\\u` escapes its own process would write."""
    import anchorfs

    root, env = warm
    with anchorfs.open(root) as ws:
        ws.record("the café serves crème brûlée ☕ at noon")
    args = ["--json", "query", "café crème", "-k", "1"]
    alone = _cli({**env, "PYTHONIOENCODING": "ascii"}, root, *args, served=False)
    assert alone.returncode == 0 and "\\u00e9" in alone.stdout and "é" not in alone.stdout
    info = server.ping(root)
    assert info is not None
    sock = server._connect(str(root))
    assert sock is not None
    try:
        req: dict[str, Any] = {**server._request(args, str(root)), "env": server._relevant_env(env), "cols": 80,
                               "cwd": str(root), "install": info["install"],
                               "out": ("ascii", "anchorfs.json-escape", False)}
        server._send(sock, req)
        assert server._recv(sock) == {"accept": True}
        result = server._recv(sock)
    finally:
        sock.close()
    assert result["code"] == 0
    assert b"".join(data for fd, data in result["chunks"] if fd == 1).decode("ascii") == alone.stdout


def test_a_planted_socket_link_is_never_followed(warm: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    """A clone can carry `.anchorfs/server.sock -> <a live server's socket>`: a link at a state
    path (`statefs.STATE_FILES`), so every command refuses it in one line, the client never
    connects through it, and `serve` does not replace it."""
    root, env = warm
    other = tmp_path / "other"
    _workspace(other)
    link = other / ".anchorfs" / server.SOCKET_NAME
    link.symlink_to(root / ".anchorfs" / server.SOCKET_NAME)
    before = _served(root)
    out = _cli(env, other, "--json", "query", "token expiry", "-k", "1")
    assert out.returncode == 1 and out.stderr.count("\n") == 1 and str(link) in out.stderr
    assert "symbolic link" in out.stderr and out.stdout == ""
    assert _served(root) == before  # not the served workspace's answer
    refused = _cli(env, other, "serve", "--idle-timeout", "1")
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1, refused.stderr
    assert link.is_symlink()
    link.unlink()
    link.write_text("")  # a plain file there: not a server either, and left alone
    assert '"drift": "fresh"' in _cli(env, other, "--json", "query", "token expiry", "-k", "1").stdout
    assert link.read_text() == ""


def test_a_server_that_never_answers_is_not_waited_for(warm: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    root, env = warm
    other = tmp_path / "other"
    _workspace(other)
    mute = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    mute.bind(str(other / ".anchorfs" / server.SOCKET_NAME))
    mute.listen(8)  # connections queue, nothing is ever read or written
    try:
        out = _cli(env, other, "query", "token expiry")
    finally:
        mute.close()
    assert out.returncode == 0 and "token expiry is 24h" in out.stdout and not out.stderr


def test_a_second_server_for_the_workspace_is_refused(warm: tuple[Path, dict[str, str]]) -> None:
    root, env = warm
    info = server.ping(root)
    assert info is not None
    out = _cli(env, root, "serve")
    assert out.returncode == 1
    assert out.stderr == f"anchorfs: error: a server already runs for {root} (pid {info['pid']})\n"
    assert server.ping(root) == {**info, "served": info["served"]}


def test_killed_stale_stopped_and_idle_servers(tmp_path: Path) -> None:
    """A killed server's socket makes the next client answer in process and remove it; a new
    server starts over such a socket; SIGTERM and the idle timeout end one cleanly."""
    home = tmp_path / "home"
    home.mkdir()
    env = _env(home)
    root = tmp_path / "ws"
    _workspace(root)
    sock = root / ".anchorfs" / server.SOCKET_NAME

    started = _cli(env, root, "serve", "--detach", "--json")
    assert started.returncode == 0, started.stderr
    import json

    pid = json.loads(started.stdout)["pid"]
    status = _cli(env, root, "serve", "--status")
    assert status.returncode == 0 and status.stdout.startswith(f"serving {root} on {sock} (pid {pid}")
    served = _cli(env, root, "query", "token expiry")
    assert "token expiry is 24h" in served.stdout and _served(root) == 1
    os.kill(pid, signal.SIGKILL)
    for _ in range(1200):  # not our child: dead once its pid is gone or a zombie; no client may touch the
        try:               # socket meanwhile, as the first one to find it dead removes it
            if Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].startswith("Z"):
                break
        except OSError:
            break
        time.sleep(0.05)
    assert sock.exists()  # left behind by the killed server
    assert _cli(env, root, "query", "token expiry").stdout == served.stdout
    assert not os.path.lexists(sock)  # removed by that client
    none = _cli(env, root, "serve", "--status")
    assert (none.returncode, none.stdout) == (1, "no server runs for this workspace\n")

    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # what a killed server leaves
    dead.bind(str(sock))
    dead.close()
    proc = _start(root, env, "--idle-timeout", "0")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    assert not os.path.lexists(sock)

    idle = subprocess.run([sys.executable, "-m", "anchorfs", "serve", "--root", str(root), "--idle-timeout", "0.1"],
                          env=env, cwd=root, capture_output=True, text=True, timeout=120)
    assert idle.returncode == 0 and idle.stderr == f"serving {root} on {sock} (pid {_pid(idle)}; Ctrl-C to stop)\n"
    assert not os.path.lexists(sock)


def _pid(proc: subprocess.CompletedProcess[str]) -> str:
    return proc.stderr.split("(pid ")[1].split(";")[0]


def test_served_command_reads_argv_as_click_does() -> None:
    assert server.served_command(["query", "x"]) == ("query", None)
    assert server.served_command(["--root", "/a", "--json", "query", "x", "--root", "/b"]) == ("query", "/b")
    assert server.served_command(["--root=/a", "list"]) == ("list", "/a")
    assert server.served_command(["record", "-"]) is None  # stdin is not sent
    assert server.served_command(["query", "--help"]) is None
    assert server.served_command(["drift"]) is None
    assert server.served_command(["--version"]) is None
    assert server.served_command(["--root"]) is None
    assert server.served_command(["query", "--", "-k"]) == ("query", None)


def test_a_long_workspace_path_gets_a_private_runtime_socket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil
    import tempfile

    run = Path(tempfile.mkdtemp(prefix="afrun", dir="/tmp"))  # tmp_path is too long for a socket path itself
    try:
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
        deep = "/" + "d" * 120
        path = server.socket_path(deep, create=True)
        assert path is not None and path.startswith(str(run / "anchorfs") + "/") and len(path) <= 107
        assert server.socket_path(deep) == path  # the same place for the client
        assert server.socket_path("/short") == "/short/.anchorfs/server.sock"
        os.chmod(run / "anchorfs", 0o755)  # open to others: never used
        assert server.socket_path(deep) is None
        os.rmdir(run / "anchorfs")
        (run / "anchorfs").symlink_to(run)  # a link: never used either
        assert server.socket_path(deep, create=True) is None
    finally:
        shutil.rmtree(run)


def test_the_warm_workspace_is_kept_across_git_writes_and_reopened_on_a_config_edit(tmp_path: Path) -> None:
    """git writing in `.git` (a commit) keeps the warm workspace; `.anchorfs.toml` edited,
    the store rebuilt by `reindex`, or a state link planted is what a fresh open would see."""
    import anchorfs

    root = tmp_path / "ws"
    _workspace(root)
    pool = server._Pool(os.path.realpath(root))
    first = pool.open(str(root))
    (root / "new.txt").write_text("x\n")
    git(root, "add", "new.txt")
    git(root, "commit", "-qm", "more")
    assert pool.open(str(root)) is first
    (root / ".anchorfs.toml").write_text("[search]\nk = 3\n")
    second = pool.open(str(root))
    assert second is not first and second.config["search.k"] == 3
    with anchorfs.open(root) as ws:
        ws.reindex()
    third = pool.open(str(root))
    assert third is not second
    (tmp_path / "other").mkdir()
    anchorfs.init(tmp_path / "other")
    with pytest.raises(server.Declined):
        pool.open(str(tmp_path / "other"))
    (root / ".anchorfs" / "drift.json").unlink(missing_ok=True)
    (root / ".anchorfs" / "drift.json").symlink_to(tmp_path / "elsewhere")
    from anchorfs.core.errors import WorkspaceError

    with pytest.raises(WorkspaceError, match="symbolic link"):
        pool.open(str(root))


def test_a_query_typed_at_a_terminal_starts_the_server_that_answers_the_next(tmp_path: Path) -> None:
    """Issue 38: a person's second query is warm without `serve --detach`. A script's query (no
    terminal) and `serve.auto = false` start nothing: no process is left behind by either."""
    import pty

    home = tmp_path / "home"
    home.mkdir()
    env = _env(home)
    root = tmp_path / "ws"
    _workspace(root)

    def typed(**extra: str) -> None:
        primary, secondary = pty.openpty()
        try:
            done = subprocess.run([sys.executable, "-m", "anchorfs", "query", "token expiry"], cwd=root,
                                  env={**env, **extra}, stdout=secondary, stderr=subprocess.PIPE, timeout=120)
            assert done.returncode == 0, done.stderr
        finally:
            os.close(secondary)
            os.close(primary)

    assert "token expiry is 24h" in _cli(env, root, "query", "token expiry").stdout  # a script's
    typed(ANCHORFS_SERVE_AUTO="0")
    started = time.time()
    typed()
    try:
        for _ in range(1200):
            info = server.ping(root)
            if info is not None:
                break
            time.sleep(0.05)
        assert info is not None and info["started"] >= started  # this one's, none of the two before
        second = _cli(env, root, "query", "token expiry")
        assert "token expiry is 24h" in second.stdout and _served(root) == 1
    finally:
        server.stop(root)
