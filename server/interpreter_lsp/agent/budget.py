"""The context budget: every request fits the model's window, with room left for its reply.

- `limits`: the window (the `contextWindow` setting, else litellm's model info, else a guess said as one)
  and the reply's room (`maxTokens`, else an eighth of the window, at least 256).
- `TokenCache`: tokens per message, counted with the model's counter (litellm's where litellm serves the
  model, else the estimate of llm/estimate.py, which loads nothing), kept by message so that only new
  messages are counted (off the event loop) on each request.
- `fit`: the messages to send. The system message, the current request and the last message (the latest
  run's result) are always sent; older messages are left out from the oldest on, with a note saying so;
  a last message too big on its own is cut in the middle (head and tail kept). An assistant message with
  native tool calls and the `tool` messages answering them are sent or left out together: a tool message
  without its call, or a call without its answer, is an invalid request.

Compaction (agent/compaction.py) keeps the view small in the first place; `fit` is what holds always.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from ..llm.errors import CONTEXT_WINDOW, ModelError
from ..llm.models import ModelFacts
from ..output import HeadTail
from . import images

GUESSED_WINDOW = 8192  # tokens, when neither the setting nor litellm knows the model's window
REPLY_SHARE = 8  # without maxTokens, 1/REPLY_SHARE of the window is kept for the reply
MIN_REPLY = 256
NOTE_ROOM = 40  # tokens kept for the note that says messages were left out
INLINE_CHARS = 4000  # new text counted on the event loop below this size (~0.3 ms), in a thread above
CACHE_SLACK = 256  # counts kept beyond the current view's before the cache is pruned
# A message's cache key costs ~2-4 µs (its text hashed anew where a view built a new string): past this many
# new ones the keys are made in a thread (4,000 messages: ~17 ms that held the event loop). A message a
# view shares with the views before it (the view builder's, conversation.py) is known by identity.
KEYS_ON_LOOP = 500


@dataclass(frozen=True)
class Limits:
    window: int
    source: str  # "setting" | "model" | "guess"
    reply_reserve: int

    @property
    def prompt_limit(self) -> int:
        """The most tokens a request may hold."""
        return max(self.window - self.reply_reserve, 1)


def limits(setting: int | None, model_window: int | None, max_tokens: int | None) -> Limits:
    if setting:
        window, source = setting, "setting"
    elif model_window:
        window, source = model_window, "model"
    else:
        window, source = GUESSED_WINDOW, "guess"
    reserve = max_tokens if max_tokens else max(window // REPLY_SHARE, MIN_REPLY)
    # A maxTokens near the window would leave no room for the conversation: half the window at most.
    return Limits(window, source, min(reserve, window // 2))


def _key(message: dict[str, Any]) -> tuple[str, str, str]:
    content = message.get("content")
    text = content if isinstance(content, str) else json.dumps(content, sort_keys=True)
    extra = {k: v for k, v in message.items() if k not in ("role", "content")}
    return str(message.get("role")), text, json.dumps(extra, sort_keys=True) if extra else ""


class TokenCache:
    """Tokens per message for one model; a message already counted costs a dict lookup."""

    def __init__(self) -> None:
        self._model: tuple[str, str] | None = None
        self._counts: dict[tuple[str, str, str], int] = {}
        # id(message) -> (the message, its content, its size, its key). Views share their messages and never
        # change them (conversation.View); the content's identity and the message's size are checked all
        # the same. Holding the message keeps its id from being reused.
        self._known: dict[int, tuple[dict[str, Any], Any, int, tuple[str, str, str]]] = {}

    def _keys(self, messages: list[dict[str, Any]]) -> tuple[list[Any], list[int]]:
        """Each message's key where it is known by identity (else None), and the indexes of the others."""
        keys: list[Any] = []
        unknown: list[int] = []
        known = self._known
        for i, m in enumerate(messages):
            entry = known.get(id(m))
            if entry is not None and entry[0] is m and entry[1] is m.get("content") and entry[2] == len(m):
                keys.append(entry[3])
            else:
                keys.append(None)
                unknown.append(i)
        return keys, unknown

    async def counts(self, messages: list[dict[str, Any]], facts: ModelFacts, *, view: bool = False) -> list[int]:
        """Tokens of each message. `view`: these are the whole view of a request; counts of messages that
        left it may be forgotten."""
        if (facts.model, facts.counter) != self._model:
            self._model, self._counts, self._known = (facts.model, facts.counter), {}, {}
        keys, unknown = self._keys(messages)
        if unknown:
            new = [messages[i] for i in unknown]
            made = (
                [_key(m) for m in new]
                if len(new) <= KEYS_ON_LOOP
                else await asyncio.to_thread(lambda: [_key(m) for m in new])
            )
            for i, m, k in zip(unknown, new, made, strict=True):
                keys[i] = k
                self._known[id(m)] = (m, m.get("content"), len(m), k)
        missing = {k: m for k, m in zip(keys, messages, strict=True) if k not in self._counts}
        if missing:
            items = list(missing.items())
            if sum(len(k[1]) + len(k[2]) for k in missing) <= INLINE_CHARS:
                # A short new message costs a fraction of a millisecond: less than the hop to a thread.
                counted = [_count(m, facts) for _k, m in items]
            else:
                counted = await asyncio.to_thread(lambda: [_count(m, facts) for _k, m in items])
            for (k, _m), n in zip(items, counted, strict=True):
                self._counts[k] = n
        counts = [self._counts[k] for k in keys]
        if view and len(self._counts) > len(keys) + CACHE_SLACK:  # forget messages that left the view
            wanted = set(keys)
            self._counts = {k: n for k, n in self._counts.items() if k in wanted}
        if len(self._known) > len(messages) + CACHE_SLACK:  # and the messages themselves
            self._known = {id(m): self._known[id(m)] for m in messages if id(m) in self._known}
        return counts


