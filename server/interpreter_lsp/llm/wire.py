"""The three wire formats the server speaks itself: the request body each wants, and what each streamed
event means, as `Piece`s (text, tool-call fragments in the OpenAI shape, usage).

The conversation is kept in the OpenAI chat format (agent/conversation.py); Anthropic's and Ollama's
bodies are derived from it here: system messages, tool calls and their answers, image parts. Server-sent
events are read by httpx-sse (llm/direct.py); Ollama streams one JSON object per line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from interpreter_lsp.llm.routes import ANTHROPIC, OLLAMA, Route

ANTHROPIC_VERSION = "2023-06-01"
ANTHROPIC_MAX_TOKENS = 4096  # Anthropic requires max_tokens; litellm's default for it
_REASONING = re.compile(r"^(o\d|gpt-5)")  # OpenAI models that take max_completion_tokens and no temperature
_DATA_URL = re.compile(r"^data:(?P<type>[\w/+.-]+);base64,(?P<data>.*)$", re.DOTALL)


@dataclass
class Piece:
    text: str = ""
    fragments: list[dict[str, Any]] | None = None  # tool-call fragments, OpenAI's streaming shape
    thinking: bool = False  # the model is reasoning (a token, though not shown)
    usage: tuple[int | None, int | None] | None = None  # (prompt, completion) tokens when the server says


class StreamError(Exception):
    """An error the server reported inside a stream that had begun (HTTP 200)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status


# -- request bodies ---------------------------------------------------------------------------------------


