"""Typed settings of the `interpreter` section: one schema, the sources they come from, and how far each
source is trusted.

`SCHEMA` is the one list of settings. docs/configuration.md's table, the VS Code client's
`contributes.configuration` and the Neovim client's `known_settings` are generated from it
(`python -m interpreter_lsp.settings --write`), and tests/test_mirrors.py fails when they drift.

Sources, later ones win: built-in defaults < user file (~/.config/interpreter-lsp/config.toml) <
workspace file (.interpreter-lsp.toml) < initializationOptions.settings < workspace/configuration.

Trust: a setting that chooses where data goes or what runs (`sensitive` below: the model and its endpoint,
the system message, the environment and sandbox of kernels, auto-run, kernel.*) is taken only from the
user's own sources: the user file and the client's user-level settings. The workspace file (a cloned
repository can hold one) gives them only after the user allowed its current content once (a hash
remembered per workspace); until then they are ignored and the user is asked. Client values the user set
at workspace level (sent under "$workspace") never give them. An untrusted workspace's file is not read.
Invalid values are reported (never silently ignored) and the previous valid value is kept.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from . import userdirs

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

log = logging.getLogger(__name__)

WORKSPACE_FILE = ".interpreter-lsp.toml"
SECTION = "interpreter"
WORKSPACE_LEVEL = "$workspace"  # client settings the user set for this workspace, not for themselves

# Source names, as status reports them.
DEFAULT = "default"
USER_FILE = "user file"
WORKSPACE_FILE_SOURCE = "workspace file"


@dataclass(frozen=True)
class KernelSettings:
    python: str | None = None
    gateway_url: str | None = None
    gateway_token: str | None = None
    gateway_ca_bundle: str | None = None
    gateway_validate_cert: bool = True
    gateway_connect_timeout: float = 10.0
    gateway_request_timeout: float = 60.0
    gateway_kernels: Mapping[str, str] = field(default_factory=dict)  # language -> kernelspec on the gateway
    gateway_username: str | None = None  # KERNEL_USERNAME
    gateway_working_dir: str | None = None  # KERNEL_WORKING_DIR
    memory_limit: int | None = None  # MiB; None: half the machine's memory; 0: none
    cpu_time_limit: int = 0  # CPU seconds per process; 0: none
    process_limit: int = 512  # processes and threads a kernel may add; 0: none


@dataclass(frozen=True)
class Settings:
    model: str | None = None
    api_base: str | None = None
    api_key: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    context_window: int | None = None
    compact_at: float = 0.8
    max_cost: float | None = None
    max_tokens_per_turn: int | None = None
    code_format: str = "auto"
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
    undo_variables: bool = True
    connect_timeout: float = 10.0
    first_token_timeout: float = 120.0
    stream_stall_timeout: float = 60.0
    max_retries: int = 3
    review_model: str | None = None
    kernel: KernelSettings = field(default_factory=KernelSettings)


@dataclass(frozen=True)
class Spec:
    """One setting: its wire key, JSON type, default, allowed values, and who may set it."""

    key: str  # camelCase; "kernel.python" for nested ones
    type: str  # "string" | "integer" | "number" | "boolean" | "array" | "object" (of strings)
    default: Any
    description: str
    minimum: float | None = None
    maximum: float | None = None
    enum: tuple[str, ...] | None = None
    nullable: bool = False  # "no value" is allowed (the provider's or model's own default)
    sensitive: bool = False  # chooses where data goes or what runs: the user's own sources only
    secret: bool = False  # never shown (errors, status, logs)
    client: bool = False  # read by the clients; the server ignores it
    multiline: bool = False
    built: bool = True  # False: reserved, does nothing yet (its description says so)

    @property
    def attr(self) -> str:
        name = self.key.rsplit(".", 1)[-1]
        return "".join("_" + c.lower() if c.isupper() else c for c in name)


def _s(key: str, type_: str, default: Any, description: str, **kw: Any) -> Spec:
    return Spec(key, type_, default, description, **kw)


SCHEMA: tuple[Spec, ...] = (
    _s("model", "string", None,
       "A litellm model name: `gpt-4o-mini`, `anthropic/claude-sonnet-4-5`, `ollama_chat/qwen2.5-coder`, "
       "`openai/<name>` with `apiBase`. Empty: a local Ollama (127.0.0.1:11434) or LM Studio (127.0.0.1:1234) "
       "is looked for and its first chat model used.", nullable=True, sensitive=True),
    _s("apiBase", "string", None,
       "The model's endpoint for OpenAI-compatible servers, e.g. `http://127.0.0.1:1234/v1`. Empty: the "
       "provider's default.", nullable=True, sensitive=True),
    _s("apiKey", "string", None,
       "API key for the model. Prefer the provider's environment variable (`OPENAI_API_KEY`, ...): settings "
       "files are plain text. Never shown, logged or given to kernels.", nullable=True, sensitive=True, secret=True),
    _s("temperature", "number", None, "Sampling temperature. Empty: the model's default.",
       minimum=0, maximum=2, nullable=True),
    _s("maxTokens", "integer", None, "Most tokens the model may write in one reply. Empty: the model's default.",
       minimum=1, nullable=True),
    _s("contextWindow", "integer", None,
       "The model's context window in tokens. Every request is kept within it, minus the reply's room "
       "(`maxTokens`, else an eighth of the window). Empty: what litellm knows of the model, else 8192 "
       "(a guess, which status says).", minimum=256, nullable=True),
    _s("compactAt", "number", 0.8,
       "When the model's view of the conversation passes this share of the window, the turns that ended are "
       "condensed into a summary the model writes (the full history stays).", minimum=0.5, maximum=0.95),
    _s("maxCost", "number", None,
       "Most USD one conversation may cost (litellm's prices): a turn stops before a request that would pass "
       "it. Local and unpriced models cost 0. Empty: no cap.", minimum=0, nullable=True, sensitive=True),
    _s("maxTokensPerTurn", "integer", None,
       "Most tokens (prompt and reply, summed over its requests) one turn may use: it stops before a request "
       "that would pass it. Empty: no cap.", minimum=1, nullable=True, sensitive=True),
    _s("codeFormat", "string", "auto",
       "How the model proposes code: `tools`: a native `run_code` tool call (litellm's `tools=`), its result "
       "sent back as the tool's answer; `fences`: fenced blocks; `auto`: tool calls where litellm says the "
       "model supports function calling, else fences. Fenced blocks are proposals in every mode.",
       enum=("auto", "tools", "fences")),
    _s("autoRun", "boolean", False,
       "Run the model's code without asking, up to `autoRunMaxRisk`. High-risk code always waits for approval.",
       sensitive=True),
    _s("autoRunMaxRisk", "string", "low", "With `autoRun`: the highest risk level that runs without approval.",
       enum=("low", "medium"), sensitive=True),
    _s("maxSteps", "integer", 20,
       "Most model replies with code in one turn before the loop stops and asks you.", minimum=1, maximum=1000),
    _s("maxOutput", "integer", 2800,
       "Characters of a run's output the model sees (head and tail, with a note of what was cut). The editor "
       "always gets all of it.", minimum=200, maximum=1_000_000),
    _s("systemMessage", "string", None,
       "Replaces the built-in system message (`{workspace}`, `{os}`, `{languages}` are filled in). Empty: the "
       "built-in one.", nullable=True, sensitive=True, multiline=True),
    _s("customInstructions", "string", "", "Added to the system message (e.g. house rules for code).",
       sensitive=True, multiline=True),
    _s("sandbox", "string", "off",
       "Run kernels inside a bubblewrap sandbox: the workspace writable, the rest of the file system read-only, "
       "no network. If bwrap is missing, runs fail and say so: never silently unsandboxed.",
       enum=("off", "bubblewrap"), sensitive=True),
    _s("sandboxNetwork", "boolean", False, "With the sandbox on: let code reach the network.", sensitive=True),
    _s("allowEnv", "array", (),
       "Environment variables that look like secrets (`*_API_KEY`, `*_TOKEN`, ...) which kernels may "
       "nevertheless see.", sensitive=True),
    _s("runTimeout", "number", 0.0,
       "Seconds after which a run is interrupted (the kernel restarts if it ignores the interrupt). 0: none.",
       minimum=0),
    _s("undoVariables", "boolean", True,
       "Undo brings back the python kernel's variables: the kernel keeps a snapshot of itself as each run "
       "finds it, a pickle of its variables when they are a few small plain values (no cost measurable against "
       "off), else a copy-on-write fork (a trivial run takes ~0.5 ms longer when runs come at a person's or a "
       "model's pace, ~14 ms longer when each is sent the instant the one before ended: the fork is then on the "
       "next run's path). Off: undo names the variables as not restored."),
    _s("connectTimeout", "number", 10.0, "Seconds to connect to the model's endpoint.", minimum=0.1, maximum=600),
    _s("firstTokenTimeout", "number", 120.0,
       "Seconds from a request to the first streamed token (local models load slowly).", minimum=1, maximum=3600),
    _s("streamStallTimeout", "number", 60.0, "Seconds of silence in the middle of a reply before it is abandoned.",
       minimum=1, maximum=3600),
    _s("maxRetries", "integer", 3,
       "Retries on rate limits (honouring Retry-After), server errors and connection errors, only before any "
       "text was shown.", minimum=0, maximum=10),
    _s("kernel.python", "string", None,
       "A kernelspec name (`python3`) or an interpreter path (`.venv/bin/python`, `~` expanded). Empty: the "
       "workspace's `.venv`/`venv` when it has ipykernel, else the server's interpreter.",
       nullable=True, sensitive=True),
    # Limits protect the machine from the code that runs: only the user may loosen them (sensitive).
    _s("kernel.memoryLimit", "integer", None,
       "MiB of memory each kernel process may allocate (RLIMIT_DATA); beyond it allocations fail (Python: "
       "MemoryError, said as out of memory with this limit). In a delegated cgroup v2 also the whole kernel's "
       "(memory.max). Empty: half of this machine's memory. 0: no limit.",
       nullable=True, minimum=0, sensitive=True),
    _s("kernel.cpuTimeLimit", "integer", 0,
       "CPU seconds each kernel process may use over its life (RLIMIT_CPU); the kernel is then ended and "
       "restarted. 0: no limit.", minimum=0, sensitive=True),
    _s("kernel.processLimit", "integer", 512,
       "Processes and threads a kernel may add to those you already run (RLIMIT_NPROC, counted per user; in "
       "the sandbox: those of the sandbox; Linux ignores it for root, and `interpreter.status` says so); in a "
       "delegated cgroup v2 also those of the kernel's tree (pids.max, root too). Stops fork bombs. 0: no limit.",
       minimum=0, sensitive=True),
    _s("kernel.gatewayUrl", "string", None,
       "A Jupyter Kernel Gateway or Enterprise Gateway (`http://` or `https://`): every kernel of the workspace "
       "runs there (docs/remote-kernels.md).", nullable=True, sensitive=True),
    _s("kernel.gatewayToken", "string", None,
       "The gateway's token, sent as `Authorization: token ...`. Never shown, logged or given to kernels.",
       nullable=True, sensitive=True, secret=True),
    _s("kernel.gatewayCaBundle", "string", None,
       "A PEM file of the CA that signed the gateway's certificate. Empty: the system's CAs.",
       nullable=True, sensitive=True),
    _s("kernel.gatewayValidateCert", "boolean", True,
       "Verify the gateway's TLS certificate. Off only for a test gateway.", sensitive=True),
    _s("kernel.gatewayConnectTimeout", "number", 10.0,
       "Seconds to connect to the gateway; also how long a lost connection is retried before the kernel is "
       "given up (its state lost).", minimum=0.1, maximum=600),
    _s("kernel.gatewayRequestTimeout", "number", 60.0,
       "Seconds for one gateway request, a kernel start included (raise it where kernels start in pods).",
       minimum=1, maximum=3600),
    _s("kernel.gatewayKernels", "object", {},
       "The gateway's kernelspec per language, e.g. `{\"python\": \"python_tf_gpu_kubernetes\"}`. Default: the "
       "gateway's default kernelspec when it is of the language, else the first whose language matches.",
       sensitive=True),
    _s("kernel.gatewayUsername", "string", None,
       "Sent as `KERNEL_USERNAME`: the user Enterprise Gateway starts the kernel for.", nullable=True, sensitive=True),
    _s("kernel.gatewayWorkingDir", "string", None,
       "Sent as `KERNEL_WORKING_DIR`: where the remote side has the workspace.", nullable=True, sensitive=True),
    _s("reviewModel", "string", None,
       "A second model (a litellm name, reached with the same `apiBase` and `apiKey`) that reviews each "
       "medium-risk proposal before it is shown: it answers with a rating and a one-line reason, shown on the "
       "proposal. It can raise a rating, never lower one. Empty: off.", nullable=True, sensitive=True),
    # Client-side settings: the clients read them; the server accepts and ignores them.
    _s("confirmDestructive", "boolean", True,
       "Ask before resetting the conversation and before restarting a kernel (which loses its variables).",
       client=True),
)
BY_KEY: dict[str, Spec] = {spec.key: spec for spec in SCHEMA}
SENSITIVE: frozenset[str] = frozenset(spec.key for spec in SCHEMA if spec.sensitive)
# Keys a client may send that belong to it alone (VS Code's interpreter.server.command, trace.server).
_CLIENT_ONLY_PREFIXES = ("server", "trace")

ALL_KEYS: tuple[str, ...] = tuple(spec.key for spec in SCHEMA if not spec.client)


def secret_settings(settings: Settings) -> list[tuple[str, str | None]]:
    """(interpreter.KEY, value) of every `secret` setting (apiKey, kernel.gatewayToken, any added later):
    the server masks these values everywhere and never shows or logs them."""
    out: list[tuple[str, str | None]] = []
    for spec in SCHEMA:
        if spec.secret:
            holder = settings.kernel if spec.key.startswith("kernel.") else settings
            out.append((f"{SECTION}.{spec.key}", getattr(holder, spec.attr)))
    return out


# ---- validation --------------------------------------------------------------------------------------


def _check(spec: Spec, value: Any) -> Any:
    """The value to store, or ValueError with what was expected."""
    if value is None or (spec.type == "string" and value == "" and spec.nullable):
        if spec.nullable:
            return None
        if spec.type == "string":
            return ""
        raise ValueError(f"expected {_expected(spec)}")
    if spec.type == "string":
        if not isinstance(value, str):
            raise ValueError("expected a string")
        if spec.enum is not None and value not in spec.enum:
            raise ValueError("expected one of " + ", ".join(f'"{o}"' for o in spec.enum))
        return value
    if spec.type == "boolean":
        if not isinstance(value, bool):
            raise ValueError("expected true or false")
        return value
    if spec.type == "array":
        if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
            raise ValueError("expected a list of environment variable names")
        return tuple(value)
    if spec.type == "object":
        if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) and v
                                                       for k, v in value.items()):
            raise ValueError("expected an object of language names to kernelspec names")
        return dict(value)
    # NaN passes every bound check below (JSON and TOML parsers accept nan, inf): finite, or refused.
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError("expected a number")
    if spec.type == "integer" and not float(value).is_integer():
        raise ValueError("expected a whole number")
    if (spec.minimum is not None and value < spec.minimum) or (spec.maximum is not None and value > spec.maximum):
        raise ValueError(f"expected {_expected(spec)}")
    return int(value) if spec.type == "integer" else float(value)


def _expected(spec: Spec) -> str:
    lo, hi = spec.minimum, spec.maximum
    if lo is not None and hi is not None:
        return f"a number from {lo:g} to {hi:g}"
    if lo is not None:
        return f"a number ≥ {lo:g}"
    return f"a {spec.type}"


# ---- sources -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layer:
    """One source's values (camelCase keys, `kernel` nested) and whether it may set sensitive keys."""

    name: str
    values: Mapping[str, Any]
    trusted: bool
    # Said when a sensitive key of this source is ignored: where the user can set it instead.
    refusal: str = ""


