"""Images a run produced (PNG in its outputs), for the model: as image parts for a model that can see
(litellm.supports_vision), else as a sentence saying what the user was shown.

Kernel output is data. Only PNG is ever decoded, and only after `check` said yes from the first bytes
alone: the PNG signature and an IHDR whose size is at most MAX_PIXELS (a 0.9 MB PNG can declare 13377²
pixels: 537 MB once decoded). Decoding goes through Pillow's PNG plugin and no other (`Image.open(...,
formats=["PNG"])`, with Image.MAX_IMAGE_PIXELS lowered to the same bound), and Pillow's EPS plugin, which
runs Ghostscript on what it opens, is made unimportable in this process before Pillow is first imported:
no external program ever runs on kernel data. Anything else labelled image/png (an EPS, a BMP, a PNG too
large) is described to the model, never sent; a mislabelled one gets a note under the output for the
user (`label_problem`).

At most MAX_IMAGES (the most recent) are sent per request, each at most MAX_SIDE pixels on its long side:
a larger one is downscaled (Pillow) before it is sent, once, off the event loop in a thread of its own,
one image at a time (`prepare`, which the request's preparation awaits; the view then takes the prepared
copy). One preparation per image, whoever asks (a request, a status refresh): callers that ask while it
runs await the same one, and its result (or that it could not be read) is kept. The panel and the history
keep the original. A PNG still over MAX_BYTES, or one Pillow cannot read, is described instead of sent
(and the description says so). Tokens are estimated from what is sent, the way OpenAI bills images (85 +
170 per 512-pixel tile of the image scaled to 2048 and then 768 on its short side).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import concurrent.futures
import functools
import hashlib
import io
import logging
import math
import sys
from collections import OrderedDict
from typing import Any

log = logging.getLogger(__name__)

MAX_IMAGES = 3  # per request: the most recent ones
MAX_BYTES = 1_000_000  # a PNG larger than this once downscaled is described, not sent
MAX_SIDE = 1536  # pixels on the long side: what vision models use at most (OpenAI 2048, Anthropic ~1568)
# The most pixels a PNG may declare to be decoded at all (5000x5000; RGBA: 100 MB while it is downscaled).
# A plot is far smaller; a larger image is described to the model, never decoded.
MAX_PIXELS = 25_000_000
_PREPARED_KEPT = 32  # downscaled copies kept (the most recent images are asked for again at each step)
_prepared: OrderedDict[str, str | None] = OrderedDict()  # sha1 of the original -> its copy (None: unreadable)
_preparing: dict[str, asyncio.Future[str | None]] = {}  # preparations under way, shared by every caller
FLAT_TOKENS = 765  # an image whose size cannot be read: a 1024x1024 image's estimate

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# What an image output is checked against: the signature its MIME type promises. Nothing but PNG is ever
# decoded; a JPEG is only checked (the panel shows it; the model is not sent it).
_SIGNATURES = {"image/png": (PNG_SIGNATURE,), "image/jpeg": (b"\xff\xd8\xff",)}
# Only to name what a mislabelled output is, in the note the user reads (nothing is decided from it).
_KNOWN = (
    (PNG_SIGNATURE, "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"%!PS", "PostScript/EPS"),
    (b"\xc5\xd0\xd3\xc6", "EPS"),
    (b"%PDF", "a PDF document"),
    (b"BM", "a BMP image"),
    (b"GIF8", "a GIF image"),
    (b"II*\x00", "a TIFF image"),
    (b"MM\x00*", "a TIFF image"),
    (b"RIFF", "a RIFF (WebP?) file"),
    (b"<", "text (SVG or HTML?)"),
)
# Pillow plugins that run an external program on what they open (EpsImagePlugin: Ghostscript). Made
# unimportable before Pillow is first imported here, so that no Pillow call (even one that loads every
# plugin, Image.init()) can ever pick them: the PNG-only open is the rule, this is the backstop.
_PROGRAM_PLUGINS = ("PIL.EpsImagePlugin",)


def pngs(outputs: list[dict[str, Any]]) -> list[str]:
    """The base64 PNGs of a run's nbformat outputs, in order."""
    found = []
    for output in outputs:
        data = output.get("data") if isinstance(output, dict) else None
        png = data.get("image/png") if isinstance(data, dict) else None
        if isinstance(png, str) and png:
            found.append(png.replace("\n", ""))
    return found


