"""Secret-shaped text in code: a connection string with a password part, a private key block, a key of a
well-known format, `password = "…"`. Code that holds one is rated at least medium and shown as written
(never masked: what the user approves is what runs), with the reason.

The detector is safety/secrets.py's (`Redactor`, the one definition of what looks like a secret); this
module only asks it whether it would mask anything in the code, and says where and what, in words.
"""

from __future__ import annotations

import re

from interpreter_lsp.safety.secrets import Redactor

_URL_PASSWORD = re.compile(r"://[^\s:/@]{0,256}:[^\s@/]{1,256}@")
_PRIVATE_KEY = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")


def secret_shaped(code: str) -> str | None:
    """The reason to show when `code` holds secret-shaped text, or None."""
    if not code:
        return None
    masked = Redactor().redact(code)  # a fresh one: pattern-based only, nothing learned from elsewhere
    if masked == code:
        return None
    line = _first_changed_line(code, masked)
    if _PRIVATE_KEY.search(code):
        what = "a private key block"
    elif _URL_PASSWORD.search(code):
        what = "a connection string with a password"
    else:
        what = "a key or password"
    return f"holds secret-shaped text ({what}, line {line}): shown as written; read it before it runs"


def _first_changed_line(code: str, masked: str) -> int:
    for number, (before, after) in enumerate(zip(code.split("\n"), masked.split("\n"), strict=False), start=1):
        if before != after:
            return number
    return 1
