"""What litellm knows about a model: its context window, its price, its abilities, and how to count its
tokens. Asked once per model configuration (the answers come from litellm's offline cost map, cheap but
not free), then kept.

Every question is best effort: a model litellm has never heard of (a local one behind an apiBase, most
Ollama tags) has no window, no price and no abilities, and its tokens are counted with litellm's default
tokenizer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from interpreter_lsp.llm.client import ModelConfig

log = logging.getLogger(__name__)

# Providers that serve models on the user's own machine: never priced, whatever the model's name.
LOCAL_PROVIDERS = frozenset({"ollama", "ollama_chat", "lm_studio", "llamafile", "hosted_vllm"})


@dataclass(frozen=True)
class ModelFacts:
    model: str
    window: int | None  # input tokens the model accepts, when litellm knows it
    input_cost: float  # USD per prompt token (0.0: local or unknown)
    output_cost: float  # USD per completion token
    priced: bool  # litellm knows a price (costKnown)
    function_calling: bool
    vision: bool
    count: Callable[[list[dict[str, Any]]], int]  # tokens of messages, for this model (blocking: off the loop)

    def cost(self, prompt_tokens: int, completion_tokens: int = 0) -> float:
        return prompt_tokens * self.input_cost + completion_tokens * self.output_cost


def facts(litellm: ModuleType, config: ModelConfig, *, ask: bool = True) -> ModelFacts:
    """What litellm knows of `config.model`. Blocking: mostly litellm's in-memory tables, but for some
    providers (Ollama) litellm asks the server; call it off the event loop. `ask=False`: nothing is asked
    (no window, price or abilities), only the token counter is set up."""
    model = config.model
    provider = _provider(litellm, config)
    info: dict[str, Any] = {}
    try:
        info = dict(litellm.get_model_info(model) or {}) if ask else {}
    except Exception:  # "This model isn't mapped yet": a local or unknown model
        info = {}
    window = info.get("max_input_tokens") or info.get("max_tokens")
    input_cost = float(info.get("input_cost_per_token") or 0.0)
    output_cost = float(info.get("output_cost_per_token") or 0.0)
    local = provider in LOCAL_PROVIDERS
    priced = not local and (input_cost > 0 or output_cost > 0)
    if not priced:
        input_cost = output_cost = 0.0

    def count(messages: list[dict[str, Any]]) -> int:
        try:
            return int(litellm.token_counter(model=model, messages=messages))
        except Exception as exc:  # a tokenizer that cannot load: a rough count rather than none
            log.debug("token counting failed for %s: %s", model, exc)
            return sum(len(str(m.get("content", ""))) // 3 + 4 for m in messages)

    return ModelFacts(
        model=model,
        window=int(window) if isinstance(window, (int, float)) and window > 0 else None,
        input_cost=input_cost,
        output_cost=output_cost,
        priced=priced,
        function_calling=ask and _ask(litellm.supports_function_calling, model),
        vision=ask and _ask(litellm.supports_vision, model),
        count=count,
    )


def _ask(question: Callable[..., Any], model: str) -> bool:
    try:
        return bool(question(model=model))
    except Exception:
        return False


def _provider(litellm: ModuleType, config: ModelConfig) -> str:
    try:
        return str(litellm.get_llm_provider(model=config.model, api_base=config.api_base)[1])
    except Exception:
        return config.model.split("/", 1)[0] if "/" in config.model else ""
