"""Fresh kernels for verification (verify.py): one started ahead, and the used ones shut down after the answer.

A verified export re-runs the notebook in a kernel nobody has run anything in. Starting one takes ~0.4 s here
(an IPython import), more than a small session's whole compute, and shutting it down ~0.1 s more. So, once
a verification has been asked for, the next one's kernel is started while the user reads the verdicts (the
usual next step is to fix a cell and verify again), and a used kernel is shut down after the answer has
gone, not before it. A start includes the kernel's setup (`start_fresh`: the figures hook every python kernel
of the session has, one more round trip), so the verification that takes the spare waits for neither. The
spare is kept at most KEEP seconds (an idle kernel's memory goes back then), and
only for the settings it was started with: `take` with another key (sandbox, environment, interpreter,
limits changed) shuts it down and answers None; so does a spare that failed to start or has died. Nothing
but that setup runs in it before it is taken: it is as fresh as one started at that moment.

Every kernel this module starts or shuts down is an asyncio task it holds; `close` ends them all (the server's
shutdown)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import figures
from .kernel import Kernel

log = logging.getLogger(__name__)

KEEP = 600.0  # seconds a spare waits to be taken before its memory goes back
START_TIMEOUT = 120.0  # a start on a busy machine; past it the spare is given up (the next start tries again)


@dataclass
class Fresh:
    """A fresh kernel and where it lives; `started` once its start has finished."""

    kernel: Kernel
    runtime_dir: Path
    sandbox: str | None
    started: bool = False


async def start_fresh(kernel: Kernel) -> None:
    """Start a fresh python kernel and set it up as the session's kernels are (the figures hook), nothing
    more: verification's kernel, started ahead here or by the verification that found no spare."""
    await kernel.start()
    await figures.register(kernel)


Make = Callable[[], Fresh]  # a new, unstarted fresh kernel (KernelPool.fresh with a runtime directory of its own)


class Spares:
    def __init__(self, *, keep: float = KEEP) -> None:
        self._keep = keep
        self._spare: tuple[object, Fresh, asyncio.Task[bool]] | None = None  # (key, kernel, its start)
        self._expiry: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False

    def prepare(self, key: object, make: Make) -> None:
        """Start a spare for the settings `key` now, in the background (nothing if one is there for them)."""
        if self._closed:
            return
        if self._spare is not None:
            if self._spare[0] == key:
                return
            self.discard()
        try:
            fresh = make()
        except Exception as exc:  # e.g. the sandbox asked for but bubblewrap gone: the next export says why
            log.info("no spare kernel for the next verification: %s", exc)
            return
        task = self._track(self._start(fresh))
        self._spare = (key, fresh, task)
        self._expiry = asyncio.get_running_loop().call_later(self._keep, self.discard)

    async def take(self, key: object) -> Fresh | None:
        """The spare, started, if it was started for `key` (waiting for a start under way); else None."""
        spare, self._spare = self._spare, None
        self._cancel_expiry()
        if spare is None or self._closed:
            return None
        spare_key, fresh, task = spare
        if spare_key != key:
            self._track(self._shutdown(fresh, task))
            return None
        try:
            ok = await asyncio.shield(task)
        except asyncio.CancelledError:
            # The verification was cancelled while the spare started: it is still fresh, keep it.
            if not task.done() and not self._closed and self._spare is None:
                self._spare = spare
                self._expiry = asyncio.get_running_loop().call_later(self._keep, self.discard)
            else:
                self.retire(fresh)
            raise
        if not ok or fresh.kernel.state != "idle":
            self.retire(fresh)
            return None
        return fresh

    def retire(self, fresh: Fresh) -> asyncio.Task[Any]:
        """Shut `fresh` down in the background and remove its directory; the task doing it."""
        return self._track(self._shutdown(fresh))

    def discard(self) -> None:
        """Shut the spare down (its time is up, or the settings it was started for changed)."""
        spare, self._spare = self._spare, None
        self._cancel_expiry()
        if spare is not None:
            self._track(self._shutdown(spare[1], spare[2]))

    async def close(self) -> None:
        self._closed = True
        self.discard()
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    # ---- internals ---------------------------------------------------------------------------------------

    async def _start(self, fresh: Fresh) -> bool:
        try:
            await asyncio.wait_for(start_fresh(fresh.kernel), START_TIMEOUT)
        except Exception as exc:  # the verification that takes it starts its own, and says why if that fails
            log.info("the spare kernel for verification did not start: %s", exc)
            return False
        fresh.started = True
        return True

    async def _shutdown(self, fresh: Fresh, start: asyncio.Task[bool] | None = None) -> None:
        if start is not None and not start.done():
            start.cancel()  # a start under way stops first (Kernel.start ends what it made)
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await start
        with contextlib.suppress(Exception):
            await fresh.kernel.shutdown()
        await asyncio.to_thread(shutil.rmtree, fresh.runtime_dir, True)

    def _track(self, coroutine: Any) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # logged where they happen
        return task

    def _cancel_expiry(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
