"""Running code from Neovim: what the user sees in the panel and how the editor holds up."""

from __future__ import annotations

from nvim_harness import SLOW_MS, Editor


def test_run_cell_shows_its_output(start_editor) -> None:
    ed: Editor = start_editor()
    ed.open("demo.py")
    ed.nvim.command("call cursor(3, 1)")
    ed.nvim.command("InterpreterRun")
    text = "\n".join(ed.wait_panel("✓ **Run**"))
    assert "x is 42" in text
    assert "second cell ran" not in text, "only the cell under the cursor runs"
    assert "demo.py:2-3" in text

    # The kernel keeps its state: the second cell sees x from the first.
    ed.nvim.command("call cursor(7, 1)")
    ed.nvim.command("InterpreterRun")
    ed.wait_panel("✓ **Run**", count=2)
    ed.nvim.command("4InterpreterRun")  # a blank line: nothing to run, and the user is told
    notes = ed.lua("return require('interpreter_lsp_test').notes")
    assert any("nothing to run" in n["msg"] for n in notes), notes
    ed.nvim.command("3InterpreterRun")
    lines = ed.wait_panel("✓ **Run**", count=3)
    assert "\n".join(lines).count("x is 42") == 2
    assert "second cell ran" in "\n".join(lines)
    assert any("demo.py:3 · ok" in line for line in lines), lines


def test_run_range_runs_only_those_lines(start_editor) -> None:
    ed: Editor = start_editor()
    (ed.workspace / "lines.py").write_text('a = 1\nprint("line two", a)\nprint("line three")\n')
    ed.open("lines.py")
    ed.nvim.command("1,2InterpreterRun")
    text = "\n".join(ed.wait_panel("✓ **Run**"))
    assert "line two 1" in text
    assert "line three" not in text.split("~~~")[1], "the third line is outside the range"
    assert "lines.py:1-2" in text

    ed.nvim.command("call cursor(3, 1)")
    ed.nvim.command("InterpreterRun")  # no range, no cells: the cursor line
    ed.wait_panel("✓ **Run**", count=2)
    assert "line three" in "\n".join(ed.panel()).split("lines.py:3")[1]
    assert "files:" not in "\n".join(ed.panel()), "runs that touch no file list none"

    # A run that writes, rewrites and removes workspace files lists them after its status line.
    (ed.workspace / "old.txt").write_text("old")
    (ed.workspace / "gone.txt").write_text("bye")
    code = (
        "import os, pathlib\n"
        "pathlib.Path('out').mkdir()\n"
        "pathlib.Path('out/new.csv').write_text('a,b')\n"
        "pathlib.Path('old.txt').write_text('new')\n"
        "os.remove('gone.txt')\n"
    )
    ed.lua("require('interpreter_lsp').run_code(..., 'python')", code)
    lines = ed.wait_panel("✓ **Run**", count=3)
    status = max(i for i, line in enumerate(lines) if line.startswith("✓ **Run**"))
    assert lines[status + 1] == "files: - gone.txt  ~ old.txt  + out/new.csv", lines[status:]


def test_error_is_shown_as_an_error(start_editor) -> None:
    ed: Editor = start_editor()
    (ed.workspace / "bad.py").write_text("def f():\n    return 1 / 0\nf()\n")
    ed.open("bad.py")
    ed.nvim.command("%InterpreterRun")
    lines = ed.wait_panel("✗ **Run**")
    text = "\n".join(lines)
    assert "ZeroDivisionError" in text
    assert "division by zero" in text
    assert "\x1b[" not in text, "tracebacks reach the panel without terminal colour codes"
    assert "InterpreterError" in ed.helper("highlights_of", "ZeroDivisionError")
    assert "InterpreterError" in ed.helper("highlights_of", "✗ **Run**")


def test_interrupt_stops_a_long_run_and_the_kernel_lives_on(start_editor) -> None:
    ed: Editor = start_editor()
    (ed.workspace / "slow.py").write_text(
        'import time\nprint("sta" + "rted", flush=True)\ntime.sleep(120)\nprint("ne" + "ver")\n'
    )
    ed.open("slow.py")
    ed.nvim.command("%InterpreterRun")
    ed.wait_panel("started")
    ed.nvim.command("InterpreterInterrupt")
    lines = ed.wait_panel("■ **Run**", timeout_ms=20_000)
    text = "\n".join(lines)
    assert "interrupted" in text, text
    assert "started" in text and "never" not in text, text

    ed.lua("require('interpreter_lsp').run_code('print(\"still alive\")', 'python')")
    assert "still alive" in "\n".join(ed.wait_panel("✓ **Run**"))


