"""Risk rules for shell code, read through a real parser (bashlex) with a word-by-word fallback.

The script becomes a list of pipelines of simple commands (words, redirects, here-documents); every
command is then checked by what it does (rm, dd, curl | sh ...) and every pipeline by how its stages
feed each other (a download piped into an interpreter, the environment piped to the network).
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from interpreter_lsp.safety.rules import (
    ACCOUNT_COMMANDS,
    CLOUD_DESTROY,
    DECODERS,
    DISK_COMMANDS,
    DOWNLOADERS,
    ENV_DUMPERS,
    FIREWALL_COMMANDS,
    KERNEL_MODULE_COMMANDS,
    KILL_BY_NAME,
    MAX_DEPTH,
    NETWORK_SENDERS,
    OFFICIAL_INDEX_HOSTS,
    PACKAGE_MANAGERS,
    PACKAGE_REMOVE_SUBCOMMANDS,
    POWER_COMMANDS,
    PRIVILEGE_COMMANDS,
    READERS,
    SCRIPT_INTERPRETERS,
    SECRET_WORDS,
    SHELLS,
    SHOWERS,
    SYSTEMCTL_POWER,
    WRAPPER_COMMANDS,
    Context,
    PathKind,
    Target,
    check_delete,
    check_read,
    check_write,
    classify_path,
)

_FORK_BOMB = re.compile(r"([\w:.]+)\s*\(\s*\)\s*\{\s*\1\s*\|\s*\1\s*&\s*;?\s*\}")
_HEREDOC_START = re.compile(r"<<(-?)[ \t]*(['\"]?)([\w.-]+)\2")
_DOUBLE_BRACKET = re.compile(r"(?<![\w\]])\[\[(?=\s)|(?<=\s)\]\](?![\w\[])")
_ARITHMETIC = re.compile(r"\$\(\([^()]*(?:\([^()]*\)[^()]*)*\)\)")
_HEREDOC_WORD = "__HEREDOC_{}__"
_MAX_LOOP_VALUES = 4
_REMOTE_SPEC = re.compile(r"^([\w.-]+@)?[\w.-]+:")


@dataclass
class Command:
    words: list[str]
    redirects: list[tuple[str, str]] = field(default_factory=list)  # (operator, target)
    heredoc: str | None = None
    inner_names: set[str] = field(default_factory=set)  # commands inside $(...), <(...), { ...; }
    runs_downloaded_text: bool = False  # a word holds what a download returned


Pipeline = list[Command]


# --- Parsing -------------------------------------------------------------------------------------------


def _extract_heredocs(code: str) -> tuple[str, list[str]]:
    """Cut here-document bodies out of the script: `<<EOF` becomes `< __HEREDOC_n__`."""
    lines = code.split("\n")
    out: list[str] = []
    bodies: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        pending: list[tuple[bool, str]] = []

        def _replace(match: re.Match[str], line: str = line, pending: list[tuple[bool, str]] = pending) -> str:
            if match.start() > 0 and line[match.start() - 1] == "<":  # <<< here-string
                return match.group(0)
            pending.append((match.group(1) == "-", match.group(3)))
            return "< " + _HEREDOC_WORD.format(len(bodies) + len(pending) - 1)

        out.append(_HEREDOC_START.sub(_replace, line))
        i += 1
        for strip_tabs, delimiter in pending:
            body: list[str] = []
            while i < len(lines):
                candidate = lines[i].lstrip("\t") if strip_tabs else lines[i]
                i += 1
                if candidate.strip() == delimiter:
                    break
                body.append(lines[i - 1])
            bodies.append("\n".join(body))
    return "\n".join(out), bodies


def _parse_with_bashlex(text: str, heredocs: list[str]) -> list[Pipeline] | None:
    import bashlex  # lazy: ~90 ms to import, only when shell code is assessed

    text = _DOUBLE_BRACKET.sub(lambda m: "[" if m.group(0) == "[[" else "]", text)
    text = _ARITHMETIC.sub("0", text)
    if not text.strip():
        return []
    try:
        trees = bashlex.parse(text)
    except Exception:  # bashlex raises its own errors and NotImplementedError for unsupported syntax
        return None
    walker = _BashlexWalker(heredocs)
    try:
        for tree in trees:
            walker.visit(tree)
    except (AttributeError, IndexError, TypeError, RecursionError):
        return None
    return walker.pipelines


class _BashlexWalker:
    """Turns bashlex's tree into pipelines, expanding variables whose values are known."""

    def __init__(self, heredocs: list[str]) -> None:
        self.pipelines: list[Pipeline] = []
        self.heredocs = heredocs
        self.values: dict[str, str] = {}
        self.downloaded_vars: set[str] = set()

    def visit(self, node: Any) -> None:
        kind = node.kind
        if kind == "pipeline":
            stages = [self._stage(part) for part in node.parts if part.kind not in ("pipe", "reservedword")]
            self.pipelines.append(stages)
        elif kind in ("command", "compound"):
            self.pipelines.append([self._stage(node)])
        elif kind == "for":
            self._visit_for(node)
        elif kind == "function":
            self._visit_children(node.parts[1:])
        else:
            self._visit_children(getattr(node, "parts", None) or getattr(node, "list", None) or [])

    def _visit_children(self, nodes: Iterable[Any]) -> None:
        for child in nodes:
            if child.kind in ("list", "pipeline", "command", "compound", "for", "if", "while", "until",
                              "function"):
                self.visit(child)

    def _visit_for(self, node: Any) -> None:
        parts = node.parts
        name = parts[1].word if len(parts) > 1 and parts[1].kind == "word" else None
        values: list[str] = []
        body: list[Any] = []
        seen_in = False
        for part in parts[2:]:
            if part.kind == "reservedword" and part.word == "in":
                seen_in = True
            elif part.kind == "reservedword" and part.word in (";", "do", "done"):
                seen_in = False
            elif part.kind == "word" and seen_in:
                values.append(self._expand(part.word))
            elif part.kind != "reservedword":
                body.append(part)
        if name is None or not values:
            self._visit_children(body)
            return
        saved = self.values.get(name)
        for value in values[:_MAX_LOOP_VALUES]:
            self.values[name] = value
            self._visit_children(body)
        if saved is None:
            self.values.pop(name, None)
        else:
            self.values[name] = saved

    def _expand(self, word: str) -> str:
        def _lookup(match: re.Match[str]) -> str:
            name = match.group(1) or match.group(2)
            return self.values.get(name, match.group(0))

        return re.sub(r"\$\{(\w+)\}|\$(\w+)", _lookup, word)

    def _stage(self, node: Any) -> Command:
        command = Command(words=[])
        if node.kind == "compound":
            before = len(self.pipelines)
            self._visit_children(node.list)
            for pipeline in self.pipelines[before:]:
                for stage in pipeline:
                    if stage.words:
                        command.inner_names.add(posixpath.basename(stage.words[0]))
                    command.inner_names |= stage.inner_names
            for redirect in getattr(node, "redirects", []) or []:
                self._redirect(redirect, command)
            return command
        for part in node.parts:
            if part.kind == "word":
                self._substitutions(part, command)
                if any(f"${v}" in part.word or f"${{{v}}}" in part.word for v in self.downloaded_vars):
                    command.runs_downloaded_text = True
                command.words.append(self._expand(part.word))
            elif part.kind == "assignment":
                inner_before = set(command.inner_names)
                self._substitutions(part, command)
                name, _, value = part.word.partition("=")
                if command.inner_names - inner_before & DOWNLOADERS:
                    self.downloaded_vars.add(name)
                if "$(" in value or "`" in value:
                    self.values.pop(name, None)
                else:
                    self.values[name] = self._expand(value)
            elif part.kind == "redirect":
                self._redirect(part, command)
        return command

    def _substitutions(self, node: Any, command: Command) -> None:
        for child in getattr(node, "parts", None) or []:
            if child.kind in ("commandsubstitution", "processsubstitution"):
                before = len(self.pipelines)
                self.visit(child.command)
                for pipeline in self.pipelines[before:]:
                    for stage in pipeline:
                        if stage.words:
                            command.inner_names.add(posixpath.basename(stage.words[0]))
                        command.inner_names |= stage.inner_names
            else:
                self._substitutions(child, command)

    def _redirect(self, node: Any, command: Command) -> None:
        heredoc = getattr(node, "heredoc", None)
        if heredoc is not None:
            command.heredoc = heredoc.value
            return
        output = node.output
        if not hasattr(output, "word"):
            return  # 2>&1 and the like
        target = self._expand(output.word)
        match = re.fullmatch(r"__HEREDOC_(\d+)__", target)
        if match and int(match.group(1)) < len(self.heredocs):
            command.heredoc = self.heredocs[int(match.group(1))]
            return
        command.redirects.append((node.type, target))


