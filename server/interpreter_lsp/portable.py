"""The one switch that forces every portable code path on any OS, so that CI on Linux runs the code macOS and
Windows run: INTERPRETER_LSP_PORTABLE=1 means kernel death seen by bounded polling (no pidfd, no kqueue),
files a run touched seen by watchdog's polling observer, and kernels reached over TCP on 127.0.0.1."""

from __future__ import annotations

import os

PORTABLE_ENV = "INTERPRETER_LSP_PORTABLE"


def portable_forced() -> bool:
    """Read at each use (not at import), so a test can set it for the server it starts."""
    return os.environ.get(PORTABLE_ENV, "").strip().lower() not in ("", "0", "false", "no", "off")
