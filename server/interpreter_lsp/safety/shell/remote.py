"""Shell handlers for commands that change what other programs run later (git config, pip/npm config,
variables such as GIT_SSH_COMMAND), wrappers that run a command string (script, tmux, screen ...), and
clients that destroy data elsewhere: databases (psql, mysql, redis-cli, mongosh), clusters and clouds
(kubectl, helm, gh, gsutil, gcloud, aws, az ...).
"""

from __future__ import annotations

import re

from interpreter_lsp.safety.context import Context
from interpreter_lsp.safety.effects import destructive_sql, set_variables
from interpreter_lsp.safety.shell.call import Call, Handler, split_flags

# git configuration keys whose value git runs as a command, or that send git elsewhere.
_GIT_RUNS = re.compile(
    r"^(core\.(hookspath|fsmonitor|sshcommand|pager|editor|gitproxy|askpass|attributesfile|excludesfile)"
    r"|diff\.external|diff\..*\.(textconv|command)|filter\..*\.(clean|smudge|process)|merge\..*\.driver"
    r"|alias\..*|credential\..*helper|include\.path|includeif\..*|url\..*\.(insteadof|pushinsteadof)"
    r"|sequence\.editor|gpg\.program|gpg\..*\.program|uploadpack\.packobjectshook|protocol\.ext\.allow"
    r"|init\.templatedir|remote\..*\.(receivepack|uploadpack|proxy)|http\.proxy|pager\..*)$",
    re.IGNORECASE,
)
def git_config_key(call: Call, ctx: Context) -> None:
    """`git config [--global] KEY VALUE` and `git -c KEY=VALUE ...` with a key that makes git run a command."""
    words = call.args
    for i, word in enumerate(words):
        if word == "-c" and i + 1 < len(words):
            key = words[i + 1].split("=", 1)[0]
            if _GIT_RUNS.match(key):
                ctx.add("high", f"makes git run a command or go elsewhere (git -c {key})")
    positional = [w for w in words if not w.startswith("-")]
    if "config" not in positional[:2]:
        return
    rest = positional[positional.index("config") + 1:]
    if rest[:1] in (["set"], ["add"]):
        rest = rest[1:]
    if len(rest) >= 2 and _GIT_RUNS.match(rest[0]):
        scope = "everywhere you use git" if "--global" in words or "--system" in words else "in this repository"
        ctx.add("high", f"makes git run a command or fetch from elsewhere later, {scope} (git config {rest[0]})")
    elif len(rest) >= 2:
        ctx.add("medium", f"changes git's configuration (git config {rest[0]})")


def _export(call: Call, ctx: Context) -> None:
    pairs = [tuple(a.split("=", 1)) for a in call.args if "=" in a and not a.startswith("-")]
    set_variables([(n, v) for n, v in pairs], ctx)  # type: ignore[misc]


def _tool_config(call: Call, ctx: Context) -> None:
    """pip/npm/yarn/pnpm/conda/uv config that points installs elsewhere or runs a shell."""
    text = " ".join(call.args).lower()
    if "config" not in call.args[:2] and call.name != "conda":
        return
    if call.name == "conda" and "config" not in call.args:
        return
    if re.search(r"index-url|extra-index|trusted-host|find-links|registry|script-shell|shell|node-options|"
                 r"channels|channel_alias|custom_channels|git\b|prefix|globalconfig|userconfig|onload-script|"
                 r"ignore-scripts\s+false|init-module", text):
        ctx.add("high", f"points {call.name} at another package source or makes it run a command later "
                        f"({call.name} {' '.join(call.args[:4])})")
    elif re.search(r"\b(set|add|--add|--set|--append|--prepend)\b", text):
        ctx.add("medium", f"changes {call.name}'s configuration")


def _wrapper(call: Call, ctx: Context) -> None:
    """script -c CMD, tmux new 'CMD', screen -dm CMD, unshare/systemd-run/firejail CMD ...: the command runs."""
    args = call.args
    ctx.add("medium", f"runs a command through {call.name}")
    if call.name == "script":
        for i, arg in enumerate(args):
            if arg in ("-c", "--command") and i + 1 < len(args):
                ctx.nested("shell", args[i + 1])
                return
            if arg.startswith("-") and not arg.startswith("--") and arg.endswith("c") and i + 1 < len(args):
                ctx.nested("shell", args[i + 1])
                return
            if arg.startswith("--command="):
                ctx.nested("shell", arg.split("=", 1)[1])
                return
        return
    if call.name == "tmux":
        for i, arg in enumerate(args):
            if arg in ("new", "new-session", "new-window", "neww", "split-window", "splitw", "run-shell", "run",
                       "respawn-pane", "respawn-window", "display-popup", "popup"):
                rest = [a for a in args[i + 1:] if not a.startswith("-")]
                # options with values (-s name, -n name, -c dir) leave their value: the command is the last word
                if rest:
                    ctx.nested("shell", rest[-1])
                return
            if arg == "send-keys" or arg == "send":
                ctx.nested("shell", " ".join(a for a in args[i + 1:] if not a.startswith("-") and a != "Enter"
                                             and a != "C-m"))
                return
        return
    if call.name == "systemd-run" and any(a.startswith(("--on-", "--timer-property")) for a in args):
        ctx.add("high", "schedules a command that keeps running after this session (systemd-run timer)")
    if call.name == "screen" and "-X" in args:
        _, operands = split_flags(args, takes_value={"-S", "-X", "-p"})
        ctx.nested("shell", " ".join(operands[1:] if operands and operands[0] == "stuff" else operands))
        return
    takes = {"-S", "-c", "-L", "-p", "-t", "-u", "--unit", "-E", "--setenv", "--profile", "--uid", "--gid",
             "--property", "-g", "-s", "-T", "-e", "-P"}
    i = 0
    while i < len(args) and args[i].startswith("-"):
        value_follows = args[i] in takes or (not args[i].startswith("--") and args[i][-1:] in ("S", "c", "p"))
        i += 2 if value_follows and "=" not in args[i] else 1
    rest = args[i:]
    if rest:
        ctx.nested("shell", " ".join(_quote(o) for o in rest))


