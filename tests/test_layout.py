"""One module per concept: `anchorfs.drift` split along its concepts (the report values, the
freshness envelope, the batch pass's plan, the file probe, the moved-content search, the
checker), each under ~800 lines, and `anchorfs.drift` the face every name was imported from:
the same objects, loaded only when asked for (a hook that wants the envelope pays for it
alone). `anchorfs.mcp` likewise: the arguments' checks, the results, the hosts' config, and
the server that wires them, which re-exports their public names."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import anchorfs

PACKAGE = Path(anchorfs.__file__).parent
MAX_LINES = 800

# Every top-level name `anchorfs.drift` defined before the split, by the module it lives in now.
DRIFT_HOMES = {
    "drift_report": ["MemoryDrift", "DriftReport", "_Chained", "_new", "_all_fresh", "_ANCHORS", "_PATH"],
    "envelopes": ["age_days", "expired", "envelope", "WEAK_MARK", "weak_envelope", "_history_parts", "_envelope",
                  "_moved_words"],
    "drift_batch": ["_Plan", "_PLANS", "_plans_lock", "_plan_of", "plan_of_files", "_places", "_absent",
                    "_suspicious", "_SHA", "_HEAD"],
    "drift_probe": ["FileProbe", "_why", "_ERRNO_WORDS"],
    "drift_moves": ["MoveSearch", "_FOLLOWED", "_UNFOUND", "_followed_lock", "_GONE", "_TOPS", "_SKIP_DIRS",
                    "_move_key", "_utf8", "_closeness"],
    "drift_check": ["DriftChecker", "_THEN_TOKENS"],
}
# Read where they are used, so patched there: the face refuses them rather than hand out a copy
# whose patch would change nothing.
DRIFT_TUNABLES = {
    "drift_check": ["_CHUNK"],
    "drift_probe": ["_RECHECKS"],
    "drift_moves": ["_FOLLOW_BUDGET", "_WALK_FILES", "_FOLLOWED_KEPT"],
    "drift_batch": ["_PLANS_KEPT", "_PLAN_MIN"],
}


def _lines(module: str) -> int:
    return len((PACKAGE / f"{module}.py").read_text(encoding="utf-8").splitlines())


def _same_from(face: object, homes: dict[str, list[str]]) -> None:
    """Each name `face` gives is the very object of the module it lives in now."""
    for home, names in homes.items():
        mod = importlib.import_module(f"anchorfs.{home}")
        for name in names:
            assert getattr(face, name) is getattr(mod, name), (home, name)


def test_every_name_drift_defined_is_the_same_object_from_the_face() -> None:
    import anchorfs.drift as face

    _same_from(face, DRIFT_HOMES)
    assert face.__all__ == ["DriftChecker", "MemoryDrift", "DriftReport", "envelope", "weak_envelope", "WEAK_MARK"]
    assert set(face.__all__) <= set(dir(face))
    space: dict[str, object] = {}
    exec("from anchorfs.drift import *", space)  # noqa: S102 - the star import the face's __all__ serves
    assert sorted(k for k in space if k != "__builtins__") == sorted(face.__all__)
    from anchorfs.drift_check import DriftChecker

    assert [c.__name__ for c in DriftChecker.__mro__] == ["DriftChecker", "MoveSearch", "FileProbe", "object"]


def test_the_face_refuses_a_tunable_and_an_unknown_name() -> None:
    import anchorfs.drift as face

    for home, names in DRIFT_TUNABLES.items():
        mod = importlib.import_module(f"anchorfs.{home}")
        for name in names:
            assert isinstance(getattr(mod, name), int), (home, name)
            with pytest.raises(AttributeError, match=name):
                getattr(face, name)
    with pytest.raises(AttributeError, match="Nothing"):
        getattr(face, "Nothing")  # noqa: B009
    with pytest.raises(ImportError):
        from anchorfs.drift import Nothing  # type: ignore[attr-defined]  # noqa: F401


def _loaded(code: str) -> list[str]:
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted(m for m in sys.modules if m.startswith('anchorfs'))))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True,
                          cwd=PACKAGE.parent)
    mods = json.loads(proc.stdout)
    assert isinstance(mods, list)
    return mods


def test_the_face_loads_only_what_is_asked_for() -> None:
    assert _loaded("import anchorfs.drift") == ["anchorfs", "anchorfs.drift", "anchorfs.errors"]
    light = _loaded("from anchorfs.drift import envelope, expired, weak_envelope, WEAK_MARK")
    assert "anchorfs.envelopes" in light
    assert not {"anchorfs.anchors", "anchorfs.guard", "anchorfs.hashing", "anchorfs.drift_check",
                "anchorfs.drift_moves", "anchorfs.drift_probe", "anchorfs.drift_batch"} & set(light), light
    full = _loaded("from anchorfs.drift import DriftChecker")
    assert {"anchorfs.drift_check", "anchorfs.drift_moves", "anchorfs.drift_probe", "anchorfs.drift_batch",
            "anchorfs.drift_report"} <= set(full)
    assert "anchorfs.envelopes" not in full  # the checker never needs the envelope


# Every public name `anchorfs.mcp` defined before the split that lives in another module now.
MCP_HOMES = {
    "mcp_args": ["check_arguments"],
    "mcp_results": ["DATA_LABEL", "HIT_CHARS", "SHOW_CHARS", "WriteResult", "RecallResult", "ContextResult",
                    "DriftResult", "ShowResult", "HistoryResult", "BisectOutput"],
    "mcp_install": ["MCP_CONFIG_FILE", "mcp_config", "write_mcp_config"],
}


@pytest.mark.parametrize("module", ["drift", *DRIFT_HOMES, "mcp", *MCP_HOMES, "workspace", "revision", "digest",
                                    "foldsnap", "hashing", "filehash"])
def test_each_split_module_stays_under_the_size_of_one_concept(module: str) -> None:
    assert _lines(module) <= MAX_LINES, (module, _lines(module))


def test_every_public_name_mcp_defined_is_the_same_object_from_it() -> None:
    import anchorfs.mcp as mcp

    _same_from(mcp, MCP_HOMES)
    assert mcp.__all__ == [
        "build_server", "serve", "write_mcp_config", "mcp_config", "check_arguments",
        "SERVER_NAME", "WRITE_TOOLS", "TOOL_ORDER", "INSTRUCTIONS", "READ_ONLY_INSTRUCTIONS", "PROPOSE_INSTRUCTIONS",
        "DATA_LABEL", "STALE_URI", "MEMORY_URI", "REVERIFY_PROMPT", "HIT_CHARS", "SHOW_CHARS",
    ]
    assert all(hasattr(mcp, name) for name in mcp.__all__)
    # the output schemas keep their optional keys (read at run time: no postponed annotations there)
    assert mcp.DriftResult.__optional_keys__ == frozenset({"listed", "offset", "next_offset"})
    assert mcp.WriteResult.__optional_keys__ == frozenset({"duplicate", "note"})
    assert mcp.RecallResult.__required_keys__ == frozenset({"count", "hits"})


def test_the_hosts_config_needs_neither_the_server_nor_its_checks() -> None:
    mods = _loaded("from anchorfs.mcp_install import mcp_config, write_mcp_config")
    assert not {"anchorfs.mcp", "anchorfs.mcp_args", "anchorfs.mcp_results"} & set(mods), mods


def test_importing_the_checker_compiles_no_source() -> None:
    """Every hook that checks drift imports the checker: the result tuple's fields are annotated
    with the classes themselves, since `typing.NamedTuple` compiles a string annotation (three
    `compile` calls, about 0.1 M instructions in every such process)."""
    probe = ("import builtins, json\n"
             "import anchorfs.anchors, anchorfs.guard, anchorfs.hashing, anchorfs.locate, anchorfs.model\n"
             "calls = []\n"
             "real = builtins.compile\n"
             "def counting(source, *args, **kw):\n"
             "    if isinstance(source, str):  # not a module's own bytes, compiled where no .pyc is current\n"
             "        calls.append(source[:40])\n"
             "    return real(source, *args, **kw)\n"
             "builtins.compile = counting\n"
             "from anchorfs.drift import DriftChecker, DriftReport, MemoryDrift\n"
             "print(json.dumps(calls))\n")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True,
                          cwd=PACKAGE.parent)
    assert json.loads(proc.stdout) == []
    from anchorfs.drift import MemoryDrift
    from anchorfs.model import AnchorCheck, Drift, Memory

    assert MemoryDrift.__annotations__ == {"memory": Memory, "drift": Drift, "checks": tuple[AnchorCheck, ...]}
    assert MemoryDrift._fields == ("memory", "drift", "checks")
