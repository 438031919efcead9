"""Kernel output is data (issue 18, point 5), end to end: a real server, a real kernel, real litellm over
real HTTP to the scripted model (which answers for a vision model, openai/gpt-4o).

- An EPS labelled image/png or image/jpeg never reaches Ghostscript: a fake `gs` (and its Windows names)
  first on the server's PATH records any run; the user reads a note under the output.
- A BMP labelled image/png is not decoded: the model is told of an image it cannot see, not sent one.
- A 13377x13377 PNG (about 0.5 MB; 537 MB decoded) leaves the server's peak RSS bounded, and status
  answers quickly while a turn is going.
"""

from __future__ import annotations

import asyncio
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import Session, start_session, stop_session
from interpreter_lsp import protocol as p
from scripted_model import ScriptedModel
from test_loop import model_settings, py, turn_end

VISION = "openai/gpt-4o"  # litellm says it can see; the scripted model answers for it

EPS = (
    "import base64\nfrom IPython.display import display\n"
    "eps = b'%!PS-Adobe-3.0 EPSF-3.0\\n%%BoundingBox: 0 0 64 64\\n'\n"
    "eps += b'0 0 moveto 64 64 lineto stroke\\nshowpage\\n%%EOF\\n'\n"
    "data = base64.b64encode(eps).decode()\n"
    "display({'image/png': data, 'text/plain': 'eps as png'}, raw=True)\n"
    "display({'image/jpeg': data, 'text/plain': 'eps as jpeg'}, raw=True)"
)
BMP = (
    "import base64, io\nfrom PIL import Image\nfrom IPython.display import display\n"
    "buffer = io.BytesIO()\nImage.new('RGB', (40, 30), 'red').save(buffer, 'BMP')\n"
    "display({'image/png': base64.b64encode(buffer.getvalue()).decode(), 'text/plain': 'bmp as png'}, raw=True)"
)
SIDE = 13377
BOMB = (
    "import base64, struct, zlib\nfrom IPython.display import display\n"
    f"W = H = {SIDE}\n"
    "def chunk(kind, data):\n"
    "    return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data))\n"
    "z = zlib.compressobj(9)\nrow = bytes(1 + 3 * W)\n"
    "idat = b''.join([z.compress(row) for _ in range(H)] + [z.flush()])\n"
    "png = b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', W, H, 8, 2, 0, 0, 0))\n"
    "png += chunk(b'IDAT', idat) + chunk(b'IEND', b'')\n"
    "print(len(png), 'bytes')\n"
    "display({'image/png': base64.b64encode(png).decode(), 'text/plain': 'bomb'}, raw=True)"
)


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as m:
        yield m


@pytest.fixture
def fake_ghostscript(tmp_path: Path) -> tuple[Path, Path]:
    """A directory of fake Ghostscript programs (every name Pillow tries) that record being run, and the
    record they write."""
    bin_dir, record = tmp_path / "fake bin", tmp_path / "ghostscript-ran"
    bin_dir.mkdir()
    for name in ("gs", "gsx", "gswin32c", "gswin64c"):
        program = bin_dir / name
        program.write_text(f'#!/bin/sh\necho "{name} $*" >> "{record}"\nexit 1\n')
        program.chmod(program.stat().st_mode | stat.S_IXUSR)
    return bin_dir, record


def vision(model: ScriptedModel) -> dict[str, Any]:
    return {**model_settings(model, autoRun=True), "model": VISION}


def last_message(model: ScriptedModel, n: int) -> Any:
    return model.wait_requests(n, 60)[n - 1]["messages"][-1]["content"]


def all_messages(model: ScriptedModel, n: int) -> list[Any]:
    return [m["content"] for m in model.wait_requests(n, 60)[n - 1]["messages"]]


def image_parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, list) and content and isinstance(content[0], (list, str)):
        return [part for message in content for part in image_parts(message)]
    return [part for part in content if part.get("type") == "image_url"] if isinstance(content, list) else []