def _head(b64: str, length: int = 33) -> bytes:
    """The first `length` bytes of base64 data (only as much text as they need is decoded)."""
    text = b64[: (length + 2) // 3 * 4 + 8].replace("\n", "")
    text = text[: len(text) // 4 * 4]
    try:
        return base64.b64decode(text)[:length]
    except (binascii.Error, ValueError):
        return b""


def size(png: str) -> tuple[int, int] | None:
    """(width, height) from the PNG's header, or None when it is not a PNG (signature, then IHDR)."""
    head = _head(png)
    if len(head) < 24 or head[:8] != PNG_SIGNATURE or head[12:16] != b"IHDR":
        return None
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def what(b64: str) -> str:
    """What base64 data looks like from its first bytes, in words (for notes, never for decisions)."""
    head = _head(b64, 8)
    for signature, name in _KNOWN:
        if head.startswith(signature):
            return name
    return "not an image format the server knows"


def check(png: str) -> str | None:
    """Why this image/png output must not be decoded (a sentence), or None: it is a PNG, of a size that
    may be decoded. From the first bytes only: the signature, then the pixel count in the IHDR."""
    dims = size(png)
    if dims is None:
        return f"it is not a PNG image ({what(png)})"
    width, height = dims
    if width <= 0 or height <= 0:
        return "its header gives no size"
    if width * height > MAX_PIXELS:
        return f"{width}x{height} pixels, over the {MAX_PIXELS // 1_000_000} million the server decodes"
    return None


def label_problem(mime: str, data: object) -> str | None:
    """The note for the user when an image output is not what its MIME type says, or None. Only the first
    bytes are read."""
    signatures = _SIGNATURES.get(mime)
    if signatures is None or not isinstance(data, str):
        return None
    if not _head(data, 8).startswith(signatures):
        return (
            f"(This output is labelled {mime} but is {what(data)}: the server did not decode it and does not "
            "send it to the model.)"
        )
    return None


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


def _pillow() -> Any:
    """Pillow's Image module, with the plugins that run programs made unimportable first (_PROGRAM_PLUGINS)
    and its own bomb check at MAX_PIXELS. Imported on the first large image only: the server starts
    without it."""
    for name in _PROGRAM_PLUGINS:
        if sys.modules.get(name) is not None:  # imported before us (a test, a future caller): no longer used
            log.warning("%s was imported in the server: images are still opened as PNG only", name)
        else:
            sys.modules[name] = None  # type: ignore[assignment]  # `import` raises ImportError; Pillow skips it
    from PIL import Image

    Image.MAX_IMAGE_PIXELS = MAX_PIXELS  # over twice this Pillow refuses; our own check says no first
    return Image


def shrink(png: str) -> str | None:
    """The PNG at most MAX_SIDE on its long side, base64 (blocking: call it off the event loop); None when
    it may not be decoded (`check`) or Pillow cannot read it as a PNG."""
    if (why := check(png)) is not None:  # the caller checked; this function must hold on its own too
        log.info("an image was not decoded for the model: %s", why)
        return None
    Image = _pillow()
    try:
        with Image.open(io.BytesIO(base64.b64decode(png)), formats=["PNG"]) as image:
            if image.format != "PNG" or image.width * image.height > MAX_PIXELS:
                raise ValueError(f"not a PNG of at most {MAX_PIXELS} pixels")
            image.thumbnail((MAX_SIDE, MAX_SIDE), Image.Resampling.LANCZOS)  # decodes once, in place
            small = image
            side = MAX_SIDE
            while True:
                out = io.BytesIO()
                small.save(out, format="PNG", optimize=True)
                # Photographs and noise compress badly: halve until the copy fits (a plot fits at once).
                if out.tell() <= MAX_BYTES or max(small.size) <= 256:
                    return base64.b64encode(out.getvalue()).decode("ascii")
                side = max(small.size) // 2
                small.thumbnail((side, side), Image.Resampling.LANCZOS)
    except Exception as exc:  # a truncated or hostile PNG is described instead; nothing else depends on it
        log.info("an image could not be read for the model: %s", exc)
        return None


def _keep(key: str, copy: str | None) -> None:
    _prepared[key] = copy
    _prepared.move_to_end(key)
    while len(_prepared) > _PREPARED_KEPT:
        _prepared.popitem(last=False)


@functools.cache
def _decoder() -> concurrent.futures.ThreadPoolExecutor:
    """One thread decodes, one image at a time, in the order asked: the memory of one decode at most."""
    return concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="image-prepare")


async def _prepare_one(key: str, png: str) -> str | None:
    try:
        copy = await asyncio.get_running_loop().run_in_executor(_decoder(), shrink, png)
    finally:
        _preparing.pop(key, None)
    _keep(key, copy)
    return copy


async def prepare(pngs: list[str]) -> None:
    """Downscale, off the event loop, the images among `pngs` that need it and were not done before. An
    image being prepared for another caller is awaited, not prepared again; one that may not be decoded
    (`check`) is kept as unreadable without being opened."""
    waits: list[asyncio.Future[str | None]] = []
    for png in pngs:
        if not needs_shrinking(png):
            continue
        key = _key(png)
        if key in _prepared:
            continue
        if check(png) is not None:
            _keep(key, None)
            continue
        if (task := _preparing.get(key)) is None:
            task = _preparing[key] = asyncio.ensure_future(_prepare_one(key, png))
        waits.append(task)
    if waits:
        # Shielded: a caller that gives up (a cancelled request) does not cancel what others wait for.
        await asyncio.gather(*(asyncio.shield(w) for w in waits), return_exceptions=True)


def for_model(png: str) -> str | None:
    """What the model is sent for this image: itself when it is a PNG small enough, else its prepared copy;
    None when it cannot be sent (not a PNG, too large to decode, unreadable, still over MAX_BYTES, or not
    prepared)."""
    if not needs_shrinking(png):
        return png
    copy = _prepared.get(_key(png))
    return copy if copy is not None and not too_big(copy) else None
