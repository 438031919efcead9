"""The approval gate: the one way code reaches a kernel.

Every code-running entry point comes through here: our own model's proposals (agent/loop.py), the user's
direct runs (interpreter.run) and other agents' calls over MCP (mcp/). The gate rates a proposal
(`GateHost.rate`), applies the trust and auto-run policy (`safety.policy.decide`), shows it to the editor
(`interpreter/proposal`), waits for the decision and, for a run, mints an `Approval`: a single-use token
bound to the SHA-256 of the exact code and the kernel's language. `RunManager.start` redeems the token
with the `Ledger` before anything is queued, so

- nothing can start a run without a token only this module mints (the ledger knows every token it
  issued; an object that merely looks like one is refused),
- a token runs the code it was minted for, once: a different code (or language) is refused, and the token
  is spent either way.

What the user approves is byte for byte what runs: an edit in the card is the user's own code, and the
approval is bound to it (the decision event records it with its hash, and `edited`).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from . import protocol as p
from .errors import UserError
from .safety import policy

if TYPE_CHECKING:
    from .runs import Run
    from .settings import Settings

log = logging.getLogger(__name__)

How = Literal["approved", "auto-run", "user"]


def code_hash(code: str, language: str) -> str:
    """The binding of a decision: SHA-256 over the kernel's language and the exact code."""
    return hashlib.sha256(f"{language}\0{code}".encode("utf-8", "surrogatepass")).hexdigest()


class NotApproved(Exception):
    """A run was asked for without a valid approval: our bug or an attack, never a person's mistake."""


class UnknownProposal(UserError):
    pass


@dataclass(frozen=True, eq=False)
class Approval:
    """A decision to run one exact code in one kernel, once. Only `Ledger.mint` makes valid ones."""

    token: str
    language: str
    code_hash: str
    how: How
    proposal_id: str | None = None


class Ledger:
    """The approvals minted and not yet spent."""

    def __init__(self) -> None:
        self._open: dict[str, Approval] = {}

    def mint(self, code: str, language: str, how: How, proposal_id: str | None = None) -> Approval:
        approval = Approval(secrets.token_hex(16), language, code_hash(code, language), how, proposal_id)
        self._open[approval.token] = approval
        return approval

    def redeem(self, approval: Approval, code: str, language: str) -> None:
        """Spend `approval` for running `code` in `language`; raises NotApproved unless it was minted here,
        is unspent, and binds exactly this code and language. Spent even when refused: no second try."""
        issued = self._open.pop(getattr(approval, "token", ""), None)
        if issued is None or issued is not approval:
            raise NotApproved("no approval was given for this run (or it was used already)")
        if code_hash(code, language) != issued.code_hash:
            raise NotApproved("the approval was given for different code or another kernel: it was not run")

    @property
    def open(self) -> int:
        return len(self._open)


@dataclass(frozen=True)
class Rejected:
    reason: str | None


@dataclass(frozen=True)
class Applied:
    uri: str
    where: str  # the document as the user knows it (relative to the workspace)


@dataclass
class Proposal:
    proposal_id: str
    turn_id: str
    language: str
    code: str
    risk: p.Risk
    auto_run: bool
    decision: asyncio.Future[Any]  # its Decision: a Run, Rejected or Applied
    tool_call_id: str | None = None  # it came as a native tool call
    origin: str = "model"  # "model" (ours) or "agent" (another agent, over MCP)
    agent: str | None = None  # the calling agent's name (its MCP client info)
    wait_reason: str | None = None
    created: float = field(default_factory=time.time)
    edited: bool = False  # approved with the user's edit

    @property
    def waiting(self) -> bool:
        return not self.decision.done()

    @property
    def code_hash(self) -> str:
        return code_hash(self.code, self.language)


class GateHost(Protocol):
    """What the gate needs from its workspace."""

    @property
    def settings(self) -> Settings: ...

    @property
    def trusted(self) -> bool: ...

    def send(self, method: str, params: dict[str, Any]) -> None: ...

    def check_language(self, language: str) -> str: ...

    def sandboxed(self, language: str) -> bool: ...

    def held(self) -> str | None:
        """Why no code may start now (an undo or redo is putting state back), or None."""

    async def rate(self, code: str, language: str) -> p.Risk: ...


