"""Lua unit specs of the Neovim client (tests/neovim/lua/interpreter_lsp_specs/*.lua), each one a case here:
a headless Neovim with the plugin set up and no server; a spec feeds the session notifications by their
protocol names (and history events) and asserts on the session's state and on the panel's lines. The
runner is tests/neovim/lua/interpreter_lsp_spec.lua."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from nvim_harness import TESTS, Editor

SPEC_DIR = TESTS / "lua" / "interpreter_lsp_specs"
# `it("name", function(t)` at the start of a line: the names are read here so each spec is a case.
IT = re.compile(r'^it\("((?:[^"\\]|\\.)*)", function\(t\)', re.MULTILINE)
CASES = [(f.stem, name) for f in sorted(SPEC_DIR.glob("*.lua")) for name in IT.findall(f.read_text(encoding="utf-8"))]


@pytest.fixture
def ed(start_editor, tmp_path: Path) -> Editor:
    """Neovim with the plugin set up and no file open: no server starts."""
    return start_editor(image_dir=str(tmp_path / "images"))


@pytest.mark.parametrize(("module", "name"), CASES, ids=[f"{m}: {n}" for m, n in CASES])
def test_spec(ed: Editor, module: str, name: str) -> None:
    result = ed.lua("return require('interpreter_lsp_spec').run(...)", module, name)
    assert result["ok"], f"spec {module}: {name}\n{result['error']}"


def test_every_spec_is_a_case(ed: Editor) -> None:
    """A spec written so the pattern above misses it would never run: the lists must be the same."""
    for f in sorted(SPEC_DIR.glob("*.lua")):
        in_lua = ed.lua("return require('interpreter_lsp_spec').names(...)", f.stem)
        assert in_lua == [name for module, name in CASES if module == f.stem]
    assert len(CASES) >= 10
