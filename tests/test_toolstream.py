"""Streamed tool-call fragments put back together (llm/toolstream.py): the OpenAI format and the variants
providers send through litellm. End to end over HTTP: tests/test_tools.py."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from interpreter_lsp.llm.toolstream import ToolCall, ToolCallAssembler


def fragment(index: int | None = None, call_id: str | None = None, name: str | None = None, arguments: str = "") -> Any:
    """As litellm gives them: objects with attributes (ChatCompletionDeltaToolCall)."""
    function = SimpleNamespace(name=name, arguments=arguments)
    return SimpleNamespace(index=index, id=call_id, type="function" if call_id else None, function=function)


def pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def test_the_openai_format_one_call_after_another() -> None:
    first = json.dumps({"language": "python", "code": "print('a')\nprint(\"b\")"})
    second = json.dumps({"language": "shell", "code": "ls -l"})
    assembler = ToolCallAssembler()
    done: list[ToolCall] = []
    done += assembler.feed([fragment(0, "call_a", "run_code", "")])
    for piece in pieces(first, 3):
        done += assembler.feed([fragment(0, arguments=piece)])
    assert done == []  # the first call is complete only when another starts (or the stream ends)
    done += assembler.feed([fragment(1, "call_b", "run_code", "")])
    assert done == [ToolCall("call_a", "run_code", first)]
    for piece in pieces(second, 5):
        done += assembler.feed([fragment(1, arguments=piece)])
    done += assembler.finish()
    assert done == [ToolCall("call_a", "run_code", first), ToolCall("call_b", "run_code", second)]
    assert assembler.calls == done
    assert assembler.finish() == []


def test_dicts_whole_calls_and_repeated_ids() -> None:
    assembler = ToolCallAssembler()
    # A provider that repeats the id in every fragment, as plain dicts.
    assembler.feed([{"index": 0, "id": "x", "function": {"name": "run_code", "arguments": '{"code":'}}])
    assembler.feed([{"index": 0, "id": "x", "function": {"arguments": ' "1"}'}}])
    # Whole calls, every one with index 0, told apart by their ids; several in one chunk.
    done = assembler.feed(
        [
            {"index": 0, "id": "y", "function": {"name": "run_code", "arguments": '{"code": "2"}'}},
            {"index": 0, "id": "z", "function": {"name": "run_code", "arguments": '{"code": "3"}'}},
        ]
    )
    done += assembler.finish()
    assert [(c.id, c.arguments) for c in done] == [
        ("x", '{"code": "1"}'),
        ("y", '{"code": "2"}'),
        ("z", '{"code": "3"}'),
    ]


def test_fragments_without_index_or_id() -> None:
    assembler = ToolCallAssembler()
    assembler.feed([fragment(None, None, "run_code", '{"code"'), fragment(None, None, None, ': "x"}')])
    [call] = assembler.finish()
    assert call.name == "run_code" and call.arguments == '{"code": "x"}'
    assert call.id.startswith("call_") and len(call.id) > 10  # an id of our own, so the call can be answered
    assert ToolCallAssembler().finish() == []
    assert ToolCallAssembler().feed(None) == []


def test_the_wire_form() -> None:
    call = ToolCall("c1", "run_code", '{"code": "1"}')
    assert call.wire() == {
        "id": "c1",
        "type": "function",
        "function": {"name": "run_code", "arguments": '{"code": "1"}'},
    }
