"""Imports made in a thread of their own, beside the event loop's thread (jupyter_client and zmq, litellm,
httpx, watchdog, bashlex): `retrying_deadlocks`.

Two threads that import at once can each hold one module's import lock and wait for the other's. Python
breaks such a cycle by raising in one of them ("deadlock detected by _ModuleLock"); the module both need is
there a moment later, when the other thread's import ends. Seen with Python 3.11's `importlib.abc` and
`importlib.resources` (jupyter_client's `importlib.metadata` in one thread, certifi's `importlib.resources`
in another): the first kernel start failed and its run was reported as an error. Every import made in a
thread goes through `retrying_deadlocks`, whichever modules it reaches: no list of known cycles.
`off_the_loop` is the event loop's way to such an import (or to any blocking load) when it needs the result."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import time
from collections.abc import Callable
from typing import TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

ATTEMPTS = 5
# What httpx imports at its first request, not at its own import (-X importtime): httpcore's AutoBackend and
# anyio's asyncio backend, ~60-90 ms. A thread that makes an httpx client imports them too (`preload`).
HTTPX_AT_FIRST_REQUEST = ("httpcore._backends.anyio", "anyio._backends._asyncio")


def retrying_deadlocks(load: Callable[[], T]) -> T:
    """`load()`, again (up to ATTEMPTS times in all, a little later each time) when Python's import system
    broke a lock cycle with this thread's import. Any other error is raised at once. Blocking: for a
    thread's import, never the event loop's."""
    for attempt in range(ATTEMPTS):
        try:
            return load()
        except (ImportError, RuntimeError) as exc:
            if not is_import_deadlock(exc) or attempt == ATTEMPTS - 1:
                raise
            log.debug("import deadlock broken (%s); importing again", exc)
            time.sleep(0.05 * (attempt + 1))  # the other thread's import ends meanwhile
    raise AssertionError("unreachable")


def is_import_deadlock(exc: BaseException) -> bool:
    """Whether `exc` is the import system breaking a lock cycle (`_frozen_importlib._DeadlockError`, a
    RuntimeError; a module that re-raises it as an ImportError keeps the words)."""
    return "deadlock detected" in str(exc)


async def off_the_loop(load: Callable[[], T]) -> T:
    """`load()` (an import, a client built with what it imports) in a worker thread, through
    `retrying_deadlocks`: the event loop answers the editor meanwhile. For a load made once or rarely (a
    thread hop is ~0.1 ms)."""
    return await asyncio.to_thread(retrying_deadlocks, load)


def preload(names: tuple[str, ...]) -> None:
    """Import these modules now (in a thread: blocking); a layout of a package without one only loses the head
    start."""
    for name in names:
        with contextlib.suppress(ImportError):
            retrying_deadlocks(lambda name=name: importlib.import_module(name))
