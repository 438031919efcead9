"""A scripted OpenAI-compatible HTTP server on 127.0.0.1, for tests.

Only the model's words are scripted: the client (litellm, the server under test) talks real HTTP to it.
It runs its own asyncio loop in its own thread, so it serves sync tests, async tests on any loop, and
separate processes alike. Each queued behaviour answers exactly one chat request, in order; a request that
finds the queue empty gets a loud 500 so the test fails visibly.

    with ScriptedModel() as model:          # or model.start() / model.stop()
        model.reply("Hello ```python\\nprint(1)\\n```")
        litellm.completion(model="openai/scripted", api_base=model.base_url, api_key="x", ...)

Native tool calls stream in the OpenAI format (`model.tool_calls([run_code("print(1)")])`): each call's
first fragment carries its index, id, type and function name, its arguments follow in pieces, and the
reply ends with finish_reason "tool_calls". Every request body is kept in `model.requests`, the `tools`
offered and the `tool` messages answering calls included (`offered_tools`, `tool_messages`).

The same script answers in the two other wire formats the server speaks, by the path asked: Anthropic
Messages (POST .../v1/messages: server-sent events with event names, text and tool_use content blocks,
the input's JSON in pieces, usage in message_start and message_delta; errors as Anthropic's error
objects) and Ollama's own API (POST /api/chat: JSON lines, tool calls whole with their arguments as an
object; POST /api/show: `model.ollama_show`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

MODEL_ID = "scripted"
NO_REPLY_QUEUED = "scripted model: no reply queued"
# OpenAI's own wording, which litellm maps to ContextWindowExceededError.
CONTEXT_LENGTH_MESSAGE = (
    "This model's maximum context length is {limit} tokens. However, your messages resulted in {requested} "
    "tokens. Please reduce the length of the messages."
)


@dataclass
class Scripted:
    """One queued behaviour, and what happened to it (threading events, so any thread can wait on them)."""

    kind: str  # "reply" | "fail" | "malformed" | "stall" | "hold" | "drop"
    text: str = ""
    calls: list[dict[str, Any]] = field(default_factory=list)  # native tool calls after the text: id, name, arguments
    chunk_size: int = 7
    delay: float = 0.0
    usage: tuple[int, int] | None = None
    open_after_done: bool = False  # the body does not end after [DONE]: the connection stays open, silent
    status: int = 200
    body: str = ""
    retry_after: float | None = None
    code: str | None = None  # the error body's "code" (default: the status)
    received: threading.Event = field(default_factory=threading.Event)
    disconnected: threading.Event = field(default_factory=threading.Event)
    finished: threading.Event = field(default_factory=threading.Event)
    _released: threading.Event = field(default_factory=threading.Event)
    _release_async: asyncio.Event | None = None
    _loop: asyncio.AbstractEventLoop | None = None

    def release(self) -> None:
        """Let a held stream go on: it then streams its text as a normal reply."""
        self._released.set()
        loop, event = self._loop, self._release_async
        if loop is not None and event is not None:
            loop.call_soon_threadsafe(event.set)

    def is_set(self) -> bool:  # asyncio.Event-like, for `hold()` users
        return self._released.is_set()

    def set(self) -> None:
        self.release()

    async def wait_disconnected(self, timeout: float = 60.0) -> bool:
        """From any event loop: wait (bounded) until the client closed this response's connection."""
        return await asyncio.to_thread(self.disconnected.wait, timeout)