StartRun = Callable[..., "Run"]  # RunManager.start(code, language, *, approval, origin, ...)
Record = Callable[[Any], None]  # Conversation.record


class Gate:
    """The proposals of one workspace, of every origin, and the only minter of approvals."""

    def __init__(self, host: GateHost, record: Record, start: StartRun, ledger: Ledger | None = None) -> None:
        self.host = host
        self._record = record
        self._start = start
        self.ledger = ledger or Ledger()
        self.proposals: dict[str, Proposal] = {}

    # ---- proposing -------------------------------------------------------------------------------------

    async def propose(
        self,
        code: str,
        language: str,
        *,
        turn_id: str,
        origin: str = "model",
        agent: str | None = None,
        tool_call_id: str | None = None,
        complete: bool = True,
        after: asyncio.Future[Any] | None = None,
    ) -> tuple[Proposal, p.ProposalEvent]:
        """Rate `code`, decide by the policy whether it runs at once, and show it. The caller records the
        returned event (the loop holds it until its reply ended). `after`: shown only once it is done."""
        try:
            language = self.host.check_language(language)
            risk = await self.host.rate(code, language)
        except UserError as exc:
            risk = p.Risk("medium", [str(exc)])
        if after is not None:
            await asyncio.wait([after])  # shown in the order they were proposed
        settings = self.host.settings
        decision = policy.decide(
            risk,
            auto_run=settings.auto_run,
            auto_run_max_risk=settings.auto_run_max_risk,
            trusted=self.host.trusted,
            sandboxed=self.host.sandboxed(language),
        )
        proposal = Proposal(
            proposal_id="p-" + uuid.uuid4().hex[:12],
            turn_id=turn_id,
            language=language,
            code=code,
            risk=risk,
            auto_run=decision.run_now,
            decision=asyncio.get_running_loop().create_future(),
            tool_call_id=tool_call_id,
            origin=origin,
            agent=agent,
            wait_reason=None if decision.run_now else decision.reason,
        )
        self.proposals[proposal.proposal_id] = proposal
        external = origin != "model"
        event = p.ProposalEvent(
            proposal.proposal_id,
            turn_id,
            language,
            code,
            risk,
            decision.run_now,
            complete,
            tool_call_id,
            code_hash=proposal.code_hash,
            origin=origin if external else None,
            agent=agent,
        )
        params = p.ProposalParams(
            proposal.proposal_id,
            turn_id,
            language,
            code,
            risk,
            decision.run_now,
            proposal.wait_reason,
            origin=origin if external else None,
            agent=agent,
            created=_iso(proposal.created) if external else None,
        )
        self.host.send(p.PROPOSAL, p.to_wire(params))
        return proposal, event

    # ---- deciding ----------------------------------------------------------------------------------------

    def run_now(self, proposal: Proposal) -> Run | None:
        """Run a proposal the policy lets run by itself (auto-run); None if it waits."""
        if not (proposal.auto_run and proposal.waiting) or self.host.held() is not None:
            return None  # it waits for a decision (during an undo: until the user approves it after)
        self._record(
            p.DecisionEvent(
                proposal.proposal_id,
                proposal.turn_id,
                "auto-run",
                code=proposal.code,
                code_hash=proposal.code_hash,
                agent=proposal.agent,
            )
        )
        run = self._run(proposal, proposal.code, "auto-run")
        self._decide(
            proposal, run, p.ProposalStatusParams(proposal.proposal_id, proposal.turn_id, "auto-run", run.run_id)
        )
        return run

    def approve(self, proposal_id: str, code: str | None = None) -> Run:
        """The user approved (with `code`: their edit of it). The approval is bound to what runs."""
        proposal = self.waiting(proposal_id)
        if (refusal := policy.may_run(self.host.trusted) or self.host.held()) is not None:
            raise UserError(refusal)  # before anything is recorded: the proposal still waits
        edited = code is not None and code != proposal.code
        final = code if code is not None else proposal.code
        proposal.edited = edited
        self._record(
            p.DecisionEvent(
                proposal_id,
                proposal.turn_id,
                "approved",
                code=final,
                edited=edited,
                code_hash=code_hash(final, proposal.language),
                agent=proposal.agent,
            )
        )
        run = self._run(proposal, final, "approved")
        self._decide(proposal, run, p.ProposalStatusParams(proposal_id, proposal.turn_id, "approved", run.run_id))
        return run

    def reject(self, proposal_id: str, reason: str | None = None) -> None:
        proposal = self.waiting(proposal_id)
        reason = reason.strip() if reason and reason.strip() else None
        self._record(
            p.DecisionEvent(
                proposal_id,
                proposal.turn_id,
                "rejected",
                language=proposal.language,
                reason=reason,
                agent=proposal.agent,
            )
        )
        status = p.ProposalStatusParams(proposal_id, proposal.turn_id, "rejected", reason=reason)
        self._decide(proposal, Rejected(reason), status)

    def applied(self, proposal_id: str, uri: str, where: str) -> None:
        """The proposal's code was written into `uri`: a waiting proposal is decided by that (it does not
        run); a decided one is not affected."""
        proposal = self.proposals.get(proposal_id)
        if proposal is None or not proposal.waiting:
            return
        self._record(
            p.DecisionEvent(
                proposal_id, proposal.turn_id, "applied", language=proposal.language, uri=uri, agent=proposal.agent
            )
        )
        status = p.ProposalStatusParams(proposal_id, proposal.turn_id, "applied", uri=uri)
        self._decide(proposal, Applied(uri, where), status)

    def expire(self, proposal_id: str) -> None:
        """The proposal can no longer be decided (its turn ended, its agent went away)."""
        proposal = self.proposals.pop(proposal_id, None)
        if proposal is not None and proposal.waiting:
            proposal.decision.cancel()
            status = p.ProposalStatusParams(proposal.proposal_id, proposal.turn_id, "expired")
            self.host.send(p.PROPOSAL_STATUS, p.to_wire(status))

    def user_run(self, code: str, language: str, **options: Any) -> Run:
        """Code the user runs by hand: running it is their decision (no card). Trust still applies."""
        if (refusal := policy.may_run(self.host.trusted) or self.host.held()) is not None:
            raise UserError(refusal)
        lang = self.host.check_language(language)
        approval = self.ledger.mint(code, lang, "user")
        return self._start(code, lang, approval=approval, origin="user", **options)

    # ---- what is waiting --------------------------------------------------------------------------------

    def waiting(self, proposal_id: str) -> Proposal:
        proposal = self.proposals.get(proposal_id)
        if proposal is None:
            raise UnknownProposal(
                f"No proposal {proposal_id!r} is waiting: it may belong to an ended turn, or was decided already."
            )
        if not proposal.waiting:
            raise UnknownProposal(f"Proposal {proposal_id!r} was already decided.")
        return proposal

    def is_waiting(self, proposal_id: str) -> bool:
        proposal = self.proposals.get(proposal_id)
        return proposal is not None and proposal.waiting

    def agents_waiting(self) -> list[dict[str, Any]]:
        """For interpreter.status: the agents' proposals that wait for a decision."""
        return [
            {
                "proposalId": pr.proposal_id,
                "agent": pr.agent or "an agent",
                "language": pr.language,
                "since": _iso(pr.created),
            }
            for pr in self.proposals.values()
            if pr.origin == "agent" and pr.waiting
        ]

    def forget(self, proposal_id: str) -> None:
        self.proposals.pop(proposal_id, None)

    # ---- inside ------------------------------------------------------------------------------------------

    def _run(self, proposal: Proposal, code: str, how: How) -> Run:
        self.host.check_language(proposal.language)  # no kernel for it: UnknownLanguage, in words
        approval = self.ledger.mint(code, proposal.language, how, proposal.proposal_id)
        return self._start(
            code,
            proposal.language,
            approval=approval,
            origin=proposal.origin,
            agent=proposal.agent,
            turn_id=proposal.turn_id,
            proposal_id=proposal.proposal_id,
        )

    def _decide(self, proposal: Proposal, decision: Any, status: p.ProposalStatusParams) -> None:
        proposal.decision.set_result(decision)
        self.host.send(p.PROPOSAL_STATUS, p.to_wire(status))


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))
