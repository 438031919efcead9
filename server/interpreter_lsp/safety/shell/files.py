"""Shell handlers for commands that delete, move, copy, write or change files and disks."""

from __future__ import annotations

import posixpath
import re

from interpreter_lsp.safety.context import Context
from interpreter_lsp.safety.places import (
    PathKind,
    check_delete,
    check_read,
    check_unpack,
    check_write,
    classify_path,
)
from interpreter_lsp.safety.rules import DISK_COMMANDS, NETWORK_SENDERS, SECRET_WORDS, SHOWERS
from interpreter_lsp.safety.shell.call import Call, Handler, split_flags


def _rm(call: Call, ctx: Context) -> None:
    flags, targets = split_flags(call.args)
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


def _rmdir(call: Call, ctx: Context) -> None:
    _, targets = split_flags(call.args)
    for target in targets:
        check_delete(classify_path(target, ctx), ctx, recursive=False)


def _shred(call: Call, ctx: Context) -> None:
    _, targets = split_flags(call.args, takes_value={"-n", "-s", "--iterations", "--size"})
    for target in targets:
        where = classify_path(target, ctx)
        if where.kind is PathKind.DEVICE:
            ctx.add("high", f"destroys a disk beyond recovery: {where.shown}")
        else:
            check_delete(where, ctx, recursive=False)
            ctx.add("medium", f"destroys a file beyond recovery: {where.shown}")


def _find(call: Call, ctx: Context) -> None:
    roots: list[str] = []
    for arg in call.args:
        if arg.startswith(("-", "(", "!")) or arg in ("(", "!"):
            break
        roots.append(arg)
    roots = roots or ["."]
    deletes = "-delete" in call.args
    shows = False
    for i, arg in enumerate(call.args):
        if arg in ("-exec", "-execdir", "-ok", "-okdir") and i + 1 < len(call.args):
            program = posixpath.basename(call.args[i + 1])
            if program in ("rm", "shred", "unlink", "rmdir"):
                deletes = True
            shows = shows or program in SHOWERS or program in NETWORK_SENDERS
    for root in roots:
        where = classify_path(root, ctx)
        outside = where.kind not in (PathKind.WORKSPACE, PathKind.WORKSPACE_ROOT, PathKind.TEMP,
                                     PathKind.HARMLESS_DEVICE)
        if outside:
            call.tags.add("find-outside")
        if shows and where.kind in (PathKind.HOME, PathKind.ROOT, PathKind.CREDENTIAL, PathKind.OUTSIDE):
            ctx.add("high", f"shows or sends every file it finds outside the workspace: {where.shown}")
        if deletes:
            if where.kind is PathKind.WORKSPACE_ROOT:
                continue  # `find . -name '*.pyc' -delete` picks files inside the workspace
            if where.kind is PathKind.UNKNOWN:
                ctx.add("medium", f"deletes the files it finds at a path only known at run time: {where.shown}")
            elif outside:
                ctx.add("high", f"deletes the files it finds outside the workspace: {where.shown}")


def _mv(call: Call, ctx: Context) -> None:
    _, operands = split_flags(call.args, takes_value={"-t", "-S", "--target-directory", "--suffix"})
    if len(operands) < 2:
        return
    *sources, destination = operands
    for source in sources:
        check_delete(classify_path(source, ctx), ctx, recursive=True, unknown_matters=False, action="moves")
    check_write(classify_path(destination, ctx), ctx, verb="moves files")


def _cp(call: Call, ctx: Context) -> None:
    _, operands = split_flags(call.args, takes_value={"-t", "-S", "--target-directory", "--suffix"})
    if len(operands) < 2:
        return
    check_write(classify_path(operands[-1], ctx), ctx, verb="copies files")


def _dd(call: Call, ctx: Context) -> None:
    for arg in call.args:
        key, _, value = arg.partition("=")
        if key == "of":
            check_write(classify_path(value, ctx), ctx)
        elif key == "if":
            check_read(classify_path(value, ctx), ctx, shows=False)


def disk(call: Call, ctx: Context) -> None:
    _, operands = split_flags(call.args)
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


def _chmod(call: Call, ctx: Context) -> None:
    flags, operands = split_flags(call.args, takes_value={"--reference"})
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


