"""Validation of command arguments: every mistake becomes one sentence saying what was wrong."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from lsprotocol import types as t

from .errors import UserError


class BadArguments(UserError):
    pass


class Args:
    """The single JSON object a command takes. Messages name the argument, not the command: the person
    reading them clicked a button, they did not call `interpreter.run`."""

    def __init__(self, command: str, raw: Sequence[Any]) -> None:
        self.command = command
        if len(raw) == 0:
            self.data: dict[str, Any] = {}
        elif len(raw) == 1 and isinstance(raw[0], dict):
            self.data = raw[0]
        elif len(raw) == 1 and raw[0] is None:
            self.data = {}
        else:
            raise BadArguments(f"{command} takes one JSON object as its argument, e.g. [{{...}}]; got {raw!r:.200}")

    def _fail(self, key: str, expected: str) -> BadArguments:
        return BadArguments(f"'{key}' must be {expected}; got {self.data.get(key)!r:.200}")

    def string(self, key: str, *, required: bool = False, allow_empty: bool = True) -> str | None:
        value = self.data.get(key)
        if value is None:
            if required:
                raise BadArguments(f"'{key}' is required")
            return None
        if not isinstance(value, str) or (not allow_empty and not value.strip()):
            raise self._fail(key, "a non-empty string" if not allow_empty else "a string")
        return value

    def required(self, key: str) -> str:
        """A required, non-empty string."""
        value = self.string(key, required=True, allow_empty=False)
        assert value is not None
        return value

    def flag(self, key: str) -> bool:
        """An optional boolean, false when absent."""
        value = self.data.get(key)
        if value is None:
            return False
        if not isinstance(value, bool):
            raise self._fail(key, "true or false")
        return value

    def number(self, key: str, lo: float = 0) -> float | None:
        value = self.data.get(key)
        if value is None:
            return None
        # NaN passes every comparison (a JSON parser may accept NaN and Infinity): finite, or refused.
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < lo:
            raise self._fail(key, f"a number ≥ {lo}")
        return float(value)

    def position(self, key: str) -> t.Position | None:
        value = self.data.get(key)
        if value is None:
            return None
        return _position(value, self._fail(key, "a position {line, character} with whole numbers ≥ 0"))

    def range(self, key: str) -> t.Range | None:
        value = self.data.get(key)
        if value is None:
            return None
        return parse_range(value, key)


def parse_range(value: Any, key: str = "range") -> t.Range:
    """A wire range ({start: {line, character}, end: ...}) as an lsprotocol Range, or BadArguments."""
    err = BadArguments(f"'{key}' must be a range {{start: {{line, character}}, end: {{line, character}}}}; "
                       f"got {value!r:.200}")
    if not isinstance(value, dict):
        raise err
    start, end = _position(value.get("start"), err), _position(value.get("end"), err)
    if (end.line, end.character) < (start.line, start.character):
        raise BadArguments(f"'{key}' ends before it starts")
    return t.Range(start=start, end=end)


def _position(value: Any, err: BadArguments) -> t.Position:
    if not isinstance(value, dict):
        raise err
    line, character = value.get("line"), value.get("character", 0)
    for v in (line, character):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise err
    return t.Position(line=line, character=character)
