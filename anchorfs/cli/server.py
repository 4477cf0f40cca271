"""A warm local server per workspace, which the `anchorfs` command hands its reads to.

`anchorfs serve` keeps one process with LanceDB imported and the ledger folded, listening on a
Unix socket (`.anchorfs/server.sock`, or under $XDG_RUNTIME_DIR); `anchorfs.__main__` asks it
first and prints what it returns. The server runs the very same click command with the
caller's argv, folder and output encodings. Anything unusual (another environment, umask,
terminal width or install, stdin, help, a suspicious socket, a slow or gone server) runs in
process. Both sides check the peer's uid (SO_PEERCRED, Linux only). Light imports only at the top.
"""

from __future__ import annotations

import marshal
import os
import stat
import sys

import _socket

from ..core.errors import AnchorfsError, WorkspaceError
from ..core.statedir import locate, option_value
from ..core.statefs import check_state, check_state_dir

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

    from ..sdk.workspace import Workspace

__all__ = [
    "SERVED", "SOCKET_NAME", "DEFAULT_IDLE_TIMEOUT", "socket_path", "served_command", "hand_off", "ping", "stop",
    "detach", "Server", "Declined",
]

SERVED = frozenset({"query", "context", "list", "record", "show"})
"""The commands handed to a server: run often, their cost is the import and the fold."""

SOCKET_NAME = "server.sock"
DEFAULT_IDLE_TIMEOUT = 1800.0
PROTOCOL = 1
NO_SERVER_ENV = "ANCHORFS_NO_SERVER"
"""Set (non-empty) to keep every command in process, server or not."""

CONNECT_TIMEOUT = 2.0
"""Seconds for connecting and for the server's accept-or-decline (a busy one: fall back)."""
RESULT_TIMEOUT = 120.0
"""Seconds for the command's result once accepted; then the caller runs it in process."""
MAX_MESSAGE = 64 << 20
_MAX_UNIX_PATH = 107  # sun_path is 108 bytes on Linux, one for the NUL
_ENV_NAMES = frozenset({"HOME", "PATH", "TZ", "LANG", "LANGUAGE", "USER", "LOGNAME", "LNAME", "USERNAME", "TMPDIR",
                        "COLUMNS", "NO_COLOR"})
_ENV_PREFIXES = ("ANCHORFS_", "GIT_", "HF_", "TRANSFORMERS_", "LC_", "PYTHON", "XDG_")


class Declined(Exception):
    """The server will not run this request; the caller runs it in process."""


# -- what both sides compute -----------------------------------------------------------------

def _relevant_env(env: "Any") -> dict[str, str]:
    """The variables anchorfs, git and the embedders read: a caller whose values differ is not served."""
    return {k: v for k, v in env.items() if k in _ENV_NAMES or k.startswith(_ENV_PREFIXES)}


def _columns() -> int:
    """The width `shutil.get_terminal_size` gives this process: COLUMNS, stdout's terminal, else 80."""
    try:
        cols = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        cols = 0
    if cols <= 0:
        try:
            cols = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            cols = 0
    return cols or 80


def _umask() -> int:
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def _install() -> tuple[int, str, str]:
    """Which interpreter and which anchorfs: another install's server is not asked."""
    return sys.hexversion, sys.prefix, os.path.dirname(os.path.abspath(__file__))


def _runtime_dir(create: bool) -> str | None:
    """$XDG_RUNTIME_DIR/anchorfs, else <tmp>/anchorfs-UID; None when missing or not privately ours."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base and os.path.isabs(base):
        folder = os.path.join(base, "anchorfs")
    else:
        folder = os.path.join(os.environ.get("TMPDIR") or "/tmp", f"anchorfs-{os.getuid()}")  # noqa: S108
    if create:
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass
        except OSError:
            return None
    try:
        st = os.lstat(folder)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None  # a link, a file, someone else's, or open to others: never used
    return folder


def socket_path(root_real: str, *, create: bool = False) -> str | None:
    """Where the server of `root_real` listens: its state folder, else a private runtime folder."""
    path = os.path.join(root_real, ".anchorfs", SOCKET_NAME)
    if len(os.fsencode(path)) <= _MAX_UNIX_PATH:
        return path
    folder = _runtime_dir(create)
    if folder is None:
        return None
    import hashlib

    path = os.path.join(folder, hashlib.sha256(os.fsencode(root_real)).hexdigest()[:32] + ".sock")
    return path if len(os.fsencode(path)) <= _MAX_UNIX_PATH else None


def _own_socket(path: str) -> bool:
    """True when `path` itself (never a link to one) is a socket owned by us."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISSOCK(st.st_mode) and st.st_uid == os.getuid()


