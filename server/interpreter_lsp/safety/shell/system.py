"""Shell handlers for commands that change the machine or the project's history: git, processes,
scheduled jobs, power, services, firewall, accounts, kernel modules, mounts, containers, the environment.
"""

from __future__ import annotations

import posixpath
import re

from interpreter_lsp.safety.context import Context
from interpreter_lsp.safety.places import PathKind, classify_path
from interpreter_lsp.safety.rules import (
    ACCOUNT_COMMANDS,
    BROAD_PROCESS_NAMES,
    CLOUD_DESTROY,
    ENV_DUMPERS,
    FIREWALL_COMMANDS,
    KERNEL_MODULE_COMMANDS,
    KILL_BY_NAME,
    POWER_COMMANDS,
    SYSTEMCTL_POWER,
)
from interpreter_lsp.safety.shell.call import Call, Handler, split_flags


def _git(call: Call, ctx: Context) -> None:
    positional = [a for a in call.args if not a.startswith("-")]
    sub = positional[0] if positional else ""
    flags, _ = split_flags(call.args)
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


def _kill(call: Call, ctx: Context) -> None:
    args = call.args
    if args and args[0] in ("-s", "-n") and len(args) > 1:
        args = args[2:]
    elif args and args[0].startswith("-") and not args[0] == "-1" and len(args) > 1:
        args = args[1:]
    if any(a in ("-1", "1", "0") for a in args) or any(a.startswith("-") and a[1:].isdigit() for a in args):
        ctx.add("high", "kills every process it can reach (kill -1) or a whole process group")
    elif args and args != ["-l"]:
        ctx.add("medium", "stops a process (kill)")


def _kill_by_name(call: Call, ctx: Context) -> None:
    args = [a for a in call.args if not re.fullmatch(r"-(\d+|[A-Z][A-Z0-9+-]*)", a)]  # -9, -KILL, -SIGTERM
    flags, operands = split_flags(args, takes_value={"-s", "--signal", "-u", "--user", "-U", "-g", "-G",
                                                          "-P", "-t", "--ns", "-o", "--older-than", "-y"})
    pattern = operands[0] if operands else ""
    words = pattern.split()
    broad = (
        call.name in ("killall5", "slay")
        or bool(flags & {"u", "U", "--user", "g", "G"})
        or len(pattern.strip(".*^$+?[]() ")) <= 1
        or (len(words) == 1 and posixpath.basename(words[0]).lower() in BROAD_PROCESS_NAMES)
    )
    if broad:
        ctx.add("high", f"kills every process that matches a name ({call.name} {pattern})".replace(" )", ")"))
    else:
        ctx.add("medium", f"stops the processes that match {pattern!r} ({call.name})")


def _crontab(call: Call, ctx: Context) -> None:
    flags, _ = split_flags(call.args, takes_value={"-u"})
    if "l" in flags:
        return
    if "r" in flags:
        ctx.add("high", "removes all your scheduled jobs (crontab -r)")
    elif "e" in flags:
        ctx.add("medium", "edits your scheduled jobs (crontab -e)")
    else:
        ctx.add("high", "installs scheduled jobs that keep running after this session (crontab)")


def _power(call: Call, ctx: Context) -> None:
    ctx.add("high", f"shuts down or restarts the machine ({call.name})")


def _init(call: Call, ctx: Context) -> None:
    if call.args and call.args[0] in ("0", "6", "1", "s", "S"):
        ctx.add("high", f"shuts down or restarts the machine (init {call.args[0]})")


def _systemctl(call: Call, ctx: Context) -> None:
    positional = [a for a in call.args if not a.startswith("-")]
    sub = positional[0] if positional else ""
    if sub in SYSTEMCTL_POWER:
        ctx.add("high", f"shuts down or restarts the machine (systemctl {sub})")
    elif sub in ("stop", "disable", "mask", "kill", "start", "restart", "enable", "reload", "daemon-reload",
                 "edit", "link"):
        ctx.add("medium", f"changes system services (systemctl {sub})")


def _firewall(call: Call, ctx: Context) -> None:
    text = " ".join(call.args)
    if re.search(r"(^|\s)(-F|--flush|-X|--delete-chain|flush|disable|reset)(\s|$)|-P \w+ ACCEPT", text):
        ctx.add("high", f"turns off or clears the firewall ({call.name} {text})")
    elif not re.search(r"(^|\s)(-L|--list|-S|status|list)", text):
        ctx.add("medium", f"changes the firewall ({call.name})")


def _accounts(call: Call, ctx: Context) -> None:
    ctx.add("high", f"changes user accounts or passwords ({call.name})")


def _kernel_modules(call: Call, ctx: Context) -> None:
    if call.name == "sysctl" and not any("=" in a or a == "-w" for a in call.args):
        return
    ctx.add("high", f"changes the running kernel ({call.name})")


def _mount(call: Call, ctx: Context) -> None:
    if call.args:
        ctx.add("medium", f"mounts or unmounts file systems ({call.name})")


def _docker(call: Call, ctx: Context) -> None:
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
        ctx.add("high", f"deletes containers or their data ({call.name} {' '.join(positional[:2])})")
    elif positional[:1] in (["rmi"], ["rm"]) or positional[:2] in (["image", "prune"], ["container", "prune"],
                                                                   ["network", "prune"], ["builder", "prune"]):
        ctx.add("medium", f"deletes containers or images ({call.name} {' '.join(positional[:2])})")
    if positional[:1] == ["exec"] and len(positional) > 2:
        ctx.nested("shell", " ".join(positional[2:]))

def _env_dump(call: Call, ctx: Context) -> None:
    if call.name in ("env", "printenv") and not call.args:
        call.tags.add("env")
    elif call.name in ("set", "compgen") and not call.args:
        call.tags.add("env")
    elif call.name in ("export", "declare") and call.args and call.args[0] in ("-p", "-x", "-px"):
        call.tags.add("env")


def _history(call: Call, ctx: Context) -> None:
    if "-c" in call.args:
        ctx.add("medium", "clears the shell history")
    else:
        call.tags.add("secrets")


def generic(call: Call, ctx: Context) -> None:
    """Every command without a handler of its own: cloud commands that destroy."""
    for words, reason in CLOUD_DESTROY:
        if call.name == words[0] and [a for a in call.args if not a.startswith("-")][: len(words) - 1] == list(
            words[1:]
        ):
            ctx.add("high", reason)
    if call.name in ("aws",) and "rm" in call.args and "--recursive" in call.args:
        ctx.add("high", "deletes cloud storage recursively (aws s3 rm --recursive)")



HANDLERS: dict[str, Handler] = {
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
    "history": _history,
    **{name: _power for name in POWER_COMMANDS},
    **{name: _accounts for name in ACCOUNT_COMMANDS},
    **{name: _kernel_modules for name in KERNEL_MODULE_COMMANDS},
    **{name: _firewall for name in FIREWALL_COMMANDS},
    **{name: _kill_by_name for name in KILL_BY_NAME},
    **{name: _env_dump for name in ENV_DUMPERS},
}
