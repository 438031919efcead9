"""Checking shell code: every command by what it does (through the handler for its name, after wrappers
such as sudo, env, nohup and xargs are stripped), and every pipeline by how its stages feed each other.
"""

from __future__ import annotations

import posixpath
import re

from interpreter_lsp.safety.context import Context
from interpreter_lsp.safety.places import PathKind, Target, check_read, check_write, classify_path
from interpreter_lsp.safety.rules import (
    DOWNLOADERS,
    ENV_DUMPERS,
    NETWORK_SENDERS,
    PRIVILEGE_COMMANDS,
    READERS,
    SHOWERS,
    WRAPPER_COMMANDS,
)
from interpreter_lsp.safety.shell import execution, files, network, system
from interpreter_lsp.safety.shell.call import Call, Handler, skip_options
from interpreter_lsp.safety.shell.parse import Command, Pipeline, parse_script

# `name() { name | name & }`, found in linear time: the regex anchors on `() {`, then reads the name before
# it from a bounded window (a backreference regex scanned from every position is quadratic in a long word).
_FUNCTION_OPENING = re.compile(r"\(\s*\)\s*\{")
_NAME_BEFORE = re.compile(r"([\w:.]+)\s*$")
_NAME_WINDOW = 200
_FIRST_WORD = re.compile(r"\s*([\w:.]+)")


def _is_fork_bomb(code: str) -> bool:
    for opening in _FUNCTION_OPENING.finditer(code):
        before = _NAME_BEFORE.search(code, max(0, opening.start() - _NAME_WINDOW), opening.start())
        first = _FIRST_WORD.match(code, opening.end())
        if before is None or first is None or not before.group(1).endswith(first.group(1)):
            continue
        word = re.escape(first.group(1))
        if re.compile(rf"\s*{word}\s*\|\s*{word}\s*&\s*;?\s*\}}").match(code, opening.end()):
            return True
    return False


def assess_shell(code: str, ctx: Context) -> None:
    """Add what `code` (shell) risks to `ctx.findings`."""
    if _is_fork_bomb(code):
        ctx.add("high", "starts processes without end until the machine stops (fork bomb)")
    pipelines, parsed = parse_script(code)
    if not parsed:
        ctx.add("medium", "the shell code could not be fully parsed, so it was only checked word by word")
    for pipeline in pipelines:
        _check_pipeline(pipeline, ctx)


def _check_pipeline(pipeline: Pipeline, ctx: Context) -> None:
    upstream: set[str] = set()  # what earlier stages feed this one: "download", "decoded", "env" ...
    for index, command in enumerate(pipeline):
        tags = _check_command(command, ctx, upstream if index > 0 else set(), piped=index > 0)
        upstream |= tags


def _check_command(command: Command, ctx: Context, upstream: set[str], piped: bool) -> set[str]:
    tags: set[str] = set()
    for name in command.inner_names:
        if name in DOWNLOADERS:
            tags.add("download")
        if name in ENV_DUMPERS:
            tags.add("env")
    for operator, target in command.redirects:
        where = classify_path(target, ctx)
        if operator == "<":
            check_read(where, ctx, shows=False)
            if where.kind in (PathKind.CREDENTIAL, PathKind.HISTORY, PathKind.DOTENV):
                tags.add("secrets")
        else:
            check_write(where, ctx)
    words = [w for w in command.words if w != ""]
    if not words:
        return tags
    call = _unwrap(words, command, upstream, piped, ctx)
    if call is None:
        return tags
    call.tags = tags
    handler = _HANDLERS.get(call.name)
    if handler is None and call.name.startswith("mkfs"):
        handler = files.disk
    if handler is not None:
        handler(call, ctx)
    else:
        system.generic(call, ctx)
    _check_file_arguments(call, ctx)
    return call.tags


def _unwrap(words: list[str], command: Command, upstream: set[str], piped: bool, ctx: Context) -> Call | None:
    """Strip sudo, env, nohup, xargs ... and say which command really runs."""
    via_xargs = False
    while words:
        name = posixpath.basename(words[0])
        if re.fullmatch(r"\w+=.*", words[0]):
            words = words[1:]
            continue
        if name in PRIVILEGE_COMMANDS:
            ctx.add("high", f"runs a command as administrator or another user ({name})")
            rest = words[1:]
            if name == "su":
                for i, arg in enumerate(rest):
                    if arg in ("-c", "--command") and i + 1 < len(rest):
                        ctx.nested("shell", rest[i + 1])
                return None
            words = skip_options(rest, takes_value={"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"})
            continue
        if name in WRAPPER_COMMANDS:
            takes = {"-n", "-s", "-c", "-u", "-P", "-I", "-L", "-d", "-E", "-a", "-k", "-S", "-o", "-e"}
            rest = skip_options(words[1:], takes_value=takes)
            if name in ("timeout",) and rest:
                rest = rest[1:]
            while name == "env" and rest and "=" in rest[0]:
                rest = rest[1:]
            if not rest:  # `env` alone prints the environment; `xargs` alone echoes
                break
            via_xargs = via_xargs or name == "xargs"
            words = rest
            continue
        break
    if not words:
        return None
    return Call(name=posixpath.basename(words[0]), args=words[1:], command=command, upstream=upstream,
                 piped=piped, via_xargs=via_xargs)


def _check_file_arguments(call: Call, ctx: Context) -> None:
    """Any argument naming a credential or history file: reading it is an alarm, mentioning it a note."""
    if call.name in ("ls", "stat", "test", "[", "mkdir", "touch", "ssh-keygen", "ssh-add", "ssh", "chmod",
                     "chown", "rm", "rmdir", "shred", "find", "git", "du", "file", "echo", "printf",
                     "cd", "mv", "docker", "podman", "tee", "truncate", "dd"):
        return
    reads = call.name in READERS
    shows = call.name in SHOWERS
    for arg in call.args:
        if arg.startswith("-") and "=" not in arg:
            continue
        value = arg.split("=", 1)[1] if arg.startswith("-") else arg
        value = value.lstrip("@")
        if not value or ("/" not in value and not value.startswith((".", "~", "$"))):
            if value not in ("id_rsa", "id_ed25519", "id_ecdsa", "id_dsa"):
                continue
        where: Target = classify_path(value, ctx)
        if where.kind in (PathKind.CREDENTIAL, PathKind.HISTORY, PathKind.DOTENV):
            call.tags.add("secrets")
            if reads or (where.kind is not PathKind.DOTENV and call.name in NETWORK_SENDERS):
                check_read(where, ctx, shows=shows)
            elif where.kind is not PathKind.DOTENV:
                ctx.add("medium", f"uses credentials: {where.shown}")


# Families in the order their tables were first merged: a later family wins a name two of them claim.
_HANDLERS: dict[str, Handler] = {**files.HANDLERS, **network.HANDLERS, **execution.HANDLERS, **system.HANDLERS}
