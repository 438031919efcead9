"""Native tool calls as they stream: the pieces of `delta.tool_calls` put back together.

In the OpenAI streaming format each call arrives in fragments: the first names its `index`, `id`, `type`
and `function.name`; later ones carry only the `index` and the next piece of `function.arguments`. Calls
stream one after another, so a call is complete when a call of another index starts, or when the stream
ends. Providers behind litellm differ at the edges: some repeat the id in every fragment, some send every
call whole with the same index, some send no id at all; a call is told apart by its index, and by its id
when two calls share an index.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, as the model wrote it (maybe invalid)

    def wire(self) -> dict[str, Any]:
        """The call as an assistant message carries it (OpenAI format)."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass
class _Partial:
    index: int
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)

    def done(self) -> ToolCall:
        return ToolCall(self.id or "call_" + uuid.uuid4().hex[:24], self.name, "".join(self.arguments))


class ToolCallAssembler:
    """Feed each chunk's `delta.tool_calls`; get back the calls that are complete, in order."""

    def __init__(self) -> None:
        self._current: _Partial | None = None
        self.calls: list[ToolCall] = []  # every complete call so far

    def feed(self, fragments: Any) -> list[ToolCall]:
        """The calls completed by these fragments (a call ends when another one starts)."""
        finished: list[ToolCall] = []
        for fragment in fragments or ():
            index = _get(fragment, "index")
            call_id = _get(fragment, "id") or ""
            function = _get(fragment, "function")
            name = (_get(function, "name") or "") if function is not None else ""
            arguments = (_get(function, "arguments") or "") if function is not None else ""
            current = self._current
            other_id = current is not None and bool(call_id) and bool(current.id) and call_id != current.id
            if not isinstance(index, int):  # no index: the open call goes on, unless the id says otherwise
                index = 0 if current is None else current.index + 1 if other_id else current.index
            new = current is None or index != current.index or other_id
            if new:
                if current is not None:
                    finished.append(self._finish(current))
                current = self._current = _Partial(index)
            assert current is not None
            if call_id and not current.id:
                current.id = str(call_id)
            if name and not current.name:
                current.name = str(name)
            if arguments:
                current.arguments.append(str(arguments))
        return finished

    def finish(self) -> list[ToolCall]:
        """The stream ended: the call still open, if any."""
        current, self._current = self._current, None
        return [self._finish(current)] if current is not None else []

    def _finish(self, partial: _Partial) -> ToolCall:
        call = partial.done()
        self.calls.append(call)
        return call


def _get(obj: Any, name: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)
