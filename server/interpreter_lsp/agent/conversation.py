"""A workspace's conversation: the events the user sees (and history stores), and the messages the
model reads, derived from them.

Events of a turn whose reply is still streaming (a decision, a run that ended quickly) are held and
added after that reply, so the model reads them in the order they are about.

Native tool calls are derived like everything else: the `assistant` event keeps the calls, a `proposal`
its call's id, and the view answers every call with one `tool` message (see `model_view`), so no stored
state can make an invalid message list.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import protocol as p
from ..history import History, Redo, cut, outlives_undo, replay, undo_start
from . import images, prompt, runtool
from .codeblocks import CodeBlock


class Conversation:
    def __init__(
        self, history: History, root: Path | None = None, on_redo_discarded: Callable[[Any], None] | None = None
    ) -> None:
        self._history = history
        self._workspace = str(root) if root is not None else None
        self.events: list[dict[str, Any]] = replay(history.load())
        self._held_turn: str | None = None
        self._held: list[p.HistoryEvent] = []
        # What redo can bring back (history.Redo); empty at start: what an earlier server's undo kept (the
        # files' and variables' side) went with it.
        self._redo = Redo(on_redo_discarded or (lambda _keep: None))
        # usage() and compactions() are asked at every step: tallied as events are added, not rescanned (a
        # conversation of weeks has thousands of events); recounted after an undo, a redo or a reset.
        self._generation = 0
        self._tally = _Tally(0)

    def add(self, event: p.HistoryEvent) -> dict[str, Any]:
        stored = self._history.append(p.to_wire(event))
        self.events.append(stored)
        self._redo.seen(stored)
        return stored

    # ---- a streaming reply's events, in order --------------------------------------------------------

    def hold(self, turn_id: str) -> None:
        """The reply of `turn_id` is streaming: its events wait for `release`."""
        self._held_turn = turn_id

    def record(self, event: p.HistoryEvent) -> None:
        """Add `event` now, or after the streaming reply of its turn."""
        if self._held_turn is not None and getattr(event, "turn_id", None) == self._held_turn:
            self._held.append(event)
        else:
            self.add(event)

    def release(self) -> None:
        self._held_turn = None
        held, self._held = self._held, []
        for event in held:
            self.add(event)

    # ---- the log's own operations -------------------------------------------------------------------

    def reset(self) -> None:
        self._history.append(p.to_wire(p.ResetEvent()))
        self._generation += 1
        self.events.clear()
        self._redo.clear()

    def to_undo(self) -> list[dict[str, Any]] | None:
        """The events an undo would drop: from the last user message, or from a user's own run made after
        it (history.undo_start); None when there is nothing to undo."""
        start = undo_start(self.events)
        return None if start is None else [e for e in self.events[start:] if not outlives_undo(e)]

    def undo(self, keep: Any = None) -> list[dict[str, Any]] | None:
        """Drop what `to_undo` names; returns those events. `keep`: what a redo of this undo needs besides
        the conversation (handed back by `redo`, or to `on_redo_discarded` when no redo can come)."""
        start = undo_start(self.events)
        if start is None:
            return None
        first = self.events[start]
        run_id = first.get("runId") if first.get("type") == "run" else None
        self._history.append(p.to_wire(p.UndoEvent(run_id)))
        before = list(self.events)
        self._generation += 1
        dropped = cut(self.events, start)
        self._redo.undone(before, self.events, keep)
        return dropped

    def to_redo(self) -> tuple[list[dict[str, Any]], Any] | None:
        """(the events a redo would bring back, what their undo kept), or None: nothing to redo."""
        return self._redo.peek()

    def redo(self) -> tuple[list[dict[str, Any]], Any] | None:
        """Take back the last undo: (the events it brought back, what their undo kept), or None."""
        if not self._redo.can():
            return None
        self._history.append(p.to_wire(p.RedoEvent()))
        events, brought, keep = self._redo.redo(self.events)
        self._generation += 1
        self.events[:] = events  # in place: views hold this list
        return brought, keep

    def close(self) -> None:
        self._history.close()

    # ---- views ----------------------------------------------------------------------------------------

    def _tallied(self) -> _Tally:
        tally = self._tally
        if tally.generation != self._generation or tally.seen > len(self.events):
            tally = self._tally = _Tally(self._generation)
        for event in self.events[tally.seen :]:
            kind = event.get("type")
            if kind == "usage":
                tally.usage["promptTokens"] += int(event.get("promptTokens", 0))
                tally.usage["completionTokens"] += int(event.get("completionTokens", 0))
                tally.usage["cost"] += float(event.get("cost", 0.0))
            elif kind == "compaction":
                tally.compactions.append(event)
        tally.seen = len(self.events)
        return tally

    def usage(self) -> dict[str, float]:
        return dict(self._tallied().usage)

    def proposal(self, proposal_id: str) -> dict[str, Any] | None:
        for event in reversed(self.events):
            if event.get("type") == "proposal" and event.get("proposalId") == proposal_id:
                return event
        return None

    def user_event(self, turn_id: str) -> dict[str, Any] | None:
        for event in reversed(self.events):
            if event.get("type") == "user" and event.get("turnId") == turn_id:
                return event
        return None

    def compactions(self) -> list[dict[str, Any]]:
        return list(self._tallied().compactions)

    def model_messages(self, system: str, *, native: bool = False) -> list[dict[str, Any]]:
        return self.model_view(system, native=native).messages

    def model_view(
        self,
        system: str,
        events: list[dict[str, Any]] | None = None,
        *,
        vision: bool = False,
        native: bool = False,
        summary: str = "",
    ) -> View:
        """The chat messages for the model: the latest compaction's summary (the first user message: it is
        data, not instructions, and the system message stays the same for providers' prompt caches) and
        what happened after the turns it condensed. Consecutive messages of one role are merged, as some
        providers require user and assistant to alternate. A request that failed before the model said
        anything (no model configured, an outage) is left out: it would otherwise be glued to the next.
        `events`: a view of these events instead (the turns a summary condenses, or `view_events` copied,
        with its `summary`, for a view built in a thread). `vision`: the model can
        see images: the most recent ones runs produced go as image parts (agent/images.py).

        Native tool calls (agent/runtool.py): with `native` (this request offers the tool), an assistant
        message carries its `tool_calls` and each call is answered by one `tool` message right after it
        (its run's result, the user's refusal, or why it got none), whatever the events in between: the
        user-role messages that happen meanwhile (a kernel restart, code the user ran) follow the answers.
        Without `native` (fences, or a model that cannot call tools now), the same calls read as fenced
        blocks and their results as user messages, as a fenced block's would."""
        if events is None:
            events, summary = self.view_events()
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
        if summary:
            messages.append({"role": "user", "content": prompt.summary_message(summary)})
        edited = {e["proposalId"] for e in events if e.get("type") == "decision" and e.get("edited")}
        # A proposal that came as a native call is answered by a tool message (its call's id).
        call_of = {
            e["proposalId"]: e["toolCallId"] for e in events if e.get("type") == "proposal" and e.get("toolCallId")
        }
        open_calls: dict[str, str | None] = {}  # id -> what became of its proposal (see runtool.unanswered)
        deferred: list[tuple[str, str | list[dict[str, Any]]]] = []  # user-role messages while calls are open
        unanswered = _unanswered_turns(events)
        request = 0

        def say(role: str, content: str | list[dict[str, Any]]) -> None:
            if not content:
                return
            if open_calls and role == "user":
                deferred.append((role, content))
                return
            last = messages[-1]
            if last["role"] == role and role != "system" and set(last) == {"role", "content"}:
                last["content"] = _joined(last["content"], content)
            else:
                messages.append({"role": role, "content": content})

        def answer(call_id: str, content: str) -> None:
            if call_id in open_calls:
                del open_calls[call_id]
                messages.append({"role": "tool", "tool_call_id": call_id, "content": content})
            if not open_calls:
                flush()

        def close() -> None:
            for call_id, decided in list(open_calls.items()):
                answer(call_id, runtool.unanswered(decided))

        def flush() -> None:
            held, deferred[:] = list(deferred), []
            for role, content in held:
                say(role, content)

        def assistant(e: dict[str, Any]) -> None:
            close()
            calls = e.get("toolCalls") or []
            if not calls:
                say("assistant", e.get("text", ""))
            elif native:
                wire = [runtool.wire(call) for call in calls]
                messages.append({"role": "assistant", "content": e.get("text") or None, "tool_calls": wire})
                for call in calls:
                    open_calls[str(call.get("id"))] = None
                for call in calls:
                    block = runtool.block_of(call)
                    if not isinstance(block, CodeBlock):  # unreadable: answered at once with why
                        answer(str(call.get("id")), block)
            else:
                say("assistant", _calls_as_text(e.get("text", ""), calls))

        def proposal(e: dict[str, Any]) -> None:
            call_id = e.get("toolCallId")
            if call_id in open_calls and open_calls[call_id] is None:
                open_calls[call_id] = ""

        def decision(e: dict[str, Any]) -> None:
            if e.get("agent"):
                return  # another agent's proposal (over MCP): its run, if any, is what the model reads
            call_id = call_of.get(e.get("proposalId")) if native else None
            if call_id is None or call_id not in open_calls:
                say("user", _decision_message(e, self._workspace))
            elif e.get("decision") in ("rejected", "applied"):
                answer(call_id, _decision_message(e, self._workspace))
            else:
                open_calls[call_id] = str(e.get("decision"))

        shown = _images_to_show(events) if vision else set()

        def run(e: dict[str, Any]) -> None:
            text = _run_message(e, e.get("proposalId") in edited)
            pictures = images.pngs(e.get("outputs") or [])
            call_id = call_of.get(e.get("proposalId")) if native else None
            if call_id is not None and call_id in open_calls:
                # The result answers the call; its images (a tool message holds text only) follow it.
                still_open = len(open_calls) > 1
                if pictures and still_open:
                    deferred.append(("user", _pictures(e, pictures, "", shown, vision)))
                answer(call_id, text)
                if pictures and not still_open:
                    say("user", _pictures(e, pictures, "", shown, vision))
                return
            if not pictures:
                say("user", text)
                return
            say("user", _pictures(e, pictures, text, shown, vision))

        def user(e: dict[str, Any]) -> None:
            nonlocal request
            close()
            if e.get("turnId") not in unanswered:
                say("user", e.get("content") or e.get("text", ""))
                request = len(messages) - 1

        handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            "user": user,
            "assistant": assistant,
            "proposal": proposal,
            "decision": decision,
            "run": run,
            "note": lambda e: say("user", e.get("forModel", "")),
            "kernel": lambda e: say("user", prompt.kernel_message(e.get("language", "python"), e.get("state", ""))),
        }
        for event in events:
            handler = handlers.get(str(event.get("type")))
            if handler is not None:
                handler(event)
        close()
        return View(messages, request, 1 if summary else 0)

    def view_events(self) -> tuple[list[dict[str, Any]], str]:
        """The events the model still reads whole, and the summary of those before them ("" if none)."""
        compactions = self.compactions()
        if not compactions:
            return self.events, ""
        latest = compactions[-1]
        start = after_turn(self.events, str(latest.get("upTo", "")))
        return [e for e in self.events[start:] if e.get("type") != "compaction"], str(latest.get("summary", ""))


