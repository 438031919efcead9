"""Why a model request failed, decided before any retry, and the words a user reads about it.

`classify` looks at the whole exception chain litellm raises. What it tells apart:
- the server answered with an HTTP error (an httpx/openai status error is in the chain): by status;
- nothing answered: refused (nothing listens: not retried, it will not start listening in a second), or
  the connection dropped or timed out (retried);
- litellm gave up before sending anything (no provider in the model name, no API key, a bad parameter):
  a mistake in the settings, never retried and never called a server failure.
`describe` turns that into one message: what happened, then what to do.
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import os
import re
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from interpreter_lsp.llm import endpoints, errors

if TYPE_CHECKING:
    from interpreter_lsp.llm.client import ModelConfig


@dataclass(frozen=True)
class Failure:
    kind: str
    retryable: bool
    detail: str  # the provider's own words, cleaned up
    status: int | None = None
    retry_after: float | None = None
    host: str | None = None  # for NOT_LISTENING: where nothing listened, when the URL is not known


# Classes (by name, anywhere in the MRO, outside litellm) whose presence in the chain means the server
# answered with an HTTP status. litellm's own exceptions subclass openai's APIStatusError even when
# litellm raised them itself, so they do not count.
_RESPONSE_CLASSES = frozenset({"HTTPStatusError", "APIStatusError"})
# Transport failures: httpx, httpcore, openai and aiohttp classes, and the builtin OSErrors.
_TRANSPORT_CLASSES = frozenset(
    {
        "TransportError",  # httpx: ConnectError, ReadError, RemoteProtocolError, timeouts
        "ConnectError",
        "APIConnectionError",  # openai: connection errors and APITimeoutError
        "ClientConnectionError",  # aiohttp: ClientConnectorError, ServerDisconnectedError, ClientOSError
        "ConnectionError",
        "TimeoutError",
        "gaierror",
    }
)
_NO_PROVIDER = re.compile(r"LLM Provider NOT provided|Unmapped LLM provider", re.IGNORECASE)
_MISSING_KEY = re.compile(r"missing credentials|api_key client option must be set|missing \w+ api key|no api key",
                          re.IGNORECASE)  # fmt: skip
_CONTEXT = re.compile(r"context (?:length|size|window)|maximum context|too many tokens", re.IGNORECASE)
# Older litellm releases wrap Ollama's 404 for a model it does not have in a connection error (status 500).
_MODEL_MISSING = re.compile(r"model [\"']?[^\"'\s]+[\"']? not found|try pulling it first|model_not_found",
                            re.IGNORECASE)  # fmt: skip
_REFUSED = re.compile(r"connection refused|connect call failed|actively refused", re.IGNORECASE)
_HOST_PORT = re.compile(r"Cannot connect to host (\S+?):(\d+)")


# Client errors a retry can fix: a request timeout, a conflict (a model still loading on some servers).
_RETRYABLE_4XX = frozenset({408, 409, 429})


def classify(exc: BaseException, litellm: ModuleType | None, *, opened: bool) -> Failure:
    """`opened`: the stream had begun before the failure (so the server did answer). `litellm`: None on
    the direct paths (llm/direct.py), whose errors carry their HTTP status themselves."""
    chain = list(_causes(exc))
    detail = provider_detail(exc)
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None

    def failure(kind: str, retryable: bool, retry_after: float | None = None, host: str | None = None) -> Failure:
        return Failure(kind, retryable, detail, status, retry_after, host)

    if any(isinstance(e, json.JSONDecodeError) or getattr(e, "malformed", False) is True for e in chain):
        return failure(errors.MALFORMED, False)
    answered = opened or any(_is_any(e, _RESPONSE_CLASSES) for e in chain)
    if not answered:
        if any(_is_any(e, _TRANSPORT_CLASSES) for e in chain):
            if any(isinstance(e, ConnectionRefusedError) or _REFUSED.search(str(e)) for e in chain):
                return failure(errors.NOT_LISTENING, False, host=_refused_host(chain))
            if any(isinstance(e, socket.gaierror) for e in chain):  # a retry a second later resolves no better
                return Failure(errors.CONNECTION, False, "the host name could not be resolved", status)
            return failure(errors.CONNECTION, True)
        # litellm raised before any request reached a server: the settings are wrong, not the server.
        if names_no_provider(detail):
            return failure(errors.NO_PROVIDER, False)
        if _isa(exc, litellm, "AuthenticationError") or _MISSING_KEY.search(detail):
            return failure(errors.MISSING_KEY, False)
        return failure(errors.CLIENT, False)

    if _isa(exc, litellm, "AuthenticationError", "PermissionDeniedError") or status in (401, 403):
        return failure(errors.AUTH, False)
    if status == 501:  # Not Implemented: whatever answers there does not serve this API
        return failure(errors.NOT_COMPATIBLE, False)
    if _isa(exc, litellm, "NotFoundError") or status == 404 or _MODEL_MISSING.search(detail):
        return failure(errors.NOT_FOUND, False)
    if _isa(exc, litellm, "ContextWindowExceededError") or (status in (400, 413) and _CONTEXT.search(detail)):
        return failure(errors.CONTEXT_WINDOW, False)
    if _isa(exc, litellm, "RateLimitError") or status == 429:
        return failure(errors.RATE_LIMITED, True, _retry_after(exc))
    if any(_is_any(e, _TRANSPORT_CLASSES) for e in chain):  # the stream broke off after it began
        return failure(errors.CONNECTION, True)
    if _isa(exc, litellm, "BadRequestError") or status in (400, 413, 422):
        return failure(errors.BAD_REQUEST, False)
    if status is not None and 400 <= status < 500:
        # A client error a retry cannot fix (the same request gets the same answer): never retried,
        # whatever class litellm wrapped it in.
        return failure(errors.SERVER, status in _RETRYABLE_4XX)
    if (status is not None and status >= 500) or _isa(exc, litellm, "APIError"):
        return failure(errors.SERVER, True)
    return failure(errors.OTHER, False)


def _isa(exc: BaseException, litellm: Any, *names: str) -> bool:
    """isinstance against litellm's exception classes, when litellm is the path taken."""
    if litellm is None:
        return False
    return isinstance(exc, tuple(getattr(litellm, name) for name in names))


