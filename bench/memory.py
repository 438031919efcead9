"""The server's memory (RSS of its own process, kernels excluded), before the first model call, after it,
and after N chat turns, for a model on each wire format; and where the megabytes go at start (RSS as each
group of the server's imports loads, in a fresh interpreter).

    .venv/bin/python bench/memory.py [--turns 200] [--formats openai,anthropic,ollama,litellm]

"litellm": the OpenAI-compatible model through litellm (INTERPRETER_LSP_MODEL_CLIENT=litellm), the
cost of a provider only litellm serves. Goal (issue 21): <= 80 MB before the first call, <= 120 MB steady.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from harness import start_session, stop_session
from interpreter_lsp import protocol as p
from scripted_model import ScriptedModel

GROUPS = r"""
import importlib, sys
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
base = rss()
print(f"  interpreter alone {base:6.1f} MB")
for group in sys.argv[1:]:
    before = rss()
    for name in group.split(","):
        importlib.import_module(name)
    print(f"  + {group:60s} {rss() - before:+6.1f} MB  (total {rss():6.1f} MB)")
"""
# In the order the server loads them; the last lines are what a model call adds on each path.
IMPORT_GROUPS = [
    "lsprotocol.types",
    "pygls.lsp.server,pygls.protocol",
    "zmq,zmq.asyncio",
    "jupyter_client",
    "watchdog.observers",
    "interpreter_lsp.server",
    "httpx,httpx_sse,interpreter_lsp.llm.direct",
    "litellm",
]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def settings_for(wire: str, model: ScriptedModel) -> dict[str, str]:
    return {
        "openai": {"model": "openai/scripted", "apiBase": model.base_url, "apiKey": "sk-bench"},
        "litellm": {"model": "openai/scripted", "apiBase": model.base_url, "apiKey": "sk-bench"},
        "anthropic": {"model": "anthropic/claude-scripted", "apiBase": model.root_url, "apiKey": "sk-bench"},
        "ollama": {"model": "ollama_chat/scripted", "apiBase": model.root_url},
    }[wire]


async def turn(s, model: ScriptedModel, text: str) -> None:
    # Every request is answered (compaction's summaries too, once the conversation passes compactAt).
    model.responder = lambda body: "Noted: " + str(body["messages"][-1].get("content"))[:200]
    turn_id = (await s.command(p.CHAT, {"text": text}))["turnId"]
    final = [None]

    def ended() -> bool:
        final[0] = next((n for n in s.notes[p.TURN_STATUS] if n["turnId"] == turn_id
                         and n["state"] in p.FINAL_TURN_STATES), None)  # fmt: skip
        return final[0] is not None

    await s.wait_for(ended, 120, "the turn's end")
    assert final[0]["state"] == "done", final[0]


async def measure(wire: str, turns: int, model: ScriptedModel, tmp: Path) -> tuple[float, float, float]:
    root, home = tmp / f"ws-{wire}", tmp / f"home-{wire}"
    root.mkdir()
    home.mkdir()
    env = {"INTERPRETER_LSP_MODEL_CLIENT": "litellm"} if wire == "litellm" else None
    s = await start_session(root, home, configuration=settings_for(wire, model), env=env)
    try:
        pid = s.client._server.pid  # pygls' client keeps the server's process
        await s.command(p.STATUS, {})
        await asyncio.sleep(3)  # the warm-ups after `initialized` (imports in a thread, the kernel) settle
        before = rss_mb(pid)
        await turn(s, model, "the first message")
        after = rss_mb(pid)
        for n in range(turns):
            await turn(s, model, f"message number {n}, with a little text to keep " * 3)
        steady = rss_mb(pid)
    finally:
        await stop_session(s)
    return before, after, steady


def import_groups() -> str:
    out = subprocess.run([sys.executable, "-c", GROUPS, *IMPORT_GROUPS], capture_output=True, text=True, check=False)
    return out.stdout.rstrip() or out.stderr.strip().splitlines()[-1]


async def main(turns: int, formats: list[str]) -> None:
    print("where the megabytes go at start (a fresh interpreter, each group on top of the previous ones):")
    print(await asyncio.to_thread(import_groups))
    with ScriptedModel() as model, tempfile.TemporaryDirectory(prefix="ilsp-bench-") as tmp:
        for wire in formats:
            before, after, steady = await measure(wire, turns, model, Path(tmp))
            print(
                f"{wire}: server RSS before the first model call {before:.1f} MB (goal <= 80), after it "
                f"{after:.1f} MB, after {turns} more turns {steady:.1f} MB (goal <= 120)"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--formats", default="openai,anthropic,ollama,litellm")
    args = parser.parse_args()
    asyncio.run(main(args.turns, args.formats.split(",")))
