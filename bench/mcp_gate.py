"""Other agents through the gate (docs/agents.md): what the approval adds, measured against a direct run in
the same run, through a real language server (pytest-lsp client as the editor) and the MCP SDK's client
over stdio as the agent (`interpreter-lsp mcp`).

    .venv/bin/python bench/mcp_gate.py [--samples 40] [--calls 1000]

1. approve -> execution start: from `interpreter.approve` sent by the editor to the run's `runStatus
   running`, against a direct `interpreter.run` sent to its `runStatus running` (the baseline): the
   added latency, p50 and p95 (goal: p95 <= 50 ms).
2. deny -> tool error: from `interpreter.reject` sent to the agent's call_tool returning its error
   (goal: <= 200 ms).
3. Two agents (python, shell), `--calls` interleaved calls in all, each approved by the editor: runs that
   landed in a kernel other than the one named, or a card naming the wrong agent (goal: 0).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from harness import Session, start_session, stop_session
from interpreter_lsp import protocol as p
from test_mcp import agent, socket_ready, text_of


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


async def running_at(s: Session, predicate: Any) -> float:
    """The time the first runStatus `running` that `predicate` accepts arrived."""
    seen: asyncio.Future[float] = asyncio.get_running_loop().create_future()

    def listen(params: dict[str, Any]) -> None:
        if params.get("state") == "running" and predicate(params) and not seen.done():
            seen.set_result(time.perf_counter())

    s.listeners[p.RUN_STATUS].append(listen)
    try:
        return await asyncio.wait_for(seen, 60)
    finally:
        s.listeners[p.RUN_STATUS].remove(listen)


async def card(s: Session, count: int) -> dict[str, Any]:
    return await s.wait_for(lambda: s.notes[p.PROPOSAL][count] if len(s.notes[p.PROPOSAL]) > count else None)


async def main(samples: int, calls: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root, home = Path(tmp) / "ws", Path(tmp) / "home"
        root.mkdir()
        home.mkdir()
        s = await start_session(root, home)
        await socket_ready(root)
        try:
            await s.run_and_wait("1")
            await s.run_and_wait("echo", "shell")
            direct: list[float] = []
            for _ in range(samples):
                runs_before = {st["runId"] for st in s.notes[p.RUN_STATUS]}
                started = time.perf_counter()
                waiting = asyncio.ensure_future(running_at(s, lambda st, b=runs_before: st["runId"] not in b))
                await s.command(p.RUN, {"code": "pass"})
                direct.append((await waiting - started) * 1000)
                await s.wait_for(lambda: not [st for st in s.notes[p.RUN_STATUS][-1:] if st["state"] == "running"])
            approved: list[float] = []
            denied: list[float] = []
            async with agent(root, home, "bench") as client:
                for _ in range(samples):
                    count = len(s.notes[p.PROPOSAL])
                    call = asyncio.ensure_future(client.call_tool("run_code", {"code": "pass"}))
                    shown = await card(s, count)
                    waiting = asyncio.ensure_future(
                        running_at(s, lambda st, i=shown["proposalId"]: st.get("proposalId") == i)
                    )
                    started = time.perf_counter()
                    await s.command(p.APPROVE, {"proposalId": shown["proposalId"]})
                    approved.append((await waiting - started) * 1000)
                    await call
                for _ in range(samples):
                    count = len(s.notes[p.PROPOSAL])
                    call = asyncio.ensure_future(client.call_tool("run_code", {"code": "pass"}))
                    shown = await card(s, count)
                    started = time.perf_counter()
                    await s.command(p.REJECT, {"proposalId": shown["proposalId"], "reason": "no"})
                    result = await call
                    denied.append((time.perf_counter() - started) * 1000)
                    assert result.is_error
            added = [a - statistics.median(direct) for a in approved]
            print(f"direct run -> execution start: median {statistics.median(direct):.1f} ms, p95 {p95(direct):.1f} ms")
            print(
                f"approve -> execution start:    median {statistics.median(approved):.1f} ms, "
                f"p95 {p95(approved):.1f} ms"
            )
            print(
                f"added by the gate (approve vs direct median): p50 {statistics.median(added):.1f} ms, "
                f"p95 {p95(added):.1f} ms (goal <= 50 ms); ratio of medians "
                f"{statistics.median(approved) / statistics.median(direct):.2f}"
            )
            print(
                f"deny -> tool error: median {statistics.median(denied):.1f} ms, "
                f"p95 {p95(denied):.1f} ms (goal <= 200 ms)"
            )
            await interleaved(s, root, home, calls)
        finally:
            await stop_session(s)


async def interleaved(s: Session, root: Path, home: Path, calls: int) -> None:
    stop = asyncio.Event()
    decided: set[str] = set()
    first_card = len(s.notes[p.PROPOSAL])

    async def approver() -> None:
        while not stop.is_set():
            for shown in list(s.notes[p.PROPOSAL][first_card:]):
                if shown["proposalId"] not in decided and not shown.get("autoRun"):
                    decided.add(shown["proposalId"])
                    await s.command(p.APPROVE, {"proposalId": shown["proposalId"]})
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.01)

    approving = asyncio.ensure_future(approver())
    wrong = 0
    started = time.perf_counter()
    try:
        async with agent(root, home, "alpha") as a, agent(root, home, "beta") as b:

            async def py(i: int) -> bool:
                out = text_of(
                    await a.call_tool("run_code", {"code": f"import sys; print('py', {i}, sys.version_info[0])"})
                )
                return f"py {i} 3" in out

            async def sh(i: int) -> bool:
                out = text_of(await b.call_tool("run_code", {"code": f"echo sh {i} kernel", "language": "shell"}))
                return f"sh {i} kernel" in out and "py" not in out

            for i in range(calls // 2):
                ok_a, ok_b = await asyncio.gather(py(i), sh(i))
                wrong += (not ok_a) + (not ok_b)
    finally:
        stop.set()
        await approving
    elapsed = time.perf_counter() - started
    cards = s.notes[p.PROPOSAL][first_card:]
    misnamed = sum(1 for c in cards if c["agent"].startswith("alpha") != (c["language"] == "python"))
    print(
        f"two agents, {2 * (calls // 2)} interleaved calls (python + shell), each approved: {wrong} cross-routed or "
        f"wrong results, {misnamed} cards naming the wrong agent (goal 0); {elapsed:.1f} s, "
        f"{elapsed / max(1, 2 * (calls // 2)) * 1000:.0f} ms per call"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args()
    asyncio.run(main(args.samples, args.calls))