def _alias(call: Call, ctx: Context) -> None:
    """`alias ls='rm -rf ~'`: the text runs whenever the name is typed later in this shell."""
    for arg in call.args:
        name, sep, command = arg.partition("=")
        if sep and command:
            ctx.add("medium", f"defines a shell alias ({name}) that runs later: {command[:40]}")
            ctx.nested("shell", command)


def _quote(word: str) -> str:
    return word if re.fullmatch(r"[\w@%+=:,./~-]+", word) else "'" + word.replace("'", "'\\''") + "'"


def _sql_client(call: Call, ctx: Context) -> None:
    text = " ".join(call.args)
    if call.command.heredoc:
        text += " " + call.command.heredoc
    if call.stdin_text:
        text += " " + call.stdin_text
    statement = destructive_sql(text)
    if statement is not None:
        ctx.add("high", f"deletes or overwrites data in a database ({call.name}: {statement})")
    else:
        ctx.add("medium", f"connects to a database ({call.name})")


def _redis(call: Call, ctx: Context) -> None:
    words = [a.lower() for a in call.args]
    if any(w in ("flushall", "flushdb", "del", "unlink", "config", "shutdown", "debug", "eval", "script",
                 "module", "slaveof", "replicaof") for w in words):
        ctx.add("high", f"deletes data or changes a Redis server ({call.name} {' '.join(call.args)[:40]})")
    else:
        ctx.add("medium", f"talks to a Redis server ({call.name})")


_DELETE_WORDS = frozenset({"delete", "destroy", "remove", "rm", "rb", "uninstall", "purge", "terminate", "drain",
                           "prune", "wipe", "reset", "apps:destroy", "pg:reset", "force-delete", "del", "cordon",
                           "nuke", "rmi", "rmdir", "archive", "transfer"})


def _remote_cli(call: Call, ctx: Context) -> None:
    """kubectl, helm, gh, gsutil, gcloud, aws, az ...: a subcommand that deletes is high; anything else
    reaches another machine (medium)."""
    positional = [a for a in call.args if not a.startswith("-")]
    words = {p.lower() for p in positional[:4]}
    deleting = bool(words & _DELETE_WORDS) or any(p.lower().startswith(("delete-", "terminate-", "remove-",
                                                                         "destroy-", "deregister-"))
                                                  for p in positional[:4])
    method = next((call.args[i + 1] for i, a in enumerate(call.args[:-1]) if a in ("-X", "--method")), "")
    if method.upper() == "DELETE" or "--delete" in call.args or ("-d" in call.args and call.name == "gsutil"):
        deleting = True
    if call.name == "kubectl" and positional[:1] == ["exec"] and "--" in call.args:
        ctx.nested("shell", " ".join(call.args[call.args.index("--") + 1:]))
    if call.name == "terraform" and positional[:1] == ["apply"] and "-destroy" in call.args:
        deleting = True
    if deleting:
        ctx.add("high", f"deletes data or resources elsewhere ({call.name} {' '.join(positional[:3])})")
    else:
        ctx.add("medium", f"acts on another machine or service ({call.name})")


REMOTE_CLIS = frozenset({"kubectl", "helm", "gh", "gsutil", "gcloud", "aws", "az", "doctl", "hcloud",
                         "terraform", "pulumi", "rclone", "s3cmd", "heroku", "fly", "flyctl", "vercel", "oc",
                         "k9s", "glab", "linode-cli", "openstack", "mc", "b2", "firebase", "netlify",
                         "wrangler", "supabase", "eksctl", "nomad", "consul", "vault"})

HANDLERS: dict[str, Handler] = {
    "alias": _alias,
    "export": _export,
    "declare": _export,
    "typeset": _export,
    "script": _wrapper,
    "tmux": _wrapper,
    "screen": _wrapper,
    "unshare": _wrapper,
    "systemd-run": _wrapper,
    "firejail": _wrapper,
    "sg": _wrapper,
    "chronic": _wrapper,
    "faketime": _wrapper,
    "proxychains": _wrapper,
    "proxychains4": _wrapper,
    "torsocks": _wrapper,
    "dbus-launch": _wrapper,
    "flatpak-spawn": _wrapper,
    "sshpass": _wrapper,
    "ssh-agent": _wrapper,
    "nsenter": _wrapper,
    "psql": _sql_client,
    "mysql": _sql_client,
    "mariadb": _sql_client,
    "sqlcmd": _sql_client,
    "clickhouse-client": _sql_client,
    "cqlsh": _sql_client,
    "mongosh": _sql_client,
    "mongo": _sql_client,
    "sqlite3": _sql_client,
    "duckdb": _sql_client,
    "redis-cli": _redis,
    "valkey-cli": _redis,
    "pip": _tool_config,
    "pip3": _tool_config,
    "npm": _tool_config,
    "yarn": _tool_config,
    "pnpm": _tool_config,
    "conda": _tool_config,
    "mamba": _tool_config,
    "uv": _tool_config,
    "poetry": _tool_config,
    **{name: _remote_cli for name in REMOTE_CLIS},
}
