"""Append-only, crash-safe persistence of a workspace's conversation: one JSON event per line in the
user's state directory. Each event is written whole and flushed to the OS at once, so a crash (even
kill -9) loses at most the event in flight; a torn last line is skipped when reading back."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import userdirs

log = logging.getLogger(__name__)


def state_dir() -> Path:
    return userdirs.required("XDG_STATE_HOME", ".local/state") / "interpreter-lsp"


def history_file(root: Path) -> Path:
    digest = hashlib.sha256(str(root).encode()).hexdigest()[:16]
    return state_dir() / "history" / f"{root.name or 'root'}-{digest}.jsonl"


def replay(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The live conversation from the event log: `reset` clears it, `undo` drops the last user message
    (or the user's own run it names) and what followed, but for kernel restarts and deaths (see cut);
    `redo` brings back what the last undo dropped (see Redo)."""
    live: list[dict[str, Any]] = []
    redo = Redo()
    for event in events:
        kind = event.get("type")
        if kind == "reset":
            live.clear()
            redo.clear()
        elif kind == "undo":
            before = list(live)
            drop_undone(live, event.get("runId"))
            if len(live) != len(before):
                redo.undone(before, live)
        elif kind == "redo":
            if redo.can():
                live, _brought, _keep = redo.redo(live)
        else:
            live.append(event)
            redo.seen(event)
    return live


KEEPS_REDO = frozenset({"note", "kernel"})  # news that does not end what can be redone


@dataclass
class _Undone:
    before: list[dict[str, Any]]  # the conversation as the undo found it
    after: int  # its length right after the undo: what came later is what happened since
    dropped: list[dict[str, Any]]  # what the undo took back
    keep: Any  # what the caller needs to redo the rest (files, variables), or None


class Redo:
    """What redo can bring back: the conversation as each undo found it, the newest last, as VS Code's
    redo does. Anything new in the conversation ends it (a note or kernel news does not: an undo writes a
    note, and a kernel's restart is not a step), and so does a reset. A redo puts the conversation back as
    the undo found it, followed by the kernel news that came since (it outlives undo and redo alike)."""

    def __init__(self, on_discard: Callable[[Any], None] = lambda _keep: None) -> None:
        self._stack: list[_Undone] = []
        self._on_discard = on_discard  # a kept point no redo will use: its resources can go

    def undone(self, before: list[dict[str, Any]], live: list[dict[str, Any]], keep: Any = None) -> None:
        kept = {id(e) for e in live}
        self._stack.append(_Undone(before, len(live), [e for e in before if id(e) not in kept], keep))

    def seen(self, event: dict[str, Any]) -> None:
        if event.get("type") not in KEEPS_REDO:
            self.clear()

    def clear(self) -> None:
        stack, self._stack = self._stack, []
        for undone in reversed(stack):
            self._on_discard(undone.keep)

    def can(self) -> bool:
        return bool(self._stack)

    def peek(self) -> tuple[list[dict[str, Any]], Any] | None:
        """(what the next redo brings back, its kept point), or None."""
        return (self._stack[-1].dropped, self._stack[-1].keep) if self._stack else None

    def redo(self, live: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], Any]:
        """(the conversation after the redo, what came back, the kept point)."""
        undone = self._stack.pop()
        since = [e for e in live[undone.after:] if outlives_undo(e)]
        return [*undone.before, *since], undone.dropped, undone.keep


def outlives_undo(event: dict[str, Any]) -> bool:
    """What happened to the kernel, not to the conversation: a kernel's restart or death. Undo cannot take
    that back, so it stays (the model must still know the kernel's state is gone)."""
    return event.get("type") == "kernel"


def undo_start(live: list[dict[str, Any]]) -> int | None:
    """Where an undo cuts: the last user message, or a user's own run (outside a turn) made after it."""
    for i in range(len(live) - 1, -1, -1):
        event = live[i]
        if event.get("type") == "user":
            return i
        if event.get("type") == "run" and event.get("origin") == "user" and not event.get("turnId"):
            return i
    return None


def cut(live: list[dict[str, Any]], start: int) -> list[dict[str, Any]]:
    """Undo from `start`: the events from there go, but for what outlives an undo; returns what went."""
    tail = live[start:]
    live[start:] = [e for e in tail if outlives_undo(e)]
    return [e for e in tail if not outlives_undo(e)]


def drop_undone(live: list[dict[str, Any]], run_id: str | None) -> None:
    """An `undo` event: from the user's run it names, else from the last user message."""
    for i in range(len(live) - 1, -1, -1):
        event = live[i]
        if (event.get("type") == "run" and event.get("runId") == run_id) if run_id else event.get("type") == "user":
            cut(live, i)
            return


class History:
    def __init__(self, path: Path, redact: Callable[[Any], Any] = lambda x: x) -> None:
        self.path = path
        self._redact = redact
        self._file: Any = None
        self.write_error: str | None = None

    def load(self) -> list[dict[str, Any]]:
        try:
            raw = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except OSError as exc:
            log.warning("cannot read history %s: %s", self.path, exc)
            return []
        events = []
        for number, line in enumerate(raw.splitlines(), 1):
            if not line.strip():
                continue
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                log.warning("skipping a torn line %d of %s", number, self.path)
        return events

    def append(self, event: dict[str, Any]) -> dict[str, Any]:
        event = {"ts": round(time.time(), 3), **event}
        line = json.dumps(self._redact(event), ensure_ascii=False, separators=(",", ":")) + "\n"
        try:
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                # A previous crash may have left a torn last line: start ours on a fresh line.
                torn = self.path.exists() and self.path.stat().st_size > 0 and not _ends_with_newline(self.path)
                self._file = open(self.path, "a", encoding="utf-8")
                if torn:
                    self._file.write("\n")
            self._file.write(line)
            self._file.flush()
            self.write_error = None
        except OSError as exc:
            # Never lose the conversation in memory because the disk is unhappy; say so once.
            if self.write_error is None:
                log.error("cannot write history %s: %s", self.path, exc)
            self.write_error = str(exc)
        return event

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"
