from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing a test does may leak into the real home or cache, or read the developer's env."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for key in list(os.environ):
        if key.startswith("ANCHORFS_") or key in ("COLUMNS", "LINES"):  # pytest-xdist sets a terminal's size
            monkeypatch.delenv(key)
    monkeypatch.setenv("ANCHORFS_SERVE_AUTO", "0")  # no query a test runs leaves a server behind


TOKEN = """class TokenIssuer:
    def issue(self, user):
        return sign(user, hours=24)

    def revoke(self, token):
        return None
"""
"""A small module with a class, a method and a one-line span: the anchored file most tests edit."""


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Run git with a fixed identity; returns stdout."""
    full_env = dict(os.environ)
    full_env.update(
        GIT_AUTHOR_NAME="Test Author",
        GIT_AUTHOR_EMAIL="author@example.com",
        GIT_COMMITTER_NAME="Test Author",
        GIT_COMMITTER_EMAIL="author@example.com",
    )
    if env:
        full_env.update(env)
    return subprocess.run(
        ["git", *args], cwd=cwd, env=full_env, check=True, capture_output=True, text=True
    ).stdout


_HOOK_PROBE = ("import io, sys\n"
               "made = []\n"
               "if sys.argv[1] == 'count':  # every dataclass built while the hook runs, by name\n"
               "    import dataclasses\n"
               "    real = dataclasses.dataclass\n"
               "    def counting(cls=None, /, **kw):\n"
               "        def wrap(c):\n            made.append(c.__qualname__)\n            return real(c, **kw)\n"
               "        return wrap if cls is None else wrap(cls)\n"
               "    dataclasses.dataclass = counting\n"
               "import anchorfs.ledger.foldsnap as foldsnap\n"
               "foldsnap.MIN_LINES = 0  # a small ledger snapshotted too, as a large one is\n"
               "from anchorfs.__main__ import main\n"
               "sys.stdin = io.TextIOWrapper(io.BytesIO(sys.argv[2].encode()))\n"
               "try:\n    main(sys.argv[3:])\nexcept SystemExit:\n    pass\n"
               "loaded = sorted(sys.modules)\n"
               "import json\n"
               "sys.stderr.write(json.dumps({'made': made, 'all': loaded,\n"
               "                             'mods': [m for m in loaded if m.startswith('anchorfs')]}))\n")


def hook_probe(root: Path, stdin: str, *argv: str, count_dataclasses: bool = False) -> tuple[str, dict[str, Any]]:
    """Run `anchorfs ARGV` as a hook runs (its own process, `stdin` fed) and report what it
    imported: (stdout, {"all": every module loaded when it returned, "mods": anchorfs's own,
    "made": the dataclasses it built, by name, when `count_dataclasses`}). The report is taken
    before the probe's own json import, so "json" in "all" is the hook's."""
    proc = subprocess.run([sys.executable, "-c", _HOOK_PROBE, "count" if count_dataclasses else "-", stdin, *argv],
                          cwd=root, capture_output=True, text=True, timeout=60, check=False)
    report = json.loads(proc.stderr)
    assert isinstance(report, dict), proc.stderr
    return proc.stdout, report


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    """An empty git repo with a fixed identity."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    return root


@pytest.fixture
def count_checks(monkeypatch: pytest.MonkeyPatch) -> Callable[[], list[str]]:
    """Call it to start counting: the ids of the memories `DriftChecker.check` checks from then
    on, one entry a check (a pass's one-by-one checks included), in a list it returns."""
    from anchorfs.drift.check import DriftChecker

    def start() -> list[str]:
        calls: list[str] = []
        real = DriftChecker.check

        def counted(self: DriftChecker, memory: Any) -> Any:
            calls.append(memory.id)
            return real(self, memory)

        monkeypatch.setattr(DriftChecker, "check", counted)
        return calls

    return start


