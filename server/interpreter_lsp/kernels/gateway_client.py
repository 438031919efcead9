"""A small client for a Jupyter Kernel Gateway or Enterprise Gateway: the REST API (httpx) and the
channels websocket (websockets). It owns the connection settings (token, TLS, timeouts) and turns every
failure into a `GatewayError` whose text says what happened and what to do.

What crosses the wire: the kernelspec name, the KERNEL_* values the user set (KERNEL_USERNAME,
KERNEL_WORKING_DIR), the code of runs and the answers to input(). Never the editor's environment."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import logging
import ssl
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit, urlunsplit

from ..imports import HTTPX_AT_FIRST_REQUEST, off_the_loop, preload
from ..languages import canonical_language
from .kernel import KernelStartError
from .specs import KernelChoice, UnknownLanguage

if TYPE_CHECKING:
    import httpx
    from websockets.asyncio.client import ClientConnection

    from ..settings import KernelSettings

log = logging.getLogger(__name__)


class GatewayError(KernelStartError):
    """A gateway failure, said so a person can act on it."""


class GatewayUnreachable(GatewayError):
    """Nothing answered (refused, timed out, DNS): the gateway may be restarting."""


class KernelGone(GatewayError):
    """The gateway does not know this kernel (any more)."""


@dataclass(frozen=True)
class GatewayConfig:
    """Where the gateway is and how to talk to it; decided by the workspace from the user's settings."""

    url: str
    token: str | None = None
    ca_bundle: str | None = None
    validate_cert: bool = True
    connect_timeout: float = 10.0
    request_timeout: float = 60.0
    kernels: tuple[tuple[str, str], ...] = ()  # (language, kernelspec name)
    username: str | None = None
    working_dir: str | None = None

    @classmethod
    def from_settings(cls, kernel: KernelSettings) -> GatewayConfig | None:
        if not kernel.gateway_url:
            return None
        return cls(
            url=kernel.gateway_url.rstrip("/"),
            token=kernel.gateway_token,
            ca_bundle=kernel.gateway_ca_bundle,
            validate_cert=kernel.gateway_validate_cert,
            connect_timeout=kernel.gateway_connect_timeout,
            request_timeout=kernel.gateway_request_timeout,
            kernels=tuple(sorted((canonical_language(k), v) for k, v in kernel.gateway_kernels.items())),
            username=kernel.gateway_username,
            working_dir=kernel.gateway_working_dir,
        )

    @property
    def shown_url(self) -> str:
        """The URL without credentials or query (a `?token=` must never reach a message or the status)."""
        parts = urlsplit(self.url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = host + (f":{parts.port}" if parts.port else "")
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))

    def kernel_env(self) -> dict[str, str]:
        """The only environment a remote kernel gets from us: what the user set for the gateway."""
        env: dict[str, str] = {}
        if self.username:
            env["KERNEL_USERNAME"] = self.username
        if self.working_dir:
            env["KERNEL_WORKING_DIR"] = self.working_dir
        return env


def _ssl_context(config: GatewayConfig) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=config.ca_bundle) if config.ca_bundle else ssl.create_default_context()
    if not config.validate_cert:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _find(exc: BaseException | None, kind: type[BaseException]) -> BaseException | None:
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, kind):
            return exc
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


