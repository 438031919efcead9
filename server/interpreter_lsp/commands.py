"""The interpreter.* commands: each validates its one JSON object, calls the workspace (the core's one
facade) and answers at once. Results and errors leave through the redactor; a `UserError` is answered as
invalid params with its sentence (logged at INFO, no traceback), anything else is a server error logged
with its traceback.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types as t
from pygls.exceptions import JsonRpcException, JsonRpcInternalError, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from . import __version__, editor
from . import protocol as p
from .arguments import Args, BadArguments, parse_range
from .errors import UserError
from .languages import PYTHON
from .safety import policy

if TYPE_CHECKING:
    from .server import InterpreterServer

log = logging.getLogger(__name__)

Handler = Callable[["InterpreterServer", Args], Awaitable[Any]]


def _require_trust(ls: InterpreterServer) -> None:
    if (refusal := policy.may_run(ls.trusted)) is not None:
        raise BadArguments(refusal)


async def run(ls: InterpreterServer, args: Args) -> dict[str, Any]:
    _require_trust(ls)
    code, uri = args.string("code"), args.string("uri")
    language = args.string("language", allow_empty=False)
    if code is None and uri is None:
        raise BadArguments("A run needs 'code' (with an optional 'language') or a document 'uri'")
    source = None
    if code is None:
        assert uri is not None
        doc = ls.document(uri)
        target = editor.run_target(doc, args.range("range"), args.position("position"))
        code, language = target.code, language or doc.language or PYTHON
        source = {"uri": uri, "kind": target.kind, "startLine": target.first_line, "endLine": target.last_line}
    ws = ls.workspace_for(uri)
    return p.to_wire(p.RunResult(ws.run(code, language or PYTHON, timeout=args.number("timeout"), source=source)))


async def chat(ls: InterpreterServer, args: Args) -> dict[str, Any]:
    text, uri = args.required("text"), args.string("uri")
    rng = args.range("range")
    selection = editor.chat_selection(ls.document(uri), rng) if uri is not None else None
    wire_range = args.data.get("range") if rng is not None and not editor.is_empty(rng) else None
    return p.to_wire(p.ChatResult(ls.workspace_for(uri).chat(text, selection, wire_range)))


async def approve(ls: InterpreterServer, args: Args) -> dict[str, Any]:
    proposal_id = args.required("proposalId")
    return p.to_wire(p.RunResult(ls.workspace_of_proposal(proposal_id).approve(proposal_id, args.string("code"))))


async def reject(ls: InterpreterServer, args: Args) -> dict[str, Any]:
    proposal_id = args.required("proposalId")
    ls.workspace_of_proposal(proposal_id).reject(proposal_id, args.string("reason"))
    return {}


async def apply_proposal(ls: InterpreterServer, args: Args) -> dict[str, Any]:
    """Write a proposal's code into a document: at `range` (the cursor: whole lines, see editor.insertion),
    else over the selection the chat was about, else at the end of `uri`. A proposal still waiting is
    decided by this: it does not run, and its turn ends."""
    from .safety.paths import resolve_inside

    proposal_id = args.required("proposalId")
    ws = ls.workspace_of_proposal(proposal_id)
    code, chat_uri, chat_range = ws.proposal_to_write(proposal_id)
    uri, rng = args.string("uri"), args.range("range")
    if uri is None:
        if not chat_uri:
            raise BadArguments(
                "Say where to write the proposal ('uri', and optionally 'range'): "
                "the chat it came from was not about a document"
            )
        uri = chat_uri
        if rng is None and chat_range:
            rng = parse_range(chat_range)
    path = to_fs_path(uri)
    if not path:
        raise BadArguments(f"{uri} is not a file URI")
    target = resolve_inside(ws.root, path)
    caps = ls.client_capabilities.workspace if ls.client_capabilities else None
    if caps is not None and caps.apply_edit is False:
        raise BadArguments("This editor does not accept workspace edits (workspace/applyEdit)")
    exists = uri in ls.workspace.text_documents or Path(path).exists()  # noqa: ASYNC240 - one stat
    doc = ls.document(uri) if exists else editor.Document(uri, "")
    edit_range, new_text = editor.insertion(doc, rng, code)
    version = open_doc.version if (open_doc := ls.workspace.text_documents.get(uri)) else None
    edit = t.TextDocumentEdit(
        text_document=t.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
        edits=[t.TextEdit(range=edit_range, new_text=new_text)],
    )
    result = await ls.workspace_apply_edit_async(
        t.ApplyWorkspaceEditParams(edit=t.WorkspaceEdit(document_changes=[edit]), label="Insert proposal")
    )
    ws.applied(proposal_id, uri, target, result.applied)
    if not result.applied:
        reason = result.failure_reason or "the editor refused it"
        raise BadArguments(f"The edit was not applied: {reason}")
    return p.to_wire(p.ApplyProposalResult(applied=True))


async def reset(ls: InterpreterServer, args: Args) -> dict[str, Any]:
    await ls.workspace_for(args.string("uri")).reset()
    return {}


async def undo(ls: InterpreterServer, args: Args) -> dict[str, Any]:
    dry_run, confirm = args.flag("dryRun"), args.flag("confirm")
    if dry_run and confirm:
        raise BadArguments("Give either 'dryRun' (see what undo would do) or 'confirm' (do it), not both")
    return await ls.workspace_for(args.string("uri")).undo(dry_run=dry_run, confirm=confirm)


async def redo(ls: InterpreterServer, args: Args) -> dict[str, Any]:
    return await ls.workspace_for(args.string("uri")).redo(dry_run=args.flag("dryRun"))


async def history(ls: InterpreterServer, args: Args) -> dict[str, Any]:
    # A copy as of now: it is masked in a thread (MASKED_OFF_LOOP) while the loop may add to the conversation.
    return {"messages": list(ls.workspace_for(args.string("uri")).history())}


async def export_notebook(ls: InterpreterServer, args: Args) -> dict[str, Any]:
    ws = ls.workspace_for(args.string("uri"))
    path, overwrite = args.required("path"), args.flag("overwrite")
    if args.flag("verify"):
        _require_trust(ls)  # verifying runs the session's code again
        timeout = args.number("verifyTimeout", lo=1) or p.VERIFY_TIMEOUT
        return await ws.export_verified(path, overwrite=overwrite, timeout=timeout)
    return p.to_wire(p.ExportNotebookResult(str(await ws.export_notebook(path, overwrite=overwrite))))


async def interrupt(ls: InterpreterServer, _args: Args) -> dict[str, Any]:
    for ws in ls.workspaces.values():
        ls.spawn(ws.interrupt(), "interrupt")
    return {}


async def restart_kernel(ls: InterpreterServer, args: Args) -> dict[str, Any]:
    ws = ls.workspace_for(args.string("uri"))
    language = ws.check_language(args.string("language", allow_empty=False) or PYTHON)
    ls.spawn(ws.restart_kernel(language), f"restart-{language}")
    return {}


async def variables(ls: InterpreterServer, args: Args) -> dict[str, Any]:
    ws = ls.workspace_for(args.string("uri"))
    return {"variables": await ws.variables(args.string("language", allow_empty=False) or PYTHON)}


async def status(ls: InterpreterServer, args: Args) -> dict[str, Any]:
    ws = ls.workspace_for(args.string("uri"))
    await ws.settings_ready()  # right after initialize: report the editor's settings, not defaults
    result = {
        "version": __version__,
        "protocolVersion": p.PROTOCOL_VERSION,
        **ws.status(),
        "workspaces": [str(w.root) for w in ls.workspaces.values()],
    }
    context = await ws.context_use()
    if context is not None:
        result["context"] = context
    return result


async def compact(ls: InterpreterServer, args: Args) -> dict[str, Any]:
    return await ls.workspace_for(args.string("uri")).compact()


async def set_trusted(ls: InterpreterServer, args: Args) -> dict[str, Any]:
    trusted = args.data.get("trusted")
    if not isinstance(trusted, bool):
        raise BadArguments(f"'trusted' must be true or false; got {trusted!r:.100}")
    await ls.set_trusted(trusted)
    return {}


COMMANDS: dict[str, Handler] = {
    p.CHAT: chat,
    p.RUN: run,
    p.APPROVE: approve,
    p.REJECT: reject,
    p.APPLY_PROPOSAL: apply_proposal,
    p.INTERRUPT: interrupt,
    p.RESTART_KERNEL: restart_kernel,
    p.RESET: reset,
    p.UNDO: undo,
    p.REDO: redo,
    p.HISTORY: history,
    p.VARIABLES: variables,
    p.STATUS: status,
    p.EXPORT_NOTEBOOK: export_notebook,
    p.SET_TRUSTED: set_trusted,
    p.COMPACT: compact,
}
assert set(COMMANDS) == set(p.ALL_COMMANDS), "every protocol command has a handler"


def json_rpc_error(name: str, exc: Exception) -> JsonRpcException:
    """A person's mistake is invalid params with its sentence; anything else is our bug, logged whole."""
    if isinstance(exc, JsonRpcException):
        return exc
    if isinstance(exc, UserError):
        log.info("%s: %s", name, exc)
        return JsonRpcInvalidParams(str(exc))
    log.exception("%s failed", name)
    return JsonRpcInternalError(f"The server failed ({type(exc).__name__}: {exc}). See the server log for details.")