@pytest.fixture
def no_racy_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Trust hashes of files written before the check began (granularity 0), in this process.

    The racy rule judges the later of mtime and ctime, and a test can backdate an mtime but never
    a ctime: without this, every file a test has just written stays racy for the default two
    seconds and is re-hashed. Tests of the racy rule itself pass `granularity_ns` explicitly.
    """
    _racy_window(monkeypatch, 0)


@pytest.fixture
def short_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """The racy window at 30 ms in this process (the memo's and the hash cache's): a test of
    what settles waits 50 ms, not two seconds."""
    _racy_window(monkeypatch, 30_000_000)


def _racy_window(monkeypatch: pytest.MonkeyPatch, ns: int) -> None:
    import anchorfs.drift.hashcache as hashing

    monkeypatch.setattr(hashing, "DEFAULT_GRANULARITY_NS", ns)
    kwdefaults = hashing.HashCache.__init__.__kwdefaults__
    assert kwdefaults is not None
    monkeypatch.setitem(kwdefaults, "granularity_ns", ns)


def tree_snapshot(top: Path) -> dict[str, tuple[str, bytes]]:
    """Every path under `top`, never following a link: its type and its bytes or link target
    (a refusal must leave this the same: nothing written, not the victim, not outside)."""
    import stat

    out: dict[str, tuple[str, bytes]] = {}
    for folder, dirs, files in os.walk(top):
        for name in dirs + files:
            path = os.path.join(folder, name)
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                out[path] = ("link", os.readlink(path).encode())
            elif stat.S_ISDIR(st.st_mode):
                out[path] = ("dir", b"")
            else:
                with open(path, "rb") as fh:
                    out[path] = ("file", fh.read())
    return out


def run_cli(capsys: pytest.CaptureFixture[str], *args: str, entry: bool = False) -> tuple[int, str]:
    """The CLI in process (`entry`: through `anchorfs.__main__`, the fast paths first): its exit
    code and its stderr."""
    from anchorfs.__main__ import main as entry_main
    from anchorfs.cli.commands import main

    with pytest.raises(SystemExit) as exc:
        (entry_main if entry else main)(list(args))
    code = exc.value.code
    return (code if isinstance(code, int) else 0), capsys.readouterr().err


def anchored_clone(tmp_path_factory: pytest.TempPathFactory, app: bytes) -> tuple[Path, str]:
    """A git workspace with one memory anchored to `src/app.py#handler`, its store and its fold
    snapshot, built once per test module (a template to copy, then plant links in)."""
    import anchorfs

    root = tmp_path_factory.mktemp("template") / "clone"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_bytes(app)
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    anchorfs.init(root)
    with pytest.MonkeyPatch.context() as mp:  # the isolation above is per test; this runs before it
        mp.setenv("HOME", str(root.parent))
        mp.setenv("XDG_CACHE_HOME", str(root.parent / ".cache"))
        for key in [k for k in os.environ if k.startswith("ANCHORFS_")]:
            mp.delenv(key)
        with anchorfs.open(root) as ws:
            memory_id = ws.record("the handler answers ok", anchors=["src/app.py#handler"]).id
    return root, memory_id


def shown(root: Path, memory_id: str) -> str:
    """`memory_id` as every surface prints it: its shortest unique prefix in the workspace at `root`."""
    import anchorfs

    with anchorfs.open(root) as ws:
        return ws.short_ids([memory_id])[memory_id]


def drift_column(store: Any) -> dict[str, str | None]:
    """The store's `drift` column, by memory id (what a reindex or a search would read)."""
    table = store.table()
    rows = table.search().select(["id", "drift"]).limit(max(1, table.count_rows())).to_list()
    return {r["id"]: r["drift"] for r in rows}


def read_events(ws: Any) -> list[dict[str, Any]]:
    """The drift transitions logged in `events.jsonl`, oldest first, as a user's tool reads them."""
    path = Path(ws.state_dir) / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