_RESERVED = frozenset({"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "case", "esac",
                       "{", "}", "!", "function", "in", "[[", "]]", "time", "select"})
_SEPARATORS = frozenset({";", ";;", "&&", "||", "&", "(", ")", "\n"})
_REDIRECT_OPS = frozenset({">", ">>", "<", ">|", "&>", "&>>", ">&", "<>"})


def _parse_tokens(text: str, heredocs: list[str]) -> list[Pipeline]:
    """Fallback for code bashlex cannot parse: shell words split per line, joined into commands."""
    text = text.replace("\\\n", " ")
    tokens: list[str] = []
    for line in text.split("\n"):
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()<>")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        try:
            tokens.extend(lexer)
        except ValueError:
            tokens.extend(line.split())
        tokens.append("\n")
    pipelines: list[Pipeline] = []
    stages: Pipeline = []
    current = Command(words=[])
    pending_redirect: str | None = None

    def _end_stage() -> None:
        nonlocal current
        while current.words and current.words[0] in _RESERVED:
            current.words.pop(0)
        if current.words or current.redirects or current.heredoc is not None:
            stages.append(current)
        current = Command(words=[])

    for token in tokens:
        if pending_redirect is not None:
            match = re.fullmatch(r"__HEREDOC_(\d+)__", token)
            if match and int(match.group(1)) < len(heredocs):
                current.heredoc = heredocs[int(match.group(1))]
            else:
                current.redirects.append((pending_redirect, token))
            pending_redirect = None
        elif token in _REDIRECT_OPS:
            pending_redirect = token
        elif token == "|" or token == "|&":
            _end_stage()
        elif token in _SEPARATORS or set(token) <= set(";&|()"):
            _end_stage()
            if stages:
                pipelines.append(stages)
            stages = []
        else:
            current.words.append(token)
    _end_stage()
    if stages:
        pipelines.append(stages)
    return pipelines


# --- Checking ------------------------------------------------------------------------------------------


