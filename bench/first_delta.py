"""Time to the first streamed delta: through the server (chat -> first interpreter/message) vs a direct
litellm.acompletion against the same scripted endpoint, interleaved in the same run. Also the first chat's
time to first delta right after the server started.

    .venv/bin/python bench/first_delta.py [--rounds 30]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from harness import Session, start_session, stop_session
from interpreter_lsp import protocol as p
from scripted_model import ScriptedModel

REPLY = "Sure. " * 20


async def server_first_delta(s: Session, model: ScriptedModel) -> float:
    model.reply(REPLY, chunk_size=6)
    first = asyncio.get_running_loop().create_future()

    def on_message(params: dict) -> None:
        if params["delta"] and not first.done():
            first.set_result(time.perf_counter())

    s.listeners[p.MESSAGE].append(on_message)
    try:
        start = time.perf_counter()
        turn = (await s.command(p.CHAT, {"text": "hello"}))["turnId"]
        at = await asyncio.wait_for(first, 60)
        await s.wait_for(
            lambda: any(n["turnId"] == turn and n["state"] == "done" for n in s.notes[p.TURN_STATUS]), 60
        )
        return at - start
    finally:
        s.listeners[p.MESSAGE].remove(on_message)


async def direct_first_delta(litellm, model: ScriptedModel) -> float:
    model.reply(REPLY, chunk_size=6)
    start = time.perf_counter()
    response = await litellm.acompletion(
        model="openai/scripted", api_base=model.base_url, api_key="sk-bench",
        messages=[{"role": "user", "content": "hello"}], stream=True,
    )
    first = None
    async for chunk in response:
        if first is None and chunk.choices and chunk.choices[0].delta.content:
            first = time.perf_counter()
    assert first is not None
    return first - start


async def main(rounds: int) -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    with ScriptedModel() as model, tempfile.TemporaryDirectory(prefix="ilsp-bench-") as tmp:
        root, home = Path(tmp) / "ws", Path(tmp) / "home"
        root.mkdir()
        home.mkdir()
        settings = {"model": "openai/scripted", "apiBase": model.base_url, "apiKey": "sk-bench"}
        spawned = time.perf_counter()
        s = await start_session(root, home, configuration=settings)
        try:
            cold = await server_first_delta(s, model)
            cold_since_spawn = time.perf_counter() - spawned
            await direct_first_delta(litellm, model)  # warm the direct path too
            served, direct = [], []
            for _ in range(rounds):
                served.append(await server_first_delta(s, model))
                direct.append(await direct_first_delta(litellm, model))
        finally:
            await stop_session(s)
    ms = statistics.median(served) * 1000
    base = statistics.median(direct) * 1000
    print(
        f"time to first delta, median of {rounds}: server {ms:.1f} ms, direct litellm {base:.1f} ms, "
        f"difference {ms - base:+.1f} ms (target <= +10 ms), ratio {ms / base:.2f}x"
    )
    print(
        f"first chat right after start-up: first delta {cold * 1000:.0f} ms after the chat was sent "
        f"({cold_since_spawn:.2f} s after the server was spawned, the whole first turn included)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    asyncio.run(main(parser.parse_args().rounds))
