"""What we know about where a model request goes: the key it needs (none, for local servers), the host
and port it reaches, how to start the server that should be there, and the models that server offers.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from interpreter_lsp.llm.client import ModelConfig

log = logging.getLogger(__name__)

# Sent as the key to an OpenAI-compatible apiBase when no key is configured: the openai client refuses to
# send a request without one, and LM Studio, llama.cpp's server, vLLM (without --api-key) and Ollama's
# /v1 accept any value. llama.cpp's documentation uses this one; a server log that shows it says why.
PLACEHOLDER_KEY: Final = "sk-no-key-required"

# litellm providers that speak the OpenAI API through the openai client, which insists on a key, with the
# variable litellm reads for it. With an apiBase and neither a key setting nor that variable, the
# placeholder is sent instead (never another provider's key).
_KEY_INSISTING_PROVIDERS: Final = {
    "openai": "OPENAI_API_KEY",
    "custom_openai": "OPENAI_API_KEY",
    "text-completion-openai": "OPENAI_API_KEY",
    "xinference": "XINFERENCE_API_KEY",
}

OLLAMA_PROVIDERS: Final = ("ollama", "ollama_chat")
OLLAMA_DEFAULT_BASE: Final = "http://localhost:11434"  # litellm's default when no api_base is given
OLLAMA_PORT: Final = 11434
LM_STUDIO_PORT: Final = 1234

_KEY_VARIABLES: Final = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "groq": "GROQ_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "azure": "AZURE_API_KEY",
    "xai": "XAI_API_KEY",
    "together_ai": "TOGETHERAI_API_KEY",
    "fireworks_ai": "FIREWORKS_AI_API_KEY",
    "cohere": "COHERE_API_KEY",
    **_KEY_INSISTING_PROVIDERS,
}

LISTING_TIMEOUT: Final = 2.0  # seconds for the whole model listing, asked once when a model is unknown
LISTING_MAX_BYTES: Final = 1_000_000
LISTING_SHOWN: Final = 20  # names in a message; the rest are counted


def provider_of(model: str) -> str:
    """The provider prefix of a litellm model name ("openai" for "openai/qwen"), or ""."""
    return model.split("/", 1)[0] if "/" in model else ""


def key_variable(provider: str, model: str = "") -> str:
    """The environment variable litellm reads for this provider's key."""
    if not provider:
        return "ANTHROPIC_API_KEY" if model.startswith("claude") else "OPENAI_API_KEY"
    return _KEY_VARIABLES.get(provider, f"{provider.upper()}_API_KEY")


def placeholder_key(config: ModelConfig, provider: str) -> str | None:
    """The placeholder to send, when the endpoint is an apiBase and nothing gives a key; else None
    (litellm then sends the configured key, or the provider's own variable, as it always did)."""
    if config.api_key or not config.api_base:
        return None
    variable = _KEY_INSISTING_PROVIDERS.get(provider)
    if variable is None or os.environ.get(variable):
        return None
    return PLACEHOLDER_KEY


def key_source(config: ModelConfig, provider: str) -> str | None:
    """Where the key that was sent came from ("interpreter.apiKey", a variable's name), or None (no key,
    or the placeholder)."""
    if config.api_key:
        return "interpreter.apiKey"
    if placeholder_key(config, provider) is not None:
        return None
    variable = key_variable(provider, config.model)
    return variable if os.environ.get(variable) else None


def endpoint(config: ModelConfig, provider: str) -> str | None:
    """The base URL the request goes to, when we know it: the apiBase, or Ollama's default."""
    if config.api_base:
        return config.api_base
    if provider in OLLAMA_PROVIDERS:
        return os.environ.get("OLLAMA_API_BASE") or OLLAMA_DEFAULT_BASE
    return None


def where(config: ModelConfig, provider: str) -> str:
    """The endpoint in words: its URL, or "the <provider> API"."""
    base = endpoint(config, provider)
    if base:
        return base
    return f"the {provider or 'openai'} API"


def host_port(url: str) -> tuple[str, int | None]:
    try:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
        return parts.hostname or url, port
    except ValueError:
        return url, None


def is_loopback(host: str) -> bool:
    return host in ("localhost", "::1", "0.0.0.0") or host.startswith("127.")


def start_advice(config: ModelConfig, provider: str, host: str, port: int | None) -> str:
    """What to do when nothing listens where the request went."""
    if provider in OLLAMA_PROVIDERS or port == OLLAMA_PORT:
        return "start Ollama with `ollama serve` (or open the Ollama app), or set interpreter.apiBase to where it runs"
    if provider == "lm_studio" or port == LM_STUDIO_PORT:
        return (
            "start LM Studio's server (its Developer tab: Start Server, or `lms server start`), or set "
            "interpreter.apiBase to where it runs"
        )
    if is_loopback(host):
        shown = port if port is not None else "<port>"
        return (
            f"start the model server there (llama.cpp: `llama-server -m <model>.gguf --port {shown}`; "
            f"vLLM: `vllm serve <model> --port {shown}`), or correct interpreter.apiBase"
        )
    return "check that the server is running and that interpreter.apiBase is right"


async def offered_models(config: ModelConfig, provider: str, timeout: float = LISTING_TIMEOUT) -> list[str] | None:
    """The models the endpoint lists (Ollama's /api/tags, else the OpenAI-compatible /models of the
    apiBase), or None when it cannot be asked or does not answer within `timeout` seconds.

    Only an endpoint the request itself went to is asked, with only the key from interpreter.apiKey; a
    cloud provider without an apiBase is not asked (its listing needs a key from the environment).
    """
    base = endpoint(config, provider)
    if base is None:
        return None
    ollama = provider in OLLAMA_PROVIDERS
    url = f"{base.rstrip('/')}/api/tags" if ollama else f"{base.rstrip('/')}/models"
    headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key and not ollama else {}
    try:
        payload = await asyncio.wait_for(_get_json(url, headers, timeout), timeout)
    except Exception as exc:  # nothing to list is an ordinary outcome: the message just says less
        log.debug("listing models at %s failed: %s", url, exc)
        return None
    return _model_names(payload, "models", "name") if ollama else _model_names(payload, "data", "id")


async def _get_json(url: str, headers: dict[str, str], timeout: float) -> Any:
    import httpx

    async with (
        httpx.AsyncClient(timeout=httpx.Timeout(timeout)) as client,
        client.stream("GET", url, headers=headers) as response,
    ):
        response.raise_for_status()
        body = bytearray()
        async for part in response.aiter_bytes():
            body += part
            if len(body) > LISTING_MAX_BYTES:
                raise ValueError(f"the listing is larger than {LISTING_MAX_BYTES} bytes")
    return json.loads(bytes(body))


def _model_names(payload: Any, list_key: str, item_key: str) -> list[str] | None:
    if not isinstance(payload, dict) or not isinstance(payload.get(list_key), list):
        return None
    names = [item.get(item_key) for item in payload[list_key] if isinstance(item, dict)]
    return [name for name in names if isinstance(name, str) and name]
