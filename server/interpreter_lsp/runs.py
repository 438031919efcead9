"""Runs: code sent to a workspace kernel, each an asyncio task with an id. A run goes
queued -> running -> ok | error | interrupted | died | timeout, reported with `interpreter/runStatus`;
its output streams as `interpreter/output` (see output.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from .files import FileChanges, Touched
from .gate import Approval, Ledger
from .kernels.backend import ExecuteReply, KernelBackend, KernelDied, KernelStartError
from .kernels.execution import NO_REPLY_WAIT
from .kernels.pool import KernelPool
from .languages import canonical_language
from .notebook import OutputRecords
from .output import RunOutput
from .protocol import RUN_STATUS, RunStatusParams, to_wire

log = logging.getLogger(__name__)

# How long an interrupted run may take to stop before its kernel is restarted.
INTERRUPT_GRACE = 10.0  # a busy machine may take seconds to deliver a KeyboardInterrupt; a restart loses state
# Not sooner: a second SIGINT while the kernel formats the first one's traceback can lose its reply.
INTERRUPT_RESEND = 2.0
INPUT_CANCELLED = "Input cancelled: the code was stopped at its input prompt."
NO_INPUT = "input() is not available in this editor: put the value in the code instead."

Send = Callable[[str, dict[str, Any]], None]
AskInput = Callable[[str, str, bool], Awaitable[str | None]]


def _done() -> asyncio.Future[None]:
    """A future already resolved (what is awaited when there is nothing to wait for)."""
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    future.set_result(None)
    return future


@dataclass
class RunResult:
    run_id: str
    language: str
    code: str
    state: str
    duration_ms: int
    output_for_model: str
    error: tuple[str, str] | None = None
    message: str | None = None
    origin: str = "user"
    turn_id: str | None = None
    proposal_id: str | None = None
    code_hash: str | None = None
    agent: str | None = None
    outputs: list[dict[str, Any]] = field(default_factory=list)
    files: list[dict[str, str]] = field(default_factory=list)


@dataclass
class Run:
    run_id: str
    language: str
    code: str
    origin: str
    turn_id: str | None
    proposal_id: str | None
    timeout: float
    result: asyncio.Future[RunResult]
    task: asyncio.Task[None] | None = None
    executing: bool = False
    interrupt_requested: bool = False
    interrupt_landed: bool = False  # the kernel raised KeyboardInterrupt in this run's code
    code_ended: bool = False  # the kernel is done with its code (its reply or its idle status came)
    input_cancelled: bool = False
    source: dict[str, Any] | None = None
    code_hash: str | None = None  # what its approval was bound to (gate.py)
    agent: str | None = None  # origin "agent": which agent


class _Sink:
    """Connects one execution's kernel messages to its output stream and status."""

    def __init__(self, manager: RunManager, run: Run, output: RunOutput) -> None:
        self._manager = manager
        self._run = run
        self.output = output
        self.recorded = OutputRecords()  # for history and notebook export
        self.ended: Callable[[], None] | None = None

    def on_busy(self) -> None:
        self._manager._status(self._run, "running")

    def on_ended(self) -> None:
        self._run.code_ended = True
        if self.ended is not None:
            self.ended()

    def on_iopub(self, msg_type: str, content: dict[str, Any]) -> None:
        if msg_type == "error":
            ename = content.get("ename")
            if ename == "KeyboardInterrupt":
                self._run.interrupt_landed = True
            # One line instead of a kernel-internal traceback: the user cancelled an input() prompt, or this
            # editor cannot answer one.
            if self._run.input_cancelled and ename == "KeyboardInterrupt":
                return self._condensed(INPUT_CANCELLED, content)
            if ename == "StdinNotImplementedError" and self._manager.ask_input is None:
                return self._condensed(NO_INPUT, content)
        self.output.on_iopub(msg_type, content)
        self.recorded.add(msg_type, content)

    def _condensed(self, text: str, content: dict[str, Any]) -> None:
        self.output.exception(str(content.get("ename", "Error")), text, [text])
        self.recorded.error(str(content.get("ename", "")), text, [text])

    async def on_input(self, prompt: str, password: bool) -> str | None:
        ask = self._manager.ask_input
        if ask is None:
            return None
        answer = await ask(self._run.run_id, prompt, password)
        if answer is None:
            self._run.input_cancelled = True
            self._run.interrupt_requested = True
        return answer


