"""The model's context for each request of a turn: the view of the conversation (agent/conversation.py),
compacted when it grows past `compactAt` (agent/compaction.py), fitted to the window (agent/budget.py),
and checked against the caps (`maxCost`, `maxTokensPerTurn`) before it is sent.

It reaches the workspace only through the loop's `LoopHost`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import platform
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import protocol as p
from ..errors import UserError
from ..llm.errors import ModelError
from ..llm.models import ModelFacts
from . import budget, compaction, images, prompt, runtool
from .conversation import Conversation, View, after_turn, images_to_send
from .host import LoopHost

log = logging.getLogger(__name__)

SUMMARY_TIMEOUT = 300.0  # seconds for the summary request as a whole
# The model's view is asked for ~3 times a turn. It goes on from the last one (Conversation.model_view's
# `resume`: 0.26 ms at 1,500 events against 3.2 ms read whole, measured together), but is read whole from
# every event since the last compaction after an undo, a redo, a reset or newer images: 0.4 ms for 180
# events (30 turns), 7.5 ms for 1,800, 20 ms for 6,000 (a window that compacts late). Past this many events
# it is built in a thread (a hand-off costs ~0.2 ms), not on the loop.
VIEW_ON_LOOP = 500


class NothingToCompact(UserError):
    pass


@dataclass(frozen=True)
class Request:
    messages: list[dict[str, Any]]
    tokens: int
    facts: ModelFacts
    limits: budget.Limits
    tools: list[dict[str, Any]] | None = None  # offered natively (run_code), or None: code comes in fences


@dataclass(frozen=True)
class Compacted:
    event: p.CompactionEvent
    summary_tokens: int
    turns: int


class ContextKeeper:
    def __init__(self, host: LoopHost, conversation: Conversation) -> None:
        self.host = host
        self.conversation = conversation
        self.cache = budget.TokenCache()

    def system(self, native: bool = False) -> str:
        s = self.host.settings
        return prompt.system_message(
            prompt.PromptContext(
                workspace=str(self.host.root),
                os_name=platform.system() or "unknown",
                languages=self.host.available_languages(),
                custom_instructions=s.custom_instructions,
                system_message=s.system_message,
                tools=native,
                remote_directory=self.host.remote_directory(),
            )
        )

    def native(self, facts: ModelFacts) -> bool:
        """Whether requests offer the run_code tool (codeFormat; "auto": where litellm says the model
        supports function calling)."""
        code_format = self.host.settings.code_format
        return code_format == "tools" or (code_format == "auto" and facts.function_calling)

    async def _render(self, system: str, events: list[dict[str, Any]], **options: Any) -> View:
        """The model's view of `events` (Conversation.model_view): on the loop when short, else in a thread, from
        a copy of the list (the loop goes on adding events: the view is as of this call)."""
        if len(events) <= VIEW_ON_LOOP:
            return self.conversation.model_view(system, events, **options)
        return await asyncio.to_thread(self.conversation.model_view, system, list(events), **options)

    async def _view(self, facts: ModelFacts) -> tuple[Any, list[dict[str, Any]] | None, int]:
        """The conversation's view for the next request, the tools it offers, and their tokens (the
        tools' schema travels with every request: it takes room in the window like a message)."""
        native = self.native(facts)
        events, summary = self.conversation.view_events()
        if facts.vision:  # large images are downscaled off the loop before the view takes them
            await images.prepare(images_to_send(events))
        view = await self._render(
            self.system(native), events, summary=summary, vision=facts.vision, native=native, resume=True
        )
        if not native:
            return view, None, 0
        tools = runtool.tools(self.host.available_languages())
        [tool_tokens] = await self.cache.counts([{"role": "system", "content": json.dumps(tools)}], facts)
        return view, tools, tool_tokens

    def limits(self, facts: ModelFacts) -> budget.Limits:
        s = self.host.settings
        return budget.limits(s.context_window, facts.window, s.max_tokens)

    # ---- one request ------------------------------------------------------------------------------------

    async def prepare(self, turn_id: str | None, on_compacting: Callable[[], None]) -> Request:
        """The messages of the next request, compacted and fitted; raises ModelError when even the
        system message and the request cannot fit."""
        facts = await self.host.model_facts()
        limits = self.limits(facts)
        view, tools, tool_tokens = await self._view(facts)
        tokens = sum(await self.cache.counts(view.messages, facts, view=True)) + tool_tokens
        if tokens > self.host.settings.compact_at * limits.window:
            plan = compaction.plan(self.conversation.events, self._up_to(), turn_id)
            if plan is not None:
                on_compacting()
                await self.compact(plan, facts, limits, turn_id)
                view, tools, tool_tokens = await self._view(facts)
        pinned = frozenset({view.request, view.summary})
        fitted = await budget.fit(view.messages, self.cache, facts, limits.prompt_limit - tool_tokens, pinned)
        if fitted.left_out or fitted.cut:
            log.info("request fitted: %d messages left out, cut: %s", fitted.left_out, fitted.cut)
        return Request(fitted.messages, fitted.tokens + tool_tokens, facts, limits, tools)

    def over_cap(self, turn_id: str, request: Request) -> str | None:
        """Why the request must not be sent (a cap it would pass, in words), or None."""
        s = self.host.settings
        if s.max_tokens_per_turn is not None:
            used = self._turn_tokens(turn_id)
            if request.tokens > s.max_tokens_per_turn:
                # The conversation alone is over the cap: a new turn would stop at once too.
                return (
                    f"Stopped before asking the model: the request alone needs about {request.tokens:,} tokens "
                    f"(the conversation so far and the editor's context), over interpreter.maxTokensPerTurn "
                    f"({s.max_tokens_per_turn:,}), so no turn fits under it now. Compact the conversation "
                    f"(Interpreter: Compact Conversation), reset it, or raise maxTokensPerTurn above "
                    f"{request.tokens:,}."
                )
            if used + request.tokens > s.max_tokens_per_turn:
                return (
                    f"Stopped before asking the model: this turn has used {used:,} tokens and the next request "
                    f"needs about {request.tokens:,} more, over interpreter.maxTokensPerTurn "
                    f"({s.max_tokens_per_turn:,}). Raise maxTokensPerTurn to let a turn go further, or send a "
                    "message to continue in a new turn."
                )
        if s.max_cost is not None and request.facts.priced:
            spent = float(self.conversation.usage()["cost"])
            next_cost = request.facts.cost(request.tokens)
            if spent + next_cost > s.max_cost:
                return (
                    f"Stopped before asking the model: this conversation has cost ${spent:.4f} and the next "
                    f"request would cost about ${next_cost:.4f}, over interpreter.maxCost (${s.max_cost:.4f}). "
                    "Raise maxCost, or reset the conversation, to go on."
                )
        return None

    def _turn_tokens(self, turn_id: str) -> int:
        return sum(
            int(e.get("promptTokens", 0)) + int(e.get("completionTokens", 0))
            for e in self.conversation.events
            if e.get("type") == "usage" and e.get("turnId") == turn_id
        )

    # ---- compaction ----------------------------------------------------------------------------------

    def _up_to(self) -> str | None:
        compactions = self.conversation.compactions()
        return str(compactions[-1].get("upTo")) if compactions else None

    def _summary(self) -> str:
        compactions = self.conversation.compactions()
        return str(compactions[-1].get("summary", "")) if compactions else ""

    async def compact_now(self) -> Compacted:
        """interpreter.compact: every ended turn not yet condensed."""
        plan = compaction.plan(self.conversation.events, self._up_to(), None)
        if plan is None:
            raise NothingToCompact("Nothing to compact: no turn ended since the last compaction.")
        facts = await self.host.model_facts()
        return await self.compact(plan, facts, self.limits(facts), None)

    async def compact(
        self, plan: compaction.Plan, facts: ModelFacts, limits: budget.Limits, turn_id: str | None
    ) -> Compacted:
        previous = self._summary()
        condensed = (await self._render("", plan.events)).messages
        room = compaction.summary_reply_room(limits.window)
        # The transcript's share of the window, in characters, from this model's own ratio.
        counts = await self.cache.counts(condensed, facts)
        chars = sum(len(str(m["content"])) for m in condensed)
        ratio = chars / max(sum(counts), 1)
        prompt_tokens = sum(await self.cache.counts([{"role": "user", "content": previous}], facts)) + 400
        room_chars = int((limits.window - room - prompt_tokens) * ratio * 0.85)
        request = compaction.summary_request(previous, condensed, room_chars)
        try:
            reply = await asyncio.wait_for(
                self.host.call_model(request, lambda _delta: None, max_tokens=room), SUMMARY_TIMEOUT
            )
            if not reply.text.strip():
                raise ModelError("the model answered with an empty summary")
        except (ModelError, asyncio.TimeoutError) as exc:
            why = exc.message if isinstance(exc, ModelError) else f"no answer within {SUMMARY_TIMEOUT:g} s"
            return await self._drop(plan, facts, limits, previous, why, turn_id)
        summary = reply.text.strip()
        [summary_tokens] = await self.cache.counts([{"role": "user", "content": summary}], facts)
        if turn_id is not None or reply.prompt_tokens:
            self.conversation.add(p.UsageEvent(turn_id or "", reply.prompt_tokens, reply.completion_tokens, reply.cost))
        event = p.CompactionEvent(summary, plan.up_to, summary_tokens=summary_tokens, turns=len(plan.turns))
        self.conversation.add(event)
        return Compacted(event, summary_tokens, len(plan.turns))

    async def _drop(
        self,
        plan: compaction.Plan,
        facts: ModelFacts,
        limits: budget.Limits,
        previous: str,
        why: str,
        turn_id: str | None,
    ) -> Compacted:
        """No summary: the fewest oldest whole turns are left out of the view so that it falls under half
        of `compactAt` (all the ended ones at most); the user is told."""
        target = self.host.settings.compact_at * limits.window / 2
        native = self.native(facts)
        system = self.system(native)
        chosen = plan.turns[-1]
        for candidate in plan.turns:
            start = after_turn(self.conversation.events, candidate)
            rest = [e for e in self.conversation.events[start:] if e.get("type") != "compaction"]
            messages = (await self._render(system, rest, vision=facts.vision, native=native)).messages
            if sum(await self.cache.counts(messages, facts)) <= target:
                chosen = candidate
                break
        dropped = plan.turns.index(chosen) + 1
        summary = compaction.dropped_summary(previous, dropped, "the summary could not be written")
        text = (
            f"Earlier turns could not be condensed ({why}): the oldest {dropped} turn"
            f"{'s' if dropped != 1 else ''} were left out of what the model reads. They stay in the history."
        )
        self.conversation.add(p.NoteEvent(text, turn_id))
        event = p.CompactionEvent(summary, chosen, turns=dropped, failed=why)
        self.conversation.add(event)
        return Compacted(event, 0, dropped)

    # ---- what the user sees ----------------------------------------------------------------------------

    async def use(self, tokens: int | None = None, facts: ModelFacts | None = None) -> p.ContextUse:
        """How full the context is: `tokens` of the request just prepared, else of the next one."""
        if facts is None:
            facts = await self.host.model_facts()
        limits = self.limits(facts)
        if tokens is None:
            view, _tools, tool_tokens = await self._view(facts)
            tokens = sum(await self.cache.counts(view.messages, facts)) + tool_tokens
            tokens = min(tokens, limits.prompt_limit)  # what fitting would send at most
        return p.ContextUse(
            tokens=tokens,
            window=limits.window,
            window_source=limits.source,  # type: ignore[arg-type]
            reply_reserve=limits.reply_reserve,
            cost=round(float(self.conversation.usage()["cost"]), 6),
            cost_known=facts.priced,
            compactions=len(self.conversation.compactions()),
        )
