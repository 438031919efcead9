"""Which text a request means, as pure functions of a document's text: the selection, the `# %%` cell
around a position, the whole document, and where a proposal goes when it is written into a document.

Every command that takes `{uri, range?, position?}` decides here, once. Positions are LSP positions:
0-based lines, characters in UTF-16 code units (the LSP default encoding), lines split at \\n, \\r\\n, \\r.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from lsprotocol import types as t

from . import cells
from .agent.prompt import Selection
from .arguments import BadArguments

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class Document:
    """A document's text as the editor has it (or as it is on disk)."""

    uri: str
    source: str
    language: str = ""  # canonical language ("python", "shell", ...) or "" when unknown

    @cached_property
    def lines(self) -> list[str]:
        """The lines without their line breaks; a final line break does not start another line."""
        parts = _LINE_BREAK.split(self.source)
        if len(parts) > 1 and parts[-1] == "":
            parts.pop()
        return parts if self.source else []


@dataclass(frozen=True)
class RunTarget:
    """The code a run request means, and where it came from (for the panel: "cell at line 4")."""

    code: str
    kind: str  # "selection" | "cell" | "document"
    first_line: int
    last_line: int


def is_empty(rng: t.Range) -> bool:
    return (rng.start.line, rng.start.character) == (rng.end.line, rng.end.character)


def check_inside(doc: Document, rng: t.Range) -> None:
    """A range may end at the very end of the document (the line after the last), not past it."""
    count = len(doc.lines)
    if rng.start.line > count or rng.end.line > count:
        raise BadArguments(
            f"The range (lines {rng.start.line}-{rng.end.line}, 0-based) is outside {doc.uri}, "
            f"which has {count} lines"
        )


def offset(doc: Document, position: t.Position) -> int:
    """The index into `doc.source` of an LSP position (characters past a line's end clamp to its end)."""
    index, breaks = 0, 0
    for match in _LINE_BREAK.finditer(doc.source):
        if breaks == position.line:
            return index + _utf16_to_index(doc.source[index : match.start()], position.character)
        index, breaks = match.end(), breaks + 1
    if position.line > breaks:
        return len(doc.source)
    return index + _utf16_to_index(doc.source[index:], position.character)


def _utf16_to_index(line: str, units: int) -> int:
    count = 0
    for i, char in enumerate(line):
        if count >= units:
            return i
        count += 2 if ord(char) > 0xFFFF else 1
    return len(line)


def text_in(doc: Document, rng: t.Range) -> str:
    check_inside(doc, rng)
    return doc.source[offset(doc, rng.start) : offset(doc, rng.end)]


def run_target(doc: Document, rng: t.Range | None, position: t.Position | None) -> RunTarget:
    """What `interpreter.run {uri, range?, position?}` runs: a non-empty range as selected (character-wise);
    else the `# %%` cell around the position (or the empty range's start); else the whole document."""
    if rng is not None and not is_empty(rng):
        return RunTarget(text_in(doc, rng), "selection", rng.start.line, rng.end.line)
    lines = doc.lines
    line = position.line if position is not None else rng.start.line if rng is not None else None
    if line is not None:
        if line >= max(len(lines), 1):
            raise BadArguments(f"Line {line} (0-based) is outside {doc.uri}, which has {len(lines)} lines")
        cell = cells.cell_at(lines, line)
        if cell is not None:
            return RunTarget(cells.cell_code(lines, *cell), "cell", cell[0], cell[1])
    return RunTarget("\n".join(lines), "document", 0, max(len(lines) - 1, 0))


def chat_selection(doc: Document, rng: t.Range | None) -> Selection:
    """The editor context of a chat: the selection when there is one, else the whole document."""
    if rng is not None and not is_empty(rng):
        return Selection(doc.uri, doc.language, text_in(doc, rng), rng.start.line, rng.end.line, doc.source)
    return Selection(doc.uri, doc.language, "", 0, max(len(doc.lines) - 1, 0), doc.source)


def insertion(doc: Document, rng: t.Range | None, code: str) -> tuple[t.Range, str]:
    """The edit that writes `code` into `doc`, always as whole lines, never gluing it to its neighbours.

    - no range: at the end of the document, on a line of its own;
    - a non-empty range: replaces it (a range of whole lines stays whole lines);
    - an empty range (the cursor) on a blank line or at a line's start: before that line;
    - an empty range inside or at the end of a line: after that line.
    """
    code = code.rstrip("\n")
    lines = doc.lines
    if rng is None or (is_empty(rng) and rng.start.line >= len(lines)):
        end = _end(doc)
        before = "\n" if doc.source and not doc.source.endswith(("\n", "\r")) else ""
        return t.Range(start=end, end=end), before + code + "\n"
    check_inside(doc, rng)
    if not is_empty(rng):
        whole_lines = rng.start.character == 0 and rng.end.character == 0 and rng.end.line > rng.start.line
        return rng, code + "\n" if whole_lines else code
    line = rng.start.line
    text = lines[line]
    if not text.strip() or rng.start.character == 0:
        start = t.Position(line=line, character=0)
        return t.Range(start=start, end=start), code + "\n"
    end_of_line = t.Position(line=line, character=_utf16_len(text))
    return t.Range(start=end_of_line, end=end_of_line), "\n" + code


def _end(doc: Document) -> t.Position:
    lines = doc.lines
    if not lines:
        return t.Position(line=0, character=0)
    if doc.source.endswith(("\n", "\r")):
        return t.Position(line=len(lines), character=0)
    return t.Position(line=len(lines) - 1, character=_utf16_len(lines[-1]))


def _utf16_len(text: str) -> int:
    return sum(2 if ord(char) > 0xFFFF else 1 for char in text)
