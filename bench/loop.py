"""A full loop turn through the server against the sum of its parts, measured in the same run.

The turn: chat -> the model's reply with a ```python block -> auto-run -> the result back to the model ->
its closing reply -> turn done (two model calls and one run, against the scripted model). Its parts, bare:
two raw httpx streams of the same replies from the same scripted model, and one bare jupyter_client run
of the same code. Interleaved, so that the machine's load hits both alike.

    .venv/bin/python bench/loop.py [--turns 30]

Goal (issue 21): the turn <= 1.5x the sum of its parts.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Session, start_session, stop_session
from interpreter_lsp import protocol as p
from roundtrip import bare_execute, bare_kernel
from scripted_model import ScriptedModel

CODE = "print(1)"
FIRST = f"Let me check.\n```python\n{CODE}\n```\n"
SECOND = "It printed 1. Done."


async def server_turn(s: Session, model: ScriptedModel) -> float:
    model.reply(FIRST, chunk_size=16)
    model.reply(SECOND, chunk_size=16)
    start = time.perf_counter()
    turn = (await s.command(p.CHAT, {"text": "print one"}))["turnId"]
    await s.wait_for(lambda: any(n["turnId"] == turn and n["state"] == "done" for n in s.notes[p.TURN_STATUS]), 120)
    return time.perf_counter() - start


async def raw_call(client, model: ScriptedModel, text: str) -> float:
    model.reply(text, chunk_size=16)
    body = {"model": "scripted", "messages": [{"role": "user", "content": "x"}], "stream": True}
    start = time.perf_counter()
    async with client.stream("POST", f"{model.base_url}/chat/completions", json=body) as response:
        async for _line in response.aiter_lines():
            pass
    return time.perf_counter() - start


async def main(turns: int) -> None:
    import httpx

    with ScriptedModel() as model, tempfile.TemporaryDirectory(prefix="ilsp-bench-") as tmp:
        tmp_path = Path(tmp)
        root, home = tmp_path / "ws", tmp_path / "home"
        root.mkdir()
        home.mkdir()
        settings = {"model": "openai/scripted", "apiBase": model.base_url, "apiKey": "sk-bench", "autoRun": True}
        km, kc = await bare_kernel(tmp_path)
        s = await start_session(root, home, configuration=settings)
        served, parts = [], []
        try:
            async with httpx.AsyncClient() as client:
                for _ in range(3):  # warm both sides: the kernel, the connections
                    await server_turn(s, model)
                    await raw_call(client, model, FIRST)
                    await bare_execute(kc, CODE)
                for _ in range(turns):
                    served.append(await server_turn(s, model))
                    first = await raw_call(client, model, FIRST)
                    run = (await bare_execute(kc, CODE))[0]
                    second = await raw_call(client, model, SECOND)
                    parts.append(first + run + second)
        finally:
            await stop_session(s)
            kc.stop_channels()
            await km.shutdown_kernel(now=True)
    turn_ms, parts_ms = statistics.median(served) * 1000, statistics.median(parts) * 1000
    print(
        f"loop turn (two model calls + one auto-run), median of {turns}: server {turn_ms:.1f} ms, its parts bare "
        f"(two raw httpx streams + one bare kernel run) {parts_ms:.1f} ms, ratio {turn_ms / parts_ms:.2f}x "
        "(goal <= 1.5x)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=30)
    asyncio.run(main(parser.parse_args().turns))
