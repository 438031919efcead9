"""The workspace's `.env*` files, as a source of secrets to mask in output. A repository writes these files,
so they are read with care (trusted workspaces only, decided by the caller; never through a link; never
waiting on a FIFO; bounded; off the event loop) and they cannot choose what gets hidden: only values of
secret names that look like secrets are taken, and they mask output, never code (safety/secrets.py)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .secrets import named_secret_values

__all__ = ["ENV_FILE_LIMIT", "env_file_secrets", "looks_like_secret", "parse_env_file"]


def looks_like_secret(value: str) -> bool:
    """How a key, token or generated password looks: 12 to 4096 characters, no whitespace or quotes,
    letters and digits both. A word, a path with spaces, `true` or `8080` does not; used for values a
    repository writes (its `.env` files), so that it cannot choose ordinary words to hide from output."""
    return (
        12 <= len(value) <= 4096
        and not any(c.isspace() or c in "\"'`" for c in value)
        and any(c.isdigit() for c in value)
        and any(c.isalpha() for c in value)
    )


ENV_FILE_LIMIT = 64 * 1024  # bytes: a dotenv file is a few lines; a bigger file is not read at all


def parse_env_file(text: str) -> dict[str, str]:
    """NAME=value lines of a dotenv file (`export` and quotes allowed; comments and other lines skipped)."""
    env: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, _, value = line.removeprefix("export ").partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        env[name.strip()] = value
    return env


def env_file_secrets(root: Path, limit: int = ENV_FILE_LIMIT) -> tuple[list[str], list[str]]:
    """The values of the workspace's `.env*` files that output masking takes, and what was skipped (each
    a sentence). Blocking (call it off the event loop). A repository writes these files, so: only regular
    files directly in `root`, opened without following a link (O_NOFOLLOW) and without waiting on a FIFO
    (O_NONBLOCK), at most `limit` bytes; only values of secret names (`*_KEY`, `*_TOKEN`, `*PASSWORD*`,
    ...) that look like secrets (`looks_like_secret`), and URL passwords that do. They mask output only,
    never code."""
    values: list[str] = []
    skipped: list[str] = []
    try:
        names = sorted(entry.name for entry in os.scandir(root) if entry.name.startswith(".env"))
    except OSError:
        return values, skipped
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    for name in names:
        path = root / name
        try:
            fd = os.open(path, flags)
        except OSError:
            continue  # a link (ELOOP), gone, unreadable: not read
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                continue  # a directory (a virtualenv called .env), a FIFO, a device
            if info.st_size > limit:
                skipped.append(f"{name} is over {limit // 1024} KiB: not read for secrets to mask")
                continue
            data = os.read(fd, limit + 1)
        except OSError:
            continue
        finally:
            os.close(fd)
        if len(data) > limit:
            skipped.append(f"{name} is over {limit // 1024} KiB: not read for secrets to mask")
            continue
        env = parse_env_file(data.decode("utf-8", errors="replace"))
        values += [value for value in named_secret_values(env) if looks_like_secret(value)]
    return values, skipped
