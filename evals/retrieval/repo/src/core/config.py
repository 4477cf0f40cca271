"""Typed settings loaded from config/app.toml with environment overrides."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ENV_PREFIX = "QP_"
DEFAULT_PATH = Path(__file__).resolve().parents[2] / "config" / "app.toml"


@dataclass(frozen=True, slots=True)
class AuthSettings:
    issuer: str
    audience: str
    access_token_ttl_seconds: int = 900
    refresh_token_ttl_days: int = 14
    clock_leeway_seconds: int = 30
    signing_algorithm: str = "EdDSA"
    login_max_attempts: int = 5
    login_window_seconds: int = 900


@dataclass(frozen=True, slots=True)
class BillingSettings:
    default_currency: str = "EUR"
    supported_currencies: tuple[str, ...] = ("EUR", "USD", "GBP")
    gateway_api_version: str = "2023-10-16"
    gateway_timeout_seconds: int = 10
    invoice_due_days: int = 14
    pdf_link_ttl_seconds: int = 300


@dataclass(frozen=True, slots=True)
class Settings:
    database_url: str
    redis_url: str
    auth: AuthSettings
    billing: BillingSettings
    raw: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, data: dict[str, Any]) -> "Settings":
        billing = dict(data.get("billing", {}))
        if "supported_currencies" in billing:
            billing["supported_currencies"] = tuple(billing["supported_currencies"])
        return cls(
            database_url=data["database"]["url"],
            redis_url=data["redis"]["url"],
            auth=AuthSettings(**data["auth"]),
            billing=BillingSettings(**billing),
            raw=data,
        )


def _coerce(value: str, current: Any) -> Any:
    if isinstance(current, bool):
        return value.lower() in {"1", "true", "yes"}
    if isinstance(current, int):
        return int(value)
    if isinstance(current, list):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


def apply_env_overrides(data: dict[str, Any], environ: dict[str, str]) -> dict[str, Any]:
    """QP_SECTION__KEY=value overrides [section].key; unknown keys are an error."""
    for name, value in environ.items():
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        section, key = name[len(ENV_PREFIX):].lower().split("__", 1)
        if section not in data or key not in data[section]:
            raise KeyError(f"unknown setting {name}")
        data[section][key] = _coerce(value, data[section][key])
    return data


def load_settings(path: Path | None = None, environ: dict[str, str] | None = None) -> Settings:
    with open(path or DEFAULT_PATH, "rb") as fh:
        data = tomllib.load(fh)
    data = apply_env_overrides(data, dict(os.environ if environ is None else environ))
    return Settings.from_mapping(data)
