"""The README's main job: scripts/try.sh opens Neovim on the example workspace, ready to run a cell."""

from __future__ import annotations

import subprocess

from nvim_harness import REPO


def test_try_script_runs_the_first_cell_of_the_example(editor_env) -> None:
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "try.sh"), "--check"],
        capture_output=True,
        text=True,
        timeout=170,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 + 2 + ... + 100 = 5050" in done.stdout
    assert "✓ **Run** · python · by you · demo.py:6-9 · ok" in done.stdout