def names_no_provider(text: str) -> bool:
    """Whether litellm's error says the model name maps to no provider."""
    return _NO_PROVIDER.search(text) is not None


def _is_any(error: BaseException, names: frozenset[str]) -> bool:
    if type(error).__module__.startswith("litellm"):
        return False
    return any(cls.__name__ in names for cls in type(error).__mro__)


def _causes(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        original = getattr(current, "original_exception", None)
        current = (
            current.__cause__ or current.__context__ or (original if isinstance(original, BaseException) else None)
        )


def _refused_host(chain: list[BaseException]) -> str | None:
    """host:port of a refused connection, from aiohttp's error (when the URL is not known otherwise)."""
    for error in chain:
        host, port = getattr(error, "host", None), getattr(error, "port", None)
        if isinstance(host, str) and isinstance(port, int):
            return f"{host}:{port}"
        if match := _HOST_PORT.search(str(error)):
            return f"{match.group(1)}:{match.group(2)}"
    return None


def _retry_after(exc: BaseException) -> float | None:
    headers = getattr(exc, "litellm_response_headers", None)
    if headers is None:
        headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None or not hasattr(headers, "get"):
        return None
    with contextlib.suppress(Exception):
        value = headers.get("retry-after-ms")
        if value is not None:
            return max(0.0, float(value) / 1000.0)
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    with contextlib.suppress(Exception):  # Retry-After given as an HTTP date
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    return None


_PREFIX = re.compile(r"^\s*(?:litellm\.\w+:\s*|\w+Error:\s*|\w+Exception\s*-\s*)+")


def provider_detail(exc: BaseException) -> str:
    message = getattr(exc, "message", None)
    text = message if isinstance(message, str) and message else str(exc)
    text = text.split(" Original exception:", 1)[0].split("\nReceived Model Group", 1)[0]
    text = text.split(" Pass model as E.g.", 1)[0].split("\n Pass model as", 1)[0]
    text = _PREFIX.sub("", text).strip() or type(exc).__name__
    text = _json_error(text)
    text = " ".join(text.split())
    return text if len(text) <= 300 else text[:297] + "..."


def _json_error(text: str) -> str:
    """The message inside an error body passed on as it came ({"error": "..."} from Ollama, vLLM, ...)."""
    if not text.startswith("{"):
        return text
    try:
        body = json.loads(text)
    except ValueError:
        return text
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        error = error.get("message")
    return error if isinstance(error, str) and error else text


# -- the words ------------------------------------------------------------------------------------------


def describe(
    failure: Failure, config: ModelConfig, provider: str, retries: int, offered: list[str] | None = None
) -> str:
    """The user's message for a failure: what happened, then what to do. `offered`: the models the
    endpoint lists (for NOT_FOUND), when it could be asked."""
    model, where, detail, kind = config.model, endpoints.where(config, provider), failure.detail, failure.kind
    retried = f"; retried {retries} time{'s' if retries != 1 else ''}" if retries else ""
    if kind == errors.NOT_LISTENING:
        return _not_listening(failure, config, provider)
    if kind == errors.NO_PROVIDER:
        return no_provider_message(config)
    if kind == errors.MISSING_KEY:
        variable = endpoints.key_variable(provider, model)
        return (
            f"No API key is set for {model}, so nothing was sent: set {variable} in the environment "
            "the editor starts the server from, or interpreter.apiKey. A local model needs no key: "
            '"openai/<name>" with interpreter.apiBase, or "ollama_chat/<name>".'
        )
    if kind == errors.CLIENT:
        return (
            f"The request for {model} could not be sent to {where} ({detail}): check interpreter.model and "
            "interpreter.apiBase."
        )
    if kind == errors.AUTH:
        return _refused_credentials(config, provider, where, detail)
    if kind == errors.NOT_COMPATIBLE:
        return _not_compatible(failure, config, provider)
    if kind == errors.NOT_FOUND:
        return _unknown_model(config, provider, where, detail, offered)
    if kind == errors.RATE_LIMITED:
        asked = f", asking to wait {failure.retry_after:g} s" if failure.retry_after else ""
        return (
            f"{_capital(where)} is rate limiting requests for {model} (HTTP 429{asked}){retried}: wait a minute "
            "and ask again, or use another model."
        )
    if kind == errors.CONNECTION:
        return f"Cannot reach {where} ({detail}){retried}: check that the server is running and reachable."
    if kind == errors.MALFORMED:
        return (
            f"{_capital(where)} sent a malformed stream (a chunk that is not valid JSON): check that it is an "
            f"OpenAI-compatible server and that interpreter.model ({model}) is right."
        )
    if kind == errors.CONTEXT_WINDOW:
        return (
            f"The conversation no longer fits {model}'s context window ({detail}): start a new "
            "conversation (interpreter.reset), undo the last steps, or use a model with a larger window."
        )
    if kind == errors.BAD_REQUEST:
        return (
            f"{_capital(where)} rejected the request for {model} ({detail}): check interpreter.model and the settings."
        )
    if kind == errors.SERVER:
        status = f"HTTP {failure.status}" if failure.status else "an error"
        server = f"The model server at {config.api_base}" if config.api_base else _capital(where)
        return f"{server} failed with {status} ({detail}){retried}: try again later or use another model."
    return f"The model request to {model} failed ({detail}){retried}."


def refine(failure: Failure, config: ModelConfig, offered: list[str] | None) -> Failure:
    """A 404 that names no model, from an apiBase that cannot list any either, is not an unknown model:
    whatever answers there does not serve this API (NOT_COMPATIBLE)."""
    if (
        failure.kind == errors.NOT_FOUND
        and offered is None
        and config.api_base
        and "model" not in failure.detail.lower()
    ):
        return Failure(errors.NOT_COMPATIBLE, False, failure.detail, failure.status)
    return failure


_API_NAMES = {"anthropic": "an Anthropic Messages API", "ollama": "an Ollama server", "ollama_chat": "an Ollama server"}


def _not_compatible(failure: Failure, config: ModelConfig, provider: str) -> str:
    base = endpoints.endpoint(config, provider) or endpoints.where(config, provider)
    api = _API_NAMES.get(provider, "an OpenAI-compatible endpoint")
    status = f"HTTP {failure.status}" if failure.status else "an error"
    hint = (
        "an OpenAI-compatible server's usually ends in /v1, e.g. http://127.0.0.1:1234/v1 (LM Studio), "
        "http://127.0.0.1:8080/v1 (llama.cpp), http://127.0.0.1:11434/v1 (Ollama)"
        if api.startswith("an OpenAI")
        else "the address of the server itself"
    )
    return (
        f"{base} is not {api}: it answered {status} ({failure.detail}) to the chat request, so "
        f"{config.model} was never asked (not retried). Check interpreter.apiBase: {hint}."
    )


def no_provider_message(config: ModelConfig) -> str:
    model = config.model
    served = f"set to {config.api_base}" if config.api_base else "set to your server, e.g. http://127.0.0.1:1234/v1"
    prefix = endpoints.provider_of(model)
    unknown = f' ("{prefix}" is not a provider litellm knows)' if prefix else ""
    return (
        f'interpreter.model "{model}" does not say which provider serves it{unknown}, so nothing was sent. Write it as '
        f'"openai/{model}" with interpreter.apiBase {served} (LM Studio, llama.cpp, vLLM; no key needed), '
        f'"ollama_chat/{model}" for Ollama, or a cloud model such as "anthropic/claude-sonnet-4-5" or '
        '"gpt-4o-mini".'
    )


def _not_listening(failure: Failure, config: ModelConfig, provider: str) -> str:
    base = endpoints.endpoint(config, provider)
    if base is not None:
        host, port = endpoints.host_port(base)
        shown = f"{host}:{port}" if port is not None else host
        via = f" ({base})"
    else:
        shown = failure.host or endpoints.where(config, provider)
        host, _, port_text = shown.rpartition(":")
        port = int(port_text) if port_text.isdigit() else None
        via = ""
    advice = endpoints.start_advice(config, provider, host, port)
    return f"Nothing is listening on {shown}{via}, so {config.model} got no answer: {advice}."


def _refused_credentials(config: ModelConfig, provider: str, where: str, detail: str) -> str:
    source = endpoints.key_source(config, provider)
    if source is None and config.api_base:
        return (
            f"{config.api_base} requires an API key for {config.model}, and none is set ({detail}): set "
            "interpreter.apiKey to the key the server expects (for llama-server or vLLM, the --api-key it was "
            "started with)."
        )
    if source is None:
        variable = endpoints.key_variable(provider, config.model)
        return (
            f"{_capital(where)} refused the request for {config.model} ({detail}): set {variable} or "
            "interpreter.apiKey."
        )
    if config.api_base:
        return (
            f"{config.api_base} refused the API key from {source} for {config.model} ({detail}): set "
            "interpreter.apiKey to the key that server expects."
        )
    return (
        f"The model provider rejected the API key from {source} for {config.model} ({detail}): check "
        f"{endpoints.key_variable(provider, config.model)} or interpreter.apiKey."
    )


def _unknown_model(config: ModelConfig, provider: str, where: str, detail: str, offered: list[str] | None) -> str:
    name = config.model.split("/", 1)[1] if provider and "/" in config.model else config.model
    text = f'{_capital(where)} has no model "{name}" ({detail}).'
    ollama = provider in endpoints.OLLAMA_PROVIDERS
    if offered:
        shown = ", ".join(offered[: endpoints.LISTING_SHOWN])
        more = len(offered) - endpoints.LISTING_SHOWN
        if more > 0:
            shown += f" (and {more} more)"
        example = next((m for m in offered if "embed" not in m.lower()), offered[0])
        prefix = provider or "openai"
        text += f' It offers: {shown}. Set interpreter.model to one of them, e.g. "{prefix}/{example}"'
        return text + (f", or `ollama pull {name}`." if ollama else ".")
    if offered is not None:
        load = f"`ollama pull {name}`" if ollama else "load a model in the server"
        return text + f" It offers no models: {load}, then set interpreter.model to it."
    hint = f" (or `ollama pull {name}`)" if ollama else ""
    base_hint = ""
    if config.api_base and not ollama and not config.api_base.rstrip("/").endswith("/v1"):
        base_hint = "; OpenAI-compatible servers usually want an interpreter.apiBase that ends in /v1"
    return text + f" Check interpreter.model{hint}{base_hint}."


def _capital(text: str) -> str:
    """ "the openai API" opens a sentence as "The openai API"; a URL stays as it is."""
    return "The" + text[3:] if text.startswith("the ") else text


def redact(message: str, config: ModelConfig) -> str:
    """Remove the configured key and every secret of the environment from `message` (what a secret is:
    safety/secrets.py)."""
    from interpreter_lsp.safety.secrets import Redactor

    return Redactor(os.environ, extra=(config.api_key,)).redact(message)
