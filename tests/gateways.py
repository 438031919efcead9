"""Real Jupyter gateways for tests and benchmarks: a Kernel Gateway or an Enterprise Gateway (its local
process proxy) started on 127.0.0.1 with a token, from the virtualenvs scripts/setup.d/gateways.sh makes
in .venv-gateways/; a TCP proxy the test controls (drops every connection on demand, records what the
server sent); a self-signed certificate for TLS. Waits are bounded on events, never fixed sleeps."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
VENVS = REPO / ".venv-gateways"
TOKEN = "test-gateway-token-1f9c2e"
SETUP_HINT = "run `bash scripts/setup.d/gateways.sh` (scripts/setup.sh does it for the full setup)"

KINDS = {
    "kg": ("jupyter-kernelgateway", "KernelGatewayApp"),
    "eg": ("jupyter-enterprisegateway", "EnterpriseGatewayApp"),
}


def gateway_missing(kind: str) -> str | None:
    """Why a gateway cannot be started here (a skip reason), or None."""
    exe = VENVS / kind / "bin" / KINDS[kind][0]
    if not exe.exists():
        return f"{exe.relative_to(REPO)} is not installed: {SETUP_HINT}"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Gateway:
    """One gateway process. `stop()` / `kill()` / `start()` again on the same port (a gateway restart)."""

    def __init__(
        self,
        kind: str,
        workdir: Path,
        *,
        token: str = TOKEN,
        port: int | None = None,
        certfile: Path | None = None,
        keyfile: Path | None = None,
        extra: tuple[str, ...] = (),
    ) -> None:
        self.kind = kind
        self.workdir = workdir
        self.token = token
        self.port = port or free_port()
        self.certfile, self.keyfile = certfile, keyfile
        self.extra = extra
        self.process: subprocess.Popen[bytes] | None = None
        self.log = workdir / f"{kind}-{self.port}.log"

    @property
    def url(self) -> str:
        scheme = "https" if self.certfile else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        exe, app = KINDS[self.kind]
        cmd = [
            str(VENVS / self.kind / "bin" / exe),
            f"--{app}.ip=127.0.0.1",
            f"--{app}.port={self.port}",
            f"--{app}.port_retries=0",
            f"--{app}.auth_token={self.token}",
        ]
        if self.certfile and self.keyfile:
            cmd += [f"--{app}.certfile={self.certfile}", f"--{app}.keyfile={self.keyfile}"]
        # GET /api/kernels, for the tests' own checks (the server never lists kernels).
        if self.kind == "kg":
            cmd.append("--JupyterWebsocketPersonality.list_kernels=True")
        else:
            cmd.append("--EnterpriseGatewayApp.list_kernels=True")
        return [*cmd, *self.extra]

    def env(self) -> dict[str, str]:
        """The gateway's own environment: a clean one (its kernels must show nothing of the editor's)."""
        home = self.workdir / "gateway-home"
        home.mkdir(exist_ok=True)
        return {
            "PATH": f"{VENVS / self.kind / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": str(home),
            "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
            "JUPYTER_DATA_DIR": str(VENVS / self.kind / "share" / "jupyter"),
            "LANG": "C.UTF-8",
        }

    async def start(self, timeout: float = 60.0) -> Gateway:
        self.launch()
        await self.wait_ready(timeout)
        return self

    def launch(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                self.command(),
                cwd=self.workdir,
                env=self.env(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    async def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        verify = False if self.certfile else True
        async with httpx.AsyncClient(verify=verify, timeout=2.0) as client:
            while time.monotonic() < deadline:
                if self.process is not None and self.process.poll() is not None:
                    raise RuntimeError(f"the {self.kind} gateway exited: {self.log.read_text()[-2000:]}")
                with contextlib.suppress(httpx.HTTPError):
                    headers = {"Authorization": f"token {self.token}"}
                    r = await client.get(f"{self.url}/api/kernelspecs", headers=headers)
                    if r.status_code == 200:
                        return
                await asyncio.sleep(0.1)  # a bounded wait for a process we started to listen
        tail = self.log.read_text()[-2000:]
        raise RuntimeError(f"the {self.kind} gateway did not answer within {timeout:g} s: {tail}")

    async def kernels(self) -> list[dict]:
        verify = False if self.certfile else True
        async with httpx.AsyncClient(verify=verify, timeout=10.0) as client:
            r = await client.get(f"{self.url}/api/kernels", headers={"Authorization": f"token {self.token}"})
            r.raise_for_status()
            return r.json()

    def _signal_group(self, sig: int) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, sig)

    async def kill(self) -> None:
        """SIGKILL the gateway and every kernel it started (its process group): it is gone at once."""
        self._signal_group(signal.SIGKILL)
        if self.process is not None:
            await asyncio.to_thread(self.process.wait, 30)

    async def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self._signal_group(signal.SIGTERM)
        try:
            await asyncio.to_thread(self.process.wait, 15)
        except subprocess.TimeoutExpired:
            await self.kill()


class _ClientFrames:
    """Reads what a websocket client sent after its upgrade request: unmasks its frames (RFC 6455 5.2)."""

    def __init__(self, out: list[bytes]) -> None:
        self.buffer = bytearray()
        self.upgraded = False
        self.out = out

    def feed(self, data: bytes) -> None:
        self.buffer += data
        if not self.upgraded:
            head, sep, rest = bytes(self.buffer).partition(b"\r\n\r\n")
            if not sep:
                return
            if b"upgrade: websocket" not in head.lower():
                self.buffer.clear()  # plain HTTP: readable as it is
                return
            self.upgraded, self.buffer = True, bytearray(rest)
        while len(self.buffer) >= 2:
            length, offset = self.buffer[1] & 0x7F, 2
            if length == 126:
                length, offset = int.from_bytes(self.buffer[2:4], "big"), 4
            elif length == 127:
                length, offset = int.from_bytes(self.buffer[2:10], "big"), 10
            masked = bool(self.buffer[1] & 0x80)
            end = offset + (4 if masked else 0) + length
            if len(self.buffer) < end:
                return
            key = self.buffer[offset : offset + 4] if masked else b"\0\0\0\0"
            payload = self.buffer[end - length : end]
            self.out.append(bytes(b ^ key[i % 4] for i, b in enumerate(payload)))
            del self.buffer[:end]


class DropProxy:
    """A TCP proxy on 127.0.0.1 in front of a gateway. `drop()` closes every connection open now (the
    websocket among them) and lets new ones through; `sent` is every byte the server sent, and `frames`
    the payloads of the websocket frames it sent, unmasked."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self.sent = bytearray()
        self.frames: list[bytes] = []
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.connections = 0
        self.refuse = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> DropProxy:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refuse:
            writer.close()
            return
        self.connections += 1
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        frames = _ClientFrames(self.frames)

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, record: bool) -> None:
            try:
                while data := await src.read(65536):
                    if record and len(self.sent) < 50_000_000:
                        self.sent += data
                        frames.feed(data)
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pump(reader, up_writer, True), pump(up_reader, writer, False))
        self._writers.difference_update((writer, up_writer))

    def drop(self) -> int:
        """Abort every open connection (as a network failure would); returns how many."""
        count = 0
        for writer in list(self._writers):
            transport = writer.transport
            if not transport.is_closing():
                transport.abort()
                count += 1
        self._writers.clear()
        return count

    async def stop(self) -> None:
        self.drop()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


def self_signed_cert(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 (and its key), made with the openssl command line."""
    if shutil.which("openssl") is None:
        raise RuntimeError("openssl is needed to make a test certificate")
    cert, key = folder / "gateway.crt", folder / "gateway.key"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
            "-keyout", str(key), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def gateway_settings(url: str, token: str | None = TOKEN, **extra: object) -> dict[str, object]:
    """The editor's `interpreter` settings for a gateway."""
    kernel: dict[str, object] = {"gatewayUrl": url, "gatewayConnectTimeout": 5, "gatewayRequestTimeout": 60}
    if token is not None:
        kernel["gatewayToken"] = token
    kernel.update(extra)
    return {"kernel": kernel}

