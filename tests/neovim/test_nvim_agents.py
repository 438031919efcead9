"""Another agent (the MCP SDK's client with `interpreter-lsp mcp`, docs/agents.md) beside a real Neovim: its
proposal waits in the panel, named, the winbar and statusline say an agent waits, and the user decides."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from nvim_harness import SLOW_MS, Editor

AGENT = Path(__file__).resolve().parents[1] / "mcp_agent.py"


def test_an_agents_proposal_waits_for_the_user_and_the_statusline_says_so(start_editor, tmp_path: Path) -> None:
    ed: Editor = start_editor()
    ed.open("demo.py")
    seen = ed.helper("wait_kernel", "python", "idle", SLOW_MS)
    assert seen["ok"], seen
    answer = tmp_path / "answer.txt"
    # Started as a user starts their agent: in the workspace, with the same HOME and runtime directory.
    agent = subprocess.Popen(
        [sys.executable, str(AGENT), str(ed.workspace), str(answer), "nvim-test-agent"],
        cwd=ed.workspace, env=dict(os.environ), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        text = "\n".join(ed.wait_panel("from nvim-test-agent 1 at "))
        assert "print('from the agent', 6 * 7)" in text
        assert "from the agent 42" not in text, "nothing of an agent runs before the user decides"
        status = ed.lua("return require('interpreter_lsp').statusline()")
        assert status.startswith("nvim-test-agent 1 waiting · "), status
        winbar = ed.lua(
            "local s = require('interpreter_lsp_test').session(); local w = s.panel:window(); "
            "return w and vim.wo[w].winbar or 'no panel window'"
        )
        assert "nvim-test-agent 1 waiting" in winbar, winbar

        ed.nvim.command("InterpreterApprove")
        text = "\n".join(ed.wait_panel("from the agent 42"))
        assert "by an agent (nvim-test-agent 1)" in text
        _, err = agent.communicate(timeout=60)
        assert agent.returncode == 0, err.decode(errors="replace")
        said = answer.read_text()
        assert said.startswith("Run a-") and ": ok in " in said and "from the agent 42" in said, said
        assert "waiting" not in ed.lua("return require('interpreter_lsp').statusline()")
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait(10)