def assess_shell(code: str, ctx: Context) -> None:
    """Add what `code` (shell) risks to `ctx.findings`."""
    if ctx.depth > MAX_DEPTH:
        ctx.add("medium", "code nested too deep to check (code that writes code that runs code)")
        return
    if _FORK_BOMB.search(code):
        ctx.add("high", "starts processes without end until the machine stops (fork bomb)")
    text, heredocs = _extract_heredocs(code)
    pipelines = _parse_with_bashlex(text, heredocs)
    if pipelines is None:
        ctx.add("medium", "the shell code could not be fully parsed, so it was only checked word by word")
        pipelines = _parse_tokens(text, heredocs)
    for pipeline in pipelines:
        _check_pipeline(pipeline, ctx)


def _check_pipeline(pipeline: Pipeline, ctx: Context) -> None:
    upstream: set[str] = set()  # what earlier stages feed this one: "download", "decoded", "env" ...
    for index, command in enumerate(pipeline):
        tags = _check_command(command, ctx, upstream if index > 0 else set(), piped=index > 0)
        upstream |= tags


@dataclass
class _Call:
    """One command as checked: its name after wrappers, its arguments, and its surroundings."""

    name: str
    args: list[str]
    command: Command
    upstream: set[str]
    piped: bool
    via_xargs: bool = False
    tags: set[str] = field(default_factory=set)


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
        handler = _disk
    if handler is not None:
        handler(call, ctx)
    else:
        _generic(call, ctx)
    _check_file_arguments(call, ctx)
    return call.tags


def _unwrap(words: list[str], command: Command, upstream: set[str], piped: bool, ctx: Context) -> _Call | None:
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
                        _nested_shell(rest[i + 1], ctx)
                return None
            words = _skip_options(rest, takes_value={"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"})
            continue
        if name in WRAPPER_COMMANDS:
            takes = {"-n", "-s", "-c", "-u", "-P", "-I", "-L", "-d", "-E", "-a", "-k", "-S", "-o", "-e"}
            rest = _skip_options(words[1:], takes_value=takes)
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
    return _Call(name=posixpath.basename(words[0]), args=words[1:], command=command, upstream=upstream,
                 piped=piped, via_xargs=via_xargs)


def _skip_options(words: list[str], takes_value: set[str]) -> list[str]:
    i = 0
    while i < len(words) and words[i].startswith("-") and words[i] != "-":
        if words[i] == "--":
            return words[i + 1:]
        i += 2 if words[i] in takes_value else 1
    return words[i:]


def _split_flags(args: list[str], takes_value: Iterable[str] = ()) -> tuple[set[str], list[str]]:
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


def _nested_shell(code: str, ctx: Context) -> None:
    ctx.depth += 1
    try:
        assess_shell(code, ctx)
    finally:
        ctx.depth -= 1


def _nested_python(code: str, ctx: Context) -> None:
    from interpreter_lsp.safety.python_rules import assess_python

    ctx.depth += 1
    try:
        assess_python(code, ctx)
    finally:
        ctx.depth -= 1


# --- Command handlers ----------------------------------------------------------------------------------


def _rm(call: _Call, ctx: Context) -> None:
    flags, targets = _split_flags(call.args)
    recursive = bool(flags & {"r", "R", "--recursive"})
    if "--no-preserve-root" in flags:
        ctx.add("high", "deletes with the root-directory safeguard turned off (--no-preserve-root)")
    if not targets and call.via_xargs:
        if "find-outside" in call.upstream:
            ctx.add("high", "deletes files that a search outside the workspace found")
        else:
            ctx.add("medium", "deletes files listed by another command")
    for target in targets:
        check_delete(classify_path(target, ctx), ctx, recursive=recursive)


def _rmdir(call: _Call, ctx: Context) -> None:
    _, targets = _split_flags(call.args)
    for target in targets:
        check_delete(classify_path(target, ctx), ctx, recursive=False)


def _shred(call: _Call, ctx: Context) -> None:
    _, targets = _split_flags(call.args, takes_value={"-n", "-s", "--iterations", "--size"})
    for target in targets:
        where = classify_path(target, ctx)
        if where.kind is PathKind.DEVICE:
            ctx.add("high", f"destroys a disk beyond recovery: {where.shown}")
        else:
            check_delete(where, ctx, recursive=False)
            ctx.add("medium", f"destroys a file beyond recovery: {where.shown}")


def _find(call: _Call, ctx: Context) -> None:
    roots: list[str] = []
    for arg in call.args:
        if arg.startswith(("-", "(", "!")) or arg in ("(", "!"):
            break
        roots.append(arg)
    roots = roots or ["."]
    deletes = "-delete" in call.args
    for i, arg in enumerate(call.args):
        if arg in ("-exec", "-execdir", "-ok", "-okdir") and i + 1 < len(call.args):
            if posixpath.basename(call.args[i + 1]) in ("rm", "shred", "unlink", "rmdir"):
                deletes = True
    for root in roots:
        where = classify_path(root, ctx)
        outside = where.kind not in (PathKind.WORKSPACE, PathKind.WORKSPACE_ROOT, PathKind.TEMP,
                                     PathKind.HARMLESS_DEVICE)
        if outside:
            call.tags.add("find-outside")
        if deletes:
            if where.kind is PathKind.WORKSPACE_ROOT:
                continue  # `find . -name '*.pyc' -delete` picks files inside the workspace
            if where.kind is PathKind.UNKNOWN:
                ctx.add("medium", f"deletes the files it finds at a path only known at run time: {where.shown}")
            elif outside:
                ctx.add("high", f"deletes the files it finds outside the workspace: {where.shown}")


