"""The pygls server: capabilities and handlers. Thin: it translates LSP <-> the core (workspace.py).
Every command answers at once; long work runs as asyncio tasks that report through notifications."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import uuid
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types as t
from pygls.exceptions import JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, lsp_method
from pygls.uris import from_fs_path, to_fs_path

from . import __version__, cells, editor, heap
from . import protocol as p
from .arguments import BadArguments
from .commands import register_commands
from .errors import UserError
from .kernels import launcher, runtime
from .kernels.process_watch import ForeignProcess, ProcessWatch
from .languages import PYTHON, canonical_language
from .safety.envfiles import env_file_secrets
from .safety.secrets import ProseMasker, RedactingFilter, Redactor
from .settings import WorkspaceFileRequest, secret_settings

if TYPE_CHECKING:
    # The core (workspace.py and what it brings: the agent, runs, kernels' plumbing) is imported once the
    # `initialize` answer has left (InterpreterServer.open_workspaces): ~60 ms of a cold start off that answer.
    from .mcp.listener import AgentListener
    from .workspace import ServerContext, Workspace

log = logging.getLogger(__name__)

ALLOW = "Use them"

# A kind of our own: clients list it with the other actions (VS Code's light bulb, Neovim's menu).
RUN_ACTION_KIND = "interpreter.run"

_EXTENSION_LANGUAGES = {".py": PYTHON, ".ipy": PYTHON, ".sh": "shell", ".bash": "shell", ".zsh": "shell"}


class _Protocol(LanguageServerProtocol):
    """pygls' protocol, with a shutdown that survives a request still in flight (pygls issue #606, open):
    pygls cancels the other requests while iterating the live table of them, and cancelling one (a
    concurrent.futures.Future) runs its callback at once, which takes it out of that table: "dictionary
    changed size during iteration", no answer to `shutdown`, and an editor left waiting to kill the server.
    Closing the editor during an undo or a verified export did that every time. The same steps, over a
    copy of the table. And a command's dispatch without pygls' per-request reading of the handler's hints."""

    @lsp_method(t.SHUTDOWN)
    def lsp_shutdown(self, *args: Any) -> Any:
        if (handler := self.fm.features.get(t.SHUTDOWN)) is not None:
            yield handler, args, None
        own = self.msg_id  # the shutdown request's own answer is the one not cancelled
        for msg_id, future in list(self._request_futures.items()):
            if msg_id != own and not future.done():
                future.cancel()
        self._shutdown = True
        return None

    @lsp_method(t.WORKSPACE_EXECUTE_COMMAND)
    def lsp_workspace__execute_command(self, params: t.ExecuteCommandParams) -> Any:
        """pygls' steps, without reading the handler's signature and type hints on every request (~80 us of
        each run's path): every command of ours takes its arguments as sent (commands.py, `*raw`)."""
        if (handler := self.fm.commands.get(params.command)) is None:
            raise JsonRpcInvalidParams.of(ValueError(f"Command name {params.command!r} is not defined"))
        return (yield handler, tuple(params.arguments or ()), None)


class InterpreterServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("interpreter-lsp", __version__, protocol_cls=_Protocol, max_workers=2)
        self._workspaces: dict[str, Workspace] = {}
        # The folders `initialize` named, with their initializationOptions settings: opened right after its
        # answer has left, or at the first use of `workspaces`, whichever comes first.
        self._to_open: list[tuple[Path, Any]] = []
        self.agent_listeners: dict[str, AgentListener] = {}  # other agents reach each workspace (docs/agents.md)
        self.background: set[asyncio.Task[Any]] = set()
        self.init_options: dict[str, Any] = {}
        # Untrusted until the client says `trusted: true`: a client that says nothing about trust (a
        # generic LSP editor) runs nothing, and reads nothing of the workspace that could run (docs/editors.md).
        self.trusted = False
        self.supports_input = False
        self._runtime_dir: Path | None = None
        self._context: ServerContext | None = None
        self._asked: set[str] = set()  # workspace-file digests the user was asked about in this session
        self._stopped = False
        self._replies: dict[str, ProseMasker] = {}  # turnId -> the masker of the reply it streams
        # Set when the client's process is gone (initialize's processId): the transport ends serving.
        self.client_gone = asyncio.Event()
        self._client_watch: ProcessWatch | None = None
        # Secrets (provider keys in the environment, apiKey settings) never reach the wire or the log.
        self.redactor = Redactor(os.environ)
        for handler in logging.getLogger().handlers:
            handler.addFilter(RedactingFilter(self.redactor))

    # ---- plumbing ------------------------------------------------------------------------------------

    def send(self, method: str, params: dict[str, Any]) -> None:
        """The one way a notification leaves: output masked, code as written (Redactor.redact_shown)."""
        if method == p.MESSAGE:
            params = self._masked_reply(params)
        else:
            params = self.redactor.redact_shown(params)
        self._notify(method, params)
        if method == p.RUN_STATUS and params.get("state") in p.FINAL_RUN_STATES:
            # The end of a run leaves now, with what came before it: what the server does next (the snapshot
            # of the variables, the history's write) is not on the user's path.
            flush = getattr(self.protocol.writer, "flush", None)
            if flush is not None:
                flush()

    def _notify(self, method: str, params: dict[str, Any]) -> None:
        """Framed by our writer when it can (transport.CoalescingWriter.write_message: plain JSON values, as
        protocol.to_wire makes them), else through pygls (another writer; a value that is not plain JSON)."""
        frame = getattr(self.protocol.writer, "write_message", None)
        if frame is not None:
            try:
                frame({"jsonrpc": "2.0", "method": method, "params": params})
                return
            except TypeError:
                log.debug("%s: not plain JSON, sent through pygls", method, exc_info=True)
        self.protocol.notify(method, params)

    def _masked_reply(self, params: dict[str, Any]) -> dict[str, Any]:
        """A delta of the model's reply: its prose masked, its fenced code blocks as written (the same
        code its proposals show), the fence state carried from delta to delta until the reply is done."""
        turn = str(params.get("turnId"))
        masker = self._replies.get(turn)
        if masker is None:
            masker = self._replies[turn] = ProseMasker(self.redactor)
        delta = params.get("delta")
        masked = self.redactor.redact_shown({k: v for k, v in params.items() if k != "delta"})
        masked["delta"] = masker.feed(delta) if isinstance(delta, str) else delta
        if params.get("done"):
            self._replies.pop(turn, None)
        return masked

    def show(self, level: str, text: str) -> None:
        kind = {"error": t.MessageType.Error, "warning": t.MessageType.Warning}.get(level, t.MessageType.Info)
        self.window_show_message(t.ShowMessageParams(type=kind, message=self.redactor.redact(text)))

    def spawn(self, coro: Awaitable[Any], name: str) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        task.set_name(name)
        self.background.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self.background.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            if isinstance(exc, UserError):  # said to the user where it happened (a kernel that stays dead)
                log.info("background task %s: %s", task.get_name(), exc)
            else:
                log.error("background task %s failed: %s", task.get_name(), exc, exc_info=exc)

    def context(self) -> ServerContext:
        """The one context every workspace shares (trust is granted to all of them at once)."""
        if self._context is None:
            from .workspace import ServerContext

            # IPC sockets and connection files: a 0700 directory of ours (kernels/runtime.py).
            self._runtime_dir = runtime.create()
            self._context = ServerContext(
                send=self.send,
                show_message=self.show,
                runtime_dir=self._runtime_dir,
                specs_root=self._runtime_dir / "kernelspecs",
                ask_input=self.ask_input if self.supports_input else None,
                trusted=self.trusted,
                redact=self.redactor.redact_obj,
                redact_quick=self.redactor.redact_messages_quick,
                redact_messages=self.redactor.redact_messages,
                redact_shown=self.redactor.redact_shown,
                held_in=self.redactor.held_in,
            )
        return self._context

    async def set_trusted(self, trusted: bool) -> None:
        """The user granted (or withdrew) trust: no restart, waiting proposals stay and become runnable."""
        if trusted == self.trusted:
            return
        self.trusted = trusted
        self.context().trusted = trusted
        for ws in list(self.workspaces.values()):
            await self.load_settings(ws)
        if trusted and self.workspaces:
            self.spawn(self.warm_up(next(iter(self.workspaces.values()))), "warm-up-python")

    async def ask_input(self, run_id: str, prompt: str, password: bool) -> str | None:
        params = p.to_wire(p.InputParams(run_id, prompt, password))
        log.info("run %s asks the editor for input", run_id)
        result = await self.protocol.send_request_async(p.INPUT, params)
        value = result.get("value") if isinstance(result, dict) else getattr(result, "value", None)
        log.info("run %s: the editor %s", run_id, "answered" if isinstance(value, str) else "cancelled the input")
        return value if isinstance(value, str) else None

    def watch_client(self, pid: int | None) -> None:
        """The LSP rule: when the process that started the server (initialize's processId) is gone, the
        server exits, even if the wire stays open (another process may hold the pipe's other end)."""
        if not pid or pid == os.getpid() or self._client_watch is not None:
            return
        try:
            self._client_watch = ProcessWatch(ForeignProcess(pid), self._client_exited)
        except Exception as exc:  # no way to watch it: the end of stdin still ends the server
            log.warning("cannot watch the client's process %s: %s", pid, exc)

    def _client_exited(self) -> None:
        log.warning("the client's process is gone")
        self.client_gone.set()

    # ---- workspaces ------------------------------------------------------------------------------------

    @property
    def workspaces(self) -> dict[str, Workspace]:
        self.open_workspaces()
        return self._workspaces

    def open_workspaces(self) -> None:
        """Open the folders `initialize` named (scheduled right after its answer; idempotent)."""
        to_open, self._to_open = self._to_open, []
        for root, settings in to_open:
            try:
                self.add_workspace(root).configure([("initializationOptions", settings)], final=False)
            except Exception as exc:  # one folder that cannot open does not keep the others closed
                log.exception("cannot open the workspace folder %s", root)
                self.show("error", f"interpreter-lsp cannot open the workspace folder {root}: {exc}")

    def add_workspace(self, root: Path) -> Workspace:
        from .mcp.listener import AgentListener
        from .workspace import Workspace

        key = str(root)
        if key not in self._workspaces:
            self._workspaces[key] = ws = Workspace(root, self.context())
            self.agent_listeners[key] = listener = AgentListener(ws, self.redactor.redact_obj)
            self.spawn(listener.start(), f"agents-{key}")
        return self._workspaces[key]

    def workspace_for(self, uri: str | None = None) -> Workspace:
        """The workspace folder holding `uri` (the deepest), else the first one."""
        if uri:
            path = to_fs_path(uri)
            if path:
                best = None
                for root, ws in self.workspaces.items():
                    if (path == root or path.startswith(root.rstrip(os.sep) + os.sep)) and (
                        best is None or len(root) > len(str(best.root))
                    ):
                        best = ws
                if best is not None:
                    return best
        if not self.workspaces:
            self.add_workspace(Path.cwd())
        return next(iter(self.workspaces.values()))

    def workspace_of_proposal(self, proposal_id: str) -> Workspace:
        for ws in self.workspaces.values():
            if ws.has_proposal(proposal_id):
                return ws
        from .agent.loop import UnknownProposal

        raise UnknownProposal(f"No proposal {proposal_id!r}: it may belong to a conversation that was reset.")

    async def load_settings(self, ws: Workspace) -> None:
        layers: list[tuple[str, Any]] = [("initializationOptions", self.init_options.get("settings"))]
        caps = self.client_capabilities.workspace if self.client_capabilities else None
        if caps is not None and caps.configuration:
            try:
                items = [t.ConfigurationItem(section="interpreter", scope_uri=from_fs_path(str(ws.root)))]
                # Shielded: a late reply to a cancelled request must not break pygls (pygls #621).
                answer = await asyncio.shield(self.workspace_configuration_async(t.ConfigurationParams(items=items)))
                layers.append(("workspace/configuration", answer[0] if answer else None))
            except Exception as exc:
                log.warning("workspace/configuration failed: %s", exc)
        # Keys in the workspace's dotenv files: a run that prints one must not show it to the model. A
        # repository writes them: read only once trusted, off the loop, bounded, never through a link; and
        # before the settings are applied, which is what lets the first run start.
        if self.trusted:
            values, skipped = await asyncio.to_thread(env_file_secrets, ws.root)
            self.redactor.add(*values)
            for why in skipped:
                log.warning("%s", why)
        report = ws.configure(layers)
        for key, value in secret_settings(ws.settings):  # apiKey, kernel.gatewayToken, ...
            self.redactor.hold(key, value)
        problems = report.errors + report.ignored
        asking = report.confirm is not None and report.confirm.digest not in self._asked
        # The question comes first: "ignored until you allow this file's settings (you were asked; …)" is
        # said once the user answered it, not before it was asked.
        later = [x for x in problems if "you were asked" in x] if asking else []
        problems = [x for x in problems if x not in later]
        if problems:
            self.show("warning", "interpreter-lsp settings: " + "; ".join(problems))
        if asking and report.confirm is not None:
            self._asked.add(report.confirm.digest)
            self.spawn(self.ask_to_allow(ws, report.confirm, later), "allow-workspace-settings")

    async def ask_to_allow(
        self, ws: Workspace, request: WorkspaceFileRequest, refused: list[str] | None = None
    ) -> None:
        """The workspace file sets what only the user may set: show which keys, and ask once per content."""
        keys = ", ".join(request.keys)
        params = t.ShowMessageRequestParams(
            type=t.MessageType.Warning,
            message=(
                f"{request.path} sets {keys}: these choose where your data goes and what runs. A cloned "
                "repository can set them. Use this file's settings?"
            ),
            actions=[t.MessageActionItem(title=ALLOW), t.MessageActionItem(title="Ignore them")],
        )
        try:
            answer = await self.window_show_message_request_async(params)
        except Exception as exc:  # the editor cannot ask: the keys stay ignored
            log.info("could not ask about %s: %s", request.path, exc)
            answer = None
        if answer is not None and answer.title == ALLOW:
            ws.allow_workspace_settings(request.digest)
            await self.load_settings(ws)
        elif refused:
            self.show("warning", "interpreter-lsp settings: " + "; ".join(refused))

    async def warm_up(self, ws: Workspace) -> None:
        """Start the python kernel now, so the first run does not pay for it; $/progress if supported."""
        token = None
        window = self.client_capabilities.window if self.client_capabilities else None
        if window is not None and window.work_done_progress:
            token = str(uuid.uuid4())
            try:
                await asyncio.shield(self.work_done_progress.create_async(token))
                self.work_done_progress.begin(token, t.WorkDoneProgressBegin(title="Starting the python kernel"))
            except Exception:
                token = None
        message = "stopped"
        try:
            await ws.warm_up()
            message = "python kernel ready"
            heap.settle()  # what the start built (jupyter_client, zmq, the kernel's plumbing) stays
        except Exception as exc:
            message = f"python kernel failed to start: {exc}"
            self.show("error", str(exc))
        finally:
            if token is not None:
                self.work_done_progress.end(token, t.WorkDoneProgressEnd(message=message))
                self.work_done_progress.tokens.pop(token, None)

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        await asyncio.gather(*(a.close() for a in self.agent_listeners.values()), return_exceptions=True)
        await asyncio.gather(*(ws.shutdown() for ws in self.workspaces.values()), return_exceptions=True)
        for task in list(self.background):
            task.cancel()
        if self._runtime_dir is not None:
            shutil.rmtree(self._runtime_dir, ignore_errors=True)

    # ---- documents --------------------------------------------------------------------------------------

    def document(self, uri: str) -> editor.Document:
        """The text and language of a document the editor has open, else of the file on disk."""
        doc = self.workspace.text_documents.get(uri)
        if doc is None:
            path = to_fs_path(uri)
            if not path or not os.path.isfile(path):
                raise BadArguments(f"No document at {uri}: open it in the editor or pass 'code' instead")
            doc = self.workspace.get_text_document(uri)
        try:
            source = doc.source
        except (OSError, UnicodeDecodeError) as exc:
            raise BadArguments(f"Cannot read {uri}: {exc}") from exc
        language = doc.language_id or _EXTENSION_LANGUAGES.get(Path(to_fs_path(uri) or "").suffix, "")
        return editor.Document(uri, source, canonical_language(language) if language else "")


