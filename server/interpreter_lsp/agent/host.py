"""What the agent loop needs from the workspace it serves, and nothing more.

The Loop never sees the Workspace: it gets this narrow host, so it can be driven by a fake one in unit
tests (no kernel, no HTTP) and cannot reach the pool, the run manager or the settings sources.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..gate import Approval
    from ..llm.client import Completion
    from ..llm.models import ModelFacts
    from ..llm.toolstream import ToolCall
    from ..protocol import Risk
    from ..runs import Run
    from ..settings import Settings


class LoopHost(Protocol):
    @property
    def root(self) -> Path: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def trusted(self) -> bool: ...

    def send(self, method: str, params: dict[str, Any]) -> None:
        """A notification to the editor (through the one redacting send)."""

    async def settings_ready(self) -> None:
        """Returns once the editor's settings arrived (bounded)."""

    async def variables_for_context(self) -> list[dict[str, Any]] | None:
        """A short list of the python kernel's variables, or None when there is no idle kernel."""

    def check_language(self, language: str) -> str:
        """The canonical language; raises UnknownLanguage (a UserError) when no kernel runs it."""

    def available_languages(self) -> list[str]: ...

    def remote_directory(self) -> str | None:
        """None: kernels run here, in the workspace. Else they run on a gateway: the python kernel's own
        working directory there ("" while not known yet)."""

    def sandboxed(self, language: str) -> bool:
        """Whether code of this language runs inside the sandbox."""

    def held(self) -> str | None:
        """Why no code may start now (an undo or redo is putting state back), or None."""

    def start_run(self, code: str, language: str, *, approval: Approval, **options: Any) -> Run:
        """Queue code the gate approved (gate.py: `approval` binds exactly this code); returns at once."""

    async def call_model(
        self,
        messages: list[dict[str, Any]],
        on_delta: Callable[[str], None],
        *,
        max_tokens: int | None = None,
        tools: list[dict[str, Any]] | None = None,
        on_tool_call: Callable[[ToolCall], None] | None = None,
        prompt_tokens: int | None = None,
    ) -> Completion:
        """Stream one reply; raises ModelError. `max_tokens`: this request's own reply limit. `tools`:
        offered to the model; each complete tool call of the reply goes to `on_tool_call`. `prompt_tokens`:
        the request's tokens as already counted (the context budget), the figure used when the model's
        server reports no usage (else they would be counted again, on the event loop)."""

    async def model_facts(self) -> ModelFacts:
        """What litellm knows of the model in use: window, price, abilities, its token counter.
        Raises ModelError when no model is configured or found."""

    async def rate(self, code: str, language: str) -> Risk:
        """The risk of a proposal, rated off the event loop within a time budget (the gate calls it)."""