def _peer_uid(sock: "Any") -> int | None:
    """The uid of the process at the other end (SO_PEERCRED: pid, uid, gid as C ints)."""
    opt = getattr(_socket, "SO_PEERCRED", None)
    if opt is None:
        return None
    raw = sock.getsockopt(_socket.SOL_SOCKET, opt, 12)
    return int.from_bytes(raw[4:8], sys.byteorder)


def served_command(argv: "Sequence[str]") -> tuple[str, str | None] | None:
    """(command, the --root given) when `argv` is a command a server may run; None for any other,
    for help and version, and for `-` (stdin). The command's `--root` wins over the group's."""
    roots: list[str | None] = [None, None]
    command: str | None = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-h", "--help", "--version", "-"):
            return None
        if arg == "--" and command is not None:
            return None if "-" in argv[i + 1:] else (command, roots[1] or roots[0])
        if (got := option_value(argv, i)) is not None:
            value, i = got
            if not value:
                return None
            roots[command is not None] = value
        elif command is None:
            if arg == "--json":
                pass
            elif arg.startswith("-") or arg not in SERVED:
                return None
            else:
                command = arg
        i += 1
    if command is None:
        return None
    return command, roots[1] or roots[0]


# -- framing: a 4-byte length, then marshal data (builtin: nothing to import) ------------------

def _send(sock: "Any", obj: "Any") -> None:
    data = marshal.dumps(obj)
    sock.sendall(len(data).to_bytes(4, "big") + data)


