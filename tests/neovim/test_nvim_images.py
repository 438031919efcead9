"""A figure a cell shows, under that cell in the code buffer (as molten-nvim shows output), with the real
server and kernel: drawn by image.nvim when it is installed (a stand-in on the runtimepath records its
calls), sent with the kitty graphics protocol when Neovim runs in kitty (a real terminal UI in a pty,
its bytes read back), and its file's path otherwise."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import pty
import re
import shlex
import shutil
import struct
import subprocess
import termios
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pynvim
import pytest
from nvim_harness import NVIM, SERVER, SLOW_MS, TESTS, Editor
from test_nvim_loop import open_ready

PLOT = """\
# %% plot
import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot as plt
plt.plot([1, 2]); plt.show()

# %% after
print("after")
"""
CELL_LAST_ROW = 2  # 0-based: `plt.plot([1, 2]); plt.show()`, the plot cell's last line
STUB = TESTS / "image_nvim_stub"


def wait_for(ed: Editor, expr: str, what: str, timeout_ms: int = SLOW_MS) -> None:
    ok = ed.lua(f"return vim.wait({timeout_ms}, function() return {expr} end, 20)")
    assert ok, f"{what} never happened" + ed.diagnosis()


def run_plot_cell(ed: Editor, times: int = 1) -> list[str]:
    ed.nvim.command("call cursor(3, 1)")
    ed.nvim.command("InterpreterRun")
    lines = ed.wait_panel("✓ **Run**", count=times)
    shown = [line.removeprefix("[image] ") for line in lines if line.startswith("[image] ")]
    assert len(shown) == times, lines
    with open(shown[-1], "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n", "the saved figure is a PNG"
    return shown


CODE_CALLS = "vim.tbl_filter(function(c) return c.buffer == {buf} end, _G.image_calls or {{}})"


def test_image_nvim_draws_the_figure_under_its_cell_and_clears_it_when_the_cell_runs_again(start_editor) -> None:
    ed: Editor = start_editor()
    ed.lua("vim.o.columns, vim.o.lines = 120, 40")
    ed.lua("vim.opt.runtimepath:prepend(...)", str(STUB))
    (ed.workspace / "plot.py").write_text(PLOT)
    open_ready(ed, "plot.py")
    buf = ed.nvim.current.buffer.number
    win = ed.nvim.current.window.handle
    calls = CODE_CALLS.format(buf=buf)
    first = run_plot_cell(ed)[-1]
    wait_for(ed, f"#{calls} >= 1", "image.nvim's from_file for the code buffer")
    drawn = ed.lua(f"return {calls}")
    assert len(drawn) == 1, drawn
    call = drawn[0]
    assert call["path"] == first, call
    assert (call["window"], call["x"], call["y"]) == (win, 0, CELL_LAST_ROW), call
    assert call["with_virtual_padding"] is True and call["rendered"] >= 1, call
    # Below the cell's block (how it ended, the path): its rows are the image's offset.
    block = ed.helper("inline_lines", buf)
    assert [b["row"] for b in block] == [CELL_LAST_ROW] * 2 and block[1]["text"] == f"  │ [image] {first}", block
    assert call["render_offset_top"] == len(block), (call, block)
    # The cell again: the earlier image is cleared, the new figure drawn in its place.
    second = run_plot_cell(ed, times=2)[-1]
    assert second != first
    wait_for(ed, f"#{calls} >= 2", "the second figure drawn")
    drawn = ed.lua(f"return {calls}")
    assert drawn[0]["cleared"] >= 1, drawn
    assert drawn[1]["path"] == second and drawn[1]["y"] == CELL_LAST_ROW and drawn[1]["cleared"] == 0, drawn
    ed.nvim.command("InterpreterClearOutput")
    assert ed.lua(f"return {calls}")[1]["cleared"] == 1, "cleared with the output"
    assert ed.helper("inline_lines", buf) == []


def test_without_image_nvim_or_kitty_the_figure_is_its_path_under_the_cell(start_editor) -> None:
    ed: Editor = start_editor()
    (ed.workspace / "plot.py").write_text(PLOT)
    open_ready(ed, "plot.py")
    buf = ed.nvim.current.buffer.number
    path = run_plot_cell(ed)[-1]
    wait_for(ed, f"#require('interpreter_lsp_test').inline_lines({buf}) >= 2", "the block under the cell")
    block = ed.helper("inline_lines", buf)
    assert re.match(r"  ✓ ok · ", block[0]["text"]), block
    assert block[1] == {"row": CELL_LAST_ROW, "text": f"  │ [image] {path}"}, block
    assert len(block) == 2, "no image rows: nothing to draw them"
    assert ed.lua("return vim.tbl_isempty(require('interpreter_lsp.kitty').live)"), "nothing sent to a terminal"


# Kitty: Neovim's own terminal UI in a pseudo-terminal, as kitty would run it ---------------------


class Tty:
    """A program in a pty of 120x40 cells of 10x24 pixels, as kitty runs it: Neovim's TUI (`argv` starts
    it with --listen `sock`, maybe inside tmux); everything written to the terminal is kept in `out`, and
    the editor is driven over its socket."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path, sock: Path) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 1200, 960))
        self.master = master
        self.out = bytearray()
        self.lock = threading.Lock()
        self.proc = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env,
            start_new_session=True,
        )  # fmt: skip
        os.close(slave)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        # The socket's file exists from its bind, a moment before Neovim listens on it: a connection refused
        # in between (seen under load) is tried again, within the same bound.
        deadline = time.monotonic() + 30
        while True:
            assert time.monotonic() < deadline and self.proc.poll() is None, f"no Neovim: {bytes(self.out)[-2000:]!r}"
            if sock.exists():
                try:
                    self.nvim = pynvim.attach("socket", path=str(sock))
                    break
                except ConnectionRefusedError:
                    pass
            time.sleep(0.05)
        # The socket opens before Neovim has read init.lua (the test helpers' runtimepath): requests sent at
        # once could find neither the plugin nor the helpers on a busy machine. Started once VimEnter is past.
        deadline = time.monotonic() + 60
        while self.nvim.eval("v:vim_did_enter") != 1:
            assert time.monotonic() < deadline and self.proc.poll() is None, f"no VimEnter: {self.written()[-2000:]!r}"
            time.sleep(0.05)

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            with self.lock:
                self.out.extend(data)

    def written(self) -> bytes:
        with self.lock:
            return bytes(self.out)

    def wait(self, check: Callable[[bytes], bool], what: str, timeout: float = 30) -> bytes:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check(self.written()):
                return self.written()
            time.sleep(0.1)
        raise AssertionError(f"{what} never reached the terminal; its last bytes: {self.written()[-3000:]!r}")

    def close(self) -> None:
        try:
            self.nvim.exec_lua(
                "for _, c in ipairs(vim.lsp.get_clients()) do c:stop() end "
                "vim.wait(10000, function() return #vim.lsp.get_clients() == 0 end, 20)"
            )
            self.nvim.command("qa!")
        except (OSError, EOFError, pynvim.NvimError):
            pass
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.reader.join(timeout=5)
        os.close(self.master)


