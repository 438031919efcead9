"""Images a run produced (PNG in its outputs), for the model: as image parts for a model that can see
(litellm.supports_vision), else as a sentence saying what the user was shown.

At most MAX_IMAGES (the most recent) are sent per request, each at most MAX_SIDE pixels on its long side:
a larger one is downscaled (Pillow) before it is sent, once, off the event loop (`prepare`, which the
request's preparation awaits; the view then takes the prepared copy). The panel and the history keep the
original. A PNG still over MAX_BYTES, or one Pillow cannot read, is described instead of sent (and the
description says so). Tokens are estimated from what is sent, the way OpenAI bills images (85 + 170 per
512-pixel tile of the image scaled to 2048 and then 768 on its short side).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import io
import logging
import math
from collections import OrderedDict
from typing import Any

log = logging.getLogger(__name__)

MAX_IMAGES = 3  # per request: the most recent ones
MAX_BYTES = 1_000_000  # a PNG larger than this once downscaled is described, not sent
MAX_SIDE = 1536  # pixels on the long side: what vision models use at most (OpenAI 2048, Anthropic ~1568)
_PREPARED_KEPT = 32  # downscaled copies kept (the most recent images are asked for again at each step)
_prepared: OrderedDict[str, str | None] = OrderedDict()  # sha1 of the original -> its copy (None: unreadable)
FLAT_TOKENS = 765  # an image whose size cannot be read: a 1024x1024 image's estimate


def pngs(outputs: list[dict[str, Any]]) -> list[str]:
    """The base64 PNGs of a run's nbformat outputs, in order."""
    found = []
    for output in outputs:
        data = output.get("data") if isinstance(output, dict) else None
        png = data.get("image/png") if isinstance(data, dict) else None
        if isinstance(png, str) and png:
            found.append(png.replace("\n", ""))
    return found


def size(png: str) -> tuple[int, int] | None:
    """(width, height) from the PNG's header, or None when it is not a PNG."""
    try:
        head = base64.b64decode(png[:44])
    except (binascii.Error, ValueError):
        return None
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def tokens(png: str) -> int:
    dims = size(png)
    if dims is None or min(dims) <= 0:
        return FLAT_TOKENS
    width, height = dims
    scale = min(1.0, 2048 / max(width, height))
    width, height = width * scale, height * scale
    scale = min(1.0, 768 / min(width, height))
    width, height = width * scale, height * scale
    return 85 + 170 * math.ceil(width / 512) * math.ceil(height / 512)


def too_big(png: str) -> bool:
    return len(png) * 3 // 4 > MAX_BYTES


def described(png: str, *, sent: bool, reason: str = "", shown: str | None = None) -> str:
    """The sentence the model reads for an image it does not get (or, `sent`, gets next to it: `shown`,
    the copy attached when it was downscaled)."""
    dims = size(png)
    shape = f"{dims[0]}x{dims[1]} pixels" if dims else "an image"
    if sent:
        small = size(shown) if shown is not None and shown != png else None
        scaled = f", attached downscaled to {small[0]}x{small[1]}" if small else ": attached"
        return f"(The run produced an image, {shape}{scaled}.)"
    why = f" ({reason})" if reason else ""
    return f"(The run showed the user an image, {shape}; you cannot see it{why}.)"


def data_url(png: str) -> str:
    return "data:image/png;base64," + png


def needs_shrinking(png: str) -> bool:
    dims = size(png)
    return too_big(png) or dims is None or max(dims) > MAX_SIDE


def _key(png: str) -> str:
    return hashlib.sha1(png.encode("ascii", "replace")).hexdigest()


def shrink(png: str) -> str | None:
    """The PNG at most MAX_SIDE on its long side, base64 (blocking: call it off the event loop); None when
    Pillow cannot read it."""
    from PIL import Image  # on the first large image only: the server starts without it

    try:
        with Image.open(io.BytesIO(base64.b64decode(png))) as image:
            image.load()
            small = image.copy()
    except Exception as exc:  # a truncated or hostile PNG is described instead; nothing else depends on it
        log.info("an image could not be read for the model: %s", exc)
        return None
    side = MAX_SIDE
    while True:
        small.thumbnail((side, side), Image.Resampling.LANCZOS)
        out = io.BytesIO()
        small.save(out, format="PNG", optimize=True)
        # Photographs and noise compress badly: halve until the copy fits (a plot fits at once).
        if out.tell() <= MAX_BYTES or max(small.size) <= 256:
            return base64.b64encode(out.getvalue()).decode("ascii")
        side = max(small.size) // 2


async def prepare(pngs: list[str]) -> None:
    """Downscale, off the event loop, the images among `pngs` that need it and were not done before."""
    todo = {_key(png): png for png in pngs if needs_shrinking(png) and _key(png) not in _prepared}
    if not todo:
        return
    done = await asyncio.to_thread(lambda: {key: shrink(png) for key, png in todo.items()})
    for key, copy in done.items():
        _prepared[key] = copy
        _prepared.move_to_end(key)
    while len(_prepared) > _PREPARED_KEPT:
        _prepared.popitem(last=False)


def for_model(png: str) -> str | None:
    """What the model is sent for this image: itself when small enough, else its prepared copy; None when
    it cannot be sent (unreadable, still over MAX_BYTES, or not prepared)."""
    if not needs_shrinking(png):
        return png
    copy = _prepared.get(_key(png))
    return copy if copy is not None and not too_big(copy) else None
