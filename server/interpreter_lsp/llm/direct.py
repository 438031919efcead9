"""A model stream over httpx, for the routes the server speaks itself (llm/routes.py): open it, read its
`Piece`s, close it. Imported in the warm-up thread (httpx and httpx-sse: ~60 ms, ~20 MB), never litellm.

An HTTP error is raised as `ResponseError` (an httpx.HTTPStatusError with the status and the provider's
own message), a stream that is not what the wire format promises as `NotAStream`; llm/failures.py
classifies both like litellm's errors, so retries and messages are the same on both paths.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import weakref
from collections.abc import AsyncIterator
from typing import Any

import httpx
from httpx_sse import EventSource, SSEError

from interpreter_lsp.imports import HTTPX_AT_FIRST_REQUEST, preload
from interpreter_lsp.llm import wire
from interpreter_lsp.llm.routes import ANTHROPIC, OLLAMA, Route

ERROR_BODY_MAX = 64 * 1024  # bytes of an error answer read for its message
# After a stream's end ([DONE]), how long its body's own end is waited for: read to its end, the connection goes
# back to the pool for the next call (closed early, it is closed: each call paid a new connection, ~1-2 ms on
# this machine against a local server, a TLS handshake against a provider). Past this, it is closed as before.
DRAIN_SECONDS = 0.1

# One client per event loop (connections are kept alive between turns; a client belongs to its loop).
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = weakref.WeakKeyDictionary()
_ssl_context: Any = None  # made once (loading the CA bundle takes tens of ms), in the warm-up thread


def prepare() -> None:
    """What can be done ahead of the first request, off the loop: the TLS context, and what httpx imports at
    its first request (httpcore and its asyncio backend, anyio's: ~60-90 ms here, else on the loop, on the
    first chat's path)."""
    global _ssl_context
    if _ssl_context is None:
        import ssl

        import certifi  # httpx's own dependency: the CA bundle httpx verifies against by default

        _ssl_context = ssl.create_default_context(cafile=certifi.where())
    preload(HTTPX_AT_FIRST_REQUEST)


class ResponseError(httpx.HTTPStatusError):
    """The server answered with an HTTP error; `message` is its own words (from a JSON error body)."""

    def __init__(self, status: int, message: str, response: httpx.Response) -> None:
        super().__init__(message, request=response.request, response=response)
        self.status_code = status
        self.message = message
        self.url = str(response.request.url)


class NotAStream(Exception):
    """The answer is not the stream the wire format promises (another service, or no streaming)."""

    malformed = True  # llm/failures.py: MALFORMED, never retried

    def __init__(self, message: str, url: str) -> None:
        super().__init__(message)
        self.message = message
        self.url = url


def client() -> httpx.AsyncClient:
    loop = asyncio.get_running_loop()
    found = _clients.get(loop)
    if found is None or found.is_closed:
        # Proxies from the environment are honoured, as litellm (httpx underneath) honours them.
        prepare()
        found = _clients[loop] = httpx.AsyncClient(verify=_ssl_context, limits=httpx.Limits(keepalive_expiry=30.0))
    return found


class Stream:
    """One streamed reply. `await open()`: the request is sent and its status read; iterate for pieces;
    `aclose()` closes the response (at once, also when the caller was cancelled)."""

    def __init__(self, route: Route, body: dict[str, Any], timeout: httpx.Timeout) -> None:
        self.route = route
        self._body = body
        self._timeout = timeout
        self._response: httpx.Response | None = None
        self._events: AsyncIterator[Any] | None = None  # the server-sent events, read on after [DONE] (aclose)
        self._ended = False  # the reply is complete ([DONE] came)

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        if finishing := {task for task in _finishing if task.get_loop() is loop}:
            # A reply's body still being read to its end (microseconds): its connection then serves this call.
            await asyncio.wait(finishing, timeout=DRAIN_SECONDS)
        http = client()
        request = http.build_request(
            "POST",
            self.route.url,
            content=wire.encode(self._body),
            headers={**wire.headers(self.route), "Content-Type": "application/json"},
            timeout=self._timeout,
        )
        response = await http.send(request, stream=True)
        self._response = response
        if response.status_code >= 400:
            raise ResponseError(response.status_code, await _error_message(response), response)

    async def pieces(self) -> AsyncIterator[wire.Piece]:
        response = self._response
        assert response is not None, "open() first"
        if self.route.wire == OLLAMA:
            if "json" not in response.headers.get("content-type", "json"):
                raise _not_a_stream(response, "Ollama's JSON lines")
            lines = wire.OllamaLines()
            async for line in response.aiter_lines():
                if line.strip():
                    for piece in lines.feed(line):
                        yield piece
            return
        anthropic = wire.AnthropicEvents() if self.route.wire == ANTHROPIC else None
        self._events = events = EventSource(response).aiter_sse()
        try:
            async for event in events:
                data = event.data
                if not data.strip():
                    continue
                if anthropic is None and data.strip() == "[DONE]":
                    self._ended = True
                    return
                for piece in anthropic.feed(data) if anthropic is not None else wire.openai_event(data):
                    yield piece
        except SSEError:  # httpx-sse: the content type is not text/event-stream
            raise _not_a_stream(response, "server-sent events") from None

    async def aclose(self) -> None:
        response, self._response = self._response, None
        if response is None:
            return
        if self._ended and self._events is not None:
            # The reply is complete: its body's end is read in the background (the caller has its reply now),
            # bounded; a call that comes meanwhile waits for it (open) and then reuses its connection.
            task = asyncio.ensure_future(_read_to_end_and_close(response, self._events))
            _finishing.add(task)
            task.add_done_callback(_finishing.discard)
            return
        with contextlib.suppress(Exception):
            await response.aclose()


_finishing: set[asyncio.Future[None]] = set()  # bodies being read to their end (held: a task needs a reference)


async def _read_to_end_and_close(response: httpx.Response, events: AsyncIterator[Any]) -> None:
    async def read_on() -> None:
        async for _event in events:
            pass

    with contextlib.suppress(Exception):  # not read to its end in time: the connection is closed, no more
        await asyncio.wait_for(read_on(), DRAIN_SECONDS)
    with contextlib.suppress(Exception):
        await response.aclose()


def _not_a_stream(response: httpx.Response, expected: str) -> NotAStream:
    kind = response.headers.get("content-type", "no content type")
    return NotAStream(f"the answer is {kind}, not {expected}", str(response.request.url))


async def _error_message(response: httpx.Response) -> str:
    """The provider's message from an error answer: {"error": {"message"}} (OpenAI, Anthropic),
    {"error": "..."} (Ollama, vLLM), or the start of the text; else the reason phrase."""
    body = bytearray()
    with contextlib.suppress(Exception):
        async for part in response.aiter_bytes():
            body += part
            if len(body) >= ERROR_BODY_MAX:
                break
    await response.aclose()
    text = bytes(body[:ERROR_BODY_MAX]).decode("utf-8", "replace").strip()
    with contextlib.suppress(ValueError):
        data = json.loads(text)
        error = data.get("error") if isinstance(data, dict) else None
        if isinstance(error, dict):
            error = error.get("message") or error.get("type")
        if isinstance(error, str) and error:
            return error
        if isinstance(data, dict) and isinstance(data.get("message"), str):
            return str(data["message"])
    if text and "<html" not in text[:200].lower():
        return " ".join(text.split())[:300]
    return response.reason_phrase or f"HTTP {response.status_code}"