@pytest.fixture
def kitty_tui(workspace: Path, editor_env: Path, tmp_path: Path) -> Iterator[Callable[..., tuple[Tty, Editor]]]:
    started: list[Tty] = []
    tmux_socket = f"ilsp-kitty-{uuid.uuid4().hex[:8]}"

    def start(*, in_tmux: bool = False) -> tuple[Tty, Editor]:
        """In kitty's environment; `in_tmux`: in a tmux (allow-passthrough on) that runs in kitty."""
        store = editor_env / "state" / "nvim" / "interpreter_lsp" / "trusted.json"
        store.parent.mkdir(parents=True, exist_ok=True)
        store.write_text(json.dumps({"folders": [str(workspace)]}))
        log = tmp_path / "server.log"
        options = {"cmd": [str(SERVER), "--log-file", str(log), "--log-level", "INFO"], "settings": {}}
        # No SSH between Neovim and the terminal (its escapes carry the bytes: a spec has it).
        env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "SSH_CONNECTION", "SSH_TTY", "TERM_PROGRAM")}
        env.update(INTERPRETER_LSP_SETUP=json.dumps(options), KITTY_WINDOW_ID="1", LANG="C.UTF-8", LC_ALL="C.UTF-8")
        sock = tmp_path / "nvim.sock"
        nvim = [str(NVIM), "--clean", "-u", str(TESTS / "init.lua"), "--listen", str(sock), "plot.py"]
        if in_tmux:
            conf = tmp_path / "tmux.conf"
            conf.write_text("set -g allow-passthrough on\n")
            env["TERM"] = "xterm-256color"  # tmux needs a terminal description it has; kitty's may be missing
            argv = ["tmux", "-u", "-L", tmux_socket, "-f", str(conf), "new-session", "-x", "120", "-y", "40",
                    shlex.join(nvim)]  # fmt: skip
        else:
            env.update(TERM="xterm-kitty", COLORTERM="truecolor")
            argv = nvim
        t = Tty(argv, env, workspace, sock)
        started.append(t)
        ed = Editor(t.nvim, workspace, log)
        ed.lua("require('interpreter_lsp_test').capture_notify()")
        return t, ed

    yield start
    for t in started:
        t.close()
    subprocess.run(["tmux", "-L", tmux_socket, "kill-server"], capture_output=True)


