"""The kernels of one workspace: one per language, started on first use (python: in the background
right after `initialized`), restarted when they die. The pool maps languages to kernels and chooses
their backend: a local process, or a kernel on a Jupyter gateway when `kernel.gatewayUrl` is set."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..languages import canonical_language
from . import cgroups
from .backend import KernelBackend
from .connection import load
from .gateway import GatewayKernel
from .gateway_client import GatewayClient, GatewayConfig
from .kernel import CommandWrapper, Kernel, KernelStartError
from .launcher import Limits
from .limits import describe, limit_reached, process_limit_ignored
from .readonly import release_placeholders
from .restarts import MAX_STARTS, StartFailures, crash_loop
from .specs import KernelChoice, choose_kernel

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LaunchOptions:
    """What a kernel is started with: decided by the workspace from its settings."""

    env: dict[str, str]
    command_wrapper: CommandWrapper | None = None
    sandbox: str | None = None  # a sentence for status, e.g. "bubblewrap (no network)"
    limits: Limits = field(default_factory=Limits)


KernelStateListener = Callable[[str, str, str | None], None]  # (language, state, message)

# What a remote kernel does not get, and why (said in `interpreter.status`, never pretended).
REMOTE_SANDBOX = "off (remote kernel: bubblewrap confines local processes; the gateway's host isolates this one)"
# How long the server's shutdown waits for kernel starts it cancelled to end what they made.
SHUTDOWN_START_WAIT = 15.0
REMOTE_FILES = "off (remote kernel: its files are on the gateway's host, not watched here)"


class KernelPool:
    def __init__(
        self,
        root: Path,
        runtime_dir: Path,
        specs_root: Path,
        launch_options: Callable[[], LaunchOptions],
        python_setting: Callable[[], str | None],
        on_state: KernelStateListener,
        on_died: Callable[[str, str | None], None],
        refuse: Callable[[], str | None] = lambda: None,
        settings_ready: Callable[[], Awaitable[None]] | None = None,
        on_ready: Callable[[KernelBackend], Awaitable[None]] | None = None,
        gateway: Callable[[], GatewayConfig | None] = lambda: None,
        on_failed: Callable[[str, str], None] = lambda language, message: None,
    ) -> None:
        self.root = root
        self._runtime_dir = runtime_dir
        self._specs_root = specs_root
        self._launch_options = launch_options
        self._python_setting = python_setting
        self._on_state = on_state
        self._on_died = on_died  # (language, cause): a running kernel died; it is being restarted
        self._on_failed = on_failed  # (language, why): it could not be restarted, and stays dead
        # Failed starts in a row, and the languages whose kernel stays dead (why) until a run, a restart or a
        # settings change asks again (kernels/restarts.py).
        self._failures: dict[str, StartFailures] = {}
        self._gave_up: dict[str, str] = {}
        self._said_dead: dict[str, str] = {}  # the last death said, per language (_state)
        self._kernels: dict[str, KernelBackend] = {}
        self._starting: dict[str, asyncio.Task[KernelBackend]] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._sandbox: dict[str, str | None] = {}
        self._closed = False
        self._choices: dict[str, KernelChoice] = {}
        # Says why no kernel may start (an untrusted workspace: even its venv's interpreter is its code).
        self._refuse = refuse
        # Kernels start with the editor's settings (the sandbox!), never with defaults that raced them.
        self._settings_ready = settings_ready
        # Runs once a kernel (re)started, before any run gets it (e.g. the figure hook).
        self._on_ready = on_ready
        self._gateway = gateway
        self._gateway_client: GatewayClient | None = None
        self._old_clients: list[GatewayClient] = []
        self._started = 0  # kernels started: each gets a runtime directory of its own
        self._said_process_limit: str | None = None

    def gateway_client(self) -> GatewayClient | None:
        """The client of the configured gateway (None: kernels are local); a new one when settings change."""
        config = self._gateway()
        if config is None:
            return None
        if self._gateway_client is None or self._gateway_client.config != config:
            if self._gateway_client is not None:
                self._old_clients.append(self._gateway_client)  # its kernels may still use it: closed at shutdown
            self._gateway_client = GatewayClient(config)
        return self._gateway_client

    def is_remote(self, language: str) -> bool:
        return isinstance(self._kernels.get(canonical_language(language)), GatewayKernel)

    def choice(self, language: str) -> KernelChoice:
        """Resolve a language to a kernelspec (raises UnknownLanguage with what is available). Cached:
        every run asks, and resolving looks at the disk."""
        lang = canonical_language(language)
        if (client := self.gateway_client()) is not None:
            return client.choice(lang)
        cached = self._choices.get(lang)
        if cached is None:
            cached = choose_kernel(lang, self.root, self._specs_root, self._python_setting())
            self._choices[lang] = cached
        return cached

    def choice_for_fresh(self, language: str) -> KernelChoice:
        """The kernelspec a fresh kernel of `language` gets now (what `fresh` would start)."""
        return choose_kernel(canonical_language(language), self.root, self._specs_root, self._python_setting())

    def fresh(self, language: str, runtime_dir: Path) -> tuple[Kernel, str | None]:
        """A local kernel of this workspace's kind that the pool does not hold (verification's, verify.py):
        the same kernelspec, environment, sandbox and limits as the pool's own, and the same execution
        path. Not started: the caller starts it and shuts it down. Returns it and its sandbox sentence."""
        lang = canonical_language(language)
        options = self._launch_options()
        kernel = Kernel(
            self.choice_for_fresh(lang),
            cwd=self.root,
            runtime_dir=runtime_dir,
            env=options.env,
            on_state=lambda _state, _message: None,  # not the workspace's kernel: its state is not news
            command_wrapper=options.command_wrapper,
            limits=options.limits,
            cgroup_root=cgroups.delegation().root if os.name == "posix" else None,
        )
        return kernel, options.sandbox

    def forget_choices(self) -> None:
        """Settings changed (kernel.python): resolve languages afresh, and start afresh a kernel that stays
        dead."""
        self._choices.clear()
        self._gave_up.clear()
        self._failures.clear()

    def run_lock(self, language: str) -> asyncio.Lock:
        """Runs on one kernel take turns in arrival order (asyncio.Lock wakes waiters FIFO)."""
        return self._locks.setdefault(canonical_language(language), asyncio.Lock())

    def existing(self, language: str) -> KernelBackend | None:
        return self._kernels.get(canonical_language(language))

    def local_pids(self) -> list[int]:
        """The processes of the kernels running on this machine (each one's launcher: its tree is below)."""
        return [pid for kernel in self._kernels.values() if not isinstance(kernel, GatewayKernel)
                if (pid := kernel.pid()) is not None]

    async def kernel(self, language: str) -> KernelBackend:
        """The running kernel for `language`, starting (or awaiting its restart) if needed; concurrent
        callers share one start."""
        lang = canonical_language(language)
        if self._closed:
            raise KernelStartError("The server is shutting down")
        if (reason := self._refuse()) is not None:
            raise KernelStartError(reason)
        task = self._starting.get(lang)
        if task is None:
            kernel = self._kernels.get(lang)
            if kernel is not None and kernel.state not in ("dead", "stopped"):
                return kernel
            if (why := self._gave_up.get(lang)) is not None:
                raise KernelStartError(why)  # it stays dead until a restart or a settings change
            task = self._track(lang, self._start_tries(lang))
        return await asyncio.shield(task)

    def _failures_of(self, lang: str) -> StartFailures:
        return self._failures.setdefault(lang, StartFailures())

    def _try_again(self, lang: str, exc: KernelStartError) -> float | None:
        """After a failed start: the delay before the next try, or None (the error stands; when tries ran
        out, said once, as the kernel's state)."""
        if not exc.retry:
            return None
        failures = self._failures_of(lang)
        delay = failures.failed()
        if delay is None:
            self._give_up(lang, str(exc))
            return None
        log.info("the %s kernel did not start (try %d of %d); trying again in %.1f s: %s",
                 lang, failures.count, MAX_STARTS, delay, exc)
        return delay

    def _state(self, lang: str, state: str, message: str | None) -> None:
        """A kernel's state, passed on; a death said just before for the same reason (a kernel dying again
        and again soon after each start) is not said again: one message per cause."""
        if state == "dead" and message:
            if self._failures_of(lang).in_streak() and self._said_dead.get(lang) == message:
                return
            self._said_dead[lang] = message
        self._on_state(lang, state, message)

    def _give_up(self, lang: str, why: str) -> None:
        self._gave_up[lang] = why
        self._failures_of(lang).reset()
        log.error("%s", why)
        self._on_state(lang, "dead", why)

    async def _start_tries(self, lang: str) -> KernelBackend:
        """Start the kernel, trying again with backoff when its process exits before it answers."""
        while True:
            try:
                kernel = await self._start(lang)
            except KernelStartError as exc:
                if (delay := self._try_again(lang, exc)) is None:
                    raise
                await asyncio.sleep(delay)
            else:
                self._failures_of(lang).ready()
                return kernel

    def _track(self, lang: str, coro: Awaitable[KernelBackend]) -> asyncio.Task[KernelBackend]:
        task = asyncio.ensure_future(coro)
        self._starting[lang] = task
        task.add_done_callback(lambda _t: self._starting.pop(lang, None) if self._starting.get(lang) is _t else None)
        return task

    async def _start(self, lang: str) -> KernelBackend:
        if self._settings_ready is not None:
            await self._settings_ready()
        if (reason := self._refuse()) is not None:
            raise KernelStartError(reason)
        old = self._kernels.get(lang)
        if isinstance(old, GatewayKernel):
            await old.shutdown(quietly=True)  # a dead remote kernel (e.g. culled): let go of its connection
        client = self.gateway_client()
        if client is not None:
            # Nothing of the editor's environment goes to a remote kernel: only what the user set.
            remote = GatewayKernel(
                client.choice(lang),
                client=client,
                on_state=lambda state, message: self._state(lang, state, message),
                on_death=self._restart_after_death,
            )
            self._kernels[lang] = remote
            self._sandbox[lang] = None
            await remote.start()
            await self._ready(remote)
            return remote
        with contextlib.suppress(ImportError):  # the kernel's start says it, in a sentence
            await load()  # before a kernelspec is looked up: jupyter_client imported off the loop
        choice = self.choice(lang)
        options = self._launch_options()
        cgroup_root = cgroups.delegation().root if os.name == "posix" else None
        if options.limits.processes and cgroup_root is None and (why := process_limit_ignored()):
            if why != self._said_process_limit:  # once, not at every start
                self._said_process_limit = why
                log.warning("kernel.processLimit does not hold: %s (run the server as a normal user)", why)
        self._started += 1
        kernel = Kernel(
            choice,
            cwd=self.root,
            # Its own directory: a sandboxed kernel sees its connection file, not another kernel's.
            runtime_dir=self._runtime_dir / f"{lang[:8]}-{self._started}",
            env=options.env,
            on_state=lambda state, message: self._state(lang, state, message),
            on_death=self._restart_after_death,
            command_wrapper=options.command_wrapper,
            limits=options.limits,
            cgroup_root=cgroup_root,
        )
        self._kernels[lang] = kernel
        self._sandbox[lang] = options.sandbox
        await kernel.start()
        await self._ready(kernel)
        return kernel

    async def _ready(self, kernel: KernelBackend) -> None:
        if self._on_ready is not None:
            try:
                await self._on_ready(kernel)
            except Exception:
                log.exception("preparing the %s kernel failed", kernel.language)

    async def _restart_after_death(self, kernel: KernelBackend) -> None:
        """A running kernel died: say so (once per streak of early deaths) and restart it, with backoff and
        a limit (kernels/restarts.py); when it cannot be restarted, say why, once."""
        if self._closed:
            return
        lang = kernel.language
        cause = getattr(kernel, "death_cause", None)
        failures = self._failures_of(lang)
        delay = failures.failed()
        if failures.count == 1:
            self._on_died(lang, cause)
        if delay is None:
            why = crash_loop(lang, cause or "no cause known", MAX_STARTS)
            self._give_up(lang, why)
            self._on_failed(lang, why)
            return
        task = self._track(lang, self._restart_kernel(kernel, "died", delay if failures.count > 1 else 0.0))
        try:
            await task
        except KernelStartError as exc:
            if lang in self._gave_up:
                self._on_failed(lang, str(exc))
            else:
                log.error("%s", exc)
        except Exception as exc:
            log.error("%s", exc)

    async def _restart_kernel(self, kernel: KernelBackend, reason: str, delay: float = 0.0) -> KernelBackend:
        """Restart the kernel, trying again with backoff when its process exits before it answers."""
        while True:
            if delay:
                await asyncio.sleep(delay)
            try:
                await kernel.restart(reason=reason)
            except KernelStartError as exc:
                next_delay = self._try_again(kernel.language, exc)
                if next_delay is None:
                    raise
                delay = next_delay
                continue
            await self._ready(kernel)
            self._failures_of(kernel.language).ready()
            return kernel

    async def restart(self, language: str) -> None:
        lang = canonical_language(language)
        kernel = self._kernels.get(lang)
        if lang in self._starting:  # a start (or its tries) under way: that is the restart asked for
            await self.kernel(lang)
            return
        self._gave_up.pop(lang, None)  # the user asks: a new series of tries
        self._failures_of(lang).reset()
        if kernel is None:
            await self.kernel(lang)
            return
        await self._track(lang, self._restart_kernel(kernel, "interrupted"))

    async def restart_all(self) -> None:
        """Start every kernel afresh with the current launch options (e.g. the sandbox was turned on). Each
        kernel restarts in its turn, after the runs already waiting for it (a run that never ends is the
        user's to interrupt); the runs after it get the new kernel."""
        self.forget_choices()
        # A start under way (the warm-up, a first run) is let finish first: shutting a kernel down in the
        # middle of its start would fail the runs waiting for it. What it started is then restarted too.
        while starting := list(self._starting.values()):
            await asyncio.gather(*starting, return_exceptions=True)
        for lang in list(self._kernels):
            async with self.run_lock(lang):
                kernel = self._kernels.pop(lang, None)
                if kernel is not None:
                    with contextlib.suppress(Exception):
                        await kernel.shutdown()
                with contextlib.suppress(Exception):
                    await self.kernel(lang)

    async def shutdown(self) -> None:
        self._closed = True
        starting = list(self._starting.values())
        for task in starting:
            task.cancel()
        # A start cancelled mid-way ends what it made (Kernel.start); wait for that (bounded), so that no
        # kernel process is left running after the server has gone.
        if starting:
            await asyncio.wait(starting, timeout=SHUTDOWN_START_WAIT)
        kernels = list(self._kernels.values())
        self._kernels.clear()
        await asyncio.gather(*(k.shutdown() for k in kernels), return_exceptions=True)
        release_placeholders(self.root)  # the sandbox's empty placeholder directories (readonly.py)
        clients = [*self._old_clients, *([self._gateway_client] if self._gateway_client else [])]
        self._gateway_client, self._old_clients = None, []
        await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)

    def limit_reached(self, language: str, error: dict[str, Any]) -> str | None:
        """What to say when a run in this language's kernel failed with `error` because it reached a limit
        (memory, processes: names the setting); None for any other error."""
        kernel = self._kernels.get(canonical_language(language))
        limits = getattr(kernel, "limits", None) or Limits()
        return limit_reached(limits, error, whole_tree=getattr(kernel, "cgroup", None) is not None)

    def status(self) -> list[dict[str, object]]:
        out: list[dict[str, object]] = []
        for lang, kernel in sorted(self._kernels.items()):
            entry: dict[str, object] = {
                "language": lang,
                "state": kernel.state,
                "kernel": kernel.choice.name,
                "source": kernel.choice.description,
                "sandbox": self._sandbox.get(lang) or "off",
            }
            if isinstance(kernel, GatewayKernel):
                entry.update(sandbox=REMOTE_SANDBOX, filesTouched=REMOTE_FILES, gateway=kernel.url)
                if kernel.kernel_id:
                    entry["kernelId"] = kernel.kernel_id
            if isinstance(kernel, Kernel):
                no_cgroup = kernel.cgroup_problem or cgroups.delegation().reason
                entry["limits"] = describe(kernel.limits, kernel.cgroup, no_cgroup)
            if kernel.choice.interpreter:
                entry["interpreter"] = kernel.choice.interpreter
            if (pid := kernel.pid()) is not None:
                entry["pid"] = pid
            out.append(entry)
        return out