class GatewayClient:
    """One per gateway configuration (shared by the kernels of a workspace)."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        parts = urlsplit(config.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise GatewayError(
                f"interpreter.kernel.gatewayUrl must be an http:// or https:// URL, not {config.shown_url!r}"
            )
        self._https = parts.scheme == "https"
        self._ssl: ssl.SSLContext | None = None  # https: made with the HTTP client (a CA store read: 30-45 ms)
        self._ws_base = urlunsplit(("wss" if self._https else "ws", parts.netloc, parts.path, "", ""))
        self._headers = {"Authorization": f"token {config.token}"} if config.token else {}
        # Made at the first request (the websocket's too), in a thread: httpx's import (~100-180 ms when nothing
        # imported it yet: a gateway user with no model) and the TLS contexts (the CA store read: 30-45 ms,
        # httpx's own even for http) would hold the event loop, which answers the editor meanwhile.
        self._http: httpx.AsyncClient | None = None
        self._making: asyncio.Future[httpx.AsyncClient] | None = None
        self._specs: dict[str, Any] | None = None

    def _make_http(self) -> httpx.AsyncClient:
        import httpx

        preload(HTTPX_AT_FIRST_REQUEST)
        config = self.config
        if self._https and self._ssl is None:
            try:
                self._ssl = _ssl_context(config)
            except (OSError, ssl.SSLError) as exc:
                raise GatewayError(
                    f"Cannot use the CA bundle {config.ca_bundle!r} (interpreter.kernel.gatewayCaBundle): {exc}. "
                    "Point it to a PEM file of the CA that signed the gateway's certificate."
                ) from exc
        return httpx.AsyncClient(
            base_url=config.url,
            headers=self._headers,
            verify=self._ssl if self._ssl is not None else True,
            timeout=httpx.Timeout(config.request_timeout, connect=config.connect_timeout),
            follow_redirects=False,
        )

    async def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            if self._making is None:  # one client, however many requests wait for it
                self._making = asyncio.ensure_future(off_the_loop(self._make_http))
            try:
                self._http = await asyncio.shield(self._making)
            except GatewayError:  # an unusable CA bundle: said, and read again at the next request
                self._making = None
                raise
            except Exception as exc:  # a broken install: said, and tried again at the next request
                self._making = None
                raise GatewayError(
                    f"Cannot set up the HTTP client for the gateway ({type(exc).__name__}: {exc}): reinstall "
                    "interpreter-lsp (pip install --force-reinstall interpreter-lsp)."
                ) from exc
        return self._http

    async def close(self) -> None:
        if self._http is None and self._making is not None:
            with contextlib.suppress(Exception):
                self._http = await self._making
        if self._http is not None:
            await self._http.aclose()

    # ---- errors -----------------------------------------------------------------------------------------

    def _transport_error(self, exc: BaseException, what: str) -> GatewayError:
        url = self.config.shown_url
        if (cert := _find(exc, ssl.SSLCertVerificationError)) is not None:
            detail = getattr(cert, "verify_message", None) or str(cert)
            return GatewayError(
                f"TLS failure talking to the gateway at {url}: its certificate could not be verified ({detail}). "
                "Set interpreter.kernel.gatewayCaBundle to the PEM file of the CA that signed it."
            )
        if (tls := _find(exc, ssl.SSLError)) is not None:
            return GatewayError(
                f"TLS failure talking to the gateway at {url}: {tls}. Check that the gateway serves https on "
                "that port (or use an http:// URL if it does not)."
            )
        # An httpx error comes only once httpx is imported: not imported here, on the loop (a websocket's error).
        loaded = sys.modules.get("httpx")
        timeouts = (loaded.TimeoutException, TimeoutError) if loaded is not None else (TimeoutError,)
        protocol_error = loaded.RemoteProtocolError if loaded is not None else ()
        if isinstance(exc, timeouts):
            return GatewayUnreachable(
                f"The gateway at {url} did not answer {what} in time "
                f"(connect {self.config.connect_timeout:g} s, request {self.config.request_timeout:g} s): "
                "check that it runs and is reachable, or raise interpreter.kernel.gatewayRequestTimeout."
            )
        if isinstance(exc, protocol_error) and "without sending a response" in str(exc):
            # Accepted, then closed unanswered: a gateway going down (its socket still listening for an
            # instant) as often as a wrong scheme. Reconnecting keeps trying this until its window ends.
            return GatewayUnreachable(
                f"The gateway at {url} closed the connection without answering {what}: check that it runs, "
                "and that the URL's scheme (http or https) and port are right."
            )
        if isinstance(exc, protocol_error):
            return GatewayError(
                f"The gateway at {url} did not answer {what} with valid HTTP ({exc}): "
                "check the URL (http vs https, the port)."
            )
        reason = str(exc) or type(exc).__name__
        return GatewayUnreachable(
            f"Cannot reach the kernel gateway at {url} ({reason}): check interpreter.kernel.gatewayUrl and "
            "that the gateway is running."
        )

    def _status_error(self, status: int, body: str, what: str) -> GatewayError:
        url = self.config.shown_url
        detail = body.strip()[:300]
        try:
            data = json.loads(body)
            detail = str(data.get("message") or data.get("reason") or detail)[:300]
        except (ValueError, AttributeError):
            pass
        if status == 403 and "KERNEL_USERNAME" in detail:
            # Enterprise Gateway refuses kernels for users it does not authorize (root, by default).
            return GatewayError(
                f"The gateway at {url} refused {what} (HTTP 403: {detail}). Set interpreter.kernel.gatewayUsername "
                "to the user the kernel should run as there (sent as KERNEL_USERNAME)."
            )
        if status in (401, 403):
            return GatewayError(
                f"The gateway at {url} refused {what} (HTTP {status}): the token is wrong or missing. "
                "Set interpreter.kernel.gatewayToken to the gateway's token (KG_AUTH_TOKEN / EG_AUTH_TOKEN)."
            )
        if status == 404:
            return KernelGone(f"The gateway at {url} does not know {what} (HTTP 404).")
        return GatewayError(f"The gateway at {url} failed {what} (HTTP {status}): {detail}")

    async def _request(self, method: str, path: str, what: str, **kwargs: Any) -> httpx.Response:
        http = await self._client()
        import httpx  # imported by _client

        try:
            response = await http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise self._transport_error(exc, what) from exc
        except (OSError, ssl.SSLError) as exc:
            raise self._transport_error(exc, what) from exc
        if response.status_code >= 400 or response.status_code in (301, 302, 303, 307, 308):
            raise self._status_error(response.status_code, response.text, what)
        return response

    # ---- kernelspecs ------------------------------------------------------------------------------------

    async def kernelspecs(self, refresh: bool = False) -> dict[str, Any]:
        if self._specs is None or refresh:
            response = await self._request("GET", "/api/kernelspecs", "the kernelspec list")
            try:
                data = response.json()
                specs = data["kernelspecs"]
                assert isinstance(specs, dict)
            except (ValueError, KeyError, AssertionError) as exc:
                raise GatewayError(
                    f"{self.config.shown_url} did not answer /api/kernelspecs like a Jupyter gateway: "
                    "check interpreter.kernel.gatewayUrl."
                ) from exc
            self._specs = data
        return self._specs

    def choice(self, language: str) -> KernelChoice:
        """The kernelspec for `language` on the gateway, without a request: the user's mapping, else the
        cached list (once fetched). Before the first fetch the name is left empty and `resolve` fills it."""
        lang = canonical_language(language)
        mapped = dict(self.config.kernels).get(lang)
        if mapped:
            return self._made(lang, mapped, "interpreter.kernel.gatewayKernels")
        if self._specs is None:
            return KernelChoice(lang, "", (), f"the gateway {self.config.shown_url} (kernelspec not asked yet)")
        return self._from_list(lang)

    async def resolve(self, language: str) -> KernelChoice:
        choice = self.choice(language)
        if choice.name:
            return choice
        await self.kernelspecs()
        return self._from_list(canonical_language(language))

    def _made(self, lang: str, name: str, why: str) -> KernelChoice:
        return KernelChoice(lang, name, (), f"kernelspec {name!r} on the gateway {self.config.shown_url} ({why})")

    def _from_list(self, lang: str) -> KernelChoice:
        data = self._specs or {}
        specs: dict[str, Any] = data.get("kernelspecs", {})
        default = data.get("default")

        def language_of(name: str) -> str:
            spec = specs.get(name, {}).get("spec", {}) if isinstance(specs.get(name), dict) else {}
            return canonical_language(str(spec.get("language", "")))

        if default in specs and language_of(default) == lang:
            return self._made(lang, default, "the gateway's default")
        for name in sorted(specs):
            if language_of(name) == lang:
                return self._made(lang, name, f"the first {lang} kernelspec it offers")
        offered = sorted({language_of(n) for n in specs} - {""})
        raise UnknownLanguage(
            f"The gateway {self.config.shown_url} offers no kernel for {lang!r} (it offers: "
            f"{', '.join(offered) or 'nothing'}). Install one there, or map the language to a kernelspec "
            "in interpreter.kernel.gatewayKernels."
        )

    # ---- kernels ------------------------------------------------------------------------------------------

    async def start_kernel(self, name: str) -> str:
        body = {"name": name, "env": self.config.kernel_env()}
        response = await self._request("POST", "/api/kernels", f"to start a {name!r} kernel", json=body)
        try:
            return str(response.json()["id"])
        except (ValueError, KeyError) as exc:
            url = self.config.shown_url
            raise GatewayError(f"The gateway at {url} started no kernel: {response.text[:200]}") from exc

    async def kernel_exists(self, kernel_id: str) -> bool:
        try:
            await self._request("GET", f"/api/kernels/{quote(kernel_id)}", "the kernel")
        except KernelGone:
            return False
        return True

    async def interrupt(self, kernel_id: str) -> None:
        await self._request("POST", f"/api/kernels/{quote(kernel_id)}/interrupt", "the interrupt")

    async def restart(self, kernel_id: str) -> None:
        await self._request("POST", f"/api/kernels/{quote(kernel_id)}/restart", "the restart")

    async def delete(self, kernel_id: str) -> None:
        await self._request("DELETE", f"/api/kernels/{quote(kernel_id)}", "the kernel's shutdown")

    async def connect(self, kernel_id: str, session_id: str) -> ClientConnection:
        """The channels websocket (JSON text frames: no subprotocol is offered)."""
        # websockets' import (~30 ms) off the loop, the first time; the TLS context is the HTTP client's.
        await self._client()
        await off_the_loop(lambda: importlib.import_module("websockets.asyncio.client"))
        from websockets.asyncio.client import connect
        from websockets.exceptions import InvalidHandshake, InvalidStatus

        url = f"{self._ws_base}/api/kernels/{quote(kernel_id)}/channels?session_id={session_id}"
        try:
            return await connect(
                url,
                additional_headers=self._headers,
                ssl=self._ssl,
                open_timeout=self.config.connect_timeout,
                max_size=None,
                # Pings find a silently dead connection (a network partition) within 40 s.
                ping_interval=20,
                ping_timeout=20,
                compression=None,
            )
        except InvalidStatus as exc:
            raise self._status_error(exc.response.status_code, "", "the kernel's websocket") from exc
        except (InvalidHandshake, OSError, TimeoutError, ssl.SSLError) as exc:
            raise self._transport_error(exc, "the kernel's websocket") from exc