def test_flood_of_output_does_not_stall_the_editor(start_editor) -> None:
    """5,000 lines, paced by the kernel over about a second: the panel folds them, the editor's main
    loop keeps ticking, and a command sent mid-flood is answered before the run ends."""
    ed: Editor = start_editor()
    (ed.workspace / "flood.py").write_text(
        "import time\n"
        "for i in range(5000):\n"
        '    print(f"flood line {i}")\n'
        "    if i % 25 == 0:\n"
        "        time.sleep(0.005)\n"
    )
    ed.open("flood.py")
    ed.helper("start_lag_probe")
    ed.nvim.command("%InterpreterRun")
    ed.wait_panel("flood line 100\n")
    trip = ed.helper("status_round_trip", 10_000)
    lines = ed.wait_panel("✓ **Run**", timeout_ms=SLOW_MS)
    lag = ed.helper("stop_lag_probe")
    print(f"status answered in {trip['ms']:.0f} ms mid-flood; longest main-loop gap {lag['max_ms']:.0f} ms")

    assert trip["answered"], "interpreter.status got no answer during the flood"
    assert "running" in trip["runs"].values(), f"the flood ended before the command was answered: {trip}"
    assert trip["ms"] < 2000
    assert lag["max_ms"] < 500, f"the editor stalled for {lag['max_ms']:.0f} ms"
    text = "\n".join(lines)
    assert "flood line 0" in text
    assert "flood line 4999" in text
    assert "more lines folded" in text
    assert len(lines) < 600, "long output is folded, not written whole into the panel"

    ed.nvim.command("InterpreterOutput")  # the full output, one command away
    full = ed.nvim.current.buffer[:]
    assert len(full) == 5000 and full[2500] == "flood line 2500"


def test_panel_never_takes_focus(start_editor) -> None:
    ed: Editor = start_editor()
    ed.open("demo.py")
    win = ed.nvim.current.window
    ed.nvim.command("call cursor(3, 1)")
    ed.nvim.command("InterpreterRun")
    ed.wait_panel("✓ **Run**")
    assert ed.nvim.current.window == win
    assert ed.nvim.current.buffer.name.endswith("demo.py")
    assert len(ed.nvim.windows) == 2, "the panel opened beside the source"


def test_input_is_asked_through_vim_ui_input(start_editor) -> None:
    """input() in the kernel reaches the user through vim.ui.input (here an asynchronous one, as
    dressing.nvim or snacks.nvim provide), and the answer reaches the code."""
    ed: Editor = start_editor()
    ed.lua(
        "_G.prompts = {} "
        "vim.ui.input = function(opts, on_confirm) "
        "  table.insert(_G.prompts, opts.prompt) "
        "  vim.defer_fn(function() on_confirm('Ada') end, 10) "
        "end"
    )
    (ed.workspace / "ask.py").write_text('name = input("Your name: ")\nprint("Hello", name)\n')
    ed.open("ask.py")
    ed.nvim.command("%InterpreterRun")
    text = "\n".join(ed.wait_panel("✓ **Run**"))
    assert "Hello Ada" in text, text
    assert ed.lua("return _G.prompts") == ["Your name: "]


def test_an_image_is_saved_and_its_path_shown(start_editor, editor_env) -> None:
    ed: Editor = start_editor()
    (ed.workspace / "plot.py").write_text(
        "import matplotlib\nmatplotlib.use('module://matplotlib_inline.backend_inline')\n"
        "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()\n"
    )
    ed.open("plot.py")
    ed.nvim.command("%InterpreterRun")
    lines = ed.wait_panel("✓ **Run**")
    shown = [line for line in lines if line.startswith("[image] ")]
    assert len(shown) == 1, lines
    path = shown[0].removeprefix("[image] ")
    assert path.startswith(str(editor_env / "cache" / "nvim" / "interpreter_lsp" / "images"))
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_workspace_root_is_the_nearest_marker(start_editor) -> None:
    """A project inside a git repository: its own pyproject.toml makes it the workspace, not the repo."""
    ed: Editor = start_editor()
    inner = ed.workspace / "packages" / "tool"
    inner.mkdir(parents=True)
    (inner / "pyproject.toml").write_text("[project]\nname = 'tool'\n")
    (inner / "main.py").write_text("import os\nprint('cwd', os.getcwd())\n")
    ed.open("packages/tool/main.py")
    assert ed.lua("return vim.lsp.get_clients({ bufnr = 0 })[1].root_dir") == str(inner)


