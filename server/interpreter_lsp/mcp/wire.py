"""The agents' socket protocol, ours and tiny: one JSON object per line each way.

    request   {"id": <int|str>, "method": "run" | "wait" | "variables" | "interrupt" | "restart" | "status",
               "params": {...}}
    answer    {"id": <the request's>, "result": ...}  or  {"id": ..., "error": "<a sentence>"}

Answers may come in any order (a `wait` is answered when its call ends or its timeout passes). Every
request is validated here before the language server acts on it; a mistake is an `error` answer that
says what was wrong. Standard library only: the MCP process and the language server both import it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from interpreter_lsp.safety import visible

MAX_LINE = 4 * 1024 * 1024  # bytes in one request or answer (code, output, images)
MAX_CODE = 1_000_000  # characters of code in one run
MAX_WAIT = 60.0  # seconds one `wait` may hold
METHODS = frozenset({"run", "wait", "variables", "interrupt", "restart", "status"})
_LANGUAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}")
_CALL_ID = re.compile(r"a-[0-9a-f]{12}")


class BadRequest(Exception):
    pass


def parse_request(line: bytes) -> tuple[Any, str, dict[str, Any]]:
    try:
        message = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"a request must be one JSON object per line ({exc})") from None
    if not isinstance(message, dict):
        raise BadRequest("a request must be a JSON object")
    request_id = message.get("id")
    if not isinstance(request_id, (int, str)) or isinstance(request_id, bool) or len(str(request_id)) > 64:
        raise BadRequest("'id' must be a number or a short string")
    method = message.get("method")
    if method not in METHODS:
        raise BadRequest(f"'method' must be one of {', '.join(sorted(METHODS))}; got {str(method)[:40]!r}")
    params = message.get("params", {})
    if not isinstance(params, dict):
        raise BadRequest("'params' must be a JSON object")
    return request_id, method, params


def run_params(params: dict[str, Any]) -> tuple[str, str, str]:
    code = params.get("code")
    if not isinstance(code, str) or not code.strip():
        raise BadRequest("'code' must be a non-empty string")
    if len(code) > MAX_CODE:
        raise BadRequest(f"'code' is limited to {MAX_CODE} characters")
    return code, language_param(params), agent_param(params)


def language_param(params: dict[str, Any]) -> str:
    language = params.get("language", "python")
    if language is None:
        language = "python"
    if not isinstance(language, str) or not _LANGUAGE.fullmatch(language):
        raise BadRequest("'language' must be a kernel language such as python or shell")
    return language


def agent_param(params: dict[str, Any]) -> str:
    """The agent's name as it says itself (MCP client info): shown to the user, so made one plain line:
    every character that does not show as what it is (a control, a bidi override, a blank filler: the set
    code is rated by, safety/visible.py) becomes a space."""
    agent = params.get("agent")
    if not isinstance(agent, str):
        return "an agent"
    hidden = {offset for offset, _ch in visible.hidden(agent)}
    shown = "".join(" " if offset in hidden else ch for offset, ch in enumerate(agent)) if hidden else agent
    cleaned = " ".join(shown.split())[:80]
    return cleaned or "an agent"


def wait_params(params: dict[str, Any]) -> tuple[str, float]:
    call_id = params.get("callId")
    if not isinstance(call_id, str) or not _CALL_ID.fullmatch(call_id):
        raise BadRequest("'callId' must be a run id this server gave (a-…)")
    timeout = params.get("timeout", 0)
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not 0 <= timeout <= MAX_WAIT:
        raise BadRequest(f"'timeout' must be a number of seconds from 0 to {MAX_WAIT:g}")
    return call_id, float(timeout)
