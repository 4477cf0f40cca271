from __future__ import annotations

import os
import socket
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from anchorfs.anchor.anchors import parse_spec, take
from anchorfs.core.model import AnchorRef, Drift, Memory
from anchorfs.verify.claims import (
    Claim,
    ClaimResult,
    MemoryVerdict,
    SymbolIndex,
    check_memory,
    check_url,
    check_urls,
    extract_claims,
    remote_context,
    verify,
)
from anchorfs.verify.claims import suggest, suggest_anchors

PROVIDER = '''"""Token issuing."""

DEFAULT_TTL = 24 * 3600


def load_key(path):
    return open(path, "rb").read()


class TokenIssuer:
    def issue(self, subject):
        return subject[::-1]

    def revoke(self, token):
        # the old rotate_keys helper was folded in here
        return None
'''

USERS_TS = '''export function getUserById(id: string): string {
  return id;
}

export class UserStore {
  save(user: string): void {}
}
'''

HELPERS_PY = '''def shared_name():
    return 1
'''

OTHER_PY = '''def shared_name():
    return 2
'''


def mem(content: str, *, id: str = "m1", anchors: tuple[AnchorRef, ...] = ()) -> Memory:
    return Memory(id=id, content=content, anchors=anchors)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src" / "auth").mkdir(parents=True)
    (root / "src" / "api").mkdir()
    (root / "src" / "util").mkdir()
    (root / "docs").mkdir()
    (root / "config").mkdir()
    (root / ".anchorfs").mkdir()
    (root / ".anchorfs" / "ledger.jsonl").write_text("")
    (root / "src" / "auth" / "provider.py").write_text(PROVIDER)
    (root / "src" / "api" / "users.ts").write_text(USERS_TS)
    (root / "src" / "util" / "helpers.py").write_text(HELPERS_PY)
    (root / "src" / "util" / "other.py").write_text(OTHER_PY)
    (root / "config" / "settings.toml").write_text("debug = false\n")
    (root / "README.md").write_text("# Intro\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    (root / "link_out").symlink_to(outside, target_is_directory=True)
    return root


def only(root: Path, text: str, **kw: object) -> dict[str, tuple[str, str]]:
    """claim value -> (verdict, detail) for one memory."""
    result = check_memory(root, mem(text), **kw)  # type: ignore[arg-type]
    return {c.claim.value: (c.verdict.value, c.detail) for c in result.claims}


def verdicts(root: Path, text: str, **kw: object) -> dict[str, str]:
    return {k: v for k, (v, _) in only(root, text, **kw).items()}


# -- extraction --------------------------------------------------------------------------------

def values(text: str, kind: str | None = None) -> list[str]:
    return [c.value for c in extract_claims(text) if kind is None or c.kind == kind]


@pytest.mark.parametrize(
    "text",
    [
        "The issuer lives in src/auth/provider.py.",
        "It lives in src/auth/provider.py, next to the keys.",
        "Is it src/auth/provider.py?",
        "(see src/auth/provider.py)",
        "Look at src/auth/provider.py!",
        "Line 42 of src/auth/provider.py:42 is the one.",
        "See src/auth/provider.py:10-20; it is short.",
        "`src/auth/provider.py`",
        "**src/auth/provider.py**",
        "[the provider](src/auth/provider.py)",
        "src/auth/provider.py's docstring",
    ],
)
def test_trailing_punctuation_and_wrappers_are_trimmed(text: str) -> None:
    assert values(text, "path") == ["src/auth/provider.py"]


@pytest.mark.parametrize(
    "text",
    [
        "Unpack to chromium-<version>/bin/chrome",
        "Builds land in $TAG/build/out.bin",
        "Tests go to tests/{name}.py",
        "Set ${HOME}/cache/x.db",
        "Globs like src/**/*.py are fine",
        "The usual path/to/file.py placeholder",
        "Paths like src/.../provider.py elide",
        "Output: %APPDATA%/app/log.txt",
    ],
)
def test_templates_are_not_claims(text: str) -> None:
    assert extract_claims(text) == []


def test_a_path_inside_a_url_is_not_a_path_claim() -> None:
    text = "Docs: https://github.com/org/repo/blob/main/src/auth/provider.py#L10 explain it."
    assert extract_claims(text) == [
        Claim("url", "https://github.com/org/repo/blob/main/src/auth/provider.py#L10")
    ]
    # a scheme-less URL is no path either
    assert values("mirrored at github.com/org/repo/README.md", "path") == []


def test_urls_are_trimmed_and_templated_urls_dropped() -> None:
    assert values("(see https://example.com/a).", "url") == ["https://example.com/a"]
    assert values("Wiki: https://en.wikipedia.org/wiki/Tree_(graph).", "url") == [
        "https://en.wikipedia.org/wiki/Tree_(graph)"
    ]
    assert values("`https://example.com/api`, and <https://example.com/b>", "url") == [
        "https://example.com/api",
        "https://example.com/b",
    ]
    assert values("Fetch https://example.com/chromium-<version>.zip", "url") == []
    assert values("Fetch https://example.com/{name}/x", "url") == []
    assert values("only http(s) schemes: ftp://example.com/a.txt", "url") == []


def test_duplicates_collapse_in_first_seen_order() -> None:
    text = (
        "src/auth/provider.py, then `src/auth/provider.py` and (src/auth/provider.py). "
        "See https://example.com/a and https://example.com/a. Also docs/guide.md and ./docs/guide.md"
    )
    assert extract_claims(text) == [
        Claim("url", "https://example.com/a"),
        Claim("path", "src/auth/provider.py"),
        Claim("path", "docs/guide.md"),
    ]


def test_absolute_home_symbol_and_identifier_shapes() -> None:
    text = (
        "Edit /etc/nginx/nginx.conf and ~/.config/app.toml; the code is "
        "src/auth/provider.py#TokenIssuer.issue and `TokenIssuer`, `getUserById()`, `Foo::bar`."
    )
    assert extract_claims(text) == [
        Claim("symbol", "TokenIssuer"),
        Claim("symbol", "getUserById"),
        Claim("symbol", "Foo.bar"),
        Claim("path", "/etc/nginx/nginx.conf"),
        Claim("path", "~/.config/app.toml"),
        Claim("symbol", "src/auth/provider.py#TokenIssuer.issue"),
    ]


def test_line_fragments_markers_and_prose_are_not_symbol_claims() -> None:
    assert extract_claims("docs/x.md#L10-L20 and README.md#install-guide") == [
        Claim("path", "docs/x.md"),
        Claim("path", "README.md"),
    ]
    assert extract_claims("@anchor(file=src/auth/provider.py, symbol=TokenIssuer)") == []
    # numbers, dates and tilde-prose are no paths
    assert values("ran 3.11 on 2024/01/02, ~5 minutes, 1/2 the time", "path") == []


def test_remote_context_triggers() -> None:
    assert remote_context("ssh into prod and look") == "ssh"
    assert remote_context("scp the dump over") == "scp"
    assert remote_context("rsync -a the folder") == "rsync"
    assert remote_context("log in as deploy@prod-box first") is not None
    assert remote_context("the box at 10.0.3.7 runs it") is not None
    assert remote_context("docker exec -it web sh") is not None
    assert remote_context("kubectl exec deploy/api -- ls") is not None
    # local things that look similar
    assert remote_context("my key is ~/.ssh/id_ed25519") is None
    assert remote_context("generate one with ssh-keygen") is None
    assert remote_context("served at 127.0.0.1:8000") is None
    assert remote_context("python 3.11.4 and version 1.2.3") is None


# -- path verdicts -----------------------------------------------------------------------------

def test_existing_workspace_path_is_fresh(ws: Path) -> None:
    got = only(ws, "The issuer is src/auth/provider.py; docs live in docs/.")
    assert got["src/auth/provider.py"] == ("fresh", "file exists")
    assert got["docs/"] == ("fresh", "folder exists")


def test_missing_path_with_existing_folder_is_stale(ws: Path) -> None:
    result = check_memory(ws, mem("Tokens are minted in src/auth/tokens.py"))
    assert result.verdict is Drift.STALE
    (claim,) = result.claims
    assert claim.verdict is Drift.STALE
    assert "src/auth/tokens.py does not exist" in claim.detail and "src/auth/" in claim.detail


def test_missing_path_whose_folder_is_missing_too_is_unknown(ws: Path) -> None:
    assert verdicts(ws, "It was in src/billing/invoice.py") == {"src/billing/invoice.py": "unknown"}


def test_missing_at_root_stale_only_when_written_as_a_root_path(ws: Path) -> None:
    assert verdicts(ws, "see ./CHANGELOG.md") == {"./CHANGELOG.md": "stale"}
    # a bare name could be anywhere: missing everywhere is no claim at all
    assert check_memory(ws, mem("see CHANGELOG.md")).claims == ()


def test_bare_file_names_are_found_anywhere(ws: Path) -> None:
    got = only(ws, "Flags live in settings.toml and README.md")
    assert got["settings.toml"] == ("fresh", "found at config/settings.toml")
    assert got["README.md"][0] == "fresh"


def test_prose_slashes_are_not_paths(ws: Path) -> None:
    result = check_memory(ws, mem("Use read/write locks and/or retries"))
    assert result.claims == () and result.verdict is None
    # ...but a folder that exists here makes it one
    assert verdicts(ws, "the src/auth module") == {"src/auth": "fresh"}
    assert verdicts(ws, "the src/payments module") == {"src/payments": "stale"}


def test_absolute_path_inside_the_workspace_uses_workspace_rules(ws: Path) -> None:
    got = verdicts(ws, f"see {ws}/src/auth/provider.py and {ws}/src/auth/gone.py")
    assert got == {f"{ws}/src/auth/provider.py": "fresh", f"{ws}/src/auth/gone.py": "stale"}


def test_system_paths_are_never_stale(ws: Path) -> None:
    missing = "/etc/anchorfs-never-there.conf"
    assert not os.path.exists(missing) and os.path.isdir("/etc")
    got = only(ws, f"Config is {missing}, /etc/hosts, /usr/lib/anchorfs-nope/x.so and /opt/app/run.sh")
    assert {v for v, _ in got.values()} == {"unknown"}
    assert len(got) == 4
    assert "another machine" in got[missing][1]


def test_home_paths_follow_the_existence_rule(ws: Path) -> None:
    home = Path(os.environ["HOME"])
    (home / ".config").mkdir(exist_ok=True)
    (home / ".config" / "app.toml").write_text("x = 1\n")
    got = verdicts(
        ws,
        "Settings: ~/.config/app.toml, ~/.config/old.toml, ~/.nothing/here.toml, ~bob/notes.txt",
    )
    assert got == {
        "~/.config/app.toml": "fresh",
        "~/.config/old.toml": "stale",
        "~/.nothing/here.toml": "unknown",
        "~bob/notes.txt": "unknown",
    }
    # the same file written as an absolute path is judged by the same rule
    assert verdicts(ws, f"see {home}/.config/old.toml") == {f"{home}/.config/old.toml": "stale"}


def test_symlink_out_of_the_workspace_is_unknown_and_not_followed(ws: Path) -> None:
    got = only(ws, "See link_out/secret.txt and link_out/missing.txt")
    assert {k: v for k, (v, _) in got.items()} == {
        "link_out/secret.txt": "unknown",
        "link_out/missing.txt": "unknown",
    }
    assert "through a symlink" in got["link_out/secret.txt"][1]


def test_parent_escapes_and_state_folder_are_unknown(ws: Path) -> None:
    got = only(ws, "See ../outside/secret.txt and .anchorfs/ledger.jsonl")
    assert {k: v for k, (v, _) in got.items()} == {
        "../outside/secret.txt": "unknown",
        ".anchorfs/ledger.jsonl": "unknown",
    }
    assert "outside the workspace" in got["../outside/secret.txt"][1]
    assert ".anchorfs/ folder" in got[".anchorfs/ledger.jsonl"][1]


@pytest.mark.parametrize(
    "context",
    [
        "ssh prod and then",
        "scp it over, then",
        "rsync the tree, then",
        "as deploy@build-1,",
        "on 10.20.30.40,",
        "docker exec web ls and",
        "kubectl exec api -- cat, and",
    ],
)
def test_remote_machine_mentions_make_every_path_claim_unknown(ws: Path, context: str) -> None:
    text = f"{context} check src/auth/tokens.py, src/auth/provider.py#Gone and src/auth/provider.py"
    result = check_memory(ws, mem(text))
    assert {c.claim.value: c.verdict for c in result.claims} == {
        "src/auth/tokens.py": Drift.UNKNOWN,  # would be stale locally
        "src/auth/provider.py#Gone": Drift.UNKNOWN,
        "src/auth/provider.py": Drift.UNKNOWN,
    }
    assert result.verdict is Drift.UNKNOWN
    assert all("another machine" in c.detail for c in result.claims)


def test_loopback_does_not_count_as_remote(ws: Path) -> None:
    assert verdicts(ws, "the dev server on 127.0.0.1 reads src/auth/tokens.py") == {
        "src/auth/tokens.py": "stale"
    }


# -- symbol verdicts ---------------------------------------------------------------------------

def test_file_symbol_that_resolves_is_fresh(ws: Path) -> None:
    got = only(ws, "see src/auth/provider.py#TokenIssuer.issue")
    verdict, detail = got["src/auth/provider.py#TokenIssuer.issue"]
    assert verdict == "fresh" and "src/auth/provider.py:11-12" in detail


def test_file_symbol_by_its_short_name_resolves_to_the_qualified_one(ws: Path) -> None:
    got = only(ws, "see src/auth/provider.py#issue")
    assert got["src/auth/provider.py#issue"] == (
        "fresh",
        "issue found as TokenIssuer.issue at src/auth/provider.py:11-12",
    )


def test_file_symbol_missing_from_an_existing_file_is_stale(ws: Path) -> None:
    result = check_memory(ws, mem("see src/auth/provider.py#TokenIssuer.refresh"))
    assert result.verdict is Drift.STALE
    assert result.claims[0].detail == "TokenIssuer.refresh is not defined in src/auth/provider.py"


def test_file_symbol_whose_file_is_gone_is_stale(ws: Path) -> None:
    assert verdicts(ws, "see src/auth/session.py#Session") == {"src/auth/session.py#Session": "stale"}


def test_file_symbol_ambiguous_cases_are_unknown(ws: Path) -> None:
    got = only(ws, "see README.md#Intro and src/auth/provider.py#rotate_keys")
    # no grammar for Markdown
    assert got["README.md#Intro"][0] == "unknown"
    # not a definition, but the name still appears in the file (a comment): no positive evidence
    assert got["src/auth/provider.py#rotate_keys"][0] == "unknown"


def test_backticked_identifiers_that_exist_are_fresh_claims(ws: Path) -> None:
    got = only(ws, "`TokenIssuer` calls `getUserById()` and `UserStore.save`")
    assert got["TokenIssuer"] == ("fresh", "defined as TokenIssuer in src/auth/provider.py:10")
    assert got["getUserById"][0] == "fresh" and "src/api/users.ts" in got["getUserById"][1]
    assert got["UserStore.save"][0] == "fresh"


def test_backticked_identifiers_found_nowhere_are_not_claims(ws: Path) -> None:
    result = check_memory(ws, mem("`NoSuchThing` and `frobnicate()` were discussed"))
    assert result.claims == () and result.verdict is None


def test_symbol_index_skips_vendored_and_hidden_folders(ws: Path) -> None:
    (ws / "node_modules" / "lib").mkdir(parents=True)
    (ws / "node_modules" / "lib" / "vendored.js").write_text("function vendoredOnly() {}\n")
    (ws / ".venv").mkdir()
    (ws / ".venv" / "v.py").write_text("def venv_only():\n    pass\n")
    (ws / "big.py").write_text("def huge_only():\n    pass\n" + "#" * (1024 * 1024))
    index = SymbolIndex(ws)
    assert index.lookup("vendoredOnly") == []
    assert index.lookup("venv_only") == []
    assert index.lookup("huge_only") == []
    assert [e.path for e in index.lookup("getUserById")] == ["src/api/users.ts"]
    assert not any(f.startswith(("node_modules/", ".venv/", ".anchorfs/", "link_out/")) for f in index.files)


# -- aggregation and the report ----------------------------------------------------------------

def test_memory_verdict_aggregates_stale_over_unknown_over_fresh(ws: Path) -> None:
    assert check_memory(ws, mem("src/auth/provider.py and /etc/hosts")).verdict is Drift.UNKNOWN
    assert check_memory(ws, mem("src/auth/provider.py, /etc/hosts, src/auth/x.py")).verdict is Drift.STALE
    assert check_memory(ws, mem("src/auth/provider.py and docs/")).verdict is Drift.FRESH


def test_report_json_contract_and_memories_without_claims(ws: Path) -> None:
    memories = [
        mem("src/auth/provider.py issues tokens", id="fresh1"),
        mem("tokens were in src/auth/tokens.py", id="stale1"),
        mem("deployed via ssh to /srv/app/current", id="unknown1"),
        mem("we prefer small pull requests", id="none1"),
    ]
    report = verify(ws, memories)
    d = report.to_dict()
    assert {k: d[k] for k in ("checked", "stale", "unknown", "fresh", "no_claims")} == {
        "checked": 3, "stale": 1, "unknown": 1, "fresh": 1, "no_claims": 1,
    }
    assert [r["id"] for r in d["results"]] == ["fresh1", "stale1", "unknown1"]
    assert [r["verdict"] for r in d["results"]] == ["fresh", "stale", "unknown"]
    assert d["results"][1]["claims"] == [
        {
            "kind": "path",
            "value": "src/auth/tokens.py",
            "verdict": "stale",
            "detail": "src/auth/tokens.py does not exist (its folder src/auth/ does)",
        }
    ]
    assert report.has_stale and [r.id for r in report.stale] == ["stale1"]
    assert not verify(ws, memories[:1]).has_stale
    # a single memory without claims has no verdict
    assert check_memory(ws, memories[3]).to_dict() == {"id": "none1", "verdict": None, "claims": []}


# -- URLs --------------------------------------------------------------------------------------

class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64  # the default 5 makes a burst of connects wait for SYN retries
    requests: list[tuple[str, str]]
    lock: threading.Lock
    release: threading.Event
    barrier: threading.Barrier
    active: int
    max_active: int


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    CODES = {"/ok": 200, "/auth": 401, "/forbidden": 403, "/missing": 404, "/gone": 410, "/error": 500}

    def log_message(self, *args: object) -> None:
        pass

    def _answer(self, method: str) -> None:
        srv = self.server
        path = self.path.split("?", 1)[0]
        with srv.lock:
            srv.requests.append((method, self.path))
            srv.active += 1
            srv.max_active = max(srv.max_active, srv.active)
        try:
            if path == "/slow":
                srv.release.wait(10)
            elif path == "/busy":
                # passes only when 8 requests are in flight at once
                srv.barrier.wait(timeout=5)
        except threading.BrokenBarrierError:
            path = "/error"
        finally:
            # before answering: the client's next request can only come after the answer
            with srv.lock:
                srv.active -= 1
        if path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "/ok")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if path in ("/slow", "/busy"):
            code = 200
        elif path == "/nohead":
            code = 405 if method == "HEAD" else 200
        else:
            code = self.CODES.get(path, 404)
        body = b"hello\n"
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if method == "GET":
            self.wfile.write(body)

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer("HEAD")

    def do_GET(self) -> None:  # noqa: N802
        self._answer("GET")


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, _Server]]:
    for key in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("no_proxy", "*")
    srv = _Server(("127.0.0.1", 0), _Handler)
    srv.requests, srv.lock, srv.release = [], threading.Lock(), threading.Event()
    srv.active = srv.max_active = 0
    srv.barrier = threading.Barrier(8)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}", srv
    finally:
        srv.release.set()
        srv.shutdown()
        srv.server_close()
        thread.join(5)


