"""setup() checks its options and says what is wrong, before anything starts."""

from __future__ import annotations

import pytest
from nvim_harness import Editor


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("{ panle = {} }", "unknown option panle"),
        ("{ panel = { position = 'middle' } }", "panel.position must be one of right, left, bottom, top"),
        ("{ settings = { autoRun = 'yes' } }", "settings.autoRun must be a boolean, got string"),
        ("{ keymaps = { approve = 1 } }", "keymaps.approve must be a key (string) or false"),
        ("{ cmd = {} }", "cmd is an empty list"),
        ("{ images = 'sixel' }", 'images must be "auto", "image.nvim", "kitty" or "path", got sixel'),
    ],
)
def test_bad_options_are_refused_with_a_reason(start_editor, options: str, message: str) -> None:
    ed: Editor = start_editor()
    ok, err = ed.lua(f"local ok, err = pcall(require('interpreter_lsp').setup, {options}) return {{ ok, err }}")
    assert not ok
    assert err.startswith("interpreter_lsp.setup: ") and message in err, err
