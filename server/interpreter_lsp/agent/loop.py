"""The interpreter loop: chat -> model (streamed) -> proposals -> approval -> run -> output back to the
model -> ... until the model answers without code, the user rejects, applies or interrupts, or maxSteps is hit.

Each turn is one asyncio task with an id; everything it does is reported with that id and a gapless seq.
The loop reaches its workspace only through `LoopHost` (agent/host.py).

A waiting proposal is decided one of four ways:
- approved (or auto-run): it runs, and its output goes back to the model;
- rejected without a reason: the turn ends, and the model learns it next time;
- rejected with a reason: the model is asked again at once, with the reason;
- applied (written into a document): it does not run; the turn ends, and the model learns where it went.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

from .. import protocol as p
from ..errors import UserError
from ..gate import Applied, Gate, Proposal, Rejected, UnknownProposal
from ..llm.errors import ModelError
from ..llm.toolstream import ToolCall
from ..runs import Run
from . import prompt, runtool
from .codeblocks import BlockParser, CodeBlock
from .context import Compacted, ContextKeeper
from .conversation import Conversation
from .host import LoopHost
from .toolcalls import text_tool_calls

log = logging.getLogger(__name__)

DECLINED = "Declined: the code did not run."
INTERRUPTED = "Interrupted: you stopped the turn."


class TurnBusy(UserError):
    pass


__all__ = ["DECLINED", "INTERRUPTED", "Applied", "Loop", "Proposal", "Rejected", "TurnBusy", "UnknownProposal"]


@dataclass
class Turn:
    turn_id: str
    task: asyncio.Task[None] | None = None
    seq: int = 0
    proposals: dict[str, Proposal] = field(default_factory=dict)
    state: str = ""
    selection: prompt.Selection | None = None
    selection_range: dict[str, Any] | None = None
    stop_message: str = INTERRUPTED  # what a cancellation of this turn means to the user


class Loop:
    """The turns of one workspace (one at a time)."""

    def __init__(self, host: LoopHost, conversation: Conversation, gate: Gate | None = None) -> None:
        self.host = host
        self.conversation = conversation
        # Every proposal is rated, decided and run through the gate (gate.py); decisions are recorded
        # through the conversation, held while the reply they belong to streams.
        self.gate = gate if gate is not None else Gate(host, conversation.record, host.start_run)
        self.turn: Turn | None = None
        self.context = ContextKeeper(host, conversation)
        self._compacting: asyncio.Task[Compacted] | None = None

    # ---- the commands ----------------------------------------------------------------------------------

    def chat(
        self, text: str, selection: prompt.Selection | None = None, selection_range: dict[str, Any] | None = None
    ) -> str:
        if self.busy:
            raise TurnBusy("A turn is in progress: approve, reject or interrupt it before sending another message.")
        turn = Turn("t-" + uuid.uuid4().hex[:12], selection=selection, selection_range=selection_range)
        self.turn = turn
        turn.task = asyncio.create_task(self._run_turn(turn, text), name=f"turn-{turn.turn_id}")
        return turn.turn_id

    @property
    def busy(self) -> bool:
        turn = self.turn
        if self._compacting is not None and not self._compacting.done():
            return True
        return turn is not None and turn.task is not None and not turn.task.done()

    async def compact(self) -> Compacted:
        """Condense every ended turn now (interpreter.compact)."""
        if self.busy:
            raise TurnBusy("A turn is in progress: compact the conversation once it has ended.")
        self._compacting = asyncio.ensure_future(self.context.compact_now())
        return await self._compacting

    async def context_use(self) -> p.ContextUse | None:
        """How full the model's context is, or None when no model is known yet."""
        try:
            return await self.context.use()
        except ModelError:
            return None

    def approve(self, proposal_id: str, code: str | None = None) -> Run:
        return self.gate.approve(proposal_id, code)

    def reject(self, proposal_id: str, reason: str | None = None) -> None:
        self.gate.reject(proposal_id, reason)

    def is_waiting(self, proposal_id: str) -> bool:
        return self.gate.is_waiting(proposal_id)

    def applied(self, proposal_id: str, uri: str, where: str) -> None:
        """The proposal's code was written into `uri`: a waiting proposal is decided by that (it does not
        run, and its turn ends); a decided one is not affected."""
        self.gate.applied(proposal_id, uri, where)

    async def interrupt(self, message: str = INTERRUPTED) -> None:
        if self._compacting is not None and not self._compacting.done():
            self._compacting.cancel()
            await asyncio.gather(self._compacting, return_exceptions=True)
        turn = self.turn
        if turn is not None and turn.task is not None and not turn.task.done():
            turn.stop_message = message
            turn.task.cancel()
            await asyncio.gather(turn.task, return_exceptions=True)

    def proposal_info(self, proposal_id: str) -> dict[str, Any] | None:
        """A proposal's code and turn, whether it is still open or only in the conversation."""
        live = self.gate.proposals.get(proposal_id)
        if live is not None:
            return {"proposalId": live.proposal_id, "turnId": live.turn_id, "code": live.code}
        return self.conversation.proposal(proposal_id)

    # ---- the turn --------------------------------------------------------------------------------------

    def _turn_status(
        self, turn: Turn, state: str, message: str | None = None, context: p.ContextUse | None = None
    ) -> None:
        if state == turn.state and message is None and context is None:
            return  # no news
        turn.state = state
        params = p.TurnStatusParams(turn.turn_id, state, message, context)  # type: ignore[arg-type]
        self.host.send(p.TURN_STATUS, p.to_wire(params))

    def _message(self, turn: Turn, delta: str, done: bool) -> None:
        self.host.send(p.MESSAGE, p.to_wire(p.MessageParams(turn.turn_id, turn.seq, delta, done)))
        turn.seq += 1

    async def _run_turn(self, turn: Turn, text: str) -> None:
        final_state, final_message = "done", None
        try:
            self._turn_status(turn, "thinking")
            await self.host.settings_ready()
            variables = await self.host.variables_for_context()
            content = prompt.user_message(
                text, selection=turn.selection, variables=variables, workspace=str(self.host.root)
            )
            uri = turn.selection.uri if turn.selection is not None else None
            self.conversation.add(p.UserEvent(turn.turn_id, text, content, uri=uri, range=turn.selection_range))
            final_message = await self._steps(turn)
        except asyncio.CancelledError:
            final_state, final_message = "cancelled", turn.stop_message
        except ModelError as exc:
            final_state, final_message = "error", exc.message
            self.conversation.add(p.ErrorEvent(turn.turn_id, exc.message))
        except Exception as exc:
            log.exception("turn %s failed", turn.turn_id)
            final_state, final_message = "error", f"The turn failed: {exc}. See the server log for details."
        finally:
            self.conversation.release()
            self._expire(turn)
            self.conversation.add(p.TurnEndEvent(turn.turn_id, final_state, final_message))  # type: ignore[arg-type]
            try:
                context = await self.context_use()
            except BaseException:  # a second cancel, a counting failure: the turn ends all the same
                log.debug("no context use for the end of %s", turn.turn_id, exc_info=True)
                context = None
            self._turn_status(turn, final_state, final_message, context)

    def _expire(self, turn: Turn) -> None:
        """Proposals of the turn (or step) that were never decided can no longer be."""
        for proposal in list(turn.proposals.values()):
            turn.proposals.pop(proposal.proposal_id, None)
            self.gate.expire(proposal.proposal_id)

    async def _steps(self, turn: Turn) -> str | None:
        max_steps = self.host.settings.max_steps
        for step in range(1, max_steps + 1):
            if step > 1:  # the first step's "thinking" was just sent, as the turn began
                self._turn_status(turn, "thinking")
            request = await self.context.prepare(turn.turn_id, lambda: self._turn_status(turn, "compacting"))
            if (cap := self.context.over_cap(turn.turn_id, request)) is not None:
                self.conversation.add(p.NoteEvent(cap, turn.turn_id))
                return cap
            self._turn_status(turn, "thinking", context=await self.context.use(request.tokens, request.facts))
            proposals, called = await self._ask_model(turn, request.messages, request.tools, request.tokens)
            if proposals:
                outcome = await self._decide_and_run(turn, proposals)
                self._expire(turn)
                if isinstance(outcome, str):
                    return outcome
            elif not called:
                return None
            # else: tool calls that could not be read; the model reads why, and tries again (within maxSteps)
            if step == max_steps:
                note = (
                    f"Stopped after {max_steps} steps (interpreter.maxSteps). Send a message to let the model continue."
                )
                self.conversation.add(p.NoteEvent(note, turn.turn_id, for_model=f"(The loop stopped: {note})"))
                return note
        return None

    async def _ask_model(
        self, turn: Turn, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, tokens: int
    ) -> tuple[list[Proposal], bool]:
        """One reply: its proposals, and whether it made native tool calls (readable or not). `tokens`: the
        request's, as the context budget counted them."""
        parser = BlockParser()
        chunks: list[str] = []
        calls: list[ToolCall] = []
        # Proposals are shown as soon as their block closes or their tool call is complete (each rated
        # off the loop, shown in order), and recorded after the reply they came in; so are decisions and
        # runs made while it streams.
        pending: list[asyncio.Future[tuple[Proposal, p.ProposalEvent]]] = []

        def propose(block: CodeBlock, call_id: str | None = None) -> None:
            previous = pending[-1] if pending else None
            pending.append(asyncio.ensure_future(self._propose(turn, block, previous, call_id)))

        unsent: list[str] = []  # deltas not sent yet: those read together leave as one message

        def send_deltas() -> None:
            if unsent:
                self._message(turn, "".join(unsent), False)
                unsent.clear()

        def on_delta(delta: str) -> None:
            chunks.append(delta)
            if not unsent:
                # Sent at the end of this loop iteration, with what else the same read of the stream brings
                # (a fast model's deltas come several to a read: each message costs the server and the
                # editor ~0.1-0.2 ms, its masking and its JSON).
                asyncio.get_running_loop().call_soon(send_deltas)
            unsent.append(delta)
            for block in parser.feed(delta):
                send_deltas()  # the block's text before its proposal
                propose(block)

        def on_tool_call(call: ToolCall) -> None:
            send_deltas()
            calls.append(call)
            block = runtool.block_of(call, len(calls) - 1)
            if isinstance(block, CodeBlock):  # else the model reads why in the call's tool message
                propose(block, call.id)

        def stored() -> list[dict[str, str]] | None:
            return [runtool.stored(call) for call in calls] or None

        self.conversation.hold(turn.turn_id)
        try:
            completion = await self.host.call_model(
                messages, on_delta, tools=tools, on_tool_call=on_tool_call, prompt_tokens=tokens
            )
            send_deltas()
            for block in parser.finish():
                propose(block)
            if not pending and not calls:  # no code: a tool call a local model printed as JSON is a proposal too
                for block in text_tool_calls(completion.text):
                    propose(block)
            proposed = [await future for future in pending]
        except BaseException:
            send_deltas()
            shown = [f.result() for f in pending if f.done() and not f.cancelled() and f.exception() is None]
            for future in pending:
                future.cancel()
            if chunks or calls:
                self.conversation.add(
                    p.AssistantEvent(turn.turn_id, "".join(chunks), partial=True, tool_calls=stored())
                )
            for _proposal, event in shown:
                self.conversation.add(event)
            self._message(turn, "", True)
            raise
        self._message(turn, "", True)
        self.conversation.add(p.AssistantEvent(turn.turn_id, completion.text, tool_calls=stored()))
        for _proposal, event in proposed:
            self.conversation.add(event)
        self.conversation.release()
        self.conversation.add(
            p.UsageEvent(turn.turn_id, completion.prompt_tokens, completion.completion_tokens, completion.cost)
        )
        return [proposal for proposal, _event in proposed], bool(calls)

    async def _propose(
        self, turn: Turn, block: CodeBlock, previous: asyncio.Future[Any] | None, call_id: str | None = None
    ) -> tuple[Proposal, p.ProposalEvent]:
        proposal, event = await self.gate.propose(
            block.code,
            block.language,
            turn_id=turn.turn_id,
            tool_call_id=call_id,
            complete=block.complete,
            after=previous,
        )
        turn.proposals[proposal.proposal_id] = proposal
        if previous is None or _runs(previous):
            # One the policy lets run by itself starts as soon as it is shown, while the reply goes on (its
            # decision and run are recorded after the reply, as a user's decision made meanwhile is), when
            # every proposal before it in the reply runs already: in their order, never past one that waits
            # or was declined. Its run waits its turn behind theirs (runs.py: one at a time per kernel).
            self.gate.run_now(proposal)
        return proposal, event

    async def _decide_and_run(self, turn: Turn, proposals: list[Proposal]) -> str | None:
        """Run the step's proposals in order. Returns the turn's final message if it ends here, None to
        ask the model again."""
        for proposal in proposals:
            self.gate.run_now(proposal)  # auto-run, if it did not start as it was shown (_propose): else a no-op
            if proposal.waiting:
                self._turn_status(turn, "awaiting-approval")
            decision = await proposal.decision
            if isinstance(decision, Rejected):
                return None if decision.reason else DECLINED
            if isinstance(decision, Applied):
                return f"Written into {decision.where}; it did not run."
            self._turn_status(turn, "running")
            # Shielded: the run's future belongs to the run manager; cancelling the turn must not cancel it
            # (the interrupt that cancels the turn also stops the run, and waits on it to end).
            result = await asyncio.shield(decision.result)
            if result.state == "interrupted":
                raise asyncio.CancelledError
        return None


def _runs(shown: asyncio.Future[tuple[Proposal, p.ProposalEvent]]) -> bool:
    """Whether the proposal `shown` (a `_propose`) was decided to run (by the policy, or by the user already)."""
    if not shown.done() or shown.cancelled() or shown.exception() is not None:
        return False
    decision = shown.result()[0].decision
    return decision.done() and not decision.cancelled() and isinstance(decision.result(), Run)
