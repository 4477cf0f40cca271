"""Configuration: defaults < `.anchorfs.toml` < `ANCHORFS_*`, strict keys and types, and the
example file documenting exactly the keys the code knows."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

import anchorfs
from anchorfs.core.config import CONFIG_FILE, KEYS, Config, env_name, load_config
from anchorfs.core.errors import ConfigError
from anchorfs.core.model import KINDS

EXAMPLE = Path(__file__).resolve().parents[2] / ".anchorfs.example.toml"


def _flat(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in data.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def write(root: Path, text: str) -> Path:
    (root / CONFIG_FILE).write_text(text)
    return root


def test_no_file_gives_the_defaults(tmp_path: Path) -> None:
    cfg = load_config(tmp_path, environ={})
    assert cfg.values == {k: default for k, (_, default) in KEYS.items()}
    assert cfg.values == Config().values
    assert cfg.embedder == "hashing"
    assert cfg["drift.stale_factor"] == 0.7
    assert cfg["drift.expired_factor"] == 0.77
    assert cfg["drift.cache_ttl"] == 300.0
    assert load_config(None, environ={}).values == cfg.values


def test_every_kind_has_an_expiry(tmp_path: Path) -> None:
    cfg = load_config(tmp_path, environ={})
    for kind in KINDS:
        assert cfg.expiry_days(kind) == KEYS[f"expiry.{kind}"][1] > 0
    assert cfg.expiry_days("not-a-kind") == cfg["expiry.note"]


def test_file_values_are_read_and_coerced(tmp_path: Path) -> None:
    write(tmp_path, """