def create_server() -> InterpreterServer:
    ls = InterpreterServer()

    # ---- life cycle ------------------------------------------------------------------------------------

    @ls.feature(t.INITIALIZE)
    def on_initialize(params: t.InitializeParams) -> None:
        ls.watch_client(params.process_id)
        options = params.initialization_options
        ls.init_options = options if isinstance(options, dict) else {}
        # Only an explicit `true` trusts the workspace; nothing said (or anything else) is untrusted.
        ls.trusted = ls.init_options.get("trusted") is True
        caps = ls.init_options.get("capabilities")
        experimental = params.capabilities.experimental
        ls.supports_input = bool(
            (isinstance(caps, dict) and caps.get(p.INPUT_CAPABILITY))
            or (isinstance(experimental, dict) and (experimental.get("interpreter") or {}).get(p.INPUT_CAPABILITY))
        )
        folders = params.workspace_folders or []
        roots = [to_fs_path(f.uri) for f in folders]
        if not roots and params.root_uri:
            roots = [to_fs_path(params.root_uri)]
        if not roots and params.root_path:
            roots = [params.root_path]
        ls._to_open = [(Path(root), ls.init_options.get("settings")) for root in roots if root]
        # After this answer has left (it is written when this handler returns), before the next message is
        # read (a call_soon runs ahead of the reader's next step); any earlier use of `workspaces` opens them.
        asyncio.get_running_loop().call_soon(ls.open_workspaces)

    @ls.feature(t.INITIALIZED)
    async def on_initialized(_params: t.InitializedParams) -> None:
        if not ls.workspaces:
            ls.add_workspace(Path.cwd())
        for ws in list(ls.workspaces.values()):
            await ls.load_settings(ws)
        first = next(iter(ls.workspaces.values()))
        if ls.trusted:  # an untrusted workspace starts nothing, not even its own interpreter
            ls.spawn(ls.warm_up(first), "warm-up-python")
        for ws in list(ls.workspaces.values()):
            ls.spawn(ws.warm_up_model(), "warm-up-model")

    @ls.feature(t.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def on_configuration(_params: t.DidChangeConfigurationParams) -> None:
        for ws in list(ls.workspaces.values()):
            await ls.load_settings(ws)
            ls.spawn(ws.warm_up_model(), "warm-up-model")  # a model may be configured now

    @ls.feature(t.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    async def on_folders(params: t.DidChangeWorkspaceFoldersParams) -> None:
        for folder in params.event.removed:
            path = to_fs_path(folder.uri)
            ws = ls.workspaces.pop(str(path), None) if path else None
            if (listener := ls.agent_listeners.pop(str(path), None)) is not None:
                ls.spawn(listener.close(), f"agents-close-{path}")
            if ws is not None:
                ls.spawn(ws.shutdown(), f"shutdown-{path}")
        for folder in params.event.added:
            path = to_fs_path(folder.uri)
            if path:
                await ls.load_settings(ls.add_workspace(Path(path)))

    @ls.feature(t.SHUTDOWN)
    async def on_shutdown(_params: None) -> None:
        await ls.stop()

    # ---- editor surface ----------------------------------------------------------------------------------

    @ls.feature(t.TEXT_DOCUMENT_DID_SAVE)
    def on_saved(params: t.DidSaveTextDocumentParams) -> None:
        # The user's own write: a verification running meanwhile never puts that file back as its re-run's.
        path = to_fs_path(params.text_document.uri)
        if path and ls.workspaces:
            ls.workspace_for(params.text_document.uri).document_saved(Path(path))

    @ls.feature(t.TEXT_DOCUMENT_CODE_ACTION, t.CodeActionOptions(code_action_kinds=[RUN_ACTION_KIND]))
    def code_actions(params: t.CodeActionParams) -> list[t.CodeAction]:
        uri, rng = params.text_document.uri, params.range
        doc = ls.workspace.text_documents.get(uri)
        if doc is None:
            return []
        actions = []
        if (rng.start.line, rng.start.character) != (rng.end.line, rng.end.character):
            args = {"uri": uri, "range": {"start": _pos(rng.start), "end": _pos(rng.end)}}
            actions.append(_action("Run selection", p.RUN, args))
        if cells.cell_at([line.rstrip("\r\n") for line in doc.lines], rng.start.line) is not None:
            args = {"uri": uri, "position": _pos(rng.start)}
            actions.append(_action("Run cell", p.RUN, args))
        return actions

    @ls.feature(t.TEXT_DOCUMENT_CODE_LENS)
    def code_lenses(params: t.CodeLensParams) -> list[t.CodeLens]:
        uri = params.text_document.uri
        doc = ls.workspace.text_documents.get(uri)
        if doc is None:
            return []
        lenses = []
        for line in cells.cell_starts([line.rstrip("\r\n") for line in doc.lines]):
            rng = t.Range(start=t.Position(line=line, character=0), end=t.Position(line=line, character=0))
            args = {"uri": uri, "position": {"line": line, "character": 0}}
            lenses.append(t.CodeLens(range=rng, command=t.Command(title="Run cell", command=p.RUN, arguments=[args])))
        return lenses

    register_commands(ls)

    return ls


def _pos(position: t.Position) -> dict[str, int]:
    return {"line": position.line, "character": position.character}


def _action(title: str, command: str, args: dict[str, Any]) -> t.CodeAction:
    command_ = t.Command(title=title, command=command, arguments=[args])
    return t.CodeAction(title=title, kind=RUN_ACTION_KIND, command=command_)


def kill_kernels_now(ls: InterpreterServer) -> None:
    """Last resort at exit (the client never sent shutdown, or the loop is gone): kill every kernel's
    process group so no orphan survives, and remove our runtime directory."""
    for listener in ls.agent_listeners.values():
        if listener.path is not None:
            with contextlib.suppress(OSError):
                listener.path.unlink()
    for ws in ls.workspaces.values():
        for pid in ws.kernel_pids():
            with contextlib.suppress(OSError):
                launcher.kill_descendants(pid)  # detached ones too: they left the process group
                os.killpg(pid, signal.SIGKILL)
    if ls._runtime_dir is not None:
        shutil.rmtree(ls._runtime_dir, ignore_errors=True)


__all__: Sequence[str] = ("InterpreterServer", "create_server")
