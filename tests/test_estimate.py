"""The token estimate the context budget uses where litellm is not loaded (llm/estimate.py): it must never
under-count badly, or a request it fitted would overflow the window. Held against tiktoken's cl100k_base
and o200k_base (the larger count of the two; tiktoken comes with the providers extra) on text of every
kind, random data included.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import random
import string
from pathlib import Path

import pytest

from interpreter_lsp.llm import estimate

REPO = Path(__file__).resolve().parent.parent
R = random.Random(21)
SAMPLES = {
    "english": (REPO / "docs" / "architecture.md").read_text(),
    "python": (REPO / "server" / "interpreter_lsp" / "agent" / "budget.py").read_text(),
    "json": json.dumps([{"name": f"item {i}", "value": i * 1.5, "tags": ["a", "b"]} for i in range(500)]),
    "base64": base64.b64encode(R.randbytes(20000)).decode(),
    "hex": R.randbytes(20000).hex(),
    "numbers": " ".join(str(R.random()) for _ in range(2000)),
    "cjk": "".join(chr(R.randint(0x4E00, 0x9FFF)) for _ in range(3000)),
    "chinese": "我们的服务器在编辑器启动后半秒内给出第一个回答。" * 100,
    "emoji": "".join(chr(R.randint(0x1F600, 0x1F64F)) for _ in range(1000)),
    "russian": "Это проверка того, сколько токенов занимает русский текст. " * 100,
    "output": "\n".join(f"{i}\t{i * i}\t{i**0.5:.6f}" for i in range(2000)),
    "printable": "".join(R.choice(string.printable) for _ in range(10000)),
    "whitespace": "x" + " " * 3000 + "y\n" * 2000,
}
FLOOR = 0.8  # the estimate is at least this share of the real count, on any text


def _encodings() -> list:
    if importlib.util.find_spec("tiktoken") is None or importlib.util.find_spec("litellm") is None:
        pytest.skip("tiktoken (providers extra) is not installed")
    import tiktoken

    # litellm ships tiktoken's tables: no download.
    origin = importlib.util.find_spec("litellm").origin  # type: ignore[union-attr]
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(Path(str(origin)).parent / "litellm_core_utils" / "tokenizers"))
    found = []
    for name in ("cl100k_base", "o200k_base"):
        try:
            found.append(tiktoken.get_encoding(name))
        except Exception:
            continue
    if not found:
        pytest.skip("no tiktoken table available offline")
    return found


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_the_estimate_never_undercounts_badly(kind: str) -> None:
    text = SAMPLES[kind]
    real = max(len(e.encode(text, disallowed_special=())) for e in _encodings())
    guess = estimate.text_tokens(text)
    assert guess >= FLOOR * real, f"{kind}: estimated {guess}, really {real} ({guess / real:.2f}x)"
    if kind in ("english", "python", "output"):  # ordinary text is not wildly over-counted either
        assert guess <= 1.6 * real, f"{kind}: estimated {guess}, really {real} ({guess / real:.2f}x)"


def test_messages_count_their_text_calls_and_overhead() -> None:
    plain = [{"role": "user", "content": "hello there"}]
    assert estimate.message_tokens(plain) == estimate.PER_MESSAGE + estimate.text_tokens("hello there")
    call = {"id": "c1", "type": "function", "function": {"name": "run_code", "arguments": '{"code": "print(1)"}'}}
    with_call = [{"role": "assistant", "content": None, "tool_calls": [call]}]
    assert estimate.message_tokens(with_call) > estimate.PER_MESSAGE + estimate.text_tokens('{"code": "print(1)"}')
    parts = [{"role": "user", "content": [{"type": "text", "text": "hello there"}, {"type": "image_url"}]}]
    assert estimate.message_tokens(parts) == estimate.message_tokens(plain)  # images: agent/budget.py's
    assert estimate.text_tokens("") == 0


def test_a_text_counted_again_costs_a_lookup_and_gives_the_same_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """A conversation's earlier messages are counted at every request: remembered by length and hash,
    bounded, and never a different answer."""
    text = "The answer is 42, and here is why: " * 20
    first = estimate.text_tokens(text)
    calls = []
    original = estimate._count
    monkeypatch.setattr(estimate, "_count", lambda t: calls.append(t) or original(t))
    assert estimate.text_tokens(text) == first == original(text)
    assert calls == []  # remembered
    assert estimate.text_tokens(text + "!") != 0 and len(calls) == 1  # another text is counted
    monkeypatch.setattr(estimate, "_counted", type(estimate._counted)())
    monkeypatch.setattr(estimate, "CACHE_SIZE", 8)
    for i in range(50):
        estimate.text_tokens(f"{i} " + text)
    assert len(estimate._counted) == 8
