"""A token count without a tokenizer: what the context budget uses where litellm is not loaded.

Loading a real tokenizer costs what the fast model paths avoid (litellm: seconds and ~190 MB; tiktoken's
cl100k table alone ~45 MB and 150 ms), and for a local model it would count with another model's
vocabulary anyway. So the budget counts with this estimate wherever litellm is not loaded, and with
litellm's counter where it is (the providers only litellm serves).

The estimate follows the shape of a BPE pre-tokenizer: a word (with its leading space) is one token, plus
one per 7 more letters; up to 3 digits are one token; punctuation is a token per 2 characters; a run of
whitespace is one; a character past U+0800 (CJK, emoji) is 2; other non-ASCII letters a token per 4.
Then 10 % is added. Measured against cl100k_base and o200k_base (the larger count of the two): English
prose 1.25x, Python 1.3x, JSON 1.5x, log-like output and numbers 1.1x, Chinese 2.2x; random text is the
worst case: random printable ASCII 1.03x, hex 1.06x, CJK of random code points 0.94x, base64 0.84x. It
over-counts ordinary text, which only makes the budget careful, and under-counts only random data, by at
most ~16 %. tests/test_estimate.py holds those bounds against tiktoken where it is installed.
"""

from __future__ import annotations

import functools
import re
from collections import OrderedDict
from typing import Any

_PATTERN = (
    r" ?[A-Z]?[a-z]+| ?[A-Z]+(?![a-z])|[0-9]{1,3}|[^\sA-Za-z0-9\x80-\U0010ffff]+|\s+|[\x80-\u07ff]+|[\u0800-\U0010ffff]"
)


@functools.cache
def _piece() -> re.Pattern[str]:
    """Compiled at the first count, not on the server's start path (tens of ms on a busy machine)."""
    return re.compile(_PATTERN)
MARGIN = 1.1
PER_MESSAGE = 4  # role and separators, as OpenAI's own accounting has it
CACHED_FROM = 24  # characters: a shorter text is counted again (about as cheap as the bookkeeping)
CACHE_SIZE = 16384  # texts remembered (~1.5 MB), by length and hash (never the text itself: it may be large)
_counted: OrderedDict[tuple[int, int], int] = OrderedDict()


def text_tokens(text: str) -> int:
    """Tokens of `text`, estimated (see the module's docstring for how far off it may be).

    Remembered for the texts seen last: a conversation's earlier messages are counted again at every request
    (the prompt's size where the model reports no usage, the context budget), and counting is linear in
    the text; a lookup is a hash."""
    if len(text) < CACHED_FROM:
        return _count(text)
    key = (len(text), hash(text))
    n = _counted.get(key)
    if n is None:
        n = _counted[key] = _count(text)
        if len(_counted) > CACHE_SIZE:
            _counted.popitem(last=False)
    else:
        _counted.move_to_end(key)
    return n


def _count(text: str) -> int:
    n = 0
    for match in _piece().finditer(text):
        piece = match.group()
        last = piece[-1]
        if last.isascii() and last.isalpha():
            n += 1 + (len(piece.lstrip(" ")) - 1) // 7
        elif last.isascii() and last.isdigit():
            n += 1
        elif piece[0].isspace():
            n += 1
        elif ord(piece[0]) >= 0x800:
            n += 2
        elif ord(piece[0]) >= 0x80:
            n += 1 + len(piece) // 4
        else:
            n += (len(piece) + 1) // 2
    return int(n * MARGIN + 0.999)


def message_tokens(messages: list[dict[str, Any]]) -> int:
    """Tokens of chat messages (OpenAI format): their text, tool calls and names, estimated. Image parts
    are not counted here (agent/budget.py estimates them from their size)."""
    total = 0
    for message in messages:
        total += PER_MESSAGE
        content = message.get("content")
        if isinstance(content, str):
            total += text_tokens(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and part.get("type") == "text":
                    total += text_tokens(str(part.get("text", "")))
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {} if isinstance(call, dict) else {}
            total += 4 + text_tokens(str(function.get("name", ""))) + text_tokens(str(function.get("arguments", "")))
        for key in ("name", "tool_call_id"):
            if isinstance(message.get(key), str):
                total += text_tokens(message[key])
    return total
