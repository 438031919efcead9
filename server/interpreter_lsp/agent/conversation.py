"""A workspace's conversation: the events the user sees (and history stores), and the messages the
model reads, derived from them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..history import History, drop_last_user_message, replay
from . import prompt


class Conversation:
    def __init__(self, history: History) -> None:
        self._history = history
        self.events: list[dict[str, Any]] = replay(history.load())

    def add(self, event: dict[str, Any]) -> dict[str, Any]:
        stored = self._history.append(event)
        self.events.append(stored)
        return stored

    def reset(self) -> None:
        self._history.append({"type": "reset"})
        self.events.clear()

    def undo(self) -> bool:
        if not any(e.get("type") == "user" for e in self.events):
            return False
        self._history.append({"type": "undo"})
        drop_last_user_message(self.events)
        return True

    def usage(self) -> dict[str, float]:
        total = {"promptTokens": 0, "completionTokens": 0, "cost": 0.0}
        for event in self.events:
            if event.get("type") == "usage":
                total["promptTokens"] += int(event.get("promptTokens", 0))
                total["completionTokens"] += int(event.get("completionTokens", 0))
                total["cost"] += float(event.get("cost", 0.0))
        return total

    def proposal(self, proposal_id: str) -> dict[str, Any] | None:
        for event in reversed(self.events):
            if event.get("type") == "proposal" and event.get("proposalId") == proposal_id:
                return event
        return None

    def model_messages(self, system: str) -> list[dict[str, str]]:
        """The chat messages for the model. Consecutive messages of one role are merged, as some
        providers require user and assistant to alternate."""
        messages: list[dict[str, str]] = [{"role": "system", "content": system}]
        edited = {e["proposalId"]: e for e in self.events if e.get("type") == "decision" and e.get("edited")}

        def say(role: str, content: str) -> None:
            if not content:
                return
            if messages[-1]["role"] == role and role != "system":
                messages[-1]["content"] += "\n\n" + content
            else:
                messages.append({"role": role, "content": content})

        handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            "user": lambda e: say("user", e.get("content") or e.get("text", "")),
            "assistant": lambda e: say("assistant", e.get("text", "")),
            "decision": lambda e: say("user", prompt.rejection_message(e.get("language", "python"), e.get("reason")))
            if e.get("decision") == "rejected"
            else None,
            "run": lambda e: say("user", _run_message(e, e.get("proposalId") in edited)),
            "note": lambda e: say("user", e.get("forModel", "")),
        }
        for event in self.events:
            handler = handlers.get(str(event.get("type")))
            if handler is not None:
                handler(event)
        return messages


def _run_message(event: dict[str, Any], edited: bool) -> str:
    language, code = event.get("language", "python"), event.get("code", "")
    output, state = event.get("outputForModel", ""), event.get("state", "ok")
    if event.get("origin") == "user":
        return prompt.user_run_message(code, language, output, state)
    return prompt.run_result_message(code, language, output, state, edited=edited)
