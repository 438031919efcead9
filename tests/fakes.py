"""Fakes for unit tests of the middle: a LoopHost without kernels or HTTP, a kernel without a process.
End-to-end tests use the real parts; these make a failure say which layer broke."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from interpreter_lsp import protocol as p
from interpreter_lsp.gate import Approval, Ledger
from interpreter_lsp.kernels.kernel import ExecuteReply
from interpreter_lsp.llm.client import Completion
from interpreter_lsp.llm.errors import ModelError
from interpreter_lsp.llm.models import ModelFacts
from interpreter_lsp.llm.toolstream import ToolCall
from interpreter_lsp.runs import Run, RunResult
from interpreter_lsp.settings import Settings


def count_tokens(messages: list[dict[str, Any]]) -> int:
    return sum(len(str(m.get("content", ""))) // 4 + 4 for m in messages) + 3


class FakeHost:
    """A LoopHost: records what the loop sends and runs, answers model calls from a script."""

    def __init__(self, root: Path, settings: Settings | None = None) -> None:
        self.root = root
        self.settings = settings or Settings()
        self.trusted = True
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.replies: deque[list[str | ToolCall] | ModelError] = deque()  # text pieces and native tool calls
        self.tools: list[list[dict[str, Any]] | None] = []  # the tools each request offered
        self.requests: list[list[dict[str, Any]]] = []
        self.runs: list[Run] = []
        self.ledger: Ledger | None = None  # set to the loop's gate.ledger: runs redeem their approval there
        self.risk = p.Risk("low", [])
        self.model_gate: asyncio.Event | None = None  # when set, a model call waits for it mid-reply
        self.gate_after = 0  # ... after this delta
        self.together = False  # a reply's pieces arrive in one read of the stream (no loop iteration between)
        self.changed = asyncio.Event()
        # A model of ~4 characters per token, with no window, price or abilities known.
        self.facts = ModelFacts("fake", None, 0.0, 0.0, False, False, False, count_tokens)

    # what the loop calls
    def send(self, method: str, params: dict[str, Any]) -> None:
        self.sent.append((method, params))
        self.changed.set()

    async def settings_ready(self) -> None:
        return None

    async def variables_for_context(self) -> list[dict[str, Any]] | None:
        return None

    def check_language(self, language: str) -> str:
        return {"py": "python", "bash": "shell"}.get(language, language)

    def available_languages(self) -> list[str]:
        return ["python", "shell"]

    def remote_directory(self) -> str | None:
        return None

    def sandboxed(self, language: str) -> bool:
        return False

    def held(self) -> str | None:
        return None

    def start_run(self, code: str, language: str, *, approval: Approval, **options: Any) -> Run:
        # What RunManager.start does first: the gate's token must bind exactly this code.
        if self.ledger is not None:
            self.ledger.redeem(approval, code, language)
        future: asyncio.Future[RunResult] = asyncio.get_running_loop().create_future()
        turn_id, proposal_id = options.get("turn_id"), options.get("proposal_id")
        run = Run(
            f"r-{len(self.runs)}", language, code, options.get("origin", "model"), turn_id, proposal_id, 0.0, future
        )
        self.runs.append(run)
        self.changed.set()
        return run

    async def model_facts(self) -> ModelFacts:
        return self.facts

    async def call_model(
        self,
        messages: list[dict[str, Any]],
        on_delta: Callable[[str], None],
        *,
        max_tokens: int | None = None,
        tools: list[dict[str, Any]] | None = None,
        on_tool_call: Callable[[ToolCall], None] | None = None,
        prompt_tokens: int | None = None,
    ) -> Completion:
        self.requests.append(messages)
        self.tools.append(tools)
        reply = self.replies.popleft()
        if isinstance(reply, ModelError):
            raise reply
        for i, piece in enumerate(reply):
            if isinstance(piece, ToolCall):
                assert tools and on_tool_call is not None, "a tool call scripted for a request without tools"
                on_tool_call(piece)
            else:
                on_delta(piece)
            if i == self.gate_after and self.model_gate is not None:
                await self.model_gate.wait()
            if not self.together:
                await asyncio.sleep(0)
        text = "".join(piece for piece in reply if isinstance(piece, str))
        calls = tuple(piece for piece in reply if isinstance(piece, ToolCall))
        return Completion(text, 10, 5, 0.0, calls)

    async def rate(self, code: str, language: str) -> p.Risk:
        return self.risk

    # what tests use
    def notes(self, method: str) -> list[dict[str, Any]]:
        return [params for m, params in self.sent if m == method]

    async def until(self, predicate: Callable[[], Any], timeout: float = 60) -> Any:
        async def check() -> Any:
            while not (result := predicate()):
                self.changed.clear()
                await self.changed.wait()
            return result

        return await asyncio.wait_for(check(), timeout)

    def finish_run(self, run: Run, state: str = "ok", output: str = "") -> None:
        result = RunResult(
            run.run_id,
            run.language,
            run.code,
            state,
            1,
            output,
            origin="model",
            turn_id=run.turn_id,
            proposal_id=run.proposal_id,
        )
        run.result.set_result(result)


class FakeKernel:
    """A kernel without a process: each submit is answered from `replies` (status, outputs)."""

    def __init__(self, language: str = "python") -> None:
        self.language = language
        self.state = "idle"
        self.started_at = 0.0
        self.submitted: list[str] = []
        self.interrupts = 0
        self.lose_interrupts = 0
        self.slow_traceback = False  # an interrupt shows KeyboardInterrupt, the reply waits for finish()
        self.pending: list[tuple[asyncio.Future[ExecuteReply], Any]] = []

    def submit(self, code: str, sink: Any, *, allow_stdin: bool = False, **_: Any) -> asyncio.Future[ExecuteReply]:
        self.submitted.append(code)
        future: asyncio.Future[ExecuteReply] = asyncio.get_running_loop().create_future()
        self.pending.append((future, sink))
        sink.on_busy()
        return future

    def finish(self, status: str = "ok", stdout: str = "") -> None:
        future, sink = self.pending.pop(0)
        if stdout:
            sink.on_iopub("stream", {"name": "stdout", "text": stdout})
        future.set_result(ExecuteReply(status))

    async def interrupt(self) -> None:
        self.interrupts += 1
        if self.lose_interrupts > 0:  # ipykernel ignores SIGINT before its handler is installed
            self.lose_interrupts -= 1
            return
        if self.pending and self.slow_traceback:
            self.pending[0][1].on_iopub("error", {"ename": "KeyboardInterrupt", "evalue": "", "traceback": []})
        elif self.pending:
            self.finish("error")


class FakePool:
    def __init__(self, kernel: FakeKernel) -> None:
        self._kernel = kernel
        self._lock = asyncio.Lock()
        self.restarts = 0

    def run_lock(self, language: str) -> asyncio.Lock:
        return self._lock

    async def kernel(self, language: str) -> FakeKernel:
        return self._kernel

    def existing(self, language: str) -> FakeKernel:
        return self._kernel

    async def restart(self, language: str) -> None:
        self.restarts += 1
        while self._kernel.pending:
            self._kernel.finish("interrupted")


class TextSink:
    """An ExecutionSink that keeps a run's stream text (for tests that drive a kernel directly)."""

    def __init__(self) -> None:
        self.text = ""

    def on_busy(self) -> None:
        pass

    def on_ended(self) -> None:
        pass

    def on_iopub(self, msg_type: str, content: dict[str, Any]) -> None:
        if msg_type == "stream":
            self.text += content.get("text", "")

    async def on_input(self, prompt: str, password: bool) -> str | None:
        return None