def _mv(call: _Call, ctx: Context) -> None:
    _, operands = _split_flags(call.args, takes_value={"-t", "-S", "--target-directory", "--suffix"})
    if len(operands) < 2:
        return
    *sources, destination = operands
    for source in sources:
        check_delete(classify_path(source, ctx), ctx, recursive=True, unknown_matters=False, action="moves")
    check_write(classify_path(destination, ctx), ctx, verb="moves files")


def _cp(call: _Call, ctx: Context) -> None:
    _, operands = _split_flags(call.args, takes_value={"-t", "-S", "--target-directory", "--suffix"})
    if len(operands) < 2:
        return
    check_write(classify_path(operands[-1], ctx), ctx, verb="copies files")


def _dd(call: _Call, ctx: Context) -> None:
    for arg in call.args:
        key, _, value = arg.partition("=")
        if key == "of":
            check_write(classify_path(value, ctx), ctx)
        elif key == "if":
            check_read(classify_path(value, ctx), ctx, shows=False)


def _disk(call: _Call, ctx: Context) -> None:
    _, operands = _split_flags(call.args)
    devices = [t for t in (classify_path(o, ctx) for o in operands) if t.kind is PathKind.DEVICE]
    if devices or (call.name in ("wipefs", "blkdiscard", "badblocks", "hdparm", "dmsetup") and operands):
        shown = devices[0].shown if devices else " ".join(operands)
        ctx.add("high", f"formats or wipes a disk ({call.name} {shown})")
    else:
        ctx.add("medium", f"partitions or formats a disk image ({call.name})")


def _world_writable(mode: str) -> bool:
    if mode.isdigit():
        return mode[-1] in "2367"
    for clause in mode.split(","):
        match = re.match(r"([ugoa]*)([+=])([rwxXst]*)", clause)
        if match and ("o" in match.group(1) or "a" in match.group(1)) and "w" in match.group(3):
            return True
    return False


def _setuid(mode: str) -> bool:
    if mode.isdigit():
        return len(mode) == 4 and mode[0] in "4567"
    return bool(re.search(r"(^|,)[ug]*[+=][rwxX]*s", mode))


def _chmod(call: _Call, ctx: Context) -> None:
    flags, operands = _split_flags(call.args, takes_value={"--reference"})
    if not operands:
        return
    mode, targets = operands[0], operands[1:]
    recursive = bool(flags & {"R", "--recursive"})
    wide_open = _world_writable(mode)
    if _setuid(mode):
        ctx.add("high", f"makes a program run with its owner's rights (setuid): chmod {mode}")
    for target in targets:
        where = classify_path(target, ctx)
        inside = where.kind in (PathKind.WORKSPACE, PathKind.TEMP)
        if recursive and wide_open:
            ctx.add("high", f"makes files writable by everyone, recursively: chmod -R {mode} {where.shown}")
        elif where.kind in (PathKind.SYSTEM, PathKind.CREDENTIAL, PathKind.STARTUP, PathKind.ROOT,
                            PathKind.HOME, PathKind.DEVICE, PathKind.HISTORY):
            ctx.add("high", f"changes permissions of {where.shown}")
        elif recursive and not inside:
            ctx.add("high", f"changes permissions recursively outside the workspace: {where.shown}")
        elif wide_open:
            ctx.add("medium", f"makes a file writable by everyone: chmod {mode} {where.shown}")
        elif not inside and where.kind is not PathKind.WORKSPACE_ROOT:
            ctx.add("medium", f"changes permissions outside the workspace: {where.shown}")


def _chown(call: _Call, ctx: Context) -> None:
    flags, operands = _split_flags(call.args, takes_value={"--reference", "--from"})
    recursive = bool(flags & {"R", "--recursive"})
    for target in operands[1:]:
        where = classify_path(target, ctx)
        inside = where.kind in (PathKind.WORKSPACE, PathKind.WORKSPACE_ROOT, PathKind.TEMP)
        if where.kind in (PathKind.SYSTEM, PathKind.ROOT, PathKind.HOME, PathKind.CREDENTIAL) or (
            recursive and not inside
        ):
            ctx.add("high", f"changes the owner of {where.shown}")
        else:
            ctx.add("medium", f"changes the owner of {where.shown}")


_CURL_DATA_OPTIONS = frozenset({"-d", "--data", "--data-binary", "--data-raw", "--data-urlencode", "-F",
                                "--form", "-T", "--upload-file", "--post-file", "--post-data",
                                "--body-file", "--json"})
_CURL_OUTPUT_OPTIONS = frozenset({"-o", "--output", "-O", "--output-document"})


def _downloader(call: _Call, ctx: Context) -> None:
    call.tags.add("download")
    args = call.args
    for i, arg in enumerate(args):
        option, _, inline = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        value = inline or (args[i + 1] if i + 1 < len(args) else "")
        if option in _CURL_DATA_OPTIONS or (option.startswith("-d") and len(option) > 2):
            if option.startswith("-d") and len(option) > 2 and option not in _CURL_DATA_OPTIONS:
                value = option[2:]
            _check_sent_value(value, call, ctx)
        elif option in _CURL_OUTPUT_OPTIONS and call.name == "wget" and value not in ("-", ""):
            ctx.downloaded.add(_normalise(value, ctx))
            check_write(classify_path(value, ctx), ctx)
        elif option in ("-o", "--output") and call.name == "curl" and value not in ("-", ""):
            ctx.downloaded.add(_normalise(value, ctx))
            check_write(classify_path(value, ctx), ctx)
    urls = [a for a in args if "://" in a]
    if call.name == "wget" and not any(a in ("-O", "-qO-", "-O-") or a.startswith("--output-document")
                                       for a in args):
        for url in urls:
            ctx.downloaded.add(_normalise(url.rstrip("/").rsplit("/", 1)[-1], ctx))
    if call.name == "curl" and any(a in ("-O", "--remote-name") or re.fullmatch(r"-\w*O\w*", a)
                                   for a in args):
        for url in urls:
            ctx.downloaded.add(_normalise(url.rstrip("/").rsplit("/", 1)[-1], ctx))


