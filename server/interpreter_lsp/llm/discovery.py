"""Find a local model server on loopback when no model is configured: Ollama first, then LM Studio."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

log = logging.getLogger(__name__)

OLLAMA_PORT = 11434
LM_STUDIO_PORT = 1234

NO_MODEL_HELP = """\
No model is configured, and no local model server was found (Ollama on 127.0.0.1:11434, LM Studio on \
127.0.0.1:1234). Set interpreter.model (in your editor's settings, or `model = "..."` in \
.interpreter-lsp.toml), for example:
- cloud: "gpt-4o-mini" with OPENAI_API_KEY set, or "anthropic/claude-sonnet-4-5" with ANTHROPIC_API_KEY set
- Ollama: "ollama_chat/qwen2.5-coder" (after `ollama pull qwen2.5-coder`)
- LM Studio or any OpenAI-compatible server: "openai/<model>" with interpreter.apiBase set, \
e.g. "http://127.0.0.1:1234/v1"."""


async def discover_local_model(
    timeout: float = 0.3,
    *,
    host: str = "127.0.0.1",
    ollama_port: int = OLLAMA_PORT,
    lm_studio_port: int = LM_STUDIO_PORT,
) -> tuple[str, str] | None:
    """(litellm model name, api_base) of the first chat model a local server offers, or None.

    Both servers are probed at once; Ollama wins when both answer. Each probe is bounded by `timeout`;
    only loopback is asked, and proxy settings of the environment are ignored.
    """
    import httpx

    ollama_base = f"http://{host}:{ollama_port}"
    lm_studio_base = f"http://{host}:{lm_studio_port}/v1"
    async with httpx.AsyncClient(timeout=httpx.Timeout(timeout), trust_env=False) as client:
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
