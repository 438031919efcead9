"""What a Neovim user of codecompanion or molten expects, with the real server, a scripted model and
real keys (typed with nvim_input), checked on the screen as the user sees it (screenstring of every
cell): applying after a range chat writes over the lines the request was about, wherever they moved,
after a diff the user accepts; keys act on the pending proposal; output shows under the code; a prompt
buffer; the panel rendered; messages in Neovim's words."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from nvim_harness import SLOW_MS, Editor
from test_nvim_loop import open_ready, settings_for

from scripted_model import ScriptedModel


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as m:
        yield m


def screen(ed: Editor) -> str:
    return "\n".join(ed.helper("screen"))


def wait_for(ed: Editor, expr: str, what: str, timeout_ms: int = SLOW_MS) -> None:
    ok = ed.lua(f"return vim.wait({timeout_ms}, function() return {expr} end, 20)")
    assert ok, f"{what} never happened; screen:\n{screen(ed)}" + ed.diagnosis()


def keys(ed: Editor, typed: str) -> None:
    """Type keys as a user does, and let Neovim act on them."""
    ed.nvim.input(typed)
    ed.lua("vim.wait(200, function() return false end, 20)")  # the typeahead is processed in the loop


def panel_window(ed: Editor) -> None:
    wait_for(ed, "require('interpreter_lsp').session().panel:window() ~= nil", "the panel to open")
    ed.lua("vim.api.nvim_set_current_win(require('interpreter_lsp').session().panel:window())")


NEW_F = "def f():\n    return 42\n"


def test_apply_after_a_range_chat_follows_the_lines_and_asks_with_a_diff(start_editor, model) -> None:
    """The issue's journey: select two lines, ask, add a line above them meanwhile, then `i` on the card:
    a diff of exactly what changes, written only on `a`, over the lines the request was about."""
    model.reply("Here:\n```python\n" + NEW_F + "```\n")
    ed: Editor = start_editor(settings_for(model))
    ed.lua("vim.o.columns, vim.o.lines = 120, 40")
    open_ready(ed, "demo.py")
    source = ed.nvim.current.window
    keys(ed, "2GVj:Interpreter rewrite f<CR>")
    ed.wait_panel("pending: a approve")
    ed.nvim.current.window = source
    keys(ed, "ggO# note<Esc>")
    assert source.buffer[:3] == ["# note", "# %% first cell", "x = 6 * 7"]
    panel_window(ed)
    keys(ed, "i")
    wait_for(ed, "vim.bo.filetype == 'diff'", "the diff to open")
    shown = screen(ed)
    assert "Proposal 1 → demo.py:3-4 · a (or <CR>) writes it" in shown, shown
    assert "-x = 6 * 7" in shown and '-print("x is", x)' in shown and "+def f():" in shown, shown
    assert "changed since you asked" not in shown, "only a line above was added: the lines themselves are as asked"
    assert source.buffer[:4] == ["# note", "# %% first cell", "x = 6 * 7", 'print("x is", x)'], "nothing written yet"
    keys(ed, "a")
    ed.wait_panel("applied to demo.py")
    assert source.buffer[:5] == ["# note", "# %% first cell", "def f():", "    return 42", ""], source.buffer[:]
    assert "# %% second cell" in source.buffer[:], "the rest is untouched"


def test_changed_target_lines_are_diffed_against_their_text_now_and_never_written_blind(start_editor, model) -> None:
    model.reply("```python\n" + NEW_F + "```\n")
    ed: Editor = start_editor(settings_for(model))
    ed.lua("vim.o.columns, vim.o.lines = 120, 40")
    open_ready(ed, "demo.py")
    source = ed.nvim.current.window
    keys(ed, "2GVj:Interpreter rewrite f<CR>")
    ed.wait_panel("pending: a approve")
    ed.nvim.current.window = source
    keys(ed, "2GA  # edited<Esc>")  # the user changed one of the lines meanwhile
    panel_window(ed)
    keys(ed, "i")
    wait_for(ed, "vim.bo.filetype == 'diff'", "the diff to open")
    shown = screen(ed)
    assert "⚠ these lines changed since you asked: the diff is against their text now" in shown, shown
    assert "-x = 6 * 7  # edited" in shown, shown
    # While the diff is open the lines change again: `a` shows the new diff instead of writing.
    source.buffer[2] = "print('changed again')"
    keys(ed, "a")
    shown = screen(ed)
    assert "⚠ the lines changed while this diff was open" in shown, shown
    assert "-print('changed again')" in shown, shown
    assert source.buffer[1] == "x = 6 * 7  # edited", "nothing was written"
    # `q` closes it unwritten: the proposal still waits, and `a` in the panel approves it.
    keys(ed, "q")
    assert ed.lua("return vim.bo.filetype") == "markdown", "back in the panel"
    assert "pending" in ed.lua("return require('interpreter_lsp').session().proposal_order[1].state")


def test_keys_act_on_the_pending_proposal_and_a_refusal_shows_at_the_cursor(start_editor, model) -> None:
    model.reply("```python\nprint('one')\n```\n")
    model.reply("Done.")
    model.reply("```python\nprint('two')\n```\n")
    ed: Editor = start_editor(settings_for(model))
    ed.lua("vim.o.columns, vim.o.lines = 120, 40")
    open_ready(ed, "demo.py")
    ed.nvim.command("Interpreter first")
    ed.wait_panel("pending: a approve")
    panel_window(ed)
    keys(ed, "a")
    ed.wait_panel("Done.")
    # The approved card under the cursor: `a` again says why nothing happens, where the user looks.
    ed.lua("vim.fn.search('Proposal 1', 'bw')")
    keys(ed, "a")
    floats = ed.helper("wait_float", "Nothing to approve: proposal 1 is approved", 10_000)
    assert floats["ok"], floats
    assert "Nothing to approve: proposal 1 is approved" in screen(ed)
    assert ed.lua("return vim.tbl_count(require('interpreter_lsp').session().runs)") == 1, "no second run"
    # A new pending proposal: `a` on the old card acts on the pending one, not the decided one.
    ed.lua("vim.cmd('wincmd p')")
    ed.nvim.command("Interpreter second")
    ed.wait_panel("print('two')")
    ed.wait_panel("pending: a approve")
    panel_window(ed)
    ed.lua("vim.fn.search('Proposal 1', 'bw')")
    keys(ed, "a")
    text = "\n".join(ed.wait_panel("two\n"))
    assert "Proposal 2** · python · risk: low · approved" in text


def test_output_shows_under_the_cell_with_its_time(start_editor) -> None:
    ed: Editor = start_editor()
    ed.lua("vim.o.columns, vim.o.lines = 120, 40")
    open_ready(ed, "demo.py")
    ed.nvim.command("call cursor(2, 1)")
    ed.nvim.command("InterpreterRun")
    ed.wait_panel("✓ **Run**")
    buf = ed.nvim.current.buffer.number
    wait_for(ed, f"#require('interpreter_lsp_test').inline_lines({buf}) >= 2", "output under the cell")
    inline = ed.helper("inline_lines", buf)
    assert inline[0]["row"] == 2, inline  # under the cell's last line (`print("x is", x)`)
    assert re.match(r"  ✓ ok · \d+(\.\d)? m?s · \d\d:\d\d:\d\d$", inline[0]["text"]), inline
    assert inline[1]["text"] == "  │ x is 42", inline
    rows = ed.helper("screen")
    at = next(i for i, r in enumerate(rows) if 'print("x is", x)' in r)
    assert "✓ ok" in rows[at + 1] and "x is 42" in rows[at + 2], "\n".join(rows)
    # Run it again after a change: one block, the latest output.
    ed.nvim.current.buffer[1] = "x = 7"
    ed.nvim.command("InterpreterRun")
    ed.wait_panel("x is 7")
    wait_for(
        ed, f"(require('interpreter_lsp_test').inline_lines({buf})[2] or {{}}).text == '  │ x is 7'", "the new output"
    )
    assert len(ed.helper("inline_lines", buf)) == 2, "the earlier block was replaced"


def test_the_prompt_buffer_sends_several_lines_and_keeps_a_history(start_editor, model) -> None:
    model.reply("First answer.")
    model.reply("Second answer.")
    ed: Editor = start_editor(settings_for(model))
    ed.lua("vim.o.columns, vim.o.lines = 120, 40")
    open_ready(ed, "demo.py")
    source = ed.nvim.current.window
    keys(ed, ":Interpreter<CR>")
    wait_for(ed, "vim.api.nvim_buf_get_name(0):find('interpreter://prompt') ~= nil", "the prompt buffer")
    assert "Ask · <CR>/<C-s> sends · <C-p> earlier · q" in screen(ed)
    keys(ed, "load data.csv<CR>and plot column b<Esc><CR>")
    ed.wait_panel("First answer.")
    assert ed.nvim.current.window == source, "the cursor is back where it was"
    sent = model.wait_requests(1)[0]["messages"][-1]["content"]
    assert "load data.csv\nand plot column b" in str(sent), sent
    keys(ed, ":Interpreter<CR>")
    wait_for(ed, "vim.api.nvim_buf_get_name(0):find('interpreter://prompt') ~= nil", "the prompt buffer")
    keys(ed, "<Esc><C-p>")
    assert ed.nvim.current.buffer[:] == ["load data.csv", "and plot column b"], "the earlier prompt"
    keys(ed, "<C-s>")
    ed.wait_panel("Second answer.")
    # Kept for the next Neovim, in its state directory (never in the repository).
    ed2: Editor = start_editor(settings_for(model))
    ed2.lua("require('interpreter_lsp.prompt').open({ on_send = function() end })")
    keys(ed2, "<Esc><C-p>")
    assert ed2.nvim.current.buffer[:] == ["load data.csv", "and plot column b"], ed2.nvim.current.buffer[:]
    assert not list(ed.workspace.glob("*prompts*"))


def test_the_panel_reads_as_rendered_markdown(start_editor, model) -> None:
    model.reply("Let me **check**:\n```python\nprint('product:', 6 * 7)\n```\n")
    model.reply("The product is 42.")
    ed: Editor = start_editor(settings_for(model))
    ed.lua("vim.o.columns, vim.o.lines = 160, 40")
    open_ready(ed, "demo.py")
    ed.nvim.command("Interpreter six times seven")
    ed.wait_panel("pending: a approve")
    panel_window(ed)
    keys(ed, "a")
    ed.wait_panel("The product is 42.")
    shown = screen(ed)
    assert "Run · python · by the model · proposal 1 · ok" in shown, shown
    assert "**" not in shown and "```" not in shown and "~~~" not in shown, shown
    assert "product: 42" in shown


def test_an_untrusted_folder_names_the_neovim_command_and_the_lens_shows_no_error_code(start_editor) -> None:
    ed: Editor = start_editor(trust=False)
    ed.open("demo.py")
    ed.nvim.command("call cursor(2, 1)")
    ed.nvim.command("InterpreterRun")
    seen = ed.helper("wait_note", "not trusted", 30_000)
    assert seen["ok"], seen
    said = [n["msg"] for n in seen["notes"] if "not trusted" in n["msg"]]
    assert "This folder is not trusted: :InterpreterTrust" in said[-1], said
    assert "VS Code" not in said[-1], said
    assert "\n" not in said[-1], "one line, no hit-enter prompt"
    # The code lens's "Run cell" goes through the plugin: no "-32602:" in front of the sentence.
    ed.lua(
        "local c = vim.lsp.get_clients({ name = 'interpreter_lsp' })[1] "
        "c:exec_cmd({ title = 'Run cell', command = 'interpreter.run', "
        "arguments = { { uri = vim.uri_from_bufnr(0), position = { line = 1, character = 0 } } } }, { bufnr = 0 })"
    )
    ed.lua("vim.wait(3000, function() return false end, 50)")
    notes = [n["msg"] for n in ed.lua("return require('interpreter_lsp_test').notes")]
    assert not any("-32602" in n for n in notes), notes
    assert not any("VS Code" in n for n in notes), notes
    assert "VS Code" not in "\n".join(ed.panel())


def test_after_o_a_later_run_out_of_sight_is_announced(start_editor) -> None:
    ed: Editor = start_editor()
    ed.lua("vim.o.columns, vim.o.lines = 120, 40")
    open_ready(ed, "demo.py")
    ed.nvim.command("call cursor(2, 1)")
    ed.nvim.command("InterpreterRun")
    ed.wait_panel("x is 42")
    panel_window(ed)
    ed.lua("vim.fn.search('x is 42', 'bw')")
    keys(ed, "o")  # all of its output, in a new tab: the panel is out of sight now
    wait_for(ed, "vim.fn.tabpagenr('$') == 2", "the output's tab")
    ed.lua("require('interpreter_lsp').run_code('print(\"later\")', 'python')")
    ed.wait_panel("later\n")
    seen = ed.helper("wait_note", "run python ok", 20_000)
    assert seen["ok"], seen
    said = [n["msg"] for n in seen["notes"] if "run python ok" in n["msg"]]
    assert said[-1].endswith(":InterpreterPanel shows it"), said
    # Back in the first tab with the panel scrolled up: a run landing below the window is announced too.
    ed.nvim.command("tabclose")
    panel_window(ed)
    keys(ed, "gg")
    ed.lua("vim.cmd('wincmd p')")
    ed.lua("for i = 1, 30 do require('interpreter_lsp').run_code('print(' .. i .. ')', 'python') end")
    ed.wait_panel("30\n")
    seen = ed.helper("wait_note", "below in the panel", 20_000)
    assert seen["ok"], seen
    # The panel where it is in sight: nothing announced for the run the user sees. (Announcements said
    # within a moment share the message line, words.say: let the last of the 30 runs' go out first.)
    ed.lua("vim.wait(300, function() return false end, 20)")
    before = len(ed.lua("return require('interpreter_lsp_test').notes"))
    panel_window(ed)
    keys(ed, "G")
    ed.lua("vim.cmd('wincmd p')")
    ed.lua("require('interpreter_lsp').run_code('print(\"seen\")', 'python')")
    ed.wait_panel("seen\n")
    ed.lua("vim.wait(500, function() return false end, 50)")
    after = [n["msg"] for n in ed.lua("return require('interpreter_lsp_test').notes")][before:]
    assert not any("run python" in n for n in after), after


def test_the_inline_review_shows_the_change_in_the_buffer_itself(start_editor, model) -> None:
    """apply_preview = "inline": the lines to replace marked removed, the new ones shown under them (nothing
    written yet); `ga` writes, and not over lines that changed while it was shown."""
    model.reply("```python\n" + NEW_F + "```\n")
    ed: Editor = start_editor(settings_for(model), apply_preview="inline")
    ed.lua("vim.o.columns, vim.o.lines = 120, 40")
    open_ready(ed, "demo.py")
    source = ed.nvim.current.window
    keys(ed, "2GVj:Interpreter rewrite f<CR>")
    ed.wait_panel("pending: a approve")
    ed.nvim.current.window = source
    keys(ed, "ggO# note<Esc>")
    panel_window(ed)
    keys(ed, "i")
    wait_for(ed, "vim.api.nvim_get_current_win() == " + str(source.handle), "the cursor in the source")
    rows = ed.helper("screen")
    shown = "\n".join(rows)
    assert "Proposal 1 → demo.py:3-4 · ga writes it · gr does not" in shown, shown
    at = next(i for i, r in enumerate(rows) if 'print("x is", x)' in r)
    assert rows[at + 1].strip().startswith("+ def f():") and "+     return 42" in rows[at + 2], shown
    assert source.buffer[:4] == ["# note", "# %% first cell", "x = 6 * 7", 'print("x is", x)'], "nothing written yet"
    source.buffer[2] = "x = 7"  # changed while shown: `ga` shows it again instead of writing
    keys(ed, "ga")
    assert "the lines changed while this was shown" in screen(ed)
    assert source.buffer[2] == "x = 7"
    keys(ed, "ga")
    ed.wait_panel("applied to demo.py")
    assert source.buffer[:5] == ["# note", "# %% first cell", "def f():", "    return 42", ""], source.buffer[:]
    assert ed.lua("return vim.fn.maparg('ga', 'n')") == "", "the review's keys are gone with it"


def test_a_run_whose_output_shows_under_its_code_is_not_announced_again(start_editor) -> None:
    """The panel stays closed (open_on_activity off): a cell's run is in sight under the cell, so no line
    announces it; a run from Lua, with nothing in sight, is announced."""
    ed: Editor = start_editor(panel={"open_on_activity": False})
    open_ready(ed, "demo.py")
    ed.nvim.command("call cursor(2, 1)")
    ed.nvim.command("InterpreterRun")
    buf = ed.nvim.current.buffer.number
    wait_for(ed, f"#require('interpreter_lsp_test').inline_lines({buf}) >= 2", "output under the cell")
    ed.lua("vim.wait(300, function() return false end, 50)")
    notes = [n["msg"] for n in ed.lua("return require('interpreter_lsp_test').notes")]
    assert not any("run python" in n for n in notes), notes
    ed.lua("require('interpreter_lsp').run_code('print(1)', 'python')")
    seen = ed.helper("wait_note", "run python ok", 20_000)
    assert seen["ok"], seen


def test_automatic_compaction_leaves_a_note_live(start_editor, model) -> None:
    """A small context window: after a few turns the server condenses the earlier ones before a request;
    the live panel says so at once (not only after a reopen)."""
    model.responder = lambda body: (
        "Summary: the user asked for tasks." if "You condense a conversation" in str(body["messages"][0]["content"])
        else None
    )  # fmt: skip
    ed: Editor = start_editor(settings_for(model, contextWindow=2400, compactAt=0.5, autoRun=True))
    open_ready(ed, "demo.py")
    for i in range(12):
        model.reply(f"```python\nprint('task-{i} ' * 150)\n```\n")
        model.reply(f"Done with task-{i}.")
        ed.nvim.command(f"Interpreter do task-{i}")
        ed.wait_panel(f"Done with task-{i}.")
        wait_for(ed, "require('interpreter_lsp').session().turn_state == nil", "the turn's end")
        if "⋯ Earlier turns condensed" in "\n".join(ed.panel()):
            break
    text = "\n".join(ed.panel())
    assert "⋯ Earlier turns condensed (the model's view is now " in text, text[-3000:]
