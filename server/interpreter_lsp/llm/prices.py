"""litellm's model map (window, price, abilities) for the direct routes, read without importing litellm.

litellm ships its map as one JSON file (`model_prices_and_context_window_backup.json`, ~3.5 MB); the
model's own entry is found in its text and only that entry is parsed (a few ms, no 3.5 MB of dicts
kept). The file is there when the `providers` extra is installed; without it, a cloud model has no known
price or window (local models have neither anyway). Blocking (a file read): called off the event loop
(llm/models.py), then cached.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import threading
from pathlib import Path
from typing import Any

from interpreter_lsp.llm.routes import Route

log = logging.getLogger(__name__)

MAP_FILE = "model_prices_and_context_window_backup.json"


def _map_text() -> str | None:
    """The map's text, read anew each time (3.5 MB not kept: each model's entry is cached instead)."""
    spec = importlib.util.find_spec("litellm")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        path = Path(location) / MAP_FILE
        try:
            return path.read_text(encoding="utf-8")
        except OSError:
            continue
    return None


_lock = threading.Lock()
_entries: dict[tuple[str, str], dict[str, Any] | None] = {}  # (provider, model) -> its entry; oldest first
MAX_ENTRIES = 64


def entry(provider: str, model: str) -> dict[str, Any] | None:
    """The map's entry for `model` of `provider` (the names litellm would look up), or None. Cached (the
    last MAX_ENTRIES models)."""
    key = (provider, model)
    with _lock:
        if key in _entries:
            return _entries[key]
    found = _find(provider, model)
    with _lock:
        _entries[key] = found
        while len(_entries) > MAX_ENTRIES:
            del _entries[next(iter(_entries))]
    return found


def _find(provider: str, model: str) -> dict[str, Any] | None:
    text = _map_text()
    if text is None:
        return None
    decoder = json.JSONDecoder()
    for name in (f"{provider}/{model}", model):
        at = text.find(json.dumps(name) + ":")
        while at != -1:
            start = text.index("{", at)
            try:
                found, _end = decoder.raw_decode(text, start)
            except ValueError:
                found = None
            # The same name can appear as a value; an entry is an object of this provider's models.
            if isinstance(found, dict) and str(found.get("litellm_provider", provider)).startswith(provider):
                return found
            at = text.find(json.dumps(name) + ":", at + 1)
    return None


def lookup(route: Route) -> dict[str, Any]:
    """The entry of a direct route's model: {} for a local one (never priced) or one not in the map."""
    if route.local:
        return {}
    try:
        return dict(entry(route.provider, route.model) or {})
    except Exception as exc:  # a map that cannot be read is a model with no known price
        log.debug("reading litellm's model map failed: %s", exc)
        return {}


def cost(route: Route, prompt_tokens: int, completion_tokens: int) -> float:
    """USD for a reply, from the map; 0.0 for local or unknown models."""
    return _priced(lookup(route), prompt_tokens, completion_tokens)


def cost_known(route: Route, prompt_tokens: int, completion_tokens: int) -> float | None:
    """`cost`, if the model's entry was read already (a dict lookup: on the event loop), else None (the
    first price reads the map: off the loop). After the first reply of a model, every reply's cost is
    known at once: a thread hop at the end of each reply cost a turn 1-3 ms on a busy machine."""
    if route.local:
        return 0.0
    with _lock:
        key = (route.provider, route.model)
        if key not in _entries:
            return None
        info = _entries[key] or {}
    return _priced(info, prompt_tokens, completion_tokens)


def _priced(info: dict[str, Any], prompt_tokens: int, completion_tokens: int) -> float:
    return prompt_tokens * float(info.get("input_cost_per_token") or 0.0) + completion_tokens * float(
        info.get("output_cost_per_token") or 0.0
    )