def _count(message: dict[str, Any], facts: ModelFacts) -> int:
    """Tokens of one message; an image part is estimated from its size (agent/images.py), its text counted."""
    content = message.get("content")
    if not isinstance(content, list):
        return facts.count([message])
    text = "\n".join(str(part.get("text", "")) for part in content if part.get("type") == "text")
    pictures = [part for part in content if part.get("type") == "image_url"]
    estimate = sum(images.tokens(str(part["image_url"]["url"]).split(",", 1)[-1]) for part in pictures)
    return facts.count([{**message, "content": text}]) + estimate


@dataclass(frozen=True)
class Fitted:
    messages: list[dict[str, Any]]
    tokens: int  # as counted (an upper bound: each message counted alone carries its own overhead)
    left_out: int  # messages of the view not sent
    cut: bool  # a message was cut in the middle to fit


async def fit(
    messages: list[dict[str, Any]], cache: TokenCache, facts: ModelFacts, limit: int, pinned: frozenset[int]
) -> Fitted:
    """The messages to send within `limit` tokens. messages[0] is the system message; `pinned` indexes
    must be sent too (the current request); so is the last message."""
    counts = await cache.counts(messages, facts)
    total = sum(counts)
    if total <= limit:
        return Fitted(messages, total, 0, False)
    messages, counts = list(messages), list(counts)
    last = len(messages) - 1
    cut = False
    if last > 0 and counts[last] > limit // 2:
        # A huge latest result keeps its head and tail, and leaves room for what led to it.
        messages[last], counts[last] = await _cut(messages[last], counts[last], limit // 2, cache, facts)
        cut = True
    unit = _units(messages)
    keep = {j for i in {0, last} | {i for i in pinned if 0 < i <= last} for j in unit[i]}
    used = sum(counts[i] for i in keep) + NOTE_ROOM
    for i in range(last - 1, 0, -1):  # the most recent first; stop at the first that does not fit
        if i in keep:
            continue
        together = [j for j in unit[i] if j not in keep]
        if used + sum(counts[j] for j in together) > limit:
            break
        keep.update(together)
        used += sum(counts[j] for j in together)
    left_out = len(messages) - len(keep)
    order = sorted(keep)
    chosen = [dict(messages[i]) for i in order]
    chosen_counts = [counts[i] for i in order]
    if left_out:
        chosen[0]["content"] = str(chosen[0]["content"]) + (
            f"\n\n({left_out} earlier messages of this conversation were left out to fit your context window.)"
        )
    for _attempt in range(8):
        if used <= limit:
            break
        # The biggest text message other than the system message gives way, cut in the middle.
        texts = [i for i in range(1, len(chosen)) if isinstance(chosen[i].get("content"), str)]
        index = max(texts, key=lambda i: chosen_counts[i], default=None)
        if index is None or chosen_counts[index] <= MIN_REPLY:
            break
        target = max(chosen_counts[index] - (used - limit) - 16, MIN_REPLY // 2)
        chosen[index], recounted = await _cut(chosen[index], chosen_counts[index], target, cache, facts)
        used += recounted - chosen_counts[index]
        chosen_counts[index] = recounted
        cut = True
    if used > limit:
        raise ModelError(
            f"This request needs {used:,} tokens even cut down, more than the {limit:,} the model's context "
            "window leaves for it: raise interpreter.contextWindow, lower interpreter.maxTokens, or shorten the "
            "system message.",
            CONTEXT_WINDOW,
        )
    return Fitted(_merged(chosen), used, left_out, cut)


def _units(messages: list[dict[str, Any]]) -> list[tuple[int, ...]]:
    """For each message, the messages sent or left out with it: an assistant message with tool calls
    and the tool messages that follow it form one unit; any other message is its own."""
    unit: list[tuple[int, ...]] = [(i,) for i in range(len(messages))]
    i = 0
    while i < len(messages):
        if messages[i].get("role") == "assistant" and messages[i].get("tool_calls"):
            end = i + 1
            while end < len(messages) and messages[end].get("role") == "tool":
                end += 1
            for j in range(i, end):
                unit[j] = tuple(range(i, end))
            i = end
        else:
            i += 1
    return unit


async def _cut(
    message: dict[str, Any], count: int, target: int, cache: TokenCache, facts: ModelFacts
) -> tuple[dict[str, Any], int]:
    """`message` with its content cut in the middle (head and tail kept) to about `target` tokens."""
    content = message.get("content")
    if not isinstance(content, str) or count <= target:
        return message, count
    keep_chars = max(int(len(content) * target / max(count, 1) * 0.9), 200)
    view = HeadTail(keep_chars)
    view.append(content)
    shorter = {**message, "content": view.text()}
    [recounted] = await cache.counts([shorter], facts)
    return shorter, recounted


def _merged(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive plain messages of one role joined (left-out messages can make two meet): some
    providers require user and assistant to alternate."""
    out: list[dict[str, Any]] = []
    for message in messages:
        previous = out[-1] if out else None
        if (
            previous is not None
            and previous["role"] == message["role"] in ("user", "assistant")
            and set(previous) == set(message) == {"role", "content"}
            and isinstance(previous["content"], str)
            and isinstance(message["content"], str)
        ):
            out[-1] = {**previous, "content": previous["content"] + "\n\n" + message["content"]}
        else:
            out.append(message)
    return out