def _closed_port() -> int:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_url_verdicts_against_a_local_server(ws: Path, server: tuple[str, _Server]) -> None:
    base, srv = server
    closed = f"http://127.0.0.1:{_closed_port()}/ok"
    urls = {
        f"{base}/ok": "fresh",
        f"{base}/auth": "fresh",
        f"{base}/forbidden": "fresh",
        f"{base}/missing": "stale",
        f"{base}/gone": "stale",
        f"{base}/error": "unknown",
        f"{base}/nohead": "fresh",
        f"{base}/redirect": "fresh",
        closed: "unknown",
    }
    got = only(ws, "See " + " and ".join(urls) + ".", net=True, timeout=5)
    assert {k: v for k, (v, _) in got.items()} == urls
    assert got[f"{base}/auth"][1].startswith("HTTP 401")
    assert got[f"{base}/gone"][1] == "HTTP 410"
    assert got[closed][1].startswith("unreachable")
    # HEAD first; GET only when HEAD is refused (and to confirm a 404 / 410)
    assert ("HEAD", "/ok") in srv.requests and ("GET", "/ok") not in srv.requests
    assert ("HEAD", "/nohead") in srv.requests and ("GET", "/nohead") in srv.requests
    assert ("GET", "/missing") in srv.requests


def test_memory_verdict_from_urls(ws: Path, server: tuple[str, _Server]) -> None:
    base, _ = server
    report = verify(
        ws,
        [mem(f"see {base}/ok", id="a"), mem(f"see {base}/gone", id="b"), mem(f"see {base}/error", id="c")],
        net=True,
        timeout=5,
    )
    assert {r.id: r.verdict for r in report.results} == {
        "a": Drift.FRESH, "b": Drift.STALE, "c": Drift.UNKNOWN,
    }


