"""variable_undo.VariableUndo's choices that no end-to-end run can pin to one loop iteration."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from interpreter_lsp.kernels import snapshots
from interpreter_lsp.kernels.backend import ExecuteReply
from interpreter_lsp.variable_undo import TAKING, VariableUndo, _Snap


class _Kernel:
    language = "python"

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def submit(self, code: str, sink: Any, **kwargs: Any) -> asyncio.Future[ExecuteReply]:
        self.requests.append({"code": code, **kwargs})
        return asyncio.get_running_loop().create_future()


class _Pool:
    def __init__(self, kernel: _Kernel) -> None:
        self.kernel = kernel

    def existing(self, language: str) -> _Kernel:
        return self.kernel


def _answered(value: dict[str, Any]) -> ExecuteReply:
    text = repr(json.dumps(value))  # how a user expression's str comes back: its repr, as text/plain
    return ExecuteReply("ok", {"user_expressions": {"r": {"status": "ok", "data": {"text/plain": text}}}})


async def test_a_snapshot_answered_in_this_loop_iteration_serves_the_run_without_a_second_one() -> None:
    """The snapshot's reply came in the same loop iteration as the run's turn: its done callback has not run
    yet, so it still reads "being taken". Judged by its answer, it serves; read as failed, the run sent a
    second snapshot request and waited for it (~14 ms of a print(1))."""
    kernel = _Kernel()
    undo = VariableUndo(_Pool(kernel))  # type: ignore[arg-type]
    done: asyncio.Future[ExecuteReply] = asyncio.get_running_loop().create_future()
    snap = _Snap(kernel, "s1", TAKING, done)  # type: ignore[arg-type]
    done.set_result(_answered({}))  # its callbacks are scheduled, not run
    undo._ahead[id(kernel)] = snap
    await undo.before_run("r-1", kernel)  # type: ignore[arg-type]
    assert kernel.requests == []
    assert undo._snaps["r-1"] is snap


async def test_a_snapshot_that_answered_an_error_is_replaced_before_the_run() -> None:
    kernel = _Kernel()
    undo = VariableUndo(_Pool(kernel))  # type: ignore[arg-type]
    done: asyncio.Future[ExecuteReply] = asyncio.get_running_loop().create_future()
    snap = _Snap(kernel, "s1", TAKING, done)  # type: ignore[arg-type]
    done.set_result(_answered({"error": "fork failed"}))
    undo._ahead[id(kernel)] = snap
    task = asyncio.create_task(undo.before_run("r-1", kernel))  # type: ignore[arg-type]
    await asyncio.sleep(0)  # one step: the new request is sent before any await
    assert len(kernel.requests) == 1 and kernel.requests[0]["silent"] is True
    assert undo._snaps["r-1"] is not snap
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_a_kept_snapshot_gets_no_warm_up_and_a_forked_one_does() -> None:
    """A snapshot the kernel kept as a pickle left no copy-on-write faults to pay: no warm-up request follows
    it. A fork's answer (no `kept`) is followed by one, ahead of the next run."""
    for answer, warm_ups in (({"ms": 0.1, "kept": True}, 0), ({"ms": 3.0}, 1)):
        kernel = _Kernel()
        undo = VariableUndo(_Pool(kernel))  # type: ignore[arg-type]
        undo._installed = kernel  # type: ignore[assignment]
        sent = undo.after_run("r-1", kernel, None)  # type: ignore[arg-type]
        assert sent is not None and len(kernel.requests) == 1
        sent.set_result(_answered(answer))
        await asyncio.sleep(0)  # its done callback
        warm = [r for r in kernel.requests[1:] if "warm()" in r["code"]]
        assert len(warm) == warm_ups, kernel.requests
        assert undo._ahead[id(kernel)].why_not is None


class _NoComms(_Kernel):
    """A python kernel without ipykernel's comm manager: `serve()` fails in it."""

    async def execute(self, code: str, sink: Any, **kwargs: Any) -> ExecuteReply:
        self.requests.append({"code": code, **kwargs})
        if code == snapshots.SERVE:
            return ExecuteReply("error", {"status": "error", "ename": "AttributeError", "evalue": "comm_manager"})
        return ExecuteReply("ok", {"status": "ok"})  # the install

    def send_comm(self, msg_type: str, content: dict[str, Any]) -> asyncio.Future[ExecuteReply]:
        raise AssertionError("no comm is opened in a kernel that cannot serve one")


