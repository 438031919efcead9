"""The interpreter loop: chat -> model (streamed) -> proposals -> approval -> run -> output back to the
model -> ... until the model answers without code, the user rejects or interrupts, or maxSteps is hit.

Each turn is one asyncio task with an id; everything it does is reported with that id and a gapless seq.
"""

from __future__ import annotations

import asyncio
import logging
import platform
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import protocol as p
from ..llm.errors import ModelError
from ..runs import Run
from ..safety import policy
from . import prompt
from .codeblocks import BlockParser, CodeBlock
from .conversation import Conversation

if TYPE_CHECKING:
    from ..workspace import Workspace

log = logging.getLogger(__name__)

VARIABLES_FOR_CONTEXT_TIMEOUT = 2.0


class TurnBusy(ValueError):
    pass


class UnknownProposal(ValueError):
    pass


@dataclass
class Proposal:
    proposal_id: str
    turn_id: str
    language: str
    code: str
    risk: p.Risk
    auto_run: bool
    decision: asyncio.Future[Run | None]  # the approved run, or None when rejected
    decided: bool = False


@dataclass
class Turn:
    turn_id: str
    task: asyncio.Task[None] | None = None
    seq: int = 0
    proposals: dict[str, Proposal] = field(default_factory=dict)
    state: str = ""
    selection: prompt.Selection | None = None
    selection_range: dict[str, Any] | None = None
    streaming: bool = False
    # Events of runs that ended while their reply was still streaming: recorded after it.
    held_events: list[dict[str, Any]] = field(default_factory=list)


ModelCall = Callable[[list[dict[str, Any]], Callable[[str], None]], Awaitable[Any]]


