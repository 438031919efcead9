"""Code cells in plain source files: `# %%` lines (also `// %%`, `-- %%`) start a cell, as in VS Code's
Python Interactive window, Spyder and jupytext's percent format."""

from __future__ import annotations

import re

_MARKER = re.compile(r"^\s*(#|//|--|%)\s*%%")


def is_cell_marker(line: str) -> bool:
    return bool(_MARKER.match(line))


def cell_starts(lines: list[str]) -> list[int]:
    return [i for i, line in enumerate(lines) if is_cell_marker(line)]


def cells(lines: list[str]) -> list[tuple[int, int]]:
    """(first, last) line of each cell, markers included; [] when the file has no markers.
    Lines before the first marker form a cell of their own when they hold anything."""
    starts = cell_starts(lines)
    if not starts:
        return []
    bounds = []
    if starts[0] > 0 and any(line.strip() for line in lines[: starts[0]]):
        bounds.append((0, starts[0] - 1))
    for i, start in enumerate(starts):
        end = starts[i + 1] - 1 if i + 1 < len(starts) else len(lines) - 1
        bounds.append((start, end))
    return bounds


def cell_at(lines: list[str], line: int) -> tuple[int, int] | None:
    for first, last in cells(lines):
        if first <= line <= last:
            return first, last
    return None


def cell_code(lines: list[str], first: int, last: int) -> str:
    """The cell's code without its marker line."""
    body = lines[first : last + 1]
    if body and is_cell_marker(body[0]):
        body = body[1:]
    return "\n".join(body).strip("\n")
