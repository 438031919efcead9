"""Effects that both scanners (python/, shell/) rate the same way: a variable that makes later programs
run a command (GIT_SSH_COMMAND, LD_PRELOAD), and SQL that destroys data.
"""

from __future__ import annotations

import re

from interpreter_lsp.safety import allowlist as A
from interpreter_lsp.safety.context import Context

_DESTRUCTIVE_SQL = re.compile(
    r"\b(drop\s+(table|database|schema|index|view|user|role|collection|owned)|truncate\b"
    r"|delete\s+from\s+[\w.\"`]+\s*(;|$|returning)|alter\s+table\s+\S+\s+drop"
    r"|update\s+[\w.\"`]+\s+set\b(?![\s\S]*\bwhere\b)|flushall|flushdb|dropdatabase|\.drop\(\)|deletemany\(\s*\{\s*\}\s*\))",
    re.IGNORECASE,
)


def destructive_sql(text: str) -> str | None:
    """The destructive statement in `text` (DROP, TRUNCATE, DELETE or UPDATE without WHERE ...), or None."""
    match = _DESTRUCTIVE_SQL.search(text)
    return " ".join(match.group(0).split())[:40] if match else None



def set_variables(names_values: list[tuple[str, str]], ctx: Context) -> None:
    """Variables that programs read: a command in them runs later (GIT_SSH_COMMAND), or code is preloaded."""
    for name, value in names_values:
        if name in _RUNS_COMMAND:
            ctx.add("high", f"sets {name}, which makes later programs run a command or load code: {value[:40]}")
        elif name in A.RUNS_LATER_VARIABLES:
            ctx.add("medium", f"sets {name}, which changes what later commands run")


_RUNS_COMMAND = frozenset({"LD_PRELOAD", "LD_AUDIT", "GIT_SSH_COMMAND", "GIT_SSH", "GIT_EXTERNAL_DIFF",
                           "GIT_ASKPASS", "SSH_ASKPASS", "GIT_PROXY_COMMAND", "BASH_ENV", "ENV", "PROMPT_COMMAND",
                           "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT",
                           "GIT_EXEC_PATH", "GIT_TEMPLATE_DIR", "PYTHONSTARTUP", "PERL5OPT", "NODE_OPTIONS",
                           "RUBYOPT", "JAVA_TOOL_OPTIONS", "DYLD_INSERT_LIBRARIES", "PS4", "LESSOPEN",
                           "LESSCLOSE", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "NPM_CONFIG_REGISTRY",
                           "npm_config_registry", "UV_INDEX_URL", "PIP_TRUSTED_HOST", "GIT_EDITOR", "GIT_PAGER"})


