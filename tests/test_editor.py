"""editor.py: which text a request means, and where a proposal goes, as pure functions (no server)."""

from __future__ import annotations

import pytest
from lsprotocol import types as t

from interpreter_lsp import editor
from interpreter_lsp.arguments import BadArguments

SOURCE = "import os\n\n# %% first\nx = 1\n\n# %% second\ny = 2\n"


def rng(a: int, b: int, c: int, d: int) -> t.Range:
    return t.Range(start=t.Position(line=a, character=b), end=t.Position(line=c, character=d))


def at(line: int, character: int = 0) -> t.Range:
    return rng(line, character, line, character)


def doc(source: str = SOURCE) -> editor.Document:
    return editor.Document("file:///w/a.py", source, "python")


def apply(d: editor.Document, edit: tuple[t.Range, str]) -> str:
    where, text = edit
    return d.source[: editor.offset(d, where.start)] + text + d.source[editor.offset(d, where.end) :]


def test_lines_split_like_lsp() -> None:
    assert editor.Document("u", "a\r\nb\rc\n").lines == ["a", "b", "c"]
    assert editor.Document("u", "a\n\n").lines == ["a", ""]
    assert editor.Document("u", "").lines == []
    assert editor.Document("u", "a\x0cb").lines == ["a\x0cb"]  # a form feed is not a line break in LSP


def test_offsets_count_utf16_units() -> None:
    d = editor.Document("u", "😀x = 1\nb\n")
    assert d.source[editor.offset(d, t.Position(line=0, character=2)) :].startswith("x = 1")
    assert editor.offset(d, t.Position(line=0, character=99)) == len("😀x = 1")
    assert editor.offset(d, t.Position(line=9, character=0)) == len(d.source)


def test_run_target_selection_cell_and_document() -> None:
    d = doc()
    assert editor.run_target(d, rng(3, 0, 3, 5), None) == editor.RunTarget("x = 1", "selection", 3, 3)
    # A character-wise selection is exactly what was selected, not the whole line.
    assert editor.run_target(d, rng(3, 4, 3, 5), None).code == "1"
    assert editor.run_target(d, None, t.Position(line=6, character=2)) == editor.RunTarget("y = 2", "cell", 5, 6)
    assert editor.run_target(d, at(3), None).kind == "cell"  # an empty range means its line's cell
    assert editor.run_target(d, None, None) == editor.RunTarget(SOURCE.rstrip("\n"), "document", 0, 6)
    no_cells = editor.Document("u", "print(1)\nprint(2)\n")
    assert editor.run_target(no_cells, None, t.Position(line=1, character=0)).kind == "document"


def test_ranges_and_positions_outside_the_document_are_refused() -> None:
    with pytest.raises(BadArguments, match="outside"):
        editor.run_target(doc(), rng(0, 0, 40, 0), None)
    with pytest.raises(BadArguments, match="outside"):
        editor.run_target(doc(), None, t.Position(line=40, character=0))


def test_chat_selection_or_the_whole_document() -> None:
    sel = editor.chat_selection(doc(), rng(3, 0, 3, 5))
    assert (sel.text, sel.start_line, sel.end_line, sel.document) == ("x = 1", 3, 3, SOURCE)
    whole = editor.chat_selection(doc(), at(2))
    assert (whole.text, whole.start_line, whole.end_line) == ("", 0, 6)


CODE = "def f(n):\n    return n * n"


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        # The cursor on an empty line: the code takes that place, the blank line stays after it.
        (at(4), "import os\n\n# %% first\nx = 1\ndef f(n):\n    return n * n\n\n# %% second\ny = 2\n"),
        # At the start of a line (a cell marker): before it, never glued to it.
        (at(5), "import os\n\n# %% first\nx = 1\n\ndef f(n):\n    return n * n\n# %% second\ny = 2\n"),
        # Inside a line: after that line.
        (at(3, 2), "import os\n\n# %% first\nx = 1\ndef f(n):\n    return n * n\n\n# %% second\ny = 2\n"),
        # At the end of the last line.
        (at(6, 5), "import os\n\n# %% first\nx = 1\n\n# %% second\ny = 2\ndef f(n):\n    return n * n\n"),
        # Past the end: appended.
        (at(7), SOURCE + CODE + "\n"),
        # No range: appended.
        (None, SOURCE + CODE + "\n"),
        # A range of whole lines is replaced by whole lines.
        (rng(3, 0, 4, 0), "import os\n\n# %% first\ndef f(n):\n    return n * n\n\n# %% second\ny = 2\n"),
        # A character-wise range is replaced exactly.
        (rng(3, 4, 3, 5), "import os\n\n# %% first\nx = def f(n):\n    return n * n\n\n# %% second\ny = 2\n"),
    ],
)
def test_insertion_never_glues_code_to_its_neighbours(where: t.Range | None, expected: str) -> None:
    d = doc()
    assert apply(d, editor.insertion(d, where, CODE + "\n")) == expected


def test_insertion_into_a_file_without_a_final_newline_or_empty() -> None:
    d = editor.Document("u", "a = 1")
    assert apply(d, editor.insertion(d, None, "b = 2")) == "a = 1\nb = 2\n"
    empty = editor.Document("u", "")
    assert apply(empty, editor.insertion(empty, None, "b = 2")) == "b = 2\n"
    assert apply(empty, editor.insertion(empty, at(0), "b = 2")) == "b = 2\n"