def _recv_exact(sock: "Any", n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise ConnectionError("connection closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _recv(sock: "Any") -> "Any":
    n = int.from_bytes(_recv_exact(sock, 4), "big")
    if n > MAX_MESSAGE:
        raise ConnectionError("message too long")
    return marshal.loads(_recv_exact(sock, n))


# -- the client ------------------------------------------------------------------------------

def _connect(root_real: str) -> "Any":
    """A connected socket to this workspace's server, checked both ways; None when there is none."""
    state = os.path.join(root_real, ".anchorfs")
    try:
        if not stat.S_ISDIR(os.lstat(state).st_mode):
            return None  # a link: the in-process path refuses it with its own message
    except OSError:
        return None
    path = socket_path(root_real)
    if path is None or not _own_socket(path):
        return None
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT)
        sock.connect(path)
        if _peer_uid(sock) != os.getuid():
            raise ConnectionError("the server runs as another user")
    except ConnectionRefusedError:
        sock.close()
        _remove_stale(state, path)
        return None
    except OSError:
        sock.close()
        return None
    return sock


def _remove_stale(state: str, path: str) -> None:
    """Remove a dead server's socket, under a shared lock on the state folder (a live server's)."""
    import fcntl

    try:
        fd = os.open(state, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        if _own_socket(path):
            os.unlink(path)
    except OSError:
        pass
    finally:
        os.close(fd)


def _request(argv: "Sequence[str]", root_real: str) -> dict[str, object]:
    out, err = sys.stdout, sys.stderr
    return {
        "v": PROTOCOL, "op": "run", "argv": list(argv), "root": root_real, "cwd": os.getcwd(),
        "env": _relevant_env(os.environ), "umask": _umask(), "cols": _columns(), "install": _install(),
        "out": (getattr(out, "encoding", None) or "utf-8", getattr(out, "errors", None) or "strict",
                bool(out.isatty()) if hasattr(out, "isatty") else False),
        "err": (getattr(err, "encoding", None) or "utf-8", getattr(err, "errors", None) or "backslashreplace",
                bool(err.isatty()) if hasattr(err, "isatty") else False),
    }


def hand_off(argv: "Sequence[str]") -> int | None:
    """Run `argv` on this workspace's server, writing its output here; its exit code, or None."""
    if os.environ.get(NO_SERVER_ENV):
        return None
    parsed = served_command(argv)
    if parsed is None:
        return None
    try:
        root_real = locate(parsed[1])
    except (AnchorfsError, OSError):
        return None  # the in-process path says what is wrong
    sock = _connect(root_real)
    if sock is None:
        return None
    try:
        _send(sock, _request(argv, root_real))
        answer = _recv(sock)
        if not isinstance(answer, dict) or answer.get("accept") is not True:
            return None
        sock.settimeout(RESULT_TIMEOUT)
        result = _recv(sock)
    except (OSError, ValueError, EOFError, TypeError):
        return None
    finally:
        sock.close()
    if not isinstance(result, dict) or "code" not in result:
        return None  # declined while running (another workspace's --root): nothing was done
    try:
        for fd, data in result["chunks"]:
            stream = sys.stdout if fd == 1 else sys.stderr
            stream.flush()
            stream.buffer.write(data)
            stream.buffer.flush()
    except BrokenPipeError:  # as the full CLI ends (click): 1, and nothing more written
        os._exit(1)
    return int(result["code"])


def _ask(root: "str | os.PathLike[str] | None", op: str) -> dict[str, "Any"] | None:
    sock = _connect(locate(root))
    if sock is None:
        return None
    try:
        _send(sock, {"v": PROTOCOL, "op": op})
        answer = _recv(sock)
    except (OSError, ValueError, EOFError, TypeError):
        return None
    finally:
        sock.close()
    return answer if isinstance(answer, dict) else None


def ping(root: "str | os.PathLike[str] | None" = None) -> dict[str, "Any"] | None:
    """The running server's facts (`pid`, `root`, `socket`, `served`, `started`), or None."""
    return _ask(root, "ping")


def stop(root: "str | os.PathLike[str] | None" = None) -> bool:
    """Ask this workspace's server to exit; False when none answered."""
    answer = _ask(root, "stop")
    return bool(answer and answer.get("stopping"))


def detach(root: "str | os.PathLike[str] | None" = None, *, idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
           wait: float = 60.0) -> dict[str, "Any"]:
    """Start this workspace's server in the background; its `ping` once it answers."""
    import subprocess
    import tempfile
    import time

    root_real = locate(root)
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "anchorfs", "serve", "--root", root_real, "--idle-timeout", str(idle_timeout)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True, cwd=root_real)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            info = ping(root_real)
            if info is not None and info.get("pid") == proc.pid:
                return info
            if proc.poll() is not None:
                log.seek(0)
                lines = log.read().decode("utf-8", "replace").strip().splitlines()
                raise WorkspaceError((lines[-1] if lines else f"the server exited with {proc.returncode}")
                                     .removeprefix("anchorfs: error: "))
            time.sleep(0.05)
        proc.terminate()
        raise WorkspaceError(f"the server did not answer within {wait:.0f} s")


def start_behind(ws: "Workspace") -> None:
    """After a person's one-shot `query` or `context` at a terminal (never a script's), start the
    workspace's server, detached, to answer the next warm; off with `serve.auto = false`, ANCHORFS_NO_SERVER."""
    import subprocess

    from .base import _Ctx

    if (_Ctx.opener is not None or not sys.stdout.isatty() or os.environ.get(NO_SERVER_ENV)
            or not ws.config["serve.auto"] or ping(ws.root_real)):
        return
    try:  # a second one started meanwhile exits on the server lock
        subprocess.Popen([sys.executable, "-m", "anchorfs", "serve", "--root", ws.root_real, "--idle-timeout",
                          str(DEFAULT_IDLE_TIMEOUT)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True, cwd=ws.root_real)
    except OSError:
        pass  # only speed is at stake


# -- the server ------------------------------------------------------------------------------

def _chunks(fd: int, chunks: list[tuple[int, bytes]], tty: bool) -> "Any":
    """A raw stream recording what is written, interleaved with the other stream's writes."""
    import io

    class Chunks(io.RawIOBase):
        def write(self, data: "Any") -> int:
            chunks.append((fd, bytes(data)))
            return len(chunks[-1][1])

        def isatty(self) -> bool:
            return tty

        def writable(self) -> bool:
            return True

    return Chunks()


def _code_of(exc: SystemExit, err: "Any") -> int:
    """The exit status Python gives `sys.exit(x)`: None is 0, an int itself, else printed and 1."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    err.write(f"{code}\n")
    return 1


def _package_stamp() -> tuple[int, ...]:
    """The anchorfs sources' mtimes: an edited checkout must not be served by its old code."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        return tuple(sorted(e.stat().st_mtime_ns for e in os.scandir(here) if e.name.endswith((".py", ".so"))))
    except OSError:
        return ()


class _Pool:
    """The workspace kept warm, reopened when `.anchorfs.toml`, the state folder or git's top change."""

    def __init__(self, root_real: str) -> None:
        self.root_real = root_real
        self.ws: Workspace | None = None
        self.sig: tuple[object, ...] | None = None

    def _signature(self) -> tuple[object, ...]:
        def ident(path: str) -> tuple[int, int, int, int] | None:
            try:
                st = os.lstat(path)
            except OSError:
                return None
            return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns

        from ..core.config import CONFIG_FILE

        probe, git = self.root_real, None
        while True:  # where `git.toplevel` would find the repo (which one, not its contents: git writes there)
            git = ident(os.path.join(probe, ".git"))
            parent = os.path.dirname(probe)
            if git is not None or parent == probe:
                break
            probe = parent
        state = ident(os.path.join(self.root_real, ".anchorfs"))
        store = ident(os.path.join(self.root_real, ".anchorfs", "memories.lance"))
        # the state folder and `.git` by inode alone (writes inside change their times); the
        # store's folder by inode and ctime, which only its re-creation (`reindex`) changes
        return (ident(os.path.join(self.root_real, CONFIG_FILE)), state and state[0], store and (store[0], store[3]),
                probe, git and git[0])

    def open(self, root: "str | os.PathLike[str] | None" = None, **kwargs: "Any") -> "Workspace":
        """The warm workspace, if `root` resolves to ours; anything else is `Declined`."""
        from pathlib import Path

        from ..sdk.workspace import Workspace

        if kwargs or locate(root) != self.root_real:
            raise Declined("not this server's workspace")
        sig = self._signature()
        if self.ws is None or sig != self.sig:
            self.ws = None
            self.ws = Workspace(Path(self.root_real))
            self.sig = sig
        else:
            check_state(self.ws.state)  # as a fresh open does: a link planted since is refused now
        return self.ws


class Server:
    """One workspace's server: `serve()` until idle, a `stop` request, SIGTERM or SIGINT."""

    def __init__(self, root: "str | os.PathLike[str] | None" = None, *, idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
                 on_ready: "Callable[[Server], None] | None" = None) -> None:
        if getattr(_socket, "SO_PEERCRED", None) is None:
            raise WorkspaceError("anchorfs serve needs SO_PEERCRED (Linux); commands run in process here")
        self.root_real = locate(root)
        self.state = os.path.join(self.root_real, ".anchorfs")
        path = socket_path(self.root_real, create=True)
        if path is None:
            raise WorkspaceError(f"no private folder for the socket of {self.root_real} (its path is too long "
                                 "for a Unix socket, and $XDG_RUNTIME_DIR or /tmp/anchorfs-UID is not ours)")
        self.path = path
        self.idle_timeout = idle_timeout
        self.on_ready = on_ready
        self.served = 0
        self.started = 0.0
        self.env = _relevant_env(os.environ)  # as started: an embedder's setdefaults later do not count
        self.install = _install()
        self.stamp = _package_stamp()
        self.pool = _Pool(self.root_real)
        self._stopping = False
        self._busy = False
        self._ino: int | None = None

    # -- lifetime ------------------------------------------------------------------------

    def _lock(self) -> int:
        """An exclusive lock on the state folder for the server's life: a second server is refused."""
        import fcntl

        check_state_dir(self.state)
        try:
            fd = os.open(self.state, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            raise WorkspaceError(f"cannot open {self.state}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            running = ping(self.root_real)
            pid = f" (pid {running['pid']})" if running else ""
            raise WorkspaceError(f"a server already runs for {self.root_real}{pid}") from None
        return fd

    def _check_path(self) -> bool:
        """True when a dead server's socket is at `self.path`; anything else there is refused."""
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise WorkspaceError(f"cannot read {self.path}: {exc.strerror}") from None
        if not (stat.S_ISSOCK(st.st_mode) and st.st_uid == os.getuid()):
            raise WorkspaceError(f"refusing {self.path}: not a socket of ours (a link or a file); remove it to serve")
        return True

    def _bind(self) -> "Any":
        """Listen at `self.path`, replacing a dead server's socket (we hold the lock)."""
        if self._check_path():
            os.unlink(self.path)
        import socket

        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        mask = os.umask(0o177)
        try:
            sock.bind(self.path)
        except OSError as exc:
            sock.close()
            raise WorkspaceError(f"cannot listen at {self.path}: {exc.strerror}") from None
        finally:
            os.umask(mask)
        sock.listen(64)
        self._ino = os.lstat(self.path).st_ino
        return sock

    def _still_ours(self) -> bool:
        try:
            st = os.lstat(self.path)
        except OSError:
            return False
        return stat.S_ISSOCK(st.st_mode) and st.st_ino == self._ino

    def _on_signal(self, signum: int, frame: object) -> None:
        self._stopping = True
        if not self._busy:
            raise SystemExit(0)

    def warm(self) -> None:
        """Import and fold now, not at the first request: the CLI, LanceDB, the ledger, the store."""
        import codecs

        from . import _json_escape

        codecs.register_error("anchorfs.json-escape", _json_escape)  # the callers' stdout error handler
        cwd = os.getcwd()
        try:
            ws = self.pool.open(self.root_real)
            ws.query("warm up", k=1)
            ws.close()
        finally:
            os.chdir(cwd)

    def serve(self) -> None:
        """Serve until told to stop or idle; always removes its socket and lock."""
        import select
        import signal
        import time

        from .base import _Ctx

        lock = self._lock()
        listener = None
        old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            self._check_path()  # refused before the imports and the fold, not after
            self.warm()
            listener = self._bind()
            self.started = time.time()
            _Ctx.opener = self.pool.open
            if self.on_ready is not None:
                self.on_ready(self)
            last = time.monotonic()
            while not self._stopping:
                wait = 1.0
                if self.idle_timeout > 0:
                    left = self.idle_timeout - (time.monotonic() - last)
                    if left <= 0:
                        break
                    wait = min(wait, left)
                ready, _, _ = select.select([listener], [], [], wait)
                if not self._still_ours():
                    break  # removed (the state folder deleted, re-initialised): nobody can reach us
                if not ready:
                    continue
                try:
                    conn, _ = listener.accept()
                except OSError:
                    continue
                self._busy = True
                try:
                    self._handle(conn)
                finally:
                    self._busy = False
                    conn.close()
                last = time.monotonic()
        finally:
            _Ctx.opener = None
            for s, handler in old.items():
                signal.signal(s, handler)
            if listener is not None:
                if self._still_ours():
                    try:
                        os.unlink(self.path)
                    except OSError:
                        pass
                listener.close()
            os.close(lock)

    # -- one request ---------------------------------------------------------------------

    def _handle(self, conn: "Any") -> None:
        try:
            conn.settimeout(5.0)
            if _peer_uid(conn) != os.getuid():
                return
            req = _recv(conn)
            if not isinstance(req, dict) or req.get("v") != PROTOCOL:
                _send(conn, {"decline": "protocol"})
                return
            op = req.get("op")
            if op in ("ping", "stop"):
                if op == "stop":
                    self._stopping = True
                _send(conn, {"pid": os.getpid(), "root": self.root_real, "socket": self.path, "served": self.served,
                             "started": self.started, "idle_timeout": self.idle_timeout, "stopping": self._stopping,
                             "install": self.install})
                return
            reason = self._refusal(req)
            if reason is not None:
                _send(conn, {"decline": reason})
                if reason == "code changed":
                    self._stopping = True
                return
            _send(conn, {"accept": True})
            conn.settimeout(RESULT_TIMEOUT)
            _send(conn, self._run(req))
        except (OSError, ValueError, EOFError, TypeError):
            return  # the caller went away or spoke nonsense: it falls back on its own
        except Exception:  # noqa: BLE001 - a bug here must not end the server; the caller falls back
            import traceback

            traceback.print_exc()

    def _refusal(self, req: dict[str, "Any"]) -> str | None:
        """Why this request is the in-process path's, or None to serve it."""
        argv = req.get("argv")
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            return "bad request"
        parsed = served_command(argv)
        if parsed is None:
            return "not a served command"
        if req.get("root") != self.root_real:
            return "another workspace"
        if req.get("env") != self.env:
            return "another environment"
        if req.get("install") != self.install:
            return "another anchorfs"
        if _package_stamp() != self.stamp:
            return "code changed"
        if req.get("umask") != _umask():
            return "another umask"
        for key in ("out", "err"):
            spec = req.get(key)
            if not (isinstance(spec, tuple) and len(spec) == 3 and isinstance(spec[0], str)
                    and isinstance(spec[1], str)):
                return "bad request"
            import codecs

            try:
                codecs.lookup(spec[0])
                codecs.lookup_error(spec[1])
            except LookupError:
                return "unknown encoding"
        cols = req.get("cols")  # a terminal's width is the caller's (`_run`); a pipe's, click's (<= 80) ours
        if not isinstance(cols, int) or cols < 1 or not (req["out"][2] or min(cols, 80) == min(_columns(), 80)):
            return "another terminal width"
        cwd = req.get("cwd")
        if not isinstance(cwd, str) or not os.path.isabs(cwd) or not os.path.isdir(cwd):
            return "no such folder"
        return None

    def _run(self, req: dict[str, "Any"]) -> dict[str, "Any"]:
        """The CLI's own `main` on the request, as the caller's process would have run it."""
        import io
        import traceback
        import warnings

        from .base import run as cli_main

        chunks: list[tuple[int, bytes]] = []
        (oenc, oerr, otty), (eenc, eerr, etty) = req["out"], req["err"]
        out = io.TextIOWrapper(_chunks(1, chunks, otty), encoding=oenc, errors=oerr, write_through=True)
        err = io.TextIOWrapper(_chunks(2, chunks, etty), encoding=eenc, errors=eerr, write_through=True)
        saved = sys.stdin, sys.stdout, sys.stderr
        here = os.getcwd()
        code = 0
        width = otty and "COLUMNS" not in os.environ  # the caller's terminal, which this process has not got
        try:
            if width:
                os.environ["COLUMNS"] = str(req["cols"])
            os.chdir(req["cwd"])
            sys.stdin = io.TextIOWrapper(io.BytesIO(b""), encoding="utf-8")
            sys.stdout, sys.stderr = out, err
            with warnings.catch_warnings():  # filters and `showwarning` as a new process has them, once-only reset
                try:
                    cli_main(req["argv"])
                except SystemExit as exc:
                    code = _code_of(exc, err)
                except Declined as exc:
                    return {"decline": str(exc)}
                except Exception:  # noqa: BLE001 - as Python ends a process on one: the traceback, 1
                    traceback.print_exc(file=err)
                    code = 1
            for stream in (out, err):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
        finally:
            sys.stdin, sys.stdout, sys.stderr = saved
            os.chdir(here)
            if width:
                del os.environ["COLUMNS"]
        self.served += 1
        return {"code": code, "chunks": chunks}
