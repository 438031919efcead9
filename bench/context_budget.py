"""The context budget over a long session, and what counting tokens adds to each request.

1. A 200-turn scripted session through the real agent loop (Loop, Conversation, ContextKeeper; a host
   without kernels or HTTP: each turn the model writes code, it "runs" with ~2,400 characters of output,
   the model answers; summaries are written by the scripted model) with contextWindow 8192: the tokens
   each request sent, against the same session sent whole (every event of the conversation, no compaction,
   no fitting), both counted with litellm's counter for gpt-4o; and the largest request against the window.
2. The latency counting adds to a request of a 100k-token conversation: the keeper's count (cached per
   message; one new message counted per request, in a thread) against the baseline of one direct
   litellm.token_counter call over the whole conversation, measured in the same run.

Run: .venv/bin/python bench/context_budget.py [turns]
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from interpreter_lsp import protocol as p
from interpreter_lsp.agent import budget
from interpreter_lsp.agent.conversation import Conversation
from interpreter_lsp.agent.loop import Loop
from interpreter_lsp.history import History
from interpreter_lsp.llm.client import Completion, ModelConfig
from interpreter_lsp.llm.loader import get_litellm
from interpreter_lsp.llm.models import ModelFacts, facts
from interpreter_lsp.runs import Run, RunResult
from interpreter_lsp.settings import Settings

MODEL = "gpt-4o"
WINDOW = 8192
FENCE = "```"


class BenchHost:
    """A LoopHost whose model is scripted and whose runs end at once with a fixed-size output."""

    def __init__(self, root: Path, model_facts: ModelFacts, settings: Settings) -> None:
        self.root = root
        self.settings = settings
        self.trusted = True
        self.facts = model_facts
        self.requests: list[list[dict[str, Any]]] = []
        self.summaries = 0
        self.turn_index = 0
        self.step = 0
        self.ended = asyncio.Event()
        self.conversation: Conversation | None = None
        self.system = ""
        self.whole_cache = budget.TokenCache()
        self.whole: list[int] = []  # tokens of each request had the session been sent whole

    def send(self, method: str, params: dict[str, Any]) -> None:
        if method == p.TURN_STATUS and params["state"] in p.FINAL_TURN_STATES:
            self.ended.set()

    async def settings_ready(self) -> None:
        return None

    async def variables_for_context(self) -> list[dict[str, Any]] | None:
        return None

    def check_language(self, language: str) -> str:
        return "python"

    def available_languages(self) -> list[str]:
        return ["python", "shell"]

    def remote_directory(self) -> str | None:
        return None

    def sandboxed(self, language: str) -> bool:
        return False

    def held(self) -> str | None:
        return None

    def start_run(self, code: str, language: str, *, approval: Any, **options: Any) -> Run:
        turn_id, proposal_id = options["turn_id"], options["proposal_id"]
        future: asyncio.Future[RunResult] = asyncio.get_running_loop().create_future()
        run = Run(f"r-{turn_id}", language, code, "model", turn_id, proposal_id, 0.0, future)
        output = "".join(f"task {self.turn_index} row {i}: {i * 37 % 101} {i * 13 % 7}\n" for i in range(80))
        result = RunResult(
            run.run_id, language, code, "ok", 3, output, origin="model", turn_id=turn_id, proposal_id=proposal_id
        )
        future.set_result(result)
        assert self.conversation is not None
        self.conversation.record(
            p.RunEvent(run.run_id, "model", language, code, "ok", 3, output, turn_id=turn_id, proposal_id=proposal_id)
        )
        return run

    async def call_model(
        self,
        messages: list[dict[str, Any]],
        on_delta: Callable[[str], None],
        *,
        max_tokens: int | None = None,
        tools: list[dict[str, Any]] | None = None,
        on_tool_call: Any = None,
        prompt_tokens: int | None = None,
    ) -> Completion:
        if "You condense a conversation" in str(messages[0]["content"]):
            self.summaries += 1
            text = "The user asks for tables of rows per task; each ran and printed 80 rows. " * 8
            return Completion(text, 0, 0, 0.0)
        self.requests.append(messages)
        assert self.conversation is not None
        everything = [e for e in self.conversation.events if e.get("type") != "compaction"]
        view = self.conversation.model_view(self.system, events=everything).messages
        self.whole.append(sum(await self.whole_cache.counts(view, self.facts, view=True)))
        if self.step == 0:
            text = f"Printing task {self.turn_index}.\n{FENCE}python\nfor i in range(80):\n    print(i)\n{FENCE}\n"
        else:
            text = f"Task {self.turn_index} is done: 80 rows printed, the largest value was 100."
        self.step = 1 - self.step
        on_delta(text)
        return Completion(text, 0, 0, 0.0)

    async def model_facts(self) -> ModelFacts:
        return self.facts

    async def rate(self, code: str, language: str) -> p.Risk:
        return p.Risk("low", [])


@dataclass
class Session:
    turns: int
    sent: list[int]  # tokens of each request, by litellm.token_counter
    whole: list[int]  # tokens of each request had the session been sent whole
    summaries: int
    answers: list[str]  # the model's last words in each turn, as the conversation recorded them
    compactions: int  # compaction events in the conversation's history file
    seconds: float


async def run_session(turns: int, litellm: Any, model_facts: ModelFacts, root: Path) -> Session:
    """`turns` scripted turns through the real loop, with the conversation's history in `root`."""
    settings = replace(Settings(), context_window=WINDOW, auto_run=True, max_steps=5)
    host = BenchHost(root, model_facts, settings)
    conversation = Conversation(History(root / "history.jsonl"), root)
    loop = Loop(host, conversation)
    host.conversation, host.system = conversation, loop.context.system()
    started = time.perf_counter()
    for i in range(turns):
        host.turn_index, host.step = i, 0
        host.ended.clear()
        loop.chat(f"Print the table of task {i}, one row per line.")
        await host.ended.wait()
    elapsed = time.perf_counter() - started
    answers = [str(e.get("text", "")) for e in conversation.events if e.get("type") == "assistant"][1::2]
    conversation.close()
    stored = [json.loads(line) for line in (root / "history.jsonl").read_text().splitlines() if line.strip()]
    return Session(
        turns,
        [int(litellm.token_counter(model=MODEL, messages=m)) for m in host.requests],
        host.whole,
        host.summaries,
        answers,
        sum(1 for e in stored if e.get("type") == "compaction"),
        elapsed,
    )


