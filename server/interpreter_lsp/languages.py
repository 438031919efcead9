"""Language names: what users and models write, mapped to the names kernels are chosen by."""

from __future__ import annotations

PYTHON = "python"
SHELL = "shell"

# Aliases seen in fenced blocks and in user input. Anything not listed stays as written (lower-cased)
# and is matched against installed kernelspecs' `language`.
_ALIASES: dict[str, str] = {
    "py": PYTHON,
    "python3": PYTHON,
    "python": PYTHON,
    "ipython": PYTHON,
    "ipython3": PYTHON,
    "pycon": PYTHON,
    "shell": SHELL,
    "bash": SHELL,
    "sh": SHELL,
    "zsh": SHELL,
    "console": SHELL,
    "shell-session": SHELL,
    "shellscript": SHELL,
    "terminal": SHELL,
    "js": "javascript",
    "node": "javascript",
    "ts": "typescript",
    "rb": "ruby",
    "jl": "julia",
}

# Editor languageIds (LSP textDocument.languageId) that differ from kernel language names.
_LANGUAGE_IDS: dict[str, str] = {
    "shellscript": SHELL,
}


def canonical_language(name: str) -> str:
    """Map a tag or alias to the canonical language name ("py" -> "python", "zsh" -> "shell")."""
    key = name.strip().lower()
    return _ALIASES.get(key, _LANGUAGE_IDS.get(key, key))
