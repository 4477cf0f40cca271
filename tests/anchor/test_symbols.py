"""Tests for anchorfs.anchor.symbols: qualified names, spans and errors across every grammar."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from anchorfs.anchor import symbols
from anchorfs.core.errors import AnchorError, SymbolNotFoundError
from anchorfs.anchor.symbols import MAX_PARSE_BYTES, Symbol, find_symbol, language_for, list_symbols

FIXTURES = Path(__file__).parents[1] / "fixtures" / "symbols"


def _read(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


# Every symbol of every fixture, in source order: (qualified name, kind).
EXPECTED: dict[str, list[tuple[str, str]]] = {
    "c_sample.c": [
        ("MAX_TOKEN", "macro"),
        ("token", "struct"),
        ("token_store", "struct"),
        ("algorithm", "enum"),
        ("value", "union"),
        ("token_expired", "function"),
        ("token_subject", "function"),
        ("main", "function"),
    ],
    "cpp_sample.cpp": [
        ("auth", "namespace"),
        ("auth.TokenIssuer", "class"),
        ("auth.TokenIssuer.TokenIssuer", "method"),
        ("auth.TokenIssuer.valid", "method"),
        ("auth.TokenIssuer.Options", "struct"),
        ("auth.detail", "namespace"),
        ("auth.detail.clamp", "function"),
        ("auth.TokenIssuer.issue", "method"),
        ("auth.Algorithm", "enum"),
        ("auth.render", "function"),
        ("main", "function"),
    ],
    "csharp_filescoped_sample.cs": [
        ("Example.Billing", "namespace"),
        ("Example.Billing.Invoice", "class"),
        ("Example.Billing.Invoice.Total", "method"),
    ],
    "csharp_sample.cs": [
        ("Example.Auth", "namespace"),
        ("Example.Auth.ITokenStore", "interface"),
        ("Example.Auth.ITokenStore.Load", "method"),
        ("Example.Auth.Algorithm", "enum"),
        ("Example.Auth.TokenIssuer", "class"),
        ("Example.Auth.TokenIssuer._secret", "field"),
        ("Example.Auth.TokenIssuer.TokenIssuer", "method"),
        ("Example.Auth.TokenIssuer.Issue", "method"),
        ("Example.Auth.TokenIssuer.Ttl", "property"),
        ("Example.Auth.TokenIssuer.Claims", "struct"),
        ("Example.Auth.TokenIssuer.Claims.Subject", "field"),
        ("Example.Auth.TokenIssuer.Claims.Expired", "method"),
        ("Example.Auth.Session", "record"),
        ("Example.Auth.Storage", "namespace"),
        ("Example.Auth.Storage.MemoryStore", "class"),
        ("Example.Auth.Storage.MemoryStore.Clear", "method"),
    ],
    "go_sample.go": [
        ("DefaultTTL", "constant"),
        ("ErrExpired", "variable"),
        ("Token", "struct"),
        ("Signer", "interface"),
        ("Signer.Sign", "method"),
        ("Service", "struct"),
        ("NewService", "function"),
        ("Service.Login", "method"),
        ("Token.Expired", "method"),
        ("Cache.Get", "method"),
        ("Cache", "struct"),
    ],
    "java_sample.java": [
        ("TokenIssuer", "class"),
        ("TokenIssuer.DEFAULT_TTL", "field"),
        ("TokenIssuer.secret", "field"),
        ("TokenIssuer.TokenIssuer", "method"),
        ("TokenIssuer.issue", "method"),
        ("TokenIssuer.issue", "method"),
        ("TokenIssuer.Builder", "class"),
        ("TokenIssuer.Builder.secret", "method"),
        ("TokenIssuer.Builder.build", "method"),
        ("TokenIssuer.Store", "interface"),
        ("TokenIssuer.Store.load", "method"),
        ("TokenIssuer.Algorithm", "enum"),
        ("TokenIssuer.Algorithm.isSymmetric", "method"),
        ("TokenIssuer.Claims", "record"),
        ("TokenIssuer.Claims.expired", "method"),
        ("Audited", "annotation"),
        ("Audited.value", "method"),
    ],
    "javascript_sample.js": [
        ("crypto", "constant"),
        ("hashToken", "function"),
        ("verify", "function"),
        ("normalize", "function"),
        ("stream", "function"),
        ("TokenIssuer", "class"),
        ("TokenIssuer.#secret", "field"),
        ("TokenIssuer.constructor", "method"),
        ("TokenIssuer.issue", "method"),
        ("TokenIssuer.fromEnv", "method"),
        ("TokenIssuer.handle", "method"),
        ("Store", "class"),
        ("Store.load", "method"),
    ],
    "kotlin_sample.kt": [
        ("DEFAULT_TTL", "property"),
        ("TokenStore", "interface"),
        ("TokenStore.load", "method"),
        ("Claims", "class"),
        ("Claims.expired", "method"),
        ("TokenIssuer", "class"),
        ("TokenIssuer.issue", "method"),
        ("TokenIssuer.Companion", "object"),
        ("TokenIssuer.fromEnv", "method"),
        ("TokenIssuer.Signer", "class"),
        ("TokenIssuer.Signer.sign", "method"),
        ("Registry", "object"),
        ("Registry.register", "method"),
        ("Algorithm", "enum"),
        ("Algorithm.symmetric", "method"),
        ("String.toClaims", "function"),
        ("main", "function"),
    ],
    "php_sample.php": [
        ("App.Auth", "namespace"),
        ("App.Auth.TokenStore", "interface"),
        ("App.Auth.TokenStore.load", "method"),
        ("App.Auth.Signs", "trait"),
        ("App.Auth.Signs.sign", "method"),
        ("App.Auth.TokenIssuer", "class"),
        ("App.Auth.TokenIssuer.__construct", "method"),
        ("App.Auth.TokenIssuer.issue", "method"),
        ("App.Auth.TokenIssuer.fromEnv", "method"),
        ("App.Auth.Algorithm", "enum"),
        ("App.Auth.Algorithm.label", "method"),
        ("App.Auth.issue_token", "function"),
    ],
    "python_sample.py": [
        ("DEFAULT_TTL", "variable"),
        ("load_key", "function"),
        ("Claims", "class"),
        ("Claims.subject", "variable"),
        ("Claims.expires_at", "variable"),
        ("Claims.is_expired", "method"),
        ("TokenIssuer", "class"),
        ("TokenIssuer.Config", "class"),
        ("TokenIssuer.Config.ttl", "variable"),
        ("TokenIssuer.Config.describe", "method"),
        ("TokenIssuer.__init__", "method"),
        ("TokenIssuer.issue", "method"),
        ("TokenIssuer.issue.sign", "function"),
        ("TokenIssuer.revoke", "method"),
        ("fallback", "function"),
    ],
    "ruby_sample.rb": [
        ("Auth", "module"),
        ("Auth.DEFAULT_TTL", "constant"),
        ("Auth.TokenIssuer", "class"),
        ("Auth.TokenIssuer.initialize", "method"),
        ("Auth.TokenIssuer.issue", "method"),
        ("Auth.TokenIssuer.from_env", "method"),
        ("Auth.TokenIssuer.sign", "method"),
        ("Auth.Helpers", "module"),
        ("Auth.Helpers.normalize", "method"),
        ("Auth.Session", "class"),
        ("Auth.Session.valid?", "method"),
        ("top_level_helper", "function"),
    ],
    "rust_sample.rs": [
        ("DEFAULT_TTL", "constant"),
        ("Token", "struct"),
        ("Algorithm", "enum"),
        ("Signer", "trait"),
        ("Signer.sign", "method"),
        ("Signer.name", "method"),
        ("Token", "impl"),
        ("Token.new", "method"),
        ("Token.is_expired", "method"),
        ("Token", "impl"),
        ("Token.fmt", "method"),
        ("Box", "impl"),
        ("Box.sign", "method"),
        ("store", "module"),
        ("store.MemoryStore", "struct"),
        ("store.MemoryStore", "impl"),
        ("store.MemoryStore.insert", "method"),
        ("bail", "macro"),
        ("Registry", "type"),
        ("issue", "function"),
    ],
    "scala_sample.scala": [
        ("TokenStore", "trait"),
        ("TokenStore.load", "method"),
        ("Claims", "class"),
        ("Claims.expired", "method"),
        ("TokenIssuer", "class"),
        ("TokenIssuer.issue", "method"),
        ("TokenIssuer.Signer", "class"),
        ("TokenIssuer.Signer.sign", "method"),
        ("TokenIssuer", "object"),
        ("TokenIssuer.DefaultTtl", "variable"),
        ("TokenIssuer.fromEnv", "method"),
        ("Algorithm", "trait"),
        ("Algorithm", "object"),
        ("Algorithm.HS256", "object"),
        ("topLevel", "function"),
    ],
    "sql_sample.sql": [
        ("auth.users", "table"),
        ("auth.users.id", "field"),
        ("auth.users.email", "field"),
        ("auth.users.Display", "field"),
        ("refresh_tokens", "table"),
        ("refresh_tokens.id", "field"),
        ("refresh_tokens.user_id", "field"),
        ("refresh_tokens.expires_at", "field"),
        ("refresh_tokens_user_idx", "index"),
        ("token_kind", "type"),
        ("token_serial", "sequence"),
        ("live_tokens", "view"),
        ("revoke_all", "function"),
        ("refresh_tokens.kind", "field"),  # added by ALTER TABLE: a column of the table it names
        ("sessions", "table"),  # only altered here: the ALTER stands for it
        ("sessions.revoked_at", "field"),
    ],
    "swift_sample.swift": [
        ("defaultTTL", "property"),
        ("TokenStore", "protocol"),
        ("TokenStore.load", "method"),
        ("Claims", "struct"),
        ("Claims.subject", "property"),
        ("Claims.expiresAt", "property"),
        ("Claims.expired", "method"),
        ("Algorithm", "enum"),
        ("Algorithm.label", "method"),
        ("TokenIssuer", "class"),
        ("TokenIssuer.secret", "property"),
        ("TokenIssuer.init", "method"),
        ("TokenIssuer.issue", "method"),
        ("TokenIssuer.Builder", "class"),
        ("TokenIssuer.Builder.build", "method"),
        ("TokenIssuer", "extension"),
        ("TokenIssuer.revoke", "method"),
        ("makeIssuer", "function"),
    ],
    "tsx_sample.tsx": [
        ("ButtonProps", "interface"),
        ("Button", "function"),
        ("Counter", "function"),
        ("Counter.increment", "function"),
        ("Panel", "class"),
        ("Panel.render", "method"),
    ],
    "typescript_sample.ts": [
        ("TokenOptions", "interface"),
        ("Algorithm", "enum"),
        ("Subject", "type"),
        ("hashToken", "function"),
        ("verify", "function"),
        ("normalize", "function"),
        ("TokenIssuer", "class"),
        ("TokenIssuer.options", "field"),
        ("TokenIssuer.constructor", "method"),
        ("TokenIssuer.issue", "method"),
        ("TokenIssuer.create", "method"),
        ("TokenIssuer.ttl", "method"),
        ("BaseStore", "class"),
        ("BaseStore.load", "method"),
        ("Auth", "namespace"),
        ("Auth.login", "function"),
        ("Auth.Session", "namespace"),
        ("Auth.Session.Manager", "class"),
        ("Auth.Session.Manager.open", "method"),
        ("legacy-auth", "module"),
        ("legacy-auth.legacyLogin", "function"),
    ],
}


@pytest.mark.parametrize("fixture", sorted(EXPECTED))
def test_list_symbols_gives_exact_qualified_names_in_source_order(fixture: str) -> None:
    found = [(s.name, s.kind) for s in list_symbols(fixture, _read(fixture))]
    assert found == EXPECTED[fixture]


def test_every_language_has_a_fixture() -> None:
    languages = {language_for(name) for name in EXPECTED}
    assert languages >= {
        "python", "typescript", "tsx", "javascript", "rust", "go", "java", "c", "cpp",
        "csharp", "ruby", "php", "kotlin", "swift", "scala", "sql",
    }  # fmt: skip
    assert sorted(p.name for p in FIXTURES.iterdir()) == sorted(EXPECTED)


@pytest.mark.parametrize("fixture", sorted(EXPECTED))
def test_spans_are_consistent_with_the_source(fixture: str) -> None:
    source = _read(fixture)
    for sym in list_symbols(fixture, source):
        assert 0 <= sym.start_byte < sym.end_byte <= len(source)
        assert 1 <= sym.start_line <= sym.end_line
        assert source[: sym.start_byte].count(b"\n") + 1 == sym.start_line
        assert source[: sym.end_byte].rstrip(b"\n").count(b"\n") + 1 == sym.end_line
        assert all(sym.name.split(".")), sym.name
        last = sym.name.rsplit(".", 1)[-1]
        assert last.lower().encode() in source[sym.start_byte : sym.end_byte].lower(), sym


# (fixture, qualified name, kind, start line, end line, how the span's text begins)
SPANS = [
    ("python_sample.py", "TokenIssuer.issue", "method", 37, 43, "@functools.lru_cache"),
    ("python_sample.py", "Claims", "class", 16, 22, "@dataclass(frozen=True)"),
    ("python_sample.py", "load_key", "function", 11, 13, "def load_key("),
    ("python_sample.py", "TokenIssuer.Config.ttl", "variable", 29, 29, "ttl = DEFAULT_TTL"),
    ("typescript_sample.ts", "verify", "function", 19, 21, "export const verify ="),
    ("typescript_sample.ts", "Auth.Session.Manager", "class", 57, 59, "export class Manager"),
    ("typescript_sample.ts", "TokenIssuer.issue", "method", 34, 36, "issue(subject"),
    ("tsx_sample.tsx", "Counter", "function", 12, 16, "export const Counter"),
    ("tsx_sample.tsx", "Panel.render", "method", 19, 21, "render()"),
    ("javascript_sample.js", "TokenIssuer.handle", "method", 36, 38, "handle = (event)"),
    ("javascript_sample.js", "verify", "function", 9, 9, "const verify ="),
    ("rust_sample.rs", "Token", "struct", 6, 10, "#[derive(Debug, Clone)]"),
    ("rust_sample.rs", "store.MemoryStore.insert", "method", 54, 56, "pub fn insert"),
    ("rust_sample.rs", "Token.fmt", "method", 35, 37, "fn fmt("),
    ("go_sample.go", "Service.Login", "method", 29, 34, "func (s *Service) Login"),
    ("go_sample.go", "Token", "struct", 12, 15, "type Token struct"),
    ("go_sample.go", "Cache.Get", "method", 40, 43, "func (c *Cache[K, V]) Get"),
    ("java_sample.java", "TokenIssuer.issue", "method", 15, 18, "@Deprecated"),
    ("java_sample.java", "TokenIssuer.Builder.build", "method", 32, 34, "public TokenIssuer build"),
    ("c_sample.c", "token_store", "struct", 11, 14, "typedef struct {"),
    ("c_sample.c", "token_expired", "function", 25, 28, "static int token_expired("),
    ("cpp_sample.cpp", "auth.TokenIssuer.issue", "method", 29, 31, "std::string TokenIssuer::"),
    ("cpp_sample.cpp", "auth.detail.clamp", "function", 22, 25, "template <typename T>"),
    ("cpp_sample.cpp", "auth.render", "function", 37, 39, "std::string auth::render"),
    ("csharp_sample.cs", "Example.Auth.TokenIssuer.Issue", "method", 26, 29, "public string Issue"),
    ("csharp_sample.cs", "Example.Auth.Storage.MemoryStore", "class", 45, 48, "internal static"),
    ("csharp_filescoped_sample.cs", "Example.Billing", "namespace", 1, 6, "namespace Example"),
    ("csharp_filescoped_sample.cs", "Example.Billing.Invoice.Total", "method", 5, 5, "public"),
    ("ruby_sample.rb", "Auth.TokenIssuer.from_env", "method", 17, 19, "def self.from_env"),
    ("ruby_sample.rb", "Auth.Session", "class", 35, 39, "class Auth::Session"),
    ("php_sample.php", "App.Auth.TokenIssuer.issue", "method", 28, 34, "public function issue"),
    ("php_sample.php", "App.Auth.issue_token", "function", 52, 55, "function issue_token"),
    ("kotlin_sample.kt", "TokenIssuer.fromEnv", "method", 21, 21, "fun fromEnv()"),
    ("kotlin_sample.kt", "String.toClaims", "function", 40, 40, "fun String.toClaims()"),
    ("swift_sample.swift", "TokenIssuer.revoke", "method", 49, 49, "func revoke("),
    ("swift_sample.swift", "TokenIssuer", "class", 30, 46, "class TokenIssuer {"),
    ("scala_sample.scala", "TokenIssuer", "class", 13, 19, "class TokenIssuer(secret"),
    ("sql_sample.sql", "refresh_tokens", "table", 10, 14, "CREATE TABLE refresh_tokens ("),
    ("sql_sample.sql", "refresh_tokens.user_id", "field", 12, 12, "user_id     BIGINT"),
    ("sql_sample.sql", "revoke_all", "function", 25, 29, "CREATE OR REPLACE FUNCTION revoke_all"),
    ("scala_sample.scala", "TokenIssuer.fromEnv", "method", 24, 24, "def fromEnv()"),
]


@pytest.mark.parametrize(("fixture", "name", "kind", "start", "end", "prefix"), SPANS)
def test_find_symbol_returns_the_whole_definition(
    fixture: str, name: str, kind: str, start: int, end: int, prefix: str
) -> None:
    source = _read(fixture)
    sym = find_symbol(fixture, source, name)
    assert (sym.name, sym.kind, sym.start_line, sym.end_line) == (name, kind, start, end)
    text = source[sym.start_byte : sym.end_byte].decode()
    assert text.startswith(prefix)
    assert text.splitlines()[-1].strip() in source.decode().splitlines()[end - 1]


def test_python_decorated_span_is_the_decorated_definition() -> None:
    source = _read("python_sample.py")
    sym = find_symbol("python_sample.py", source, "TokenIssuer.issue")
    text = source[sym.start_byte : sym.end_byte].decode()
    assert text.splitlines()[:3] == [
        "@functools.lru_cache(maxsize=32)",
        "    @staticmethod",
        "    def issue(subject: str) -> str:",
    ]
    assert text.endswith("return sign(subject)")


def test_duplicate_names_resolve_to_the_first_definition() -> None:
    java = _read("java_sample.java")
    issues = [s.start_line for s in list_symbols("A.java", java) if s.name == "TokenIssuer.issue"]
    assert issues == [15, 20]
    assert find_symbol("A.java", java, "TokenIssuer.issue").start_line == 15
    rust = _read("rust_sample.rs")
    assert find_symbol("a.rs", rust, "Token").kind == "struct"
    tokens = [s.kind for s in list_symbols("a.rs", rust) if s.name == "Token"]
    assert tokens == ["struct", "impl", "impl"]
    scala = _read("scala_sample.scala")
    assert find_symbol("a.scala", scala, "TokenIssuer").kind == "class"


def test_a_value_yields_its_name_to_a_definition() -> None:
    """Java builder: field `secret` and method `secret()` share a name; the method is the symbol."""
    syms = list_symbols("A.java", _read("java_sample.java"))
    syms = [s for s in syms if s.name.endswith(".secret")]
    assert [(s.name, s.kind) for s in syms] == [
        ("TokenIssuer.secret", "field"),
        ("TokenIssuer.Builder.secret", "method"),
    ]


def test_declarations_yield_to_definitions_but_stay_when_alone() -> None:
    c = _read("c_sample.c")
    assert [s.start_line for s in list_symbols("a.c", c) if s.name == "token_expired"] == [25]
    header = (
        b"#pragma once\nint add(int a, int b);\nstruct P { int x; };\n"
        b"class Q {\npublic:\n    void m();\n};\n"
    )
    assert [(s.name, s.kind, s.start_line) for s in list_symbols("include/a.h", header)] == [
        ("add", "function", 2),
        ("P", "struct", 3),
        ("Q", "class", 4),
        ("Q.m", "method", 6),
    ]
    ts = b"export function f(a: string): void;\nexport function f(a: any) {\n  return a;\n}\n"
    assert [(s.name, s.start_line, s.end_line) for s in list_symbols("a.ts", ts)] == [("f", 2, 4)]


def test_cpp_out_of_line_templates_and_anonymous_namespaces() -> None:
    source = (
        b"template<class T> struct X { template<class U> void h(); };\n"
        b"template<class T> template<class U> void X<T>::h() {}\n"
        b"namespace { int hidden() { return 1; } }\n"
        b"namespace a::b { void g() {} }\n"
    )
    found = [(s.name, s.kind, s.start_line) for s in list_symbols("x.cpp", source)]
    assert found == [
        ("X", "struct", 1),
        ("X.h", "method", 2),
        ("hidden", "function", 3),
        ("a.b", "namespace", 4),
        ("a.b.g", "function", 4),
    ]


def test_cpp_operators_and_specializations_keep_their_names() -> None:
    source = (
        b"namespace n {\n"
        b"struct V { bool operator<(const V&) const; int operator[](int) const; };\n"
        b"bool V::operator<(const V& o) const { return false; }\n"
        b"int V::operator[](int i) const { return i; }\n"
        b"template<> struct W<int> { void g() {} };\n"
        b"}\n"
        b"auto n::V::operator<=>(const V&) const = default;\n"
    )
    found = [(s.name, s.kind, s.start_line) for s in list_symbols("x.hpp", source)]
    assert found == [
        ("n", "namespace", 1),
        ("n.V", "struct", 2),
        ("n.V.operator<", "method", 3),
        ("n.V.operator[]", "method", 4),
        ("n.W", "struct", 5),
        ("n.W.g", "method", 5),
        ("n.V.operator<=>", "method", 7),
    ]


def test_php_statement_namespaces_name_what_follows_them() -> None:
    source = (
        b"<?php\nnamespace A;\nfunction f() {}\n"
        b"namespace B\\C;\nclass K {\n    function m() {}\n}\n"
    )
    found = [(s.name, s.kind, s.start_line, s.end_line) for s in list_symbols("x.php", source)]
    assert found == [
        ("A", "namespace", 2, 3),
        ("A.f", "function", 3, 3),
        ("B.C", "namespace", 4, 7),
        ("B.C.K", "class", 5, 7),
        ("B.C.K.m", "method", 6, 6),
    ]


def test_go_grouped_declarations() -> None:
    source = (
        b"package x\n\ntype (\n\tA struct{}\n\tB = A\n)\n\n"
        b"const (\n\tX = 1\n\tY, Z = 2, 3\n)\n"
    )
    found = [(s.name, s.kind, s.start_line) for s in list_symbols("x.go", source)]
    assert found == [
        ("A", "struct", 4),
        ("B", "type", 5),
        ("X", "constant", 9),
        ("Y", "constant", 10),
        ("Z", "constant", 10),
    ]


def test_rust_attributes_belong_to_their_item() -> None:
    source = b"impl Foo {\n    #[inline]\n    #[must_use]\n    fn f(&self) -> u8 { 1 }\n}\n"
    sym = find_symbol("x.rs", source, "Foo.f")
    assert (sym.start_line, sym.end_line) == (2, 4)
    assert source[sym.start_byte : sym.end_byte].startswith(b"#[inline]")


def test_function_locals_are_not_symbols_but_nested_definitions_are() -> None:
    source = b"def outer():\n    x = 1\n    def inner():\n        y = 2\n    return inner\n"
    assert [s.name for s in list_symbols("m.py", source)] == ["outer", "outer.inner"]


@pytest.mark.parametrize("ext", [".js", ".mjs", ".cjs", ".jsx"])
def test_javascript_extensions_parse_jsx(ext: str) -> None:
    source = (
        b"export function App() {\n"
        b'  return <div className="x">{items.map((i) => <Item key={i} />)}</div>;\n'
        b"}\n"
    )
    found = [(s.name, s.kind, s.end_line) for s in list_symbols("app" + ext, source)]
    assert found == [("App", "function", 3)]


def test_deep_nesting_needs_no_recursion() -> None:
    depth = 1500
    source = "".join(f"function f{i}() {{\n" for i in range(depth)) + "}\n" * depth
    syms = list_symbols("deep.js", source.encode())
    assert len(syms) == depth
    assert syms[-1].name == ".".join(f"f{i}" for i in range(depth))


def test_empty_file_has_no_symbols() -> None:
    assert list_symbols("empty.py", b"") == []
    with pytest.raises(SymbolNotFoundError) as err:
        find_symbol("empty.py", b"", "main")
    assert err.value.candidates == ()
    assert str(err.value) == "symbol 'main' not found in empty.py"


# --------------------------------------------------------------------------- not found


def test_not_found_suggests_the_closest_qualified_names() -> None:
    with pytest.raises(SymbolNotFoundError) as err:
        find_symbol("auth/token.py", _read("python_sample.py"), "TokenIssuer.isue")
    assert err.value.candidates == ("TokenIssuer.issue",)
    assert str(err.value) == (
        "symbol 'TokenIssuer.isue' not found in auth/token.py; did you mean: TokenIssuer.issue?"
    )
    assert isinstance(err.value, AnchorError)


@pytest.mark.parametrize(
    ("fixture", "wrong", "expected"),
    [
        ("python_sample.py", "issue", "TokenIssuer.issue"),
        ("go_sample.go", "Login", "Service.Login"),
        ("go_sample.go", "Servce.Login", "Service.Login"),
        ("cpp_sample.cpp", "TokenIssuer.issue", "auth.TokenIssuer.issue"),
        ("csharp_sample.cs", "TokenIssuer.Issue", "Example.Auth.TokenIssuer.Issue"),
        ("rust_sample.rs", "Token.is_expird", "Token.is_expired"),
        ("ruby_sample.rb", "Auth.TokenIssuer.fromenv", "Auth.TokenIssuer.from_env"),
    ],
)
def test_names_must_match_exactly_and_near_misses_are_candidates(
    fixture: str, wrong: str, expected: str
) -> None:
    with pytest.raises(SymbolNotFoundError) as err:
        find_symbol(fixture, _read(fixture), wrong)
    assert expected in err.value.candidates
    assert 1 <= len(err.value.candidates) <= 3
    assert f"did you mean: {', '.join(err.value.candidates)}?" in str(err.value)


def test_candidates_are_at_most_three_best_first() -> None:
    with pytest.raises(SymbolNotFoundError) as err:
        find_symbol("m.py", _read("python_sample.py"), "Claims.expired")
    assert err.value.candidates == ("Claims.is_expired", "Claims.expires_at")
    many = "".join(f"def handler_{i}():\n    pass\n" for i in range(10)).encode()
    with pytest.raises(SymbolNotFoundError) as err:
        find_symbol("m.py", many, "handler_")
    assert len(err.value.candidates) == 3
    assert str(err.value).endswith(f"did you mean: {', '.join(err.value.candidates)}?")


def test_not_found_without_anything_close_has_no_candidates() -> None:
    with pytest.raises(SymbolNotFoundError) as err:
        find_symbol("a.go", _read("go_sample.go"), "Zzzqqq")
    assert err.value.candidates == ()
    assert "did you mean" not in str(err.value)


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize("call", ["list", "find"])
def test_no_grammar_is_an_anchor_error(call: str) -> None:
    with pytest.raises(AnchorError) as err:
        if call == "list":
            list_symbols("notes/data.xyz", b"hello")
        else:
            find_symbol("notes/data.xyz", b"hello", "x")
    assert str(err.value) == "no grammar for '.xyz' files; anchor the whole file or lines instead"
    assert not isinstance(err.value, SymbolNotFoundError)


def test_no_grammar_names_an_extensionless_file() -> None:
    with pytest.raises(AnchorError, match="no grammar for 'Makefile' files"):
        list_symbols("build/Makefile", b"all:\n\techo hi\n")


@pytest.mark.parametrize(
    "source",
    [
        b"\x00\x01\x02def f(): pass\n",
        b"def f():\n    return 1\n" + b"\x00" * 4,
        b"def f():\n    return '\xff\xfe'\n",
    ],
)
def test_binary_files_are_refused(source: bytes) -> None:
    with pytest.raises(AnchorError) as err:
        list_symbols("blob.py", source)
    assert "blob.py" in str(err.value)
    assert "\n" not in str(err.value)


def test_too_large_files_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    assert MAX_PARSE_BYTES >= 1024 * 1024
    source = b"def f():\n    return 1\n"  # 22 bytes
    monkeypatch.setattr(symbols, "MAX_PARSE_BYTES", len(source))
    assert [s.name for s in list_symbols("ok.py", source)] == ["f"]
    bigger = source + b"#\n"
    with pytest.raises(AnchorError, match="too large to parse") as err:
        find_symbol("big.py", bigger, "f")
    assert "big.py" in str(err.value)


# --------------------------------------------------------------------------- API


@pytest.mark.parametrize(
    ("path", "lang"),
    [
        ("a/b.py", "python"),
        ("stubs/x.pyi", "python"),
        ("src/a.ts", "typescript"),
        ("src/a.tsx", "tsx"),
        ("src/a.js", "javascript"),
        ("src/a.mjs", "javascript"),
        ("src/a.cjs", "javascript"),
        ("src/a.jsx", "javascript"),
        ("src/lib.rs", "rust"),
        ("main.go", "go"),
        ("A.java", "java"),
        ("x.c", "c"),
        ("x.h", "cpp"),
        ("x.cpp", "cpp"),
        ("x.cc", "cpp"),
        ("x.hpp", "cpp"),
        ("X.cs", "csharp"),
        ("x.rb", "ruby"),
        ("x.php", "php"),
        ("X.kt", "kotlin"),
        ("build.gradle.kts", "kotlin"),
        ("X.swift", "swift"),
        ("X.scala", "scala"),
        ("migrations/0001_init.SQL", "sql"),
        ("UPPER.PY", "python"),
        ("notes.xyz", None),
        ("README.md", None),
        ("Makefile", None),
        ("dir.py/file", None),
    ],
)
def test_language_for(path: str, lang: str | None) -> None:
    assert language_for(path) == lang


def test_symbol_is_a_frozen_value() -> None:
    sym = Symbol("A.b", "method", 1, 2, 0, 10)
    with pytest.raises(AttributeError):
        sym.name = "other"  # type: ignore[misc]
    assert sym == Symbol("A.b", "method", 1, 2, 0, 10)
    assert not hasattr(sym, "__dict__")
    assert set(symbols.__all__) == {
        "Symbol", "language_for", "list_symbols", "find_symbol", "token_hash", "MAX_PARSE_BYTES",
    }  # fmt: skip


def test_parsing_from_several_threads_gives_the_same_answers() -> None:
    names = sorted(EXPECTED) * 3
    expected = {name: list_symbols(name, _read(name)) for name in EXPECTED}
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda n: (n, list_symbols(n, _read(n))), names))
    for name, syms in results:
        assert syms == expected[name]


def test_importing_the_module_does_not_load_tree_sitter() -> None:
    """`anchorfs drift` imports this module; tree-sitter must load only when a file is parsed."""
    code = (
        "import sys, anchorfs.anchor.symbols as s\n"
        "assert not [m for m in sys.modules if m.startswith('tree_sitter')], 'eager'\n"
        "s.list_symbols('a.py', b'def f(): pass\\n')\n"
        "assert 'tree_sitter' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)


def test_a_python_file_loads_only_pythons_handlers_and_no_difflib_until_a_name_is_missed() -> None:
    """A hook checking a Python file's symbols builds no other language's handlers (issue 20)."""
    code = (
        "import sys, anchorfs.anchor.symbols as s\n"
        "assert [x.name for x in s.list_symbols('a.py', b'class A:\\n    def f(self): pass\\n')] == ['A', 'A.f']\n"
        "mods = set(sys.modules)\n"
        "assert 'anchorfs.anchor.symbols_walk' in mods, mods\n"
        "assert not {'anchorfs.anchor.symbols_langs', 'anchorfs.anchor.symbols_cfamily', 'difflib'} & mods, mods\n"
        "try:\n    s.find_symbol('a.py', b'def issue(): pass\\n', 'isue')\nexcept Exception as e:\n"
        "    assert e.candidates == ('issue',), e\n"
        "assert 'difflib' in sys.modules\n"
        "s.list_symbols('a.rs', b'fn f() {}\\n')\n"
        "assert 'anchorfs.anchor.symbols_langs' in sys.modules and 'anchorfs.anchor.symbols_cfamily' not in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_every_language_has_its_handlers() -> None:
    for lang in sorted(set(symbols._EXTENSIONS.values())):
        assert symbols._spec(lang).handlers, lang


def test_one_parse_per_file_version(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many anchors into one file (recording, judging a changed file) parse it once."""
    import anchorfs.anchor.symbols as symbols_mod

    calls: list[str] = []
    real = symbols_mod._parse_symbols
    monkeypatch.setattr(symbols_mod, "_parse_symbols", lambda path, source: calls.append(path) or real(path, source))
    symbols_mod._cached_symbols.cache_clear()
    source = b"def one():\n    pass\n\ndef two():\n    pass\n"
    first = symbols_mod.list_symbols("m.py", source)
    first.clear()  # a caller's list is its own
    assert [s.name for s in symbols_mod.list_symbols("m.py", source)] == ["one", "two"]
    assert symbols_mod.find_symbol("m.py", source, "two").start_line == 4
    assert calls == ["m.py"]
    symbols_mod.list_symbols("m.py", source + b"\ndef three():\n    pass\n")  # a new version: parsed
    assert calls == ["m.py", "m.py"]
    symbols_mod._cached_symbols.cache_clear()