async def session(turns: int, litellm: Any, model_facts: ModelFacts) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run = await run_session(turns, litellm, model_facts, Path(tmp))
    sent, whole = run.sent, run.whole
    limit = budget.limits(WINDOW, None, None).prompt_limit
    print(
        f"1. {turns} turns, {len(sent)} requests, contextWindow {WINDOW} ({limit} for the prompt), "
        f"{run.summaries} summaries, {run.seconds:.1f} s"
    )
    ratio = sum(sent) / max(sum(whole), 1)
    print(f"   tokens sent, all requests: ours {sum(sent):,}, whole {sum(whole):,}: ratio {ratio:.3f}")
    print(
        f"   largest request: ours {max(sent):,} ({max(sent) / WINDOW:.0%} of the window), "
        f"whole {max(whole):,} ({max(whole) / WINDOW:.1f}x the window)"
    )
    print(f"   last request: ours {sent[-1]:,}, whole {whole[-1]:,}")


async def latency(litellm: Any, model_facts: ModelFacts, target: int = 100_000, rounds: int = 30) -> None:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You work inside the user's editor."}]
    i = 0
    while True:
        messages.append(
            {
                "role": "user",
                "content": f"Run {i}:\n" + "".join(f"row {j} of run {i}: value {j * 37 % 101}\n" for j in range(60)),
            }
        )
        messages.append({"role": "assistant", "content": f"Run {i} printed 60 rows; next I sum them. " * 3})
        i += 1
        if i % 20 == 0 and litellm.token_counter(model=MODEL, messages=messages) >= target:
            break
    total = int(litellm.token_counter(model=MODEL, messages=messages))
    cache = budget.TokenCache()
    await cache.counts(messages, model_facts, view=True)  # the conversation so far, counted once
    ours, direct = [], []
    for r in range(rounds):
        messages.append({"role": "user", "content": f"Output of round {r}:\n" + "x = 1\n" * 40})
        started = time.perf_counter()
        counts = await cache.counts(messages, model_facts, view=True)
        await budget.fit(messages, cache, model_facts, 10**9, frozenset({len(messages) - 1}))
        ours.append(time.perf_counter() - started)
        assert sum(counts) >= total
        started = time.perf_counter()
        litellm.token_counter(model=MODEL, messages=messages)
        direct.append(time.perf_counter() - started)
    ours_ms, direct_ms = statistics.median(ours) * 1000, statistics.median(direct) * 1000
    print(
        f"2. a {total:,}-token conversation ({len(messages)} messages), one new message per request, "
        f"median of {rounds}:"
    )
    print(
        f"   counting added per request: ours {ours_ms:.2f} ms (goal < 5 ms), "
        f"direct litellm.token_counter over the whole {direct_ms:.1f} ms: ratio {ours_ms / direct_ms:.3f}"
    )


async def main() -> None:
    turns = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    litellm = await get_litellm()
    model_facts = facts(litellm, ModelConfig(model=MODEL))
    await session(turns, litellm, model_facts)
    await latency(litellm, model_facts)


if __name__ == "__main__":
    asyncio.run(main())
