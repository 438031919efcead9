"""Two views of one run's output. The user gets all of it, coalesced: stream text is batched every
~40 ms or 8 KB so a flood of lines is a handful of notifications, never a flood, and nothing is dropped.
The model gets a bounded head + tail text with a note of what was cut.

Secrets are masked where text leaves the server (the one redacting send), piece by piece: a key printed
in two pieces would pass unmasked. So a stream's last word (text after its last whitespace, up to
CARRY_MAX characters) is held back until more text arrives or CARRY_SECONDS pass, and leaves joined with
what follows it."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

from .agent.images import label_problem
from .protocol import OUTPUT, OutputParams, to_wire

FLUSH_SECONDS = 0.04
FLUSH_BYTES = 8192
CARRY_SECONDS = 0.5
CARRY_MAX = 512

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


class HeadTail:
    """Keeps the first and last `limit // 2` characters of everything appended; counts the rest."""

    def __init__(self, limit: int) -> None:
        self._half = max(limit // 2, 1)
        self._head: list[str] = []
        self._head_len = 0
        self._tail = ""
        self.total = 0

    def append(self, text: str) -> None:
        if not text:
            return
        self.total += len(text)
        room = self._half - self._head_len
        if room > 0:
            self._head.append(text[:room])
            self._head_len += min(room, len(text))
            text = text[room:]
        if text:
            self._tail = (self._tail + text)[-self._half :]

    def text(self) -> str:
        head = "".join(self._head)
        cut = self.total - len(head) - len(self._tail)
        if cut <= 0:
            return head + self._tail
        return f"{head}\n[… {cut} characters cut from the middle of the output …]\n{self._tail}"


_EXIT_STATUS = re.compile(r"[0-9]+")


def error_text(ename: str, evalue: str, traceback: list[str]) -> str:
    """What a person (and the model) reads for a kernel's error: its traceback as plain text; without one,
    `name: value`. A shell command that failed has neither a traceback nor a name (bash_kernel sends the exit
    status as the value), so it reads `exit status N`, not `: N`. The clients rebuild the same text from a
    notebook record after a reload (clients' error_text); the record itself keeps what the kernel sent."""
    text = strip_ansi("\n".join(traceback))
    if text:
        return text
    if ename:
        return f"{ename}: {evalue}" if evalue else ename
    if _EXIT_STATUS.fullmatch(evalue):
        return f"exit status {evalue}"
    return evalue or "Error"


def _plain_text(data: dict[str, Any]) -> str:
    text = data.get("text/plain")
    if isinstance(text, list):
        text = "".join(text)
    if isinstance(text, str):
        return text
    kinds = ", ".join(sorted(data)) or "nothing"
    return f"[display data: {kinds}]"


class RunOutput:
    """One run's output stream: numbered notifications (seq from 0, no gaps) and the model's view."""

    def __init__(self, run_id: str, send: Callable[[str, dict[str, Any]], None], model_limit: int) -> None:
        self.run_id = run_id
        self._send = send
        self._seq = 0
        self._buffer: list[str] = []
        self._buffer_len = 0
        self._buffer_kind: str | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._carry = ""  # the last word of the stream, held back (module docstring)
        self._carry_timer: asyncio.TimerHandle | None = None
        self.model_view = HeadTail(model_limit)
        self.error: tuple[str, str] | None = None

    def _emit(self, params: OutputParams) -> None:
        self._seq += 1
        self._send(OUTPUT, to_wire(params))

    def stream(self, name: str, text: str) -> None:
        kind = "stderr" if name == "stderr" else "stdout"
        if self._buffer_kind not in (None, kind):
            self.flush()
        self._buffer_kind = kind
        self._buffer.append(text)
        self._buffer_len += len(text)
        self.model_view.append(strip_ansi(text))
        if self._buffer_len >= FLUSH_BYTES:
            self._flush(hold=True)
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(FLUSH_SECONDS, self._flush, True)

    def flush(self) -> None:
        """Send everything buffered, the held-back word included."""
        self._flush(hold=False)

    def _flush(self, hold: bool) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._carry_timer is not None:
            self._carry_timer.cancel()
            self._carry_timer = None
        if not self._buffer and not self._carry:
            self._buffer_kind = None
            return
        text = self._carry + "".join(self._buffer)
        kind = self._buffer_kind or "stdout"
        self._buffer.clear()
        self._buffer_len = 0
        self._carry = ""
        if hold:
            cut = max(text.rfind(c) for c in " \t\n\r") + 1
            if len(text) - cut <= CARRY_MAX:
                text, self._carry = text[:cut], text[cut:]
        if self._carry:
            self._carry_timer = asyncio.get_running_loop().call_later(CARRY_SECONDS, self._flush, False)
        else:
            self._buffer_kind = None
        if text:
            self._emit(OutputParams(self.run_id, self._seq, kind, text=text))  # type: ignore[arg-type]

    def rich(self, kind: str, data: dict[str, Any]) -> None:
        """execute_result ("result") or display_data ("display"): the whole MIME bundle."""
        self.flush()
        text = _plain_text(data)
        self.model_view.append(text if text.endswith("\n") else text + "\n")
        self._emit(
            OutputParams(self.run_id, self._seq, kind, text=text, data=data)  # type: ignore[arg-type]
        )
        # Kernel output is data: an image that is not what its label says is never decoded; say so.
        for mime in ("image/png", "image/jpeg"):
            if (problem := label_problem(mime, data.get(mime))) is not None:
                self.note("stderr", problem)

    def exception(self, ename: str, evalue: str, traceback: list[str]) -> None:
        self.flush()
        text = error_text(ename, evalue, traceback)
        self.error = (ename, evalue)
        self.model_view.append(text + "\n")
        self._emit(
            OutputParams(self.run_id, self._seq, "error", text=text, ename=ename, evalue=evalue, traceback=traceback)
        )

    def note(self, kind: str, text: str) -> None:
        """Text the server adds (e.g. "input is not available"), shown like stream output."""
        self.flush()
        self.model_view.append(text + "\n")
        self._emit(OutputParams(self.run_id, self._seq, kind, text=text))  # type: ignore[arg-type]

    def on_iopub(self, msg_type: str, content: dict[str, Any]) -> None:
        if msg_type == "stream":
            self.stream(str(content.get("name", "stdout")), str(content.get("text", "")))
        elif msg_type == "execute_result":
            self.rich("result", content.get("data", {}))
        elif msg_type in ("display_data", "update_display_data"):
            self.rich("display", content.get("data", {}))
        elif msg_type == "error":
            self.exception(
                str(content.get("ename", "Error")),
                str(content.get("evalue", "")),
                [str(line) for line in content.get("traceback", [])],
            )
