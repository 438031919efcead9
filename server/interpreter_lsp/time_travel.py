"""Undo and redo: the conversation, the workspace files its runs wrote (undo.py) and the python kernel's
variables (variable_undo.py), taken back and brought back together, one at a time.

Each is a task of its own, shielded: its request cancelled (the editor closing) does not stop it half way
through putting files, variables and the conversation back, and shutdown waits for it (`close`). While one
is under way, or waiting its turn, no code may start (`held`): it planned against the state as it was when
it began. An undo first stops what runs (the turn, code still running), so that what those runs changed is
part of what it takes back, never half of it. Whatever cannot come back is named in the answer and told
to the model (undo_notes.py). Workspace (workspace.py) is the facade that calls this."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from . import protocol as p
from .agent.conversation import Conversation
from .agent.loop import Loop
from .errors import UserError
from .runs import RunManager
from .undo import FileUndo, RedoFiles
from .undo_notes import redo_note, undo_note, undo_scope
from .variable_undo import VariableUndo

UNDO_STOP_WAIT = 30.0  # seconds an undo waits for the runs it stopped to end (a restart ends any in 10 s)
TRAVEL_WAIT = 60.0  # seconds shutdown waits for an undo or redo in progress to end (a large file being put back)


@dataclass
class _RedoPoint:
    """What an undo keeps for its redo: the runs it took back, the files and the variables as it found them."""

    run_ids: list[str]
    files: RedoFiles
    variables: Any  # variable_undo's snapshot, or why there is none, or None (no python run undone)


class TimeTravel:
    """One workspace's undo and redo (the module's docstring); Workspace delegates to it."""

    def __init__(
        self,
        conversation: Conversation,
        file_undo: FileUndo,
        variable_undo: VariableUndo,
        runs: RunManager,
        loop: Loop,
        *,
        remote: Callable[[], bool],
        variables_changed: Callable[[], None],
    ) -> None:
        self.conversation = conversation
        self.file_undo = file_undo
        self.variable_undo = variable_undo
        self.runs = runs
        self.loop = loop
        self._remote = remote  # the kernels run on a gateway: their files are not this machine's
        self._variables_changed = variables_changed  # the kernel's variables changed other than by a run
        # One undo or redo at a time: each plans against the state the one before it left (two undos sent
        # at once are two steps back, not two plans of the same moment applied over each other).
        self._lock = asyncio.Lock()
        self._holds: list[str] = []  # the undos and redos under way or waiting their turn (not dry runs)
        self._travels: set[asyncio.Task[dict[str, Any]]] = set()
        self._releasing: set[asyncio.Task[None]] = set()  # redo points' snapshots being dropped

    def held(self) -> str | None:
        """Why no code may start now (an undo or redo under way or waiting its turn), or None."""
        if not self._holds:
            return None
        return f"{self._holds[0]} is putting the files and variables back: send this again once it is done."

    async def between(self, work: Callable[[], Awaitable[None]]) -> None:
        """`work` (a reset of the conversation) after the undo or redo in progress, never in its middle."""
        async with self._lock:
            await work()

    async def close(self) -> None:
        """Wait for an undo or redo in progress (bounded by its own work, and TRAVEL_WAIT)."""
        if self._travels:
            await asyncio.wait(self._travels, timeout=TRAVEL_WAIT)

    async def undo(self, *, dry_run: bool = False, confirm: bool = False) -> dict[str, Any]:
        """Take back the last request (or the user's own run after it): the conversation and the workspace
        files its runs wrote, created or deleted. `dry_run`: only say what would be restored and what not.
        `confirm`: also overwrite files changed again after the run (a dry run lists them); without it they
        are kept and named. Whatever cannot come back is named in the result and told to the model."""
        return await self._travel("An undo", dry_run, lambda: self._undo(dry_run=dry_run, confirm=confirm))

    async def _undo(self, *, dry_run: bool, confirm: bool) -> dict[str, Any]:
        nothing = "Nothing to undo: the conversation has no message or run of yours."
        if dry_run:
            # Runs in progress: an undo stops them first; then what they changed is in what it takes back.
            running = sorted(self.runs.runs)
            events = self.conversation.to_undo()
            if events is None and not running:
                raise UserError(nothing)
            await self.file_undo.settled()
            plan = self.file_undo.plan(events or [], remote=self._remote(), force=True)
            variables = await self.variable_undo.plan(events or [])
            wire = plan.to_wire()
            wire["notRestorable"] = [*variables.lost, *wire["notRestorable"]]
            return {"dryRun": True, **undo_scope(events or []), **wire, "running": running,
                    "variablesRestore": variables.restore, "variablesRemove": variables.remove}
        await self.loop.interrupt("Stopped: the last message was undone.")
        if still := [run.result for run in self.runs.runs.values()]:
            # Code still running (the user's own, another agent's) is stopped and recorded first: what it
            # changed is then part of what this undo takes back, never half of it.
            await self.runs.interrupt()
            await asyncio.wait(still, timeout=UNDO_STOP_WAIT)
        events = self.conversation.to_undo()
        if events is None:
            raise UserError(nothing)
        await self.file_undo.settled()
        plan = self.file_undo.plan(events, remote=self._remote(), force=confirm)
        # What a redo brings back, taken before anything changes: the files and the variables as they are.
        files_before = await self.file_undo.redo_point()
        variables_before = await self.variable_undo.redo_point(events)
        restored, removed, failed = await self.file_undo.apply(plan)
        run_ids = [str(e.get("runId")) for e in events if e.get("type") == "run"]
        files_point = self.file_undo.undone(files_before, run_ids, restored, removed)
        self.file_undo.warm()  # the files put back are the next run's pre-images: copied now, off its path
        variables = await self.variable_undo.plan(events, commit=True)
        # The undone runs' pre-images and snapshots stay while a redo can bring the runs back (a later undo
        # of them needs them); redo_discarded lets them go.
        point = _RedoPoint(run_ids, files_point, variables_before)
        dropped = self.conversation.undo(point) or []
        lost = [*variables.lost, *plan.lost, *failed]
        if run_ids:
            self._variables_changed()
            text, for_model = undo_note(restored, removed, lost, variables.restore, variables.remove)
            self.conversation.add(p.NoteEvent(text, for_model=for_model))
        return {**undo_scope(dropped), "restored": restored, "removed": removed, "notRestorable": lost,
                "variablesRestored": variables.restore, "variablesRemoved": variables.remove}

    async def redo(self, *, dry_run: bool = False) -> dict[str, Any]:
        """Take back the last undo: its request (or the user's run) and runs come back to the conversation,
        the files it wrote or removed as it found them, the variables too. Possible until something new
        happens in the conversation. `dry_run`: only say what would come back. What cannot is named."""
        return await self._travel("A redo", dry_run, lambda: self._redo(dry_run=dry_run))

    async def _travel(
        self, what: str, dry_run: bool, work: Callable[[], Awaitable[dict[str, Any]]]
    ) -> dict[str, Any]:
        """An undo or redo, one at a time, holding what would start meanwhile; a task of its own, shielded:
        its request cancelled (the editor closing) does not stop it half way through putting files,
        variables and the conversation back, and shutdown waits for it (TRAVEL_WAIT)."""

        async def travel() -> dict[str, Any]:
            async with self._lock:
                return await work()

        if not dry_run:  # at once, not when its task starts: a request read right after this one is held
            self._holds.append(what)
        task = asyncio.ensure_future(travel())
        self._travels.add(task)

        def ended(done: asyncio.Task[dict[str, Any]]) -> None:
            self._travels.discard(done)
            if not dry_run:
                self._holds.remove(what)

        task.add_done_callback(ended)
        return await asyncio.shield(task)

    async def _redo(self, *, dry_run: bool) -> dict[str, Any]:
        found = self.conversation.to_redo()
        if found is None:
            raise UserError("Nothing to redo: redo takes back the last undo, until something new happens in the "
                            "conversation (a message, a run).")
        events, point = found
        if self.runs.runs or self.loop.busy:
            raise UserError("Nothing to redo now: something new is under way since the undo (a run or a turn).")
        files = self.file_undo.redo_plan(point.files)
        if dry_run:
            variables = await self.variable_undo.redo(point.variables)
            wire = files.to_wire()
            return {"dryRun": True, **undo_scope(events), "restore": wire["restore"], "remove": wire["remove"],
                    "notRestorable": [*variables.lost, *wire["notRestorable"]],
                    "variablesRestore": variables.restore, "variablesRemove": variables.remove}
        restored, removed, failed = await self.file_undo.apply(files)
        self.file_undo.warm()
        variables = await self.variable_undo.redo(point.variables, commit=True)
        redone = self.conversation.redo()
        brought = redone[0] if redone is not None else events
        self.file_undo.redone(point.files, point.run_ids)
        self._release(point.variables)
        self._variables_changed()
        lost = [*variables.lost, *files.lost, *failed]
        text, for_model = redo_note(restored, removed, lost, variables.restore, variables.remove)
        self.conversation.add(p.NoteEvent(text, for_model=for_model))
        return {**undo_scope(brought), "restored": restored, "removed": removed, "notRestorable": lost,
                "variablesRestored": variables.restore, "variablesRemoved": variables.remove}

    def redo_discarded(self, point: Any) -> None:
        """Something new happened after an undo: no redo will bring its runs back; what it kept goes."""
        if not isinstance(point, _RedoPoint):
            return
        self.file_undo.release(point.files)
        self.file_undo.forget(point.run_ids)
        self._release(point.variables, point.run_ids)

    def _release(self, variables: Any, run_ids: list[str] | None = None) -> None:
        async def release() -> None:
            await self.variable_undo.release(variables)
            if run_ids:
                await self.variable_undo.forget(run_ids)

        task = asyncio.ensure_future(release())
        self._releasing.add(task)
        task.add_done_callback(self._releasing.discard)