def test_a_symbol_spelled_in_another_unicode_form_is_the_same_name(tmp_path: Path) -> None:
    """Python compares identifiers as NFKC: `he\\u0301llo` (NFD) names `héllo` (issue 37, item 9)."""
    import anchorfs

    (tmp_path / "greet.py").write_text("def h\u00e9llo():\n    return 1\n", encoding="utf-8")
    anchorfs.init(tmp_path)
    with anchorfs.open(tmp_path) as ws:
        m = ws.record("greets", anchors=["greet.py#he\u0301llo"])
        assert ws.check(m).drift is anchorfs.Drift.FRESH
    found = find_symbol("greet.py", (tmp_path / "greet.py").read_bytes(), "he\u0301llo")
    assert (found.name, found.start_line) == ("h\u00e9llo", 1)


# -- token hashes: the walk starts at the node covering the span, same hash as from the root ------

def _root_walk_hash(path: str, source: bytes, start: int, end: int) -> str:
    """The token hash as first written: every node of the tree visited from the root."""
    import hashlib

    from anchorfs.anchor.symbols import _parser, language_for

    node_stack = [(_parser(language_for(path)).parse(source).root_node, False)]
    digest = hashlib.sha256()
    while node_stack:
        node, closing = node_stack.pop()
        if closing:
            digest.update(b")")
            continue
        a, b = node.start_byte, node.end_byte
        if b <= start or a >= end or a == b:
            continue
        if node.child_count == 0:
            text = source[max(a, start):min(b, end)]
            if node.type == "comment" or node.type.endswith("_comment"):
                text = text.rstrip()
            digest.update(node.type.encode() + b"\0" + text + b"\1")
            continue
        if start <= a and b <= end and node.is_named:
            digest.update(b"(" + node.type.encode())
            node_stack.append((node, True))
        node_stack.extend((child, False) for child in reversed(node.children))
    return digest.hexdigest()


@pytest.mark.parametrize("sample", ["python_sample.py", "typescript_sample.ts", "rust_sample.rs", "go_sample.go",
                                    "c_sample.c", "ruby_sample.rb"])
def test_token_hash_of_any_span_is_the_root_walks(sample: str) -> None:
    """Spans at line edges (as line anchors and the re-layout search ask), at node edges and at
    random bytes, token cut or not: the same hash as walking the whole tree."""
    import random

    from anchorfs.anchor.symbols import token_hash

    source = (FIXTURES / sample).read_bytes()
    starts = [0] + [i + 1 for i, c in enumerate(source) if c == 0x0A]
    rng = random.Random(sample)
    spans = [(starts[a], starts[b] - 1) for a, b in
             (sorted(rng.sample(range(len(starts)), 2)) for _ in range(150))]
    spans += [tuple(sorted(rng.sample(range(len(source) + 1), 2))) for _ in range(150)]
    spans += [(s.start_byte, s.end_byte) for s in list_symbols(sample, source)]
    for a, b in spans:
        assert token_hash(sample, source, a, b) == _root_walk_hash(sample, source, a, b), (a, b)