def _check_sent_value(value: str, call: _Call, ctx: Context) -> None:
    file_part = value.split("@", 1)[1] if "@" in value and not value.startswith("http") else None
    if value.startswith("@") or (file_part is not None and "=" in value.split("@", 1)[0]):
        path = file_part if file_part is not None else value[1:]
        path = path.split(";", 1)[0]
        if path == "-":
            _check_stdin_sent(call, ctx)
            return
        where = classify_path(path, ctx)
        if where.kind in (PathKind.CREDENTIAL, PathKind.HISTORY, PathKind.DOTENV):
            ctx.add("high", f"sends secrets over the network: {where.shown}")
    elif call.name in ("curl", "wget") and value == "-":
        _check_stdin_sent(call, ctx)
    if "env" in call.tags and "$(" in value:
        ctx.add("high", "sends your environment variables (they may hold keys) over the network")


def _check_stdin_sent(call: _Call, ctx: Context) -> None:
    if "env" in call.upstream:
        ctx.add("high", "sends your environment variables (they may hold keys) over the network")
    if "secrets" in call.upstream:
        ctx.add("high", "sends secrets (credentials or shell history) over the network")


def _normalise(path: str, ctx: Context) -> str:
    base = ctx.cwd or ctx.workspace or "."
    return posixpath.normpath(posixpath.join(base, path))


def _netcat(call: _Call, ctx: Context) -> None:
    flags, _ = _split_flags(call.args, takes_value={"-p", "-s", "-w", "-i", "-q"})
    if flags & {"e", "c", "--exec", "--sh-exec", "--lua-exec"}:
        ctx.add("high", f"gives another machine a shell on this one ({call.name} -e)")
    if call.piped:
        _check_stdin_sent(call, ctx)


def _socat(call: _Call, ctx: Context) -> None:
    if any(re.match(r"(?i)(exec|system):", a) for a in call.args):
        ctx.add("high", "connects a network socket to a shell (socat exec)")
    if call.piped:
        _check_stdin_sent(call, ctx)


def _remote_copy(call: _Call, ctx: Context) -> None:
    _, operands = _split_flags(call.args, takes_value={"-e", "-i", "-P", "-p", "-o", "-F", "-c", "-l"})
    if len(operands) < 2:
        return
    *sources, destination = operands
    if _REMOTE_SPEC.match(destination) and "://" not in destination:
        for source in sources:
            where = classify_path(source, ctx)
            if where.kind in (PathKind.CREDENTIAL, PathKind.HISTORY, PathKind.DOTENV):
                ctx.add("high", f"copies secrets to another machine: {where.shown}")
        ctx.add("medium", f"copies files to another machine: {destination}")
    else:
        check_write(classify_path(destination, ctx), ctx, verb="copies files")


_SSH_OPTIONS_WITH_VALUE = frozenset({"-b", "-c", "-D", "-E", "-e", "-F", "-I", "-i", "-J", "-L", "-l", "-m", "-O",
                                     "-o", "-p", "-Q", "-R", "-S", "-W", "-w"})


def _ssh(call: _Call, ctx: Context) -> None:
    ctx.add("medium", "connects to another machine (ssh)")
    if call.piped:
        _check_stdin_sent(call, ctx)
    _, operands = _split_flags(call.args, takes_value=_SSH_OPTIONS_WITH_VALUE)
    if len(operands) > 1:  # a command for the other machine: as dangerous there as here
        _nested_shell(" ".join(operands[1:]), ctx)


def _mail(call: _Call, ctx: Context) -> None:
    if call.piped:
        _check_stdin_sent(call, ctx)


def _runs_stdin(call: _Call, script_args: list[str]) -> bool:
    return call.piped and (not script_args or script_args[0] in ("-", "/dev/stdin"))


def _check_code_from_stdin(call: _Call, ctx: Context) -> None:
    if "download" in call.upstream:
        ctx.add("high", f"downloads code and runs it straight away (… | {call.name})")
    elif "decoded" in call.upstream:
        ctx.add("high", f"runs hidden (encoded) code (… | {call.name})")
    else:
        ctx.add("medium", f"pipes text into an interpreter ({call.name}) to run it")


def _check_script_file(path: str, call: _Call, ctx: Context) -> None:
    if _normalise(path, ctx) in ctx.downloaded:
        ctx.add("high", f"runs a script it just downloaded: {path}")


def _runs_downloaded_file(call: _Call) -> bool:
    """`bash <(curl …)`: the script is a process substitution fed by a download."""
    return "download" in call.tags and any(arg.startswith("<(") for arg in call.args)


