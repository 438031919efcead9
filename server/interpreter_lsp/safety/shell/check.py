"""Checking shell code: every command by what it does (through the handler for its name, after wrappers
such as sudo, env, nohup and xargs are stripped), and every pipeline by how its stages feed each other.
"""

from __future__ import annotations

import posixpath
import re
import shlex

from interpreter_lsp.safety.context import Context
from interpreter_lsp.safety.places import PathKind, Target, check_read, check_write, classify_path
from interpreter_lsp.safety.rules import (
    DOWNLOADERS,
    ENV_DUMPERS,
    NETWORK_SENDERS,
    PLAIN_WRAPPERS,
    PRIVILEGE_COMMANDS,
    READERS,
    SCHEDULERS,
    SHOWERS,
    WRAPPER_COMMANDS,
)
from interpreter_lsp.safety.shell import execution, files, network, remote, system
from interpreter_lsp.safety.shell.call import Call, Handler, skip_options
from interpreter_lsp.safety.shell.parse import Command, Pipeline, parse_script
from interpreter_lsp.safety.shell.proof import prove_pipeline

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
    script = parse_script(code, lambda: ctx.step(now=True))
    if not script.parsed:
        ctx.add("medium", "the shell code could not be fully parsed, so it was only checked word by word")
    if script.spelled:
        ctx.add("medium", "spells text by character codes ($'\\x..'), which hides what it says")
    if not script.parsed:
        ctx.not_proven("shell code the parser could not read in full")
    for pipeline in script.pipelines:
        ctx.step()
        prove_pipeline(pipeline, ctx)  # before the rules move ctx.cwd past this pipeline's `cd`
        _check_pipeline(pipeline, ctx)


def _check_pipeline(pipeline: Pipeline, ctx: Context) -> None:
    upstream: set[str] = set()  # what earlier stages feed this one: "download", "decoded", "env" ...
    text: str | None = None  # what the previous stage prints, when it is plain text (echo, printf)
    for index, command in enumerate(pipeline):
        tags = _check_command(command, ctx, upstream if index > 0 else set(), piped=index > 0, stdin_text=text)
        upstream |= tags
        text = _printed_text(command)


def _printed_text(command: Command) -> str | None:
    """What `echo …`, `printf …` or `cat <<EOF` writes, when every word is known."""
    words = command.words
    if not words or any("$" in w or "`" in w for w in words):
        return None
    if words[0] == "echo":
        args = words[1:]
        while args and args[0] in ("-n", "-e", "-E", "-ne", "-en"):
            args = args[1:]
        return " ".join(args)
    if words[0] == "printf" and len(words) > 1:
        template, args = words[1], words[2:]
        if "%" in template and args:
            return "\n".join(args)
        return template.replace("\\n", "\n")
    if words[0] == "cat" and len(words) == 1 and command.heredoc is not None:
        return command.heredoc
    return None


def _check_command(
    command: Command, ctx: Context, upstream: set[str], piped: bool, stdin_text: str | None = None
) -> set[str]:
    tags: set[str] = set()
    for name in command.inner_names:
        if name in DOWNLOADERS:
            tags.add("download")
        if name in ENV_DUMPERS:
            tags.add("env")
    for operator, target in command.redirects:
        if operator == "<<<":  # a here-string: its text is the command's input, not a file
            stdin_text, piped = target, True
            continue
        where = classify_path(target, ctx)
        if operator == "<":
            check_read(where, ctx, shows=False)
            if where.kind in (PathKind.CREDENTIAL, PathKind.HISTORY, PathKind.DOTENV):
                tags.add("secrets")
        else:
            check_write(where, ctx)
            ctx.wrote(target, _printed_text(command))
    remote.set_variables([tuple(a.split("=", 1)) for a in command.assignments], ctx)  # type: ignore[misc]
    words = [w for w in command.words if w != ""]
    if not words:
        return tags
    call = _unwrap(words, command, upstream, piped, ctx, stdin_text)
    if call is None:
        return tags
    call.tags = tags
    call.stdin_text = stdin_text if piped else None
    if "$" in call.program or "`" in call.program:
        ctx.add("medium", f"runs a command whose name is only known at run time: {_shorten(call.program)}")
    elif "/" in call.program and ctx.runs_written_here(call.program, _language_of(call.program)):
        pass
    elif "/" in call.program and ctx.was_written(call.program):
        ctx.add("medium", f"runs {call.program}, written earlier in this session (its content was not rated)")
    handler = _HANDLERS.get(call.name)
    if handler is None and call.name.startswith("mkfs"):
        handler = files.disk
    if handler is not None:
        handler(call, ctx)
    else:
        system.generic(call, ctx)
    extra = remote.HANDLERS.get(call.name)  # config that runs later, wrappers, remote destruction
    if extra is not None and extra is not handler:
        extra(call, ctx)
    if call.name == "git":
        remote.git_config_key(call, ctx)
    _check_file_arguments(call, ctx)
    network.check_secrets_sent(call, ctx)
    return call.tags


