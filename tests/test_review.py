"""The optional reviewer model (interpreter.reviewModel): a separate request for each medium-risk proposal;
its verdict and one-line reason are shown on the proposal; it can raise a rating, never lower one."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from harness import Session, start_session, stop_session
from interpreter_lsp import protocol as p
from interpreter_lsp.safety import review
from scripted_model import ScriptedModel

FENCE = "```"
MEDIUM = "import shutil\nshutil.rmtree('build')"


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as m:
        yield m


@pytest.fixture
async def chat(workspace_root: Path, home: Path, model: ScriptedModel) -> AsyncIterator[Session]:
    settings = {"model": "openai/scripted", "apiBase": model.base_url, "apiKey": "sk-test-key-1234",
                "reviewModel": "openai/reviewer", "maxRetries": 0}
    s = await start_session(workspace_root, home, configuration=settings)
    try:
        yield s
    finally:
        await stop_session(s)


async def proposal_for(chat: Session, code: str) -> dict:
    turn = (await chat.command(p.CHAT, {"text": "clean up"}))["turnId"]
    return await chat.wait_for(
        lambda: next((n for n in chat.notes[p.PROPOSAL] if n["turnId"] == turn), None), 60, "the proposal"
    )


async def test_the_reviewer_raises_a_medium_proposal_and_says_why(chat: Session, model: ScriptedModel) -> None:
    model.reply(f"Cleaning.\n{FENCE}python\n{MEDIUM}\n{FENCE}\n")
    model.reply(json.dumps({"rating": "high", "reason": "It deletes a directory the user did not mention."}))
    shown = await proposal_for(chat, MEDIUM)
    assert shown["risk"]["level"] == "high"
    said = "reviewer (openai/reviewer): high: It deletes a directory the user did not mention."
    assert said in shown["risk"]["reasons"]
    [_, asked] = model.wait_requests(2, 60)
    assert asked["model"] == "reviewer" and MEDIUM in asked["messages"][-1]["content"]


async def test_the_reviewer_never_lowers_and_low_code_is_not_reviewed(chat: Session, model: ScriptedModel) -> None:
    model.reply(f"{FENCE}python\n{MEDIUM}\n{FENCE}\n")
    model.reply('Sure: {"rating": "low", "reason": "Harmless cleanup."}')
    shown = await proposal_for(chat, MEDIUM)
    assert shown["risk"]["level"] == "medium"
    assert shown["risk"]["reasons"][-1] == "reviewer (openai/reviewer): low: Harmless cleanup."
    await chat.command(p.REJECT, {"proposalId": shown["proposalId"]})
    await chat.wait_for(lambda: any(n["state"] == "done" for n in chat.notes[p.TURN_STATUS]), 60, "the turn end")
    model.reply(f"{FENCE}python\nprint(1)\n{FENCE}\n")
    low = await proposal_for(chat, "print(1)")
    assert low["risk"] == {"level": "low", "reasons": []}
    assert len(model.wait_requests(3, 60)) == 3  # two chats and one review, no review of the low one


def test_a_reviewer_that_rambles_or_refuses_leaves_the_rating() -> None:
    risk = p.Risk("medium", ["deletes files"])
    assert review.parse("I think this is fine.") is None
    assert review.combine(risk, None, "m").level == "medium"
    assert review.parse('{"rating": "HIGH", "reason": "  wipes \\n things "}') == ("high", "wipes things")
    assert review.combine(risk, ("low", "fine"), "m").level == "medium"