PLACEHOLDER = "\U0010eeee".encode()


def png_size(path: str) -> tuple[int, int]:
    with open(path, "rb") as f:
        head = f.read(24)
    return struct.unpack(">II", head[16:24])


def test_in_kitty_the_figure_is_sent_with_the_graphics_protocol_and_drawn_as_placeholders(
    kitty_tui, workspace: Path
) -> None:
    (workspace / "plot.py").write_text(PLOT)
    t, ed = kitty_tui()
    assert ed.lua("return #vim.api.nvim_list_uis()") == 1, "a terminal UI is attached"
    open_ready(ed, "plot.py")
    buf = ed.nvim.current.buffer.number
    path = run_plot_cell(ed)[-1]
    # The block under the cell: how it ended, the path, then rows of placeholder cells in the image's colour.
    wait_for(ed, f"#require('interpreter_lsp_test').inline_lines({buf}) > 2", "the image rows under the cell")
    marks = ed.lua(
        "local b = ... return vim.api.nvim_buf_get_extmarks(b, require('interpreter_lsp.inline').ns, 0, -1,"
        " { details = true })",
        buf,
    )
    assert len(marks) == 1 and marks[0][1] == CELL_LAST_ROW, marks
    virt = marks[0][3]["virt_lines"]
    assert virt[1][0][0] == f"  │ [image] {path}", virt
    rows = [line[1][0] for line in virt[2:]]
    image_id = int(virt[2][1][1].removeprefix("InterpreterKittyImage"))
    cols = rows[0].count("\U0010eeee")
    assert all(r.count("\U0010eeee") == cols for r in rows), rows
    assert rows[0].startswith("\U0010eeee\u0305\u0305\U0010eeee\u0305\u030d"), "row 0: columns 0 and 1"
    assert rows[1].startswith("\U0010eeee\u030d\u0305"), "row 1, column 0"
    # Sized for the terminal's cells (10x24 pixels), the figure's shape kept, at most half the window high.
    width, height = png_size(path)
    assert 4 <= len(rows) <= ed.lua("return vim.api.nvim_win_get_height(0)") // 2, len(rows)
    assert abs(cols * 10 / (len(rows) * 24) - width / height) < 0.1, (cols, len(rows), width, height)
    # The panel draws it too, below its "[image] path" line (an image of its own, sized for the panel).
    panel = ed.lua(
        "local s = require('interpreter_lsp').session() s.panel:flush()"
        " local ns = vim.api.nvim_get_namespaces().interpreter_lsp_panel_images"
        " local lines = vim.api.nvim_buf_get_lines(s.panel.buf, 0, -1, false)"
        " local m = vim.api.nvim_buf_get_extmarks(s.panel.buf, ns, 0, -1, { details = true })[1]"
        " return m and { line = lines[m[2] + 1], hl = m[4].virt_lines[1][2][2], rows = #m[4].virt_lines } or vim.NIL"
    )
    assert panel and panel["line"] == f"[image] {path}" and panel["rows"] >= 4, panel
    panel_id = int(panel["hl"].removeprefix("InterpreterKittyImage"))
    assert panel_id != image_id
    # What reached the terminal: the PNG by its path (t=f), quiet, as a virtual placement of that size ...
    apc = re.compile(rb"\x1b_G([^;\x1b]*);([A-Za-z0-9+/=]*)\x1b\\")

    def transmits(b: bytes) -> dict[int, tuple[dict[str, str], str]]:
        found = {}
        for m in apc.finditer(b):
            keys = dict(kv.split("=") for kv in m.group(1).decode().split(","))
            if keys.get("a") == "T":
                found[int(keys["i"])] = (keys, base64.b64decode(m.group(2)).decode())
        return found

    out = t.wait(lambda b: {image_id, panel_id} <= set(transmits(b)), "the graphics escapes")
    keys, sent_path = transmits(out)[image_id]
    assert keys == {"a": "T", "U": "1", "f": "100", "t": "f", "i": str(image_id), "c": str(cols),
                    "r": str(len(rows)), "C": "1", "q": "2"}, keys  # fmt: skip
    assert sent_path == path and transmits(out)[panel_id][1] == path
    # ... and the placeholder cells, drawn by Neovim's screen in the image id's colour.
    r, g, b = image_id >> 16, (image_id >> 8) & 0xFF, image_id & 0xFF
    first_cell = PLACEHOLDER + "\u0305\u0305".encode()
    colour = rb"\x1b\[(?:[0-9;:]*;)?38[;:]2[;:]+%d[;:]%d[;:]%dm" % (r, g, b)
    coloured = re.compile(colour + rb"(?:\x1b\[[0-9;:]*m)*" + re.escape(first_cell))  # maybe a background too
    t.wait(lambda b: coloured.search(b) is not None, "the first placeholder cell, in the image's colour")
    t.wait(lambda b: b.count(PLACEHOLDER) >= cols * len(rows), "every cell of the image on the screen")
    # The cell again: the terminal frees the first image; the new one is sent.
    run_plot_cell(ed, times=2)
    delete = b"\x1b_Ga=d,d=I,i=%d,q=2\x1b\\" % image_id
    t.wait(lambda b: delete in b, "the first image's deletion")
    t.wait(lambda b: len(transmits(b)) == 4, "the second figure, under the cell and in the panel")

