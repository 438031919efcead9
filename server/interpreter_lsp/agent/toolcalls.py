"""Tool calls that local models print as text instead of sending them through the API: a JSON object such
as `{"name": "run_code", "arguments": {"language": "python", "code": "..."}}`, alone in the reply or in a
```json fence. Each becomes a proposal, exactly like a fenced block (same rating, approval and run).

Only a reply without fenced code is read this way, and only objects that name a code-running tool
(run_code, execute, python, ...) and carry code: JSON that is data stays data.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..languages import PYTHON, SHELL, canonical_language
from .codeblocks import CodeBlock

# Tool names models use for "run this code"; a name that is a language says the language too.
TOOL_NAMES = frozenset(
    {"run_code", "execute", "execute_code", "run", "code_interpreter", "python", "run_python", "ipython",
     "bash", "shell", "run_shell", "terminal"}
)  # fmt: skip
_LANGUAGE_NAMES = {"python": PYTHON, "run_python": PYTHON, "ipython": PYTHON, "bash": SHELL, "shell": SHELL,
                   "run_shell": SHELL, "terminal": SHELL}  # fmt: skip
_JSON_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\n(.*?)\n[ \t]*```", re.S)


def text_tool_calls(reply: str) -> list[CodeBlock]:
    """The code-running tool calls printed in `reply` (alone, or in ```json fences), in order."""
    text = _strip_think(reply).strip()
    candidates: list[Any] = []
    whole = _loads(text)
    if whole is not None:
        candidates.append(whole)
    else:
        candidates.extend(v for m in _JSON_FENCE.finditer(text) if (v := _loads(m.group(1))) is not None)
    calls: list[dict[str, Any]] = []
    for value in candidates:
        calls.extend(value if isinstance(value, list) else [value])
    blocks: list[CodeBlock] = []
    for call in calls:
        found = _code_of(call) if isinstance(call, dict) else None
        if found is not None:
            language, code = found
            blocks.append(CodeBlock(language, code, True, len(blocks)))
    return blocks


def _code_of(call: dict[str, Any]) -> tuple[str, str] | None:
    function = call.get("function") if isinstance(call.get("function"), dict) else call
    name = str(function.get("name") or call.get("tool") or call.get("tool_name") or "").strip().lower()
    if name not in TOOL_NAMES:
        return None
    arguments: Any = next(
        (function[k] for k in ("arguments", "parameters", "args", "input") if k in function),
        {k: v for k, v in function.items() if k in ("code", "language", "command")},
    )
    if isinstance(arguments, str):
        parsed = _loads(arguments)
        arguments = parsed if isinstance(parsed, dict) else {"code": arguments}
    if not isinstance(arguments, dict):
        return None
    code = arguments.get("code") or arguments.get("command") or arguments.get("script")
    if not isinstance(code, str) or not code.strip():
        return None
    language = arguments.get("language") or arguments.get("lang")
    if isinstance(language, str) and language.strip():
        resolved = canonical_language(language.strip()) or PYTHON
    else:
        resolved = _LANGUAGE_NAMES.get(name, PYTHON)
    return resolved, code.rstrip("\n")


def _loads(text: str) -> Any:
    text = text.strip()
    if not text or text[0] not in "[{":
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _strip_think(text: str) -> str:
    return re.sub(r"<(think|thinking|reasoning)>.*?</\1>", "", text, flags=re.S)
