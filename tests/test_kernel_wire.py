"""The server's reading of a local kernel's messages (kernels/connection.py `deserialize`): what jupyter_client's
`Session.deserialize` reads, less its date parsing; the connection key's signature checked, a replayed or
forged message refused, a message of protocol 4 adapted."""

from __future__ import annotations

import uuid

import pytest
from jupyter_client.session import Session

from interpreter_lsp.kernels.connection import deserialize


def wire(session: Session, message: dict) -> list[bytes]:
    _idents, parts = session.feed_identities(session.serialize(message))
    return [bytes(part) for part in parts]


@pytest.fixture
def session() -> Session:
    return Session(key=uuid.uuid4().hex.encode())


def test_reads_what_jupyter_client_reads(session: Session) -> None:
    request = session.msg("execute_request", {"code": "print(1)"})
    reply = session.msg("stream", {"name": "stdout", "text": "1\n"}, parent=request, metadata={"m": [1]})
    parts = [*wire(session, reply), b"buffer"]
    ours = deserialize(Session(key=session.key), list(parts))
    theirs = Session(key=session.key).deserialize(list(parts))
    for key in ("msg_id", "msg_type", "metadata", "content"):
        assert ours[key] == theirs[key]
    assert [bytes(b) for b in ours["buffers"]] == [bytes(b) for b in theirs["buffers"]] == [b"buffer"]
    for key in ("header", "parent_header"):  # the same, but for the date, left as the kernel wrote it
        assert {k: v for k, v in ours[key].items() if k != "date"} == {
            k: v for k, v in theirs[key].items() if k != "date"
        }
        assert ours[key]["date"] == theirs[key]["date"].isoformat().replace("+00:00", "Z")


def test_an_unsigned_forged_or_replayed_message_is_refused(session: Session) -> None:
    parts = wire(session, session.msg("status", {"execution_state": "idle"}))
    reader = Session(key=session.key)
    with pytest.raises(ValueError, match="Unsigned"):
        deserialize(reader, [b"", *parts[1:]])
    with pytest.raises(ValueError, match="Invalid signature"):
        deserialize(reader, [b"0" * 64, *parts[1:]])
    forged = wire(Session(key=b"another key"), session.msg("status", {"execution_state": "idle"}))
    with pytest.raises(ValueError, match="Invalid signature"):
        deserialize(reader, forged)
    assert deserialize(reader, parts)["content"] == {"execution_state": "idle"}
    with pytest.raises(ValueError, match="Duplicate signature"):
        deserialize(reader, parts)
    with pytest.raises(TypeError, match="malformed"):
        deserialize(Session(key=b""), parts[:4])  # (signed, its signature would be checked first)


def test_a_message_of_protocol_4_is_adapted(session: Session) -> None:
    """An old kernel's reply: jupyter_client's adapter brings it to protocol 5 (here: `data` -> `text`)."""
    old = session.msg("complete_reply", {"matches": ["x"], "matched_text": "x", "status": "ok"})
    old["header"]["version"] = "4.1"
    old["content"] = {"matches": ["x"], "matched_text": "x", "status": "ok"}
    ours = deserialize(Session(key=session.key), wire(session, old))
    theirs = Session(key=session.key).deserialize(wire(session, old))
    assert ours["content"] == theirs["content"]
    assert ours["header"]["version"] == theirs["header"]["version"]