def _chown(call: Call, ctx: Context) -> None:
    flags, operands = split_flags(call.args, takes_value={"--reference", "--from"})
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

def _sort(call: Call, ctx: Context) -> None:
    for i, arg in enumerate(call.args):
        target = call.args[i + 1] if arg in ("-o", "--output") and i + 1 < len(call.args) else None
        if arg.startswith("--output="):
            target = arg.split("=", 1)[1]
        elif arg.startswith("-o") and len(arg) > 2:
            target = arg[2:]
        if target:
            check_write(classify_path(target, ctx), ctx)


def _uniq(call: Call, ctx: Context) -> None:
    _, operands = split_flags(call.args, takes_value={"-f", "-s", "-w"})
    if len(operands) > 1:
        check_write(classify_path(operands[1], ctx), ctx)


def _tee(call: Call, ctx: Context) -> None:
    _, operands = split_flags(call.args)
    for target in operands:
        check_write(classify_path(target, ctx), ctx)
        ctx.wrote(target, call.stdin_text)


def _truncate(call: Call, ctx: Context) -> None:
    _, operands = split_flags(call.args, takes_value={"-s", "-r", "--size", "--reference"})
    for target in operands:
        check_write(classify_path(target, ctx), ctx, verb="empties")


def _sed(call: Call, ctx: Context) -> None:
    in_place = any(a == "-i" or a.startswith(("-i", "--in-place")) for a in call.args)
    if not in_place:
        return
    has_script_option = any(a in ("-e", "-f", "--expression", "--file") for a in call.args)
    _, operands = split_flags(call.args, takes_value={"-e", "-f", "--expression", "--file"})
    files = operands if has_script_option else operands[1:]
    for target in files:
        check_write(classify_path(target, ctx), ctx, verb="edits")


def _cd(call: Call, ctx: Context) -> None:
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


def _grep(call: Call, ctx: Context) -> None:
    for i, arg in enumerate(call.args):  # rg --pre CMD runs CMD on every file it searches
        if arg == "--pre" and i + 1 < len(call.args):
            ctx.add("medium", "runs a command on every file it searches (rg --pre)")
            ctx.nested("shell", call.args[i + 1])
        elif arg.startswith("--pre="):
            ctx.add("medium", "runs a command on every file it searches (rg --pre)")
            ctx.nested("shell", arg.split("=", 1)[1])
    _, operands = split_flags(call.args, takes_value={"-e", "-f", "-m", "-A", "-B", "-C", "--include",
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


def _tar(call: Call, ctx: Context) -> None:
    text = " ".join(call.args)
    match = re.search(r"(?:-C|--directory)[= ](\S+)", text)
    extracting = bool(re.match(r"-?\w*x", call.args[0])) if call.args else False
    extracting = extracting or "--extract" in call.args or "--get" in call.args
    if not extracting:
        return
    if match:
        check_unpack(classify_path(match.group(1), ctx), ctx)
    flags, _ = split_flags(call.args[1:])
    first = call.args[0].lstrip("-") if call.args else ""
    if "P" in flags or "--absolute-names" in flags or ("P" in first and not call.args[0].startswith("--")):
        ctx.add("high", "unpacks files to the absolute paths the archive names, anywhere (tar -P)")


def _unzip(call: Call, ctx: Context) -> None:
    for i, arg in enumerate(call.args):
        if arg == "-d" and i + 1 < len(call.args):
            check_unpack(classify_path(call.args[i + 1], ctx), ctx)
        elif arg.startswith("-d") and len(arg) > 2 and "=" not in arg:
            check_unpack(classify_path(arg[2:], ctx), ctx)


HANDLERS: dict[str, Handler] = {
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
    "tee": _tee,
    "sort": _sort,
    "uniq": _uniq,
    "truncate": _truncate,
    "sed": _sed,
    "cd": _cd,
    "pushd": _cd,
    "grep": _grep,
    "egrep": _grep,
    "rg": _grep,
    "ag": _grep,
    "tar": _tar,
    "unzip": _unzip,
    "bsdtar": _tar,
    **{name: disk for name in DISK_COMMANDS},
}
