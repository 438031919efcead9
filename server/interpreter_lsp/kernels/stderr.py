"""A local kernel's stderr: a pipe of its own, never the server's stderr (the editor's log, which kernel
code must not hold or write to), read on the event loop.

Its lines go to the server's log (INFO, redacted like every log line), and the last TAIL_BYTES of the
current process are kept, so that a kernel that exits can say why in its own words ("No module named
ipykernel_launcher"): `tail()` first reads what the pipe still holds, so nothing written before the exit is
missed. One seam for every local kernel, sandboxed or not: the write end (`fd`) is what the kernel's
process gets as fd 2 (through the launcher and bubblewrap alike); the server keeps it open for the kernel's
life, as jupyter_client starts a restarted kernel with the same arguments.

Where the loop cannot watch a pipe (Windows' proactor loop) the kernel inherits the server's stderr, as
before, and `tail()` is empty."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os

log = logging.getLogger(__name__)

TAIL_BYTES = 4096
_READ = 65536


class KernelStderr:
    def __init__(self, language: str) -> None:
        self._language = language
        self._tail = bytearray()
        self._partial = b""
        self._read_fd: int | None = None
        self.fd: int | None = None  # for Popen's stderr=; None: inherit the server's
        loop = asyncio.get_running_loop()
        read_fd, write_fd = os.pipe()  # not inheritable (PEP 446): only the kernel gets it, as its fd 2
        try:
            os.set_blocking(read_fd, False)
            loop.add_reader(read_fd, self._drain)
        except (NotImplementedError, OSError, ValueError) as exc:
            os.close(read_fd)
            os.close(write_fd)
            log.info("the %s kernel's stderr is the server's: %s", language, exc)
            return
        self._loop = loop
        self._read_fd, self.fd = read_fd, write_fd

    def _drain(self) -> None:
        if self._read_fd is None:
            return
        for _ in range(16):  # a flood is read in bounded slices: the loop serves others in between
            try:
                data = os.read(self._read_fd, _READ)
            except BlockingIOError:
                return
            except OSError as exc:
                log.info("reading the %s kernel's stderr failed: %s", self._language, exc)
                data = b""
            if not data:  # every holder of the write end closed it (only after close() here)
                self._loop.remove_reader(self._read_fd)
                return
            self._tail += data
            del self._tail[:-TAIL_BYTES]
            self._log(data)

    def _log(self, data: bytes) -> None:
        if not log.isEnabledFor(logging.INFO):
            return
        *lines, self._partial = (self._partial + data).split(b"\n")
        self._partial = self._partial[-TAIL_BYTES:]
        for line in lines:
            log.info("%s kernel stderr: %s", self._language, line.decode("utf-8", "replace").rstrip())

    def mark(self) -> None:
        """A new process starts: the tail is its own from now on."""
        self._drain()
        self._tail.clear()
        self._partial = b""

    def tail(self, lines: int = 8) -> str:
        """The last `lines` lines the current process wrote (at most TAIL_BYTES), as text."""
        self._drain()
        text = self._tail.decode("utf-8", "replace")
        return "\n".join(line.rstrip() for line in text.strip().splitlines()[-lines:])

    def close(self) -> None:
        if self._read_fd is not None:
            with contextlib.suppress(Exception):
                self._loop.remove_reader(self._read_fd)
            os.close(self._read_fd)
            self._read_fd = None
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