def _shell(call: _Call, ctx: Context) -> None:
    args = call.args
    for i, arg in enumerate(args):
        if arg.startswith("-") and "c" in arg[1:] and not arg.startswith("--") and i + 1 < len(args):
            if call.command.runs_downloaded_text or "download" in call.tags:
                ctx.add("high", f"downloads code and runs it straight away ({call.name} -c)")
            _nested_shell(args[i + 1], ctx)
            return
    flags, operands = _split_flags(args, takes_value={"-o", "+o", "-O", "+O"})
    if "s" in flags:
        operands = []  # bash -s: the script comes from stdin, the operands are its arguments
    if call.command.heredoc is not None:
        _nested_shell(call.command.heredoc, ctx)
    if _runs_downloaded_file(call):
        ctx.add("high", f"downloads code and runs it straight away ({call.name} <(curl …))")
    if _runs_stdin(call, operands) and call.command.heredoc is None:
        _check_code_from_stdin(call, ctx)
    elif operands:
        _check_script_file(operands[0], call, ctx)


def _interpreter(call: _Call, ctx: Context) -> None:
    args = call.args
    language = "python" if call.name.startswith(("python", "pypy")) else call.name
    code_options = ("-c",) if language == "python" else ("-e", "-E", "--eval", "-p", "--print", "-r")
    for i, arg in enumerate(args):
        if arg in code_options and i + 1 < len(args):
            if call.command.runs_downloaded_text or "download" in call.tags:
                ctx.add("high", f"downloads code and runs it straight away ({call.name} {arg})")
            if language == "python" and arg == "-c":
                _nested_python(args[i + 1], ctx)
            else:
                ctx.add("medium", f"runs inline {language} code, which cannot be checked")
            return
        if language == "python" and arg == "-m" and i + 1 < len(args):
            module = args[i + 1]
            if module == "pip":
                _package_manager(_Call("pip", args[i + 2:], call.command, call.upstream, call.piped), ctx)
            return
    _, operands = _split_flags(args, takes_value={"-W", "-X", "-I"})
    if _runs_downloaded_file(call):
        ctx.add("high", f"downloads code and runs it straight away ({call.name} <(curl …))")
    if call.command.heredoc is not None:
        if language == "python":
            _nested_python(call.command.heredoc, ctx)
        else:
            ctx.add("medium", f"runs inline {language} code, which cannot be checked")
    elif _runs_stdin(call, operands):
        _check_code_from_stdin(call, ctx)
    elif operands:
        _check_script_file(operands[0], call, ctx)


def _eval(call: _Call, ctx: Context) -> None:
    text = " ".join(call.args)
    if call.command.runs_downloaded_text or "download" in call.tags:
        ctx.add("high", "downloads code and runs it straight away (eval)")
    elif "$" in text or "`" in text:
        ctx.add("medium", "runs a command built at run time (eval)")
    else:
        _nested_shell(text, ctx)


def _source(call: _Call, ctx: Context) -> None:
    if "download" in call.tags or call.command.runs_downloaded_text:
        ctx.add("high", f"downloads code and runs it in this shell ({call.name} <(curl …))")
    elif call.args and call.args[0] in ("/dev/stdin", "-") and call.piped:
        _check_code_from_stdin(call, ctx)
    elif call.args:
        _check_script_file(call.args[0], call, ctx)


def _decoder(call: _Call, ctx: Context) -> None:
    flags, _ = _split_flags(call.args)
    decoding = {
        "base64": flags & {"d", "D", "--decode"},
        "base32": flags & {"d", "--decode"},
        "xxd": flags & {"r", "--revert"},
        "openssl": "d" in flags or "-d" in call.args or "enc" in call.args,
        "uudecode": True,
        "rev": True,
    }.get(call.name, False)
    if decoding:
        call.tags.add("decoded")


_PACKAGE_OPTIONS_WITH_VALUE = frozenset(
    {"-i", "--index-url", "--extra-index-url", "--trusted-host", "-f", "--find-links", "-r", "--requirement",
     "-c", "--constraint", "-t", "--target", "--registry", "--index", "--python", "-p", "--prefix"}
)


def _package_manager(call: _Call, ctx: Context) -> None:
    installs = PACKAGE_MANAGERS.get(call.name, frozenset())
    _, positional = _split_flags(call.args, takes_value=_PACKAGE_OPTIONS_WITH_VALUE)
    sub = positional[0] if positional else (call.args[0] if call.args else "")
    if call.name == "uv" and sub == "pip" and len(positional) > 1:
        sub = positional[1]
    if sub in PACKAGE_REMOVE_SUBCOMMANDS:
        ctx.add("medium", f"removes packages ({call.name} {sub})")
        return
    if sub not in installs and "*" not in installs:
        return
    args = call.args
    for i, arg in enumerate(args):
        option, _, inline = arg.partition("=")
        if option in ("-i", "--index-url", "--extra-index-url", "--trusted-host", "-f", "--find-links",
                      "--registry", "--index"):
            value = inline or (args[i + 1] if i + 1 < len(args) else "")
            host = urlsplit(value).hostname if "://" in value else value
            if host not in OFFICIAL_INDEX_HOSTS:
                ctx.add("high", f"installs packages from an unofficial source: {value}")
    for arg in positional[1:]:
        if re.match(r"^(git\+|hg\+|svn\+|bzr\+)?(https?|ftp|file)://", arg) or arg.startswith("git+"):
            ctx.add("high", f"installs a package straight from a URL (its code runs on install): {arg}")
    names = [a for a in positional[1:] if a not in ("install", "add", "pip")]
    shown = " ".join(names)[:60] or " ".join(a for a in args if a.startswith("-r"))
    ctx.add("medium", f"installs packages ({call.name} {sub} {shown})".replace("  ", " ").rstrip())


