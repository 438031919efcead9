"""Shell handlers for commands that run code: shells, interpreters, eval and source, decoders that feed
them, and package managers (installing a package runs its code).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from interpreter_lsp.safety.context import Context
from interpreter_lsp.safety.rules import (
    DECODERS,
    OFFICIAL_INDEX_HOSTS,
    PACKAGE_MANAGERS,
    PACKAGE_REMOVE_SUBCOMMANDS,
    SCRIPT_INTERPRETERS,
    SHELLS,
)
from interpreter_lsp.safety.shell.call import Call, Handler, normalise, split_flags


def _runs_stdin(call: Call, script_args: list[str]) -> bool:
    return call.piped and (not script_args or script_args[0] in ("-", "/dev/stdin"))


def _check_code_from_stdin(call: Call, ctx: Context) -> None:
    if "download" in call.upstream:
        ctx.add("high", f"downloads code and runs it straight away (… | {call.name})")
    elif "decoded" in call.upstream:
        ctx.add("high", f"runs hidden (encoded) code (… | {call.name})")
    else:
        ctx.add("medium", f"pipes text into an interpreter ({call.name}) to run it")
        if call.stdin_text is not None and call.name in SHELLS:
            ctx.nested("shell", call.stdin_text)
        elif call.stdin_text is not None and call.name.startswith(("python", "pypy")):
            ctx.nested("python", call.stdin_text)


def _check_script_file(path: str, call: Call, ctx: Context) -> None:
    if ctx.runs_written_here(path, "python" if call.name.startswith(("python", "pypy")) else "shell"):
        return
    if normalise(path, ctx) in ctx.downloaded:
        ctx.add("high", f"runs a script it just downloaded: {path}")
    elif ctx.was_written(path):
        ctx.add("medium", f"runs {path}, written earlier in this session (its content was not rated)")


def _runs_downloaded_file(call: Call) -> bool:
    """`bash <(curl …)`: the script is a process substitution fed by a download."""
    return "download" in call.tags and any(arg.startswith("<(") for arg in call.args)


def _shell(call: Call, ctx: Context) -> None:
    args = call.args
    for i, arg in enumerate(args):
        if arg.startswith("-") and "c" in arg[1:] and not arg.startswith("--") and i + 1 < len(args):
            if call.command.runs_downloaded_text or "download" in call.tags:
                ctx.add("high", f"downloads code and runs it straight away ({call.name} -c)")
            ctx.nested("shell", args[i + 1])
            return
    flags, operands = split_flags(args, takes_value={"-o", "+o", "-O", "+O"})
    if "s" in flags:
        operands = []  # bash -s: the script comes from stdin, the operands are its arguments
    if call.command.heredoc is not None:
        ctx.nested("shell", call.command.heredoc)
    if _runs_downloaded_file(call):
        ctx.add("high", f"downloads code and runs it straight away ({call.name} <(curl …))")
    if _runs_stdin(call, operands) and call.command.heredoc is None:
        _check_code_from_stdin(call, ctx)
    elif operands:
        _check_script_file(operands[0], call, ctx)


def _interpreter(call: Call, ctx: Context) -> None:
    args = call.args
    language = "python" if call.name.startswith(("python", "pypy")) else call.name
    code_options = ("-c",) if language == "python" else ("-e", "-E", "--eval", "-p", "--print", "-r")
    for i, arg in enumerate(args):
        if arg in code_options and i + 1 < len(args):
            if call.command.runs_downloaded_text or "download" in call.tags:
                ctx.add("high", f"downloads code and runs it straight away ({call.name} {arg})")
            if language == "python" and arg == "-c":
                ctx.nested("python", args[i + 1])
            else:
                ctx.add("medium", f"runs inline {language} code, which cannot be checked")
                inline_commands(args[i + 1], ctx)
            return
        if language == "python" and arg == "-m" and i + 1 < len(args):
            module = args[i + 1]
            written = ctx.written_module(module)
            if written is not None:
                ctx.add("medium", f"runs the module {module}, written earlier in this session (its code was not rated)")
            if module == "pip":
                _package_manager(Call("pip", args[i + 2:], call.command, call.upstream, call.piped), ctx)
            return
    _, operands = split_flags(args, takes_value={"-W", "-X", "-I"})
    if _runs_downloaded_file(call):
        ctx.add("high", f"downloads code and runs it straight away ({call.name} <(curl …))")
    if call.command.heredoc is not None:
        if language == "python":
            ctx.nested("python", call.command.heredoc)
        else:
            ctx.add("medium", f"runs inline {language} code, which cannot be checked")
    elif _runs_stdin(call, operands):
        _check_code_from_stdin(call, ctx)
    elif operands:
        _check_script_file(operands[0], call, ctx)


# system("…"), exec("…"), `…`, qx(…), execSync("…") in perl, ruby, node, php, awk: the text is a command.
_INLINE_COMMAND = re.compile(
    r"""(?:system|exec|execSync|spawnSync|popen|shell_exec|passthru|qx)\s*\(?\s*(["'])(.*?)\1|`([^`]+)`""",
    re.DOTALL,
)


def inline_commands(code: str, ctx: Context) -> None:
    """Commands that inline code of another language spells out are rated as shell."""
    for match in _INLINE_COMMAND.finditer(code[:20_000]):
        command = match.group(2) if match.group(2) is not None else match.group(3)
        if command:
            ctx.nested("shell", command)


def _awk(call: Call, ctx: Context) -> None:
    program = next((a for a in call.args if not a.startswith("-")), "")
    if re.search(r"system\s*\(|\|\s*getline|print[^;]*\|\s*\"", program):
        ctx.add("medium", f"runs commands from {call.name} (system, getline or a pipe)")
        inline_commands(program, ctx)


def _eval(call: Call, ctx: Context) -> None:
    text = " ".join(call.args)
    if call.command.runs_downloaded_text or "download" in call.tags:
        ctx.add("high", "downloads code and runs it straight away (eval)")
    elif call.command.inner_names & DECODERS and ("$(" in text or "`" in text):
        ctx.add("high", "runs hidden (encoded) code (eval \"$(… | base64 -d)\")")
    elif "$" in text or "`" in text:
        ctx.add("medium", "runs a command built at run time (eval)")
    else:
        ctx.nested("shell", text)


def _source(call: Call, ctx: Context) -> None:
    if "download" in call.tags or call.command.runs_downloaded_text:
        ctx.add("high", f"downloads code and runs it in this shell ({call.name} <(curl …))")
    elif call.args and call.args[0] in ("/dev/stdin", "-") and call.piped:
        _check_code_from_stdin(call, ctx)
    elif call.args:
        _check_script_file(call.args[0], call, ctx)


def _decoder(call: Call, ctx: Context) -> None:
    flags, _ = split_flags(call.args)
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


def _package_manager(call: Call, ctx: Context) -> None:
    installs = PACKAGE_MANAGERS.get(call.name, frozenset())
    _, positional = split_flags(call.args, takes_value=_PACKAGE_OPTIONS_WITH_VALUE)
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



HANDLERS: dict[str, Handler] = {
    "awk": _awk,
    "gawk": _awk,
    "mawk": _awk,
    "nawk": _awk,
    "eval": _eval,
    "source": _source,
    ".": _source,
    **{name: _shell for name in SHELLS},
    **{name: _interpreter for name in SCRIPT_INTERPRETERS},
    **{name: _decoder for name in DECODERS},
    **{name: _package_manager for name in PACKAGE_MANAGERS},
}
