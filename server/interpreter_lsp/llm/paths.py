"""The two ways to the model behind llm/client.py, each opening a stream and yielding the same `Piece`s:
`DirectPath` (llm/direct.py over httpx, for the routes of llm/routes.py) and `LitellmPath`
(litellm.acompletion, for every other provider), with how each counts tokens and prices a reply.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from types import ModuleType
from typing import TYPE_CHECKING, Any

from interpreter_lsp.llm import endpoints, estimate, routes
from interpreter_lsp.llm.wire import Piece

if TYPE_CHECKING:
    from interpreter_lsp.llm.client import ModelConfig


class Path:
    """One way to the model: open a stream, read its pieces, close it; count and price."""

    async def open(
        self, messages: list[dict[str, Any]], config: ModelConfig, tools: list[dict[str, Any]] | None
    ) -> Any:
        raise NotImplementedError

    def pieces(self, stream: Any) -> AsyncIterator[Piece]:
        raise NotImplementedError

    async def close(self, stream: Any) -> None:
        with contextlib.suppress(Exception):
            await stream.aclose()

    def count(self, config: ModelConfig, messages: list[dict[str, Any]] | None, text: str) -> int:
        return estimate.message_tokens(messages) if messages is not None else estimate.text_tokens(text)

    async def cost(self, config: ModelConfig, prompt_tokens: int, completion_tokens: int) -> float:
        return 0.0


class DirectPath(Path):
    def __init__(self, direct: ModuleType, route: routes.Route) -> None:
        self.direct, self.route = direct, route

    async def open(
        self, messages: list[dict[str, Any]], config: ModelConfig, tools: list[dict[str, Any]] | None
    ) -> Any:
        import httpx  # loaded by the warm-up with llm/direct.py

        from interpreter_lsp.llm import wire

        body = wire.body(
            self.route, messages, temperature=config.temperature, max_tokens=config.max_tokens, tools=tools
        )
        stream = self.direct.Stream(
            self.route, body, httpx.Timeout(read_backstop(config), connect=config.connect_timeout)
        )
        try:
            await stream.open()
        except BaseException:
            await stream.aclose()
            raise
        return stream

    def pieces(self, stream: Any) -> AsyncIterator[Piece]:
        return stream.pieces()  # type: ignore[no-any-return]

    async def cost(self, config: ModelConfig, prompt_tokens: int, completion_tokens: int) -> float:
        from interpreter_lsp.llm import prices

        known = prices.cost_known(self.route, prompt_tokens, completion_tokens)
        if known is not None:
            return known
        # Off the loop: the first price of a model reads litellm's map file (3.5 MB); then it is cached.
        return await asyncio.to_thread(prices.cost, self.route, prompt_tokens, completion_tokens)


class LitellmPath(Path):
    def __init__(self, litellm: ModuleType, provider: str) -> None:
        self.litellm, self.provider = litellm, provider

    async def open(
        self, messages: list[dict[str, Any]], config: ModelConfig, tools: list[dict[str, Any]] | None
    ) -> Any:
        # A copy of its own: the masked messages are shared between requests (Redactor.redact_messages), and
        # what litellm does to what it is given is its own business.
        return await _open_stream(self.litellm, _request_kwargs(_copied(messages), config, self.provider, tools))

    async def pieces(self, stream: Any) -> AsyncIterator[Piece]:  # type: ignore[override]
        async for chunk in stream:
            usage = getattr(chunk, "usage", None)
            counts = (
                (getattr(usage, "prompt_tokens", None), getattr(usage, "completion_tokens", None)) if usage else None
            )
            if not chunk.choices:
                yield Piece(usage=counts)
                continue
            delta = chunk.choices[0].delta
            yield Piece(
                text=getattr(delta, "content", None) or "",
                fragments=getattr(delta, "tool_calls", None) or None,
                thinking=bool(getattr(delta, "reasoning_content", None)),
                usage=counts,
            )

    def count(self, config: ModelConfig, messages: list[dict[str, Any]] | None, text: str) -> int:
        if messages is not None:
            return int(self.litellm.token_counter(model=config.model, messages=messages))
        return int(self.litellm.token_counter(model=config.model, text=text)) if text else 0

    async def cost(self, config: ModelConfig, prompt_tokens: int, completion_tokens: int) -> float:
        return _cost(self.litellm, config, prompt_tokens, completion_tokens)


_closing: set[asyncio.Task[Any]] = set()


# How long a request whose caller was cancelled may still finish opening, so that its response is closed
# by us: cancelling litellm while it receives the response headers can leave the connection open (the
# server then goes on generating for no one).
ABANDON_GRACE = 2.0


async def _open_stream(litellm: ModuleType, kwargs: dict[str, Any]) -> Any:
    """litellm.acompletion, but a cancel that lands while the response is arriving cannot leak the open
    HTTP response: the request runs in its own task, which the caller's cancel leaves to finish for at
    most ABANDON_GRACE seconds (then it is cancelled); whatever it returns late is closed at once."""
    request = asyncio.ensure_future(litellm.acompletion(**kwargs))
    try:
        return await asyncio.shield(request)
    except asyncio.CancelledError:
        deadline = asyncio.get_running_loop().call_later(ABANDON_GRACE, request.cancel)
        request.add_done_callback(lambda done: (deadline.cancel(), _close_late_stream(done)))
        raise


def _copied(value: Any) -> Any:
    """A copy of JSON-like `value`'s dicts and lists; its strings (immutable) shared, however large (an
    image's base64): nodes are copied, not bytes."""
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copied(v) for v in value]
    return value


def _close_late_stream(request: asyncio.Future[Any]) -> None:
    if request.cancelled() or request.exception() is not None:  # exception() also marks it retrieved
        return
    task = asyncio.ensure_future(request.result().aclose())
    _closing.add(task)
    task.add_done_callback(_closing.discard)


def _request_kwargs(
    messages: list[dict[str, Any]], config: ModelConfig, provider: str, tools: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    import httpx  # cheap (litellm has imported it already); kept out of module import time

    backstop = read_backstop(config)
    kwargs: dict[str, Any] = {
        "model": config.model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
        "num_retries": 0,  # litellm's own retry wrapper off
        "max_retries": 0,  # the openai client's retries off
        "timeout": httpx.Timeout(backstop, connect=config.connect_timeout),
    }
    if config.api_base:
        kwargs["api_base"] = config.api_base
    api_key = config.api_key or endpoints.placeholder_key(config, provider)
    if api_key:
        kwargs["api_key"] = api_key
    if config.temperature is not None:
        kwargs["temperature"] = config.temperature
    if config.max_tokens is not None:
        kwargs["max_tokens"] = config.max_tokens
    if tools:
        kwargs["tools"] = tools
    return kwargs


def read_backstop(config: ModelConfig) -> float:
    """httpx's read timeout: a backstop only, our own first-token and stall timers fire first."""
    return max(config.first_token_timeout, config.stall_timeout) + 5.0


def _cost(litellm: ModuleType, config: ModelConfig, prompt_tokens: int, completion_tokens: int) -> float:
    """USD from litellm's (offline) cost map; 0.0 for models it does not price, such as local ones."""
    try:
        prompt_cost, completion_cost = litellm.cost_per_token(
            model=config.model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
        )
        return float(prompt_cost) + float(completion_cost)
    except Exception:
        return 0.0
