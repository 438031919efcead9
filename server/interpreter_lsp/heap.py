"""The server's long-lived heap and Python's cyclic garbage collector.

What the start imports and builds (pygls and lsprotocol's types, jupyter_client and zmq, httpx, litellm when a
provider needs it: ~90,000 objects without litellm) lives as long as the server. Left to the collector, every
full pass walks all of it: ~60 ms of the event loop's thread, once every ~50 turns of a conversation, in
the middle of whatever streams then. `settle()` freezes what is alive (gc.freeze): later passes walk only
what came after. Called when each part of the start is done (the python kernel, a model library's import);
each call is cheap (it moves the collector's lists, nothing is walked)."""

from __future__ import annotations

import gc


def settle() -> None:
    """Keep the objects alive now out of the collector's passes (they live as long as the server)."""
    gc.freeze()
