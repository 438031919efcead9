"""Other agents in the workspace kernel (docs/agents.md), end to end: the MCP SDK's own client over stdio
as the agent (`interpreter-lsp mcp`), a real language server with a pytest-lsp client as the editor
(deciding through the real commands), real kernels."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import Implementation

from harness import Session, needs_bwrap, server_env, start_session, stop_session
from interpreter_lsp import protocol as p
from interpreter_lsp.kernels import runtime

pytestmark = pytest.mark.slow


@contextlib.asynccontextmanager
async def agent(
    root: Path, home: Path, name: str = "test-agent", *, max_wait: float = 50.0, cwd: Path | None = None
) -> AsyncIterator[ClientSession]:
    """An agent with interpreter-lsp's MCP server, as a user configures it: `interpreter-lsp mcp`, started
    in the workspace (or a directory in it)."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "interpreter_lsp", "mcp", "--max-wait", str(max_wait)],
        env=server_env(home),
        cwd=str(cwd or root),
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, client_info=Implementation(name=name, version="1.0")) as client:
            await asyncio.wait_for(client.initialize(), 60)
            yield client


async def socket_ready(root: Path) -> None:
    path = runtime.agent_socket(root)
    for _ in range(600):
        if path.exists():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the language server never listened on {path}")


@pytest.fixture
async def editor(workspace_root: Path, home: Path) -> AsyncIterator[Session]:
    s = await start_session(workspace_root, home)
    await socket_ready(workspace_root)
    try:
        yield s
    finally:
        await stop_session(s)


def proposals(s: Session, agent_name: str | None = None) -> list[dict[str, Any]]:
    return [n for n in s.notes[p.PROPOSAL] if agent_name is None or n.get("agent", "").startswith(agent_name)]


async def next_proposal(s: Session, seen: int, agent_name: str | None = None) -> dict[str, Any]:
    return await s.wait_for(
        lambda: proposals(s, agent_name)[seen] if len(proposals(s, agent_name)) > seen else None,
        what=f"proposal {seen + 1} from {agent_name}",
    )


def text_of(result: Any) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def test_a_call_runs_only_after_the_user_approves_in_the_editor(editor: Session, home: Path) -> None:
    s = editor
    async with agent(s.root, home, "Claude Code") as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == {"run_code", "variables", "run_status", "interrupt", "restart", "status"}
        assert "wait" in (tools["run_code"].description or "").lower()
        call = asyncio.create_task(client.call_tool("run_code", {"code": "x = 6 * 7\nprint(x)"}))
        card = await next_proposal(s, 0)
        assert card["origin"] == "agent" and card["agent"] == "Claude Code 1.0" and card["created"].endswith("Z")
        assert card["code"] == "x = 6 * 7\nprint(x)" and not card["autoRun"]
        status = await s.command(p.STATUS, {})
        assert [w["agent"] for w in status["agentsWaiting"]] == ["Claude Code 1.0"]
        assert not s.notes[p.RUN_STATUS], "nothing runs before the decision"
        await s.command(p.APPROVE, {"proposalId": card["proposalId"]})
        result = await asyncio.wait_for(call, 60)
        assert not result.is_error and "42" in text_of(result)
        assert (await s.command(p.STATUS, {}))["agentsWaiting"] == []
        # The agent's run is the user's kernel: the editor's own run sees its variable.
        run_id, _ = await s.run_and_wait("print(x + 1)")
        assert s.text(run_id) == "43\n"
        variables = json.loads(text_of(await client.call_tool("variables", {})))
        assert any(v.get("name") == "x" for v in variables)
    # In the history, with the hash the decision was bound to, and in the export.
    events = (await s.command(p.HISTORY, {}))["messages"]
    runs = [e for e in events if e["type"] == "run" and e.get("origin") == "agent"]
    decisions = [e for e in events if e["type"] == "decision" and e.get("agent")]
    assert len(runs) == 1 and runs[0]["agent"] == "Claude Code 1.0"
    assert runs[0]["codeHash"] == decisions[0]["codeHash"] == card_hash("x = 6 * 7\nprint(x)")
    await s.command(p.EXPORT_NOTEBOOK, {"path": "out.ipynb"})
    cells = json.loads((s.root / "out.ipynb").read_text())["cells"]
    assert any("x = 6 * 7" in "".join(c["source"]) for c in cells)


def card_hash(code: str, language: str = "python") -> str:
    from interpreter_lsp.gate import code_hash

    return code_hash(code, language)


