"""One remote kernel's channels websocket: Jupyter messages as JSON text frames (no subprotocol), one
reader task handing each message to its owner, one writer task sending frames in order and holding them
while the connection is down. A new connection (a reconnect) is attached in place of the old one; each
has an `epoch`, so the owner can tell what went out on a connection that was lost."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections import deque
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from websockets.asyncio.client import ClientConnection

log = logging.getLogger(__name__)

CLOSE_TIMEOUT = 5.0


class Channels:
    def __init__(
        self,
        name: str,
        on_message: Callable[[dict[str, Any]], None],
        on_lost: Callable[[], None],
        on_sent: Callable[[str, int], None],
    ) -> None:
        self.name = name
        self.session = uuid.uuid4().hex  # kept across reconnects: the gateway replays what it buffered
        self.epoch = 0
        self._on_message = on_message
        self._on_lost = on_lost
        self._on_sent = on_sent
        self._ws: ClientConnection | None = None
        self._connected = asyncio.Event()
        self._outbox: deque[tuple[str, str | None]] = deque()
        self._wake = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None
        self._writer: asyncio.Task[None] | None = None

    @property
    def connected(self) -> bool:
        return self._ws is not None

    def attach(self, ws: ClientConnection) -> None:
        self._ws = ws
        self.epoch += 1
        self._reader = asyncio.create_task(self._read(ws), name=f"gateway-reader-{self.name}")
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write(), name=f"gateway-writer-{self.name}")
        self._connected.set()

    async def close(self) -> None:
        """Close the connection and forget unsent frames; idempotent. What it closes is taken first, so
        a connection attached meanwhile (a restart) is left alone."""
        self._connected.clear()
        tasks = [self._reader, self._writer]
        self._reader = self._writer = None
        ws, self._ws = self._ws, None
        self._outbox.clear()
        current = asyncio.current_task()
        for task in tasks:
            if task is not None and task is not current and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if ws is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ws.close(), CLOSE_TIMEOUT)

    def message(
        self, channel: str, msg_type: str, content: dict[str, Any], parent: dict[str, Any] | None = None
    ) -> tuple[str, str]:
        """A new message of this session: (msg_id, frame)."""
        msg_id = uuid.uuid4().hex
        header = {
            "msg_id": msg_id,
            "msg_type": msg_type,
            "session": self.session,
            "username": "interpreter-lsp",
            "date": datetime.now(timezone.utc).isoformat(),
            "version": "5.3",
        }
        body = {
            "channel": channel,
            "header": header,
            "parent_header": parent or {},
            "metadata": {},
            "content": content,
            "buffers": [],
        }
        return msg_id, json.dumps(body)

    def send(self, frame: str, msg_id: str | None = None) -> None:
        """Queue a frame: sent in order, now or once connected again."""
        self._outbox.append((frame, msg_id))
        self._wake.set()

    async def _read(self, ws: ClientConnection) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            async for raw in ws:
                if not isinstance(raw, str):
                    continue  # binary frames carry buffers (widgets): nothing we show
                try:
                    self._on_message(json.loads(raw))
                except Exception:
                    log.exception("routing a gateway message failed")
        except ConnectionClosed:
            pass
        if self._ws is ws:
            self._connected.clear()
            self._ws = None
            self._on_lost()

    async def _write(self) -> None:
        from websockets.exceptions import ConnectionClosed

        while True:
            if not self._outbox:
                self._wake.clear()
                await self._wake.wait()
                continue
            await self._connected.wait()
            ws = self._ws
            if ws is None:
                self._connected.clear()
                continue
            frame, msg_id = self._outbox[0]
            epoch = self.epoch
            try:
                await ws.send(frame)
            except ConnectionClosed:
                if self._ws is ws:
                    self._connected.clear()  # the reader reconnects; the frame is sent again then
                continue
            except Exception:
                log.exception("sending to the gateway failed; the message is dropped")
            if self._outbox and self._outbox[0][0] is frame:
                self._outbox.popleft()
            if msg_id is not None:
                self._on_sent(msg_id, epoch)
