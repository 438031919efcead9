"""Time to the first streamed delta, for each wire format the server speaks (OpenAI-compatible, Anthropic
Messages, Ollama), against a raw httpx stream measured in the same run.

1. Cold: a fresh server per round; the chat is sent the instant `initialized` has gone out (what an
   editor that opens with a chat does); time from that instant to the first `interpreter/message` delta.
   Baseline: a fresh Python process that imports httpx and streams the same reply (import included).
2. Later: a fresh server per round, the chat sent `--wait` seconds after `initialized` (what a user who
   types a first question does: the model client's warm-up has finished). Baseline: a raw httpx stream on
   a new client (a new connection) in this process.
3. Warm: the same server, chat -> first delta, against a raw httpx stream in this process.

    .venv/bin/python bench/first_delta.py [--cold 10] [--later 5] [--wait 3] [--rounds 20]
                                          [--formats openai,anthropic,ollama]

Goal (issue 21): cold first delta <= 500 ms for each format (median).
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

from harness import Session, start_session, stop_session
from interpreter_lsp import protocol as p
from scripted_model import ScriptedModel

REPLY = "Sure. " * 20
FORMATS = ("openai", "anthropic", "ollama")

RAW_COLD = r"""
import time
start = time.perf_counter()
import asyncio, json, sys
import httpx
url, body, headers = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
async def main():
    async with httpx.AsyncClient() as client, client.stream("POST", url, json=body, headers=headers) as response:
        async for line in response.aiter_lines():
            if '"text_delta"' in line or '"content": "S' in line or '"content":"S' in line:
                return time.perf_counter() - start
