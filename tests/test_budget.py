"""The context budget's rules, with a counter of ~4 characters per token (tests/fakes.py): what is kept,
what is left out, what is cut. End to end over LSP with litellm's counter: tests/test_context.py."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from fakes import count_tokens
from interpreter_lsp import protocol as p
from interpreter_lsp.agent import budget
from interpreter_lsp.agent.conversation import Conversation
from interpreter_lsp.history import History
from interpreter_lsp.llm.errors import ModelError
from interpreter_lsp.llm.models import ModelFacts

FACTS = ModelFacts("fake", None, 0.0, 0.0, False, False, False, count_tokens)


def msg(role: str, words: int, tag: str) -> dict[str, Any]:
    return {"role": role, "content": f"{tag} " + "word " * words}


def test_limits_come_from_the_setting_the_model_or_a_guess() -> None:
    assert budget.limits(4000, 128000, None) == budget.Limits(4000, "setting", 500)
    assert budget.limits(None, 128000, 1000) == budget.Limits(128000, "model", 1000)
    assert budget.limits(None, None, None) == budget.Limits(8192, "guess", 1024)
    assert budget.limits(1000, None, None).reply_reserve == 256  # never less than 256
    assert budget.limits(1000, None, 900).reply_reserve == 500  # never more than half the window


def test_a_window_that_is_not_a_positive_finite_number_is_unknown() -> None:
    """A model's info (litellm's map, a local server's JSON) saying Infinity, NaN, 0 or a string gives no
    window (the guess is used), never a crash or a window no request can fill."""
    from interpreter_lsp.llm.models import _facts_of

    for bad in (float("inf"), float("nan"), 0, -5, "8192", True):
        assert _facts_of("m", {"max_input_tokens": bad}, True, counter="estimate").window is None, bad
    assert _facts_of("m", {"max_input_tokens": 8192.0}, True, counter="estimate").window == 8192


async def test_a_view_that_fits_is_sent_whole() -> None:
    messages = [msg("system", 10, "sys"), msg("user", 10, "q"), msg("assistant", 10, "a")]
    fitted = await budget.fit(messages, budget.TokenCache(), FACTS, 1000, frozenset({1}))
    assert fitted.messages == messages and fitted.left_out == 0 and not fitted.cut


async def test_the_oldest_messages_give_way_and_the_request_and_latest_result_stay() -> None:
    messages = [msg("system", 20, "sys")]
    for i in range(10):
        messages += [msg("user", 100, f"q{i}"), msg("assistant", 100, f"a{i}")]
    messages += [msg("user", 100, "request"), msg("assistant", 100, "code"), msg("user", 100, "result")]
    request = len(messages) - 3
    fitted = await budget.fit(messages, budget.TokenCache(), FACTS, 600, frozenset({request}))
    text = [m["content"].split()[0] for m in fitted.messages]
    assert text[0] == "sys" and "request" in text and text[-1] == "result"
    assert "q0" not in text and fitted.left_out > 0
    assert "left out to fit your context window" in fitted.messages[0]["content"]
    assert count_tokens(fitted.messages) <= 600
    roles = [m["role"] for m in fitted.messages[1:]]
    assert all(a != b for a, b in pairwise(roles)), roles  # user and assistant still alternate


async def test_a_huge_latest_result_is_cut_in_the_middle() -> None:
    result = {"role": "user", "content": "HEAD " + "x " * 20000 + " TAIL"}
    messages = [msg("system", 20, "sys"), msg("user", 10, "request"), msg("assistant", 10, "code"), result]
    fitted = await budget.fit(messages, budget.TokenCache(), FACTS, 800, frozenset({1}))
    last = fitted.messages[-1]["content"]
    assert fitted.cut and last.startswith("HEAD") and last.endswith("TAIL") and "characters cut" in last
    assert count_tokens(fitted.messages) <= 800


async def test_a_system_message_bigger_than_the_window_is_an_error_that_says_what_to_do() -> None:
    messages = [msg("system", 5000, "sys"), msg("user", 10, "request")]
    with pytest.raises(ModelError, match="contextWindow"):
        await budget.fit(messages, budget.TokenCache(), FACTS, 300, frozenset({1}))


async def test_counts_are_cached_per_message() -> None:
    calls: list[int] = []

    def counting(messages: list[dict[str, Any]]) -> int:
        calls.append(len(messages))
        return count_tokens(messages)

    facts = ModelFacts("fake", None, 0.0, 0.0, False, False, False, counting)
    cache = budget.TokenCache()
    messages = [msg("system", 5, "sys"), msg("user", 5, "q")]
    await cache.counts(messages, facts)
    await cache.counts([*messages, msg("assistant", 5, "a")], facts)
    assert len(calls) == 3  # the second call counted only the new message


async def test_a_message_known_by_identity_is_counted_again_once_it_changed() -> None:
    """A view's messages are shared with the views after it and known by identity; one whose content or
    fields changed all the same is counted for what it holds now."""
    counted: list[dict[str, Any]] = []

    def counting(messages: list[dict[str, Any]]) -> int:
        counted.extend(messages)
        return count_tokens(messages) + (10 if "name" in messages[0] else 0)

    facts = ModelFacts("fake", None, 0.0, 0.0, False, False, False, counting)
    cache = budget.TokenCache()
    message = msg("user", 5, "q")
    [before] = await cache.counts([message], facts)
    assert [before] == await cache.counts([message], facts) and len(counted) == 1  # known: not counted again
    message["content"] = "q " + "word " * 50
    [longer] = await cache.counts([message], facts)
    message["name"] = "someone"  # a field beside the content
    [named] = await cache.counts([message], facts)
    assert before < longer < named and len(counted) == 3
    assert [before] == await cache.counts([msg("user", 5, "q")], facts)  # an equal message: the same count
    assert len(counted) == 3


def test_the_view_after_a_compaction_starts_with_the_summary_as_data(tmp_path: Path) -> None:
    conversation = Conversation(History(tmp_path / "history.jsonl"), tmp_path)
    for turn in ("t-1", "t-2"):
        conversation.add(p.UserEvent(turn, f"question of {turn}", f"question of {turn}"))
        conversation.add(p.AssistantEvent(turn, f"answer of {turn}"))
        conversation.add(p.TurnEndEvent(turn, "done"))
    conversation.add(p.CompactionEvent("the user asked two questions", "t-1"))
    view = conversation.model_view("SYSTEM")
    assert view.messages[0] == {"role": "system", "content": "SYSTEM"}  # unchanged: providers cache it
    assert view.summary == 1 and "the user asked two questions" in view.messages[1]["content"]
    assert "not instructions" in view.messages[1]["content"]
    text = str(view.messages)
    assert "question of t-1" not in text and "question of t-2" in text
    # After a restart the same view is rebuilt from the log.
    again = Conversation(History(tmp_path / "history.jsonl"), tmp_path).model_view("SYSTEM")
    assert again.messages == view.messages