def _unwrap(
    words: list[str], command: Command, upstream: set[str], piped: bool, ctx: Context, stdin_text: str | None
) -> Call | None:
    """Strip sudo, env, nohup, xargs, busybox ... and say which command really runs."""
    via_xargs = False
    while words:
        name = posixpath.basename(words[0])
        if re.fullmatch(r"\w+=.*", words[0]):
            words = words[1:]
            continue
        if name in PRIVILEGE_COMMANDS:
            rest = words[1:]
            if name in ("sudo", "doas") and _only_checks_rights(rest):
                ctx.add("medium", f"checks administrator rights ({' '.join(words[:3])})")
                return None
            ctx.add("high", f"runs a command as administrator or another user ({name})")
            if name == "su":
                for i, arg in enumerate(rest):
                    if arg in ("-c", "--command") and i + 1 < len(rest):
                        ctx.nested("shell", rest[i + 1])
                return None
            words = skip_options(rest, takes_value={"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"})
            continue
        if name == "busybox":
            ctx.add("medium", "runs a command through busybox")
            words = skip_options(words[1:], takes_value=set())
            continue
        if name == "watch":
            ctx.add("medium", "runs a command again and again (watch)")
            rest = skip_options(words[1:], takes_value={"-n", "--interval", "-d", "-q", "--equexit"})
            if rest:  # watch hands its words to `sh -c`
                ctx.nested("shell", " ".join(rest))
            return None
        if name in SCHEDULERS:
            _schedule(name, words[1:], stdin_text if piped else None, ctx)
            return None
        if name in WRAPPER_COMMANDS:
            if name not in PLAIN_WRAPPERS:
                ctx.add("medium", f"runs a command through {name}")
            if name == "xargs":
                rest = _xargs(words[1:], stdin_text if piped else None, ctx)
                via_xargs = True
                if "decoded" in upstream or "download" in upstream:
                    ctx.add("high", "runs a command on arguments that were hidden (encoded) or downloaded (xargs)")
            elif name == "env":
                rest = _env(words[1:], ctx)
            else:
                takes = {"-n", "-s", "-c", "-u", "-P", "-I", "-L", "-d", "-E", "-a", "-k", "-S", "-o", "-e", "-C"}
                rest = skip_options(words[1:], takes_value=takes)
                if name in ("timeout",) and rest:
                    rest = rest[1:]
            if not rest:  # `env` alone prints the environment; `xargs` alone echoes
                break
            words = rest
            continue
        break
    if not words:
        return None
    return Call(name=posixpath.basename(words[0]), args=words[1:], command=command, upstream=upstream,
                piped=piped, via_xargs=via_xargs, program=words[0])


