"""Round trip and flood through the server on a gateway kernel, against a bare websocket client on the
same gateway, in the same run.

    .venv/bin/python bench/gateway_roundtrip.py [--runs 200] [--gateway kg|eg]

Needs the gateways of scripts/setup.d/gateways.sh (.venv-gateways/). A real Kernel Gateway (or
Enterprise Gateway) is started on 127.0.0.1 with a token; the server's python kernel and the bare
client's kernel are two kernels of that gateway.

1. Median time from `interpreter.run {code: "print(1)"}` sent by a real LSP client (stdio) to its
   `runStatus ok` received, vs a bare websocket client's execute_request -> idle on its own kernel,
   interleaved so that whatever else the machine does hits both alike (target <= 1.3x).
2. Flood: `for i in range(100_000): print(i)` through the server vs bare (wall time ratio, target
   <= 1.2x), with an `interpreter.status` request sent during the flood (its latency, target <= 100 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx
import websockets

from gateways import TOKEN, Gateway, gateway_missing, gateway_settings
from harness import start_session, stop_session
from interpreter_lsp import protocol as p
from roundtrip import FinishWaiter

FLOOD = "for i in range(100_000):\n    print(i)"
HEADERS = {"Authorization": f"token {TOKEN}"}


class BareClient:
    """The least a client can do: one kernel, one websocket, JSON frames, wait for this request's idle."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.session = uuid.uuid4().hex
        self.kernel_id = ""
        self.ws: websockets.ClientConnection | None = None

    async def start(self) -> BareClient:
        async with httpx.AsyncClient(headers=HEADERS, timeout=60) as http:
            body = {"name": "python3", "env": {"KERNEL_USERNAME": "bench"}}
            r = await http.post(f"{self.gateway.url}/api/kernels", json=body)
            r.raise_for_status()
            self.kernel_id = r.json()["id"]
        url = f"ws://127.0.0.1:{self.gateway.port}/api/kernels/{self.kernel_id}/channels?session_id={self.session}"
        self.ws = await websockets.connect(url, additional_headers=HEADERS, max_size=None, compression=None)
        await self.execute("pass")
        return self

    async def execute(self, code: str) -> tuple[float, int]:
        """Seconds from execute_request to this request's idle, and how many messages came for it."""
        assert self.ws is not None
        msg_id = uuid.uuid4().hex
        frame = {
            "channel": "shell",
            "header": {
                "msg_id": msg_id,
                "msg_type": "execute_request",
                "session": self.session,
                "username": "bench",
                "date": datetime.now(timezone.utc).isoformat(),
                "version": "5.3",
            },
            "parent_header": {},
            "metadata": {},
            "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": False},
            "buffers": [],
        }
        start = time.perf_counter()
        await self.ws.send(json.dumps(frame))
        count = 0
        async for raw in self.ws:
            msg = json.loads(raw)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            count += 1
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return time.perf_counter() - start, count
        raise RuntimeError("the websocket closed")

    async def stop(self) -> None:
        if self.ws is not None:
            await self.ws.close()
        async with httpx.AsyncClient(headers=HEADERS, timeout=30) as http:
            await http.delete(f"{self.gateway.url}/api/kernels/{self.kernel_id}")


async def main(runs: int, kind: str, floods: int) -> None:
    if (why := gateway_missing(kind)) is not None:
        raise SystemExit(why)
    with tempfile.TemporaryDirectory(prefix="ilsp-gw-bench-") as tmp:
        tmp_path = Path(tmp)
        root, home = tmp_path / "ws", tmp_path / "home"
        root.mkdir()
        home.mkdir()
        gateway = await Gateway(kind, tmp_path / "gateway").start()
        bare = await BareClient(gateway).start()
        s = await start_session(root, home, configuration=gateway_settings(gateway.url, gatewayUsername="bench"))
        try:
            waiter = FinishWaiter(s)
            for _ in range(10):
                await bare.execute("print(1)")
                await waiter.run(s, "print(1)")
            bare_times, served = [], []
            for _ in range(runs):
                bare_times.append((await bare.execute("print(1)"))[0])
                served.append(await waiter.run(s, "print(1)"))

            bare_floods, server_floods, latencies, notifications, bare_msgs = [], [], [], 0, 0
            for _ in range(floods):
                seconds, bare_msgs = await bare.execute(FLOOD)
                bare_floods.append(seconds)
                before = len(s.notes[p.OUTPUT])
                flood_task = asyncio.create_task(waiter.run(s, FLOOD))
                await s.wait_for(lambda before=before: len(s.notes[p.OUTPUT]) > before, 60, "the flood")
                t0 = time.perf_counter()
                await s.command(p.STATUS, {})
                latencies.append(time.perf_counter() - t0)
                server_floods.append(await flood_task)
                notifications = len(s.notes[p.OUTPUT]) - before
        finally:
            await stop_session(s)
            await bare.stop()
            await gateway.stop()

    bare_ms, served_ms = statistics.median(bare_times) * 1000, statistics.median(served) * 1000
    server_flood, bare_flood = statistics.median(server_floods), statistics.median(bare_floods)
    print(f"gateway: {kind} ({'Kernel Gateway 3.0.1' if kind == 'kg' else 'Enterprise Gateway 3.3.0'}), 127.0.0.1")
    print(
        f"round trip print(1), median of {runs}: server {served_ms:.2f} ms, bare websocket client "
        f"{bare_ms:.2f} ms, ratio {served_ms / bare_ms:.2f}x (target <= 1.3x)"
    )
    print(
        f"flood of 100,000 lines (median of {floods}): server {server_flood:.2f} s, bare client {bare_flood:.2f} s, "
        f"ratio {server_flood / bare_flood:.2f}x (target <= 1.2x); "
        f"{notifications} output notifications (bare: {bare_msgs} messages)"
    )
    print(f"  floods, server: {[round(x, 2) for x in server_floods]}, bare: {[round(x, 2) for x in bare_floods]}")
    print(
        f"interpreter.status during the flood answered in {max(latencies) * 1000:.1f} ms at worst "
        "(target <= 100 ms)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--floods", type=int, default=5)
    parser.add_argument("--gateway", choices=("kg", "eg"), default="kg")
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.gateway, args.floods))
