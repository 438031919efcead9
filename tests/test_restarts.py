"""The start/backoff policy of kernels/restarts.py and the stderr seam of kernels/stderr.py, alone (the
storm end to end is tests/test_storms.py)."""

from __future__ import annotations

import asyncio
import os

import pytest

from interpreter_lsp.kernels import restarts
from interpreter_lsp.kernels.restarts import MAX_STARTS, StartFailures, start_failure
from interpreter_lsp.kernels.specs import KernelChoice
from interpreter_lsp.kernels.stderr import KernelStderr


def test_failed_starts_back_off_then_stop() -> None:
    failures = StartFailures()
    delays = [failures.failed() for _ in range(MAX_STARTS)]
    assert delays == [0.5, 1.0, None][:MAX_STARTS] and delays[-1] is None


def test_a_kernel_that_ran_well_starts_a_new_count(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(restarts.time, "monotonic", lambda: now[0])
    failures = StartFailures()
    failures.failed()
    failures.ready()
    now[0] += restarts.STABLE_AFTER + 1
    assert failures.failed() == restarts.FIRST_DELAY and failures.count == 1  # news again, not a streak
    failures.ready()
    now[0] += 1  # died a second after it was ready: the streak goes on
    failures.failed()
    assert failures.count == 2


def test_the_message_names_the_interpreter_the_module_the_exit_and_the_stderr() -> None:
    choice = KernelChoice("python", "python3", (), "kernel.python", interpreter="/opt/a venv/bin/python")
    stderr = "/opt/a venv/bin/python: No module named ipykernel_launcher"
    text = start_failure("python", choice, "the kernel process exited (exit code 1)", stderr)
    assert "/opt/a venv/bin/python exited before the kernel answered" in text
    assert "exit code 1" in text and "The module ipykernel_launcher is missing there" in text
    assert "    " + stderr in text and "-m pip install ipykernel" in text


async def test_a_kernels_stderr_tail_is_its_own_and_bounded() -> None:
    sink = KernelStderr("python")
    assert sink.fd is not None
    os.write(sink.fd, b"an old line\n")
    sink.mark()  # a new process: the tail is its own
    os.write(sink.fd, b"x" * 10_000 + b"\nfirst\nsecond\n")
    await asyncio.sleep(0)
    assert sink.tail(2) == "first\nsecond"
    assert "an old line" not in sink.tail(100) and len(sink.tail(100)) <= 4096
    sink.close()
    assert sink.fd is None
