"""The gateway settings: validated, the token never shown, never taken from a repository's own file, and turned into the
only things that go to the gateway (no gateway process needed)."""

from __future__ import annotations

import asyncio
import shutil
import ssl
from pathlib import Path

import certifi
import pytest

from interpreter_lsp import settings as settings_mod
from interpreter_lsp.kernels.gateway_client import GatewayClient, GatewayConfig, GatewayError
from interpreter_lsp.kernels.specs import UnknownLanguage


def resolve(root: Path, client: dict) -> settings_mod.SettingsReport:
    return settings_mod.resolve(root, [("workspace/configuration", client)], user_file=root / "no-user-file.toml")


def test_every_gateway_key_parses(tmp_path: Path) -> None:
    kernel = {
        "gatewayUrl": "https://gw.example.org:8888/base",
        "gatewayToken": "tok-secret",
        "gatewayCaBundle": "/etc/ssl/our-ca.pem",
        "gatewayValidateCert": False,
        "gatewayConnectTimeout": 3,
        "gatewayRequestTimeout": 120,
        "gatewayKernels": {"py": "python3-gpu", "r": "ir"},
        "gatewayUsername": "alice",
        "gatewayWorkingDir": "/home/alice/project",
    }
    report = resolve(tmp_path, {"kernel": kernel})
    assert report.errors == []
    config = GatewayConfig.from_settings(report.settings.kernel)
    assert config is not None
    assert config.url == "https://gw.example.org:8888/base"
    assert config.validate_cert is False and config.connect_timeout == 3.0 and config.request_timeout == 120.0
    assert dict(config.kernels) == {"python": "python3-gpu", "r": "ir"}
    assert config.kernel_env() == {"KERNEL_USERNAME": "alice", "KERNEL_WORKING_DIR": "/home/alice/project"}
    assert report.sources["kernel.gatewayUrl"] == "workspace/configuration"


def test_bad_values_are_reported_and_the_token_never_shown(tmp_path: Path) -> None:
    report = resolve(
        tmp_path,
        {"kernel": {"gatewayToken": 12345, "gatewayConnectTimeout": 0, "gatewayKernels": ["python3"],
                    "gatewayValidateCert": "no"}},
    )
    text = "\n".join(report.errors)
    assert "gatewayToken: expected a string; got ***" in text and "12345" not in text
    assert "gatewayConnectTimeout: expected a number from 0.1 to 600" in text
    assert "gatewayKernels: expected an object" in text
    assert "gatewayValidateCert: expected true or false" in text
    assert GatewayConfig.from_settings(report.settings.kernel) is None
    # A URL that is not http(s) is refused when the first kernel would start, saying what to set.
    with pytest.raises(GatewayError, match="gatewayUrl must be an http:// or https:// URL"):
        GatewayClient(GatewayConfig(url="gw.example.org:8888"))


def test_a_workspace_file_cannot_send_code_elsewhere(tmp_path: Path) -> None:
    (tmp_path / ".interpreter-lsp.toml").write_text(
        '[interpreter.kernel]\ngateway_url = "http://attacker.example:8888"\ngateway_validate_cert = false\n'
        'python = "python3"\n'
    )
    report = resolve(tmp_path, {})
    assert report.settings.kernel.gateway_url is None
    assert report.settings.kernel.gateway_validate_cert is True
    # Ignored, and the user is asked whether to allow this file's settings.
    assert any("interpreter.kernel.gatewayUrl is ignored here" in line for line in report.ignored)
    assert report.confirm is not None and "kernel.gatewayUrl" in report.confirm.keys
    # The user's own settings may.
    report = resolve(tmp_path, {"kernel": {"gatewayUrl": "http://127.0.0.1:8888"}})
    assert report.settings.kernel.gateway_url == "http://127.0.0.1:8888"


def test_the_url_shown_carries_no_credentials() -> None:
    config = GatewayConfig(url="https://user:pw@gw.example.org:9443/base?token=abc")
    assert config.shown_url == "https://gw.example.org:9443/base"


async def test_client_choice_without_and_with_the_mapping() -> None:
    client = GatewayClient(GatewayConfig(url="http://127.0.0.1:9", kernels=(("python", "python3-gpu"),)))
    try:
        assert client.choice("py").name == "python3-gpu"
        assert client.choice("shell").name == ""  # resolved from the gateway's list when the kernel starts
        client._specs = {"default": "python3", "kernelspecs": {"bash": {"spec": {"language": "bash"}}}}
        assert client.choice("shell").name == "bash"
        with pytest.raises(UnknownLanguage, match=r"offers no kernel for 'ruby' .*it offers: shell"):
            client.choice("ruby")
    finally:
        await client.close()


async def test_an_unusable_ca_bundle_is_said_plainly_at_the_first_request(tmp_path: Path) -> None:
    """The TLS context is made with the HTTP client, off the loop, at the first request (or websocket): the
    bundle's problem is said there, each time it is still there, and a fixed bundle is read again."""
    bundle = tmp_path / "ca.pem"
    client = GatewayClient(GatewayConfig(url="https://127.0.0.1:9", ca_bundle=str(bundle)))
    try:
        for attempt in (client.kernelspecs, lambda: client.connect("k-1", "s-1")):
            with pytest.raises(GatewayError, match=r"Cannot use the CA bundle .*ca\.pem.*Point it to a PEM file"):
                await attempt()
        await asyncio.to_thread(shutil.copyfile, certifi.where(), bundle)  # a usable bundle: the request goes out
        with pytest.raises(GatewayError, match="Cannot reach the kernel gateway"):
            await client.kernelspecs()
        assert isinstance(client._ssl, ssl.SSLContext)
    finally:
        await client.close()


async def test_a_gateway_that_closes_the_connection_unanswered_is_unreachable_not_misconfigured() -> None:
    """A gateway going down still accepts for an instant, then closes: reconnecting must keep trying
    (GatewayUnreachable) until its window ends, not give up as if the URL were wrong (a CI run saw it)."""
    import asyncio

    from interpreter_lsp.kernels.gateway_client import GatewayUnreachable

    async def close_at_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1)
        writer.close()

    server = await asyncio.start_server(close_at_once, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = GatewayClient(GatewayConfig(url=f"http://127.0.0.1:{port}"))
    try:
        with pytest.raises(GatewayUnreachable, match=r"closed the connection without answering the kernel: check"):
            await client.kernel_exists("k-1")
    finally:
        await client.close()
        server.close()
        await server.wait_closed()
