"""One Workspace per folder: it owns the folder's settings, kernels and runs (and, with the loop, the
conversation). The core: driven by server.py, testable without an editor."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import settings as settings_mod
from .agent.conversation import Conversation
from .agent.loop import Loop
from .files import FileChanges
from .history import History, history_file
from .kernels.introspect import python_variables
from .kernels.kernel import KernelStartError
from .kernels.pool import KernelPool, LaunchOptions
from .kernels.sandbox import SandboxConfig, bwrap_available, wrap_command
from .kernels.specs import installed_languages
from .languages import PYTHON, SHELL, canonical_language
from .llm.client import Completion, ModelConfig, stream_completion
from .llm.discovery import NO_MODEL_HELP, discover_local_model
from .llm.errors import NO_MODEL, ModelError
from .protocol import KERNEL_STATUS, KernelStatusParams, to_wire
from .runs import Run, RunManager, RunResult
from .safety import policy
from .safety.secrets import kernel_environment
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
    redact: Callable[[Any], Any] = lambda value: value


def _kernel_affecting(settings: Settings) -> tuple[object, ...]:
    return (settings.sandbox, settings.sandbox_network, settings.allow_env, settings.kernel.python)


class Workspace:
    def __init__(self, root: Path, ctx: ServerContext) -> None:
        self.root = root
        self.ctx = ctx
        self.settings = Settings()
        self.settings_errors: list[str] = []
        self.file_changes = FileChanges(root)
        self.pool = KernelPool(
            root,
            ctx.runtime_dir,
            ctx.specs_root,
            self._launch_options,
            lambda: self.settings.kernel.python,
            self._kernel_state,
            self._kernel_died,
            refuse=lambda: policy.may_run(self.ctx.trusted),
            settings_ready=self.settings_ready,
        )
        self.runs = RunManager(
            self.pool,
            ctx.send,
            model_limit=lambda: self.settings.max_output,
            ask_input=ctx.ask_input,
            on_finished=self._run_finished,
            default_timeout=lambda: self.settings.run_timeout,
            files=self.file_changes,
        )
        self.run_listeners: list[Callable[[RunResult], None]] = [self._record_run]
        self.conversation = Conversation(History(history_file(root), ctx.redact))
        self.loop = Loop(self, self.conversation, self._call_model)
        self._discovered: tuple[str, str] | None = None
        self._settings_loaded = asyncio.Event()
        self._restart_task: asyncio.Future[None] | None = None
        self._languages: list[str] | None = None

    # ---- settings ----------------------------------------------------------------------------------

    def configure(self, client_layers: list[tuple[str, Mapping[str, Any] | None]], *, final: bool = True) -> list[str]:
        """Apply the settings sources. `final=False`: a first, partial view (initializationOptions) that
        does not yet release what waits for the editor's settings."""
        report = settings_mod.resolve(self.root, client_layers)
        before = _kernel_affecting(self.settings)
        self.settings = report.settings
        if _kernel_affecting(self.settings) != before:
            self.pool.forget_choices()
        if self._settings_loaded.is_set() and _kernel_affecting(self.settings) != before and self.pool.status():
            self.ctx.show_message(
                "info", "Kernel settings changed (sandbox, environment or interpreter): restarting the kernels."
            )
            self._restart_task = asyncio.ensure_future(self.pool.restart_all())
        self.settings_errors = report.errors
        if final:
            self._settings_loaded.set()
        return report.errors

    async def settings_ready(self, timeout: float = 10.0) -> None:
        """Settings arrive from the editor just after `initialized`: a chat sent at once waits for them."""
        try:
            await asyncio.wait_for(self._settings_loaded.wait(), timeout)
        except asyncio.TimeoutError:
            log.warning("settings did not arrive within %.0f s; using what there is", timeout)

    def _launch_options(self) -> LaunchOptions:
        # Model provider keys stay with the server: code in the kernel cannot read them.
        env = kernel_environment(os.environ, self.settings.allow_env)
        # Kernels must not think they talk to a terminal or page output.
        env.update({"PAGER": "cat", "GIT_PAGER": "cat", "TERM": env.get("TERM", "dumb") or "dumb"})
        env.pop("PYTHONSTARTUP", None)
        if self.settings.sandbox != "bubblewrap":
            return LaunchOptions(env=env)
        # Never run unsandboxed when a sandbox was asked for: a missing bwrap is an error, said plainly.
        if (problem := bwrap_available()) is not None:
            raise KernelStartError(problem)
        config = SandboxConfig(
            workspace=self.root, runtime_dir=self.ctx.runtime_dir, network=self.settings.sandbox_network
        )
        _argv, sandbox_env = wrap_command([], env, config)
        network = "network on" if config.network else "no network"
        return LaunchOptions(
            env=sandbox_env,
            command_wrapper=lambda cmd: wrap_command(cmd, env, config)[0],
            sandbox=f"bubblewrap ({network})",
        )

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

    def _record_run(self, result: RunResult) -> None:
        if result.language == PYTHON:
            self.loop.variables_changed()
        record = self.loop.record if result.origin == "model" else self.conversation.add
        record(
            {
                "type": "run",
                "runId": result.run_id,
                "origin": result.origin,
                "turnId": result.turn_id,
                "proposalId": result.proposal_id,
                "language": result.language,
                "code": result.code,
                "state": result.state,
                "durationMs": result.duration_ms,
                "message": result.message,
                "outputForModel": result.output_for_model,
                "outputs": result.outputs,
                "files": result.files,
            }
        )

    def available_languages(self) -> list[str]:
        if self._languages is None:
            try:
                extra = sorted(set(installed_languages()) - {PYTHON, SHELL})
            except Exception:
                extra = []
            self._languages = [PYTHON, SHELL, *extra]
        return self._languages

    async def interrupt(self) -> None:
        await asyncio.gather(self.loop.interrupt(), self.runs.interrupt())

    # ---- the model -------------------------------------------------------------------------------------

    async def model_config(self) -> ModelConfig:
        s = self.settings
        model, api_base = s.model, s.api_base
        if not model:
            if self._discovered is None:
                self._discovered = await discover_local_model()
            if self._discovered is None:
                raise ModelError(NO_MODEL_HELP, NO_MODEL)
            model, api_base = self._discovered
        return ModelConfig(
            model=model,
            api_base=api_base,
            api_key=s.api_key,
            temperature=s.temperature,
            max_tokens=s.max_tokens,
            connect_timeout=s.connect_timeout,
            first_token_timeout=s.first_token_timeout,
            stall_timeout=s.stream_stall_timeout,
            max_retries=s.max_retries,
        )

    async def _call_model(self, messages: list[dict[str, Any]], on_delta: Callable[[str], None]) -> Completion:
        return await stream_completion(messages, await self.model_config(), on_delta)

    async def restart_kernel(self, language: str) -> None:
        await self.pool.restart(self.check_language(language))

    async def variables(self, language: str) -> list[dict[str, Any]]:
        lang = self.check_language(language)
        if lang != PYTHON:
            raise ValueError(f"Variables can be listed for python only, not {lang}.")
        kernel = await self.pool.kernel(lang)
        return await python_variables(kernel)

    def status(self) -> dict[str, Any]:
        model = self.settings.model or (self._discovered[0] if self._discovered else None)
        return {
            "root": str(self.root),
            "model": model,
            "autoRun": self.settings.auto_run,
            "usage": self.conversation.usage(),
            "kernels": self.pool.status(),
            "trusted": self.ctx.trusted,
            "settingsErrors": list(self.settings_errors),
        }

    async def shutdown(self) -> None:
        await self.loop.interrupt()
        await self.runs.drain()
        self.file_changes.close()
        await self.pool.shutdown()
