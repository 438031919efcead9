"""Figures reach the panel whatever matplotlib backend the code picked.

With the inline backend ipykernel shows figures itself. Code that switched to another backend
(`matplotlib.use("Agg")`, which the persistent kernel then keeps) would show nothing, and `plt.show()`
would say nothing. So, as notebook front-ends do, every python kernel gets a `post_run_cell` hook: after a
run, figures still open under a non-inline backend are rendered to PNG, displayed as the run's output,
and closed. It is registered by a silent execute (no history entry, no name in the user's namespace).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

log = logging.getLogger(__name__)

_HOOK = '''
def hook(result=None):
    import sys
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None or not plt.get_fignums():
        return
    import matplotlib
    if "inline" in str(matplotlib.get_backend()).lower():
        return
    import base64, io
    from IPython.display import display
    for number in list(plt.get_fignums()):
        figure = plt.figure(number)
        buffer = io.BytesIO()
        try:
            figure.savefig(buffer, format="png", bbox_inches="tight")
        except Exception as error:
            print(f"(figure {number} could not be shown: {error})", file=sys.stderr)
        else:
            text = f"<Figure {number}: {figure.get_figwidth():g}x{figure.get_figheight():g} in>"
            display({"image/png": base64.b64encode(buffer.getvalue()).decode(), "text/plain": text}, raw=True)
        plt.close(figure)
'''

_EVENTS = "__import__('IPython').get_ipython().events"
REGISTER = f"(lambda ns: (exec({_HOOK!r}, ns), {_EVENTS}.register('post_run_cell', ns['hook'])))({{}})"


async def register(kernel: Any, timeout: float = 30.0) -> None:
    """Register the hook in a python `kernel` that has started (one silent execute: a round trip). A kernel
    that refuses it still runs code: its figures under another backend just do not show; a warning says so."""
    reply = await asyncio.wait_for(kernel.execute(REGISTER, None, silent=True), timeout)
    if reply.status != "ok":
        log.warning("the figure hook could not be registered: %s", reply.content.get("evalue"))
