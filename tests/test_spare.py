"""Verification's spare kernel (kernels/spare.py) with real kernels: taken only for the settings it was
started for, started and idle when taken, shut down when its time is up, when retired, and at close."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

from harness import wait_exited
from interpreter_lsp.kernels.kernel import Kernel
from interpreter_lsp.kernels.spare import Fresh, Spares
from interpreter_lsp.kernels.specs import choose_kernel

START_WAIT = 120.0  # a kernel start on a busy 2-core machine


def _maker(tmp_path: Path):
    root = tmp_path / "ws"
    root.mkdir(exist_ok=True)
    made: list[Fresh] = []

    def make() -> Fresh:
        runtime_dir = tmp_path / f"verify-{uuid.uuid4().hex[:8]}"
        states: list[str] = []
        kernel = Kernel(choose_kernel("python", root, tmp_path / "specs"), cwd=root, runtime_dir=runtime_dir,
                        env=dict(os.environ), on_state=lambda state, _message: states.append(state))
        kernel.states_seen = states  # type: ignore[attr-defined]
        made.append(Fresh(kernel, runtime_dir, None))
        return made[-1]

    return make, made


def _gone(fresh: Fresh) -> str:
    return f"the kernel in {fresh.runtime_dir.name} still runs"


async def test_a_spare_is_taken_started_for_its_key_only(tmp_path: Path) -> None:
    make, made = _maker(tmp_path)
    spares = Spares()
    try:
        spares.prepare("settings A", make)
        spares.prepare("settings A", make)  # one is there for them already: no second start
        assert len(made) == 1
        taken = await spares.take("settings A")
        assert taken is made[0] and taken.started and taken.kernel.state == "idle"
        pid = taken.kernel.pid()
        assert pid is not None
        os.kill(pid, 0)  # it runs
        assert await spares.take("settings A") is None  # taken: there is none until the next prepare
        spares.retire(taken)
        await wait_exited([pid], START_WAIT, lambda _pid: _gone(taken))

        spares.prepare("settings A", make)
        assert await spares.take("settings B") is None  # started for other settings: never used, shut down
        assert made[1].kernel.state in ("starting", "idle", "stopped")
        await spares.close()
        assert made[1].kernel.state == "stopped" and not made[1].runtime_dir.exists()
    finally:
        await spares.close()


async def test_a_spare_goes_when_its_time_is_up_and_at_close(tmp_path: Path) -> None:
    make, made = _maker(tmp_path)
    spares = Spares(keep=2.0)
    try:
        spares.prepare("settings", make)
        started = await spares.take("settings")  # waits for the start
        assert started is not None
        spares.retire(started)
        spares.prepare("settings", make)
        # Its time passes while nobody takes it: shut down (started or not by then), its directory removed.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + START_WAIT
        spare = made[1]
        # A start slower than its time (a busy machine) is stopped mid-way: the same end.
        seen = spare.kernel.states_seen  # type: ignore[attr-defined]
        while "starting" not in seen or spare.runtime_dir.exists() or spare.kernel.state != "stopped":
            assert loop.time() < deadline, spare.kernel.state
            await asyncio.sleep(0.05)  # nothing announces it: looked at again, within a generous bound
        assert await spares.take("settings") is None
        spares.prepare("settings", make)
    finally:
        await spares.close()
    assert all(f.kernel.state == "stopped" for f in made) and not any(f.runtime_dir.exists() for f in made)
