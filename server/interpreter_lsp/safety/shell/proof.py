"""The allowlist prover for shell: "low" only when every command is on the allowlist (safety/allowlist.py)
with arguments proven harmless: commands that only print, commands that read files proven inside the
workspace, writes of data files proven inside it (`> out.csv`, `tee`, `mkdir`), and no variable that
programs read from the environment. Whatever it cannot prove goes to `Context.not_proven`.
"""

from __future__ import annotations

import re

from interpreter_lsp.safety import allowlist as A
from interpreter_lsp.safety.context import Context
from interpreter_lsp.safety.places import PathKind, classify_path, unproven_access
from interpreter_lsp.safety.rules import is_secret_variable
from interpreter_lsp.safety.shell.call import split_flags
from interpreter_lsp.safety.shell.parse import Command, Pipeline

_VARIABLE = re.compile(r"\$\{?(\w+)")
_PATTERN_FIRST = frozenset({"grep", "egrep", "fgrep", "rg"})
_NO_FILE_OPERANDS = frozenset({"tr", "seq", "expr", "basename", "dirname", "sleep", "echo", "printf", "yes",
                               "test", "[", "date", "uname", "id", "groups", "getconf", "locale", "cal",
                               "which", "type", "nproc", "whoami", "true", "false", "pwd", "uptime", "free",
                               "lscpu", "df", "arch", "tty", "hostname", "lsblk"})
_OPTION_VALUES = {"-n", "-c", "-d", "-f", "-k", "-t", "-m", "-A", "-B", "-C", "-e", "--max-count", "-w", "-s",
                  "--include", "--exclude", "-g", "--glob", "-L", "--maxdepth", "-I", "--type", "-T"}


def prove_pipeline(pipeline: Pipeline, ctx: Context) -> None:
    for command in pipeline:
        _prove_command(command, ctx)


def _prove_command(command: Command, ctx: Context) -> None:
    for assignment in command.assignments:
        name = assignment.split("=", 1)[0]
        if not _local_variable(name):
            ctx.not_proven(f"sets {name} (programs read it from the environment)")
    for operator, target in command.redirects:
        if operator == "<<<":
            continue  # a here-string is text
        if operator == "<":
            _read(target, ctx)
        elif classify_path(target, ctx).kind is not PathKind.HARMLESS_DEVICE:
            _write(target, ctx)
    words = [w for w in command.words if w != ""]
    if not words:
        return
    program = words[0]
    if "$" in program or "`" in program:
        ctx.not_proven(f"a command whose name is known only at run time ({program[:40]})")
        return
    if "/" in program:
        ctx.not_proven(f"runs the program {program[:60]}")
        return
    args = words[1:]
    if program in _NO_FILE_OPERANDS or program in A.SHELL_TEXT_COMMANDS:
        _text_command(program, args, ctx)
    elif program in A.SHELL_READ_COMMANDS:
        _read_command(program, args, ctx)
    elif program in ("cd", "pushd", "popd"):
        if program == "popd":
            return
        if not args:
            ctx.not_proven("cd to your home directory")
        else:
            _read(args[0], ctx)
    elif program == "tee":
        for target in split_flags(args)[1]:
            _write(target, ctx)
    elif program == "command" and args[:1] == ["-v"]:
        return
    elif program in ("python", "python3") and args in (["--version"], ["-V"]):
        return
    elif program in ("pip", "pip3") and _pip_only_reads(args):
        return
    elif program == "nvidia-smi" and all(a == "-L" or a.startswith(("--query-gpu=", "--format=")) for a in args):
        return
    elif program == "printenv" and args and not any(is_secret_variable(a) for a in args):
        return
    else:
        ctx.not_proven(f"the command {program}")


def _local_variable(name: str) -> bool:
    """A shell variable no program reads: lowercase by convention (the environment's are upper case), and
    none of the lowercase ones programs do read (http_proxy, npm_config_*)."""
    lowered = name.lower()
    return (name == lowered and not lowered.endswith("proxy") and not lowered.startswith("npm_config")
            and name not in A.RUNS_LATER_VARIABLES)


def _text_command(program: str, args: list[str], ctx: Context) -> None:
    if program == "date" and any(a in A.SHELL_UNSAFE_OPTIONS["date"] or a.startswith("--set") for a in args):
        ctx.not_proven("date -s (sets the clock)")
    elif program == "hostname" and any(not a.startswith("-") for a in args):
        ctx.not_proven("hostname NAME (renames the machine)")
    elif program in ("echo", "printf"):
        for arg in args:
            for name in _VARIABLE.findall(arg):
                if is_secret_variable(name):
                    ctx.not_proven(f"shows ${name} (a secret would reach the model)")


def _read_command(program: str, args: list[str], ctx: Context) -> None:
    unsafe = A.SHELL_UNSAFE_OPTIONS.get(program, set())
    for arg in args:
        option = arg.split("=", 1)[0]
        if option in unsafe or (program == "find" and option.startswith("-fprint")):
            ctx.not_proven(f"{program} {option} (writes, deletes or runs a command)")
            return
    if program == "find":
        roots: list[str] = []
        for arg in args:
            if arg.startswith(("-", "(", "!")):
                break
            roots.append(arg)
        for root in roots or ["."]:
            _read(root, ctx)
        return
    pattern_given = program in _PATTERN_FIRST and any(a in ("-e", "--regexp") or a.startswith("--regexp=")
                                                      for a in args)
    operands = _operands(args)
    if program in _PATTERN_FIRST and not pattern_given:
        operands = operands[1:]
    if program == "uniq" and len(operands) > 1:
        ctx.not_proven("uniq with an output file")
        return
    if program == "mkdir":
        for target in operands:
            problem = unproven_access(target, ctx, write=True)
            if problem is not None:
                ctx.not_proven(f"makes a directory: {problem}")
        return
    if program == "ls" and not operands:
        operands = ["."]
    for operand in operands:
        if operand != "-":
            _read(operand, ctx)


def _operands(args: list[str]) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            out.extend(args[i + 1:])
            break
        if arg.startswith("-") and arg != "-":
            i += 2 if arg in _OPTION_VALUES else 1
            continue
        out.append(arg)
        i += 1
    return out


def _pip_only_reads(args: list[str]) -> bool:
    if args in (["--version"], ["-V"]):
        return True
    if not args or args[0] not in ("list", "freeze", "show"):
        return False
    return not any(a.startswith(("-o", "--outdated", "-u", "--uptodate", "-i", "--index", "--extra-index",
                                 "--path", "--user", "-e", "--find-links", "-f")) for a in args[1:])


def _read(target: str, ctx: Context) -> None:
    problem = unproven_access(target, ctx, write=False)
    if problem is not None:
        ctx.not_proven(f"reads {problem}")


def _write(target: str, ctx: Context) -> None:
    problem = unproven_access(target, ctx, write=True, suffixes=A.DATA_SUFFIXES)
    if problem is not None:
        ctx.not_proven(f"writes {problem}")


__all__ = ["prove_pipeline"]
