"""What a risk scan carries while it walks code: its findings, where the code runs, and the one way in
which code inside code (`bash -c`, `python -c`, `exec("...")`, `!cmd`, `%%bash`) is rated.

The Python and shell scanners never import each other: `Context.nested()` hands the inner code to the
scanner registered for its language, and holds the only depth guard.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from interpreter_lsp.protocol import RiskLevel

LEVEL_ORDER: dict[str, int] = {"low": 0, "medium": 1, "high": 2}

# A piece of a path or command that is only known at run time (a variable, an f-string field).
UNKNOWN = "$?"

MAX_DEPTH = 4


class Findings:
    """Reasons found so far, each with the highest level it was found at; first found, first listed."""

    def __init__(self) -> None:
        self._levels: dict[str, RiskLevel] = {}

    def add(self, level: RiskLevel, reason: str) -> None:
        old = self._levels.get(reason)
        if old is None or LEVEL_ORDER[level] > LEVEL_ORDER[old]:
            self._levels[reason] = level

    def level(self) -> RiskLevel:
        best: RiskLevel = "low"
        for level in self._levels.values():
            if LEVEL_ORDER[level] > LEVEL_ORDER[best]:
                best = level
        return best

    def reasons(self) -> list[str]:
        """Only the reasons that are not "low", highest level first."""
        items = [(reason, level) for reason, level in self._levels.items() if level != "low"]
        items.sort(key=lambda item: -LEVEL_ORDER[item[1]])
        return [reason for reason, _ in items]


Assessor = Callable[[str, "Context"], None]


@dataclass
class Context:
    """What a scan knows while it walks code: where it runs, and what it has seen so far."""

    workspace: str | None
    home: str
    findings: Findings = field(default_factory=Findings)
    cwd: str | None = None  # None: the workspace (or wherever the kernel runs)
    downloaded: set[str] = field(default_factory=set)  # paths of files the code downloaded
    depth: int = 0  # nesting of code inside code (bash -c, python -c, exec("..."))
    assessors: Mapping[str, Assessor] = field(default_factory=dict)  # language -> scanner, for nested()

    def add(self, level: RiskLevel, reason: str) -> None:
        self.findings.add(level, reason)

    def nested(self, language: str, code: str) -> None:
        """Rate `code` in `language`, found inside the code being rated, into the same findings."""
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                self.add("medium", "code nested too deep to check (code that writes code that runs code)")
                return
            self.assessors[language](code, self)
        finally:
            self.depth -= 1


def new_context(workspace: Path | None, assessors: Mapping[str, Assessor]) -> Context:
    home = os.path.expanduser("~")
    ws = posixpath.normpath(str(workspace)) if workspace is not None else None
    return Context(workspace=ws, home=home, assessors=assessors)
