"""Other agents' calls (over MCP, docs/agents.md): each `run_code` is a proposal through the gate, shown in
the editor with the agent's name, decided there (or by the auto-run policy, exactly as for our own model),
then run. This module follows each call from proposal to result, so an agent can wait for it in slices
and poll for it after its own timeout; the result is what our model would read (the bounded head+tail
output), plus the run's images.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from .agent import images
from .gate import Applied, Gate, Proposal, Rejected
from .runs import Run

KEEP_DONE = 200  # finished calls kept for polling
MAX_IMAGES = 3  # the most recent images of a run go back to the agent, like to our model
MAX_IMAGE_CHARS = 2_000_000  # base64 characters (~1.5 MB): a larger image is described, not sent


@dataclass
class AgentCall:
    call_id: str
    agent: str
    proposal: Proposal
    task: asyncio.Task[dict[str, Any]] | None = None
    state: str = "awaiting-approval"  # then "running", then the result's state
    run_id: str | None = None


class AgentCalls:
    def __init__(self, gate: Gate, record: Any) -> None:
        self._gate = gate
        self._record = record
        self.calls: OrderedDict[str, AgentCall] = OrderedDict()

    async def start(self, code: str, language: str, agent: str) -> AgentCall:
        """Propose `code` for `agent`; runs at once only if the policy says so, else waits for the user."""
        call_id = "a-" + uuid.uuid4().hex[:12]
        proposal, event = await self._gate.propose(code, language, turn_id=call_id, origin="agent", agent=agent)
        self._record(event)
        call = AgentCall(call_id, agent, proposal)
        self.calls[call_id] = call
        self._gate.run_now(proposal)
        call.task = asyncio.create_task(self._follow(call), name=f"agent-call-{call_id}")
        self._trim()
        return call

    async def wait(self, call_id: str, timeout: float) -> dict[str, Any]:
        """The call's result, or, when it has not ended within `timeout`, where it is."""
        call = self.calls.get(call_id)
        if call is None or call.task is None:
            return {"callId": call_id, "state": "unknown"}
        done, _ = await asyncio.wait({call.task}, timeout=max(0.0, timeout))
        if done:
            return call.task.result()
        return {"callId": call_id, "state": call.state, "runId": call.run_id, "proposalId": call.proposal.proposal_id}

    def withdraw(self, call_ids: list[str]) -> None:
        """The agent went away: its proposals that still wait can no longer be approved."""
        for call_id in call_ids:
            call = self.calls.get(call_id)
            if call is not None and call.proposal.waiting:
                self._gate.expire(call.proposal.proposal_id)

    def waiting_of(self, agent: str) -> list[AgentCall]:
        return [c for c in self.calls.values() if c.agent == agent and c.proposal.waiting]

    async def _follow(self, call: AgentCall) -> dict[str, Any]:
        proposal = call.proposal
        base = {"callId": call.call_id, "proposalId": proposal.proposal_id, "language": proposal.language}
        try:
            decision = await proposal.decision
        except asyncio.CancelledError:
            call.state = "expired"
            return {**base, "state": "expired", "message": "The proposal expired before the user decided."}
        finally:
            self._gate.forget(proposal.proposal_id)
        if isinstance(decision, Rejected):
            call.state = "rejected"
            return {**base, "state": "rejected", "reason": decision.reason}
        if isinstance(decision, Applied):
            call.state = "applied"
            return {**base, "state": "applied", "where": decision.where}
        assert isinstance(decision, Run)
        call.state, call.run_id = "running", decision.run_id
        result = await asyncio.shield(decision.result)
        call.state = result.state
        pictures = [png for png in images.pngs(result.outputs) if len(png) <= MAX_IMAGE_CHARS][-MAX_IMAGES:]
        answer = {
            **base,
            "state": result.state,
            "runId": result.run_id,
            "durationMs": result.duration_ms,
            "output": result.output_for_model,
            "message": result.message,
            "images": pictures,
            "edited": proposal.edited,
        }
        if proposal.edited:
            answer["code"] = result.code  # what the user made of it, and what ran
        return answer

    def _trim(self) -> None:
        while len(self.calls) > KEEP_DONE:
            oldest = next((k for k, c in self.calls.items() if c.task is not None and c.task.done()), None)
            if oldest is None:
                return
            self.calls.pop(oldest)

    async def close(self) -> None:
        tasks = [c.task for c in self.calls.values() if c.task is not None and not c.task.done()]
        for task in tasks:
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*tasks, return_exceptions=True)