class Loop:
    """The turns of one workspace (one at a time)."""

    def __init__(self, ws: Workspace, conversation: Conversation, call_model: ModelCall) -> None:
        self.ws = ws
        self.conversation = conversation
        self._call_model = call_model
        self.turn: Turn | None = None
        self.proposals: dict[str, Proposal] = {}
        self._variables: list[dict[str, Any]] | None = None
        self._variables_kernel: float | None = None

    # ---- the commands ----------------------------------------------------------------------------------

    def chat(
        self, text: str, selection: prompt.Selection | None = None, selection_range: dict[str, Any] | None = None
    ) -> str:
        if self.turn is not None and self.turn.task is not None and not self.turn.task.done():
            raise TurnBusy("A turn is in progress: approve, reject or interrupt it before sending another message.")
        turn = Turn("t-" + uuid.uuid4().hex[:12], selection=selection, selection_range=selection_range)
        self.turn = turn
        turn.task = asyncio.create_task(self._run_turn(turn, text), name=f"turn-{turn.turn_id}")
        return turn.turn_id

    def approve(self, proposal_id: str, code: str | None = None) -> Run:
        proposal = self._open_proposal(proposal_id)
        refusal = policy.may_run(self.ws.ctx.trusted)
        if refusal:
            raise ValueError(refusal)
        edited = code is not None and code != proposal.code
        final = code if code is not None else proposal.code
        self.record(
            {
                "type": "decision",
                "proposalId": proposal_id,
                "turnId": proposal.turn_id,
                "decision": "approved",
                "edited": edited,
                "code": final,
            }
        )
        run = self._start_run(proposal, final)
        proposal.decided = True
        proposal.decision.set_result(run)
        return run

    def reject(self, proposal_id: str, reason: str | None = None) -> None:
        proposal = self._open_proposal(proposal_id)
        self.record(
            {
                "type": "decision",
                "proposalId": proposal_id,
                "turnId": proposal.turn_id,
                "decision": "rejected",
                "language": proposal.language,
                "reason": reason,
            }
        )
        proposal.decided = True
        proposal.decision.set_result(None)

    async def interrupt(self) -> None:
        turn = self.turn
        if turn is not None and turn.task is not None and not turn.task.done():
            turn.task.cancel()
            await asyncio.gather(turn.task, return_exceptions=True)

    def record(self, event: dict[str, Any]) -> None:
        """A turn's event (a decision, a model run) in conversation order: after the reply it is about."""
        turn = self.turn
        if turn is not None and turn.streaming and event.get("turnId") == turn.turn_id:
            turn.held_events.append(event)
        else:
            self.conversation.add(event)

    def _release_held(self, turn: Turn) -> None:
        turn.streaming = False
        for event in turn.held_events:
            self.conversation.add(event)
        turn.held_events.clear()

    def proposal_info(self, proposal_id: str) -> dict[str, Any] | None:
        """A proposal's code and turn, whether it is still open or only in the conversation."""
        live = self.proposals.get(proposal_id)
        if live is not None:
            return {"proposalId": live.proposal_id, "turnId": live.turn_id, "code": live.code}
        return self.conversation.proposal(proposal_id)

    def _open_proposal(self, proposal_id: str) -> Proposal:
        proposal = self.proposals.get(proposal_id)
        if proposal is None:
            raise UnknownProposal(
                f"No proposal {proposal_id!r} is waiting: it may belong to an ended turn, or was decided already."
            )
        if proposal.decided or proposal.decision.done():
            raise UnknownProposal(f"Proposal {proposal_id!r} was already approved or rejected.")
        return proposal

    def _start_run(self, proposal: Proposal, code: str) -> Run:
        return self.ws.run(
            code, proposal.language, origin="model", turn_id=proposal.turn_id, proposal_id=proposal.proposal_id
        )

    # ---- the turn --------------------------------------------------------------------------------------

    def _turn_status(self, turn: Turn, state: str, message: str | None = None) -> None:
        if state == turn.state and message is None:
            return  # no news
        turn.state = state
        self.ws.ctx.send(p.TURN_STATUS, p.to_wire(p.TurnStatusParams(turn.turn_id, state, message)))  # type: ignore[arg-type]

    def _message(self, turn: Turn, delta: str, done: bool) -> None:
        self.ws.ctx.send(p.MESSAGE, p.to_wire(p.MessageParams(turn.turn_id, turn.seq, delta, done)))
        turn.seq += 1

    async def _run_turn(self, turn: Turn, text: str) -> None:
        final_state, final_message = "done", None
        try:
            self._turn_status(turn, "thinking")
            await self.ws.settings_ready()
            variables = await self._variables_for_context()
            content = prompt.user_message(
                text, selection=turn.selection, variables=variables, workspace=str(self.ws.root)
            )
            event = {"type": "user", "turnId": turn.turn_id, "text": text, "content": content}
            self.conversation.add({**event, **self._selection_event(turn)})
            final_message = await self._steps(turn)
        except asyncio.CancelledError:
            final_state, final_message = "cancelled", "interrupted by the user"
        except ModelError as exc:
            final_state, final_message = "error", exc.message
            self.conversation.add({"type": "error", "turnId": turn.turn_id, "message": exc.message})
        except Exception as exc:
            log.exception("turn %s failed", turn.turn_id)
            final_state, final_message = "error", f"The turn failed: {exc}"
        finally:
            for proposal in turn.proposals.values():
                self.proposals.pop(proposal.proposal_id, None)
                if not proposal.decision.done():
                    proposal.decision.cancel()
            self.conversation.add(
                {"type": "turnEnd", "turnId": turn.turn_id, "state": final_state, "message": final_message}
            )
            self._turn_status(turn, final_state, final_message)

    def _selection_event(self, turn: Turn) -> dict[str, Any]:
        sel = turn.selection
        if sel is None:
            return {}
        return {"uri": sel.uri, "range": turn.selection_range}

    def variables_changed(self) -> None:
        """A python run ended: the next chat asks the kernel for its variables again."""
        self._variables = None

    async def _variables_for_context(self) -> list[dict[str, Any]] | None:
        """A short summary of the python kernel's variables, if that kernel is already running and idle.
        Kept until the next python run, so a chat after a chat does not ask the kernel again."""
        kernel = self.ws.pool.existing("python")
        if kernel is None or kernel.state != "idle":
            return None
        if self._variables is not None and self._variables_kernel == kernel.started_at:
            return self._variables
        try:
            variables = await asyncio.wait_for(self.ws.variables("python"), VARIABLES_FOR_CONTEXT_TIMEOUT)
        except Exception:
            return None
        # started_at changes on a restart, whose empty namespace must not be hidden by the cache.
        self._variables, self._variables_kernel = variables, kernel.started_at
        return variables

    async def _steps(self, turn: Turn) -> str | None:
        max_steps = self.ws.settings.max_steps
        for step in range(1, max_steps + 1):
            self._turn_status(turn, "thinking")
            proposals = await self._ask_model(turn)
            if not proposals:
                return None
            outcome = await self._decide_and_run(turn, proposals)
            if outcome is not None:
                return outcome
            if step == max_steps:
                note = (
                    f"Stopped after {max_steps} steps (interpreter.maxSteps). "
                    "Send a message to let the model continue."
                )
                self.conversation.add(
                    {"type": "note", "turnId": turn.turn_id, "text": note, "forModel": f"(The loop stopped: {note})"}
                )
                return note
        return None

    async def _ask_model(self, turn: Turn) -> list[Proposal]:
        system = prompt.system_message(
            prompt.PromptContext(
                workspace=str(self.ws.root),
                os_name=platform.system() or "unknown",
                languages=self.ws.available_languages(),
                custom_instructions=self.ws.settings.custom_instructions,
                system_message=self.ws.settings.system_message,
            )
        )
        messages = self.conversation.model_messages(system)
        parser = BlockParser()
        proposals: list[Proposal] = []
        chunks: list[str] = []
        # Proposals are shown as soon as their block closes, and recorded after the reply they came in.
        proposal_events: list[dict[str, Any]] = []

        def on_delta(delta: str) -> None:
            chunks.append(delta)
            self._message(turn, delta, False)
            for block in parser.feed(delta):
                proposals.append(self._propose(turn, block, proposal_events))

        turn.streaming = True
        try:
            completion = await self._call_model(messages, on_delta)
        except BaseException:
            if chunks:
                self.conversation.add(
                    {"type": "assistant", "turnId": turn.turn_id, "text": "".join(chunks), "partial": True}
                )
            for event in proposal_events:
                self.conversation.add(event)
            self._release_held(turn)
            self._message(turn, "", True)
            raise
        for block in parser.finish():
            proposals.append(self._propose(turn, block, proposal_events))
        self._message(turn, "", True)
        self.conversation.add({"type": "assistant", "turnId": turn.turn_id, "text": completion.text})
        for event in proposal_events:
            self.conversation.add(event)
        self._release_held(turn)
        self.conversation.add(
            {
                "type": "usage",
                "turnId": turn.turn_id,
                "promptTokens": completion.prompt_tokens,
                "completionTokens": completion.completion_tokens,
                "cost": completion.cost,
            }
        )
        return proposals

    def _propose(self, turn: Turn, block: CodeBlock, record: list[dict[str, Any]]) -> Proposal:
        from ..safety.risk import assess  # its rule tables load on the first proposal, not at start-up

        language = block.language
        try:
            language = self.ws.check_language(language)
            risk = assess(block.code, language, self.ws.root)
        except ValueError as exc:
            risk = p.Risk("medium", [str(exc)])
        settings = self.ws.settings
        decision = policy.decide(
            risk, auto_run=settings.auto_run, auto_run_max_risk=settings.auto_run_max_risk, trusted=self.ws.ctx.trusted
        )
        proposal = Proposal(
            proposal_id="p-" + uuid.uuid4().hex[:12],
            turn_id=turn.turn_id,
            language=language,
            code=block.code,
            risk=risk,
            auto_run=decision.run_now,
            decision=asyncio.get_running_loop().create_future(),
        )
        turn.proposals[proposal.proposal_id] = proposal
        self.proposals[proposal.proposal_id] = proposal
        record.append(
            {
                "type": "proposal",
                "proposalId": proposal.proposal_id,
                "turnId": turn.turn_id,
                "language": language,
                "code": block.code,
                "risk": p.to_wire(risk),
                "autoRun": decision.run_now,
                "complete": block.complete,
            }
        )
        params = p.ProposalParams(proposal.proposal_id, turn.turn_id, language, block.code, risk, decision.run_now)
        wire = p.to_wire(params)
        if not decision.run_now:
            wire["waitReason"] = decision.reason
        self.ws.ctx.send(p.PROPOSAL, wire)
        return proposal

    async def _decide_and_run(self, turn: Turn, proposals: list[Proposal]) -> str | None:
        """Run the step's proposals in order. Returns a final message if the turn ends here."""
        for proposal in proposals:
            if proposal.auto_run and not proposal.decision.done():
                self.conversation.add(
                    {
                        "type": "decision",
                        "proposalId": proposal.proposal_id,
                        "turnId": turn.turn_id,
                        "decision": "auto-run",
                        "code": proposal.code,
                    }
                )
                proposal.decided = True
                proposal.decision.set_result(self._start_run(proposal, proposal.code))
            if not proposal.decision.done():
                self._turn_status(turn, "awaiting-approval")
            run = await proposal.decision
            if run is None:
                return "the user declined to run the code"
            self._turn_status(turn, "running")
            result = await run.result
            if result.state == "interrupted":
                raise asyncio.CancelledError
        return None
