"""Typed settings of the `interpreter` section, merged from their sources.

Sources, later ones win: built-in defaults < user file (~/.config/interpreter-lsp/config.toml) <
workspace file (.interpreter-lsp.toml) < initializationOptions.settings < workspace/configuration.
Invalid values are reported (never silently ignored) and the previous valid value is kept.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

WORKSPACE_FILE = ".interpreter-lsp.toml"
SECTION = "interpreter"


@dataclass(frozen=True)
class KernelSettings:
    python: str | None = None
    gateway_url: str | None = None
    gateway_token: str | None = None


@dataclass(frozen=True)
class Settings:
    model: str | None = None
    api_base: str | None = None
    api_key: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    context_window: int | None = None
    auto_run: bool = False
    auto_run_max_risk: str = "low"
    max_steps: int = 20
    max_output: int = 2800
    system_message: str | None = None
    custom_instructions: str = ""
    sandbox: str = "off"
    sandbox_network: bool = False
    allow_env: tuple[str, ...] = ()
    run_timeout: float = 0.0
    connect_timeout: float = 10.0
    first_token_timeout: float = 120.0
    stream_stall_timeout: float = 60.0
    max_retries: int = 3
    kernel: KernelSettings = field(default_factory=KernelSettings)


# Wire key (camelCase) -> (field name, validator). A validator returns the value or raises ValueError.
def _opt_str(v: Any) -> str | None:
    if v is None or v == "":
        return None
    if not isinstance(v, str):
        raise ValueError("expected a string")
    return v


def _str(v: Any) -> str:
    if not isinstance(v, str):
        raise ValueError("expected a string")
    return v


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise ValueError("expected true or false")
    return v


def _number(lo: float, hi: float | None = None, *, integer: bool = False, optional: bool = False):
    def check(v: Any) -> Any:
        if v is None and optional:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError("expected a number")
        if integer and not float(v).is_integer():
            raise ValueError("expected a whole number")
        if v < lo or (hi is not None and v > hi):
            raise ValueError(f"expected a number from {lo} to {hi}" if hi is not None else f"expected ≥ {lo}")
        return int(v) if integer else float(v)

    return check


def _choice(*options: str):
    def check(v: Any) -> str:
        if v not in options:
            raise ValueError("expected one of " + ", ".join(f'"{o}"' for o in options))
        return v

    return check


def _names(v: Any) -> tuple[str, ...]:
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise ValueError("expected a list of environment variable names")
    return tuple(v)


_TOP: dict[str, tuple[str, Any]] = {
    "model": ("model", _opt_str),
    "apiBase": ("api_base", _opt_str),
    "apiKey": ("api_key", _opt_str),
    "temperature": ("temperature", _number(0, 2, optional=True)),
    "maxTokens": ("max_tokens", _number(1, integer=True, optional=True)),
    "contextWindow": ("context_window", _number(256, integer=True, optional=True)),
    "autoRun": ("auto_run", _bool),
    "autoRunMaxRisk": ("auto_run_max_risk", _choice("low", "medium")),
    "maxSteps": ("max_steps", _number(1, 1000, integer=True)),
    "maxOutput": ("max_output", _number(200, 1_000_000, integer=True)),
    "systemMessage": ("system_message", _opt_str),
    "customInstructions": ("custom_instructions", lambda v: _opt_str(v) or ""),
    "sandbox": ("sandbox", _choice("off", "bubblewrap")),
    "sandboxNetwork": ("sandbox_network", _bool),
    "allowEnv": ("allow_env", _names),
    "runTimeout": ("run_timeout", _number(0)),
    "connectTimeout": ("connect_timeout", _number(0.1, 600)),
    "firstTokenTimeout": ("first_token_timeout", _number(1, 3600)),
    "streamStallTimeout": ("stream_stall_timeout", _number(1, 3600)),
    "maxRetries": ("max_retries", _number(0, 10, integer=True)),
}
_KERNEL: dict[str, tuple[str, Any]] = {
    "python": ("python", _opt_str),
    "gatewayUrl": ("gateway_url", _opt_str),
    "gatewayToken": ("gateway_token", _opt_str),
}
# Keys clients may send that belong to them, not to the server (VS Code's interpreter.server.command).
_CLIENT_ONLY = {"server", "trace"}

ALL_KEYS: tuple[str, ...] = (*_TOP, *(f"kernel.{k}" for k in _KERNEL))


@dataclass
class SettingsReport:
    settings: Settings
    errors: list[str] = field(default_factory=list)


def _snake_to_camel(data: Mapping[str, Any]) -> dict[str, Any]:
    """TOML files may use snake_case keys too (auto_run = true)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        head, *rest = key.split("_")
        out[head + "".join(p.title() for p in rest)] = value
    return out


