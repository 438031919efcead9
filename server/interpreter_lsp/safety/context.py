"""What a risk scan carries while it walks code: its findings, where the code runs, and the one way in
which code inside code (`bash -c`, `python -c`, `exec("...")`, `!cmd`, `%%bash`) is rated.

The Python and shell scanners never import each other: `Context.nested()` hands the inner code to the
scanner registered for its language, and holds the only depth guard.
"""

from __future__ import annotations

import posixpath
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from interpreter_lsp.protocol import RiskLevel

LEVEL_ORDER: dict[str, int] = {"low": 0, "medium": 1, "high": 2}

# A piece of a path or command that is only known at run time (a variable, an f-string field).
UNKNOWN = "$?"

MAX_DEPTH = 4
# The deadline is read every this many steps (statements, expressions, commands): cheap, and often enough.
_STEPS_PER_CLOCK = 256


class OverBudget(Exception):
    """The rating ran past its deadline; what was found so far stands, and the code is at least medium."""


class Findings:
    """Reasons found so far, each with the highest level it was found at; first found, first listed."""

    def __init__(self) -> None:
        self._levels: dict[str, RiskLevel] = {}

    def add(self, level: RiskLevel, reason: str) -> None:
        old = self._levels.get(reason)
        if old is None or LEVEL_ORDER[level] > LEVEL_ORDER[old]:
            self._levels[reason] = level

    def copy(self) -> Findings:
        copied = Findings()
        copied._levels = dict(self._levels)
        return copied

    def level(self) -> RiskLevel:
        best: RiskLevel = "low"
        for level in self._levels.values():
            if LEVEL_ORDER[level] > LEVEL_ORDER[best]:
                best = level
        return best

    def reasons(self) -> list[str]:
        """Every reason, highest level first: "low" ones too (a delete inside the workspace says so)."""
        items = list(self._levels.items())
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
    written: frozenset[str] = frozenset()  # files earlier runs wrote (normalised absolute paths)
    deadline: float | None = None  # time.monotonic() past which the scan stops (OverBudget)
    # What the allowlist provers (python/proof.py, shell/proof.py) could not prove harmless: each makes the
    # code at least medium ("not on the allowlist: ..."), whatever the rules found.
    unproven: list[str] = field(default_factory=list)
    # Files this code itself writes, with what it writes when known (a script written and run in one step).
    written_here: dict[str, str | None] = field(default_factory=dict)
    # Paths already classified (places.py), by (text, cwd): a long cell names the same file a thousand times.
    place_cache: dict[tuple[str, str | None, str], object] = field(default_factory=dict)
    _steps: int = 0

    def add(self, level: RiskLevel, reason: str) -> None:
        self.findings.add(level, reason)

    def wrote(self, path: str, text: str | None = None) -> None:
        """This code writes `path` (with `text`, when known): running it later in the same code is seen."""
        if UNKNOWN not in path and "$" not in path:
            self.written_here[self.absolute(path)] = text

    def runs_written_here(self, path: str, language: str) -> bool:
        """Running `path` that this same code writes: its content is rated when known (medium at least), and
        is high when not. True when `path` was written here."""
        if UNKNOWN in path or self.absolute(path) not in self.written_here:
            return False
        text = self.written_here[self.absolute(path)]
        if text is None:
            self.add("high", f"writes a script and runs it in one step: {self.shown(self.absolute(path))} "
                             "(what it runs cannot be checked)")
        else:
            self.add("medium", f"writes a script and runs it in one step: {self.shown(self.absolute(path))}")
            self.nested(language, text)
        return True

    def not_proven(self, what: str) -> None:
        """An operation that is not on the allowlist (safety/allowlist.py): the code cannot be "low"."""
        if what not in self.unproven:
            self.unproven.append(what)

    def step(self, *, now: bool = False) -> None:
        """Count one unit of work (`now`: a large one); past the deadline, stop the scan (raises OverBudget)."""
        self._steps += 1
        if self.deadline is None or not (now or self._steps % _STEPS_PER_CLOCK == 0):
            return
        if time.monotonic() > self.deadline:
            raise OverBudget

    def absolute(self, path: str) -> str:
        """`path` (relative to where the code runs, or with ~) as a normalised absolute path."""
        if path == "~" or path.startswith("~/"):
            path = self.home + path[1:]
        base = self.cwd or self.workspace or "."
        return posixpath.normpath(posixpath.join(base, path))

    def was_written(self, path: str) -> bool:
        """Did an earlier run in this session write the file `path` names?"""
        return bool(self.written) and UNKNOWN not in path and self.absolute(path) in self.written

    def written_module(self, module: str) -> str | None:
        """The written file that importing `module` ("pkg.tool") would run, if an earlier run wrote one."""
        if not self.written or not module or module.startswith("."):
            return None
        top = self.absolute(module.split(".")[0])
        for path in sorted(self.written):
            if path == top + ".py" or path.startswith(top + "/"):
                return self.shown(path)
        return None

    def shown(self, path: str) -> str:
        """An absolute path as a person reads it: relative to the workspace when inside it."""
        if self.workspace and path.startswith(self.workspace.rstrip("/") + "/"):
            return path[len(self.workspace.rstrip("/")) + 1:]
        return path

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


def new_context(
    workspace: Path | None,
    assessors: Mapping[str, Assessor],
    *,
    home: str,
    written: Collection[Path] = (),
    deadline: float | None = None,
) -> Context:
    ws = posixpath.normpath(str(workspace)) if workspace is not None else None
    done = frozenset(posixpath.normpath(str(path if path.is_absolute() or ws is None else Path(ws) / path))
                     for path in map(Path, written))
    return Context(workspace=ws, home=home, assessors=assessors, written=done, deadline=deadline)
