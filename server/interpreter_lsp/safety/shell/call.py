"""One command as the handlers see it (its name after wrappers, its arguments, its surroundings), and the
small helpers they share to read arguments.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from interpreter_lsp.safety.context import Context
from interpreter_lsp.safety.shell.parse import Command


@dataclass
class Call:
    """One command as checked: its name after wrappers, its arguments, and its surroundings."""

    name: str
    args: list[str]
    command: Command
    upstream: set[str]
    piped: bool
    via_xargs: bool = False
    tags: set[str] = field(default_factory=set)
    stdin_text: str | None = None  # what the previous stage prints, when known (echo "…" | sh)
    program: str = ""  # the command as written (a path, or `$(…)`), before its basename became the name


Handler = Callable[[Call, Context], None]


def skip_options(words: list[str], takes_value: set[str]) -> list[str]:
    i = 0
    while i < len(words) and words[i].startswith("-") and words[i] != "-":
        if words[i] == "--":
            return words[i + 1:]
        i += 2 if words[i] in takes_value else 1
    return words[i:]


def split_flags(args: list[str], takes_value: Iterable[str] = ()) -> tuple[set[str], list[str]]:
    """Short flags as single letters and long flags as written; the operands in order."""
    takes = set(takes_value)
    flags: set[str] = set()
    operands: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            operands.extend(args[i + 1:])
            break
        if arg.startswith("--"):
            flags.add(arg.split("=", 1)[0])
            if arg in takes:
                i += 1
        elif arg.startswith("-") and len(arg) > 1 and not arg[1:].isdigit():
            flags.update(arg[1:])
            if arg in takes:
                i += 1
        else:
            operands.append(arg)
        i += 1
    return flags, operands


def normalise(path: str, ctx: Context) -> str:
    base = ctx.cwd or ctx.workspace or "."
    return posixpath.normpath(posixpath.join(base, path))
