"""What the editor offers: run a document, a range, a `# %%` cell; code actions, code lenses, commands."""

from __future__ import annotations

import asyncio

from lsprotocol import types as t

from harness import Session
from interpreter_lsp import protocol as p

DOC = "# %% setup\nx = 2\n\n# %% compute\nprint(x * 21)\n# %% other\nprint('other')\n"


def _range(l0: int, c0: int, l1: int, c1: int) -> dict:
    return {"start": {"line": l0, "character": c0}, "end": {"line": l1, "character": c1}}


async def test_run_range_cell_and_whole_document(any_editor: Session) -> None:
    s = any_editor
    uri = s.open("demo.py", DOC)
    setup = (await s.command(p.RUN, {"uri": uri, "position": {"line": 1, "character": 0}}))["runId"]
    await s.finished(setup)
    cell = (await s.command(p.RUN, {"uri": uri, "position": {"line": 4, "character": 3}}))["runId"]
    await s.finished(cell)
    assert s.text(cell) == "42\n"
    selection = (await s.command(p.RUN, {"uri": uri, "range": _range(4, 6, 4, 12)}))["runId"]
    await s.finished(selection)
    assert s.text(selection) == "42"  # the expression's result
    whole = (await s.command(p.RUN, {"uri": uri}))["runId"]
    await s.finished(whole)
    assert s.text(whole) == "42\nother\n"


async def test_run_file_on_disk_that_is_not_open(session: Session) -> None:
    path = session.root / "script.sh"
    path.write_text("echo from-disk\n")
    run_id = (await session.command(p.RUN, {"uri": path.as_uri()}))["runId"]
    status = await session.finished(run_id)
    assert status["state"] == "ok"
    assert session.text(run_id).strip() == "from-disk"


async def test_code_actions_on_selection_and_cell(session: Session) -> None:
    uri = session.open("demo.py", DOC)
    await session.run_and_wait("x = 2")
    actions = await asyncio.wait_for(
        session.client.text_document_code_action_async(
            t.CodeActionParams(
                text_document=t.TextDocumentIdentifier(uri=uri),
                range=t.Range(start=t.Position(line=4, character=6), end=t.Position(line=4, character=12)),
                context=t.CodeActionContext(diagnostics=[]),
            )
        ),
        10,
    )
    titles = {a.title: a for a in actions}
    assert set(titles) == {"Run selection", "Run cell"}
    run_selection = titles["Run selection"].command
    assert run_selection.command == p.RUN
    # Executing the action's command runs exactly the selection.
    result = await session.command(run_selection.command, run_selection.arguments[0])
    await session.finished(result["runId"])
    assert session.text(result["runId"]) == "42"  # `x * 21`: the expression's result


async def test_code_lens_on_every_cell_runs_that_cell(session: Session) -> None:
    uri = session.open("demo.py", DOC)
    lenses = await asyncio.wait_for(
        session.client.text_document_code_lens_async(t.CodeLensParams(text_document=t.TextDocumentIdentifier(uri=uri))),
        10,
    )
    assert [lens.range.start.line for lens in lenses] == [0, 3, 5]
    assert {lens.command.title for lens in lenses} == {"Run cell"}
    last = lenses[2].command
    result = await session.command(last.command, last.arguments[0])
    await session.finished(result["runId"])
    assert session.text(result["runId"]) == "other\n"


async def test_execute_command_provider_lists_every_command(session: Session) -> None:
    status = await session.command(p.STATUS, {})
    assert status["protocolVersion"] == p.PROTOCOL_VERSION
    assert session.init_result is not None
    capabilities = session.init_result.capabilities
    listed = set(capabilities.execute_command_provider.commands)
    assert {p.RUN, p.INTERRUPT, p.RESTART_KERNEL, p.VARIABLES, p.STATUS} <= listed