async def test_a_kernel_without_comms_keeps_execute_requests() -> None:
    """`serve()` failed: no comm is opened, and the snapshot after a run goes as a silent execute request
    whose user expressions carry the snapshot and the variables."""
    kernel = _NoComms()
    undo = VariableUndo(_Pool(kernel))  # type: ignore[arg-type]
    await undo.ready(kernel)  # type: ignore[arg-type]
    assert undo.installed(kernel)  # type: ignore[arg-type]
    sent = undo.after_run("r-1", kernel, None)  # type: ignore[arg-type]
    assert sent is not None
    request = kernel.requests[-1]
    assert request["silent"] is True and sorted(request["user_expressions"]) == ["r", "vars"], request
    assert ".snap(" in request["user_expressions"]["r"] and ".variables(" in request["user_expressions"]["vars"]


async def test_the_kernels_first_snapshot_carries_its_variables() -> None:
    """Once a python kernel is ready, its first snapshot asks the variables too (one request): a first
    chat, before any run, finds them listed and asks the kernel nothing."""
    kernel = _NoComms()
    undo = VariableUndo(_Pool(kernel))  # type: ignore[arg-type]
    sent = await undo.ready(kernel)  # type: ignore[arg-type]
    assert sent is not None
    request = kernel.requests[-1]
    assert sorted(request["user_expressions"]) == ["r", "vars"], request
    assert ".snap(" in request["user_expressions"]["r"]


async def _calls_pair() -> tuple[snapshots.Calls, Any]:
    """A Calls over one end of a socket pair; the other end plays the kernel (snapshot_kernel.listen)."""
    import socket

    ours, theirs = socket.socketpair()
    reader, writer = await asyncio.open_unix_connection(sock=ours)
    theirs.setblocking(False)
    return snapshots.Calls(reader, writer), theirs


async def _request(kernel_end: Any) -> list[Any]:
    loop = asyncio.get_running_loop()
    size = int.from_bytes(await loop.sock_recv(kernel_end, 4), "big")
    data = b""
    while len(data) < size:
        data += await loop.sock_recv(kernel_end, size - len(data))
    return json.loads(data)


def _frame(value: Any) -> bytes:
    body = json.dumps(value).encode()
    return len(body).to_bytes(4, "big") + body


async def test_calls_over_the_kernels_socket_are_answered_in_order() -> None:
    calls, kernel_end = await _calls_pair()
    loop = asyncio.get_running_loop()
    try:
        first = calls.submit({"vars": ("variables", None), "r": ("snap", "s1")})
        second = calls.submit({"r": ("snap", "s2")})
        assert await _request(kernel_end) == [["vars", "variables", None], ["r", "snap", "s1"]]
        assert await _request(kernel_end) == [["r", "snap", "s2"]]
        answer = {"status": "ok", "data": {"text/plain": repr(json.dumps({"ms": 0.1}))}}
        await loop.sock_sendall(kernel_end, _frame({"r": answer}) + _frame({"r": {"status": "error", "ename": "E"}}))
        got = await asyncio.wait_for(first, 10)
        assert got.status == "ok" and snapshots.answer(got) == {"ms": 0.1}
        with contextlib.suppress(snapshots.SnapshotError):
            snapshots.answer(await asyncio.wait_for(second, 10))
            raise AssertionError("an error answer read as a good one")
    finally:
        calls.close()
        kernel_end.close()


async def test_a_kernel_that_garbles_its_socket_gets_the_calls_failed_and_the_socket_closed() -> None:
    """Kernel code may write anything on the socket: a frame announcing more than MAX_ANSWER (never read into
    memory), or JSON that is no answer. What waits fails with a reason, the socket closes, and the next calls
    go elsewhere (variable_undo falls back to the comm)."""
    loop = asyncio.get_running_loop()
    for garbage, reason in (
        ((snapshots.MAX_ANSWER + 1).to_bytes(4, "big"), "bytes"),
        (_frame(["not", "answers"]), "other than answers"),
        (b"\x00\x00\x00\x05{{{{{", "failed"),
        (b"", "closed"),
    ):
        calls, kernel_end = await _calls_pair()
        try:
            waiting = calls.submit({"r": ("snap", "s1")})
            await _request(kernel_end)
            if garbage:
                await loop.sock_sendall(kernel_end, garbage)
            else:
                kernel_end.close()
            reply = await asyncio.wait_for(waiting, 10)
            assert reply.status == "error" and reason in reply.content["reason"], (garbage, reply)
            assert calls.closed
            try:
                calls.submit({"r": ("snap", "s2")})
                raise AssertionError("a closed socket took a call")
            except snapshots.KernelDied:
                pass
        finally:
            calls.close()
            kernel_end.close()
