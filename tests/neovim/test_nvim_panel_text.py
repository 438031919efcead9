"""The panel as text, without a server: notifications are fed to a session as the client's handlers
would, and what the user reads is compared.

Snapshots: four states drawn in the panel (a proposal card, a run with a traceback, a plot, the no-model
message), as the screen shows them at 80 and 160 columns (window bar, wrapping), compared with the
references in tests/neovim/snapshots/. UPDATE_SNAPSHOTS=1 rewrites the references."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from nvim_harness import TESTS, Editor

from interpreter_lsp.llm.discovery import NO_MODEL_HELP

SNAPSHOTS = TESTS / "snapshots"
# A 1x1 PNG.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/PchI7wAAAABJRU5ErkJggg=="
CONTEXT = {"tokens": 12345, "window": 128000, "windowSource": "model", "replyReserve": 4096, "cost": 0.04,
           "costKnown": True, "compactions": 0}  # fmt: skip

STATES = {
    "proposal": """
        s:user_chat("load data.csv and show the first rows")
        s:on_message({ turnId = "t1", seq = 0, delta = "I will read it with pandas.", done = true })
        s:on_proposal({ proposalId = "p1", turnId = "t1", language = "python", autoRun = false,
          code = "import pandas as pd\\ndf = pd.read_csv('data.csv')\\nprint(df.head())",
          risk = { level = "medium", reasons = { "reads data.csv" } },
          waitReason = "auto-run is off: waits for approval" })
        s:on_turn_status({ turnId = "t1", state = "awaiting-approval", context = ... })
    """,
    "traceback": """
        s:on_run_status({ runId = "r1", state = "queued", language = "python", origin = "user",
          code = "def f():\\n    return 1 / 0\\nf()",
          source = { uri = vim.uri_from_fname(vim.fn.getcwd() .. "/calc.py"), kind = "selection",
                     startLine = 3, endLine = 5 } })
        s:on_run_status({ runId = "r1", state = "running", language = "python" })
        s:on_output({ runId = "r1", seq = 0, kind = "error", ename = "ZeroDivisionError",
          evalue = "division by zero",
          text = "Traceback (most recent call last):\\n  Cell In[1], line 3\\n    f()\\n"
            .. "  Cell In[1], line 2, in f\\n    return 1 / 0\\nZeroDivisionError: division by zero" })
        s:on_run_status({ runId = "r1", state = "error", language = "python", durationMs = 12 })
    """,
    "plot": """
        s:on_run_status({ runId = "r2", state = "queued", language = "python", origin = "user",
          code = "import matplotlib.pyplot as plt\\nplt.plot([1, 3, 2])\\nplt.show()" })
        s:on_output({ runId = "r2", seq = 0, kind = "display",
          data = { ["image/png"] = "PNG", ["text/plain"] = "<Figure size 640x480 with 1 Axes>" } })
        s:on_run_status({ runId = "r2", state = "ok", language = "python", durationMs = 830 })
    """.replace('"PNG"', f'"{PNG}"'),
    "no-model": """
        s:user_chat("hello")
        s:on_turn_status({ turnId = "t3", state = "thinking" })
        s:on_turn_status({ turnId = "t3", state = "error", message = select(2, ...) })
    """,
}


@pytest.fixture
def ed(start_editor) -> Editor:
    """Neovim with the plugin set up and no file open: no server starts."""
    return start_editor(image_dir="images")


def feed(ed: Editor, state: str) -> str:
    root = f"/snapshots/{state}"
    ed.lua(
        f"local s = require('interpreter_lsp_test').fresh_session('{root}') {STATES[state]}",
        CONTEXT,
        NO_MODEL_HELP,
    )
    return root


@pytest.mark.parametrize("width", [80, 160])
def test_panel_snapshots(ed: Editor, width: int) -> None:
    update = os.environ.get("UPDATE_SNAPSHOTS") == "1"
    differ = []
    for state in STATES:
        root = feed(ed, state)
        shown = "\n".join(ed.helper("screen_of", root, width, 40)) + "\n"
        ref: Path = SNAPSHOTS / f"{state}-{width}.txt"
        if update:
            ref.write_text(shown, encoding="utf-8")
        elif not ref.exists() or ref.read_text(encoding="utf-8") != shown:
            differ.append(f"--- {ref.name} (expected)\n{ref.read_text() if ref.exists() else ''}--- shown\n{shown}")
    assert not differ, "the panel differs from its snapshot (UPDATE_SNAPSHOTS=1 rewrites):\n" + "\n".join(differ)


def test_context_use_shows_in_the_bar_and_compaction_in_the_panel(ed: Editor) -> None:
    """interpreter.status / turnStatus `context` (when a server sends it) in the window bar and the status
    text; the `compacting` state; a `compaction` history event as one line; an absent or malformed
    field changes nothing."""
    bar = "return table.concat(require('interpreter_lsp_test').fresh_session('/ctx'):status_parts(), ' | ')"
    ed.lua("require('interpreter_lsp_test').fresh_session('/ctx'):on_turn_status({ turnId = 't', state = 'thinking' })")
    assert ed.lua(bar) == "python idle | thinking"
    ed.lua(
        "local s = require('interpreter_lsp_test').fresh_session('/ctx') "
        "s:on_turn_status({ turnId = 't', state = 'compacting', context = ... })",
        CONTEXT,
    )
    assert ed.lua(bar) == "python idle | condensing the conversation… | 12.3k/128k tok · $0.04"
    ed.lua(
        "local s = require('interpreter_lsp_test').fresh_session('/ctx') "
        "s:on_turn_status({ turnId = 't', state = 'done', context = 'nonsense' })"
    )
    assert ed.lua(bar) == "python idle | 12.3k/128k tok · $0.04", "a malformed context keeps the last one"
    unknown = {**CONTEXT, "cost": 0, "costKnown": False, "window": 8192, "windowSource": "guess"}
    text = ed.lua("return require('interpreter_lsp.session').context_text(...)", unknown)
    assert text == "12.3k/8.2k? tok · cost unknown"

    status = ed.lua(
        "local s = require('interpreter_lsp_test').fresh_session('/ctx') "
        "return require('interpreter_lsp').status_text(s, { model = 'openai/x', kernels = {}, context = ... })",
        {**CONTEXT, "compactions": 2},
    )
    assert "context: 12.3k/128k tok · $0.04 (window from model, condensed 2 times)" in status
    plain = ed.lua(
        "local s = require('interpreter_lsp_test').fresh_session('/ctx') "
        "return require('interpreter_lsp').status_text(s, { model = 'openai/x', kernels = {} })"
    )
    assert not any(line.startswith("context:") for line in plain)
    limited = ed.lua(
        "local s = require('interpreter_lsp_test').fresh_session('/ctx') "
        "return require('interpreter_lsp').status_text(s, { model = 'openai/x', kernels = { ... } })",
        {"language": "python", "state": "idle", "source": "venv", "limits": "rlimits, each process: memory 4 GiB"},
    )
    assert "limits (python): rlimits, each process: memory 4 GiB" in limited
    assert not any(line.startswith("limits") for line in plain)

    ed.lua(
        "local s = require('interpreter_lsp_test').fresh_session('/ctx') "
        "require('interpreter_lsp.history').render(s, ...)",
        [
            {"type": "user", "turnId": "t0", "text": "first question", "content": "first question"},
            {"type": "compaction", "summary": "The user asked a question.", "upTo": "t0", "summaryTokens": 321},
            {"type": "compaction", "summary": "Again."},
        ],
    )
    lines = ed.lua("local s = require('interpreter_lsp_test').fresh_session('/ctx') s.panel:flush() "
                   "return vim.api.nvim_buf_get_lines(s.panel.buf, 0, -1, false)")  # fmt: skip
    assert "⋯ Earlier turns condensed (321 tokens)" in lines
    assert "⋯ Earlier turns condensed" in lines
    assert "first question" in lines, "the panel still shows every earlier event"


def test_the_bar_says_what_is_true_and_fits_its_window(ed: Editor) -> None:
    bar = "return table.concat(require('interpreter_lsp.session').get('/bar', require('interpreter_lsp.client').opts)"
    bar += ":status_parts(), ' | ')"
    ed.lua("require('interpreter_lsp.session').get('/bar', require('interpreter_lsp.client').opts)")
    assert ed.lua(bar) == "starting…", "before the server reports a kernel, the bar says it is starting"
    ed.lua(
        "local s = require('interpreter_lsp.session').get('/bar', require('interpreter_lsp.client').opts) "
        "s:on_kernel_status({ language = 'python', state = 'idle' }) "
        "s:on_turn_status({ turnId = 't', state = 'running' }) "
        "s:on_run_status({ runId = 'r', state = 'queued', language = 'python', code = 'x', origin = 'model' }) "
        "s:on_run_status({ runId = 'r', state = 'running', language = 'python' })"
    )
    assert ed.lua(bar) == "python running", "a run in progress: the kernel is running, whatever it said last"
    ed.lua(
        "local s = require('interpreter_lsp.session').get('/bar', require('interpreter_lsp.client').opts) "
        "s:on_run_status({ runId = 'r', state = 'interrupted', language = 'python' }) "
        "s:on_turn_status({ turnId = 't', state = 'cancelled' })"
    )
    assert ed.lua(bar) == "python idle", "an ended turn leaves nothing behind in the bar"

    parts = ["python running", "awaiting approval", "12.3k/128k tok · $0.04", "openai/gpt-4o-mini"]
    fit = "return require('interpreter_lsp.panel').fit(...)"
    # The panel beside an 80-column editor is 32 columns wide: what does not fit is left out, whole.
    assert ed.lua(fit, parts, 32) == " python running"
    assert ed.lua(fit, parts, 40) == " python running · awaiting approval"
    assert ed.lua(fit, parts, 160) == " " + " · ".join(parts)
    assert ed.lua(fit, ["100% done"], 80) == " 100%% done", "a % in the bar is shown, not read as an item"


def test_an_agents_proposal_names_the_agent_and_the_time(ed: Editor) -> None:
    """Another agent's proposal (over MCP, docs/agents.md) is a card like the model's, with who asked."""
    lines = ed.lua(
        """
        local s = require('interpreter_lsp_test').fresh_session('/agents')
        s:on_proposal({ proposalId = "p9", turnId = "a-000000000001", language = "python", autoRun = false,
          code = "print(1)", risk = { level = "low", reasons = {} }, origin = "agent",
          agent = "Claude Code 2.1", created = "2026-12-03T20:15:02Z" })
        s.panel:flush()
        return vim.api.nvim_buf_get_lines(s.panel.buf, 0, -1, false)
        """
    )
    head = next(line for line in lines if line.startswith("**Proposal"))
    assert head.endswith("· from Claude Code 2.1 at 2026-12-03T20:15:02Z"), head


def test_a_gateway_connection_lost_mid_run_is_said_at_once_and_its_return_too(ed: Editor) -> None:
    """The server keeps the kernel's state (busy) and says the connection is lost, then restored: the panel
    says both as they happen, not only the run's end up to the connect timeout later."""
    lines = ed.lua(
        """
        local s = require('interpreter_lsp_test').fresh_session('/gw')
        s:on_kernel_status({ language = 'python', state = 'busy' })
        s:on_kernel_status({ language = 'python', state = 'busy',
          message = 'the connection to the gateway http://gw:8888 was lost; reconnecting' })
        s:on_kernel_status({ language = 'python', state = 'busy',
          message = 'reconnected to the same kernel on the gateway; output resumes' })
        s:on_kernel_status({ language = 'python', state = 'idle' })
        s.panel:flush()
        return vim.api.nvim_buf_get_lines(s.panel.buf, 0, -1, false)
        """
    )
    text = "\n".join(lines)
    assert "⚠ the python kernel: the connection to the gateway http://gw:8888 was lost; reconnecting" in text
    assert "the python kernel: reconnected to the same kernel on the gateway; output resumes" in text
    assert text.index("was lost") < text.index("reconnected")