def _git(call: _Call, ctx: Context) -> None:
    positional = [a for a in call.args if not a.startswith("-")]
    sub = positional[0] if positional else ""
    flags, _ = _split_flags(call.args)
    if sub == "push":
        if flags & {"f", "--force", "--mirror"} or any(p.startswith("+") for p in positional[1:]):
            ctx.add("high", "overwrites history on the remote (git push --force)")
        elif "--force-with-lease" in flags or "--delete" in flags or "d" in flags:
            ctx.add("medium", "rewrites or deletes branches on the remote (git push)")
        else:
            ctx.add("medium", "publishes commits to a remote (git push)")
    elif sub == "reset" and "--hard" in flags:
        ctx.add("medium", "throws away uncommitted changes (git reset --hard)")
    elif sub == "clean" and flags & {"f", "--force"}:
        ctx.add("medium", "deletes untracked files (git clean -f)")
    elif sub in ("filter-branch", "filter-repo"):
        ctx.add("medium", f"rewrites the project's history (git {sub})")
    elif sub == "checkout" and ("--" in call.args or "." in positional[1:]):
        ctx.add("medium", "throws away uncommitted changes (git checkout)")


def _kill(call: _Call, ctx: Context) -> None:
    args = call.args
    if args and args[0] in ("-s", "-n") and len(args) > 1:
        args = args[2:]
    elif args and args[0].startswith("-") and not args[0] == "-1" and len(args) > 1:
        args = args[1:]
    if any(a in ("-1", "1", "0") for a in args) or any(a.startswith("-") and a[1:].isdigit() for a in args):
        ctx.add("high", "kills every process it can reach (kill -1) or a whole process group")
    elif args and args != ["-l"]:
        ctx.add("medium", "stops a process (kill)")


def _kill_by_name(call: _Call, ctx: Context) -> None:
    ctx.add("high", f"kills every process that matches a name ({call.name})")


def _crontab(call: _Call, ctx: Context) -> None:
    flags, _ = _split_flags(call.args, takes_value={"-u"})
    if "l" in flags:
        return
    if "r" in flags:
        ctx.add("high", "removes all your scheduled jobs (crontab -r)")
    elif "e" in flags:
        ctx.add("medium", "edits your scheduled jobs (crontab -e)")
    else:
        ctx.add("high", "installs scheduled jobs that keep running after this session (crontab)")


def _power(call: _Call, ctx: Context) -> None:
    ctx.add("high", f"shuts down or restarts the machine ({call.name})")


def _init(call: _Call, ctx: Context) -> None:
    if call.args and call.args[0] in ("0", "6", "1", "s", "S"):
        ctx.add("high", f"shuts down or restarts the machine (init {call.args[0]})")


def _systemctl(call: _Call, ctx: Context) -> None:
    positional = [a for a in call.args if not a.startswith("-")]
    sub = positional[0] if positional else ""
    if sub in SYSTEMCTL_POWER:
        ctx.add("high", f"shuts down or restarts the machine (systemctl {sub})")
    elif sub in ("stop", "disable", "mask", "kill", "start", "restart", "enable", "reload", "daemon-reload",
                 "edit", "link"):
        ctx.add("medium", f"changes system services (systemctl {sub})")


def _firewall(call: _Call, ctx: Context) -> None:
    text = " ".join(call.args)
    if re.search(r"(^|\s)(-F|--flush|-X|--delete-chain|flush|disable|reset)(\s|$)|-P \w+ ACCEPT", text):
        ctx.add("high", f"turns off or clears the firewall ({call.name} {text})")
    elif not re.search(r"(^|\s)(-L|--list|-S|status|list)", text):
        ctx.add("medium", f"changes the firewall ({call.name})")


def _accounts(call: _Call, ctx: Context) -> None:
    ctx.add("high", f"changes user accounts or passwords ({call.name})")


def _kernel_modules(call: _Call, ctx: Context) -> None:
    if call.name == "sysctl" and not any("=" in a or a == "-w" for a in call.args):
        return
    ctx.add("high", f"changes the running kernel ({call.name})")


def _mount(call: _Call, ctx: Context) -> None:
    if call.args:
        ctx.add("medium", f"mounts or unmounts file systems ({call.name})")


def _docker(call: _Call, ctx: Context) -> None:
    text = " ".join(call.args)
    if re.search(r"--privileged|--pid[= ]host|--cap-add[= ]?(ALL|SYS_ADMIN)", text):
        ctx.add("high", f"gives a container full access to this machine ({call.name} --privileged)")
    for match in re.finditer(r"(?:^|\s)(?:-v|--volume)[= ]?(\S+)", text):
        where = classify_path(match.group(1).split(":", 1)[0], ctx)
        if where.kind in (PathKind.CREDENTIAL, PathKind.ROOT, PathKind.HOME, PathKind.SYSTEM, PathKind.DEVICE):
            ctx.add("high", f"gives a container access to {where.shown}")
    positional = [a for a in call.args if not a.startswith("-")]
    if positional[:2] in (["system", "prune"], ["volume", "prune"], ["volume", "rm"]) or (
        positional[:1] == ["rm"] and "-f" in call.args
    ):
        ctx.add("medium", f"deletes containers or their data ({call.name} {' '.join(positional[:2])})")


def _tee(call: _Call, ctx: Context) -> None:
    _, operands = _split_flags(call.args)
    for target in operands:
        check_write(classify_path(target, ctx), ctx)