class ScriptedModel:
    def __init__(
        self, *, models: Sequence[str] = (MODEL_ID,), api_key: str | None = None, strict_models: bool = False
    ) -> None:
        self.models = list(models)  # listed at GET /v1/models and GET /api/tags
        self.api_key = api_key  # when set, chat requests must carry "Authorization: Bearer <api_key>"
        self.strict_models = strict_models  # when set, a chat request for a model not in `models` gets 404
        self.requests: list[dict[str, Any]] = []  # every chat request's body, refused ones included
        self.request_headers: list[dict[str, str]] = []  # their headers (lower-case names), in the same order
        self.listings = 0  # GET /v1/models and GET /api/tags asked
        self.lists_models = True  # when false, those GETs get 404, as on a server that cannot list
        self.base_url = ""
        self._script: deque[Scripted] = deque()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._stopping: asyncio.Event | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.connections_accepted = 0  # TCP connections opened by clients: kept-alive ones are counted once
        # When set: called (in the server's thread) with each chat request's body before the queue is
        # looked at; a str is streamed as the reply, an int is answered as that HTTP error, None takes the
        # next queued behaviour. For requests a test cannot order, such as a conversation's summaries.
        self.responder: Callable[[dict[str, Any]], str | int | None] | None = None
        # What POST /api/show answers (Ollama's model description: context length, capabilities).
        self.shown = 0  # POST /api/show requests answered
        self.shown_once = threading.Event()  # set at the first (tests wait on it from their own loop)
        self.ollama_show: dict[str, Any] = {
            "model_info": {"general.architecture": "qwen2", "qwen2.context_length": 32768},
            "capabilities": ["completion", "tools"],
        }

    # -- life cycle ------------------------------------------------------------------------------------

    def start(self) -> str:
        """Start serving on a free port of 127.0.0.1; returns the base url "http://127.0.0.1:PORT/v1"."""
        if self._thread is not None:
            return self.base_url
        ready = threading.Event()
        failure: list[BaseException] = []
        self._thread = threading.Thread(target=self._serve, args=(ready, failure), name="scripted-model", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("scripted model did not start within 10 s")
        if failure:
            raise RuntimeError(f"scripted model failed to start: {failure[0]}")
        return self.base_url

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        if self._stopping is not None:
            loop.call_soon_threadsafe(self._stopping.set)
        thread.join(10)
        self._thread = None
        self._loop = None

    def __enter__(self) -> ScriptedModel:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return int(self.base_url.rsplit(":", 1)[1].split("/", 1)[0])

    @property
    def root_url(self) -> str:
        """The url without /v1, "http://127.0.0.1:PORT": the api_base an Ollama client is given."""
        return self.base_url.removesuffix("/v1")

    # -- the script ------------------------------------------------------------------------------------

    def reply(
        self,
        text: str,
        *,
        chunk_size: int = 7,
        delay: float = 0.0,
        usage: tuple[int, int] | None = None,
        open_after_done: bool = False,
    ) -> Scripted:
        """Queue a reply: streamed as SSE chunks of `chunk_size` characters, `delay` seconds apart
        (or one JSON completion for a stream=False request). `usage` = (prompt, completion) tokens,
        sent as a final usage chunk when the client asked for it. `open_after_done`: the body never ends
        after [DONE] (a server that holds the connection until the client closes it)."""
        item = Scripted("reply", text=text, chunk_size=max(1, chunk_size), delay=delay, usage=usage)
        item.open_after_done = open_after_done
        return self._queue(item)

    def tool_calls(
        self,
        calls: Sequence[dict[str, Any]],
        text: str = "",
        *,
        chunk_size: int = 7,
        delay: float = 0.0,
        usage: tuple[int, int] | None = None,
    ) -> Scripted:
        """Queue a reply of `text` (maybe empty) then native tool calls (each {"id", "name", "arguments"},
        arguments a dict or a JSON string; `run_code` builds one), their arguments streamed in pieces of
        `chunk_size` characters; finish_reason "tool_calls"."""
        wire = [
            {**call, "arguments": a if isinstance(a := call["arguments"], str) else json.dumps(a)} for call in calls
        ]
        item = Scripted("reply", text=text, calls=wire, chunk_size=max(1, chunk_size), delay=delay, usage=usage)
        return self._queue(item)

    def fail(
        self,
        status: int,
        body: str = "scripted failure",
        *,
        retry_after: float | None = None,
        times: int = 1,
        code: str | None = None,
    ) -> list[Scripted]:
        """Queue `times` HTTP errors with an OpenAI-shaped error body whose message is `body`
        (Ollama-shaped, {"error": body}, on /api/chat)."""
        return [
            self._queue(Scripted("fail", status=status, body=body, retry_after=retry_after, code=code))
            for _ in range(times)
        ]

    def context_exceeded(self, limit: int = 8192, requested: int = 9000) -> Scripted:
        """Queue the 400 that OpenAI (and vLLM) answer when the prompt is longer than the context window."""
        message = CONTEXT_LENGTH_MESSAGE.format(limit=limit, requested=requested)
        return self.fail(400, message, code="context_length_exceeded")[0]

    def drop(self) -> Scripted:
        """Queue a request whose connection is closed without any answer (a crashed or restarting server)."""
        return self._queue(Scripted("drop"))

    def malformed(self, before_text: str = "Here") -> Scripted:
        """Queue a stream that sends `before_text` then a chunk that is not JSON, then ends."""
        return self._queue(Scripted("malformed", text=before_text))

    def stall(self, after_text: str = "") -> Scripted:
        """Queue a stream that sends `after_text` and then goes silent until the client leaves or stop()."""
        return self._queue(Scripted("stall", text=after_text))

    def hold(self, text: str = "released") -> Scripted:
        """Queue a stream that sends nothing (after its headers) until `.release()`, then streams `text`.
        `.received` is set when the request arrives, `.disconnected` when the client closes the connection."""
        return self._queue(Scripted("hold", text=text))

    def wait_requests(self, n: int, timeout: float = 60) -> list[dict[str, Any]]:
        """Block until at least n chat requests arrived; raises TimeoutError after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.requests) < n:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"scripted model: {len(self.requests)} of {n} requests in {timeout} s")
                self._cond.wait(remaining)
            return list(self.requests)

    @property
    def pending(self) -> int:
        """How many queued behaviours no request has consumed yet."""
        with self._cond:
            return len(self._script)

    def _queue(self, item: Scripted) -> Scripted:
        with self._cond:
            self._script.append(item)
        return item

    def _record(self, body: dict[str, Any], headers: dict[str, str]) -> None:
        with self._cond:
            self.requests.append(body)
            self.request_headers.append(headers)
            self._cond.notify_all()

    def _next(self) -> Scripted | None:
        with self._cond:
            return self._script.popleft() if self._script else None

    def _refusal(
        self, body: dict[str, Any], headers: dict[str, str], ollama: bool, anthropic: bool = False
    ) -> tuple[int, dict[str, Any]] | None:
        """The 401 or 404 a real server answers before any generation, or None."""
        if self.api_key is not None and anthropic:
            if headers.get("x-api-key") != self.api_key:
                return 401, _error_body("invalid x-api-key", 401, anthropic=True)
        elif self.api_key is not None and not ollama:
            given = headers.get("authorization", "")
            if not given.startswith("Bearer "):
                message = "You didn't provide an API key. Provide your API key in an Authorization header."
                return 401, _error_body(message, 401, "invalid_api_key")
            if given.removeprefix("Bearer ") != self.api_key:
                return 401, _error_body("Incorrect API key provided.", 401, "invalid_api_key")
        name = body.get("model")
        if self.strict_models and name not in self.models:
            if anthropic:
                return 404, _error_body(f"model: {name}", 404, anthropic=True)
            if ollama:
                return 404, {"error": f'model "{name}" not found, try pulling it first'}
            message = f"The model `{name}` does not exist or you do not have access to it."
            return 404, _error_body(message, 404, "model_not_found")
        return None

    # -- the server ------------------------------------------------------------------------------------

    def _serve(self, ready: threading.Event, failure: list[BaseException]) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main(ready))
        except BaseException as exc:  # surface start-up failures to start()
            failure.append(exc)
            ready.set()
        finally:
            loop.close()

    async def _main(self, ready: threading.Event) -> None:
        self._stopping = asyncio.Event()
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        ready.set()
        await self._stopping.wait()
        self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        self.connections_accepted += 1
        try:
            while await self._handle_one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the client left, or stop() ends every connection
        finally:
            self._connections.discard(task)
            writer.close()

    async def _handle_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Serve one request; returns whether the connection may carry another one."""
        head = await reader.readuntil(b"\r\n\r\n")
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        method, path, _ = request_line.split(" ", 2)
        headers = {}
        for line in header_lines:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        raw = await reader.readexactly(length) if length else b""
        path = path.split("?", 1)[0].rstrip("/")

        if method == "GET" and path.endswith(("/models", "/api/tags")):
            with self._cond:
                self.listings += 1
        if method == "GET" and path.endswith("/models") and self.lists_models:
            listed = [{"id": name, "object": "model", "owned_by": "scripted"} for name in self.models]
            await _send_json(writer, 200, {"object": "list", "data": listed})
            return True
        if method == "GET" and path == "/api/tags" and self.lists_models:
            await _send_json(writer, 200, {"models": [{"name": name, "model": name} for name in self.models]})
            return True
        if method == "POST" and path == "/api/show":
            self.shown += 1
            self.shown_once.set()
            await _send_json(writer, 200, self.ollama_show)
            return True
        ollama = path == "/api/chat"
        anthropic = path.endswith("/v1/messages")
        if method != "POST" or not (ollama or anthropic or path.endswith("/chat/completions")):
            await _send_json(writer, 404, _error_body(f"scripted model: no route {method} {path}", 404))
            return True
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            await _send_json(writer, 400, _error_body("scripted model: request body is not JSON", 400))
            return True

        self._record(body, headers)
        refusal = self._refusal(body, headers, ollama, anthropic)
        if refusal is not None:
            await _send_json(writer, *refusal)
            return True
        answer = self.responder(body) if self.responder is not None else None
        if isinstance(answer, str):
            item: Scripted | None = Scripted("reply", text=answer, chunk_size=max(len(answer) // 8, 7))
        elif isinstance(answer, int):
            item = Scripted("fail", status=answer, body="scripted failure (responder)")
        else:
            item = self._next()
        if item is None:
            error = {"error": NO_REPLY_QUEUED} if ollama else _error_body(NO_REPLY_QUEUED, 500, anthropic=anthropic)
            await _send_json(writer, 500, error)
            return True
        item.received.set()
        try:
            if ollama:
                await _perform_ollama(item, body, reader, writer)
            elif anthropic:
                await _perform_anthropic(item, body, reader, writer)
            else:
                await self._perform(item, body, reader, writer)
        except ConnectionError:
            # The client left before (or while) the status line went out: on a busy machine a cancel can
            # land before the server has written a byte of its answer.
            item.disconnected.set()
            raise
        finally:
            item.finished.set()
        return item.kind in ("reply", "fail") and not item.disconnected.is_set()

    async def _perform(
        self, item: Scripted, body: dict[str, Any], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        if item.kind == "fail":
            extra = {} if item.retry_after is None else {"Retry-After": f"{item.retry_after:g}"}
            await _send_json(writer, item.status, _error_body(item.body, item.status, item.code), extra)
            return
        if item.kind == "drop":
            writer.transport.abort()  # no status line at all: the client sees the connection end
            item.disconnected.set()
            return
        stream = bool(body.get("stream"))
        if item.kind == "reply" and not stream:
            await _send_json(writer, 200, _completion(item.text, item.usage, item.calls))
            return

        created = int(time.time())
        await _start_stream(writer)
        await _send_chunk(writer, _chunk(created, {"role": "assistant", "content": ""}))
        if item.kind == "hold":
            item._loop = asyncio.get_running_loop()
            item._release_async = asyncio.Event()
            if item._released.is_set():
                item._release_async.set()
            if not await _until_released_or_gone(item._release_async, reader):
                item.disconnected.set()
                return
        if item.kind == "malformed":
            await _send_chunk(writer, _chunk(created, {"content": item.text}))
            await _send_event(writer, '{"id": "chatcmpl-scripted", "choices": [{"delta": {"content": "x"')
            await _end_stream(writer)
            return
        if item.kind == "stall":
            if item.text:
                await _send_chunk(writer, _chunk(created, {"content": item.text}))
            await reader.read()  # EOF: the client left (or stop() cancels us)
            item.disconnected.set()
            return

        try:
            for start in range(0, len(item.text), item.chunk_size):
                if item.delay:
                    await asyncio.sleep(item.delay)
                await _send_chunk(writer, _chunk(created, {"content": item.text[start : start + item.chunk_size]}))
            for delta in _tool_call_deltas(item.calls, item.chunk_size):
                if item.delay:
                    await asyncio.sleep(item.delay)
                await _send_chunk(writer, _chunk(created, delta))
            finish = "tool_calls" if item.calls else "stop"
            await _send_chunk(writer, _chunk(created, {}, finish_reason=finish))
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            if include_usage and item.usage is not None:
                await _send_chunk(writer, _usage_chunk(created, item.usage))
            await _send_event(writer, "[DONE]")
            if item.open_after_done:
                await reader.read()  # EOF: the client closed the connection
                item.disconnected.set()
                return
            await _end_stream(writer)
        except ConnectionError:
            item.disconnected.set()
            raise


async def _perform_ollama(
    item: Scripted, body: dict[str, Any], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """Ollama's own chat API: one JSON object per line, tool calls whole (arguments as an object), the
    last line with "done": true and the token counts."""
    if item.kind == "fail":
        await _send_json(writer, item.status, {"error": item.body})
        return
    if item.kind == "drop":
        writer.transport.abort()
        item.disconnected.set()
        return
    name = str(body.get("model", MODEL_ID))
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n")

    def line(content: str, **extra: Any) -> dict[str, Any]:
        return {"model": name, "message": {"role": "assistant", "content": content, **extra}, "done": False}

    try:
        if not await _held_or_stalled(item, reader, lambda text: _send_line(writer, line(text))):
            return
        if item.kind == "malformed":
            await _send_line(writer, line(item.text))
            data = b'{"model": "scripted", "message": {"content": "x"\n'
            writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            await _end_stream(writer)
            return
        for piece in [item.text[i : i + item.chunk_size] for i in range(0, len(item.text), item.chunk_size)]:
            if item.delay:
                await asyncio.sleep(item.delay)
            await _send_line(writer, line(piece))
        if item.calls:
            calls = [{"function": {"name": c["name"], "arguments": json.loads(c["arguments"])}} for c in item.calls]
            await _send_line(writer, line("", tool_calls=calls))
        prompt, completion = item.usage or (0, 0)
        last = {
            "model": name,
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": prompt,
            "eval_count": completion,
        }
        await _send_line(writer, last)
        await _end_stream(writer)
    except ConnectionError:
        item.disconnected.set()
        raise


async def _held_or_stalled(item: Scripted, reader: asyncio.StreamReader, send_text: Callable[[str], Any]) -> bool:
    """For "hold" and "stall" items: wait as they say. False: the client left (nothing more to send)."""
    if item.kind == "hold":
        item._loop = asyncio.get_running_loop()
        item._release_async = asyncio.Event()
        if item._released.is_set():
            item._release_async.set()
        if not await _until_released_or_gone(item._release_async, reader):
            item.disconnected.set()
            return False
    if item.kind == "stall":
        if item.text:
            await send_text(item.text)
        await reader.read()  # EOF: the client left (or stop() cancels us)
        item.disconnected.set()
        return False
    return True


async def _perform_anthropic(
    item: Scripted, body: dict[str, Any], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """Anthropic's Messages API, streamed: named events, a text block, then a tool_use block per call
    with its input's JSON in pieces; input tokens in message_start, output tokens in message_delta."""
    if item.kind == "fail":
        extra = {} if item.retry_after is None else {"retry-after": f"{item.retry_after:g}"}
        await _send_json(writer, item.status, _error_body(item.body, item.status, anthropic=True), extra)
        return
    if item.kind == "drop":
        writer.transport.abort()
        item.disconnected.set()
        return
    prompt, completion = item.usage or (0, 0)

    async def event(name: str, payload: dict[str, Any]) -> None:
        data = f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode()
        writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        await writer.drain()

    async def text_delta(text: str) -> None:
        await event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                            "delta": {"type": "text_delta", "text": text}})  # fmt: skip

    try:
        await _start_stream(writer)
        message = {"id": "msg_scripted", "type": "message", "role": "assistant", "content": [],
                   "model": body.get("model"), "usage": {"input_tokens": prompt, "output_tokens": 1}}  # fmt: skip
        await event("message_start", {"type": "message_start", "message": message})
        await event("content_block_start", {"type": "content_block_start", "index": 0,
                                            "content_block": {"type": "text", "text": ""}})  # fmt: skip
        await event("ping", {"type": "ping"})
        if not await _held_or_stalled(item, reader, text_delta):
            return
        if item.kind == "malformed":
            await text_delta(item.text)
            data = b'event: content_block_delta\ndata: {"type": "content_block_delta", "delta": \n\n'
            writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            await _end_stream(writer)
            return
        for start in range(0, len(item.text), item.chunk_size):
            if item.delay:
                await asyncio.sleep(item.delay)
            await text_delta(item.text[start : start + item.chunk_size])
        await event("content_block_stop", {"type": "content_block_stop", "index": 0})
        for index, call in enumerate(item.calls, start=1):
            block = {"type": "tool_use", "id": call["id"], "name": call["name"], "input": {}}
            await event("content_block_start", {"type": "content_block_start", "index": index, "content_block": block})
            arguments = call["arguments"]
            for start in range(0, len(arguments), item.chunk_size):
                piece = {"type": "input_json_delta", "partial_json": arguments[start : start + item.chunk_size]}
                await event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": piece})
            await event("content_block_stop", {"type": "content_block_stop", "index": index})
        stop = "tool_use" if item.calls else "end_turn"
        await event("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop},
                                      "usage": {"output_tokens": completion}})  # fmt: skip
        await event("message_stop", {"type": "message_stop"})
        await _end_stream(writer)
    except ConnectionError:
        item.disconnected.set()
        raise


async def _send_line(writer: asyncio.StreamWriter, payload: dict[str, Any]) -> None:
    data = (json.dumps(payload) + "\n").encode()
    writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
    await writer.drain()


async def _until_released_or_gone(released: asyncio.Event, reader: asyncio.StreamReader) -> bool:
    """Wait for release (True) or for the client to close the connection (False)."""
    release_wait = asyncio.ensure_future(released.wait())
    eof_wait = asyncio.ensure_future(reader.read())
    try:
        await asyncio.wait({release_wait, eof_wait}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        release_wait.cancel()
        eof_wait.cancel()
    return released.is_set()


def _error_body(message: str, status: int, code: str | None = None, *, anthropic: bool = False) -> dict[str, Any]:
    if anthropic:
        kind = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
                429: "rate_limit_error", 529: "overloaded_error"}.get(status, "api_error")  # fmt: skip
        return {"type": "error", "error": {"type": kind, "message": message}}
    kind = {
        400: "invalid_request_error",
        401: "authentication_error",
        404: "not_found_error",
        429: "rate_limit_error",
    }.get(status, "server_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": code or str(status)}}


def _chunk(created: int, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": created,
        "model": MODEL_ID,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def _usage_chunk(created: int, usage: tuple[int, int]) -> dict[str, Any]:
    prompt, completion = usage
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": created,
        "model": MODEL_ID,
        "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }


_call_ids = itertools.count(1)


def run_code(code: str, language: str = "python", call_id: str | None = None) -> dict[str, Any]:
    """One native call of the server's `run_code` tool, for `ScriptedModel.tool_calls`."""
    return {
        "id": call_id or f"call_scripted_{next(_call_ids)}",
        "name": "run_code",
        "arguments": {"language": language, "code": code},
    }


def offered_tools(body: dict[str, Any]) -> list[str]:
    """The names of the tools a request offered."""
    return [tool["function"]["name"] for tool in body.get("tools") or []]


def tool_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The `tool` messages of a request (results of earlier calls)."""
    return [m for m in body["messages"] if m.get("role") == "tool"]


def _tool_call_deltas(calls: list[dict[str, Any]], size: int) -> list[dict[str, Any]]:
    """The OpenAI streaming fragments of `calls`: a head per call, then its arguments in pieces."""
    deltas: list[dict[str, Any]] = []
    for index, call in enumerate(calls):
        head = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["name"], "arguments": ""},
        }
        deltas.append({"tool_calls": [head]})
        arguments = call["arguments"]
        for start in range(0, len(arguments), size):
            deltas.append(
                {"tool_calls": [{"index": index, "function": {"arguments": arguments[start : start + size]}}]}
            )
    return deltas


def _completion(text: str, usage: tuple[int, int] | None, calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    prompt, completion = usage or (0, 0)
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in calls
        ]
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": MODEL_ID,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }


_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 429: "Too Many Requests"}


async def _send_json(
    writer: asyncio.StreamWriter, status: int, payload: dict[str, Any], extra: dict[str, str] | None = None
) -> None:
    data = json.dumps(payload).encode()
    lines = [
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}",
        "Content-Type: application/json",
        f"Content-Length: {len(data)}",
        *(f"{name}: {value}" for name, value in (extra or {}).items()),
    ]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + data)
    await writer.drain()


async def _start_stream(writer: asyncio.StreamWriter) -> None:
    writer.write(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )
    await writer.drain()


async def _send_event(writer: asyncio.StreamWriter, data: str) -> None:
    payload = f"data: {data}\n\n".encode()
    writer.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
    await writer.drain()


async def _send_chunk(writer: asyncio.StreamWriter, chunk: dict[str, Any]) -> None:
    await _send_event(writer, json.dumps(chunk))


async def _end_stream(writer: asyncio.StreamWriter) -> None:
    writer.write(b"0\r\n\r\n")
    await writer.drain()
