"""IPython in Python cells: `%%` cell magics, `%` line magics and `!` shell escapes are rated (shell goes
to the shell rules through `Context.nested`), and the plain Python left is handed back for the scan.
"""

from __future__ import annotations

import ast
import re

from interpreter_lsp.safety.context import Context
from interpreter_lsp.safety.places import check_write, classify_path
from interpreter_lsp.safety.python.tables import HARMLESS_CELL_MAGICS, PYTHON_CELL_MAGICS, SHELL_CELL_MAGICS

# `files = !ls`, `out = %sx ls`: found from the first `=` (one regex over the whole line with a lazy target
# and optional spaces on both sides is quadratic in a long run of spaces).
_ESCAPE_AFTER_EQUALS = re.compile(r"=\s*(!|%sx\b|%system\b)")
_TARGETS = re.compile(r"[\w.,\s\[\]]+")


def _assigned_escape(line: str) -> tuple[str, str, str] | None:
    """(indent, targets, shell command) of `targets = !command`, or None."""
    at = line.find("=")
    escape = _ESCAPE_AFTER_EQUALS.match(line, at) if at > 0 else None
    if escape is None:
        return None
    head = line[:at]
    targets = head.strip()
    if targets and not _TARGETS.fullmatch(targets):
        return None
    return head[: len(head) - len(head.lstrip())], targets, line[escape.end():]


def route_ipython(code: str, ctx: Context) -> str | None:
    """Check magics and `!` escapes and return the plain Python left (None: nothing left to parse)."""
    try:
        ast.parse(code)
        return code  # plain Python: nothing to route, and `!=` stays an operator
    except (SyntaxError, ValueError):
        pass
    except (MemoryError, RecursionError):
        return code
    lines = code.split("\n")
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is not None and lines[first].lstrip().startswith("%%"):
        head = lines[first].strip()[2:].split()
        magic = head[0] if head else ""
        body = "\n".join(lines[first + 1:])
        if magic in SHELL_CELL_MAGICS:
            if magic == "script" and len(head) > 1 and not any(s in head[1] for s in ("sh", "bash", "zsh")):
                ctx.add("medium", f"cannot assess {head[1]} code: read it before it runs")
                return None
            ctx.nested("shell", body)
            return None
        if magic in ("writefile", "file"):
            target = next((a for a in head[1:] if not a.startswith("-")), None)
            if target:
                check_write(classify_path(target, ctx), ctx)
            return None
        if magic in HARMLESS_CELL_MAGICS:
            return None
        if magic not in PYTHON_CELL_MAGICS:
            ctx.add("medium", f"cannot assess a %%{magic} cell: read it before it runs")
            return None
        lines = lines[first + 1:]
    out: list[str] = []
    for line in lines:
        stripped = line.lstrip()
        indent = line[: len(line) - len(stripped)]
        assigned = _assigned_escape(line)
        if stripped.startswith("!"):
            ctx.nested("shell", stripped.lstrip("!"))
            out.append(indent + "pass")
        elif stripped.startswith("%") and not stripped.startswith("%%"):
            _line_magic(stripped[1:], ctx)
            out.append(indent + "pass")
        elif assigned:
            indent, targets, command = assigned
            ctx.nested("shell", command)
            out.append(f"{indent}{targets} = None")
        elif (stripped.endswith("?") and not stripped.startswith("#")) or stripped.startswith("?"):
            out.append(indent + "pass")
        else:
            out.append(line)
    return "\n".join(out)


def _line_magic(text: str, ctx: Context) -> None:
    name, _, rest = text.partition(" ")
    if name in ("pip", "conda", "mamba", "uv", "micromamba", "npm"):
        ctx.nested("shell", f"{name} {rest}")
    elif name in ("system", "sx", "sc"):
        ctx.nested("shell", rest)
    elif name == "cd":
        ctx.nested("shell", f"cd {rest}")
    elif name in ("writefile", "save"):
        target = next((a for a in rest.split() if not a.startswith("-")), None)
        if target:
            check_write(classify_path(target, ctx), ctx)
    elif name == "load" and "://" in rest:
        ctx.add("medium", f"loads code from the network into the cell: {rest.strip()[:60]}")
    elif name == "run" and "://" in rest:
        ctx.add("high", f"downloads code and runs it straight away (%run {rest.strip()[:60]})")