def apply(base: Settings, layer: Mapping[str, Any], source: str) -> SettingsReport:
    """Apply one source's values on top of `base`. Unknown keys and bad values become errors."""
    errors: list[str] = []
    top: dict[str, Any] = {}
    kernel: dict[str, Any] = {}
    for key, value in _snake_to_camel(layer).items():
        if key in _CLIENT_ONLY:
            continue
        if key == "kernel":
            if not isinstance(value, Mapping):
                errors.append(f"{source}: interpreter.kernel must be an object")
                continue
            for sub, subvalue in _snake_to_camel(value).items():
                spec = _KERNEL.get(sub)
                if spec is None:
                    errors.append(f"{source}: unknown setting interpreter.kernel.{sub}")
                    continue
                try:
                    kernel[spec[0]] = spec[1](subvalue)
                except ValueError as exc:
                    errors.append(f"{source}: interpreter.kernel.{sub}: {exc}; got {subvalue!r}")
            continue
        spec = _TOP.get(key)
        if spec is None:
            errors.append(f"{source}: unknown setting interpreter.{key}")
            continue
        try:
            top[spec[0]] = spec[1](value)
        except ValueError as exc:
            shown = "***" if key == "apiKey" else repr(value)
            errors.append(f"{source}: interpreter.{key}: {exc}; got {shown}")
    result = replace(base, **top)
    if kernel:
        result = replace(result, kernel=replace(result.kernel, **kernel))
    return SettingsReport(result, errors)


def user_config_file() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "interpreter-lsp" / "config.toml"


def read_toml(path: Path) -> tuple[dict[str, Any], list[str]]:
    """A settings file's `interpreter` table (or its top level). Missing file: empty, no error."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}, []
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return {}, [f"{path}: cannot read settings ({exc}); fix the file or remove it"]
    section = data.get(SECTION, data)
    if not isinstance(section, dict):
        return {}, [f"{path}: [{SECTION}] must be a table"]
    return section, []


def resolve(
    workspace_root: Path | None,
    client_layers: Iterable[tuple[str, Mapping[str, Any] | None]] = (),
    *,
    user_file: Path | None = None,
) -> SettingsReport:
    """Merge every source into one Settings; all errors collected in order."""
    layers: list[tuple[str, Mapping[str, Any]]] = []
    errors: list[str] = []
    for path in (user_file or user_config_file(), workspace_root / WORKSPACE_FILE if workspace_root else None):
        if path is None:
            continue
        data, errs = read_toml(path)
        errors += errs
        layers.append((str(path), data))
    for name, data in client_layers:
        if data is None:
            continue
        if not isinstance(data, Mapping):
            errors.append(f"{name}: the interpreter settings must be an object")
            continue
        layers.append((name, data))
    settings = Settings()
    for name, data in layers:
        report = apply(settings, data, name)
        settings = report.settings
        errors += report.errors
    return SettingsReport(settings, errors)


def to_wire(settings: Settings) -> dict[str, Any]:
    """Settings as the camelCase object of docs/configuration.md (apiKey/gatewayToken masked)."""
    out: dict[str, Any] = {}
    for key, (name, _) in _TOP.items():
        out[key] = getattr(settings, name)
    out["allowEnv"] = list(settings.allow_env)
    out["kernel"] = {key: getattr(settings.kernel, name) for key, (name, _) in _KERNEL.items()}
    if out["apiKey"]:
        out["apiKey"] = "***"
    if out["kernel"]["gatewayToken"]:
        out["kernel"]["gatewayToken"] = "***"
    return out


def field_names() -> list[str]:
    return [f.name for f in fields(Settings)]