def test_no_network_without_net(
    ws: Path, server: tuple[str, _Server], monkeypatch: pytest.MonkeyPatch
) -> None:
    base, srv = server

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("network used without net=True")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    monkeypatch.setattr(urllib.request.OpenerDirector, "open", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    memories = [mem(f"see {base}/gone and {base}/ok", id="a")]
    report = verify(ws, memories)
    (result,) = report.results
    assert result.verdict is Drift.UNKNOWN
    assert {c.verdict for c in result.claims} == {Drift.UNKNOWN}
    assert all("not checked" in c.detail for c in result.claims)
    assert check_memory(ws, memories[0]).verdict is Drift.UNKNOWN
    assert srv.requests == []


def test_a_url_named_twice_is_asked_once(ws: Path, server: tuple[str, _Server]) -> None:
    base, srv = server
    verify(ws, [mem(f"see {base}/ok", id="a"), mem(f"also {base}/ok.", id="b")], net=True, timeout=5)
    assert srv.requests == [("HEAD", "/ok")]


def test_timeouts_are_unknown(server: tuple[str, _Server]) -> None:
    base, srv = server
    verdict, detail = check_url(f"{base}/slow", timeout=0.2)
    srv.release.set()
    assert verdict is Drift.UNKNOWN
    assert "timed out" in detail


def test_concurrency_is_bounded_at_eight(server: tuple[str, _Server]) -> None:
    base, srv = server
    urls = [f"{base}/busy?i={i}" for i in range(24)]
    results = check_urls(urls, timeout=8)
    assert set(results) == set(urls)
    # every request passed a barrier of 8: eight were in flight together, never a ninth
    assert {v for v, _ in results.values()} == {Drift.FRESH}
    assert srv.max_active == 8
    assert len(srv.requests) == 24


def test_non_http_urls_are_not_asked() -> None:
    assert check_url("ftp://example.com/x")[0] is Drift.UNKNOWN


# -- suggest -----------------------------------------------------------------------------------

def test_suggest_finds_a_file_and_a_symbol_named_in_prose(ws: Path) -> None:
    m = mem("The TokenIssuer in src/auth/provider.py signs every token; getUserById trusts it.")
    assert suggest_anchors(ws, m) == [
        "src/auth/provider.py",
        "src/auth/provider.py#TokenIssuer",
        "src/api/users.ts#getUserById",
    ]


def test_suggest_resolves_file_symbol_and_backticked_names(ws: Path) -> None:
    m = mem("Expiry is set in src/auth/provider.py#issue; see also `UserStore.save` and `DEFAULT_TTL`.")
    assert suggest_anchors(ws, m) == [
        "src/auth/provider.py#TokenIssuer.issue",
        "src/api/users.ts#UserStore.save",
        "src/auth/provider.py#DEFAULT_TTL",
    ]


def test_suggest_skips_what_does_not_resolve_or_is_ambiguous(ws: Path) -> None:
    m = mem(
        "shared_name() is defined twice; src/auth/tokens.py is gone; src/auth/provider.py#Nope too; "
        "docs/ is a folder; `NotHere` is nowhere; /etc/hosts is outside; https://example.com/x is a URL"
    )
    assert suggest_anchors(ws, m) == []


def test_suggest_bare_file_name_found_once(ws: Path) -> None:
    assert suggest_anchors(ws, mem("flags are in settings.toml")) == ["config/settings.toml"]


def test_suggest_skips_paths_on_other_machines(ws: Path) -> None:
    m = mem("ssh prod and read src/auth/provider.py; it calls `getUserById`")
    assert suggest_anchors(ws, m) == ["src/api/users.ts#getUserById"]


def test_suggest_leaves_out_existing_anchors_and_anchored_memories(ws: Path) -> None:
    anchored = mem("src/auth/provider.py and src/api/users.ts", id="a",
                   anchors=(AnchorRef(path="src/auth/provider.py"),))
    bare = mem("src/api/users.ts#getUserById matters", id="b")
    silent = mem("nothing to see", id="c")
    assert suggest_anchors(ws, anchored) == ["src/api/users.ts"]
    index = SymbolIndex(ws)
    assert suggest(ws, [anchored, bare, silent], index=index) == {"b": ["src/api/users.ts#getUserById"]}


def test_suggested_specs_can_be_taken_as_anchors(ws: Path) -> None:
    m = mem("The TokenIssuer in src/auth/provider.py uses settings.toml and `UserStore.save`")
    specs = suggest_anchors(ws, m)
    assert len(specs) == 4
    root_real = os.path.realpath(ws)
    for spec in specs:
        ref = take(root_real, parse_spec(spec))
        assert ref.sha256 and ref.spec == spec


# -- marks (issue 17): what `verify --mark` keeps on a memory ------------------------------------

def _result(mid: str, *claims: tuple[str, Drift, str]) -> MemoryVerdict:
    rows = tuple(ClaimResult(Claim("path", v), d, detail) for v, d, detail in claims)
    worst = Drift.STALE if any(r.verdict is Drift.STALE for r in rows) else Drift.FRESH
    return MemoryVerdict(mid, worst, rows)


def test_marked_claims_set_keep_and_clear() -> None:
    from datetime import datetime, timedelta, timezone

    from anchorfs.core.model import StaleClaim
    from anchorfs.verify.claims import mark_reason, marked_claims

    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    t1 = t0 + timedelta(days=1)
    m = Memory(id="m1", content="see a/x.py and a/y.py")
    gone = "a/x.py does not exist (its folder a/ does)"
    first = marked_claims(m, _result("m1", ("a/x.py", Drift.STALE, gone), ("a/y.py", Drift.FRESH, "file exists")), t0)
    assert first == (StaleClaim("path", "a/x.py", gone, t0),)
    m = m.replace(stale_claims=first)
    # found stale again with the same detail: the time it was first found is kept (no new write)
    assert marked_claims(m, _result("m1", ("a/x.py", Drift.STALE, gone)), t1) == first
    # a new detail is a new finding
    other = "a/x.py does not exist (the workspace root does)"
    assert marked_claims(m, _result("m1", ("a/x.py", Drift.STALE, other)), t1) == (StaleClaim("path", "a/x.py", other, t1),)
    # unknown now, or no longer a claim at all: no evidence either way, the mark stands
    assert marked_claims(m, _result("m1", ("a/x.py", Drift.UNKNOWN, "neither a/x.py nor its folder exists")), t1) == first
    assert marked_claims(m, _result("m1", ("a/y.py", Drift.FRESH, "file exists")), t1) == first
    # found holding again: cleared, and the reason says which
    cleared = marked_claims(m, _result("m1", ("a/x.py", Drift.FRESH, "file exists")), t1)
    assert cleared == ()
    assert mark_reason(_result("m1", ("a/x.py", Drift.FRESH, "file exists")), first, cleared) == \
        "verify: fresh (claims hold again: a/x.py)"
    assert mark_reason(_result("m1", ("a/x.py", Drift.STALE, gone)), (), first) == f"verify: stale (a/x.py: {gone})"


def test_stale_claims_round_trip_and_bad_ones_are_refused() -> None:
    from datetime import datetime, timezone

    from anchorfs.core.model import SnapshotError, StaleClaim, check_snapshot, validate_memory

    at = datetime(2026, 1, 1, 12, tzinfo=timezone.utc)
    m = Memory(id="m1", content="x", stale_claims=(StaleClaim("url", "https://example.com/x", "HTTP 404", at),))
    d = m.to_dict()
    assert d["stale_claims"] == [{"kind": "url", "value": "https://example.com/x", "detail": "HTTP 404",
                                  "found_at": "2026-01-01T12:00:00.000000Z"}]
    assert Memory.from_dict(d) == m and validate_memory(m) == m
    assert "stale_claims" not in m.replace(stale_claims=()).to_dict()  # other snapshots' lines unchanged
    claim: dict[str, object] = {"kind": "path", "value": "a", "detail": "b"}
    bads: list[object] = [{}, [1], [{**claim, "found_at": 7}], [{**claim, "found_at": "yesterday"}]]
    for bad in bads:
        with pytest.raises(SnapshotError, match="stale_claims"):
            check_snapshot({**d, "stale_claims": bad})
