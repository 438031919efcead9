"""A kernel on a Jupyter Kernel Gateway or Enterprise Gateway: the same interface as the local `Kernel`
(see backend.py), over REST (start, interrupt, restart, delete) and one channels websocket.

Every message is routed by its parent msg_id to the waiting execution (the websocket itself, its reader
and writer tasks: gateway_channels.py). Death is seen on the wire:
- a parent-less `status: restarting` (the kernel process died; the gateway restarts it) or `dead`;
- a `shutdown_reply` we did not ask for (the gateway culled or deleted the kernel, or someone restarted it);
- a dropped websocket: reconnect with the same session id (the gateway buffers the output meanwhile and
  replays it) while the gateway still has the kernel; otherwise the kernel is lost, and so is its state.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from .backend import DeathCallback, ExecuteReply, ExecutionSink, KernelDied, KernelStartError, StateCallback
from .execution import Executions, Pending
from .gateway_channels import Channels
from .gateway_client import GatewayClient, GatewayError, GatewayUnreachable, KernelGone
from .specs import KernelChoice, UnknownLanguage

log = logging.getLogger(__name__)

READY_TIMEOUT = 60.0
DELETE_TIMEOUT = 5.0
STATE_LOST = "its state (variables, imports) was lost"


class GatewayKernel:
    remote = True

    def __init__(
        self,
        choice: KernelChoice,
        *,
        client: GatewayClient,
        on_state: StateCallback,
        on_death: DeathCallback | None = None,
    ) -> None:
        self.choice = choice
        self.language = choice.language
        self.state = "stopped"
        self.started_at: float | None = None
        self.kernel_id: str | None = None
        self._client = client
        self._on_state = on_state
        self._on_death = on_death
        # Requests in flight and the routing of their messages: the one execution path (execution.py).
        self._executions = Executions(lambda: self.state, self._set_state, self._spawn_input)
        self._pending = self._executions.pending
        self._channels = Channels(self.language, self._dispatch, self._connection_lost, self._sent)
        self._reconnecting: asyncio.Task[None] | None = None
        self._death_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closing = False
        self._self_restart = False
        self._after_death: str | None = None  # "autorestarted" | "gone"

    @property
    def url(self) -> str:
        return self._client.config.shown_url

    def pid(self) -> int | None:
        return None  # the process lives on the gateway's host

    def calls_path(self) -> str | None:
        return None  # nothing of the server's machine is in its reach

    def _set_state(self, state: str, message: str | None = None) -> None:
        if state != self.state or message:
            self.state = state
            self._on_state(state, message)

    # ---- life cycle -----------------------------------------------------------------------------------------

    async def start(self) -> None:
        self._set_state("starting")
        self._closing = False
        try:
            self.choice = await self._client.resolve(self.language)
            self.kernel_id = await self._client.start_kernel(self.choice.name)
            await self._open()
        except (GatewayError, UnknownLanguage) as exc:
            await self._teardown(delete=True)
            self._set_state("dead", f"could not start: {exc}")
            raise KernelStartError(f"The {self.language} kernel could not start on the gateway: {exc}") from exc
        try:
            await self._wait_ready()
        except Exception:
            await self._teardown(delete=True)
            raise
        self.started_at = time.monotonic()
        self._set_state("idle")

    async def _open(self) -> None:
        assert self.kernel_id is not None
        self._channels.attach(await self._client.connect(self.kernel_id, self._channels.session))

    async def _teardown(self, *, delete: bool = False) -> None:
        """Close the connection (and delete the remote kernel, best effort); idempotent."""
        reconnecting, self._reconnecting = self._reconnecting, None
        if reconnecting is not None and reconnecting is not asyncio.current_task() and not reconnecting.done():
            reconnecting.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reconnecting
        kernel_id = self.kernel_id if delete else None
        if delete:
            self.kernel_id = None
        await self._channels.close()
        if kernel_id is not None:
            try:
                await asyncio.wait_for(self._client.delete(kernel_id), DELETE_TIMEOUT)
            except (GatewayError, asyncio.TimeoutError) as exc:
                log.info("deleting kernel %s on the gateway: %s", kernel_id, exc)

    async def _wait_ready(self) -> None:
        """kernel_info round trips until the reply and its iopub status both arrive."""
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if self.state == "dead":
                raise KernelStartError(f"The {self.language} kernel on the gateway died while starting")
            msg_id, frame = self._channels.message("shell", "kernel_info_request", {})
            pending = self._register(msg_id, None, frame)
            self._channels.send(frame, msg_id)
            try:
                await asyncio.wait_for(pending.replied.wait(), 1.0)
                await asyncio.wait_for(asyncio.shield(pending.done), 0.5)
                if pending.saw_iopub:
                    return
            except asyncio.TimeoutError:
                pass
            finally:
                self._pending.pop(msg_id, None)
        raise KernelStartError(
            f"The {self.language} kernel on the gateway {self.url} did not answer within {READY_TIMEOUT:.0f} s"
        )

    async def restart(self, reason: str = "interrupted") -> None:
        """Restart the remote kernel (a new one when the gateway lost it); runs in flight end with `reason`."""
        after, self._after_death = self._after_death, None
        self._fail_pending(reason)
        self._set_state("restarting")
        self._self_restart = True
        try:
            if after == "autorestarted" and self._channels.connected:
                pass  # the gateway restarted the process already: only wait until it answers
            elif after == "gone" or self.kernel_id is None:
                await self._replace()
            else:
                try:
                    assert self.kernel_id is not None
                    await self._client.restart(self.kernel_id)
                except KernelGone:
                    await self._replace()
            await self._wait_ready()
        except (GatewayError, UnknownLanguage) as exc:
            self._set_state("dead", f"could not restart: {exc}")
            raise KernelStartError(f"The {self.language} kernel could not restart on the gateway: {exc}") from exc
        finally:
            self._self_restart = False
        self.started_at = time.monotonic()
        self._set_state("idle")

    async def _replace(self) -> None:
        """A new kernel on the gateway for this one (the old one is gone, or has to go)."""
        await self._teardown(delete=True)
        self._closing = False
        self.choice = await self._client.resolve(self.language)
        self.kernel_id = await self._client.start_kernel(self.choice.name)
        await self._open()

    async def shutdown(self, *, quietly: bool = False) -> None:
        """`quietly`: its end is not news (a dead kernel let go of as another starts: "stopped" then "starting"
        would read as a kernel started afresh because its settings changed)."""
        self._closing = True
        self._fail_pending("died")
        await self._teardown(delete=True)
        for task in list(self._tasks):
            task.cancel()
        if quietly:
            self.state = "stopped"
        else:
            self._set_state("stopped")

    async def interrupt(self) -> None:
        if self.kernel_id is None or self.state in ("dead", "stopped"):
            return
        try:
            await self._client.interrupt(self.kernel_id)
        except GatewayError as exc:
            # The caller escalates to a restart when the run does not stop; that one reports.
            log.warning("interrupting the %s kernel on the gateway failed: %s", self.language, exc)

    # ---- death ------------------------------------------------------------------------------------------------

    def _fail_pending(self, status: str, reason: str | None = None) -> None:
        self._executions.fail_all(status, {"reason": reason} if reason else {})

    def _died(self, after: str, reason: str, *, restart: bool = True) -> None:
        """The remote kernel (or our way to it) is gone: fail what waits, say why, let the pool restart."""
        if self._closing or self.state in ("dead", "stopped"):
            return
        log.warning("%s kernel on the gateway: %s", self.language, reason)
        self._after_death = after
        self._fail_pending("died", reason)
        if after == "gone":
            self._closing = True  # no reconnect to a kernel that is not there
            self._spawn(self._teardown())
        if restart and self._on_death is not None:
            self._set_state("dead", reason)
            self._death_task = self._spawn(self._on_death(self))
        else:
            self._set_state("dead", f"{reason}; the next run starts a new kernel")

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # ---- the connection -------------------------------------------------------------------------------------

    def _sent(self, msg_id: str, epoch: int) -> None:
        if (pending := self._pending.get(msg_id)) is not None:
            pending.sent_epoch = epoch

    def _connection_lost(self) -> None:
        if self._closing:
            return
        if self._reconnecting is None or self._reconnecting.done():
            self._set_state(self.state, f"the connection to the gateway {self.url} was lost; reconnecting")
            self._reconnecting = asyncio.create_task(self._reconnect(), name=f"gateway-reconnect-{self.language}")

    async def _reconnect(self) -> None:
        """Back to the same kernel while the gateway has it, for up to the connect timeout."""
        loop = asyncio.get_running_loop()
        window = max(self._client.config.connect_timeout, 1.0)
        deadline = loop.time() + window
        delay, last = 0.1, ""
        while not self._closing and self.kernel_id is not None:
            remaining = deadline - loop.time()
            try:
                if not await asyncio.wait_for(self._client.kernel_exists(self.kernel_id), max(remaining, 0.1)):
                    self._died("gone", f"the gateway {self.url} no longer has this kernel (the gateway restarted, "
                               f"or the kernel was shut down there); {STATE_LOST}")
                    return
                ws = await asyncio.wait_for(
                    self._client.connect(self.kernel_id, self._channels.session), max(remaining, 0.1)
                )
            except (GatewayUnreachable, asyncio.TimeoutError) as exc:
                last = str(exc) or "no answer"
            except GatewayError as exc:
                self._died("gone", f"reconnecting to the gateway failed: {exc}; {STATE_LOST}")
                return
            else:
                self._channels.attach(ws)
                self._set_state(self.state, "reconnected to the same kernel on the gateway; output resumes")
                self._probe()
                return
            if loop.time() + delay >= deadline:
                self._died(
                    "gone",
                    f"the connection to the gateway {self.url} was lost and could not be restored within "
                    f"{window:g} s ({last}); {STATE_LOST}",
                )
                return
            await asyncio.sleep(delay)  # backoff between attempts, not a poll of a hot path
            delay = min(delay * 2, 1.0)

    def _probe(self) -> None:
        """After a reconnect: the gateway replays what it buffered, then the reply to this kernel_info
        (the shell channel answers in order). An execute sent on the old connection that has had no
        message by then never reached the kernel: it is sent again."""
        epoch = self._channels.epoch
        msg_id, frame = self._channels.message("shell", "kernel_info_request", {})
        probe = self._register(msg_id, None, frame)

        def check(_f: asyncio.Future[ExecuteReply]) -> None:
            for other_id, pending in list(self._pending.items()):
                # Only what went out on an older connection (still in the outbox: it goes out anyway).
                if pending.done.done() or not 0 <= pending.sent_epoch < epoch or pending.reply is not None:
                    continue
                if not pending.saw_iopub:
                    self._channels.send(pending.frame, other_id)
                elif not pending.done.done():
                    pending.done.set_result(
                        ExecuteReply("error", {"reason": "the end of this run's output was lost with the connection"})
                    )

        probe.done.add_done_callback(check)
        probe.done.add_done_callback(lambda _f: self._pending.pop(msg_id, None))
        self._channels.send(frame, msg_id)

    # ---- messages ---------------------------------------------------------------------------------------------

    def _register(self, msg_id: str, sink: ExecutionSink | None, frame: str) -> Pending:
        return self._executions.register(msg_id, sink, frame)

    async def execute(
        self,
        code: str,
        sink: ExecutionSink | None,
        *,
        allow_stdin: bool = False,
        silent: bool = False,
        user_expressions: dict[str, str] | None = None,
    ) -> ExecuteReply:
        return await self.submit(code, sink, allow_stdin=allow_stdin, silent=silent, user_expressions=user_expressions)

    def submit(
        self,
        code: str,
        sink: ExecutionSink | None,
        *,
        allow_stdin: bool = False,
        silent: bool = False,
        user_expressions: dict[str, str] | None = None,
    ) -> asyncio.Future[ExecuteReply]:
        if self.kernel_id is None or self.state in ("dead", "stopped", "restarting"):
            raise KernelDied(f"The {self.language} kernel is not running")
        content = {
            "code": code,
            "silent": silent,
            "store_history": not silent,
            "user_expressions": user_expressions or {},
            "allow_stdin": allow_stdin,
            "stop_on_error": False,
        }
        msg_id, frame = self._channels.message("shell", "execute_request", content)
        pending = self._register(msg_id, sink, frame)
        self._channels.send(frame, msg_id)
        self._executions.forget_when_done(msg_id)
        return pending.done

    def send_comm(self, msg_type: str, content: dict[str, Any]) -> asyncio.Future[ExecuteReply]:
        """Send a comm_open or comm_msg of the server's own now (as `submit`); see KernelBackend."""
        if self.kernel_id is None or self.state in ("dead", "stopped", "restarting"):
            raise KernelDied(f"The {self.language} kernel is not running")
        msg_id, frame = self._channels.message("shell", msg_type, content)
        pending = self._executions.register(msg_id, None, frame, comm=True)
        self._channels.send(frame, msg_id)
        self._executions.forget_when_done(msg_id)
        return pending.done

    def _dispatch(self, msg: dict[str, Any]) -> None:
        channel = msg.get("channel") or ""
        header = msg.get("header") or {}
        msg_type = msg.get("msg_type") or header.get("msg_type", "")
        content = msg.get("content") or {}
        parent = msg.get("parent_header") or {}
        if self._executions.route(channel, msg_type, content, parent, header):
            return
        # Not an execution of ours: the gateway's own news, or another client's request.
        if channel == "iopub" and msg_type == "status":
            self._kernel_status(content.get("execution_state"), parent)
        elif channel == "iopub" and msg_type == "shutdown_reply" and parent.get("session") != self._channels.session:
            self._shutdown_seen(bool(content.get("restart")))

    def _spawn_input(self, sink: ExecutionSink, content: dict[str, Any], header: dict[str, Any]) -> None:
        self._spawn(self._answer_input(sink, content, header))

    def _kernel_status(self, state: str | None, parent: dict[str, Any]) -> None:
        """A status without an execution of ours: the gateway's own news, or another client's request."""
        if self._self_restart or self._closing:
            return
        if state == "restarting" and not parent:
            self._died("autorestarted", f"the kernel process on the gateway died and was restarted; {STATE_LOST}")
        elif state == "dead" and not parent:
            self._died("gone", f"the gateway reports the kernel dead (it could not restart it); {STATE_LOST}")
        elif state in ("busy", "idle") and self.state in ("busy", "idle"):
            self._set_state(state)

    def _shutdown_seen(self, restart: bool) -> None:
        """A shutdown we did not ask for: the gateway culled or deleted the kernel, or someone restarted it."""
        if self._self_restart or self._closing:
            return
        if restart:
            self._died("autorestarted", f"the kernel was restarted on the gateway by another client; {STATE_LOST}")
            return
        reason = f"the gateway {self.url} shut the kernel down (idle culling, or it was deleted there); {STATE_LOST}"
        # An idle kernel that was culled is not started again at once (that would defeat the culling).
        self._died("gone", reason, restart=bool(self._pending))

    async def _answer_input(self, sink: ExecutionSink, content: dict[str, Any], header: dict[str, Any]) -> None:
        try:
            value = await sink.on_input(str(content.get("prompt", "")), bool(content.get("password")))
        except Exception:
            log.exception("asking the editor for input failed")
            value = None
        if self.kernel_id is None or self._closing:
            return
        if value is None:
            await self.interrupt()  # as Ctrl-C would: input() ends with KeyboardInterrupt
            return
        _msg_id, frame = self._channels.message("stdin", "input_reply", {"value": value}, parent=header)
        self._channels.send(frame)