async def test_an_eps_labelled_png_or_jpeg_never_runs_ghostscript(
    workspace_root: Path, home: Path, model: ScriptedModel, fake_ghostscript: tuple[Path, Path]
) -> None:
    bin_dir, record = fake_ghostscript
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    s = await start_session(workspace_root, home, configuration=vision(model), env=env)
    try:
        model.reply(py(EPS))
        model.reply("I see two pictures.")
        turn = (await s.command(p.CHAT, {"text": "show me the figure"}))["turnId"]
        assert (await turn_end(s, turn, 120))["state"] == "done"
        content = last_message(model, 2)  # the request after the run: its images went through preparation
        assert not record.exists(), f"Ghostscript ran on kernel output: {record.read_text()}"
        assert not image_parts(content), "an EPS was sent to the model as an image"
        assert "you cannot see it" in str(content)
        run_id = s.notes[p.RUN_STATUS][-1]["runId"]
        notes = [o["text"] for o in s.outputs(run_id) if o["kind"] == "stderr"]
        assert any("labelled image/png but is PostScript/EPS" in n and "did not decode it" in n for n in notes), notes
        assert any("labelled image/jpeg but is PostScript/EPS" in n for n in notes), notes
    finally:
        await stop_session(s)
    assert not record.exists(), "Ghostscript ran on kernel output"


async def test_a_bmp_labelled_png_is_not_decoded(workspace_root: Path, home: Path, model: ScriptedModel) -> None:
    s = await start_session(workspace_root, home, configuration=vision(model))
    try:
        model.reply(py(BMP))
        model.reply("A red rectangle?")
        turn = (await s.command(p.CHAT, {"text": "draw a red rectangle"}))["turnId"]
        assert (await turn_end(s, turn, 120))["state"] == "done"
        content = last_message(model, 2)
        # Decoded, it would have gone to the model as a PNG made from it.
        assert not image_parts(content), "a BMP labelled image/png was decoded and sent"
        assert "you cannot see it" in str(content)
        run_id = s.notes[p.RUN_STATUS][-1]["runId"]
        assert any("labelled image/png but is a BMP image" in o["text"] for o in s.outputs(run_id)), s.outputs(run_id)
    finally:
        await stop_session(s)


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM in /proc/<pid>/status")


PEAK_RSS_BOUND_MIB = 1024  # generous: the server with litellm loaded peaks near 300 MiB here
STATUS_BOUND = 3.0  # seconds, generous on a busy machine (a status that decoded the bomb took 6 s)


async def timed_status(s: Session) -> float:
    started = time.monotonic()
    await s.command(p.STATUS, {})
    return time.monotonic() - started


async def test_a_png_bomb_keeps_memory_bounded_and_status_quick_during_a_turn(
    workspace_root: Path, home: Path, model: ScriptedModel
) -> None:
    s = await start_session(workspace_root, home, configuration=vision(model))
    server = s.client._server
    assert server is not None
    try:
        model.reply("Hello.")  # a first turn: litellm is loaded and the model known, so status counts context
        turn = (await s.command(p.CHAT, {"text": "hi"}))["turnId"]
        assert (await turn_end(s, turn, 120))["state"] == "done"
        model.reply(py(BOMB))
        held = model.hold("A black square.")
        turn = (await s.command(p.CHAT, {"text": "draw a big black square"}))["turnId"]
        # Status, again and again, while the turn runs the code and prepares its next request (the bomb is
        # among the images a vision model is sent), until that request reaches the model.
        latencies: list[float] = []
        deadline = time.monotonic() + 120
        while not held.received.is_set() and time.monotonic() < deadline:
            latencies.append(await timed_status(s))
            await asyncio.sleep(0.05)
        assert held.received.is_set(), "the request after the run never came"
        latencies += [await timed_status(s) for _ in range(2)]
        held.release()
        assert (await turn_end(s, turn, 120))["state"] == "done"
        [run] = [n for n in s.notes[p.RUN_STATUS] if n["state"] in p.FINAL_RUN_STATES]
        [shown] = [o for o in s.outputs(run["runId"]) if o["kind"] == "display"]
        assert len(shown["data"]["image/png"]) < 1_000_000  # under a megabyte on the wire: 537 MB decoded
        peak = peak_rss_mib(server.pid)
        print(f"status latencies during the turn: {len(latencies)} calls, slowest {max(latencies):.3f} s; "
              f"server peak RSS {peak:.0f} MiB")
        assert max(latencies) < STATUS_BOUND, latencies
        assert peak < PEAK_RSS_BOUND_MIB, f"the server's peak RSS was {peak:.0f} MiB"
        content = all_messages(model, 3)
        assert not image_parts(content)
        assert f"{SIDE}x{SIDE} pixels; you cannot see it" in str(content)
    finally:
        await stop_session(s)
