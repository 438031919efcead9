"""Remote kernels when things go wrong, against real gateways on 127.0.0.1: a wrong token, a gateway that
is not there, TLS failures, a websocket dropped mid-run (a proxy the test controls), a gateway that
restarts or is killed during a run, a kernel culled by the gateway, a kernel process that dies there.
Each ends with a message that says what happened and what to do, within a bound: never a hang."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from gateways import DropProxy, Gateway, free_port, gateway_missing, gateway_settings, self_signed_cert
from harness import Session, start_session, stop_session
from interpreter_lsp import protocol as p

pytestmark = pytest.mark.slow

SLOW_LOOP = "import time\nfor i in range(30):\n    print(i, flush=True)\n    time.sleep(0.1)"


async def start_gateway(kind: str, folder: Path, **kwargs: Any) -> Gateway:
    if (why := gateway_missing(kind)) is not None:
        pytest.skip(why)
    return await Gateway(kind, folder, **kwargs).start()


def shown(s: Session) -> str:
    """Everything the editor was shown in messages (window/showMessage)."""
    return "\n".join(m.message for m in s.client.messages)


async def no_kernels_left(gw: Gateway, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while await gw.kernels():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.2)  # the gateway's own shutdown of a kernel, polled within a bound
    return True


def kernel_messages(s: Session) -> list[str]:
    return [n.get("message") or "" for n in s.notes[p.KERNEL_STATUS]]


async def test_wrong_token(tmp_path: Path, workspace_root: Path, home: Path) -> None:
    gw = await start_gateway("kg", tmp_path / "kg")
    s = await start_session(workspace_root, home, configuration=gateway_settings(gw.url, token="not-the-token"))
    try:
        _run, status = await s.run_and_wait("print(1)", "python", timeout=60)
        assert status["state"] == "error"
        assert "refused" in status["message"] and "HTTP 401" in status["message"]
        assert "interpreter.kernel.gatewayToken" in status["message"]
        assert "not-the-token" not in str(s.notes) + shown(s)  # a token, even a wrong one, is never shown
        await s.wait_for(
            lambda: any("HTTP 401" in (n.get("message") or "") for n in s.notes[p.KERNEL_STATUS]),
            30,
            "the kernel status to say why",
        )
    finally:
        await stop_session(s)
        await gw.stop()


async def test_missing_kernel_username_on_enterprise_gateway(tmp_path: Path, workspace_root: Path, home: Path) -> None:
    gw = await start_gateway("eg", tmp_path / "eg")
    s = await start_session(workspace_root, home, configuration=gateway_settings(gw.url))
    try:
        _run, status = await s.run_and_wait("print(1)", "python", timeout=60)
        assert status["state"] == "error"
        assert "HTTP 403" in status["message"]
        assert "interpreter.kernel.gatewayUsername" in status["message"]
    finally:
        await stop_session(s)
        await gw.stop()


async def test_gateway_unreachable(workspace_root: Path, home: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    s = await start_session(workspace_root, home, configuration=gateway_settings(url))
    try:
        started = time.monotonic()
        _run, status = await s.run_and_wait("print(1)", "python", timeout=60)
        assert status["state"] == "error"
        assert f"Cannot reach the kernel gateway at {url}" in status["message"]
        assert "interpreter.kernel.gatewayUrl" in status["message"]
        assert time.monotonic() - started < 30
    finally:
        await stop_session(s)


async def test_tls_failure_then_the_ca_bundle(tmp_path: Path, workspace_root: Path, home: Path) -> None:
    cert, key = self_signed_cert(tmp_path)
    gw = await start_gateway("kg", tmp_path / "kg", certfile=cert, keyfile=key)
    assert gw.url.startswith("https://")
    s = await start_session(workspace_root, home, configuration=gateway_settings(gw.url))
    try:
        _run, status = await s.run_and_wait("print(1)", "python", timeout=60)
        assert status["state"] == "error"
        assert "TLS failure" in status["message"] and "could not be verified" in status["message"]
        assert "interpreter.kernel.gatewayCaBundle" in status["message"]
    finally:
        await stop_session(s)
    # http:// to a gateway that speaks https: said plainly too.
    plain = gw.url.replace("https://", "http://")
    s = await start_session(workspace_root, home, configuration=gateway_settings(plain))
    try:
        _run, status = await s.run_and_wait("print(1)", "python", timeout=60)
        assert status["state"] == "error"
        assert plain in status["message"]
    finally:
        await stop_session(s)
    # With the CA bundle that signed it, the same gateway works, websocket included.
    s = await start_session(workspace_root, home, configuration=gateway_settings(gw.url, gatewayCaBundle=str(cert)))
    try:
        run_id, status = await s.run_and_wait("print('over tls')", "python", timeout=90)
        assert status["state"] == "ok", status
        assert s.text(run_id) == "over tls\n"
    finally:
        await stop_session(s)
        await gw.stop()


@pytest.mark.parametrize("kind", ["kg", "eg"])
async def test_websocket_dropped_mid_run_resumes_on_the_same_kernel(
    kind: str, tmp_path: Path, workspace_root: Path, home: Path
) -> None:
    gw = await start_gateway(kind, tmp_path / kind)
    proxy = await DropProxy(gw.port).start()
    s = await start_session(
        workspace_root, home, configuration=gateway_settings(proxy.url, gatewayUsername="alice")
    )
    try:
        _run, status = await s.run_and_wait("kept = 'same kernel'", "python", timeout=90)
        assert status["state"] == "ok"
        run_id = await s.run(SLOW_LOOP, "python")
        await s.wait_for(lambda: "5\n" in s.text(run_id), 60, "some output")
        assert proxy.drop() >= 1
        status = await s.finished(run_id, 60)
        assert status["state"] == "ok", status
        # Every line exactly once, in order: what the kernel printed while disconnected was replayed.
        assert s.text(run_id) == "".join(f"{i}\n" for i in range(30))
        assert any("reconnected to the same kernel" in m for m in kernel_messages(s))
        run_id, status = await s.run_and_wait("print(kept)", "python", timeout=60)
        assert s.text(run_id) == "same kernel\n"
    finally:
        await stop_session(s)
        await proxy.stop()
        await gw.stop()


async def test_gateway_restarts_during_a_run(tmp_path: Path, workspace_root: Path, home: Path) -> None:
    gw = await start_gateway("kg", tmp_path / "kg")
    settings = gateway_settings(gw.url, gatewayConnectTimeout=30)
    s = await start_session(workspace_root, home, configuration=settings)
    try:
        _run, status = await s.run_and_wait("lost = 'old kernel'", "python", timeout=90)
        assert status["state"] == "ok"
        run_id = await s.run(SLOW_LOOP, "python")
        await s.wait_for(lambda: "3\n" in s.text(run_id), 60, "some output")
        await gw.kill()  # the gateway and its kernels
        gw.launch()  # back on the same port, without the kernel
        status = await s.finished(run_id, 60)
        assert status["state"] == "died"
        assert "no longer has this kernel" in status["message"]
        assert "state (variables, imports) was lost" in status["message"]
        await gw.wait_ready(60)
        # A new kernel: the next run works, and the old state is gone, as the user was told.
        run_id, status = await s.run_and_wait("print(lost)", "python", timeout=90)
        assert status["state"] == "error"
        assert "NameError" in s.text(run_id)
        assert "state (variables, imports) was lost" in shown(s)
    finally:
        await stop_session(s)
        await gw.stop()


async def test_gateway_killed_during_a_run(tmp_path: Path, workspace_root: Path, home: Path) -> None:
    gw = await start_gateway("kg", tmp_path / "kg")
    s = await start_session(workspace_root, home, configuration=gateway_settings(gw.url, gatewayConnectTimeout=3))
    try:
        run_id = await s.run(SLOW_LOOP, "python")
        await s.wait_for(lambda: "3\n" in s.text(run_id), 90, "some output")
        await gw.kill()
        started = time.monotonic()
        status = await s.finished(run_id, 60)
        assert time.monotonic() - started < 30
        assert status["state"] == "died"
        assert "could not be restored within 3 s" in status["message"]
        # The gateway stays away: the next run says so instead of waiting.
        _run, status = await s.run_and_wait("print(1)", "python", timeout=60)
        assert status["state"] == "error"
        assert "Cannot reach the kernel gateway" in status["message"]
    finally:
        await stop_session(s)


async def test_kernel_culled_by_the_gateway(tmp_path: Path, workspace_root: Path, home: Path) -> None:
    cull = (
        "--MappingKernelManager.cull_idle_timeout=2",
        "--MappingKernelManager.cull_interval=1",
        "--MappingKernelManager.cull_connected=True",
    )
    gw = await start_gateway("kg", tmp_path / "kg", extra=cull)
    s = await start_session(workspace_root, home, configuration=gateway_settings(gw.url))
    try:
        _run, status = await s.run_and_wait("lost = 'culled'", "python", timeout=90)
        assert status["state"] == "ok"
        dead = await s.wait_for(
            lambda: next((n for n in s.notes[p.KERNEL_STATUS] if n["state"] == "dead"), None), 60, "the cull"
        )
        assert "shut the kernel down (idle culling" in dead["message"]
        assert "the next run starts a new kernel" in dead["message"]
        # An idle kernel that was culled is not started again by itself (that would undo the culling): once
        # the gateway has finished shutting it down, it runs no kernel.
        assert await no_kernels_left(gw)
        run_id, status = await s.run_and_wait("print(lost)", "python", timeout=90)
        assert status["state"] == "error"
        assert "NameError" in s.text(run_id)
    finally:
        await stop_session(s)
        await gw.stop()


async def test_kernel_process_dies_on_the_gateway(tmp_path: Path, workspace_root: Path, home: Path) -> None:
    gw = await start_gateway("kg", tmp_path / "kg")
    s = await start_session(workspace_root, home, configuration=gateway_settings(gw.url))
    try:
        _run, status = await s.run_and_wait("lost = 'before'", "python", timeout=90)
        run_id = await s.run("import os, time\nprint('bye', flush=True)\ntime.sleep(0.2)\nos._exit(1)", "python")
        status = await s.finished(run_id, 60)
        assert status["state"] == "died"
        assert "died and was restarted" in status["message"]
        run_id, status = await s.run_and_wait("print(lost)", "python", timeout=90)
        assert status["state"] == "error"
        assert "NameError" in s.text(run_id)
    finally:
        await stop_session(s)
        await gw.stop()