def test_panel_follows_the_end_unless_the_user_scrolled_up(start_editor) -> None:
    ed: Editor = start_editor()
    (ed.workspace / "count.py").write_text('for i in range(200):\n    print("row", i)\n')
    ed.open("count.py")
    ed.nvim.command("%InterpreterRun")
    lines = ed.wait_panel("✓ **Run**")
    panel_win = ed.lua("return require('interpreter_lsp').session().panel:window()")
    cursor = lambda: ed.lua("return vim.api.nvim_win_get_cursor(...)[1]", panel_win)  # noqa: E731
    assert cursor() == len(lines), "the panel follows new output"

    ed.lua("vim.api.nvim_win_set_cursor(..., { 3, 0 })", panel_win)  # the user scrolls up to read
    ed.nvim.command("%InterpreterRun")
    ed.wait_panel("✓ **Run**", count=2)
    assert cursor() == 3, "the panel must not yank the user back to the end"


def test_a_huge_line_is_clipped_on_screen_and_kept_whole(start_editor) -> None:
    ed: Editor = start_editor()
    (ed.workspace / "wide.py").write_text('print("w" * 300_000)\n')
    ed.open("wide.py")
    ed.nvim.command("%InterpreterRun")
    lines = ed.wait_panel("✓ **Run**")
    wide = [line for line in lines if line.startswith("www")]
    assert wide and all(len(line) < 2100 for line in wide), [len(line) for line in wide]
    assert "more characters)" in wide[-1]
    ed.nvim.command("InterpreterOutput")
    assert "".join(ed.nvim.current.buffer[:]) == "w" * 300_000


def test_code_lens_runs_a_cell_through_neovims_lsp_ui(start_editor) -> None:
    ed: Editor = start_editor()
    ed.open("demo.py")
    ok = ed.lua("return vim.wait(20000, function() return #vim.lsp.codelens.get(0) >= 2 end, 20)")
    assert ok, "no code lenses from the server"
    titles = ed.lua("return vim.tbl_map(function(l) return l.command.title end, vim.lsp.codelens.get(0))")
    assert titles.count("Run cell") == 2
    ed.nvim.command("call cursor(1, 1)")  # the first cell's marker
    ed.lua("vim.lsp.codelens.run()")
    ed.wait_panel("✓ **Run**")
    ed.nvim.command("call cursor(5, 1)")  # the second cell's marker
    ed.lua("vim.lsp.codelens.run()")
    text = "\n".join(ed.wait_panel("✓ **Run**", count=2))
    assert "x is 42" in text and "second cell ran" in text
    # Runs the server started show their code and where it came from.
    first, second = text.split("✓ **Run**")[1:3]
    assert "cell demo.py:1-4" in first and '```python\nx = 6 * 7\nprint("x is", x)\n```' in first, first
    assert "cell demo.py:5-7" in second and 'print("second cell ran")' in second, second


def test_a_characterwise_selection_runs_exactly_the_selected_text(start_editor) -> None:
    ed: Editor = start_editor()
    (ed.workspace / "two.py").write_text("print('bef' + 'ore'); print('sel' + 'ected')\nprint('next line')\n")
    ed.open("two.py")
    ed.nvim.command("call cursor(1, 23)")  # on the second print
    ed.nvim.input("vf):InterpreterRun<CR>")  # as typed: `:` in visual mode gives '<,'>
    text = "\n".join(ed.wait_panel("✓ **Run**"))
    assert "selected" in text
    assert "before" not in text and "next line" not in text, text
    assert "two.py:1:23" in text
    assert "```python\nprint('sel' + 'ected')\n```" in text


def test_escape_at_an_input_prompt_cancels_the_run_in_one_line(start_editor) -> None:
    ed: Editor = start_editor()
    ed.lua("vim.ui.input = function(opts, on_confirm) on_confirm(nil) end")  # the user pressed Esc
    (ed.workspace / "ask.py").write_text('name = input("Your name: ")\nprint("never", name)\n')
    ed.open("ask.py")
    ed.nvim.command("%InterpreterRun")
    text = "\n".join(ed.wait_panel("■ **Run**"))
    assert "interrupted" in text and "input cancelled" in text, text
    assert "Traceback" not in text and "never" not in text.split("■ **Run**")[1].split("```")[-1], text