async def test_reject_edit_and_insert_from_the_editor(editor: Session, home: Path) -> None:
    s = editor
    async with agent(s.root, home, "codex") as client:
        call = asyncio.create_task(client.call_tool("run_code", {"code": "import shutil; shutil.rmtree('/')"}))
        card = await next_proposal(s, 0)
        started = time.monotonic()
        await s.command(p.REJECT, {"proposalId": card["proposalId"], "reason": "never delete things"})
        result = await asyncio.wait_for(call, 60)
        assert result.is_error and "never delete things" in text_of(result)
        assert result.structured_content == {
            "runId": card["turnId"],
            "state": "rejected",
            "reason": "never delete things",
        }
        assert time.monotonic() - started < 5

        call = asyncio.create_task(client.call_tool("run_code", {"code": "print('agent')"}))
        card = await next_proposal(s, 1)
        await s.command(p.APPROVE, {"proposalId": card["proposalId"], "code": "print('edited by the user')"})
        result = await asyncio.wait_for(call, 60)
        text = text_of(result)
        assert "edited your code" in text and "print('edited by the user')" in text and "edited by the user\n" in text
        assert result.structured_content["edited"] is True

        call = asyncio.create_task(client.call_tool("run_code", {"code": "y = 1"}))
        card = await next_proposal(s, 2)
        uri = s.open("notes.py", "")
        await s.command(p.APPLY_PROPOSAL, {"proposalId": card["proposalId"], "uri": uri})
        result = await asyncio.wait_for(call, 60)
        assert result.is_error and "notes.py" in text_of(result) and "did not run" in text_of(result)
    assert not [st for st in s.notes[p.RUN_STATUS] if "rmtree" in (st.get("code") or "")]


async def test_a_long_run_outlives_the_client_timeout_through_progress_and_polling(editor: Session, home: Path) -> None:
    s = editor
    async with agent(s.root, home, "slow-agent", max_wait=5) as client:
        progress: list[tuple[float, str | None]] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append((value, message))

        call = asyncio.create_task(
            client.call_tool(
                "run_code",
                {"code": "import time; time.sleep(14); print('slept')"},
                read_timeout_seconds=10,  # the client gives up on a call after 10 s: the run takes longer
                progress_callback=on_progress,
            )
        )
        card = await next_proposal(s, 0)
        await s.command(p.APPROVE, {"proposalId": card["proposalId"]})
        first = await asyncio.wait_for(call, 30)
        assert not first.is_error and first.structured_content["state"] in ("awaiting-approval", "running")
        assert progress, "progress was reported while the call waited"
        run_id = first.structured_content["runId"]
        for _ in range(10):
            polled = await client.call_tool("run_status", {"run_id": run_id, "wait": 4}, read_timeout_seconds=10)
            if polled.structured_content["state"] not in ("awaiting-approval", "running"):
                break
        assert polled.structured_content["state"] == "ok" and "slept" in text_of(polled)


async def test_images_come_back_as_image_content(editor: Session, home: Path) -> None:
    pytest.importorskip("matplotlib")
    s = editor
    code = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()"
    async with agent(s.root, home) as client:
        call = asyncio.create_task(client.call_tool("run_code", {"code": code}))
        card = await next_proposal(s, 0)
        await s.command(p.APPROVE, {"proposalId": card["proposalId"]})
        result = await asyncio.wait_for(call, 90)
    assert not result.is_error, text_of(result)
    pictures = [c for c in result.content if getattr(c, "type", "") == "image"]
    assert len(pictures) == 1 and pictures[0].mime_type == "image/png"
    assert base64.b64decode(pictures[0].data).startswith(b"\x89PNG")


async def test_interrupt_from_the_editor_stops_the_agents_run(editor: Session, home: Path) -> None:
    s = editor
    async with agent(s.root, home) as client:
        call = asyncio.create_task(client.call_tool("run_code", {"code": "import time; time.sleep(600)"}))
        card = await next_proposal(s, 0)
        await s.command(p.APPROVE, {"proposalId": card["proposalId"]})
        await s.wait_for(lambda: any(st["state"] == "running" for st in s.notes[p.RUN_STATUS]), what="running")
        await s.command(p.INTERRUPT, {})
        result = await asyncio.wait_for(call, 60)
        assert result.is_error and result.structured_content["state"] == "interrupted"


