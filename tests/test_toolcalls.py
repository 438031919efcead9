"""Tool calls printed as text by local models (a JSON object naming run_code, execute, python, ...) are
proposals; JSON that is data is not. End to end: tests/test_context.py."""

from __future__ import annotations

import json

from interpreter_lsp.agent.toolcalls import text_tool_calls


def codes(reply: str) -> list[tuple[str, str]]:
    return [(b.language, b.code) for b in text_tool_calls(reply)]


def test_a_json_tool_call_alone_in_the_reply() -> None:
    call = {"name": "run_code", "arguments": {"language": "python", "code": "print(1)\n"}}
    assert codes(json.dumps(call)) == [("python", "print(1)")]


def test_arguments_as_a_json_string_and_the_openai_function_shape() -> None:
    call = {
        "type": "function",
        "function": {"name": "execute", "arguments": json.dumps({"code": "ls -l", "language": "bash"})},
    }
    assert codes(json.dumps(call)) == [("shell", "ls -l")]


def test_a_tool_named_after_its_language_in_a_json_fence_with_prose() -> None:
    reply = 'I will check.\n```json\n{"name": "python", "arguments": {"code": "import os"}}\n```\n'
    assert codes(reply) == [("python", "import os")]
    reply = '<think>maybe {"name": "bash"}</think>\n[{"name": "bash", "parameters": {"command": "pwd"}}]'
    assert codes(reply) == [("shell", "pwd")]


def test_json_that_is_data_stays_data() -> None:
    assert codes('{"name": "Ada", "age": 36}') == []
    assert codes('```json\n{"name": "run_code", "arguments": {}}\n```') == []
    assert codes("Here is the config: {not json}") == []
