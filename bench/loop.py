"""A full loop turn through the server against the sum of its parts, measured in the same run.

The turn: chat -> the model's reply with a ```python block -> auto-run -> the result back to the model ->
its closing reply -> turn done (two model calls and one run, against the scripted model). Its parts, bare:
two raw httpx streams of the same replies from the same scripted model, and one bare jupyter_client run
of the same code. Interleaved, so that the machine's load hits both alike.

A raw stream sends the very body the server sent for that call in the turn just measured (the model's
process keeps the last one of each kind): the conversation so far, which grows by a turn each time, is
part of what a model call costs whoever sends it. The ratio against a one-message request is printed too.

The scripted model serves from a process of its own, as a user's model does: in this process, its thread
would wait for the GIL while the bench's LSP client reads the server's notifications (the turn's model
calls were charged ~2 ms each for that; the raw calls, made while nothing else happens, were not).

    .venv/bin/python bench/loop.py [--turns 30]

Goal (issue 21): the turn <= 1.5x the sum of its parts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Session, start_session, stop_session
from interpreter_lsp import protocol as p
from roundtrip import bare_execute, bare_kernel

CODE = "print(1)"
FIRST = f"Let me check.\n```python\n{CODE}\n```\n"
SECOND = "It printed 1. Done."


# The model's process: it answers by what it is asked (a raw call names the reply it wants; the server's
# first request ends with the user's words, its second with the run's result).
MODEL_PROCESS = f"""
import sys, time
sys.path.insert(0, {str(Path(__file__).resolve().parent.parent / "tests")!r})
from scripted_model import ScriptedModel

import json, pathlib
KEPT = pathlib.Path(sys.argv[1])

def respond(body):
    last = str(body["messages"][-1].get("content"))
    which = "first" if last == "first" or (last != "second" and "print one" in last) else "second"
    if len(body["messages"]) > 1:  # the server's: kept for the raw call that follows
        (KEPT / which).write_text(json.dumps(body))
    return {FIRST!r} if which == "first" else {SECOND!r}

with ScriptedModel() as model:
    model.responder = respond
    print(model.base_url, flush=True)
    sys.stdin.read()  # until the bench ends
"""


async def server_turn(s: Session) -> float:
    runs = len(s.notes[p.RUN_STATUS])
    statuses = s.notes[p.TURN_STATUS]
    seen = len(statuses)
    start = time.perf_counter()
    turn = (await s.command(p.CHAT, {"text": "print one"}))["turnId"]

    def done() -> bool:
        # Only the notes since the last look: a scan of every turn's notes at each notification would grow
        # with the turns and charge the bench's own client time to the turn (the model's process waits for a
        # core meanwhile).
        nonlocal seen
        fresh, seen = statuses[seen:], len(statuses)
        return any(n["turnId"] == turn and n["state"] == "done" for n in fresh)

    await s.wait_for(done, 120)
    took = time.perf_counter() - start
    ended = [n for n in s.notes[p.RUN_STATUS][runs:] if n["state"] in p.FINAL_RUN_STATES]
    if [n["state"] for n in ended] != ["ok"]:  # the turn measured is the one described: one run, then done
        raise SystemExit(f"the turn was not two model calls and one run: {ended}")
    return took


async def raw_call(client, base_url: str, which: str, kept: Path | None = None) -> float:
    """One raw streamed call; `kept`: with the body the server last sent for `which` (else one message)."""
    content = (kept / which).read_bytes() if kept is not None and (kept / which).exists() else json.dumps(
        {"model": "scripted", "messages": [{"role": "user", "content": which}], "stream": True}
    ).encode()
    start = time.perf_counter()
    headers = {"Content-Type": "application/json"}
    async with client.stream("POST", f"{base_url}/chat/completions", content=content, headers=headers) as response:
        async for _line in response.aiter_lines():
            pass
    return time.perf_counter() - start


def start_model(kept: Path) -> tuple[subprocess.Popen[str], str]:
    """The scripted model in a process of its own, keeping the server's last request bodies in `kept`; its
    base url."""
    model = subprocess.Popen(
        [sys.executable, "-c", MODEL_PROCESS, str(kept)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert model.stdout is not None
    base_url = model.stdout.readline().strip()
    if not base_url:
        model.kill()
        raise SystemExit("the scripted model's process did not start")
    return model, base_url


async def main(turns: int, base_url: str, kept: Path) -> None:
    import httpx

    with tempfile.TemporaryDirectory(prefix="ilsp-bench-") as tmp:
        tmp_path = Path(tmp)
        root, home = tmp_path / "ws", tmp_path / "home"
        root.mkdir()
        home.mkdir()
        settings = {"model": "openai/scripted", "apiBase": base_url, "apiKey": "sk-bench", "autoRun": True}
        km, kc = await bare_kernel(tmp_path)
        s = await start_session(root, home, configuration=settings)
        served, parts, small, each = [], [], [], []
        try:
            async with httpx.AsyncClient() as client:
                for _ in range(3):  # warm both sides: the kernel, the connections
                    await server_turn(s)
                    await raw_call(client, base_url, "first", kept)
                    await bare_execute(kc, CODE)
                for _ in range(turns):
                    served.append(await server_turn(s))
                    first = await raw_call(client, base_url, "first", kept)
                    run = (await bare_execute(kc, CODE))[0]
                    second = await raw_call(client, base_url, "second", kept)
                    parts.append(first + run + second)
                    each.append((first, run, second))
                    alone = await raw_call(client, base_url, "first") + await raw_call(client, base_url, "second")
                    small.append(alone + run)
        finally:
            await stop_session(s)
            kc.stop_channels()
            await km.shutdown_kernel(now=True)
    turn_ms, parts_ms = statistics.median(served) * 1000, statistics.median(parts) * 1000
    small_ms = statistics.median(small) * 1000
    first_ms, run_ms, second_ms = (statistics.median(column) * 1000 for column in zip(*each, strict=True))
    print(
        f"loop turn (two model calls + one auto-run), median of {turns}: server {turn_ms:.1f} ms, its parts bare "
        f"(two raw httpx streams of the server's request bodies + one bare kernel run) {parts_ms:.1f} ms, ratio "
        f"{turn_ms / parts_ms:.2f}x (goal <= 1.5x)\n"
        f"  the parts' medians: first call {first_ms:.1f} ms, run {run_ms:.1f} ms, second call {second_ms:.1f} ms\n"
        f"  against raw streams of a one-message request: {small_ms:.1f} ms, ratio {turn_ms / small_ms:.2f}x"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=30)
    with tempfile.TemporaryDirectory(prefix="ilsp-bench-bodies-") as bodies:
        model, base_url = start_model(Path(bodies))
        try:
            asyncio.run(main(parser.parse_args().turns, base_url, Path(bodies)))
        finally:
            model.communicate(timeout=30)  # its stdin closes: it ends