class _UserErrorsAtInfo(logging.Filter):
    """pygls logs every error answer with its traceback; a person's mistake was logged at INFO already."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, JsonRpcInvalidParams)


# Results masked in a thread: the whole conversation (a reload after weeks: 3,000 events take ~70 ms to mask
# the first time), which would stall every run's output meanwhile. Small results stay on the loop (a thread hop
# would cost every run's response more than its masking).
MASKED_OFF_LOOP = frozenset({p.HISTORY})


def register_commands(ls: InterpreterServer) -> None:
    logging.getLogger("pygls.protocol.json_rpc").addFilter(_UserErrorsAtInfo())
    for name, fn in COMMANDS.items():
        ls.command(name)(_handler(ls, name, fn))


def _handler(ls: InterpreterServer, name: str, fn: Handler) -> Callable[..., Awaitable[Any]]:
    async def handler(_ls: LanguageServer, *raw: Any) -> Any:  # pygls injects the server
        try:
            # Results and errors leave through the redactor, like every notification (code as written).
            result = await fn(ls, Args(name, raw))
            if name in MASKED_OFF_LOOP:
                return await asyncio.to_thread(ls.redactor.redact_shown, result)
            return ls.redactor.redact_shown(result)
        except Exception as exc:
            error = json_rpc_error(name, exc)
            error.message = ls.redactor.redact(error.message)
            error.args = (error.message,)
            raise error from None

    handler.__name__ = fn.__name__
    return handler
