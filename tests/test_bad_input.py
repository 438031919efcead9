"""Bad input of every kind gets a JSON-RPC error that says what was wrong, and the server keeps serving."""

from __future__ import annotations

import pytest
from pygls.exceptions import JsonRpcException

from harness import Session
from interpreter_lsp import protocol as p


async def _error(session: Session, command: str, args: object) -> str:
    with pytest.raises(JsonRpcException) as info:
        await session.command(command, args)
    message = str(info.value)
    assert "Traceback" not in message
    return message


BAD_ARGUMENTS = [
    ("interpreter.nonsense", {}, "'interpreter.nonsense' is not defined"),
    (p.RUN, {}, "needs 'code'"),
    (p.RUN, {"code": 42}, "'code' must be a string"),
    (p.RUN, {"code": "1", "language": "cobol"}, "No kernel for language 'cobol'. Available: python, shell"),
    (p.RUN, {"uri": "file:///does/not/exist.py"}, "No document at file:///does/not/exist.py"),
    (p.RUN, {"code": "1", "timeout": -1}, "'timeout' must be a number ≥ 0"),
    # NaN passes every comparison; JSON parsers (pygls' too) accept NaN and Infinity.
    (p.RUN, {"code": "1", "timeout": float("nan")}, "'timeout' must be a number ≥ 0"),
    (p.EXPORT_NOTEBOOK, {"path": "n.ipynb", "verify": True, "verifyTimeout": float("nan")},
     "'verifyTimeout' must be a number ≥ 1"),
    (p.EXPORT_NOTEBOOK, {"path": "i.ipynb", "verify": True, "verifyTimeout": float("inf")},
     "'verifyTimeout' must be a number ≥ 1"),
    (p.VARIABLES, {"language": "shell"}, "python only"),
    (p.RESTART_KERNEL, {"language": 7}, "'language' must be a non-empty string"),
]


async def test_bad_arguments(session: Session) -> None:
    """One editor sends them all, one after another, as a user's mistakes come: each is answered with what was
    wrong, and the server goes on serving (status after each, a run at the end)."""
    for command, args, expected in BAD_ARGUMENTS:
        assert expected in await _error(session, command, args), (command, args)
        assert "kernels" in await session.command(p.STATUS, {}), (command, args)
    run_id, _ = await session.run_and_wait("print('still serving')")
    assert session.text(run_id) == "still serving\n"


async def test_not_one_object(session: Session) -> None:
    from lsprotocol import types as t

    with pytest.raises(JsonRpcException) as info:
        await session.client.workspace_execute_command_async(
            t.ExecuteCommandParams(command=p.RUN, arguments=["print(1)", "python"])
        )
    assert "takes one JSON object" in str(info.value)


async def test_ranges_outside_the_document(session: Session) -> None:
    uri = session.open("short.py", "print(1)\n")
    outside = {"start": {"line": 10, "character": 0}, "end": {"line": 12, "character": 0}}
    assert "outside" in await _error(session, p.RUN, {"uri": uri, "range": outside})
    backwards = {"start": {"line": 1, "character": 0}, "end": {"line": 0, "character": 0}}
    assert "ends before it starts" in await _error(session, p.RUN, {"uri": uri, "range": backwards})
    assert "must be a range" in await _error(session, p.RUN, {"uri": uri, "range": {"start": 3}})
    assert "outside" in await _error(session, p.RUN, {"uri": uri, "position": {"line": 99, "character": 0}})
