"""What is known about a model: its context window, its price, its abilities, and how to count its
tokens. Asked once per model configuration, then kept.

For the providers litellm serves, litellm answers (its offline cost map; its counter). For the direct
routes (llm/routes.py) litellm is never imported: the same map's entry is read from its file
(llm/prices.py), Ollama is asked itself (/api/show: the context length and its capabilities, as litellm
asks it), and tokens are estimated (llm/estimate.py: no tokenizer loaded; over-counts ordinary text).

Every question is best effort: a model the map has never heard of (a local one behind an apiBase, most
Ollama tags) has no window, no price and no abilities.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from interpreter_lsp.llm import estimate, routes
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
    counter: str = "litellm"  # "litellm" | "estimate" (llm/estimate.py); a cache of counts is per counter

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
        window=_window(window),
        input_cost=input_cost,
        output_cost=output_cost,
        priced=priced,
        function_calling=ask and _ask(litellm.supports_function_calling, model),
        vision=ask and _ask(litellm.supports_vision, model),
        count=count,
    )


async def describe(config: ModelConfig, timeout: float) -> ModelFacts:
    """The facts of `config.model`, from litellm or, on a direct route, without it; at most `timeout`
    seconds of asking (past that: no window, price or abilities, said in the log)."""
    import asyncio

    from interpreter_lsp.llm.loader import get_litellm

    route = routes.route(config)
    if route is not None:
        try:
            return await asyncio.wait_for(direct_facts(route, config), timeout)
        except asyncio.TimeoutError:
            log.warning("%s did not describe itself within %.0f s: its window is a guess", config.model, timeout)
            return _facts_of(config.model, {}, route.local, counter="estimate")
    litellm = await get_litellm()
    try:
        return await asyncio.wait_for(asyncio.to_thread(facts, litellm, config), timeout)
    except asyncio.TimeoutError:
        log.warning("litellm took over %.0f s to describe %s: its window is a guess", timeout, config.model)
        return facts(litellm, config, ask=False)


async def direct_facts(route: routes.Route, config: ModelConfig) -> ModelFacts:
    """Facts of a direct route's model without litellm: the map's entry (read off the loop), or for
    Ollama what the server says of the model."""
    import asyncio

    from interpreter_lsp.llm import prices

    if route.wire == routes.OLLAMA:
        info = await _ollama_show(route)
    else:
        info = await asyncio.to_thread(prices.lookup, route)
    return _facts_of(config.model, info, route.local, counter="estimate")


def _facts_of(model: str, info: dict[str, Any], local: bool, *, counter: str) -> ModelFacts:
    window = info.get("max_input_tokens") or info.get("max_tokens")
    input_cost = float(info.get("input_cost_per_token") or 0.0)
    output_cost = float(info.get("output_cost_per_token") or 0.0)
    priced = not local and (input_cost > 0 or output_cost > 0)
    if not priced:
        input_cost = output_cost = 0.0
    return ModelFacts(
        model=model,
        window=_window(window),
        input_cost=input_cost,
        output_cost=output_cost,
        priced=priced,
        function_calling=bool(info.get("supports_function_calling")),
        vision=bool(info.get("supports_vision")),
        count=estimate.message_tokens,
        counter=counter,
    )


async def _ollama_show(route: routes.Route) -> dict[str, Any]:
    """Ollama's /api/show of the model, as litellm reads it: the context length of its model_info,
    tools where its capabilities (or, on older servers, its template) say so, vision where its
    capabilities say so. {} when the server cannot tell."""
    from interpreter_lsp.llm.loader import get_direct

    direct = await get_direct()  # imported off the loop (the warm-up's import, usually done)
    try:
        url = f"{route.base.rstrip('/')}/api/show"
        response = await direct.client().post(url, json={"model": route.model}, timeout=5.0)
        response.raise_for_status()
        shown = response.json()
    except Exception as exc:
        log.debug("Ollama's /api/show of %s failed: %s", route.model, exc)
        return {}
    if not isinstance(shown, dict):
        return {}
    model_info = shown.get("model_info") if isinstance(shown.get("model_info"), dict) else {}
    window = next((v for k, v in model_info.items() if k.endswith("context_length") and isinstance(v, int)), None)
    capabilities = shown.get("capabilities") if isinstance(shown.get("capabilities"), list) else None
    tools = "tools" in capabilities if capabilities is not None else "tools" in str(shown.get("template", "")).lower()
    return {
        "max_input_tokens": window,
        "supports_function_calling": tools,
        "supports_vision": capabilities is not None and "vision" in capabilities,
    }


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


def _window(value: Any) -> int | None:
    """A context window as a model's info gives it: a positive finite number, else unknown (an Ollama
    server's JSON may say Infinity or NaN, which int() refuses or passes along)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        return None
    return int(value)