@dataclass
class _Tally:
    """What the events up to `seen` add up to (Conversation._tallied), for one generation of the list."""

    generation: int
    seen: int = 0
    usage: dict[str, float] = field(default_factory=lambda: {"promptTokens": 0, "completionTokens": 0, "cost": 0.0})
    compactions: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class View:
    messages: list[dict[str, Any]]
    request: int  # the index of the message that carries the latest user request (0: none)
    summary: int = 0  # the index of the message that carries the summary (0: none)


def _joined(a: str | list[dict[str, Any]], b: str | list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    if isinstance(a, str) and isinstance(b, str):
        return a + "\n\n" + b
    return _parts(a) + _parts(b)


def _parts(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    return content if isinstance(content, list) else [{"type": "text", "text": content}]


def images_to_send(events: list[dict[str, Any]]) -> list[str]:
    """The PNGs a vision model's view of these events would carry (to prepare them ahead: images.prepare)."""
    shown = _images_to_show(events)
    return [
        png
        for e in events
        if e.get("type") == "run"
        for number, png in enumerate(images.pngs(e.get("outputs") or []))
        if (str(e.get("runId")), number) in shown
    ]


def _images_to_show(events: list[dict[str, Any]]) -> set[tuple[str, int]]:
    """(runId, number) of the most recent images, at most images.MAX_IMAGES."""
    chosen: list[tuple[str, int]] = []
    for event in reversed(events):
        if event.get("type") != "run":
            continue
        pictures = images.pngs(event.get("outputs") or [])
        for number in range(len(pictures) - 1, -1, -1):
            if len(chosen) >= images.MAX_IMAGES:
                return set(chosen)
            chosen.append((str(event.get("runId")), number))
    return set(chosen)


def _pictures(
    e: dict[str, Any], pictures: list[str], text: str, shown: set[tuple[str, int]], vision: bool
) -> str | list[dict[str, Any]]:
    """A run's message with its images: image parts for those shown, a description for the others
    (`text`: the run's message before them, "" when it went as a tool result)."""
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for number, png in enumerate(pictures):
        if (str(e.get("runId")), number) not in shown:
            reason = "only the most recent images are sent" if vision else ""
            parts.append({"type": "text", "text": images.described(png, sent=False, reason=reason)})
        elif (sent := images.for_model(png)) is None:
            reason = f"over {images.MAX_BYTES // 1_000_000} MB even downscaled, or unreadable"
            parts.append({"type": "text", "text": images.described(png, sent=False, reason=reason)})
        else:
            parts.append({"type": "text", "text": images.described(png, sent=True, shown=sent)})
            parts.append({"type": "image_url", "image_url": {"url": images.data_url(sent)}})
    if all(part["type"] == "text" for part in parts):
        return "\n".join(part["text"] for part in parts)
    return parts


def _calls_as_text(text: str, calls: list[dict[str, Any]]) -> str:
    """An assistant reply's native tool calls as fenced blocks, for a request that offers no tools."""
    pieces = [text] if text else []
    for call in calls:
        block = runtool.block_of(call)
        if isinstance(block, CodeBlock):
            pieces.append(prompt.fenced(block.code, block.language))
        else:
            pieces.append(f"(A {call.get('name')} call that could not be read: {block})")
    return "\n\n".join(pieces)


def after_turn(events: list[dict[str, Any]], turn_id: str) -> int:
    """The index just after the last event of `turn_id` (0 when it has none)."""
    for index in range(len(events) - 1, -1, -1):
        if events[index].get("turnId") == turn_id:
            return index + 1
    return 0


def _unanswered_turns(events: list[dict[str, Any]]) -> set[str]:
    """Turns that ended in an error before any reply of the model."""
    answered = {e.get("turnId") for e in events if e.get("type") == "assistant"}
    return {
        str(e.get("turnId"))
        for e in events
        if e.get("type") == "turnEnd" and e.get("state") == "error" and e.get("turnId") not in answered
    }


def _decision_message(event: dict[str, Any], workspace: str | None) -> str:
    decision, language = event.get("decision"), event.get("language") or "python"
    if decision == "rejected":
        return prompt.rejection_message(language, event.get("reason"))
    if decision == "applied":
        return prompt.applied_message(language, event.get("uri") or "", workspace)
    return ""


def _run_message(event: dict[str, Any], edited: bool) -> str:
    language, code = event.get("language", "python"), event.get("code", "")
    output, state = event.get("outputForModel", ""), event.get("state", "ok")
    if event.get("origin") in ("user", "agent"):  # not the model's own run
        return prompt.user_run_message(code, language, output, state)
    return prompt.run_result_message(code, language, output, state, edited=edited)