def body(
    route: Route,
    messages: list[dict[str, Any]],
    *,
    temperature: float | None,
    max_tokens: int | None,
    tools: list[dict[str, Any]] | None,
) -> dict[str, Any]:
    if route.wire == ANTHROPIC:
        system, converted = anthropic_messages(messages)
        out: dict[str, Any] = {
            "model": route.model,
            "messages": converted,
            "max_tokens": max_tokens or ANTHROPIC_MAX_TOKENS,
            "stream": True,
        }
        if system:
            out["system"] = system
        if temperature is not None:
            out["temperature"] = temperature
        if tools:
            out["tools"] = [anthropic_tool(tool) for tool in tools]
        return out
    if route.wire == OLLAMA:
        out = {"model": route.model, "messages": ollama_messages(messages), "stream": True}
        options = {"temperature": temperature, "num_predict": max_tokens}
        options = {k: v for k, v in options.items() if v is not None}
        if options:
            out["options"] = options
        if tools:
            out["tools"] = tools
        return out
    out = {
        "model": route.model,
        # A null field is left out (an assistant message with tool calls has no content), as litellm does. A
        # message without one is sent as it is: the same object request after request (`encode`).
        "messages": [m if None not in m.values() else {k: v for k, v in m.items() if v is not None} for m in messages],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    reasoning = route.official and _REASONING.match(route.model) is not None
    if temperature is not None and not reasoning:
        out["temperature"] = temperature
    if max_tokens is not None:
        out["max_completion_tokens" if route.official else "max_tokens"] = max_tokens
    if tools:
        out["tools"] = tools
    return out


# id(message) -> (the message, its content, its size, its JSON). A conversation's requests share their messages:
# each is masked once (safety/secrets.py `redact_messages`) and not changed after, so its JSON is written once
# too (its content's identity and its size are checked all the same, as that memo checks them). Holding the
# message keeps its id from being reused while the entry lives.
_encoded: dict[int, tuple[Any, Any, int, bytes]] = {}
_ENCODED_SLACK = 64  # entries past the messages of the last request before those that left it are forgotten


def _json(value: Any) -> bytes:
    # As httpx writes a `json=` body: compact, UTF-8, no NaN.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def encode(body: dict[str, Any]) -> bytes:
    """`body` as JSON, each message of its `messages` written once across requests: only those new since the
    last request are encoded (measured on a 2-core machine, building a 150-message request took ~0.18 ms and a
    600-message one ~0.5 ms with httpx's own encoding of the whole body; ~0.13 and ~0.28 ms this way)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return _json(body)
    cache = _encoded
    parts: list[bytes] = []
    for message in messages:
        entry = cache.get(id(message))
        if (
            entry is None
            or entry[0] is not message
            or entry[1] is not message.get("content")
            or entry[2] != len(message)
        ):
            entry = cache[id(message)] = (message, message.get("content"), len(message), _json(message))
        parts.append(entry[3])
    if len(cache) > len(messages) + _ENCODED_SLACK:
        kept = {id(m) for m in messages}
        for key in [key for key in list(cache) if key not in kept]:  # list(): one step, whatever other threads do
            cache.pop(key, None)  # a request on another thread's loop may have forgotten it first
    fields = [
        _json(key) + b":" + (b"[" + b",".join(parts) + b"]" if key == "messages" else _json(value))
        for key, value in body.items()
    ]
    return b"{" + b",".join(fields) + b"}"


def headers(route: Route) -> dict[str, str]:
    if route.wire == ANTHROPIC:
        out = {"anthropic-version": ANTHROPIC_VERSION}
        if route.key:
            out["x-api-key"] = route.key
        return out
    return {"Authorization": f"Bearer {route.key}"} if route.key else {}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return "" if content is None else str(content)


def _arguments(text: str) -> dict[str, Any]:
    """A tool call's arguments as an object (Anthropic and Ollama want one); what is not a JSON object is
    passed as it was written, under "arguments"."""
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {"arguments": text}
    return value if isinstance(value, dict) else {"arguments": value}


def _image(part: dict[str, Any]) -> tuple[str, str] | str | None:
    """(media type, base64) of an image part with a data URL, or its URL, or None."""
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, dict) else image
    if not isinstance(url, str):
        return None
    match = _DATA_URL.match(url)
    return (match["type"], match["data"]) if match else url


def anthropic_messages(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """(system text, Messages-API messages) of an OpenAI-format conversation."""
    system: list[str] = []
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if out and out[-1]["role"] == role:  # the API wants user and assistant to alternate
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for message in messages:
        role, content = message.get("role"), message.get("content")
        if role == "system":
            system.append(_text(content))
            continue
        if role == "tool":
            result = {
                "type": "tool_result",
                "tool_use_id": str(message.get("tool_call_id", "")),
                "content": _text(content),
            }
            add("user", [result])
            continue
        blocks: list[dict[str, Any]] = []
        if isinstance(content, str):
            if content:
                blocks.append({"type": "text", "text": content})
        elif isinstance(content, list):
            for part in content:
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "text" and part.get("text"):
                    blocks.append({"type": "text", "text": str(part["text"])})
                elif part.get("type") == "image_url" and (image := _image(part)) is not None:
                    source = (
                        {"type": "base64", "media_type": image[0], "data": image[1]}
                        if isinstance(image, tuple)
                        else {"type": "url", "url": image}
                    )
                    blocks.append({"type": "image", "source": source})
        if role == "assistant":
            for call in message.get("tool_calls") or ():
                function = call.get("function") or {}
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": str(call.get("id", "")),
                        "name": str(function.get("name", "")),
                        "input": _arguments(str(function.get("arguments") or "")),
                    }
                )
            add("assistant", blocks)
        else:
            add("user", blocks)
    return "\n\n".join(s for s in system if s), out


def anthropic_tool(tool: dict[str, Any]) -> dict[str, Any]:
    function = tool.get("function") or {}
    out = {"name": function.get("name", ""), "input_schema": function.get("parameters") or {"type": "object"}}
    if function.get("description"):
        out["description"] = function["description"]
    return out


def ollama_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Ollama's /api/chat messages: text content, images as a list of base64, call arguments as objects."""
    out: list[dict[str, Any]] = []
    names: dict[str, str] = {}  # call id -> tool name, for the answers
    for message in messages:
        role, content = str(message.get("role")), message.get("content")
        item: dict[str, Any] = {"role": role, "content": _text(content)}
        if isinstance(content, list):
            pictures = [image[1] for p in content if isinstance(p, dict) and isinstance(image := _image(p), tuple)]
            if pictures:
                item["images"] = pictures
        if role == "assistant" and message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                function = call.get("function") or {}
                names[str(call.get("id", ""))] = str(function.get("name", ""))
                calls.append(
                    {
                        "function": {
                            "name": function.get("name", ""),
                            "arguments": _arguments(str(function.get("arguments") or "")),
                        }
                    }
                )
            item["tool_calls"] = calls
        if role == "tool" and (name := names.get(str(message.get("tool_call_id", "")))):
            item["tool_name"] = name
        out.append(item)
    return out


# -- streamed events --------------------------------------------------------------------------------------


def openai_event(data: str) -> Iterator[Piece]:
    """One `data:` of an OpenAI-compatible stream ("[DONE]" is handled by the caller)."""
    chunk = json.loads(data)
    if not isinstance(chunk, dict):
        raise json.JSONDecodeError("a chunk that is not a JSON object", data, 0)
    if chunk.get("error") and not chunk.get("choices"):
        error = chunk["error"]
        message = error.get("message") if isinstance(error, dict) else str(error)
        code = error.get("code") if isinstance(error, dict) else None
        raise StreamError(str(message), code if isinstance(code, int) else 500)
    usage = chunk.get("usage")
    counts = (usage.get("prompt_tokens"), usage.get("completion_tokens")) if isinstance(usage, dict) else None
    choices = chunk.get("choices") or []
    delta = (choices[0].get("delta") or {}) if choices and isinstance(choices[0], dict) else {}
    yield Piece(
        text=delta.get("content") or "",
        fragments=delta.get("tool_calls") or None,
        thinking=bool(delta.get("reasoning_content") or delta.get("reasoning")),
        usage=counts,
    )


_ANTHROPIC_STATUS = {"overloaded_error": 529, "rate_limit_error": 429, "api_error": 500, "invalid_request_error": 400}


class AnthropicEvents:
    """Anthropic's stream: message_start (input tokens), content blocks (text, tool_use with its input as
    JSON pieces, thinking), message_delta (output tokens), error."""

    def __init__(self) -> None:
        self.prompt: int | None = None
        self.completion: int | None = None

    def feed(self, data: str) -> Iterator[Piece]:
        event = json.loads(data)
        if not isinstance(event, dict):
            raise json.JSONDecodeError("an event that is not a JSON object", data, 0)
        kind = event.get("type")
        if kind == "message_start":
            usage = (event.get("message") or {}).get("usage") or {}
            counts = [usage.get(k) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")]
            self.prompt = sum(n for n in counts if isinstance(n, int)) if isinstance(counts[0], int) else None
            self.completion = usage.get("output_tokens")
            yield Piece(usage=(self.prompt, self.completion))
        elif kind == "content_block_start":
            block, index = event.get("content_block") or {}, event.get("index", 0)
            if block.get("type") == "tool_use":
                head = {"index": index, "id": block.get("id"), "type": "function"}
                yield Piece(fragments=[{**head, "function": {"name": block.get("name", ""), "arguments": ""}}])
            elif block.get("type") == "text" and block.get("text"):
                yield Piece(text=str(block["text"]))
        elif kind == "content_block_delta":
            delta, index = event.get("delta") or {}, event.get("index", 0)
            if delta.get("type") == "text_delta":
                yield Piece(text=str(delta.get("text") or ""))
            elif delta.get("type") == "input_json_delta" and delta.get("partial_json"):
                yield Piece(fragments=[{"index": index, "function": {"arguments": str(delta["partial_json"])}}])
            elif delta.get("type") in ("thinking_delta", "signature_delta"):
                yield Piece(thinking=True)
        elif kind == "message_delta":
            output = (event.get("usage") or {}).get("output_tokens")
            if isinstance(output, int):
                self.completion = output
            yield Piece(usage=(self.prompt, self.completion))
        elif kind == "error":
            error = event.get("error") or {}
            status = _ANTHROPIC_STATUS.get(str(error.get("type")), 500)
            raise StreamError(str(error.get("message") or error.get("type") or "error"), status)


class OllamaLines:
    """Ollama's stream: one JSON object per line; the last has "done" and the token counts."""

    def __init__(self) -> None:
        self.calls = 0

    def feed(self, line: str) -> Iterator[Piece]:
        data = json.loads(line)
        if not isinstance(data, dict):
            raise json.JSONDecodeError("a line that is not a JSON object", line, 0)
        if data.get("error"):
            raise StreamError(str(data["error"]), 500)
        message = data.get("message") or {}
        fragments = []
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            arguments = function.get("arguments")
            text = arguments if isinstance(arguments, str) else json.dumps(arguments if arguments is not None else {})
            fragments.append(
                {
                    "index": self.calls,
                    "id": call.get("id"),
                    "function": {"name": function.get("name", ""), "arguments": text},
                }
            )
            self.calls += 1
        usage = (data.get("prompt_eval_count"), data.get("eval_count")) if data.get("done") else None
        yield Piece(
            text=str(message.get("content") or ""),
            fragments=fragments or None,
            thinking=bool(message.get("thinking")),
            usage=usage,
        )