def tmux_passthrough() -> bool:
    """tmux 3.3 or later (allow-passthrough)."""
    if shutil.which("tmux") is None:
        return False
    version = subprocess.run(["tmux", "-V"], capture_output=True, text=True).stdout
    found = re.search(r"(\d+)\.(\d+)", version)
    return bool(found) and (int(found[1]), int(found[2])) >= (3, 3)


@pytest.mark.skipif(not tmux_passthrough(), reason="needs tmux 3.3 or later")
def test_in_tmux_in_kitty_the_escape_passes_through_to_kitty(kitty_tui, workspace: Path) -> None:
    """Neovim in tmux in kitty: the escape goes wrapped for tmux, which hands it to kitty as it was; the
    placeholder cells are text that tmux draws, in the image id's colour."""
    (workspace / "plot.py").write_text(PLOT)
    t, ed = kitty_tui(in_tmux=True)
    assert ed.lua("return vim.env.TMUX ~= nil and vim.env.TERM ~= 'xterm-kitty'"), "in tmux"
    open_ready(ed, "plot.py")
    path = run_plot_cell(ed)[-1]
    apc = re.compile(rb"\x1b_G([^;\x1b]*);([A-Za-z0-9+/=]*)\x1b\\")
    out = t.wait(lambda b: any(b"a=T" in m.group(1) for m in apc.finditer(b)), "the escape, through tmux")
    sent = next(m for m in apc.finditer(out) if b"a=T" in m.group(1))
    assert base64.b64decode(sent.group(2)).decode() == path
    image_id = int(dict(kv.split("=") for kv in sent.group(1).decode().split(","))["i"])
    # tmux is in 256 colours here: the id is the colour's number.
    assert 16 <= image_id <= 255, image_id
    out = t.wait(lambda b: b"\x1b[38;5;%dm" % image_id in b, "the placeholders' colour")
    t.wait(lambda b: PLACEHOLDER + "\u0305\u0305".encode() in b, "the first placeholder cell")
