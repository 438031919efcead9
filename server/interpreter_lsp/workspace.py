"""One Workspace per folder: it owns the folder's settings, kernels and runs (and, with the loop, the
conversation). The core: driven by server.py, testable without an editor."""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import settings as settings_mod
from .kernels.introspect import python_variables
from .kernels.pool import KernelPool, LaunchOptions
from .languages import PYTHON, canonical_language
from .protocol import KERNEL_STATUS, KernelStatusParams, to_wire
from .runs import Run, RunManager, RunResult
from .settings import Settings

log = logging.getLogger(__name__)

Send = Callable[[str, dict[str, Any]], None]


@dataclass
class ServerContext:
    """What every workspace shares with the server: the wire and the server's own directories."""

    send: Send
    show_message: Callable[[str, str], None]  # (level: "error" | "warning" | "info", text)
    runtime_dir: Path
    specs_root: Path
    ask_input: Callable[[str, str, bool], Awaitable[str | None]] | None = None
    trusted: bool = True


class Workspace:
    def __init__(self, root: Path, ctx: ServerContext) -> None:
        self.root = root
        self.ctx = ctx
        self.settings = Settings()
        self.settings_errors: list[str] = []
        self.pool = KernelPool(
            root,
            ctx.runtime_dir,
            ctx.specs_root,
            self._launch_options,
            self._kernel_state,
            self._kernel_died,
        )
        self.runs = RunManager(
            self.pool,
            ctx.send,
            model_limit=lambda: self.settings.max_output,
            ask_input=ctx.ask_input,
            on_finished=self._run_finished,
            default_timeout=lambda: self.settings.run_timeout,
        )
        self.run_listeners: list[Callable[[RunResult], None]] = []

    # ---- settings ----------------------------------------------------------------------------------

    def configure(self, client_layers: list[tuple[str, Mapping[str, Any] | None]]) -> list[str]:
        report = settings_mod.resolve(self.root, client_layers)
        self.settings = report.settings
        self.settings_errors = report.errors
        return report.errors

    def _launch_options(self) -> LaunchOptions:
        env = dict(os.environ)
        # Kernels must not think they talk to a terminal or page output.
        env.update({"PAGER": "cat", "GIT_PAGER": "cat", "TERM": env.get("TERM", "dumb") or "dumb"})
        env.pop("PYTHONSTARTUP", None)
        return LaunchOptions(env=env, python_setting=self.settings.kernel.python)

    # ---- kernels ---------------------------------------------------------------------------------

    def _kernel_state(self, language: str, state: str, message: str | None) -> None:
        params = KernelStatusParams(language, state, message)  # type: ignore[arg-type]
        self.ctx.send(KERNEL_STATUS, to_wire(params))

    def _kernel_died(self, language: str) -> None:
        self.ctx.show_message(
            "warning",
            f"The {language} kernel died; its state (variables, imports) was lost. It is being restarted.",
        )

    async def warm_up(self) -> None:
        await self.pool.kernel(PYTHON)

    # ---- runs ----------------------------------------------------------------------------------------

    def check_language(self, language: str) -> str:
        """The canonical language, or UnknownLanguage with what is available."""
        lang = canonical_language(language)
        self.pool.choice(lang)
        return lang

    def run(self, code: str, language: str, **kwargs: Any) -> Run:
        return self.runs.start(code, self.check_language(language), **kwargs)

    def _run_finished(self, result: RunResult) -> None:
        for listener in list(self.run_listeners):
            listener(result)

    async def interrupt(self) -> None:
        await self.runs.interrupt()

    async def restart_kernel(self, language: str) -> None:
        await self.pool.restart(self.check_language(language))

    async def variables(self, language: str) -> list[dict[str, Any]]:
        lang = self.check_language(language)
        if lang != PYTHON:
            raise ValueError(f"Variables can be listed for python only, not {lang}.")
        kernel = await self.pool.kernel(lang)
        return await python_variables(kernel)

    def status(self) -> dict[str, Any]:
        return {
            "root": str(self.root),
            "model": self.settings.model,
            "autoRun": self.settings.auto_run,
            "kernels": self.pool.status(),
            "trusted": self.ctx.trusted,
            "settingsErrors": list(self.settings_errors),
        }

    async def shutdown(self) -> None:
        await self.runs.drain()
        await self.pool.shutdown()
