"""Risk assessment of code before it runs: the entry point the server calls for every proposal."""

from __future__ import annotations

from pathlib import Path

from interpreter_lsp.protocol import Risk
from interpreter_lsp.safety.context import new_context
from interpreter_lsp.safety.python import assess_python
from interpreter_lsp.safety.shell import assess_shell

# Very large inputs are not parsed in full: the time budget is milliseconds, and no one reviews them anyway.
_MAX_CHARS = 200_000
_ASSESSORS = {"python": assess_python, "shell": assess_shell}


def assess(code: str, language: str, workspace: Path | None = None) -> Risk:
    """Rate `code` low / medium / high, with reasons in plain words.

    `language` is canonical ("python", "shell", or another kernel language). Low means no rule found
    anything; anything the rules cannot understand (other languages, code that does not parse, code
    built at run time) is at least medium.
    """
    ctx = new_context(workspace, _ASSESSORS)
    if len(code) > _MAX_CHARS:
        ctx.add("medium", f"the code is too long to check in full ({len(code)} characters)")
        code = code[:_MAX_CHARS]
    assessor = _ASSESSORS.get(language)
    if assessor is not None:
        assessor(code, ctx)
    elif code.strip():
        ctx.add("medium", f"cannot assess {language or 'unknown'} code: read it before it runs")
    return Risk(level=ctx.findings.level(), reasons=ctx.findings.reasons())