@dataclass(frozen=True)
class WorkspaceFileRequest:
    """The workspace file sets sensitive keys the user has not allowed yet: ask them."""

    path: Path
    digest: str
    keys: tuple[str, ...]


@dataclass
class SettingsReport:
    settings: Settings
    errors: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  # sensitive keys refused, each with where to set it
    sources: dict[str, str] = field(default_factory=dict)  # sensitive key -> the source its value came from
    confirm: WorkspaceFileRequest | None = None


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part.title() for part in rest)


def _flatten(data: Mapping[str, Any], source: str, errors: list[str]) -> dict[str, Any]:
    """{"kernel": {"python": x}} -> {"kernel.python": x}; snake_case accepted (TOML files)."""
    out: dict[str, Any] = {}
    for raw_key, value in data.items():
        key = _camel(str(raw_key))
        if key == "kernel":
            if not isinstance(value, Mapping):
                errors.append(f"{source}: interpreter.kernel must be an object")
                continue
            for sub, subvalue in value.items():
                out[f"kernel.{_camel(str(sub))}"] = subvalue
        elif key != WORKSPACE_LEVEL:
            out[key] = value
    return out


def apply(base: Settings, layer: Mapping[str, Any] | Layer, source: str = "") -> SettingsReport:
    """Apply one source's values on top of `base`. Unknown keys and bad values become errors; sensitive
    keys from a source that may not set them are ignored and listed."""
    if not isinstance(layer, Layer):
        layer = Layer(source, layer, trusted=True)
    report = SettingsReport(base)
    top: dict[str, Any] = {}
    kernel: dict[str, Any] = {}
    for key, value in _flatten(layer.values, layer.name, report.errors).items():
        spec = BY_KEY.get(key)
        if spec is None:
            if key.split(".", 1)[0] not in _CLIENT_ONLY_PREFIXES:
                report.errors.append(f"{layer.name}: unknown setting interpreter.{key}")
            continue
        if spec.client:
            continue
        if spec.sensitive and not layer.trusted:
            report.ignored.append(f"{layer.name}: interpreter.{key} is ignored here{layer.refusal}")
            continue
        try:
            checked = _check(spec, value)
        except ValueError as exc:
            shown = "***" if spec.secret else repr(value)
            report.errors.append(f"{layer.name}: interpreter.{key}: {exc}; got {shown}")
            continue
        (kernel if key.startswith("kernel.") else top)[spec.attr] = checked
        if spec.sensitive:
            report.sources[key] = layer.name
    settings = replace(base, **top)
    if kernel:
        settings = replace(settings, kernel=replace(settings.kernel, **kernel))
    report.settings = settings
    return report