print(asyncio.run(main()))
"""


def settings_for(wire: str, model: ScriptedModel) -> dict[str, str]:
    return {
        "openai": {"model": "openai/scripted", "apiBase": model.base_url, "apiKey": "sk-bench"},
        "anthropic": {"model": "anthropic/claude-scripted", "apiBase": model.root_url, "apiKey": "sk-bench"},
        "ollama": {"model": "ollama_chat/scripted", "apiBase": model.root_url},
    }[wire]


def raw_request(wire: str, model: ScriptedModel) -> tuple[str, dict, dict]:
    messages = [{"role": "user", "content": "hello"}]
    if wire == "anthropic":
        body = {"model": "claude-scripted", "messages": messages, "max_tokens": 100, "stream": True}
        return f"{model.root_url}/v1/messages", body, {"x-api-key": "sk-bench", "anthropic-version": "2023-06-01"}
    if wire == "ollama":
        return f"{model.root_url}/api/chat", {"model": "scripted", "messages": messages, "stream": True}, {}
    body = {"model": "scripted", "messages": messages, "stream": True}
    return f"{model.base_url}/chat/completions", body, {"Authorization": "Bearer sk-bench"}


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
        at = await asyncio.wait_for(first, 120)
        await s.wait_for(
            lambda: any(n["turnId"] == turn and n["state"] == "done" for n in s.notes[p.TURN_STATUS]), 120
        )
        return at - start
    finally:
        s.listeners[p.MESSAGE].remove(on_message)


async def cold_server(wire: str, model: ScriptedModel, tmp: Path, n: int) -> float:
    root, home = tmp / f"ws-{wire}-{n}", tmp / f"home-{wire}-{n}"
    root.mkdir()
    home.mkdir()
    # start_session returns once `initialized` is sent: the chat goes out at that instant.
    s = await start_session(root, home, configuration=settings_for(wire, model))
    try:
        return await server_first_delta(s, model)
    finally:
        await stop_session(s)


async def later_server(wire: str, model: ScriptedModel, tmp: Path, n: int, wait: float) -> float:
    root, home = tmp / f"ws-{wire}-later-{n}", tmp / f"home-{wire}-later-{n}"
    root.mkdir()
    home.mkdir()
    s = await start_session(root, home, configuration=settings_for(wire, model))
    try:
        await asyncio.sleep(wait)  # the user types: the warm-up ends meanwhile
        return await server_first_delta(s, model)
    finally:
        await stop_session(s)


async def fresh_raw(wire: str, model: ScriptedModel) -> float:
    import httpx

    async with httpx.AsyncClient() as client:
        return await warm_raw(client, wire, model)


def cold_raw(wire: str, model: ScriptedModel) -> float:
    model.reply(REPLY, chunk_size=6)
    url, body, headers = raw_request(wire, model)
    done = subprocess.run(
        [sys.executable, "-c", RAW_COLD, url, json.dumps(body), json.dumps(headers)],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return float(done.stdout.strip())


async def warm_raw(client, wire: str, model: ScriptedModel) -> float:
    model.reply(REPLY, chunk_size=6)
    url, body, headers = raw_request(wire, model)
    start = time.perf_counter()
    elapsed = None
    async with client.stream("POST", url, json=body, headers=headers) as response:
        async for line in response.aiter_lines():  # read to the end: the connection is reused
            if elapsed is None and ('"text_delta"' in line or '"content": "S' in line):
                elapsed = time.perf_counter() - start
    assert elapsed is not None, "no delta"
    return elapsed


async def main(cold: int, rounds: int, formats: list[str], later: int = 5, wait: float = 3.0) -> None:
    import httpx

    with ScriptedModel() as model, tempfile.TemporaryDirectory(prefix="ilsp-bench-") as tmp:
        for wire in formats:
            servers, raws = [], []
            for n in range(cold):  # interleaved, so that the machine's load hits both alike
                servers.append(await cold_server(wire, model, Path(tmp), n))
                raws.append(await asyncio.to_thread(cold_raw, wire, model))
            s_ms, r_ms = statistics.median(servers) * 1000, statistics.median(raws) * 1000
            print(
                f"{wire}: cold first delta, chat sent at `initialized`, median of {cold}: server {s_ms:.0f} ms "
                f"(max {max(servers) * 1000:.0f}), raw httpx cold process {r_ms:.0f} ms, ratio {s_ms / r_ms:.2f}x "
                f"(goal: server <= 500 ms)"
            )
            if later:
                servers, raws = [], []
                for n in range(later):
                    servers.append(await later_server(wire, model, Path(tmp), n, wait))
                    raws.append(await fresh_raw(wire, model))
                s_ms, r_ms = statistics.median(servers) * 1000, statistics.median(raws) * 1000
                print(
                    f"{wire}: first delta of a chat sent {wait:g} s after `initialized`, median of {later}: server "
                    f"{s_ms:.1f} ms, raw httpx on a new connection {r_ms:.1f} ms, ratio {s_ms / r_ms:.2f}x"
                )
            if rounds:
                root, home = Path(tmp) / f"ws-{wire}-warm", Path(tmp) / f"home-{wire}-warm"
                root.mkdir()
                home.mkdir()
                s = await start_session(root, home, configuration=settings_for(wire, model))
                served, direct = [], []
                try:
                    async with httpx.AsyncClient() as client:
                        await server_first_delta(s, model)
                        await warm_raw(client, wire, model)
                        for _ in range(rounds):
                            served.append(await server_first_delta(s, model))
                            direct.append(await warm_raw(client, wire, model))
                finally:
                    await stop_session(s)
                ms, base = statistics.median(served) * 1000, statistics.median(direct) * 1000
                print(
                    f"{wire}: warm first delta, median of {rounds}: server {ms:.1f} ms, raw httpx {base:.1f} ms, "
                    f"difference {ms - base:+.1f} ms, ratio {ms / base:.2f}x"
                )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--cold", type=int, default=10)
    parser.add_argument("--later", type=int, default=5)
    parser.add_argument("--wait", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--formats", default=",".join(FORMATS))
    args = parser.parse_args()
    asyncio.run(main(args.cold, args.rounds, args.formats.split(","), args.later, args.wait))
