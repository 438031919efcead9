"""Images a run produced (PNG in its outputs), for the model: as image parts for a model that can see
(litellm.supports_vision), else as a sentence saying what the user was shown.

No image library is a dependency of the server, so images are never downscaled here: a PNG over
MAX_BYTES is described instead of sent (and the description says so), and at most MAX_IMAGES (the most
recent) are sent per request. Their tokens are estimated the way OpenAI bills them (85 + 170 per 512-pixel
tile of the image scaled to 2048 and then 768 on its short side).
"""

from __future__ import annotations

import base64
import binascii
import math
from typing import Any

MAX_IMAGES = 3  # per request: the most recent ones
MAX_BYTES = 1_000_000  # a larger PNG is described, not sent (it would not be downscaled)
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


def described(png: str, *, sent: bool, reason: str = "") -> str:
    """The sentence the model reads for an image it does not get (or, `sent`, gets next to it)."""
    dims = size(png)
    shape = f"{dims[0]}x{dims[1]} pixels" if dims else "an image"
    if sent:
        return f"(The run produced an image, {shape}: attached.)"
    why = f" ({reason})" if reason else ""
    return f"(The run showed the user an image, {shape}; you cannot see it{why}.)"


def data_url(png: str) -> str:
    return "data:image/png;base64," + png