class RunManager:
    def __init__(
        self,
        pool: KernelPool,
        send: Send,
        *,
        model_limit: Callable[[], int],
        ask_input: AskInput | None = None,
        on_finished: Callable[[RunResult], None] | None = None,
        default_timeout: Callable[[], float] = lambda: 0.0,
        files: FileChanges | None = None,
        ledger: Ledger | None = None,
        before_run: Callable[[str], Awaitable[None]] | None = None,
        after_run: Callable[[str, list[dict[str, str]], str | None], list[dict[str, str]]] | None = None,
        before_code: Callable[[str, KernelBackend], Awaitable[None]] | None = None,
        after_code: Callable[[str, KernelBackend, ExecuteReply], None] | None = None,
    ) -> None:
        self._pool = pool
        # Approvals are redeemed here, before anything is queued: only the gate (gate.py) mints them.
        self.ledger = ledger or Ledger()
        self._send = send
        self._model_limit = model_limit
        self.ask_input = ask_input
        self._on_finished = on_finished
        self._default_timeout = default_timeout
        self.runs: dict[str, Run] = {}
        self._files = files
        # Awaited before a local run's code reaches the kernel: undo's pre-images of the workspace (undo.py).
        self._before_run = before_run
        # Called with the run's files before its final status goes out: what the files are at the run's end
        # (undo.py) is taken before anyone told of the end can change them. It returns the list as told: a
        # file it knew from before the run is "modified", not "created".
        self._after_run = after_run
        # Awaited before a run's code goes to its kernel, and called with its reply once the code ended, local
        # or remote: undo's snapshots of the python kernel's variables (variable_undo.py).
        self._before_code = before_code
        self._after_code = after_code

    def _status(
        self,
        run: Run,
        state: str,
        duration_ms: int | None = None,
        message: str | None = None,
        files: list[dict[str, str]] | None = None,
    ) -> None:
        queued = state == "queued"
        params = RunStatusParams(
            run.run_id,
            state,  # type: ignore[arg-type]
            duration_ms=duration_ms,
            language=run.language,
            message=message,
            turn_id=run.turn_id,
            proposal_id=run.proposal_id,
            code=run.code if queued else None,
            origin=run.origin if queued else None,
            agent=run.agent if queued else None,
            files=files or None,
            root=str(self._files.root) if files and self._files is not None else None,
            source=run.source if queued else None,
        )
        self._send(RUN_STATUS, to_wire(params))

    def start(
        self,
        code: str,
        language: str,
        *,
        approval: Approval,
        origin: str = "user",
        agent: str | None = None,
        turn_id: str | None = None,
        proposal_id: str | None = None,
        timeout: float | None = None,
        source: dict[str, Any] | None = None,
    ) -> Run:
        """Queue `code`; returns at once. The language must already be known to resolve (see check).
        `approval`: the gate's token for exactly this code and language (raises gate.NotApproved else)."""
        lang = canonical_language(language)
        self.ledger.redeem(approval, code, lang)
        loop = asyncio.get_running_loop()
        run = Run(
            run_id="r-" + uuid.uuid4().hex[:12],
            language=lang,
            code=code,
            origin=origin,
            turn_id=turn_id,
            proposal_id=proposal_id,
            timeout=self._default_timeout() if timeout is None else timeout,
            result=loop.create_future(),
            source=source,
            code_hash=approval.code_hash,
            agent=agent,
        )
        self.runs[run.run_id] = run
        self._status(run, "queued")
        run.task = asyncio.create_task(self._execute(run), name=f"run-{run.run_id}")
        run.task.add_done_callback(lambda task, run=run: self._cancelled_before_start(run, task))
        return run

    def _cancelled_before_start(self, run: Run, task: asyncio.Task[None]) -> None:
        """A run interrupted before its task took a first step (a run and an interrupt read in one go, an
        undo right behind a run): Python then never enters `_execute`, whose `finally` says how a run ended,
        so the run stayed "queued" for ever and whoever awaited it waited. Its end is said here instead."""
        if not task.cancelled() or run.result.done():
            return
        self.runs.pop(run.run_id, None)
        self._status(run, "interrupted", 0)
        result = RunResult(
            run.run_id, run.language, run.code, "interrupted", 0, "", origin=run.origin, turn_id=run.turn_id,
            proposal_id=run.proposal_id, code_hash=run.code_hash, agent=run.agent,
        )
        asyncio.get_running_loop().call_soon(self._finished, result)
        run.result.set_result(result)

    async def _execute(self, run: Run) -> None:
        output = RunOutput(run.run_id, self._send, self._model_limit())
        sink = _Sink(self, run, output)
        state, message, started = "error", None, time.monotonic()
        watch_files = False
        replied: tuple[KernelBackend, ExecuteReply] | None = None
        try:
            async with self._pool.run_lock(run.language):
                kernel = await self._pool.kernel(run.language)
                if self._before_code is not None:
                    # Before the run counts as executing: an interrupt meanwhile cancels the run (still queued).
                    await self._before_code(run.run_id, kernel)
                started = time.monotonic()
                run.executing = True
                # Files touched are watched here, on this machine: not for a kernel on a gateway.
                watch_files = self._files is not None and not self._pool.is_remote(run.language)
                settling: asyncio.Future[None] | None = None
                if watch_files:
                    await self._files.begin(run.run_id)
                    if self._before_run is not None:
                        await self._before_run(run.run_id)

                    def code_ended() -> None:
                        # Its barrier goes now: its events travel while the rest of the run's messages come
                        # (~0.3 ms of a print(1)'s run path); read at once, it has usually come out already.
                        nonlocal settling
                        if settling is None and self._files is not None:
                            waiting = self._files.start_settle()
                            settling = asyncio.ensure_future(waiting) if waiting is not None else _done()

                    sink.ended = code_ended
                execution = kernel.submit(run.code, sink, allow_stdin=self.ask_input is not None)
                timed_out = False
                if run.timeout > 0:
                    done, _ = await asyncio.wait({execution}, timeout=run.timeout)
                    if not done:
                        # Stop it while we still hold the kernel's turn, so the interrupt
                        # cannot hit the next run.
                        timed_out = True
                        await self._stop(run.language, [execution], [run])
                reply = await execution
                replied = (kernel, reply)
                if self._files is not None and watch_files:
                    # The run's file events still crossing from watchdog's thread (the barrier sent when the code
                    # ended; a run stopped by its timeout sends one now).
                    await (settling if settling is not None else self._files.settle())
                if timed_out:
                    state, message = "timeout", f"stopped after the run timeout of {run.timeout:g} s"
                else:
                    state, message = self._final_state(run, reply)
        except asyncio.CancelledError:
            state = "interrupted"
        except KernelDied as exc:
            state, message = "died", str(exc)
        except KernelStartError as exc:
            state, message = "error", str(exc)
            output.note("stderr", str(exc))
        except Exception as exc:
            log.exception("run %s failed", run.run_id)
            state, message = "error", f"internal error: {exc}"
            output.note("stderr", message)
        finally:
            watched = self._files is not None and run.executing and watch_files
            touched = self._files.end(run.run_id) if watched else Touched([])
            if touched.note:
                message = f"{message}; {touched.note}" if message else touched.note
            run.executing = False
            output.flush()
            duration = int((time.monotonic() - started) * 1000)
            if self._after_run is not None:
                try:
                    touched.files = self._after_run(run.run_id, touched.files, message)
                except Exception:
                    log.exception("recording the files of run %s failed", run.run_id)
            self._status(run, state, duration, message, touched.files)
            if replied is not None and self._after_code is not None:
                # After the final status has left (its kernel requests are off the run's path: ~0.5 ms), and
                # still before any other run's request: nothing since the lock's release has awaited, so the
                # next run's task has not resumed yet.
                self._after_code(run.run_id, *replied)
            result = RunResult(
                run.run_id,
                run.language,
                run.code,
                state,
                duration,
                output.model_view.text(),
                error=output.error,
                message=message,
                origin=run.origin,
                turn_id=run.turn_id,
                proposal_id=run.proposal_id,
                code_hash=run.code_hash,
                agent=run.agent,
                outputs=sink.recorded.records,
                files=touched.files,
            )
            self.runs.pop(run.run_id, None)
            # Recorded (history: a disk write) after the final status has left, but before whoever
            # awaits the result resumes: call_soon callbacks run in order.
            asyncio.get_running_loop().call_soon(self._finished, result)
            if not run.result.done():
                run.result.set_result(result)

    def _finished(self, result: RunResult) -> None:
        if self._on_finished is not None:
            try:
                self._on_finished(result)
            except Exception:
                log.exception("recording run %s failed", result.run_id)

    def _final_state(self, run: Run, reply: ExecuteReply) -> tuple[str, str | None]:
        if reply.status == "died":
            # One true thing: the pool restarts a dead kernel at once (kernels/pool.py) and its kernelStatus
            # says how that goes; not "it has been restarted" (not yet true), nor "restart it yourself".
            if reason := reply.content.get("reason"):  # said by the backend (e.g. what the gateway did)
                return "died", f"The {run.language} kernel was lost while running this code: {reason}."
            if cause := reply.content.get("cause"):  # why the local process ended (a limit names its setting)
                return "died", (
                    f"The {run.language} kernel died while running this code: {cause}. Its state (variables, "
                    "imports) was lost; the kernel is being restarted."
                )
            return "died", (
                f"The {run.language} kernel died while running this code; its state (variables, imports) "
                "was lost; the kernel is being restarted."
            )
        if run.input_cancelled:
            return "interrupted", "input cancelled"
        if run.interrupt_requested or reply.status == "interrupted":
            return "interrupted", None
        if reply.status == "ok":
            return "ok", None
        if reply.status == "aborted":
            return "error", reply.content.get("reason") or "the kernel aborted this run"
        if said := self._pool.limit_reached(run.language, reply.content):  # out of memory, of processes
            return "error", said
        return "error", reply.content.get("reason")

    async def _stop(self, language: str, executions: list[asyncio.Future[Any]], runs: list[Run]) -> None:
        """SIGINT the kernel; if the executions have not ended within the grace time, restart it.
        ipykernel ignores SIGINT between receiving a request and starting its handler, so a signal that
        lands in that instant is lost: it is sent again every INTERRUPT_RESEND seconds until the kernel
        shows a KeyboardInterrupt for every run, or is done with its code. Not after: a second SIGINT while
        the kernel formats the first one's traceback (seconds, on a busy machine) can cost the run its
        reply, and then its state with the fallback restart.

        The restart is for code that ignores SIGINT, so only a run whose code still runs earns it: a kernel
        that went idle for every run is done with their code, and what is left ends by itself (a reply it
        dropped, NO_REPLY_WAIT after the idle status), however late in the grace the idle came."""
        kernel = self._pool.existing(language)
        if kernel is None:
            return
        loop = asyncio.get_running_loop()
        still: set[asyncio.Future[Any]] = set(executions)
        deadline = loop.time() + INTERRUPT_GRACE
        while still and loop.time() < deadline and not all(run.code_ended for run in runs):
            if not all(run.interrupt_landed or run.code_ended for run in runs):
                await kernel.interrupt()
            _done, still = await asyncio.wait(still, timeout=INTERRUPT_RESEND)
        if still and all(run.code_ended for run in runs):
            _done, still = await asyncio.wait(still, timeout=NO_REPLY_WAIT + INTERRUPT_GRACE)
        if still:
            log.warning("%s kernel ignored the interrupt; restarting it", language)
            with contextlib.suppress(Exception):
                await self._pool.restart(language)

    async def interrupt(self, only: Callable[[Run], bool] | None = None) -> int:
        """Interrupt every run (`only`: those it accepts): queued ones are cancelled, running ones get SIGINT
        (restart if ignored)."""
        runs = [run for run in self.runs.values() if only is None or only(run)]
        for run in runs:
            run.interrupt_requested = True
            if not run.executing and run.task is not None:
                run.task.cancel()
        executing = [r for r in runs if r.executing and r.task is not None]
        # Each run's task, not its result future: that future is shared with whoever awaits the run, and
        # one of them cancelling it must not end the resending of a lost SIGINT.
        await asyncio.gather(
            *(
                self._stop(
                    lang,
                    [r.task for r in executing if r.language == lang and r.task is not None],
                    [r for r in executing if r.language == lang],
                )
                for lang in {r.language for r in executing}
            )
        )
        return len(runs)

    async def drain(self) -> None:
        tasks = [r.task for r in self.runs.values() if r.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
