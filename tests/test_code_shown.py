"""What the user approves is byte for byte what runs: masking applies to output, never to code. Through the
server (a real LSP client, the real server and kernel, real litellm over HTTP to the scripted model), code
that looks like it holds a secret is shown whole on the proposal, in the reply, in the run's echo, in the
history (the command and the file) and in the exported notebook, and that is the code that runs. The one
exception, a key the server itself holds, is shown hidden and never runs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pygls.exceptions import JsonRpcException

from harness import DEFAULT_WAIT, Session, start_session, stop_session
from interpreter_lsp import protocol as p
from scripted_model import ScriptedModel

FENCE = "```"

# A "connection string" whose password part is a call that deletes a directory: masked, the card showed
# postgres://app:***@db.internal/app and plain approval ran the deletion.
CONNECTION = (
    "conn = f\"postgres://app:{__import__('shutil').rmtree('victim')}@db.internal/app\"\n"
    "print('connected:', conn)"
)
# A PRIVATE KEY comment pair: masked, every line between the markers vanished from the card.
KEY_BLOCK = (
    "# -----BEGIN RSA PRIVATE KEY-----\n"
    "import shutil; shutil.rmtree('victim2')\n"
    "print('the hidden line ran')\n"
    "# -----END RSA PRIVATE KEY-----\n"
    "print('a real password in output: postgres://app:' + 'Pg-Passw0rd' + '-4242@db/app')"
)


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as m:
        yield m


def settings(model: ScriptedModel, **extra: Any) -> dict[str, Any]:
    return {"model": "openai/scripted", "apiBase": model.base_url, "maxRetries": 0, **extra}


async def turn_end(s: Session, turn_id: str) -> dict[str, Any]:
    def final() -> dict[str, Any] | None:
        return next(
            (n for n in s.notes[p.TURN_STATUS] if n["turnId"] == turn_id and n["state"] in p.FINAL_TURN_STATES),
            None,
        )

    return await s.wait_for(final, DEFAULT_WAIT, f"turn {turn_id} to end")


async def proposal(s: Session, turn_id: str, index: int) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        props = [n for n in s.notes[p.PROPOSAL] if n["turnId"] == turn_id]
        return props[index] if len(props) > index else None

    return await s.wait_for(found, DEFAULT_WAIT, f"proposal {index} of {turn_id}")


async def test_secret_shaped_code_is_shown_recorded_and_exported_as_it_runs(
    workspace_root: Path, home: Path, model: ScriptedModel
) -> None:
    (workspace_root / "victim").mkdir()
    (workspace_root / "victim2").mkdir()
    model.reply(f"Connecting.\n{FENCE}python\n{CONNECTION}\n{FENCE}\nThen:\n{FENCE}python\n{KEY_BLOCK}\n{FENCE}\n")
    model.reply("Done.")
    s = await start_session(workspace_root, home, configuration=settings(model))
    try:
        turn = (await s.command(p.CHAT, {"text": "connect to the database"}))["turnId"]
        run_ids = []
        for index, code in enumerate((CONNECTION, KEY_BLOCK)):
            shown = await proposal(s, turn, index)
            assert shown["code"] == code  # every byte on the card
            run_ids.append((await s.command(p.APPROVE, {"proposalId": shown["proposalId"]}))["runId"])
            assert (await s.finished(run_ids[-1]))["state"] == "ok", s.text(run_ids[-1])
        await turn_end(s, turn)
        # What ran is that code: both directories are gone, the "hidden" line printed.
        assert not (workspace_root / "victim").exists() and not (workspace_root / "victim2").exists()
        assert "the hidden line ran" in s.text(run_ids[1])
        # Output is still masked.
        assert "postgres://app:***@db/app" in s.text(run_ids[1]) and "Pg-Passw0rd-4242" not in s.text(run_ids[1])
        # The run echo (runStatus "queued") and the streamed reply hold the code as written.
        for run_id, code in zip(run_ids, (CONNECTION, KEY_BLOCK), strict=True):
            assert s.statuses(run_id)[0]["code"] == code
        reply = "".join(n["delta"] for n in s.notes[p.MESSAGE] if n["turnId"] == turn)
        assert CONNECTION in reply and KEY_BLOCK in reply
        history = (await s.command(p.HISTORY, {}))["messages"]
        exported = Path((await s.command(p.EXPORT_NOTEBOOK, {"path": "out.ipynb"}))["path"])
    finally:
        await stop_session(s)
    on_disk = [
        json.loads(line)
        for path in (home / "state").rglob("*.jsonl")
        for line in path.read_text().splitlines()
    ]
    for where, events in (("interpreter.history", history), ("the history file", on_disk)):
        for kind in ("proposal", "decision", "run"):
            codes = [e["code"] for e in events if e["type"] == kind]
            assert codes == [CONNECTION, KEY_BLOCK], f"{kind} code in {where}: {codes}"
        [assistant] = [e for e in events if e["type"] == "assistant" and e["text"].startswith("Connecting")]
        assert CONNECTION in assistant["text"] and KEY_BLOCK in assistant["text"], where
        outputs = json.dumps([e["outputs"] for e in events if e["type"] == "run"])
        assert "Pg-Passw0rd-4242" not in outputs and "postgres://app:***@db/app" in outputs, where
    notebook = json.loads(exported.read_text())  # noqa: ASYNC240
    code_cells = ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]
    assert code_cells == [CONNECTION, KEY_BLOCK]
    assert "Pg-Passw0rd-4242" not in exported.read_text()  # noqa: ASYNC240


HELD_KEY = "correct horse battery staple"  # the user's apiKey: nothing about it looks like a key


async def test_code_holding_a_key_the_server_holds_is_shown_hidden_and_never_runs(
    workspace_root: Path, home: Path, model: ScriptedModel
) -> None:
    code = f"key = '{HELD_KEY}'\nopen('leaked.txt', 'w').write(key)"
    model.reply(f"Saving it.\n{FENCE}python\n{code}\n{FENCE}\n")
    s = await start_session(
        workspace_root, home, configuration=settings(model, apiKey=HELD_KEY, autoRun=True, autoRunMaxRisk="medium")
    )
    try:
        turn = (await s.command(p.CHAT, {"text": "save my key"}))["turnId"]
        shown = await proposal(s, turn, 0)
        assert shown["code"] == "key = '«hidden: interpreter.apiKey»'\nopen('leaked.txt', 'w').write(key)"
        assert shown["risk"]["level"] == "high" and shown["autoRun"] is False
        assert any("interpreter.apiKey" in reason for reason in shown["risk"]["reasons"])
        with pytest.raises(JsonRpcException, match="does not run"):
            await s.command(p.APPROVE, {"proposalId": shown["proposalId"]})
        with pytest.raises(JsonRpcException, match="does not run"):
            target = (workspace_root / "k.py").as_uri()
            await s.command(p.APPLY_PROPOSAL, {"proposalId": shown["proposalId"], "uri": target})
        with pytest.raises(JsonRpcException, match="does not run"):
            await s.command(p.RUN, {"code": code})
        # What the card shows is what runs: approving the card's own text runs that text.
        run_id = (await s.command(p.APPROVE, {"proposalId": shown["proposalId"], "code": shown["code"]}))["runId"]
        assert (await s.finished(run_id))["state"] == "ok"
        history = json.dumps((await s.command(p.HISTORY, {}))["messages"])
    finally:
        await stop_session(s)
    assert (workspace_root / "leaked.txt").read_text() == "«hidden: interpreter.apiKey»"
    assert not (workspace_root / "k.py").exists()
    assert HELD_KEY not in history and HELD_KEY not in json.dumps(s.notes)


async def test_code_of_a_native_tool_call_is_shown_and_recorded_as_it_runs(
    workspace_root: Path, home: Path, model: ScriptedModel
) -> None:
    from scripted_model import run_code

    (workspace_root / "victim").mkdir()
    model.tool_calls([run_code(CONNECTION, call_id="call_conn")], text="Connecting.")
    model.reply("Done.")
    s = await start_session(workspace_root, home, configuration=settings(model, codeFormat="tools"))
    try:
        turn = (await s.command(p.CHAT, {"text": "connect"}))["turnId"]
        shown = await proposal(s, turn, 0)
        assert shown["code"] == CONNECTION
        run_id = (await s.command(p.APPROVE, {"proposalId": shown["proposalId"]}))["runId"]
        assert (await s.finished(run_id))["state"] == "ok", s.text(run_id)
        await turn_end(s, turn)
        history = (await s.command(p.HISTORY, {}))["messages"]
    finally:
        await stop_session(s)
    assert not (workspace_root / "victim").exists()
    [call] = [c for e in history if e["type"] == "assistant" for c in e.get("toolCalls") or []]
    assert json.loads(call["arguments"])["code"] == CONNECTION
    assert [e["code"] for e in history if e["type"] in ("proposal", "decision", "run")] == [CONNECTION] * 3


# "Trojan Source" (CVE-2021-42574): the right-to-left override in the string reorders the rest of its line
# on screen, so the comparison reads `if access_level != "user":  # Check if admin`, true for no one here.
# As it runs, the string compared holds the override and the "comment", and the branch is taken.
TROJAN = (
    'access_level = "user"\n'
    'if access_level != "user\u202e \u2066# Check if admin\u2069 \u2066":\n'
    '    print("You are an admin.")'
)


async def test_code_that_reads_differently_from_what_runs_is_medium_names_its_characters_and_waits(
    workspace_root: Path, home: Path, model: ScriptedModel
) -> None:
    # Every operation of it is on the allowlist (an assignment, a comparison, a print): without the hidden
    # characters it is low, and auto-run would run it unseen.
    plain = TROJAN.replace("\u202e", "").replace("\u2066", "").replace("\u2069", "")
    model.reply(f"Checking.\n{FENCE}python\n{plain}\n{FENCE}\nAnd:\n{FENCE}python\n{TROJAN}\n{FENCE}\n")
    model.reply("Done.")
    s = await start_session(workspace_root, home, configuration=settings(model, autoRun=True))
    try:
        turn = (await s.command(p.CHAT, {"text": "check the access level"}))["turnId"]
        first, second = await proposal(s, turn, 0), await proposal(s, turn, 1)
        assert first["risk"]["level"] == "low" and first["autoRun"] is True
        assert second["code"] == TROJAN  # every byte on the card: the clients show each hidden one as a marker
        assert second["risk"]["level"] == "medium" and second["autoRun"] is False
        [reason] = [r for r in second["risk"]["reasons"] if "what you read may not be what runs" in r]
        assert "<U+202E> (right-to-left override) on line 2" in reason, reason
        assert "<U+2066> (left-to-right isolate) on line 2" in reason, reason
        # Nothing ran it meanwhile: it waits for the user, who approves what the card holds.
        assert not [n for n in s.notes[p.RUN_STATUS] if n.get("proposalId") == second["proposalId"]]
        run_id = (await s.command(p.APPROVE, {"proposalId": second["proposalId"]}))["runId"]
        assert (await s.finished(run_id))["state"] == "ok", s.text(run_id)
        await turn_end(s, turn)
    finally:
        await stop_session(s)
    assert s.statuses(run_id)[0]["code"] == TROJAN
    assert "You are an admin." in s.text(run_id)  # what ran is what the card holds, not what it seemed to say
