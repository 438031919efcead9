"""The user's own directories (XDG base directories): settings (config), history and consents (state), the
cache of generated code (cache). A relative `XDG_*_HOME` is invalid (the XDG specification: "it should
consider the path invalid and ignore it"): taken as it is, it would name a directory of the server's working
directory, which is as a rule the workspace, where a repository could ship "user" settings, consents or code.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def base(variable: str, default: str, environ: Mapping[str, str] = os.environ) -> Path | None:
    """`$variable` when it is an absolute path, else `default` (e.g. ".config") in the home directory; None
    when the home is not an absolute path either (HOME unset or relative, and no password entry)."""
    value = environ.get(variable, "")
    if os.path.isabs(value):
        return Path(value)
    home = environ.get("HOME") or os.path.expanduser("~")
    return Path(home) / default if os.path.isabs(home) else None


def required(variable: str, default: str) -> Path:
    """`base`, for what the server cannot do without (its settings and history): a home that cannot be
    found is said in words."""
    found = base(variable, default)
    if found is None:
        raise RuntimeError(
            f"interpreter-lsp cannot find your home directory (HOME is {os.environ.get('HOME', 'unset')!r}): set "
            f"HOME, or {variable}, to an absolute path"
        )
    return found
