"""Configuration: defaults, then `.anchorfs.toml` at the workspace root, then `ANCHORFS_*`.

Every key lives in one table (`KEYS`); `.anchorfs.example.toml` documents each key.
"""

from __future__ import annotations

import math
import os

from .errors import ConfigError
from .model import KINDS, Value

from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from typing import Any

__all__ = ["Config", "KEYS", "load_config", "CONFIG_FILE"]

CONFIG_FILE = ".anchorfs.toml"

DEFAULT_EXPIRY_DAYS: dict[str, float] = {
    "decision": 365, "constraint": 180, "goal": 120, "preference": 90, "reference": 180, "summary": 60, "note": 30,
}

# dotted key -> (type, default). The env name is ANCHORFS_ + key upper-cased, dots to "_".
KEYS: dict[str, tuple[type, Any]] = {
    "embedder": (str, "hashing"),
    "author": (str, ""),
    "drift.stale_factor": (float, 0.7),
    "drift.expired_factor": (float, 0.77),
    "drift.cache_ttl": (float, 300.0),
    "drift.whitespace": (str, "tokens"),
    "search.k": (int, 10),
    "search.candidates": (int, 50),
    "search.rrf_k": (float, 60.0),
    "search.vector_weight": (float, 1.0),
    "search.text_weight": (float, 0.5),
    "search.relevance_floor": (float, 0.05),
    "store.compact_fragments": (int, 64),
    "store.index_rows": (int, 50_000),
    "history.envelope": (bool, True),
    "limits.content_chars": (int, 32768),
    "hook.digest_chars": (int, 2000),
    "hook.edit_chars": (int, 2000),
    "hook.file_chars": (int, 1500),
    "mcp.propose": (bool, False),
    "serve.auto": (bool, True),
    **{f"expiry.{kind}": (float, float(days)) for kind, days in DEFAULT_EXPIRY_DAYS.items()},
}


def env_name(key: str) -> str:
    return "ANCHORFS_" + key.upper().replace(".", "_")


class Config(Value):
    """The workspace's settings, every key of `KEYS` present."""

    __slots__ = ("values",)
    values: dict[str, Any]

    def __init__(self, values: dict[str, Any] | None = None) -> None:
        object.__setattr__(self, "values", {k: d for k, (_, d) in KEYS.items()} if values is None else values)

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    @property
    def embedder(self) -> str:
        return str(self.values["embedder"])

    def expiry_days(self, kind: str) -> float:
        return float(self.values.get(f"expiry.{kind}", self.values["expiry.note"]))


_BOOLS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}


def _coerce(key: str, typ: type, raw: Any, where: str) -> Any:
    try:
        if typ is bool:
            if isinstance(raw, bool):
                return raw
            if isinstance(raw, str) and raw.strip().lower() in _BOOLS:
                return _BOOLS[raw.strip().lower()]
            raise ValueError
        value: Any
        if typ is float:
            if isinstance(raw, bool):
                raise ValueError
            value = float(raw)
        elif typ is int:
            if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
                raise ValueError
            value = int(raw)
        else:
            if not isinstance(raw, str):
                raise ValueError
            value = raw
            choices = _CHOICES.get(key)
            if choices is not None and value not in choices:
                raise ConfigError(f"{where}: {key} must be one of {', '.join(choices)}, got {raw!r}")
    except (TypeError, ValueError, OverflowError):  # OverflowError: a 400-digit TOML int as a float
        raise ConfigError(f"{where}: {key} must be {typ.__name__}, got {raw!r}") from None
    if typ in (int, float):
        if (typ is float and not math.isfinite(value)) or value < 0:  # NaN and inf would turn every score into NaN
            raise ConfigError(f"{where}: {key} must be a finite number >= 0, got {raw!r}")
        low, high = _bounds(key)
        if not low <= value <= high:
            raise ConfigError(f"{where}: {key} must be between {low:g} and {high:g}, got {raw!r}")
    return value


_CHOICES: dict[str, tuple[str, ...]] = {"drift.whitespace": ("tokens", "strict")}
"""String keys that take one of a few words: anything else is a typo, refused in one line."""

_BOUNDS: dict[str, tuple[float, float]] = {
    "search.k": (1, 1000),
    "search.candidates": (1, 100_000),
    "search.rrf_k": (1, 1_000_000),
    "store.compact_fragments": (1, 1_000_000),
    "store.index_rows": (0, 1_000_000_000),
    "drift.cache_ttl": (0, 31 * 86_400),
    "hook.digest_chars": (100, 1_000_000),
    "hook.edit_chars": (500, 1_000_000),
    "hook.file_chars": (300, 1_000_000),
}
"""Ranges past which a value can only be a mistake; other keys take any finite value up to `_LARGEST`
(`_factor` and `_floor` keys: 0 to 1)."""

_LARGEST = 1e12


def _bounds(key: str) -> tuple[float, float]:
    if key in _BOUNDS:
        return _BOUNDS[key]
    if key.endswith("_factor") or key.endswith("_floor"):
        return (0.0, 1.0)
    return (0.0, _LARGEST)


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in data.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and prefix.count(".") < 8:  # deeper is an unknown key anyway: no RecursionError
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


_MAX_CONFIG_BYTES = 1 << 20  # a configuration file larger than this is a mistake, not a setting


def _parse(raw: bytes) -> dict[str, Any]:
    """`raw` (the config file's bytes) parsed as TOML, every time: the file is the only truth."""
    import tomllib  # lazily: most workspaces have no config file

    try:
        return tomllib.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # TOMLDecodeError, bad UTF-8, 4300+ digit ints, deep nesting
        raise ConfigError(f"{CONFIG_FILE}: not valid TOML: {exc}") from None


def load_config(root: str | os.PathLike[str] | None, environ: dict[str, str] | None = None) -> Config:
    """Defaults < `.anchorfs.toml` < environment. Unknown keys are errors, not silent typos."""
    values = {k: d for k, (_, d) in KEYS.items()}
    if root is not None:
        path = os.path.join(root, CONFIG_FILE)
        from .guard import GuardError, read_guarded

        try:  # guarded: a link inside the workspace is followed; one out, or a FIFO, is refused
            raw: bytes | None = read_guarded(os.path.realpath(path), root=os.path.realpath(root),
                                             max_bytes=_MAX_CONFIG_BYTES)
        except FileNotFoundError:
            raw = None
        except GuardError as exc:
            raise ConfigError(f"{CONFIG_FILE}: cannot read: {exc}") from None
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
        if raw is not None:
            data = _parse(raw)
            for key, value in _flatten(data).items():
                if key not in KEYS:
                    raise ConfigError(f"{CONFIG_FILE}: unknown key {key!r}")
                values[key] = _coerce(key, KEYS[key][0], value, CONFIG_FILE)
    env = os.environ if environ is None else environ
    for key, (typ, _) in KEYS.items():
        name = env_name(key)
        if name in env:
            values[key] = _coerce(key, typ, env[name], name)
    for kind in KINDS:
        values.setdefault(f"expiry.{kind}", DEFAULT_EXPIRY_DAYS[kind])
    return Config(values)