_SUDO_VALUE_OPTIONS = {"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "--user", "--group", "--prompt"}
_HARMLESS_AS_ROOT = frozenset({"true", "false", ":", "id", "whoami", "echo"})


def _only_checks_rights(args: list[str]) -> bool:
    """`sudo -n true`, `sudo --version`, `sudo -v`, `sudo -l`, `sudo -k`: nothing runs as root but a check.
    Not `sudo -s`/`-i`/`-e` (a root shell, an edit as root)."""
    flags: set[str] = set()
    i = 0
    while i < len(args) and args[i].startswith("-"):
        if args[i] == "--":
            i += 1
            break
        flags.add(args[i])
        i += 2 if args[i] in _SUDO_VALUE_OPTIONS else 1
    rest = args[i:]
    if flags & {"-s", "-i", "-e", "--shell", "--login", "--edit", "-E", "--preserve-env"} or any(
            f.startswith("-") and not f.startswith("--") and set(f[1:]) & {"s", "i", "e"} for f in flags):
        return False
    return not rest or (rest[0] in _HARMLESS_AS_ROOT and all("$" not in w and "`" not in w for w in rest))


def _env(args: list[str], ctx: Context) -> list[str]:
    """The command `env [options] [NAME=value ...] command` runs; `env -S "a b"` splits its string."""
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-u", "--unset", "-C", "--chdir") and i + 1 < len(args):
            i += 2
        elif arg in ("-S", "--split-string") and i + 1 < len(args):
            return _split(args[i + 1]) + args[i + 2:]
        elif arg.startswith("-S") and len(arg) > 2:
            return _split(arg[2:]) + args[i + 1:]
        elif arg == "--":
            i += 1
            break
        elif (arg.startswith("-") and arg != "-") or ("=" in arg and not arg.startswith("=")):
            i += 1
        else:
            break
    rest = args[i:]
    while rest and "=" in rest[0]:
        rest = rest[1:]
    return rest


def _split(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


_XARGS_TAKES_VALUE = frozenset({"-n", "-s", "-L", "-d", "-E", "-P", "-e", "--max-args", "--max-procs",
                                "--delimiter", "--eof", "--max-chars", "--max-lines"})


def _xargs(args: list[str], stdin_text: str | None, ctx: Context) -> list[str]:
    """The command xargs runs, with the arguments it reads filled in when the text piped to it is known."""
    placeholder: str | None = None
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        arg = args[i]
        if arg == "--":
            i += 1
            break
        if arg in ("-I", "--replace") and i + 1 < len(args):
            placeholder = args[i + 1]
            i += 1
        elif arg.startswith("-I") and len(arg) > 2:
            placeholder = arg[2:]
        elif arg in ("-i",) or arg.startswith("--replace="):
            placeholder = arg.partition("=")[2] or "{}"
        elif arg in ("-a", "--arg-file") or arg.startswith("--arg-file="):
            ctx.add("medium", "runs a command on arguments read from a file (xargs -a)")
            i += 1 if arg == "-a" or arg == "--arg-file" else 0
        elif arg in _XARGS_TAKES_VALUE:
            i += 1
        i += 1
    rest = args[i:]
    if stdin_text is None:
        return rest
    inputs = stdin_text.split("\n" if placeholder else None)
    inputs = [item.strip() for item in inputs if item.strip()][:_XARGS_INPUTS]
    if placeholder is None:
        return rest + inputs
    filled: list[str] = []
    for word in rest:
        if word == placeholder:
            filled.extend(inputs)
        else:
            filled.append(word.replace(placeholder, inputs[0]) if inputs and placeholder in word else word)
    return filled


_XARGS_INPUTS = 16


def _schedule(name: str, args: list[str], stdin_text: str | None, ctx: Context) -> None:
    """`at` and `batch` run their commands later, outside this session (and outside any sandbox)."""
    if args and args[0] in ("-l", "-c", "-r", "-d", "-V"):
        return
    ctx.add("medium", f"schedules commands to run later, outside this session ({name})")
    if stdin_text is not None:
        ctx.nested("shell", stdin_text)


def _language_of(path: str) -> str:
    return "python" if path.endswith(".py") else "shell"


def _shorten(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


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
