"""Streaming chat completions: timeouts, bounded retries, usage and cost, over one of two paths.

The direct path (llm/routes.py, llm/direct.py) speaks OpenAI-compatible, Anthropic and Ollama streams
over httpx itself; every other provider goes through litellm. Both produce the same pieces (text,
tool-call fragments, usage), and everything else here is shared: the timeouts, the retries, the errors.

Retries are ours, not litellm's or the openai client's (both are set to 0): they happen only before the
first piece of text reached the user, so a retry never shows text twice, and only for failures a retry can
fix (`failures.classify` decides first). Every failure becomes one `ModelError` whose message says what
happened and what to do, with API keys redacted. A local OpenAI-compatible endpoint needs no key
(`endpoints.placeholder_key`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from interpreter_lsp.llm import endpoints, errors, routes
from interpreter_lsp.llm.errors import ModelError
from interpreter_lsp.llm.failures import (
    Failure,
    classify,
    describe,
    names_no_provider,
    no_provider_message,
    redact,
    refine,
)
from interpreter_lsp.llm.loader import get_direct, get_litellm
from interpreter_lsp.llm.toolstream import ToolCall, ToolCallAssembler

if TYPE_CHECKING:
    from interpreter_lsp.llm.paths import Path

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelConfig:
    model: str  # a litellm model name, e.g. "openai/qwen", "ollama_chat/qwen2.5-coder"
    api_base: str | None = None
    api_key: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    connect_timeout: float = 10.0  # seconds to connect
    first_token_timeout: float = 120.0  # seconds from the request to the first streamed token
    stall_timeout: float = 60.0  # seconds without a chunk mid-stream
    max_retries: int = 3  # on 429 (honouring Retry-After), 5xx and dropped connections
    backoff_base: float = 0.5  # seconds; attempt n waits base * 2**n, with jitter
    retry_after_cap: float = 30.0  # never wait longer than this for one Retry-After


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    cost: float  # USD from litellm's cost map; 0.0 for local or unknown models
    tool_calls: tuple[ToolCall, ...] = ()  # native tool calls of the reply, complete, in order


async def stream_completion(
    messages: list[dict[str, Any]],
    config: ModelConfig,
    on_delta: Callable[[str], None],
    *,
    tools: list[dict[str, Any]] | None = None,
    on_tool_call: Callable[[ToolCall], None] | None = None,
    prompt_tokens: int | None = None,
) -> Completion:
    """Stream one assistant reply, calling `on_delta` with each piece of text as it arrives.

    `prompt_tokens`: the request's tokens as the caller counted them (the context budget, with the model's
    counter): the figure when the server reports no usage. Without it they are counted here, at the end of
    the call, on the event loop (litellm's counter over a long conversation: milliseconds).

    `tools`: offered to the model (litellm's `tools=`, OpenAI's function format); each tool call of the
    reply is passed to `on_tool_call` as soon as it is complete (llm/toolstream.py), and listed in the
    Completion.

    Cancelling the calling task closes the HTTP stream at once and re-raises CancelledError.
    Raises ModelError on every failure (after bounded retries when nothing was shown yet).
    """
    from interpreter_lsp.llm.paths import DirectPath, LitellmPath  # not on the server's start path

    route = routes.route(config)
    litellm: ModuleType | None = None
    if route is not None:
        path: Path = DirectPath(await get_direct(), route)
        provider = route.provider
        if route.official and not route.key:  # as litellm does: nothing is sent without a key
            failure = Failure(errors.MISSING_KEY, False, "no API key")
            raise ModelError(redact(describe(failure, config, provider, 0), config), errors.MISSING_KEY)
    else:
        try:
            litellm = await get_litellm()
        except ModelError as exc:
            if exc.kind == errors.UNAVAILABLE and not endpoints.provider_of(config.model):
                # Without litellm, a name without a provider may be one only litellm knows, or a mistake.
                raise ModelError(f"{no_provider_message(config)} ({exc.message})", errors.NO_PROVIDER) from exc
            raise
        provider = _provider(litellm, config)
        path = LitellmPath(litellm, provider)
    attempt = 0
    while True:
        attempt_state = _Attempt()
        try:
            return await _stream_once(
                path, messages, config, _Receivers(on_delta, tools, on_tool_call), attempt_state, prompt_tokens
            )
        except ModelError:
            raise
        except Exception as exc:
            if attempt_state.callback_failed:
                raise
            failure = classify(exc, litellm, opened=attempt_state.opened)
            if attempt_state.delivered or not failure.retryable or attempt >= config.max_retries:
                # Asked once, bounded, and only now: which models the server has instead.
                offered = await endpoints.offered_models(config, provider) if failure.kind == errors.NOT_FOUND else None
                failure = refine(failure, config, offered)
                message = describe(failure, config, provider, attempt, offered)
                raise ModelError(redact(message, config), failure.kind) from exc
            delay = _retry_delay(failure, config, attempt)
            attempt += 1
            log.warning(
                "model request failed (%s); retry %d of %d in %.1f s",
                redact(failure.detail, config),
                attempt,
                config.max_retries,
                delay,
            )
            await asyncio.sleep(delay)


def _provider(litellm: ModuleType, config: ModelConfig) -> str:
    """The litellm provider that serves config.model; a name it cannot map fails here, before any request."""
    try:
        return str(litellm.get_llm_provider(model=config.model, api_base=config.api_base)[1])
    except Exception as exc:
        if names_no_provider(str(exc)):
            raise ModelError(no_provider_message(config), errors.NO_PROVIDER) from None
        log.debug("litellm could not name the provider of %s: %s", config.model, exc)
        return endpoints.provider_of(config.model)


def _retry_delay(failure: Failure, config: ModelConfig, attempt: int) -> float:
    if failure.retry_after is not None:
        return min(failure.retry_after, config.retry_after_cap)
    backoff = min(config.backoff_base * (2**attempt), config.retry_after_cap)
    return backoff * random.uniform(0.5, 1.0)


@dataclass
class _Attempt:
    opened: bool = False  # litellm returned a stream: the server answered
    delivered: bool = False  # some text (or a tool call) reached the caller: this attempt must not be retried
    callback_failed: bool = False  # on_delta raised: the caller's bug, passed through as it is
    got_token: bool = False  # text, a tool call or thinking arrived: a timeout now is a stall


@dataclass(frozen=True)
class _Receivers:
    on_delta: Callable[[str], None]
    tools: list[dict[str, Any]] | None
    on_tool_call: Callable[[ToolCall], None] | None

    def calls(self, state: _Attempt, calls: list[ToolCall]) -> None:
        for call in calls:
            state.delivered = True
            if self.on_tool_call is not None:
                try:
                    self.on_tool_call(call)
                except Exception:
                    state.callback_failed = True
                    raise


async def _stream_once(
    path: Path,
    messages: list[dict[str, Any]],
    config: ModelConfig,
    receivers: _Receivers,
    state: _Attempt,
    counted: int | None = None,
) -> Completion:
    # The stream is read in a task of its own, and the watchdog cancels only that task: whether a
    # cancellation was ours (a timeout) or the caller's is then known without Task.uncancel(), which
    # Python 3.10 lacks (there a timeout surfaced as a bare CancelledError).
    watchdog = _Watchdog()
    reader = asyncio.create_task(_read(path, messages, config, receivers, state, watchdog, counted))
    watchdog.watch(reader, config.first_token_timeout)
    try:
        await asyncio.wait({reader})
    except asyncio.CancelledError:
        # The caller's cancel: the reader closes the HTTP stream as it goes, so the server stops generating.
        watchdog.disarm()
        reader.cancel()
        await asyncio.wait({reader})
        raise
    watchdog.disarm()
    if watchdog.expired and (reader.cancelled() or reader.exception() is not None):
        # The watchdog's cancel may surface as CancelledError or, wrapped by a library, as another error.
        raise _stalled(config) if state.got_token else _first_token_timeout(config)
    return reader.result()


async def _read(
    path: Path,
    messages: list[dict[str, Any]],
    config: ModelConfig,
    receivers: _Receivers,
    state: _Attempt,
    watchdog: _Watchdog,
    counted: int | None = None,
) -> Completion:
    parts: list[str] = []
    assembler = ToolCallAssembler()
    usage: list[int | None] = [None, None]
    stream: Any = None
    pieces: Any = None
    try:
        stream = await path.open(messages, config, receivers.tools)
        state.opened = True
        pieces = path.pieces(stream)
        async for piece in pieces:
            if piece.usage is not None:
                usage = [new if new is not None else old for new, old in zip(piece.usage, usage, strict=True)]
            text, fragments = piece.text, piece.fragments
            if text or fragments or piece.thinking:
                state.got_token = True
            if state.got_token:  # chunks before the first token (role, keep-alives) do not extend its limit
                watchdog.arm(config.stall_timeout)
            if text:
                parts.append(text)
                state.delivered = True
                try:
                    receivers.on_delta(text)
                except Exception:
                    state.callback_failed = True
                    raise
            if fragments:
                receivers.calls(state, assembler.feed(fragments))
        receivers.calls(state, assembler.finish())
    finally:
        watchdog.disarm()
        if pieces is not None:
            with contextlib.suppress(Exception):
                await pieces.aclose()
        if stream is not None:
            # Also on cancellation: close the HTTP stream now, so the server stops generating.
            await path.close(stream)

    text = "".join(parts)
    calls = tuple(assembler.calls)
    written = text + "".join(call.name + call.arguments for call in calls)  # for counting, when usage is absent
    prompt_tokens, completion_tokens = _token_counts(path, config, messages, written, usage, counted)
    return Completion(
        text=text,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cost=await path.cost(config, prompt_tokens, completion_tokens),
        tool_calls=calls,
    )


class _Watchdog:
    """A deadline for the task reading one stream, re-armed as chunks arrive: when it passes, that task
    (and only that task) is cancelled.

    One timer per stream instead of asyncio.wait_for per chunk: no extra task per chunk, and no
    Python 3.11 wait_for race that swallows a user's cancel arriving as the awaited call completes.
    """

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task: asyncio.Task[Any] | None = None
        self._handle: asyncio.TimerHandle | None = None
        self.expired = False

    def watch(self, task: asyncio.Task[Any], seconds: float) -> None:
        self._task = task
        self.arm(seconds)

    def arm(self, seconds: float) -> None:
        self.disarm()
        if not self.expired:
            self._handle = self._loop.call_later(max(seconds, 0.0), self._expire)

    def disarm(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _expire(self) -> None:
        self._handle = None
        self.expired = True
        if self._task is not None:
            self._task.cancel()


def _token_counts(
    path: Path, config: ModelConfig, messages: list[dict[str, Any]], text: str, usage: list[int | None],
    counted: int | None = None,
) -> tuple[int, int]:
    prompt, completion = usage
    try:
        if not isinstance(prompt, int):
            prompt = counted if counted is not None else path.count(config, messages, "")
        if not isinstance(completion, int):
            completion = path.count(config, None, text) if text else 0
    except Exception as exc:  # counting is best effort; never fail a finished reply over it
        log.debug("token counting failed for %s: %s", config.model, exc)
    return (prompt if isinstance(prompt, int) else 0, completion if isinstance(completion, int) else 0)


def _first_token_timeout(config: ModelConfig) -> ModelError:
    return ModelError(
        f"{config.model} sent nothing for {config.first_token_timeout:g} s after the request: the server may "
        "be busy or still loading the model; try again, or use a smaller model.",
        errors.FIRST_TOKEN_TIMEOUT,
    )


def _stalled(config: ModelConfig) -> ModelError:
    return ModelError(
        f"{config.model} stopped in the middle of its reply (nothing for {config.stall_timeout:g} s): try again.",
        errors.STALLED,
    )