def user_config_file() -> Path:
    return userdirs.required("XDG_CONFIG_HOME", ".config") / "interpreter-lsp" / "config.toml"


def read_toml(path: Path) -> tuple[dict[str, Any], list[str], str]:
    """A settings file's `interpreter` table (or its top level), errors, and the digest of its bytes.
    Missing file: empty, no error."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}, [], ""
    except OSError as exc:
        return {}, [f"{path}: cannot read settings ({exc}); fix the file or remove it"], ""
    digest = hashlib.sha256(raw).hexdigest()
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return {}, [f"{path}: cannot read settings ({exc}); fix the file or remove it"], digest
    section = data.get(SECTION, data)
    if not isinstance(section, dict):
        return {}, [f"{path}: [{SECTION}] must be a table"], digest
    return section, [], digest


def client_layers(name: str, data: Mapping[str, Any] | None, errors: list[str]) -> list[Layer]:
    """A client's settings object: its top level is the user's own; "$workspace" what they set for this
    workspace (VS Code's workspace and folder settings, which a repository's .vscode/settings.json fills)."""
    if data is None:
        return []
    if not isinstance(data, Mapping):
        errors.append(f"{name}: the interpreter settings must be an object")
        return []
    layers = [Layer(name, data, trusted=True)]
    workspace = data.get(WORKSPACE_LEVEL)
    if isinstance(workspace, Mapping):
        layers.append(
            Layer(
                f"{name} (workspace settings)",
                workspace,
                trusted=False,
                refusal=": a setting that chooses where data goes or what runs is taken only from your user "
                "settings, or from .interpreter-lsp.toml once you allow it",
            )
        )
    elif workspace is not None:
        errors.append(f"{name}: {WORKSPACE_LEVEL} must be an object")
    return layers


def resolve(
    workspace_root: Path | None,
    client_settings: Iterable[tuple[str, Mapping[str, Any] | None]] = (),
    *,
    user_file: Path | None = None,
    workspace_trusted: bool = True,
    allowed_digest: str | None = None,
) -> SettingsReport:
    """Merge every source into one Settings; errors, ignored keys and sources collected in order.

    `allowed_digest`: the digest of the workspace file's content the user allowed (None: never asked)."""
    errors: list[str] = []
    layers: list[Layer] = []
    data, errs, _digest = read_toml(user_file or user_config_file())
    errors += errs
    layers.append(Layer(USER_FILE, data, trusted=True))
    confirm = None
    if workspace_root is not None and workspace_trusted:
        path = workspace_root / WORKSPACE_FILE
        data, errs, digest = read_toml(path)
        errors += errs
        wanted = tuple(sorted(k for k in _flatten(data, str(path), []) if k in SENSITIVE))
        allowed = bool(digest) and digest == allowed_digest
        if wanted and not allowed:
            confirm = WorkspaceFileRequest(path, digest, wanted)
        layers.append(
            Layer(
                WORKSPACE_FILE_SOURCE,
                data,
                trusted=allowed,
                refusal=" until you allow this file's settings (you were asked; its content changed, or you said "
                "no); or set it in your user settings",
            )
        )
    for name, values in client_settings:
        layers.extend(client_layers(name, values, errors))
    report = SettingsReport(Settings(), errors, confirm=confirm)
    for layer in layers:
        step = apply(report.settings, layer)
        report.settings = step.settings
        report.errors += step.errors
        report.ignored += step.ignored
        report.sources.update(step.sources)
    return report


