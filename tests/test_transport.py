"""The server's writer (transport.CoalescingWriter): notifications it frames itself, as pygls frames them."""

from __future__ import annotations

import io
import json

import pytest

from interpreter_lsp.transport import CoalescingWriter


def _frames(data: bytes) -> list[tuple[dict[str, str], bytes]]:
    """The wire read as an LSP client reads it: headers, then exactly Content-Length bytes of body."""
    frames = []
    while data:
        head, data = data.split(b"\r\n\r\n", 1)
        headers = dict(line.split(": ", 1) for line in head.decode("ascii").split("\r\n"))
        length = int(headers["Content-Length"])
        frames.append((headers, data[:length]))
        data = data[length:]
    return frames


def test_a_framed_message_is_its_length_in_bytes_whatever_its_characters() -> None:
    out = io.BytesIO()
    writer = CoalescingWriter(out)  # type: ignore[arg-type]
    first = {"jsonrpc": "2.0", "method": "interpreter/output", "params": {"text": "naïve café — 東京 🎉\u2028\n"}}
    second = {"jsonrpc": "2.0", "method": "interpreter/runStatus", "params": {"runId": "r-1", "state": "ok"}}
    writer.write_message(first)
    writer.write_message(second)
    writer.flush()  # outside a loop each write leaves at once; either way, in order
    frames = _frames(out.getvalue())
    assert [json.loads(body) for _headers, body in frames] == [first, second]
    assert frames[0][0]["Content-Type"] == "application/vscode-jsonrpc; charset=utf-8"


def test_a_value_json_cannot_hold_is_refused_before_anything_is_written() -> None:
    out = io.BytesIO()
    writer = CoalescingWriter(out)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        writer.write_message({"jsonrpc": "2.0", "method": "m", "params": {"x": object()}})
    writer.flush()
    assert out.getvalue() == b""
