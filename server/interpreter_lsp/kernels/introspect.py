"""Variables of a Python kernel, computed silently: a `silent` execute with a user expression adds no
history entry, no output and no name to the user's namespace (the expression's comprehension and
lambda have their own scopes)."""

from __future__ import annotations

import ast
import asyncio
import json
from typing import Any

from ..errors import UserError
from .backend import ExecuteReply, KernelBackend

_EXPRESSION = """(lambda ns, hidden, json, types, reprlib: json.dumps([
    {"name": k, "type": type(v).__name__,
     "summary": (lambda r: r if len(r) <= 120 else r[:117] + "...")(
         (lambda: (f"{type(v).__name__} shape={getattr(v, 'shape')}" if hasattr(v, "shape")
                   else reprlib.repr(v)))())}
    for k, v in sorted(ns.items())
    if not k.startswith("_") and k not in hidden and k not in ("In", "Out", "exit", "quit", "get_ipython")
    and not isinstance(v, types.ModuleType)
][:500]))(get_ipython().user_ns, get_ipython().user_ns_hidden, __import__("json"), __import__("types"),
   __import__("reprlib"))"""

VARIABLES_TIMEOUT = 10.0


class VariablesUnavailable(UserError):
    pass


# The user expression that lists the variables, for a request of the server's own that also asks something
# else (variable_undo.py's snapshot after each run carries it: one round trip after a run, not two).
VARIABLES = {"vars": _EXPRESSION}


async def python_variables(kernel: KernelBackend) -> list[dict[str, Any]]:
    try:
        reply = await asyncio.wait_for(
            kernel.execute("", None, silent=True, user_expressions=VARIABLES), VARIABLES_TIMEOUT
        )
    except asyncio.TimeoutError as exc:
        raise VariablesUnavailable(
            f"The python kernel is busy (no answer within {VARIABLES_TIMEOUT:.0f} s); "
            "try again when the running code has finished, or interrupt it."
        ) from exc
    return variables_of(reply)


def variables_of(reply: ExecuteReply) -> list[dict[str, Any]]:
    """The variables a reply to a request with VARIABLES carries (VariablesUnavailable, saying why, if not)."""
    result = reply.content.get("user_expressions", {}).get("vars", {})
    if result.get("status") != "ok":
        raise VariablesUnavailable(
            f"The kernel could not list its variables: {result.get('ename', '')} {result.get('evalue', '')}".strip()
        )
    text = result.get("data", {}).get("text/plain", "[]")
    return json.loads(ast.literal_eval(text))
