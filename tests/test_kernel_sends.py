"""Nothing on the event loop can block on zmq (issue 18, point 6). jupyter_client sends synchronously on the
socket underneath its asyncio one, so a kernel that reads nothing (stopped, stuck, or gone while a start
kept asking it for kernel_info) once filled a queue and the next send blocked the server's only thread
(status, interrupt and restart never answered). Every socket of a kernel is made with SNDTIMEO 0: a send
that would wait fails at once, and each send site says what happened. A real kernel, really stopped."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from interpreter_lsp.kernels.kernel import Kernel, KernelDied
from interpreter_lsp.kernels.specs import choose_kernel

SENDS = 6000  # more than every queue between us and a kernel that reads nothing holds (HWM 1000 each, buffers)


@pytest.fixture
async def kernel(tmp_path: Path):
    root, runtime, specs = tmp_path / "ws", tmp_path / "rt", tmp_path / "specs"
    for d in (root, runtime, specs):
        d.mkdir()
    runtime.chmod(0o700)
    k = Kernel(
        choose_kernel("python", root, specs),
        cwd=root,
        runtime_dir=runtime / "k",
        env=dict(os.environ),
        on_state=lambda state, message: None,
    )
    await k.start()
    try:
        yield k
    finally:
        await k.shutdown()


async def test_every_socket_of_a_kernel_sends_without_waiting(kernel: Kernel) -> None:
    import zmq

    sockets = list(kernel._context._sockets)
    assert len(sockets) >= 3  # shell, iopub, stdin (and the stdin monitor, the control socket)
    assert all(sock.getsockopt(zmq.SNDTIMEO) == 0 for sock in sockets)


async def test_sends_to_a_kernel_that_reads_nothing_never_block_the_loop(kernel: Kernel) -> None:
    pid = kernel.pid()
    assert pid is not None
    group = os.getpgid(pid)
    assert group != os.getpgid(0)  # its own process group, not ours
    os.killpg(group, signal.SIGSTOP)
    # Were a send to block, the loop could not end it: a timer thread lets the kernel go on after a while,
    # so that such a send ends, and the test fails on the time it took instead of hanging.
    rescue = threading.Timer(30, os.killpg, (group, signal.SIGCONT))
    rescue.start()
    refused: list[str] = []
    gaps: list[float] = []
    try:
        started = last = time.monotonic()
        for i in range(SENDS):
            try:
                kernel.submit("pass", None)
            except KernelDied as exc:
                refused.append(str(exc))
            if i % 50 == 0:
                await asyncio.sleep(0)
                now = time.monotonic()
                gaps.append(now - last)
                last = now
        elapsed = time.monotonic() - started
        await kernel.interrupt()  # SIGINT to a stopped kernel: sent, and nothing waits
    finally:
        rescue.cancel()
        os.killpg(group, signal.SIGCONT)
    print(f"{SENDS} sends in {elapsed:.2f} s, {len(refused)} refused at once; longest loop stall {max(gaps):.3f} s")
    assert refused, "every send was queued: the queues never filled, so this proved nothing"
    assert "not taking requests" in refused[0] and "Interrupt or restart it" in refused[0]
    assert elapsed < 10 and max(gaps) < 2, (elapsed, max(gaps))