async def test_no_run_without_a_decision_whatever_the_client_claims(editor: Session, home: Path) -> None:
    """200 code-running calls, each with _meta claiming the tool is read-only and pre-allowed, and a short
    wait: none runs; each waits as a card; the editor then rejects them all."""
    s = editor
    calls = 200
    async with agent(s.root, home, "spoofer", max_wait=0) as client:
        meta = {"annotations": {"readOnlyHint": True, "destructiveHint": False}, "preApproved": True}
        results = []
        for i in range(calls):
            results.append(await client.call_tool("run_code", {"code": f"print({i})"}, meta=meta))
        assert all(r.structured_content["state"] == "awaiting-approval" for r in results)
        await s.wait_for(lambda: len(proposals(s, "spoofer")) == calls, what="all cards")
        assert not s.notes[p.RUN_STATUS], "a call ran without a decision"
        for card in proposals(s, "spoofer"):
            await s.command(p.REJECT, {"proposalId": card["proposalId"]})
        polled = await client.call_tool("run_status", {"run_id": results[-1].structured_content["runId"], "wait": 5})
        assert polled.is_error and polled.structured_content["state"] == "rejected"
    events = (await s.command(p.HISTORY, {}))["messages"]
    assert not [e for e in events if e["type"] == "run"]
    assert len([e for e in events if e["type"] == "decision" and e["decision"] == "rejected"]) == calls


async def test_auto_run_applies_to_agents_exactly_as_to_our_model(workspace_root: Path, home: Path) -> None:
    s = await start_session(workspace_root, home, configuration={"autoRun": True, "autoRunMaxRisk": "low"})
    await socket_ready(workspace_root)
    try:
        async with agent(s.root, home) as client:
            low = await asyncio.wait_for(client.call_tool("run_code", {"code": "print(2 + 2)"}), 60)
            assert not low.is_error and "4" in text_of(low)
            assert proposals(s)[0]["autoRun"] is True
            call = asyncio.create_task(client.call_tool("run_code", {"code": "import shutil; shutil.rmtree('/home')"}))
            card = await next_proposal(s, 1)
            assert card["autoRun"] is False and card["risk"]["level"] in ("medium", "high") and card["waitReason"]
            await s.command(p.REJECT, {"proposalId": card["proposalId"]})
            assert (await asyncio.wait_for(call, 60)).is_error
    finally:
        await stop_session(s)


async def test_two_agents_interleaved_each_run_in_the_kernel_it_named(editor: Session, home: Path) -> None:
    """Two MCP clients, one on python, one on shell, 1,000 calls interleaved, each approved in the editor;
    every card names its agent and every run lands in its own kernel: 0 cross-routed."""
    s = editor
    rounds = 500
    await s.command("interpreter.setTrusted", {"trusted": True})
    # The editor approves each card as its notification arrives (no polling): the listener runs on the
    # client's loop, the approval is a command, so it goes through a queue to a task of its own.
    cards: asyncio.Queue[str] = asyncio.Queue()
    s.listeners[p.PROPOSAL].append(lambda card: cards.put_nowait(card["proposalId"]))

    async def approver() -> None:
        while True:
            await s.command(p.APPROVE, {"proposalId": await cards.get()})

    approving = asyncio.create_task(approver())
    wrong: list[tuple[str, str]] = []
    try:
        async with agent(s.root, home, "alpha") as a, agent(s.root, home, "beta") as b:

            async def py(i: int) -> None:
                out = text_of(
                    await a.call_tool("run_code", {"code": f"import sys; print('py', {i}, sys.version_info[0])"})
                )
                if f"py {i} 3" not in out:
                    wrong.append(("python", out))

            async def sh(i: int) -> None:
                code = f"echo sh {i} $BASH_VERSINFO"
                out = text_of(await b.call_tool("run_code", {"code": code, "language": "shell"}))
                if f"sh {i} " not in out or "py" in out:
                    wrong.append(("shell", out))

            for i in range(rounds):
                await asyncio.gather(py(i), sh(i))
    finally:
        approving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await approving
    assert wrong == [], wrong[:5]
    assert len(s.notes[p.PROPOSAL]) == 2 * rounds
    for card in s.notes[p.PROPOSAL]:
        assert (card["agent"].startswith("alpha")) == (card["language"] == "python"), card
    runs = [e for e in (await s.command(p.HISTORY, {}))["messages"] if e["type"] == "run"]
    assert len(runs) == 2 * rounds
    assert all(r["agent"].startswith("alpha") == (r["language"] == "python") for r in runs)


