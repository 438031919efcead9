"""A conversation that lasts for weeks: 200 turns with large outputs through the real agent loop
(Loop, Conversation, ContextKeeper, History on disk, litellm's token counter for gpt-4o; the model and the
runs scripted in-process, as bench/context_budget.py drives them). The same path over LSP, a real kernel and
real HTTP is tests/test_context.py::test_a_long_conversation_stays_in_the_window_and_keeps_answering, 24
turns: 200 there would cost minutes of every suite."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from context_budget import MODEL, WINDOW, run_session
from interpreter_lsp.agent import budget
from interpreter_lsp.llm.client import ModelConfig
from interpreter_lsp.llm.loader import get_litellm
from interpreter_lsp.llm.models import facts


async def test_200_turns_never_pass_the_window_and_every_turn_is_answered(tmp_path: Path) -> None:
    litellm = await get_litellm()
    run = await run_session(200, litellm, facts(litellm, ModelConfig(model=MODEL)), tmp_path)
    limit = budget.limits(WINDOW, None, None).prompt_limit
    assert len(run.sent) == 400  # two requests a turn: the code, then the answer after its run
    assert max(run.sent) <= limit, max(run.sent)  # counted by litellm, not by our own cache
    assert max(run.whole) > 20 * WINDOW  # sent whole, the session would have gone far past the window
    assert run.answers[-1] == "Task 199 is done: 80 rows printed, the largest value was 100."
    assert len(run.answers) == 200
    # Compaction happened, each summary recorded once in the history file.
    assert run.summaries >= 10
    assert run.compactions == run.summaries
