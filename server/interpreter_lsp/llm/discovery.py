"""Find a local model server on loopback when no model is configured: Ollama first, then LM Studio.

Where they are looked for: 127.0.0.1:11434 and 127.0.0.1:1234, or where the user's environment says they
run, if that is a loopback address: `OLLAMA_HOST` (Ollama's own variable, e.g. "127.0.0.1:11500") and
`LM_STUDIO_API_BASE` (litellm's, e.g. "http://127.0.0.1:4321/v1"). Nothing but loopback is ever asked.
A server found here needs no API key (see `endpoints.placeholder_key`).
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any
from urllib.parse import urlsplit

from interpreter_lsp.llm.endpoints import LM_STUDIO_PORT, OLLAMA_PORT, is_loopback
from interpreter_lsp.llm.loader import get_httpx

log = logging.getLogger(__name__)

NO_MODEL_HELP = """\
No model is configured, and no local model server was found (Ollama on 127.0.0.1:11434, LM Studio on \
127.0.0.1:1234). Set interpreter.model (in your editor's settings, or `model = "..."` in \
.interpreter-lsp.toml), for example:
- cloud: "gpt-4o-mini" with OPENAI_API_KEY set, or "anthropic/claude-sonnet-4-5" with ANTHROPIC_API_KEY set
- Ollama: "ollama_chat/qwen2.5-coder" (after `ollama pull qwen2.5-coder`)
- LM Studio or any OpenAI-compatible server (llama.cpp, vLLM): "openai/<model>" with interpreter.apiBase \
set, e.g. "http://127.0.0.1:1234/v1" (no API key needed).
A local server on another port is found when OLLAMA_HOST or LM_STUDIO_API_BASE says where."""


def no_model_help() -> str:
    """NO_MODEL_HELP with the places actually looked at: OLLAMA_HOST and LM_STUDIO_API_BASE, when set,
    move them (and one that is not on loopback is named as not looked at)."""
    ollama, lm_studio = _ollama_base("127.0.0.1"), _lm_studio_base("127.0.0.1")
    where = f"Ollama on {_host_port(ollama)}, LM Studio on {_host_port(lm_studio)}"
    text = NO_MODEL_HELP.replace("Ollama on 127.0.0.1:11434, LM Studio on 127.0.0.1:1234", where)
    skipped = [
        f"{name}={value} (not a loopback address: not looked at)"
        for name in ("OLLAMA_HOST", "LM_STUDIO_API_BASE")
        if (value := os.environ.get(name, "").strip()) and _not_loopback(value)
    ]
    return text + ("\nIgnored: " + "; ".join(skipped) + "." if skipped else "")


def _host_port(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)


def _not_loopback(value: str) -> bool:
    try:
        name = urlsplit(value if "://" in value else f"http://{value}").hostname or ""
    except ValueError:
        return True
    return not is_loopback(name)


# Seconds a probe waits for an answer: ahead of a chat (warm-up), and for the chat that needs the model.
PROBE_TIMEOUT = 0.3
CHAT_PROBE_TIMEOUT = 2.0


async def discover_local_model(
    timeout: float = PROBE_TIMEOUT,
    *,
    host: str = "127.0.0.1",
    ollama_port: int | None = None,
    lm_studio_port: int | None = None,
) -> tuple[str, str] | None:
    """(litellm model name, api_base) of the first chat model a local server offers, or None.

    Both servers are probed at once; Ollama wins when both answer. Each probe is bounded by `timeout`;
    only loopback is asked, and proxy settings of the environment are ignored. A port given here wins
    over the environment's.
    """
    httpx = await get_httpx()  # off the loop: a model found here is one the direct client speaks to
    ollama_base = f"http://{host}:{ollama_port}" if ollama_port else _ollama_base(host)
    lm_studio_base = f"http://{host}:{lm_studio_port}/v1" if lm_studio_port else _lm_studio_base(host)
    # Made in a thread: a client reads the CA bundle into its SSL context (~50 ms), even for plain http.
    client = await asyncio.to_thread(httpx.AsyncClient, timeout=httpx.Timeout(timeout), trust_env=False)
    async with client:
        ollama, lm_studio = await asyncio.gather(
            _get_json(client, f"{ollama_base}/api/tags"),
            _get_json(client, f"{lm_studio_base}/models"),
        )
    name = _chat_model(ollama, "models", "name")
    if name:
        return f"ollama_chat/{name}", ollama_base
    model_id = _chat_model(lm_studio, "data", "id")
    if model_id:
        return f"openai/{model_id}", lm_studio_base
    return None


def _ollama_base(host: str) -> str:
    """From OLLAMA_HOST ("127.0.0.1:11500", "localhost", "http://127.0.0.1:11500", "0.0.0.0:11500"), when it
    names loopback (a server bound to 0.0.0.0 answers there too); else the default port."""
    value = os.environ.get("OLLAMA_HOST", "").strip()
    if value:
        try:
            parts = urlsplit(value if "://" in value else f"http://{value}")
            name, port = parts.hostname or "127.0.0.1", parts.port or OLLAMA_PORT
        except ValueError:
            name, port = "", 0
        if is_loopback(name):
            return f"http://{host}:{port}"
        log.debug("OLLAMA_HOST=%s is not a loopback address: not probed", value)
    return f"http://{host}:{OLLAMA_PORT}"


def _lm_studio_base(host: str) -> str:
    """LM_STUDIO_API_BASE when it is a loopback URL ("http://127.0.0.1:4321/v1"); else the default port."""
    value = os.environ.get("LM_STUDIO_API_BASE", "").strip().rstrip("/")
    if value:
        try:
            parts = urlsplit(value)
            loopback = parts.scheme in ("http", "https") and is_loopback(parts.hostname or "")
        except ValueError:
            loopback = False
        if loopback:
            return value
        log.debug("LM_STUDIO_API_BASE=%s is not a loopback URL: not probed", value)
    return f"http://{host}:{LM_STUDIO_PORT}/v1"


async def _get_json(client: Any, url: str) -> Any:
    try:
        response = await client.get(url)
        response.raise_for_status()
        return response.json()
    except Exception as exc:  # nothing listening, not that server, or not JSON: not found
        log.debug("no model server at %s: %s", url, exc)
        return None


def _chat_model(payload: Any, list_key: str, item_key: str) -> str | None:
    """The first model listed that is not an embedding model (those cannot chat)."""
    if not isinstance(payload, dict) or not isinstance(payload.get(list_key), list):
        return None
    for item in payload[list_key]:
        name = item.get(item_key) if isinstance(item, dict) else None
        if isinstance(name, str) and name and "embed" not in name.lower():
            return name
    return None
