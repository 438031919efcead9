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
from typing import Any, ClassVar

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
        # The last view built (model_view), to go on from when only events were added since.
        self._view_cache: _CachedView | None = None

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
        resume: bool = False,
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
        blocks and their results as user messages, as a fenced block's would.

        `resume` (the requests' views, ~3 a turn): go on from the last view built when `events` is that view's
        list with events added since (the view of n events is the same whether built at once or step by step:
        test_conversation_view); else every event is read again (~0.4 ms for 180 events, 7.5 ms for 1,800)."""
        if events is None:
            events, summary = self.view_events()
        key = (system, summary, vision, native, self._generation, id(events[0]) if events else None)
        unanswered = _unanswered_turns(events)
        shown = _images_to_show(events) if vision else set()
        cached = self._view_cache
        # Only events added since the last view of the same list: carry on from where it stopped (its state
        # before its last `close`), unless an added event changes how an earlier one reads (a turn that ended
        # in an error with no reply drops its request; newer images displace older ones).
        if (
            resume
            and cached is not None
            and cached.key == key
            and cached.count <= len(events)
            and events[cached.count - 1] is cached.last
            and cached.builder.unanswered == unanswered
            and cached.builder.shown == shown
        ):
            builder = cached.builder.copy()
            builder.feed(events[cached.count :])
        else:
            builder = _ViewBuilder(system, summary, self._workspace, vision=vision, native=native,
                                   unanswered=unanswered, shown=shown)
            builder.feed(events)
        if resume and events:
            self._view_cache = _CachedView(key, len(events), events[-1], builder.copy())
        return builder.finish()

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
    messages: list[dict[str, Any]]  # read only: later views share them
    request: int  # the index of the message that carries the latest user request (0: none)
    summary: int = 0  # the index of the message that carries the summary (0: none)


@dataclass
class _CachedView:
    """The state of the last view built (Conversation.model_view), before its last `close`: `count` events of
    the list whose first event and inputs `key` names, the last of them `last`."""

    key: tuple[Any, ...]
    count: int
    last: dict[str, Any]
    builder: _ViewBuilder


class _ViewBuilder:
    """Conversation.model_view's rules, event by event (see there), resumable: `copy` is the state to go on
    from with the events that come next, `finish` the view as of now (open calls closed)."""

    def __init__(
        self, system: str, summary: str, workspace: str | None, *, vision: bool, native: bool,
        unanswered: set[str], shown: set[tuple[str, int]],
    ) -> None:
        self.workspace = workspace
        self.vision = vision
        self.native = native
        self.unanswered = unanswered  # turns that ended in an error before any reply: their request is left out
        self.shown = shown  # (runId, number) of the images sent as images
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
        self.summary = 0
        if summary:
            self.messages.append({"role": "user", "content": prompt.summary_message(summary)})
            self.summary = 1
        self.edited: set[Any] = set()
        # A proposal that came as a native call is answered by a tool message (its call's id).
        self.call_of: dict[Any, Any] = {}
        self.open_calls: dict[str, str | None] = {}  # id -> what became of its proposal (runtool.unanswered)
        self.deferred: list[tuple[str, str | list[dict[str, Any]]]] = []  # user-role messages while calls are open
        self.request = 0

    def copy(self) -> _ViewBuilder:
        twin = object.__new__(_ViewBuilder)
        twin.__dict__.update(self.__dict__)
        # Only the last message is ever changed in place (a merge): the others are shared by the views handed
        # out and the state kept (no one changes a view's messages: budget.fit and the redaction copy them).
        twin.messages = [*self.messages[:-1], dict(self.messages[-1])]
        twin.edited = set(self.edited)
        twin.call_of = dict(self.call_of)
        twin.open_calls = dict(self.open_calls)
        twin.deferred = list(self.deferred)
        return twin

    def feed(self, events: list[dict[str, Any]]) -> None:
        for e in events:
            kind = e.get("type")
            if kind == "decision" and e.get("edited"):
                self.edited.add(e["proposalId"])
            elif kind == "proposal" and e.get("toolCallId"):
                self.call_of[e["proposalId"]] = e["toolCallId"]
        for event in events:
            handler = self._HANDLERS.get(str(event.get("type")))
            if handler is not None:
                handler(self, event)

    def finish(self) -> View:
        self._close()
        return View(self.messages, self.request, self.summary)

    def _say(self, role: str, content: str | list[dict[str, Any]]) -> None:
        if not content:
            return
        if self.open_calls and role == "user":
            self.deferred.append((role, content))
            return
        last = self.messages[-1]
        if last["role"] == role and role != "system" and set(last) == {"role", "content"}:
            last["content"] = _joined(last["content"], content)
        else:
            self.messages.append({"role": role, "content": content})

    def _answer(self, call_id: str, content: str) -> None:
        if call_id in self.open_calls:
            del self.open_calls[call_id]
            self.messages.append({"role": "tool", "tool_call_id": call_id, "content": content})
        if not self.open_calls:
            self._flush()

    def _close(self) -> None:
        for call_id, decided in list(self.open_calls.items()):
            self._answer(call_id, runtool.unanswered(decided))

    def _flush(self) -> None:
        held, self.deferred[:] = list(self.deferred), []
        for role, content in held:
            self._say(role, content)

    def _assistant(self, e: dict[str, Any]) -> None:
        self._close()
        calls = e.get("toolCalls") or []
        if not calls:
            self._say("assistant", e.get("text", ""))
        elif self.native:
            wire = [runtool.wire(call) for call in calls]
            self.messages.append({"role": "assistant", "content": e.get("text") or None, "tool_calls": wire})
            for call in calls:
                self.open_calls[str(call.get("id"))] = None
            for call in calls:
                block = runtool.block_of(call)
                if not isinstance(block, CodeBlock):  # unreadable: answered at once with why
                    self._answer(str(call.get("id")), block)
        else:
            self._say("assistant", _calls_as_text(e.get("text", ""), calls))

    def _proposal(self, e: dict[str, Any]) -> None:
        call_id = e.get("toolCallId")
        if call_id in self.open_calls and self.open_calls[call_id] is None:
            self.open_calls[call_id] = ""

    def _decision(self, e: dict[str, Any]) -> None:
        if e.get("agent"):
            return  # another agent's proposal (over MCP): its run, if any, is what the model reads
        call_id = self.call_of.get(e.get("proposalId")) if self.native else None
        if call_id is None or call_id not in self.open_calls:
            self._say("user", _decision_message(e, self.workspace))
        elif e.get("decision") in ("rejected", "applied"):
            self._answer(call_id, _decision_message(e, self.workspace))
        else:
            self.open_calls[call_id] = str(e.get("decision"))

    def _run(self, e: dict[str, Any]) -> None:
        text = _run_message(e, e.get("proposalId") in self.edited)
        pictures = images.pngs(e.get("outputs") or [])
        call_id = self.call_of.get(e.get("proposalId")) if self.native else None
        if call_id is not None and call_id in self.open_calls:
            # The result answers the call; its images (a tool message holds text only) follow it.
            still_open = len(self.open_calls) > 1
            if pictures and still_open:
                self.deferred.append(("user", _pictures(e, pictures, "", self.shown, self.vision)))
            self._answer(call_id, text)
            if pictures and not still_open:
                self._say("user", _pictures(e, pictures, "", self.shown, self.vision))
            return
        if not pictures:
            self._say("user", text)
            return
        self._say("user", _pictures(e, pictures, text, self.shown, self.vision))

    def _user(self, e: dict[str, Any]) -> None:
        self._close()
        if e.get("turnId") not in self.unanswered:
            self._say("user", e.get("content") or e.get("text", ""))
            self.request = len(self.messages) - 1

    def _note(self, e: dict[str, Any]) -> None:
        self._say("user", e.get("forModel", ""))

    def _kernel(self, e: dict[str, Any]) -> None:
        self._say("user", prompt.kernel_message(e.get("language", "python"), e.get("state", "")))

    _HANDLERS: ClassVar[dict[str, Callable[[_ViewBuilder, dict[str, Any]], None]]] = {
        "user": _user,
        "assistant": _assistant,
        "proposal": _proposal,
        "decision": _decision,
        "run": _run,
        "note": _note,
        "kernel": _kernel,
    }


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
