"""The interpreter.* commands: each validates its one JSON object, calls the core and answers at once.
Results and errors leave through the redactor; errors are JSON-RPC errors with a sentence a person can act on."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types as t
from pygls.exceptions import JsonRpcException, JsonRpcInternalError, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from . import __version__, cells
from . import protocol as p
from .agent.loop import TurnBusy, UnknownProposal
from .agent.prompt import Selection
from .arguments import Args, BadArguments
from .kernels.introspect import VariablesUnavailable
from .kernels.kernel import KernelStartError
from .kernels.specs import UnknownLanguage
from .languages import PYTHON
from .safety import policy

if TYPE_CHECKING:
    from .server import InterpreterServer

log = logging.getLogger(__name__)


def _server_error(name: str, exc: Exception) -> JsonRpcException:
    if isinstance(exc, JsonRpcException):
        return exc
    user_errors = (BadArguments, UnknownLanguage, VariablesUnavailable, KernelStartError, TurnBusy, UnknownProposal)
    if isinstance(exc, (*user_errors, ValueError)):
        return JsonRpcInvalidParams(str(exc))
    log.exception("%s failed", name)
    return JsonRpcInternalError(f"{name} failed: {exc}. See the server log for details.")



async def write_proposal(
    ls: InterpreterServer, proposal_id: str, uri: str | None, rng: t.Range | None
) -> dict[str, Any]:
    """Write a proposal's code into a document: at `range`, else over the selection the chat was
    about, else at the end of `uri`."""
    from .safety.paths import resolve_inside

    ws = ls.workspace_of_proposal(proposal_id)
    event = ws.loop.proposal_info(proposal_id)
    assert event is not None
    code = event["code"]
    if uri is None:
        events = reversed(ws.conversation.events)
        user = next((e for e in events if e.get("type") == "user" and e.get("turnId") == event["turnId"]), None)
        if user is None or not user.get("uri"):
            raise BadArguments(
                "interpreter.applyProposal needs a 'uri' (and optionally a 'range'): "
                "the chat this proposal came from was not about a document"
            )
        uri = user["uri"]
        if rng is None and user.get("range"):
            rng = Args("range", [{"range": user["range"]}]).range("range")
    path = to_fs_path(uri)
    if not path:
        raise BadArguments(f"{uri} is not a file URI")
    resolve_inside(ws.root, path)
    exists = uri in ls.workspace.text_documents or Path(path).exists()  # noqa: ASYNC240 - one stat
    lines, _ = ls.document(uri) if exists else ([], "")
    if rng is None:
        end = t.Position(line=len(lines), character=0)
        prefix = "\n" if lines and lines[-1] != "" else ""
        rng, code = t.Range(start=end, end=end), prefix + code + "\n"
    elif rng.start.line > len(lines) or rng.end.line > len(lines):
        raise BadArguments(f"The range is outside {uri}, which has {len(lines)} lines")
    doc = ls.workspace.text_documents.get(uri)
    edit = t.TextDocumentEdit(
        text_document=t.OptionalVersionedTextDocumentIdentifier(uri=uri, version=doc.version if doc else None),
        edits=[t.TextEdit(range=rng, new_text=code)],
    )
    caps = ls.client_capabilities.workspace if ls.client_capabilities else None
    if caps is not None and caps.apply_edit is False:
        raise BadArguments("This editor does not accept workspace edits (workspace/applyEdit)")
    result = await ls.workspace_apply_edit_async(
        t.ApplyWorkspaceEditParams(edit=t.WorkspaceEdit(document_changes=[edit]), label="Insert proposal")
    )
    ws.conversation.add({"type": "applied", "proposalId": proposal_id, "uri": uri, "applied": result.applied})
    if not result.applied:
        reason = result.failure_reason or "the editor refused it"
        raise BadArguments(f"The edit was not applied: {reason}")
    return {"applied": True}



def register_commands(ls: InterpreterServer) -> None:
    def command(name: str) -> Callable[[Callable[[Args], Awaitable[Any]]], None]:
        def register(fn: Callable[[Args], Awaitable[Any]]) -> None:
            async def handler(_ls: LanguageServer, *raw: Any) -> Any:  # pygls injects the server
                try:
                    # Results and errors leave through the redactor, like every notification.
                    return ls.redactor.redact_obj(await fn(Args(name, raw)))
                except Exception as exc:
                    error = _server_error(name, exc)
                    error.message = ls.redactor.redact(error.message)
                    error.args = (error.message,)
                    raise error from None

            handler.__name__ = fn.__name__
            ls.command(name)(handler)

        return register

    def require_trust() -> None:
        if (refusal := policy.may_run(ls.trusted)) is not None:
            raise BadArguments(refusal)

    @command(p.RUN)
    async def run(args: Args) -> dict[str, Any]:
        require_trust()
        code = args.string("code")
        uri = args.string("uri")
        language = args.string("language", allow_empty=False)
        if code is None and uri is None:
            raise BadArguments("interpreter.run needs 'code' (with an optional 'language') or a document 'uri'")
        if code is None:
            assert uri is not None
            lines, doc_language = ls.document(uri)
            rng, position = args.range("range"), args.position("position")
            if rng is not None and (rng.start.line, rng.start.character) != (rng.end.line, rng.end.character):
                code = ls.text_in_range(uri, lines, rng)
            elif position is not None or rng is not None:
                line = position.line if position is not None else rng.start.line  # type: ignore[union-attr]
                if line >= max(len(lines), 1):
                    raise BadArguments(f"Line {line} (0-based) is outside {uri}, which has {len(lines)} lines")
                cell = cells.cell_at(lines, line)
                code = cells.cell_code(lines, *cell) if cell else "\n".join(lines)
            else:
                code = "\n".join(lines)
            language = language or doc_language or PYTHON
        ws = ls.workspace_for(uri)
        timeout = args.number("timeout")
        run_ = ws.run(code, language or PYTHON, timeout=timeout)
        return {"runId": run_.run_id}

    @command(p.CHAT)
    async def chat(args: Args) -> dict[str, Any]:
        text = args.string("text", required=True, allow_empty=False)
        assert text is not None
        uri = args.string("uri")
        selection, rng = None, args.range("range")
        if uri is not None:
            lines, language = ls.document(uri)
            document = "\n".join(lines)
            if rng is not None and (rng.start.line, rng.start.character) != (rng.end.line, rng.end.character):
                selected = ls.text_in_range(uri, lines, rng)
                selection = Selection(uri, language, selected, rng.start.line, rng.end.line, document)
            else:
                selection = Selection(uri, language, "", 0, max(len(lines) - 1, 0), document)
        ws = ls.workspace_for(uri)
        wire_range = args.data.get("range") if rng is not None else None
        return {"turnId": ws.loop.chat(text, selection, wire_range)}

    @command(p.APPROVE)
    async def approve(args: Args) -> dict[str, Any]:
        proposal_id = args.string("proposalId", required=True, allow_empty=False)
        ws = ls.workspace_of_proposal(proposal_id)
        run_ = ws.loop.approve(proposal_id, args.string("code"))
        return {"runId": run_.run_id}

    @command(p.REJECT)
    async def reject(args: Args) -> dict[str, Any]:
        proposal_id = args.string("proposalId", required=True, allow_empty=False)
        ls.workspace_of_proposal(proposal_id).loop.reject(proposal_id, args.string("reason"))
        return {}

    @command(p.APPLY_PROPOSAL)
    async def apply_proposal(args: Args) -> dict[str, Any]:
        proposal_id = args.string("proposalId", required=True, allow_empty=False)
        assert proposal_id is not None
        return await write_proposal(ls, proposal_id, args.string("uri"), args.range("range"))

    @command(p.RESET)
    async def reset(args: Args) -> dict[str, Any]:
        ws = ls.workspace_for(args.string("uri"))
        await ws.loop.interrupt()
        ws.conversation.reset()
        return {}

    @command(p.UNDO)
    async def undo(args: Args) -> dict[str, Any]:
        ws = ls.workspace_for(args.string("uri"))
        await ws.loop.interrupt()
        if not ws.conversation.undo():
            raise BadArguments("Nothing to undo: the conversation has no message from you.")
        return {}

    @command(p.HISTORY)
    async def history(args: Args) -> dict[str, Any]:
        ws = ls.workspace_for(args.string("uri"))
        return {"messages": ws.conversation.events}

    @command(p.EXPORT_NOTEBOOK)
    async def export_notebook(args: Args) -> dict[str, Any]:
        path = args.string("path", required=True, allow_empty=False)
        assert path is not None
        ws = ls.workspace_for(args.string("uri"))
        from . import notebook
        from .safety.paths import resolve_inside

        target = resolve_inside(ws.root, path)
        if target.suffix != ".ipynb":
            raise BadArguments(f"{path}: a notebook path must end in .ipynb")
        notebook.write(notebook.build(ws.conversation.events), target)
        return {"path": str(target)}

    @command(p.INTERRUPT)
    async def interrupt(_args: Args) -> dict[str, Any]:
        for ws in ls.workspaces.values():
            ls.spawn(ws.interrupt(), "interrupt")
        return {}

    @command(p.RESTART_KERNEL)
    async def restart_kernel(args: Args) -> dict[str, Any]:
        ws = ls.workspace_for(args.string("uri"))
        language = ws.check_language(args.string("language", allow_empty=False) or PYTHON)
        ls.spawn(ws.restart_kernel(language), f"restart-{language}")
        return {}

    @command(p.VARIABLES)
    async def variables(args: Args) -> dict[str, Any]:
        ws = ls.workspace_for(args.string("uri"))
        return {"variables": await ws.variables(args.string("language", allow_empty=False) or PYTHON)}

    @command(p.STATUS)
    async def status(args: Args) -> dict[str, Any]:
        ws = ls.workspace_for(args.string("uri"))
        await ws.settings_ready()  # right after initialize: report the editor's settings, not defaults
        return {
            "version": __version__,
            "protocolVersion": p.PROTOCOL_VERSION,
            **ws.status(),
            "workspaces": [str(w.root) for w in ls.workspaces.values()],
        }