def _truncate(call: _Call, ctx: Context) -> None:
    _, operands = _split_flags(call.args, takes_value={"-s", "-r", "--size", "--reference"})
    for target in operands:
        check_write(classify_path(target, ctx), ctx, verb="empties")


def _sed(call: _Call, ctx: Context) -> None:
    in_place = any(a == "-i" or a.startswith(("-i", "--in-place")) for a in call.args)
    if not in_place:
        return
    has_script_option = any(a in ("-e", "-f", "--expression", "--file") for a in call.args)
    _, operands = _split_flags(call.args, takes_value={"-e", "-f", "--expression", "--file"})
    files = operands if has_script_option else operands[1:]
    for target in files:
        check_write(classify_path(target, ctx), ctx, verb="edits")


def _cd(call: _Call, ctx: Context) -> None:
    target = call.args[0] if call.args else "~"
    if target == "-":
        ctx.cwd = "$?"
        return
    where = classify_path(target, ctx)
    if where.kind is PathKind.UNKNOWN:
        ctx.cwd = "$?"
        return
    base = ctx.cwd or ctx.workspace or ""
    expanded = target.replace("$HOME", "~").replace("${HOME}", "~")
    if expanded.startswith("~"):
        expanded = ctx.home + expanded[1:]
    ctx.cwd = posixpath.normpath(posixpath.join(base, expanded)) if base or expanded.startswith("/") else None


def _grep(call: _Call, ctx: Context) -> None:
    _, operands = _split_flags(call.args, takes_value={"-e", "-f", "-m", "-A", "-B", "-C", "--include",
                                                           "--exclude", "-g", "-t"})
    if not operands:
        return
    pattern, paths = operands[0], operands[1:]
    if any(word in pattern.lower() for word in SECRET_WORDS):
        for path in paths:
            where = classify_path(path, ctx)
            if where.kind in (PathKind.HOME, PathKind.ROOT, PathKind.SYSTEM, PathKind.OUTSIDE,
                              PathKind.CREDENTIAL):
                ctx.add("high", f"searches for secrets outside the workspace: {where.shown}")


def _tar(call: _Call, ctx: Context) -> None:
    text = " ".join(call.args)
    match = re.search(r"(?:-C|--directory)[= ](\S+)", text)
    extracting = bool(re.match(r"-?\w*x", call.args[0])) if call.args else False
    if extracting and match:
        check_write(classify_path(match.group(1), ctx), ctx, verb="unpacks files")


def _env_dump(call: _Call, ctx: Context) -> None:
    if call.name in ("env", "printenv") and not call.args:
        call.tags.add("env")
    elif call.name in ("set", "compgen") and not call.args:
        call.tags.add("env")
    elif call.name in ("export", "declare") and call.args and call.args[0] in ("-p", "-x", "-px"):
        call.tags.add("env")


def _history(call: _Call, ctx: Context) -> None:
    if "-c" in call.args:
        ctx.add("medium", "clears the shell history")
    else:
        call.tags.add("secrets")


def _generic(call: _Call, ctx: Context) -> None:
    for words, reason in CLOUD_DESTROY:
        if call.name == words[0] and [a for a in call.args if not a.startswith("-")][: len(words) - 1] == list(
            words[1:]
        ):
            ctx.add("high", reason)
    if call.name in ("aws",) and "rm" in call.args and "--recursive" in call.args:
        ctx.add("high", "deletes cloud storage recursively (aws s3 rm --recursive)")


def _check_file_arguments(call: _Call, ctx: Context) -> None:
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


_HANDLERS: dict[str, Callable[[_Call, Context], None]] = {
    "rm": _rm,
    "rmdir": _rmdir,
    "unlink": _rmdir,
    "shred": _shred,
    "srm": _shred,
    "find": _find,
    "mv": _mv,
    "cp": _cp,
    "install": _cp,
    "dd": _dd,
    "chmod": _chmod,
    "chown": _chown,
    "chgrp": _chown,
    "nc": _netcat,
    "ncat": _netcat,
    "netcat": _netcat,
    "socat": _socat,
    "scp": _remote_copy,
    "rsync": _remote_copy,
    "ssh": _ssh,
    "mail": _mail,
    "sendmail": _mail,
    "telnet": _mail,
    "eval": _eval,
    "source": _source,
    ".": _source,
    "git": _git,
    "kill": _kill,
    "crontab": _crontab,
    "init": _init,
    "systemctl": _systemctl,
    "mount": _mount,
    "umount": _mount,
    "swapoff": _mount,
    "docker": _docker,
    "podman": _docker,
    "tee": _tee,
    "truncate": _truncate,
    "sed": _sed,
    "cd": _cd,
    "pushd": _cd,
    "grep": _grep,
    "egrep": _grep,
    "rg": _grep,
    "ag": _grep,
    "tar": _tar,
    "history": _history,
    **{name: _downloader for name in DOWNLOADERS},
    **{name: _shell for name in SHELLS},
    **{name: _interpreter for name in SCRIPT_INTERPRETERS},
    **{name: _decoder for name in DECODERS},
    **{name: _package_manager for name in PACKAGE_MANAGERS},
    **{name: _power for name in POWER_COMMANDS},
    **{name: _accounts for name in ACCOUNT_COMMANDS},
    **{name: _kernel_modules for name in KERNEL_MODULE_COMMANDS},
    **{name: _disk for name in DISK_COMMANDS},
    **{name: _firewall for name in FIREWALL_COMMANDS},
    **{name: _kill_by_name for name in KILL_BY_NAME},
    **{name: _env_dump for name in ENV_DUMPERS},
}
