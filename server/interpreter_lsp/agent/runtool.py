"""The one native tool: `run_code(language, code)`, offered through the API (litellm's `tools=`) when the
model supports function calling (`codeFormat`). Each call the model makes becomes a proposal exactly like
a fenced block; what became of it (its run's result, the user's refusal, an error) goes back as the
`tool` message answering that call's id.

This module owns the tool's schema, how a streamed call (llm/toolstream.py) becomes a code block, and what
the model reads when a call got no result of its own (not decided before the turn ended, unreadable).
"""

from __future__ import annotations

import json
from typing import Any

from ..languages import canonical_language
from ..llm.toolstream import ToolCall
from .codeblocks import CodeBlock

NAME = "run_code"


def tools(languages: list[str]) -> list[dict[str, Any]]:
    """The `tools` of a request: run_code, its language one of those a kernel runs here."""
    offered = [language for language in languages if language] or ["python"]
    return [
        {
            "type": "function",
            "function": {
                "name": NAME,
                "description": (
                    "Run code in the user's persistent kernel for that language (variables, imports and files "
                    "stay between calls). The user approves each call before it runs; the result is its output."
                ),
                "parameters": {
                    "type": "object",
                    "properties": {
                        "language": {"type": "string", "enum": offered, "description": "The kernel to run it in."},
                        "code": {"type": "string", "description": "The code to run, whole."},
                    },
                    "required": ["language", "code"],
                },
            },
        }
    ]


def block_of(call: ToolCall | dict[str, Any], index: int = 0) -> CodeBlock | str:
    """The code block a call proposes, or why it cannot be run (a sentence for the model)."""
    name, arguments = (call.name, call.arguments) if isinstance(call, ToolCall) else (call["name"], call["arguments"])
    if name != NAME:
        return f"Error: there is no tool {name!r}; call {NAME} with the language and the code."
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError as exc:
        return f"Error: the arguments are not valid JSON ({exc}); nothing ran. Call {NAME} again."
    if not isinstance(parsed, dict):
        return f"Error: the arguments must be a JSON object with language and code; nothing ran. Call {NAME} again."
    code = parsed.get("code")
    if not isinstance(code, str) or not code.strip():
        return f"Error: the call has no code; nothing ran. Call {NAME} with the language and the code."
    language = parsed.get("language")
    language = canonical_language(language) if isinstance(language, str) and language.strip() else "python"
    return CodeBlock(language, code.rstrip("\n"), True, index)


def stored(call: ToolCall) -> dict[str, str]:
    """A call as the assistant history event keeps it."""
    return {"id": call.id, "name": call.name, "arguments": call.arguments}


def wire(call: dict[str, Any]) -> dict[str, Any]:
    """A stored call as the assistant message carries it (OpenAI format)."""
    name, arguments = str(call.get("name", "")), str(call.get("arguments", ""))
    return {"id": str(call.get("id", "")), "type": "function", "function": {"name": name, "arguments": arguments}}


def unanswered(decided: str | None) -> str:
    """The result of a call that got none of its own: `decided` is what became of its proposal
    ("approved" / "auto-run": it started but no result was recorded; "": it was shown but never
    decided; None: it never became a proposal)."""
    if decided in ("approved", "auto-run"):
        return "No result: the run did not finish (the server stopped before it ended)."
    if decided == "":
        return "Not run: the turn ended before the user decided on it."
    return "Not run: the reply ended before this call could be proposed."
