"""Seeing a kernel's process exit from the event loop, without a thread.

Where the OS gives a descriptor that becomes readable when a process exits, the loop watches it as a reader:
a pidfd on Linux, a kqueue with EVFILT_PROC/NOTE_EXIT on macOS and the BSDs. Elsewhere (Windows), and when
the portable paths are forced (INTERPRETER_LSP_PORTABLE=1), the process is polled with `loop.call_later`
every POLL_INTERVAL seconds: a run on a kernel that dies ends within that bound, not after a timeout."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import select
from collections.abc import Callable
from typing import Literal, Protocol

from ..portable import portable_forced

log = logging.getLogger(__name__)

POLL_INTERVAL = 0.5

Mode = Literal["pidfd", "kqueue", "poll"]


class Process(Protocol):
    """What is needed of a process: subprocess.Popen has it."""

    pid: int

    def poll(self) -> int | None: ...


class ForeignProcess:
    """A process that is not our child (the editor: initialize's processId), for ProcessWatch. Only its pid
    is known; `poll` says whether it still runs (a zombie has exited), without reaping anything."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def poll(self) -> int | None:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return 0
        except PermissionError:
            pass  # it exists (another user's)
        try:
            with open(f"/proc/{self.pid}/stat", "rb") as stat:
                if stat.read().rsplit(b")", 1)[-1].split()[0] == b"Z":
                    return 0
        except (OSError, IndexError):
            pass
        return None


def available_modes() -> list[Mode]:
    """The ways this OS offers, best first ("poll" always works)."""
    modes: list[Mode] = []
    if hasattr(os, "pidfd_open"):
        modes.append("pidfd")
    if hasattr(select, "kqueue"):
        modes.append("kqueue")
    modes.append("poll")
    return modes


def default_mode() -> Mode:
    return "poll" if portable_forced() else available_modes()[0]


class ProcessWatch:
    """Calls `on_exit` once, on the loop, when `process` exits (or at once if it already has). `close()`
    stops watching; it is safe from inside `on_exit`."""

    def __init__(self, process: Process, on_exit: Callable[[], None], mode: Mode | None = None) -> None:
        self._process = process
        self._on_exit = on_exit
        self._loop = asyncio.get_running_loop()
        self._fd: int | None = None
        self._kqueue: select.kqueue | None = None  # type: ignore[name-defined,unused-ignore]
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False
        self.mode: Mode = mode or default_mode()
        if process.poll() is not None:
            # Already gone (and reaped: its pid may be another process's by now): tell at once.
            self._loop.call_soon(self._fire)
            return
        try:
            if self.mode == "pidfd":
                self._watch_pidfd()
            elif self.mode == "kqueue":
                self._watch_kqueue()
        except ProcessLookupError:
            # Gone before it could be watched: tell at once (not from inside the constructor).
            self._loop.call_soon(self._fire)
            return
        except OSError as exc:
            log.warning("cannot watch process %s with %s (%s); polling it instead", process.pid, self.mode, exc)
            self.mode = "poll"
        if self.mode == "poll":
            self._timer = self._loop.call_later(POLL_INTERVAL, self._poll)

    # ---- the three ways ------------------------------------------------------------------------------

    def _watch_pidfd(self) -> None:
        self._fd = os.pidfd_open(self._process.pid)  # type: ignore[attr-defined,unused-ignore]
        self._loop.add_reader(self._fd, self._fire)

    def _watch_kqueue(self) -> None:
        kq = select.kqueue()  # type: ignore[attr-defined,unused-ignore]
        event = select.kevent(  # type: ignore[attr-defined,unused-ignore]
            self._process.pid,
            filter=select.KQ_FILTER_PROC,  # type: ignore[attr-defined,unused-ignore]
            flags=select.KQ_EV_ADD | select.KQ_EV_ONESHOT,  # type: ignore[attr-defined,unused-ignore]
            fflags=select.KQ_NOTE_EXIT,  # type: ignore[attr-defined,unused-ignore]
        )
        try:
            kq.control([event], 0, 0)  # ESRCH (ProcessLookupError) when the process is already gone
        except BaseException:
            kq.close()
            raise
        self._kqueue = kq
        # A kqueue's own descriptor is readable while it holds an event: the loop's selector can wait on it.
        self._loop.add_reader(kq.fileno(), self._kqueue_ready)

    def _kqueue_ready(self) -> None:
        if self._kqueue is not None and self._kqueue.control(None, 1, 0):
            self._fire()

    def _poll(self) -> None:
        self._timer = None
        if self._closed:
            return
        if self._process.poll() is not None:
            self._fire()
        else:
            self._timer = self._loop.call_later(POLL_INTERVAL, self._poll)

    # ---- end -----------------------------------------------------------------------------------------

    def _fire(self) -> None:
        if self._closed:
            return
        self.close()
        self._on_exit()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._fd is not None:
            with contextlib.suppress(Exception):
                self._loop.remove_reader(self._fd)
            os.close(self._fd)
            self._fd = None
        if self._kqueue is not None:
            with contextlib.suppress(Exception):
                self._loop.remove_reader(self._kqueue.fileno())
            self._kqueue.close()
            self._kqueue = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
