"""Which wire a model request takes: one the server speaks itself over httpx (llm/direct.py), or litellm.

Three wire formats cover what most users configure, and are spoken directly so that the first chat after
start-up never waits for litellm's import (seconds of CPU, ~190 MB):
- "openai": OpenAI-compatible chat completions. `openai/<model>` (OpenAI itself, or any apiBase: LM
  Studio, llama.cpp's server, vLLM, Ollama's /v1), bare OpenAI names (`gpt-4o-mini`, `o3-mini`), and
  `lm_studio/`, `hosted_vllm/`, `llamafile/` with their base URL known.
- "anthropic": Anthropic Messages. `anthropic/<model>` and bare `claude-*` names.
- "ollama": Ollama's own /api/chat. `ollama_chat/<model>` and `ollama/<model>`.
Every other provider (Gemini, Bedrock, Vertex, Mistral, Groq, ...) goes through litellm, which needs the
`providers` extra. `INTERPRETER_LSP_MODEL_CLIENT=litellm` in the environment sends everything through
litellm (for a provider quirk the direct paths do not know).

Where the request goes and the key it carries follow litellm's own rules for these providers (the same
environment variables, the same defaults), so moving a model between the two paths changes nothing the
user set.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from interpreter_lsp.llm import endpoints

if TYPE_CHECKING:
    from interpreter_lsp.llm.client import ModelConfig

OPENAI: Final = "openai"
ANTHROPIC: Final = "anthropic"
OLLAMA: Final = "ollama"

OPENAI_BASE: Final = "https://api.openai.com/v1"
ANTHROPIC_BASE: Final = "https://api.anthropic.com"
_OPENAI_NAMES: Final = ("gpt-", "chatgpt-", "o1", "o3", "o4", "codex-")
# OpenAI-compatible providers of litellm, with the variables litellm reads for their base URL and key,
# and the base it uses when none is set (None: the provider needs one).
_COMPATIBLE: Final = {
    "lm_studio": ("LM_STUDIO_API_BASE", "LM_STUDIO_API_KEY", None),
    "hosted_vllm": ("HOSTED_VLLM_API_BASE", "HOSTED_VLLM_API_KEY", None),
    "llamafile": ("LLAMAFILE_API_BASE", "LLAMAFILE_API_KEY", "http://127.0.0.1:8080/v1"),
}


@dataclass(frozen=True)
class Route:
    wire: str  # OPENAI | ANTHROPIC | OLLAMA
    provider: str  # litellm's name for the provider (for messages and the cost map)
    model: str  # the name sent on the wire (without the provider prefix)
    base: str  # the base URL
    key: str | None  # the key sent, if any
    official: bool  # the provider's own API (not an apiBase): OpenAI's parameter names, a key needed

    @property
    def url(self) -> str:
        base = self.base.rstrip("/")
        if self.wire == ANTHROPIC:
            return base + ("/messages" if base.endswith("/v1") else "/v1/messages")
        if self.wire == OLLAMA:
            return base + "/api/chat"
        return base + "/chat/completions"

    @property
    def local(self) -> bool:
        """A provider of models on the user's own machine or network: never priced (as llm/models.py's
        LOCAL_PROVIDERS; a model behind an apiBase is priced when the map knows its name, as litellm does)."""
        return self.provider in ("ollama", "ollama_chat", "lm_studio", "hosted_vllm", "llamafile")


def direct_enabled() -> bool:
    return os.environ.get("INTERPRETER_LSP_MODEL_CLIENT", "").strip().lower() != "litellm"


def provider_of(model: str) -> str:
    """The provider a model name means: its prefix, or for a bare name the one litellm would choose for
    the names the direct paths serve ("openai" for gpt-*, "anthropic" for claude-*), else ""."""
    prefix = endpoints.provider_of(model)
    if prefix:
        return prefix
    if model.startswith(_OPENAI_NAMES):
        return "openai"
    if model.startswith("claude-"):
        return "anthropic"
    return ""


def route(config: ModelConfig) -> Route | None:
    """The direct route of `config`, or None when litellm serves it."""
    if not direct_enabled():
        return None
    provider = provider_of(config.model)
    name = config.model.split("/", 1)[1] if endpoints.provider_of(config.model) else config.model
    if not name:
        return None
    env = os.environ.get
    if provider == "openai":
        base = config.api_base or env("OPENAI_API_BASE") or env("OPENAI_BASE_URL")
        key = config.api_key or endpoints.placeholder_key(config, provider) or env("OPENAI_API_KEY")
        return Route(OPENAI, provider, name, base or OPENAI_BASE, key, official=not base)
    if provider in _COMPATIBLE:
        base_variable, key_variable, default = _COMPATIBLE[provider]
        base = config.api_base or env(base_variable) or default
        if not base:
            return None  # litellm says what is missing
        key = config.api_key or env(key_variable) or endpoints.PLACEHOLDER_KEY
        return Route(OPENAI, provider, name, base, key, official=False)
    if provider == "anthropic":
        base = config.api_base or env("ANTHROPIC_API_BASE") or env("ANTHROPIC_BASE_URL")
        key = config.api_key or env("ANTHROPIC_API_KEY")
        return Route(ANTHROPIC, provider, name, base or ANTHROPIC_BASE, key, official=not base)
    if provider in endpoints.OLLAMA_PROVIDERS:
        base = endpoints.endpoint(config, provider) or endpoints.OLLAMA_DEFAULT_BASE
        return Route(OLLAMA, provider, name, base, config.api_key, official=False)
    return None
