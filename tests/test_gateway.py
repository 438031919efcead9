"""Remote kernels, end to end: the real server over LSP with its kernels on a real Jupyter Kernel Gateway
and a real Enterprise Gateway (local process proxy), each started on 127.0.0.1 with a token. Runs with
streamed and rich output, input(), interrupt, restart, variables, the chat -> approve -> run loop with the
scripted model, and what does (not) cross the wire."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from gateways import TOKEN, DropProxy, Gateway, gateway_missing, gateway_settings
from harness import Session, start_session, stop_session
from interpreter_lsp import protocol as p
from scripted_model import ScriptedModel

pytestmark = pytest.mark.slow

FENCE = "`" * 3


def started(kind: str, folder: Path, **kwargs: Any) -> Gateway:
    """For sync (module) fixtures."""
    if (why := gateway_missing(kind)) is not None:
        pytest.skip(why)
    gateway = Gateway(kind, folder, **kwargs)
    asyncio.run(gateway.start())
    return gateway


async def start_gateway(kind: str, folder: Path, **kwargs: Any) -> Gateway:
    if (why := gateway_missing(kind)) is not None:
        pytest.skip(why)
    return await Gateway(kind, folder, **kwargs).start()


@pytest.fixture(scope="module", params=["kg", "eg"])
def gateway(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """One gateway per kind for the module (the tests leave no kernel behind: the server deletes its own)."""
    gw = started(request.param, tmp_path_factory.mktemp(f"{request.param} gateway"))
    try:
        yield gw
    finally:
        asyncio.run(gw.stop())


def settings_for(gw: Gateway, **extra: Any) -> dict[str, Any]:
    # Enterprise Gateway refuses kernels for root (its default user) unless KERNEL_USERNAME says who.
    return gateway_settings(gw.url, gatewayUsername="alice", **extra)


@pytest.fixture
async def remote(gateway: Gateway, workspace_root: Path, home: Path) -> AsyncIterator[Session]:
    s = await start_session(workspace_root, home, configuration=settings_for(gateway))
    try:
        yield s
    finally:
        await stop_session(s)
    # The server deletes its kernels on shutdown: nothing is left running on the gateway.
    assert await gateway.kernels() == []


def python_entry(status: dict[str, Any]) -> dict[str, Any]:
    return next(k for k in status["kernels"] if k["language"] == "python")


async def test_streamed_and_rich_output_and_remote_status(remote: Session, gateway: Gateway) -> None:
    code = (
        "import os, time\n"
        "for i in range(3):\n"
        "    print('line', i, flush=True)\n"
        "    time.sleep(0.3)\n"
        "from IPython.display import HTML, display\n"
        "display(HTML('<b>bold</b>'))\n"
        "print(os.getcwd())\n"
        "6 * 7"
    )
    run_id, status = await remote.run_and_wait(code, "python", timeout=90)
    assert status["state"] == "ok", status
    outputs = remote.outputs(run_id)
    stdout = [o for o in outputs if o["kind"] == "stdout"]
    # Streamed: the lines arrive in separate notifications as the kernel prints them, numbered in order.
    assert len(stdout) >= 3
    assert [o["seq"] for o in outputs] == list(range(len(outputs)))
    assert remote.text(run_id, ("stdout",)).startswith("line 0\nline 1\nline 2\n")
    display = next(o for o in outputs if o["kind"] == "display")
    assert display["data"]["text/html"] == "<b>bold</b>"
    result = next(o for o in outputs if o["kind"] == "result")
    assert result["text"] == "42"
    # The kernel runs where the gateway runs it, not in the editor's workspace.
    assert str(gateway.workdir) in remote.text(run_id, ("stdout",))
    # No files-touched report for a remote kernel, and the status says why.
    assert "files" not in status
    entry = python_entry(await remote.command(p.STATUS, {}))
    assert entry["state"] == "idle"
    assert entry["gateway"] == gateway.url
    assert entry["kernel"] == "python3"
    assert entry["sandbox"].startswith("off (remote kernel")
    assert entry["filesTouched"].startswith("off (remote kernel")
    assert "pid" not in entry
    assert entry["kernelId"] in {k["id"] for k in await gateway.kernels()}


async def test_variables_and_restart(remote: Session) -> None:
    _run, status = await remote.run_and_wait("answer = 41 + 1\nname = 'remote'", "python", timeout=90)
    assert status["state"] == "ok"
    variables = (await remote.command(p.VARIABLES, {"language": "python"}))["variables"]
    assert {"name": "answer", "type": "int", "summary": "42"} in variables
    assert any(v["name"] == "name" and v["summary"] == "'remote'" for v in variables)
    before = python_entry(await remote.command(p.STATUS, {}))["kernelId"]

    await remote.command(p.RESTART_KERNEL, {"language": "python"})
    await remote.wait_for(
        lambda: any(n["state"] == "restarting" for n in remote.notes[p.KERNEL_STATUS]), 60, "the restart"
    )
    run_id, status = await remote.run_and_wait("print(answer)", "python", timeout=90)
    assert status["state"] == "error"
    assert "NameError" in remote.text(run_id)
    # The same kernel on the gateway, restarted (not a new one).
    assert python_entry(await remote.command(p.STATUS, {}))["kernelId"] == before
    assert (await remote.command(p.VARIABLES, {"language": "python"}))["variables"] == []


async def test_undo_brings_back_variables_of_a_kernel_on_the_gateway(remote: Session) -> None:
    """The snapshot is taken on the gateway's machine, asked over the module's comm (which the gateway relays
    as it relays ipywidgets'), and undo brings the variables back there: changed in place, rebound, created."""
    _run, status = await remote.run_and_wait("rows = [1, 2]\ncount = 1\nholder = object()", "python", timeout=90)
    assert status["state"] == "ok", remote.text(_run)
    _run, status = await remote.run_and_wait("rows.append(3)\ncount = 2\nextra = 'new'", "python", timeout=90)
    assert status["state"] == "ok", remote.text(_run)
    result = await remote.command(p.UNDO, {})
    assert result["variablesRestored"] == ["count", "rows"], result
    assert result["variablesRemoved"] == ["extra"], result
    # The files are the gateway machine's: named, as what cannot come back; every variable came back.
    assert [item["name"] for item in result["notRestorable"]] == [f"files run {result['runs'][0]} changed"], result
    # The calls after each run went over the comm, not as execute requests (the comm is open in the kernel).
    check = (
        "print(rows, count, 'extra' in globals(), sorted(c.target_name for c in "
        "get_ipython().kernel.comm_manager.comms.values()))"
    )
    run_id, status = await remote.run_and_wait(check, "python", timeout=90)
    assert remote.text(run_id, ("stdout",)) == "[1, 2] 1 False ['interpreter_lsp_snapshots']\n", remote.text(run_id)


async def test_input_answered_and_cancelled(remote: Session) -> None:
    remote.input_answers = ["Ada", None]
    run_id, status = await remote.run_and_wait("who = input('Name? ')\nprint('hello', who)", "python", timeout=90)
    assert status["state"] == "ok"
    assert remote.input_prompts[0]["prompt"] == "Name? "
    assert remote.input_prompts[0]["runId"] == run_id
    assert "hello Ada" in remote.text(run_id)
    # No answer (the user pressed Escape): input() ends as Ctrl-C would, and the kernel lives on.
    run_id, status = await remote.run_and_wait("input('Again? ')", "python", timeout=90)
    assert status["state"] in ("error", "interrupted")
    assert remote.text(run_id) == "Input cancelled: the code was stopped at its input prompt."
    run_id, status = await remote.run_and_wait("print(who)", "python", timeout=60)
    assert remote.text(run_id) == "Ada\n"


async def test_interrupt_keeps_the_kernel(remote: Session) -> None:
    _run, status = await remote.run_and_wait("kept = 'still here'", "python", timeout=90)
    assert status["state"] == "ok"
    run_id = await remote.run("import time\nprint('sleeping', flush=True)\ntime.sleep(120)", "python")
    await remote.wait_for(lambda: "sleeping" in remote.text(run_id), 60, "the run to start")
    await remote.command(p.INTERRUPT, {})
    status = await remote.finished(run_id, timeout=30)
    assert status["state"] == "interrupted"
    run_id, status = await remote.run_and_wait("print(kept)", "python", timeout=60)
    assert remote.text(run_id) == "still here\n"


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as m:
        yield m


async def test_chat_approve_run_loop(gateway: Gateway, workspace_root: Path, home: Path, model: ScriptedModel) -> None:
    settings = {
        "model": "openai/scripted",
        "apiBase": model.base_url,
        "apiKey": "sk-test-key-1234",
        **settings_for(gateway),
    }
    s = await start_session(workspace_root, home, configuration=settings)
    try:
        model.reply(f"I'll compute it.\n{FENCE}python\nimport socket\nprint(6 * 7)\n{FENCE}\n")
        model.reply("The answer is 42.")
        turn = (await s.command(p.CHAT, {"text": "What is six times seven?"}))["turnId"]
        proposal = await s.wait_for(
            lambda: next((n for n in s.notes[p.PROPOSAL] if n["turnId"] == turn), None), 60, "the proposal"
        )
        run_id = (await s.command(p.APPROVE, {"proposalId": proposal["proposalId"]}))["runId"]
        assert (await s.finished(run_id, 90))["state"] == "ok"
        assert s.text(run_id) == "42\n"
        end = await s.wait_for(
            lambda: next(
                (n for n in s.notes[p.TURN_STATUS] if n["turnId"] == turn and n["state"] in p.FINAL_TURN_STATES),
                None,
            ),
            60,
            "the turn to end",
        )
        assert end["state"] == "done"
        # The model saw the remote run's output.
        assert "42" in model.wait_requests(2)[1]["messages"][-1]["content"]
    finally:
        await stop_session(s)


async def test_nothing_of_the_editor_crosses_the_wire(tmp_path: Path, workspace_root: Path, home: Path) -> None:
    """Only the code, the kernelspec and the KERNEL_* values the user set go to the gateway: not the
    editor's environment, not its secrets. Seen in the bytes the server sent (through a proxy)."""
    gw = await start_gateway("kg", tmp_path / "kg")
    proxy = await DropProxy(gw.port).start()
    secret, private = "sk-editor-secret-5b1f0e7d", "editor-only-value-c3d9"
    env = {"OPENAI_API_KEY": secret, "EDITOR_ONLY_SETTING": private, "KERNEL_FROM_EDITOR_ENV": private}
    settings = gateway_settings(proxy.url, gatewayUsername="alice", gatewayWorkingDir="/srv/projects/demo")
    s = await start_session(workspace_root, home, configuration=settings, env=env)
    try:
        code = (
            "import os\n"
            "print(os.environ.get('KERNEL_USERNAME'), os.environ.get('KERNEL_WORKING_DIR'))\n"
            "print(os.environ.get('OPENAI_API_KEY'), os.environ.get('EDITOR_ONLY_SETTING'),"
            " os.environ.get('KERNEL_FROM_EDITOR_ENV'))"
        )
        run_id, status = await s.run_and_wait(code, "python", timeout=90)
        assert status["state"] == "ok"
        assert s.text(run_id) == "alice /srv/projects/demo\nNone None None\n"
        sent = bytes(proxy.sent) + b"".join(proxy.frames)
        # The kernel start's body, however the installed httpx spaces its JSON (older releases add spaces).
        env_sent = rb'"env":\s*\{"KERNEL_USERNAME":\s*"alice",\s*"KERNEL_WORKING_DIR":\s*"/srv/projects/demo"\}'
        assert re.search(env_sent, sent), sent[:2000]
        assert any(b"os.environ.get('KERNEL_USERNAME')" in frame for frame in proxy.frames)
        assert secret.encode() not in sent
        assert private.encode() not in sent
        # The token goes in the Authorization header, and nowhere the editor shows.
        assert f"Authorization: token {TOKEN}".encode() in sent
        status_text = str(await s.command(p.STATUS, {}))
        assert TOKEN not in status_text
        assert TOKEN not in str(s.notes)
    finally:
        await stop_session(s)
        await proxy.stop()
        await gw.stop()


async def test_shell_kernel_on_the_gateway(tmp_path: Path, workspace_root: Path, home: Path) -> None:
    gw = await start_gateway("kg", tmp_path / "kg")
    s = await start_session(workspace_root, home, configuration=gateway_settings(gw.url))
    try:
        run_id, status = await s.run_and_wait("echo $((6 * 7))", "shell", timeout=90)
        assert status["state"] == "ok", s.text(run_id)
        assert s.text(run_id).strip() == "42"
        entry = next(k for k in (await s.command(p.STATUS, {}))["kernels"] if k["language"] == "shell")
        assert entry["kernel"] == "bash"
        # A language the gateway has no kernel for says what it offers.
        with pytest.raises(Exception, match="offers no kernel for 'ruby'"):
            await s.run("puts 1", "ruby")
    finally:
        await stop_session(s)
        await gw.stop()


async def test_the_model_is_told_the_remote_kernels_working_directory(
    tmp_path: Path, workspace_root: Path, home: Path, model: ScriptedModel
) -> None:
    """Code runs in the gateway kernel's own working directory: that is what the model is told, not the
    editor's workspace folder (which the kernel's host need not have)."""
    gw = await start_gateway("kg", tmp_path / "kg")
    settings = {"model": "openai/scripted", "apiBase": model.base_url, **gateway_settings(gw.url)}
    s = await start_session(workspace_root, home, configuration=settings)
    try:
        run_id, status = await s.run_and_wait("import os\nprint(os.getcwd())", timeout=120)
        assert status["state"] == "ok", s.text(run_id)
        remote_cwd = s.text(run_id).strip()
        assert remote_cwd != str(workspace_root)
        model.reply("Noted.")
        await s.command(p.CHAT, {"text": "where are you?"})
        system = model.wait_requests(1)[0]["messages"][0]["content"]
    finally:
        await stop_session(s)
        await gw.stop()
    assert f"its working directory is {remote_cwd} (paths are relative to it)" in system, system
    assert f"Workspace: {workspace_root} (the working directory" not in system