embedder = "e5"
author = "ana"
[drift]
stale_factor = 0.25
cache_ttl = 10
[search]
k = 5
rrf_k = 30
[expiry]
note = 7
""")
    cfg = load_config(tmp_path, environ={})
    assert cfg.embedder == "e5"
    assert cfg["author"] == "ana"
    assert cfg["drift.stale_factor"] == 0.25
    assert cfg["drift.cache_ttl"] == 10.0 and isinstance(cfg["drift.cache_ttl"], float)
    assert cfg["search.k"] == 5 and isinstance(cfg["search.k"], int)
    assert cfg["search.rrf_k"] == 30.0
    assert cfg.expiry_days("note") == 7.0
    assert cfg["search.candidates"] == KEYS["search.candidates"][1]  # untouched keys keep defaults


def test_dotted_keys_work_as_well_as_tables(tmp_path: Path) -> None:
    write(tmp_path, 'search.k = 3\ndrift.stale_factor = 0.1\n')
    cfg = load_config(tmp_path, environ={})
    assert (cfg["search.k"], cfg["drift.stale_factor"]) == (3, 0.1)


def test_environment_overrides_the_file(tmp_path: Path) -> None:
    write(tmp_path, '[search]\nk = 5\ncandidates = 40\n[drift]\nstale_factor = 0.25\n')
    env = {"ANCHORFS_SEARCH_K": "12", "ANCHORFS_DRIFT_STALE_FACTOR": "0.75", "ANCHORFS_EXPIRY_DECISION": "1.5",
           "ANCHORFS_EMBEDDER": "minilm", "ANCHORFS_ROOT": "/elsewhere", "ANCHORFS_ACTOR": "bot"}
    cfg = load_config(tmp_path, environ=env)
    assert cfg["search.k"] == 12
    assert cfg["search.candidates"] == 40  # the file still counts where the env is silent
    assert cfg["drift.stale_factor"] == 0.75
    assert cfg.expiry_days("decision") == 1.5
    assert cfg.embedder == "minilm"


def test_process_environment_is_used_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "[search]\nk = 5\n")
    monkeypatch.setenv("ANCHORFS_SEARCH_K", "9")
    assert load_config(tmp_path)["search.k"] == 9


def test_env_names() -> None:
    assert env_name("search.k") == "ANCHORFS_SEARCH_K"
    assert env_name("drift.stale_factor") == "ANCHORFS_DRIFT_STALE_FACTOR"
    assert env_name("embedder") == "ANCHORFS_EMBEDDER"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("embeder = 'hashing'\n", "unknown key 'embeder'"),
        ("[search]\nkk = 3\n", "unknown key 'search.kk'"),
        ("[serch]\nk = 3\n", "unknown key 'serch.k'"),
        ("drift = 0.5\n", "unknown key 'drift'"),
        ("[embedder]\nname = 'e5'\n", "unknown key 'embedder.name'"),
    ],
)
def test_unknown_keys_are_errors(tmp_path: Path, text: str, fragment: str) -> None:
    write(tmp_path, text)
    with pytest.raises(ConfigError, match=fragment):
        load_config(tmp_path, environ={})


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("[search]\nk = 'ten'\n", "search.k must be int"),
        ("[search]\nk = 2.5\n", "search.k must be int"),
        ("[search]\nk = true\n", "search.k must be int"),
        ("[drift]\nstale_factor = 'half'\n", "drift.stale_factor must be float"),
        ("[drift]\nstale_factor = false\n", "drift.stale_factor must be float"),
        ("[drift]\nstale_factor = 1.5\n", "between 0 and 1"),
        ("[drift]\ncache_ttl = -1\n", "must be a finite number >= 0"),
        ("[drift]\ncache_ttl = nan\n", "must be a finite number >= 0"),
        ("[search]\nrrf_k = inf\n", "search.rrf_k must be a finite number"),
        ("[search]\nk = 1e18\n", "search.k must be between 1 and 1000"),
        ("[search]\nk = 0\n", "search.k must be between 1 and 1000"),
        ("[search]\ncandidates = 1e300\n", "search.candidates must be"),
        ("[expiry]\nnote = inf\n", "expiry.note must be a finite number"),
        ("embedder = 3\n", "embedder must be str"),
        ("author = ['a']\n", "author must be str"),
        ("[search]\nk = [1]\n", "search.k must be int"),
    ],
)
def test_wrong_types_are_errors(tmp_path: Path, text: str, fragment: str) -> None:
    write(tmp_path, text)
    with pytest.raises(ConfigError, match=fragment) as info:
        load_config(tmp_path, environ={})
    assert CONFIG_FILE in str(info.value)


@pytest.mark.parametrize(
    ("name", "value", "fragment"),
    [
        ("ANCHORFS_SEARCH_K", "ten", "ANCHORFS_SEARCH_K: search.k must be int"),
        ("ANCHORFS_DRIFT_STALE_FACTOR", "2", "between 0 and 1"),
        ("ANCHORFS_DRIFT_CACHE_TTL", "-5", ">= 0"),
        ("ANCHORFS_SEARCH_RRF_K", "inf", "finite"),
        ("ANCHORFS_SEARCH_K", "1000000000000000000", "between 1 and 1000"),
    ],
)
def test_bad_environment_values_are_errors(tmp_path: Path, name: str, value: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        load_config(tmp_path, environ={name: value})


def test_invalid_toml_is_an_error(tmp_path: Path) -> None:
    write(tmp_path, "[search\nk = 3\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(tmp_path, environ={})
    (tmp_path / CONFIG_FILE).write_bytes(b"author = '\xff\xfe'\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(tmp_path, environ={})


def test_an_unreadable_config_is_an_error(tmp_path: Path) -> None:
    (tmp_path / CONFIG_FILE).mkdir()
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path, environ={})


def test_workspace_uses_its_config_and_refuses_a_bad_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    anchorfs.init(tmp_path)
    write(tmp_path, "[search]\nk = 4\n")
    with anchorfs.open(tmp_path) as ws:
        assert ws.config["search.k"] == 4
    monkeypatch.setenv("ANCHORFS_SEARCH_K", "6")
    with anchorfs.open(tmp_path) as ws:
        assert ws.config["search.k"] == 6
    write(tmp_path, "[search]\nk = 'four'\n")
    with pytest.raises(ConfigError):
        anchorfs.open(tmp_path)


# --------------------------------------------------------------------------- the example file


def test_the_example_documents_exactly_every_key_with_its_default() -> None:
    data = tomllib.loads(EXAMPLE.read_text())
    documented = _flat(data)
    assert set(documented) == set(KEYS)
    for key, (typ, default) in KEYS.items():
        assert documented[key] == default, key
        assert isinstance(documented[key], (int, float) if typ is float else typ), key


def test_the_example_is_a_valid_config(tmp_path: Path) -> None:
    (tmp_path / CONFIG_FILE).write_text(EXAMPLE.read_text())
    assert load_config(tmp_path, environ={}).values == Config().values


def test_the_example_comments_every_key() -> None:
    """Each key line is preceded by a comment (or shares a commented block), and env names are explained."""
    text = EXAMPLE.read_text()
    assert "ANCHORFS_" in text
    lines = text.splitlines()
    section = ""
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("["):
            section = stripped.strip("[]") + "."
            continue
        if not stripped or stripped.startswith("#"):
            continue
        key = section + stripped.split("=", 1)[0].strip()
        assert key in KEYS
        j = i - 1
        while j >= 0 and lines[j].strip() and not lines[j].strip().startswith("#"):
            j -= 1  # a block of keys under one comment
        assert j >= 0 and lines[j].strip().startswith("#"), f"{key} has no comment"


def test_a_non_finite_or_huge_value_never_reaches_a_query(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`search.rrf_k = inf` made every score NaN and `search.k = 1e18` failed inside LanceDB
    with advice to reindex (issue 15, item 10): both are refused in one line at open."""
    anchorfs.init(tmp_path)
    for text in ("[search]\nrrf_k = inf\n", "[search]\nk = 1e18\n"):
        write(tmp_path, text)
        with pytest.raises(ConfigError) as info:
            anchorfs.open(tmp_path)
        assert "\n" not in str(info.value) and CONFIG_FILE in str(info.value)


def test_a_fifo_or_a_link_out_as_the_config_file_is_one_error_not_a_hang(tmp_path: Path) -> None:
    """A FIFO at `.anchorfs.toml` blocked every command for good; a link out was read."""
    import os

    root = tmp_path / "ws"
    root.mkdir()
    os.mkfifo(root / CONFIG_FILE)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(root, environ={})  # non-blocking open: returns at once
    (root / CONFIG_FILE).unlink()
    outside = tmp_path / "outside.toml"
    outside.write_text("embedder = 'e5'\n")
    (root / CONFIG_FILE).symlink_to(outside)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(root, environ={})
    (root / CONFIG_FILE).unlink()
    (root / "conf").mkdir()
    (root / "conf" / "shared.toml").write_text("embedder = 'e5'\n")
    (root / CONFIG_FILE).symlink_to(root / "conf" / "shared.toml")  # a link that stays inside is read
    assert load_config(root, environ={}).embedder == "e5"


def test_invalid_toml_is_an_error_with_a_kept_parse_of_other_bytes(tmp_path: Path) -> None:
    (tmp_path / ".anchorfs").mkdir()
    write(tmp_path, "[drift]\nstale_factor = 0.4\n")
    load_config(tmp_path, environ={})
    write(tmp_path, "[drift\nstale_factor = 0.4\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(tmp_path, environ={})


