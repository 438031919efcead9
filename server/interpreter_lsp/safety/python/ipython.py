"""IPython in Python cells: `%%` cell magics, `%` line magics and `!` shell escapes are rated (shell goes
to the shell rules through `Context.nested`), and the plain Python left is handed back for the scan.
"""

from __future__ import annotations

import ast
import re

from interpreter_lsp.safety.context import Context
from interpreter_lsp.safety.places import PathKind, check_write, classify_path
from interpreter_lsp.safety.python.tables import (
    HARMLESS_CELL_MAGICS,
    IPYTHON_ALIASES,
    PYTHON_CELL_MAGICS,
    PYTHON_LINE_MAGICS,
    QUIET_LINE_MAGICS,
    SHELL_CELL_MAGICS,
)
from interpreter_lsp.safety.rules import is_secret_variable

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
        if magic not in ALLOWED_CELL_MAGICS and not (magic in ("bash", "sh") or (magic == "script" and head[1:2]
                                                                                   in (["bash"], ["sh"]))):
            ctx.not_proven(f"the %%{magic} cell magic")
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
    aliases: dict[str, str] = {}  # %alias name command, defined earlier in this cell
    for line in lines:
        stripped = line.lstrip()
        indent = line[: len(line) - len(stripped)]
        assigned = _assigned_escape(line)
        if stripped.startswith("!"):
            ctx.nested("shell", stripped.lstrip("!"))  # the shell prover decides whether it is proven
            out.append(indent + "pass")
        elif stripped.startswith("%") and not stripped.startswith("%%"):
            _line_magic(stripped[1:], ctx, aliases)
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


# Magics on the allowlist: they only time, display or set how output looks (their Python or shell body, if
# any, is proven like any other code). `%load_ext`/`%reload_ext` only for autoreload (an extension is a
# module that runs on load); `%cd` goes through the shell prover (inside the workspace).
ALLOWED_LINE_MAGICS = frozenset({"matplotlib", "time", "timeit", "who", "whos", "who_ls", "pwd", "precision",
                                 "xmode", "lsmagic", "magic", "pinfo", "pinfo2", "pdef", "pdoc", "quickref",
                                 "autoreload", "cd", "pushd", "popd", "dhist", "dirs", "prun"})
ALLOWED_CELL_MAGICS = frozenset({"time", "timeit", "capture", "markdown", "latex", "md"})


def _line_magic(text: str, ctx: Context, aliases: dict[str, str]) -> None:
    name, _, rest = text.partition(" ")
    rest = rest.strip()
    if name in ("load_ext", "reload_ext") and rest.split() == ["autoreload"]:
        pass
    elif name not in ALLOWED_LINE_MAGICS and name not in IPYTHON_ALIASES:
        ctx.not_proven(f"the %{name} magic")
    if name in ("pip", "conda", "mamba", "uv", "micromamba", "npm"):
        ctx.nested("shell", f"{name} {rest}")
    elif name in ("system", "sx", "sc"):
        ctx.nested("shell", rest)
    elif name in ("cd", "pushd"):
        ctx.nested("shell", f"cd {rest}")
    elif name in ("writefile", "save"):
        target = next((a for a in rest.split() if not a.startswith("-")), None)
        if target:
            check_write(classify_path(target, ctx), ctx)
    elif name == "load" and "://" in rest:
        ctx.add("medium", f"loads code from the network into the cell: {rest[:60]}")
    elif name == "run":
        _run(rest, ctx)
    elif name == "alias":
        _alias(rest, ctx, aliases)
    elif name in aliases:
        ctx.nested("shell", _alias_command(aliases[name], rest))
    elif name in IPYTHON_ALIASES:
        ctx.nested("shell", f"{name} {rest}")
    elif name in PYTHON_LINE_MAGICS:
        ctx.nested("python", _OPTIONS.sub("", rest, count=1))
    elif name == "load_ext" and ctx.written_module(rest.split()[0] if rest else ""):
        ctx.add("medium", f"loads the extension {rest}, written earlier in this session (its code was not rated)")
    elif name == "env" and rest and "=" not in rest and " " not in rest and is_secret_variable(rest):
        ctx.add("medium", f"shows a secret (${rest}); it would reach the model")
    elif name in ("rerun", "recall", "macro", "edit", "paste", "cpaste"):
        ctx.add("medium", f"runs code from history or an editor (%{name}), which cannot be checked here")
    elif name not in QUIET_LINE_MAGICS:
        ctx.add("medium", f"cannot assess the %{name} magic: read it before it runs")


# Leading options of %time / %timeit / %prun (`-n 10 -r 3`), before the statement they time.
_OPTIONS = re.compile(r"^(?:\s*-\w+(?:\s+\d+)?)+\s*")


def _run(rest: str, ctx: Context) -> None:
    """`%run script.py`: a file's code runs in the kernel. Downloaded: high; written this session: medium."""
    words = rest.split()
    if "://" in rest:
        ctx.add("high", f"downloads code and runs it straight away (%run {rest[:60]})")
        return
    if "-m" in words:
        module = words[words.index("-m") + 1] if words.index("-m") + 1 < len(words) else ""
        if ctx.written_module(module):
            ctx.add("medium", f"runs the module {module}, written earlier in this session (its code was not rated)")
        return
    script = next((w for w in words if not w.startswith("-")), None)
    if script is None:
        return
    where = classify_path(script, ctx)
    if ctx.was_written(script):
        ctx.add("medium", f"runs {script}, written earlier in this session (its code was not rated)")
    elif where.kind not in (PathKind.WORKSPACE, PathKind.WORKSPACE_ROOT):
        ctx.add("medium", f"runs a script from outside the workspace: {where.shown}")


def _alias(rest: str, ctx: Context, aliases: dict[str, str]) -> None:
    """`%alias name command`: the command runs as shell whenever `%name` is used (here or in later cells)."""
    name, _, command = rest.partition(" ")
    if not command.strip():
        return
    aliases[name] = command.strip()
    ctx.add("medium", f"defines a shell alias (%{name}) that runs later: {command.strip()[:60]}")
    ctx.nested("shell", _alias_command(command, ""))


def _alias_command(command: str, arguments: str) -> str:
    """The shell an alias runs: `%s` takes the arguments in turn, `%l` the whole line."""
    parts = arguments.split()
    out = command.replace("%l", arguments or "$__unknown")
    while "%s" in out:
        out = out.replace("%s", parts.pop(0) if parts else "$__unknown", 1)
    return f"{out} {' '.join(parts)}".strip()
