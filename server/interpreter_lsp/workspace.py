"""One Workspace per folder: the one facade of the core. It owns the folder's settings, kernels, runs and
conversation, and is the only thing the command layer (commands.py, server.py) calls. It serves the agent
loop as its `LoopHost` (agent/host.py); nothing below it calls back up into it except through the
callbacks it hands down (run finished, kernel state, kernel died).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from . import protocol as p
from . import settings as settings_mod
from .agent.conversation import Conversation
from .agent.loop import INTERRUPTED, Loop
from .agent.prompt import Selection
from .agentcalls import AgentCalls
from .errors import UserError
from .files import FileChanges
from .gate import Approval, Gate, Ledger, UnknownProposal
from .history import History, history_file
from .kernels.backend import ExecuteReply, KernelBackend, KernelStartError
from .kernels.gateway_client import GatewayConfig
from .kernels.introspect import VARIABLES, python_variables, variables_of
from .kernels.launcher import Limits
from .kernels.pool import KernelPool, LaunchOptions
from .kernels.sandbox import SandboxConfig, bwrap_available, counts_processes_apart, wrap_command
from .kernels.specs import installed_languages
from .languages import PYTHON, SHELL, canonical_language
from .llm import routes
from .llm.client import Completion, ModelConfig, stream_completion
from .llm.discovery import CHAT_PROBE_TIMEOUT, discover_local_model, no_model_help
from .llm.endpoints import PLACEHOLDER_KEY
from .llm.errors import NO_MODEL, ModelError
from .llm.loader import is_loaded, start_direct_warm_up, start_warm_up
from .llm.models import ModelFacts
from .llm.models import describe as describe_model
from .llm.toolstream import ToolCall
from .runs import Run, RunManager, RunResult
from .safety import policy
from .safety.secrets import kernel_environment
from .settings import Settings
from .time_travel import TimeTravel
from .undo import FileUndo
from .variable_undo import VariableUndo
from .verification import Verifications

log = logging.getLogger(__name__)

Send = Callable[[str, dict[str, Any]], None]

VARIABLES_FOR_CONTEXT_TIMEOUT = 2.0
FACTS_TIMEOUT = 10.0  # seconds litellm may take to describe a model (it may ask an Ollama server)
RATING_BUDGET = 2.0  # seconds a proposal's rating may take before it counts as not understood
CONTEXT_USE_WAIT = 0.25  # seconds status waits for a fresh context figure before it answers the last one


@dataclass
class ServerContext:
    """What every workspace shares with the server: the wire, the server's own directories, and trust
    (one object for all workspaces, so granting trust reaches every one)."""

    send: Send
    show_message: Callable[[str, str], None]  # (level: "error" | "warning" | "info", text)
    runtime_dir: Path
    specs_root: Path
    ask_input: Callable[[str, str, bool], Awaitable[str | None]] | None = None
    trusted: bool = False  # only a client's explicit `trusted: true` trusts (server.py)
    redact: Callable[[Any], Any] = lambda value: value  # everything masked: what goes to the model
    redact_messages: Callable[[Any], Any] = lambda value: value  # a request's messages, each masked once
    redact_quick: Callable[[Any], Any] = lambda value: None  # the same if quick to do here, else None
    redact_shown: Callable[[Any], Any] = lambda value: value  # output masked, code as written: history, export
    held_in: Callable[[str], list[str]] = lambda code: []  # secrets the server holds that code contains


def kernel_limits(settings: Settings) -> Limits:
    """The limits kernels start with. Memory: the setting, else half of this machine's memory; 0: none.
    Processes: the setting is what a kernel may add to the processes and threads this user runs now
    (RLIMIT_NPROC counts them all, the editor's too), or, in the sandbox's user namespace, what it may run."""
    memory = settings.kernel.memory_limit
    if memory is None:
        memory = _physical_memory_mib() // 2 or None
    processes = settings.kernel.process_limit
    # In the sandbox's user namespace only its own processes count (sandbox.counts_processes_apart).
    apart = settings.sandbox == "bubblewrap" and not settings.kernel.gateway_url and counts_processes_apart()
    return Limits(
        memory_mib=memory or None,
        cpu_seconds=settings.kernel.cpu_time_limit or None,
        processes=processes or None,
        processes_in_use=_user_tasks() if processes and not apart else 0,
        processes_in_sandbox=apart,
    )


async def _working_directory(kernel: Any) -> str | None:
    """A python kernel's working directory, asked silently (a user expression: nothing in its history)."""
    import ast

    try:
        reply = await asyncio.wait_for(
            kernel.execute("", None, silent=True, user_expressions={"cwd": "__import__('os').getcwd()"}), 30
        )
        found = reply.content.get("user_expressions", {}).get("cwd", {})
        value = ast.literal_eval(found.get("data", {}).get("text/plain", ""))
    except Exception as exc:  # asked again at the next start; meanwhile "not known yet"
        log.info("the remote kernel's working directory is not known: %s", exc)
        return None
    return value if isinstance(value, str) else None


def _physical_memory_mib() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // (1024 * 1024)
    except (ValueError, OSError, AttributeError):
        return 0


def _user_tasks() -> int:
    """Processes and threads of this user now (Linux /proc; elsewhere 0: the limit is then absolute)."""
    uid = os.getuid() if hasattr(os, "getuid") else -1
    count = 0
    try:
        entries = os.listdir("/proc")
    except OSError:
        return 0
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid == uid:
                count += len(os.listdir(f"/proc/{entry}/task"))
        except OSError:
            continue
    return count


def _kernel_affecting(settings: Settings) -> tuple[object, ...]:
    return (settings.sandbox, settings.sandbox_network, settings.allow_env, settings.kernel)


class Workspace:
    def __init__(self, root: Path, ctx: ServerContext) -> None:
        self.root = root
        self.ctx = ctx
        self.settings = Settings()
        self.settings_errors: list[str] = []
        self._settings_report = settings_mod.SettingsReport(self.settings)
        self.file_changes = FileChanges(root)
        # Pre-images of the files, per run (undo.py); what the kernels map writable is read after each run.
        self.file_undo = FileUndo(root, changes=self.file_changes, kernel_pids=lambda: self.pool.local_pids())
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
            on_ready=self._kernel_ready,
            gateway=lambda: GatewayConfig.from_settings(self.settings.kernel),
            on_failed=self._kernel_failed,
        )
        # The python kernel's variables, per run (variable_undo.py).
        self.variable_undo = VariableUndo(self.pool, lambda: self.settings.undo_variables)
        ledger = Ledger()  # the gate mints approvals, the run manager redeems them: nothing else starts a run
        self.runs = RunManager(
            self.pool,
            ctx.send,
            model_limit=lambda: self.settings.max_output,
            ask_input=ctx.ask_input,
            on_finished=self._run_finished,
            default_timeout=lambda: self.settings.run_timeout,
            files=self.file_changes,
            ledger=ledger,
            before_run=lambda run_id: self.file_undo.before_run(run_id),
            # A user (or their editor) may change a file the moment the run's end is shown: what the run left
            # is taken before that, or undo would call the user's edit the run's own.
            after_run=self.file_undo.run_finished,
            before_code=self.variable_undo.before_run,
            after_code=self._after_code,
        )
        self.conversation = Conversation(
            History(history_file(root), ctx.redact_shown),
            root,
            on_redo_discarded=lambda point: self.travel.redo_discarded(point),
        )
        self.gate = Gate(self, self.conversation.record, self._start_checked, ledger)
        self.loop = Loop(self, self.conversation, self.gate)
        self.travel = TimeTravel(  # undo and redo: the conversation, the files and the variables together
            self.conversation,
            self.file_undo,
            self.variable_undo,
            self.runs,
            self.loop,
            remote=lambda: bool(self.settings.kernel.gateway_url),
            variables_changed=self._forget_variables,
        )
        self.agent_calls = AgentCalls(self.gate, self.conversation.record)
        self._discovered: tuple[str, str] | None = None
        self._facts: tuple[tuple[str, str | None], ModelFacts] | None = None
        self._settings_loaded = asyncio.Event()
        self._restart_task: asyncio.Future[None] | None = None
        self._languages: list[str] | None = None
        self._listing: asyncio.Future[None] | None = None  # the kernelspecs' listing, once started
        # The python kernel's variables, kept until the next python run or restart (a chat after a chat
        # does not ask the kernel again).
        self._variables: list[dict[str, Any]] | None = None
        self._variables_kernel: float | None = None
        # The answer to come with the variables the last python run left (asked with its snapshot).
        self._variables_soon: tuple[KernelBackend, asyncio.Future[ExecuteReply]] | None = None
        # Files runs created or changed: running or importing one of them is never "low" (its content was
        # not rated when it ran).
        self._written: set[Path] = set()
        # A remote python kernel's own working directory, asked when it is ready (what the model is told).
        self._remote_cwd: str | None = None
        self._sandbox_offer: str | None = None  # the one-line sandbox offer, once bubblewrap was found working
        self._offer_task: asyncio.Future[None] | None = None
        # Status's context figure: the last one computed, and the task computing the next (context_use).
        self._context_use: dict[str, Any] | None = None
        self._context_task: asyncio.Future[None] | None = None
        self.verifications = Verifications(  # verified exports: their tasks, kernels, the workspace put back
            root, self.pool, self.file_changes, self.file_undo,
            runtime_dir=lambda: self.ctx.runtime_dir,
            key=lambda: (_kernel_affecting(self.settings), self.pool.choice_for_fresh(PYTHON), self.ctx.trusted),
            run_timeout=lambda: self.settings.run_timeout,
            mask=self.ctx.redact_shown,
        )

    # ---- settings ----------------------------------------------------------------------------------

    def configure(
        self, client_settings: list[tuple[str, Mapping[str, Any] | None]], *, final: bool = True
    ) -> settings_mod.SettingsReport:
        """Apply the settings sources. `final=False`: a first, partial view (initializationOptions) that
        does not yet release what waits for the editor's settings."""
        report = settings_mod.resolve(
            self.root,
            client_settings,
            workspace_trusted=self.ctx.trusted,
            allowed_digest=settings_mod.allowed_digest(self.root),
        )
        before = _kernel_affecting(self.settings)
        self.settings = report.settings
        self._settings_report = report
        kernels_changed = _kernel_affecting(self.settings) != before
        if kernels_changed:
            self.pool.forget_choices()
        if kernels_changed or not self.ctx.trusted:
            # Started for other settings, or trust was withdrawn: its memory goes back now.
            self.verifications.spares.discard()
        if self._settings_loaded.is_set() and kernels_changed and self.pool.status():
            self.ctx.show_message(
                "info",
                "Kernel settings changed (sandbox, environment, interpreter, limits or gateway): restarting the "
                "kernels.",
            )
            self._restart_task = asyncio.ensure_future(self.pool.restart_all())
        self.settings_errors = report.errors
        if final:
            self._settings_loaded.set()
            self._offer_sandbox()
        return report

    def _offer_sandbox(self) -> None:
        """Auto-run on without the sandbox covers only proven-low code. Where bubblewrap works, say once, in
        one line, how to widen it with the sandbox; the user decides (nothing changes by itself)."""
        s = self.settings
        if not s.auto_run or self.sandboxed(PYTHON) or s.kernel.gateway_url or self._sandbox_offer is not None:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        self._sandbox_offer = ""  # asked once per session

        async def offer() -> None:
            if await asyncio.to_thread(bwrap_available) is None:  # a probe: off the event loop
                self._sandbox_offer = policy.SANDBOX_OFFER
                if self.settings.auto_run and not self.sandboxed(PYTHON):
                    self.ctx.show_message("info", policy.SANDBOX_OFFER)

        self._offer_task = asyncio.ensure_future(offer())

    def allow_workspace_settings(self, digest: str) -> None:
        """The user allowed the workspace file's current content (the digest they were shown)."""
        settings_mod.remember_allowed(self.root, digest)

    async def settings_ready(self, timeout: float = 10.0) -> None:
        """Settings arrive from the editor just after `initialized`: a chat sent at once waits for them."""
        if self._settings_loaded.is_set():
            return  # every chat but the first: no wait_for (on 3.10-3.11 a task and a loop iteration)
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
        limits = kernel_limits(self.settings)
        if self.settings.sandbox != "bubblewrap":
            return LaunchOptions(env=env, limits=limits)
        # Never run unsandboxed when a sandbox was asked for: a missing bwrap is an error, said plainly.
        if (problem := bwrap_available()) is not None:
            raise KernelStartError(problem)
        config = SandboxConfig(
            workspace=self.root,
            runtime_dir=self.ctx.runtime_dir,
            network=self.settings.sandbox_network,
            read_only=(settings_mod.user_config_file(),),
        )
        _argv, sandbox_env = wrap_command([], env, config)
        network = "network on" if config.network else "no network"

        def wrapper(cmd: list[str], runtime_dir: Path, launcher: list[str]) -> list[str]:
            return wrap_command(cmd, env, replace(config, runtime_dir=runtime_dir), launcher)[0]

        return LaunchOptions(env=sandbox_env, command_wrapper=wrapper, sandbox=f"bubblewrap ({network})", limits=limits)

    # ---- the loop's host (agent/host.py) -----------------------------------------------------------------

    @property
    def trusted(self) -> bool:
        return self.ctx.trusted

    def send(self, method: str, params: dict[str, Any]) -> None:
        if method == p.TURN_STATUS and isinstance(params.get("context"), dict):
            self._context_use = params["context"]  # a turn's end: the freshest figure, for status
        self.ctx.send(method, params)

    def check_language(self, language: str) -> str:
        """The canonical language, or UnknownLanguage with what is available."""
        lang = canonical_language(language)
        self.pool.choice(lang)
        return lang

    def available_languages(self) -> list[str]:
        """python, shell and the languages of the installed kernelspecs. Never waits: the listing waits for
        jupyter_client's import (kernels/connection.wait_loaded), and a chat sent as the server starts held
        the event loop for it (~0.2 s of its first delta, measured). Until the listing (warm_up's, in a
        thread) is done, python and shell; it is started here if nothing started it."""
        if self._languages is None:
            if self._listing is None:
                with contextlib.suppress(RuntimeError):  # no loop (a unit test): listed when asked again
                    self._listing = asyncio.get_running_loop().create_task(self._list_languages())
            return [PYTHON, SHELL]
        return self._languages

    def _list_installed(self) -> None:
        """Blocking (in a thread): the installed kernelspecs' languages, kept."""
        try:
            extra = sorted(set(installed_languages()) - {PYTHON, SHELL})
        except Exception:
            log.exception("listing the installed kernelspecs failed")
            extra = []
        self._languages = [PYTHON, SHELL, *extra]

    def remote_directory(self) -> str | None:
        """Where a gateway's kernel runs code (the model is told, not the local workspace): asked of the
        kernel when it is ready, else what kernel.gatewayWorkingDir sent, else "" (not known yet)."""
        if not self.settings.kernel.gateway_url:
            return None
        return self._remote_cwd or self.settings.kernel.gateway_working_dir or ""

    def held(self) -> str | None:
        """Why no code may start now: an undo or redo is putting the files, the variables and the
        conversation back, and planned against them as they were when it began (what started meanwhile
        would be taken back in its place, or half)."""
        return self.travel.held()

    def sandboxed(self, language: str) -> bool:
        """Code of `language` runs in the bubblewrap sandbox (a kernel on a gateway is not sandboxed here)."""
        return self.settings.sandbox == "bubblewrap" and not self.settings.kernel.gateway_url

    def refuse_held_secrets(self, code: str) -> None:
        """Code holding a secret the server holds (a provider key, apiKey, the gateway token) never runs:
        it is shown with «hidden: NAME» in the secret's place, and what is approved must be what runs."""
        if names := self.ctx.held_in(code):
            raise UserError(
                f"This code contains {', '.join(names)} (a key the server holds); it does not run, and it is "
                "shown with «hidden: …» in the key's place. Let the code read the key from the environment "
                "(interpreter.allowEnv lets the kernel see a variable) instead of writing it into the code."
            )

    def _start_checked(self, code: str, language: str, *, approval: Approval, **options: Any) -> Run:
        # The last check before a kernel, for every entry point the gate serves (our model, the user, agents).
        self.refuse_held_secrets(code)
        return self.runs.start(code, language, approval=approval, **options)

    def start_run(self, code: str, language: str, *, approval: Approval, **options: Any) -> Run:
        return self._start_checked(code, language, approval=approval, **options)

    async def call_model(
        self,
        messages: list[dict[str, Any]],
        on_delta: Callable[[str], None],
        *,
        max_tokens: int | None = None,
        tools: list[dict[str, Any]] | None = None,
        on_tool_call: Callable[[ToolCall], None] | None = None,
        prompt_tokens: int | None = None,
    ) -> Completion:
        config = await self.model_config()
        if max_tokens is not None:
            config = dataclasses.replace(config, max_tokens=max_tokens)
        # The one way out to the model: secrets in the conversation (a key a run printed) are masked here: on
        # the loop when little is new since the last request (a step after a run), else off it (a long
        # conversation is hundreds of KB).
        masked = self.ctx.redact_quick(messages)
        if masked is None:
            masked = await asyncio.to_thread(self.ctx.redact_messages, messages)
        return await stream_completion(
            masked, config, on_delta, tools=tools, on_tool_call=on_tool_call, prompt_tokens=prompt_tokens
        )

    async def model_facts(self) -> ModelFacts:
        config = await self.model_config()
        key = (config.model, config.api_base)
        if self._facts is None or self._facts[0] != key:
            # Off the loop, bounded: for some providers (Ollama) the server itself is asked.
            self._facts = (key, await describe_model(config, FACTS_TIMEOUT))
        return self._facts[1]

    async def rate(self, code: str, language: str) -> p.Risk:
        from .safety.risk import rate  # its rule tables load on the first proposal, not at start-up

        risk = await rate(code, language, self.root, written=tuple(self._written), budget=RATING_BUDGET)
        if names := self.ctx.held_in(code):  # never runs (refuse_held_secrets): never auto-runs either
            reason = f"contains {', '.join(names)}, a key the server holds: shown hidden, it will not run"
            return p.Risk("high", [*risk.reasons, reason])
        if risk.level == "medium" and self.settings.review_model:
            risk = await self._review(code, language, risk, self.settings.review_model)
        return risk

    async def _review(self, code: str, language: str, risk: p.Risk, model: str) -> p.Risk:
        """The optional second opinion (safety/review.py): a separate request, bounded; it can only raise."""
        from dataclasses import replace

        from .safety import review

        try:
            config = replace(await self.model_config(), model=model, max_tokens=200, temperature=0.0, max_retries=0)
            answer = await asyncio.wait_for(
                stream_completion(
                    self.ctx.redact(review.messages(code, language, risk, str(self.root))), config, lambda _d: None
                ),
                review.REVIEW_TIMEOUT,
            )
        except (ModelError, asyncio.TimeoutError) as exc:
            why = exc.message if isinstance(exc, ModelError) else f"no answer within {review.REVIEW_TIMEOUT:g} s"
            return p.Risk(risk.level, [*risk.reasons, f"the reviewer ({model}) could not review it: {why}"])
        return review.combine(risk, review.parse(answer.text), model)

    async def variables_for_context(self) -> list[dict[str, Any]] | None:
        """A short summary of the python kernel's variables, if that kernel is already running and idle."""
        kernel = self.pool.existing(PYTHON)
        if kernel is None or kernel.state != "idle":
            return None
        if self._variables is not None and self._variables_kernel == kernel.started_at:
            return self._variables
        soon, self._variables_soon = self._variables_soon, None
        variables = None
        if soon is not None and soon[0] is kernel:  # asked after the last run, with its snapshot
            with contextlib.suppress(Exception):  # that request failed (interrupted): asked on its own below
                reply = (
                    soon[1].result()  # answered long ago, as a rule: no wait_for (a loop iteration)
                    if soon[1].done()
                    else await asyncio.wait_for(asyncio.shield(soon[1]), VARIABLES_FOR_CONTEXT_TIMEOUT)
                )
                variables = variables_of(reply)
        if variables is None:
            try:
                variables = await asyncio.wait_for(python_variables(kernel), VARIABLES_FOR_CONTEXT_TIMEOUT)
            except Exception:
                return None
        # started_at changes on a restart, whose empty namespace must not be hidden by the cache.
        self._variables, self._variables_kernel = variables, kernel.started_at
        return variables

    # ---- the commands ---------------------------------------------------------------------------------

    def chat(self, text: str, selection: Selection | None = None, selection_range: dict[str, Any] | None = None) -> str:
        if (held := self.held()) is not None:
            raise UserError(held)
        return self.loop.chat(text, selection, selection_range)

    def approve(self, proposal_id: str, code: str | None = None) -> str:
        info = self.loop.proposal_info(proposal_id)
        if info is not None:  # refused before the approval is recorded (an unknown id: the loop says so)
            self.refuse_held_secrets(code if code is not None else str(info["code"]))
        return self.loop.approve(proposal_id, code).run_id

    def reject(self, proposal_id: str, reason: str | None = None) -> None:
        self.loop.reject(proposal_id, reason)

    def has_proposal(self, proposal_id: str) -> bool:
        return self.loop.proposal_info(proposal_id) is not None

    def proposal_to_write(self, proposal_id: str) -> tuple[str, str | None, dict[str, Any] | None]:
        """(code, uri, range) of a proposal for writing it into a document: the uri and range the chat it
        came from was about, when it was about one."""
        info = self.loop.proposal_info(proposal_id)
        if info is None:
            raise UnknownProposal(f"No proposal {proposal_id!r}: it may belong to a conversation that was reset.")
        self.refuse_held_secrets(str(info["code"]))  # shown hidden: never written out either
        user = self.conversation.user_event(str(info["turnId"])) or {}
        return str(info["code"]), user.get("uri"), user.get("range")

    def applied(self, proposal_id: str, uri: str, path: Path, applied: bool) -> None:
        """The editor took (or refused) the edit that writes a proposal into `uri`."""
        self.conversation.add(p.AppliedEvent(proposal_id, uri, applied))
        if applied:
            try:
                where = str(path.relative_to(self.root))
            except ValueError:
                where = str(path)
            self.loop.applied(proposal_id, uri, where)

    def run(
        self, code: str, language: str, *, timeout: float | None = None, source: dict[str, Any] | None = None
    ) -> str:
        """Code the user runs by hand; it goes into the conversation too. `source`: the document range it
        came from, for the panel."""
        self.refuse_held_secrets(code)
        return self.gate.user_run(code, language, timeout=timeout, source=source).run_id

    async def interrupt(self) -> None:
        self.verifications.cancel()
        await asyncio.gather(self.loop.interrupt(), self.runs.interrupt())

    async def reset(self) -> None:
        await self.travel.between(self._reset)  # after an undo or redo in progress, not in its middle

    async def _reset(self) -> None:
        await self.loop.interrupt("Stopped: the conversation was reset.")
        self.conversation.reset()
        self.file_undo.forget()  # no undo reaches those runs any more: their pre-images may go
        await self.variable_undo.forget()

    async def undo(self, *, dry_run: bool = False, confirm: bool = False) -> dict[str, Any]:
        """Take back the last request (or the user's own run after it): time_travel.py."""
        return await self.travel.undo(dry_run=dry_run, confirm=confirm)

    async def redo(self, *, dry_run: bool = False) -> dict[str, Any]:
        """Take back the last undo: time_travel.py."""
        return await self.travel.redo(dry_run=dry_run)

    def history(self) -> list[dict[str, Any]]:
        return self.conversation.events

    async def compact(self) -> dict[str, int]:
        """Condense the conversation's ended turns now (interpreter.compact)."""
        if (held := self.held()) is not None:  # not over the events an undo or redo takes back or brings
            raise UserError(held)
        done = await self.loop.compact()
        return {"summaryTokens": done.summary_tokens, "droppedTurns": done.turns}

    async def context_use(self) -> dict[str, Any] | None:
        """How full the model's context is (status `context`); None until a model is known. Status never
        waits on slow work: the figure is computed by one background task at a time (token counts, and
        the images a vision model's view needs prepared, are cached there), awaited at most
        CONTEXT_USE_WAIT; past that the last figure is answered (None before the first)."""
        model = self.settings.model or (self._discovered[0] if self._discovered else None)
        if model is None or not (is_loaded() or self._routed(model)):
            return None  # status answers at once: no discovery, no wait for litellm's import
        task = self._context_task
        if task is None or task.done():
            task = self._context_task = asyncio.ensure_future(self._refresh_context_use())
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(task), CONTEXT_USE_WAIT)
        return self._context_use

    async def _refresh_context_use(self) -> None:
        try:
            use = await self.loop.context_use()
        except Exception:
            log.exception("the context use could not be computed")
            return
        self._context_use = p.to_wire(use) if use is not None else None

    async def restart_kernel(self, language: str) -> None:
        lang = self.check_language(language)
        if lang == PYTHON:
            self.variable_undo.kernel_gone()
        await self.pool.restart(lang)
        self._forget_variables()
        self.conversation.add(
            p.KernelEvent(lang, "restarted", f"The {lang} kernel restarted: its variables and imports were cleared.")
        )

    async def variables(self, language: str) -> list[dict[str, Any]]:
        lang = self.check_language(language)
        if lang != PYTHON:
            raise UserError(f"Variables can be listed for python only, not {lang}.")
        kernel = await self.pool.kernel(lang)
        return await python_variables(kernel)

    async def export_notebook(self, path: str, *, overwrite: bool = False) -> Path:
        self._export_target(path, overwrite)
        _shown, _nb, written = await self._write_export(path, overwrite)
        return written

    async def _write_export(self, path: str, overwrite: bool) -> tuple[list[dict[str, Any]], Any, Path]:
        """The conversation as of now, masked (output masked, code as it ran: ctx.redact_shown), its notebook,
        and where it was written. Masking, building and checking the notebook take time in proportion to the
        conversation (~60 ms for 900 events): off the event loop."""
        from . import notebook
        from .safety.paths import write_inside

        events = list(self.conversation.events)  # as of now: the loop may add to the conversation meanwhile

        def write() -> tuple[list[dict[str, Any]], Any, Path]:
            shown = self.ctx.redact_shown(events)
            nb = notebook.build(shown)
            # Opened component by component without following links: kernel code cannot redirect the write.
            return shown, nb, write_inside(self.root, path, notebook.dumps(nb), overwrite=overwrite)

        return await asyncio.to_thread(write)

    def _export_target(self, path: str, overwrite: bool) -> Path:
        from .safety.paths import check_path_text, resolve_inside

        check_path_text(path)
        target = resolve_inside(self.root, path)
        if target.suffix != ".ipynb":
            raise UserError(f"{path}: a notebook path must end in .ipynb")
        if target.exists() and not target.is_dir() and not overwrite:
            raise UserError(f"{path} exists already: choose another name, or export with overwrite: true")
        return target

    def document_saved(self, path: Path) -> None:
        """The editor saved `path` (textDocument/didSave): the user's write, never put back by a verification."""
        try:
            relative = path.relative_to(self.root).as_posix()
        except ValueError:
            return
        self.verifications.keep([relative])

    async def export_verified(self, path: str, *, overwrite: bool, timeout: float) -> dict[str, Any]:
        """exportNotebook with verify: write the export, re-run it in a fresh kernel of the session's
        kernelspec and environment (sandboxed if the session is; verification.py, verify.py), rewrite it with
        the verdicts, and note the outcome in the conversation."""
        from . import notebook, verify
        from .safety.paths import write_inside

        self._export_target(path, overwrite)
        if self.settings.kernel.gateway_url:
            raise UserError("Verification re-runs the notebook in a local kernel; this workspace's kernels are on "
                            "a gateway. Export without verify, or unset kernel.gatewayUrl.")
        if (reason := policy.may_run(self.ctx.trusted)) is not None:
            raise UserError(reason)
        shown, nb, written = await self._write_export(path, overwrite)
        runs = [e for e in shown if e.get("type") == "run"]
        verification = await self.verifications.run(nb, runs, written, timeout)
        await asyncio.to_thread(lambda: write_inside(self.root, path, notebook.dumps(nb), overwrite=True))
        text, for_model = verify.note(str(written), verification)
        self.conversation.add(p.NoteEvent(text, for_model=for_model))  # the model can be asked about it
        return {"path": str(written), "verification": verification}

    def status(self) -> dict[str, Any]:
        model = self.settings.model or (self._discovered[0] if self._discovered else None)
        return {
            "root": str(self.root),
            "model": model,
            "autoRun": self.settings.auto_run,
            "autoRunMaxRisk": self._auto_run_limit(),
            "autoRunScope": policy.auto_run_scope(
                auto_run=self.settings.auto_run, auto_run_max_risk=self.settings.auto_run_max_risk,
                sandboxed=self.sandboxed(PYTHON), offer=self._sandbox_offer or None,
            ),
            "usage": self.conversation.usage(),
            "kernels": self.pool.status(),
            "trusted": self.ctx.trusted,
            "agentsWaiting": self.gate.agents_waiting(),  # other agents' proposals waiting for a decision
            "settingsErrors": list(self.settings_errors),
            "settingsIgnored": list(self._settings_report.ignored),
            "settingsSources": settings_mod.sources_of(self._settings_report),
        }

    def _auto_run_limit(self) -> dict[str, str]:
        limit, why = policy.effective_max_risk(self.settings.auto_run_max_risk, sandboxed=self.sandboxed(PYTHON))
        return {"setting": self.settings.auto_run_max_risk, "inForce": limit, **({"why": why} if why else {})}

    def kernel_pids(self) -> list[int]:
        return [pid for entry in self.pool.status() if isinstance(pid := entry.get("pid"), int)]

    async def warm_up(self) -> None:
        """The python kernel started, and meanwhile the installed kernelspecs listed off the loop (the
        system prompt names them; `available_languages`)."""
        if self._listing is None:
            self._listing = asyncio.ensure_future(self._list_languages())
        listing = self._listing
        try:
            await self.pool.kernel(PYTHON)
        finally:
            await asyncio.shield(listing)

    async def _list_languages(self) -> None:
        # In a thread: the listing waits there for jupyter_client's import (kernels/connection.wait_loaded).
        await asyncio.to_thread(self._list_installed)

    async def warm_up_model(self) -> None:
        """Load the model library ahead of the first chat, but only when a chat can happen: a model is
        configured, or a local model server answers on loopback. Importing litellm costs seconds of CPU
        and ~200 MB, which a user who only runs cells should not pay; a chat loads it anyway."""
        models = [m for m in (self.settings.model, self.settings.review_model) if m]
        if not models:
            if self._discovered is None:
                self._discovered = await discover_local_model()
            if self._discovered is None:
                return
            models = [self._discovered[0]]
        # A model the server speaks to itself needs only httpx (llm/routes.py); the rest, litellm.
        for model in models:
            if self._routed(model):
                start_direct_warm_up()
            else:
                start_warm_up()
        if self.settings.model and self._routed(self.settings.model):
            # What the first chat's request needs of the model, made ready now (~25 ms of the first chat
            # otherwise): its facts (window, prices; Ollama's own answer to /api/show) and its token counter
            # (the estimate's pattern compiles at the first count). litellm's facts wait for the chat (they
            # may ask the provider).
            with contextlib.suppress(Exception):  # the chat asks again and says what went wrong
                facts = await self.model_facts()
                await asyncio.to_thread(facts.count, [{"role": "user", "content": "a first count"}])

    def _routed(self, model: str) -> bool:
        """Whether the server speaks to `model` itself (no litellm needed)."""
        return routes.route(ModelConfig(model=model, api_base=self.settings.api_base)) is not None

    async def shutdown(self) -> None:
        await self.travel.close()  # an undo or redo ends first: never half of one
        if self._offer_task is not None:
            self._offer_task.cancel()
        await self.verifications.close()
        await self.loop.interrupt("Stopped: the server shut down.")
        await self.agent_calls.close()
        await self.runs.drain()
        self.file_changes.close()
        await self.pool.shutdown()
        self.conversation.close()

    # ---- other agents, over MCP (mcp/listener.py; docs/agents.md) -----------------------------------------

    async def agent_run(self, code: str, language: str, agent: str) -> dict[str, Any]:
        """Another agent's code: a proposal through the gate, like our model's. Returns at once."""
        call = await self.agent_calls.start(code, language, agent)
        return {"callId": call.call_id, "proposalId": call.proposal.proposal_id, "state": call.state}

    async def agent_wait(self, call_id: str, timeout: float) -> dict[str, Any]:
        return await self.agent_calls.wait(call_id, timeout)

    def agent_withdraw(self, call_ids: list[str]) -> None:
        self.agent_calls.withdraw(call_ids)

    async def agent_interrupt(self, agent: str) -> int:
        """The agent stops its own work: its waiting proposals expire, its runs are interrupted."""
        waiting = self.agent_calls.waiting_of(agent)
        self.agent_calls.withdraw([call.call_id for call in waiting])
        return len(waiting) + await self.runs.interrupt(only=lambda run: run.origin == "agent" and run.agent == agent)

    def agent_status(self) -> dict[str, Any]:
        """What an agent may know of the workspace: no settings sources, no usage."""
        return {
            "root": str(self.root),
            "trusted": self.ctx.trusted,
            "languages": self.available_languages(),
            "kernels": self.pool.status(),
            "autoRun": self.settings.auto_run,
            "agentsWaiting": self.gate.agents_waiting(),
        }

    # ---- what the layers below report ---------------------------------------------------------------

    def _kernel_state(self, language: str, state: str, message: str | None) -> None:
        params = p.KernelStatusParams(language, state, message)  # type: ignore[arg-type]
        self.ctx.send(p.KERNEL_STATUS, p.to_wire(params))

    async def _kernel_ready(self, kernel: Any) -> None:
        if not getattr(kernel, "remote", False):
            self.file_undo.warm()  # the session's first copy of the workspace, off the first run's path
        if kernel.language == PYTHON:
            from .kernels import figures

            self._ask_variables(kernel, await self.variable_undo.ready(kernel))
            await figures.register(kernel)
            if getattr(kernel, "remote", False):
                self._remote_cwd = await _working_directory(kernel)

    def _kernel_died(self, language: str, cause: str | None = None) -> None:
        why = f" ({cause})" if cause else ""
        text = f"The {language} kernel died{why}; its state (variables, imports) was lost. It is being restarted."
        self._forget_variables()
        if canonical_language(language) == PYTHON:
            self.variable_undo.kernel_gone("died")
        self.conversation.add(p.KernelEvent(language, "died", text))
        self.ctx.show_message("warning", text)

    def _kernel_failed(self, language: str, why: str) -> None:
        """It could not be restarted and stays dead (kernels/restarts.py): said once."""
        self.conversation.add(p.KernelEvent(language, "died", why))
        self.ctx.show_message("error", why)

    def _after_code(self, run_id: str, kernel: KernelBackend, reply: ExecuteReply) -> None:
        """A run's reply arrived: the variables, which the next chat tells the model, are asked now, off the
        chat's path: with the snapshot of the state the run left, or alone (variables undo off). One kernel
        round trip after a run, after its final status: while the user reads; back to back, while the next
        run's own start (its files' barrier and pre-images) goes on. The kernels' memory maps are read just
        before (FileUndo.look_at_maps): the snapshot forks the kernel, which slows a read of its maps."""
        self.file_undo.look_at_maps()
        self._ask_variables(kernel, self.variable_undo.after_run(run_id, kernel, reply))

    def _ask_variables(self, kernel: KernelBackend, sent: asyncio.Future[ExecuteReply] | None) -> None:
        """The variables the next chat tells the model, asked now (after a run, or once the kernel is ready):
        with the snapshot's request (`sent`), else on their own."""
        if sent is None and canonical_language(kernel.language) == PYTHON and self.pool.existing(PYTHON) is kernel:
            with contextlib.suppress(Exception):  # not running: the next chat asks, and says why if it cannot
                sent = self.variable_undo.ask_variables(kernel) or kernel.submit(
                    "", None, silent=True, user_expressions=VARIABLES
                )
                sent.add_done_callback(lambda done: done.cancelled() or done.exception())  # read by a chat, if any
        self._variables_soon = (kernel, sent) if sent is not None else None

    def _forget_variables(self) -> None:
        """The kernel's variables changed other than by a run (undo, restart, death): asked again."""
        self._variables, self._variables_soon = None, None

    def _run_finished(self, result: RunResult) -> None:
        if result.language == PYTHON:
            self._variables = None  # the next chat asks the kernel again
        # Never put back as a verification's re-run's.
        self.verifications.keep(str(f["path"]) for f in result.files if f.get("path"))
        for touched in result.files:
            if touched.get("change") in ("created", "modified"):
                self._written.add(self.root / touched["path"])
        event = p.RunEvent(
            run_id=result.run_id,
            origin=result.origin,  # type: ignore[arg-type]
            language=result.language,
            code=result.code,
            state=result.state,  # type: ignore[arg-type]
            duration_ms=result.duration_ms,
            output_for_model=result.output_for_model,
            outputs=result.outputs,
            files=result.files,
            turn_id=result.turn_id,
            proposal_id=result.proposal_id,
            message=result.message,
            code_hash=result.code_hash,
            agent=result.agent,
        )
        # A model run that ended while its reply still streams is recorded after that reply.
        self.conversation.record(event)

    # ---- the model -------------------------------------------------------------------------------------

    async def model_config(self) -> ModelConfig:
        s = self.settings
        model, api_base, api_key = s.model, s.api_base, s.api_key
        if not model:
            if self._discovered is None:
                # The user waits for this chat anyway: a local server slowed by a busy machine gets longer
                # than the warm-up's look ahead before the chat says no model was found.
                self._discovered = await discover_local_model(timeout=CHAT_PROBE_TIMEOUT)
            if self._discovered is None:
                raise ModelError(no_model_help(), NO_MODEL)
            model, api_base = self._discovered
            # A server found on loopback needs no key: never let litellm hand LM Studio the user's
            # OPENAI_API_KEY (Ollama's provider sends no key at all).
            api_key = PLACEHOLDER_KEY if model.startswith("openai/") else None
        return ModelConfig(
            model=model,
            api_base=api_base,
            api_key=api_key,
            temperature=s.temperature,
            max_tokens=s.max_tokens,
            connect_timeout=s.connect_timeout,
            first_token_timeout=s.first_token_timeout,
            stall_timeout=s.stream_stall_timeout,
            max_retries=s.max_retries,
        )


__all__ = ["INTERRUPTED", "ServerContext", "Workspace"]