def sources_of(report: SettingsReport) -> dict[str, str]:
    """Where each sensitive setting came from ("default" when nothing set it)."""
    return {key: report.sources.get(key, DEFAULT) for key in sorted(SENSITIVE)}


# ---- what the user allowed -----------------------------------------------------------------------------


def _allowed_file() -> Path:
    from .history import state_dir

    return state_dir() / "allowed-workspace-settings.json"


def allowed_digest(root: Path) -> str | None:
    """The digest of the workspace file content the user allowed for `root`, if any."""
    try:
        data = json.loads(_allowed_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = data.get(str(root)) if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


def remember_allowed(root: Path, digest: str) -> None:
    path = _allowed_file()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            data = {}
    except (OSError, ValueError):
        data = {}
    data[str(root)] = digest
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
    os.replace(tmp, path)


# ---- the mirrors: docs table, VS Code's package.json, Neovim's known_settings ---------------------------


def _default_text(spec: Spec) -> str:
    if spec.default is None:
        return "none"
    if spec.type == "array":
        return "`[]`"
    if spec.type == "object":
        return "`{}`"
    return f"`{json.dumps(spec.default)}`"


def docs_table() -> str:
    lines = ["| key | type | default | trust | meaning |", "|---|---|---|---|---|"]
    for spec in SCHEMA:
        kind = " \\| ".join(f'`"{o}"`' for o in spec.enum) if spec.enum else spec.type
        if spec.minimum is not None or spec.maximum is not None:
            lo = f"{spec.minimum:g}" if spec.minimum is not None else ""
            hi = f"{spec.maximum:g}" if spec.maximum is not None else ""
            kind += f" {lo}–{hi}" if hi else f" ≥ {lo}"
        trust = "client only" if spec.client else "user sources" if spec.sensitive else "any source"
        lines.append(f"| `{spec.key}` | {kind} | {_default_text(spec)} | {trust} | {spec.description} |")
    return "\n".join(lines) + "\n"


def vscode_properties() -> dict[str, Any]:
    """contributes.configuration.properties for the schema's keys."""
    out: dict[str, Any] = {}
    for spec in SCHEMA:
        entry: dict[str, Any] = {}
        if spec.nullable and spec.type in ("number", "integer"):
            entry["type"] = [spec.type, "null"]
            entry["default"] = None
        elif spec.type == "array":
            entry["type"] = "array"
            entry["items"] = {"type": "string"}
            entry["default"] = list(spec.default)
        elif spec.type == "object":
            entry["type"] = "object"
            entry["additionalProperties"] = {"type": "string"}
            entry["default"] = dict(spec.default)
        else:
            entry["type"] = spec.type
            entry["default"] = "" if spec.default is None else spec.default
        if spec.enum:
            entry["enum"] = list(spec.enum)
        if spec.minimum is not None:
            entry["minimum"] = spec.minimum
        if spec.maximum is not None:
            entry["maximum"] = spec.maximum
        if spec.multiline:
            entry["editPresentation"] = "multilineText"
        if spec.sensitive:
            # User settings only: VS Code itself then ignores a repository's .vscode/settings.json for it, as
            # the server does (client_layers). "application", not "machine": a remote VS Code (code-server,
            # Remote-SSH) ignores machine-scoped values in the user's settings, so the user could not set them.
            entry["scope"] = "application"
        entry["markdownDescription"] = spec.description
        out[f"{SECTION}.{spec.key}"] = entry
    return out


_LUA_TYPES = {"string": "string", "integer": "number", "number": "number", "boolean": "boolean", "array": "table",
              "object": "table"}


def lua_known_settings() -> str:
    """The body of Neovim's `M.known_settings` table (nested kernel.* as one table). Client-side settings
    (confirmDestructive) are in it too: the Neovim client reads them from the same `settings` table."""
    lines = []
    seen: set[str] = set()
    for spec in SCHEMA:
        top = spec.key.split(".", 1)[0]
        if top in seen:
            continue
        seen.add(top)
        lines.append(f"  {top} = \"{'table' if '.' in spec.key else _LUA_TYPES[spec.type]}\",")
    return "\n".join(lines) + "\n"


MIRRORS_BEGIN, MIRRORS_END = "<!-- settings table: generated -->", "<!-- end of generated settings table -->"
LUA_BEGIN, LUA_END = "-- known_settings: generated from the server's settings schema\n", "-- end of known_settings\n"


def write_mirrors(repo: Path, *, check: bool = False) -> list[str]:
    """Bring the three mirrors up to date (or, with `check`, list which are out of date)."""
    stale: list[str] = []

    def update(path: Path, make: Callable[[str], str]) -> None:
        text = path.read_text(encoding="utf-8")
        new = make(text)
        if new != text:
            stale.append(str(path.relative_to(repo)))
            if not check:
                path.write_text(new, encoding="utf-8")

    def between(text: str, begin: str, end: str, body: str) -> str:
        head, rest = text.split(begin, 1)
        _old, tail = rest.split(end, 1)
        return head + begin + "\n" + body + end + tail

    update(repo / "docs" / "configuration.md", lambda t: between(t, MIRRORS_BEGIN, MIRRORS_END, docs_table()))

    def package(text: str) -> str:
        data = json.loads(text)
        props = data["contributes"]["configuration"]["properties"]
        own = {k: v for k, v in props.items() if k.split(".", 2)[1] in _CLIENT_ONLY_PREFIXES}
        data["contributes"]["configuration"]["properties"] = {**vscode_properties(), **own}
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"

    update(repo / "clients" / "vscode" / "package.json", package)
    lua = repo / "clients" / "neovim" / "lua" / "interpreter_lsp" / "config.lua"
    update(lua, lambda t: t.split(LUA_BEGIN, 1)[0] + LUA_BEGIN + "M.known_settings = {\n" + lua_known_settings()
           + "}\n" + LUA_END + t.split(LUA_END, 1)[1])
    return stale


if __name__ == "__main__":  # python -m interpreter_lsp.settings [--check]
    repo_root = Path(__file__).resolve().parents[2]
    out_of_date = write_mirrors(repo_root, check="--check" in sys.argv)
    print(("out of date: " if "--check" in sys.argv else "updated: ") + (", ".join(out_of_date) or "nothing"))
    sys.exit(1 if out_of_date and "--check" in sys.argv else 0)