async def test_without_an_editor_the_agent_is_told_what_to_do(workspace_root: Path, home: Path) -> None:
    async with agent(workspace_root, home) as client:
        result = await client.call_tool("run_code", {"code": "print(1)"})
        assert result.is_error and "No editor has" in text_of(result) and "Open that folder" in text_of(result)


async def test_started_in_a_subdirectory_it_finds_the_workspace(editor: Session, home: Path) -> None:
    sub = editor.root / "src" / "deeper"
    sub.mkdir(parents=True)
    async with agent(editor.root, home, cwd=sub) as client:
        status = json.loads(text_of(await client.call_tool("status", {})))
        assert status["root"] == str(editor.root)


async def test_the_agent_withdraws_its_own_proposals_and_restarts_a_kernel_in_view(editor: Session, home: Path) -> None:
    s = editor
    async with agent(s.root, home, "alpha") as a, agent(s.root, home, "beta") as b:
        mine = asyncio.create_task(a.call_tool("run_code", {"code": "print('alpha')"}))
        other = asyncio.create_task(b.call_tool("run_code", {"code": "print('beta')"}))
        await next_proposal(s, 1)
        assert "Stopped 1" in text_of(await a.call_tool("interrupt", {}))
        withdrawn = await asyncio.wait_for(mine, 30)
        assert withdrawn.is_error and withdrawn.structured_content["state"] == "expired"
        assert not other.done(), "an agent's interrupt leaves another agent's proposal alone"
        beta = next(c for c in proposals(s) if c["agent"].startswith("beta"))
        # One agent cannot read another's result by its run id.
        peek = await a.call_tool("run_status", {"run_id": beta["turnId"], "wait": 0})
        assert peek.is_error and peek.structured_content["state"] == "unknown"
        await s.command(p.APPROVE, {"proposalId": beta["proposalId"]})
        assert "beta" in text_of(await asyncio.wait_for(other, 60))
        await s.run_and_wait("kept = 1")
        assert "restarted" in text_of(await a.call_tool("restart", {"language": "python"}))
        variables = json.loads(text_of(await a.call_tool("variables", {})))
        assert not any(v.get("name") == "kept" for v in variables)
        await s.run_and_wait("1")  # its notifications come after the message on the same wire
        assert any("alpha" in m and "restarted the python kernel" in m for m in shown_messages(s))


def shown_messages(s: Session) -> list[str]:
    return [m.message for m in s.client.messages]  # window/showMessage


@needs_bwrap
async def test_sandboxed_kernel_code_cannot_reach_the_agents_socket(workspace_root: Path, home: Path) -> None:
    """Hostile kernel code in the sandbox must not propose code, restart kernels or read results through
    the agents' socket: its /tmp is private, so the socket's directory is out of sight."""
    s = await start_session(workspace_root, home, configuration={"sandbox": "bubblewrap"})
    await socket_ready(workspace_root)
    try:
        path = runtime.agent_socket(workspace_root)
        run_id, status = await s.run_and_wait(
            f"import os, socket\nprint(os.path.exists({str(path)!r}), os.path.exists({str(path.parent)!r}))"
        )
        assert status["state"] == "ok" and s.text(run_id) == "False False\n"
    finally:
        await stop_session(s)


async def test_an_agent_with_the_sdks_trimmed_environment_finds_an_editor_with_a_tmpdir_of_its_own(
    workspace_root: Path, home: Path, tmp_path: Path
) -> None:
    """As on macOS: the editor's server has TMPDIR=/var/folders/…/T/, and the agent starts the bridge with the
    MCP SDK's default environment (HOME, PATH, … but no TMPDIR). They still meet."""
    editor_tmp = tmp_path / "editor-tmp"
    editor_tmp.mkdir()
    s = await start_session(workspace_root, home, env={"TMPDIR": str(editor_tmp)})
    try:
        await s.command("interpreter.setTrusted", {"trusted": True})
        await socket_ready(workspace_root)
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "interpreter_lsp", "mcp"], cwd=str(workspace_root)
        )
        assert params.env is None  # the SDK's default environment: no TMPDIR
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, client_info=Implementation(name="trimmed", version="1")) as a:
                await asyncio.wait_for(a.initialize(), 60)
                status = json.loads(text_of(await a.call_tool("status", {})))
                assert status["root"] == str(workspace_root)
    finally:
        await stop_session(s)
