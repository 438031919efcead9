"""Images for a vision model (agent/images.py): a large one is downscaled before it is sent, once and off
the event loop; the original stays what the user sees. Real PNGs, made and read with Pillow."""

from __future__ import annotations

import asyncio
import base64
import io
import os

from PIL import Image

from interpreter_lsp.agent import images


def png_of(image: Image.Image) -> str:
    out = io.BytesIO()
    image.save(out, format="PNG")
    return base64.b64encode(out.getvalue()).decode()


def gradient(width: int, height: int) -> str:
    return png_of(Image.linear_gradient("L").resize((width, height)))


def noise(width: int, height: int) -> str:
    return png_of(Image.frombytes("RGB", (width, height), os.urandom(width * height * 3)))


def test_a_small_image_is_sent_as_it_is() -> None:
    png = gradient(640, 480)
    assert not images.needs_shrinking(png)
    assert images.for_model(png) == png


def test_a_wide_image_is_sent_at_most_max_side_keeping_its_shape() -> None:
    png = gradient(4000, 1000)
    assert images.for_model(png) is None  # not prepared yet: never downscaled on the event loop
    asyncio.run(images.prepare([png]))
    sent = images.for_model(png)
    assert sent is not None
    assert images.size(sent) == (images.MAX_SIDE, images.MAX_SIDE // 4)
    assert images.tokens(sent) <= images.tokens(png)
    text = images.described(png, sent=True, shown=sent)
    assert text == f"(The run produced an image, 4000x1000 pixels, attached downscaled to {images.MAX_SIDE}x384.)"


def test_an_image_that_compresses_badly_is_halved_until_it_fits() -> None:
    png = noise(1200, 900)  # ~3 MB of noise: within MAX_SIDE, over MAX_BYTES
    assert images.too_big(png) and images.needs_shrinking(png)
    asyncio.run(images.prepare([png]))
    sent = images.for_model(png)
    assert sent is not None and not images.too_big(sent)
    width, height = images.size(sent) or (0, 0)
    assert width < 1200 and abs(width / height - 1200 / 900) < 0.02


def test_an_unreadable_png_is_described_not_sent() -> None:
    header = base64.b64decode(gradient(3000, 100))[:40]  # a PNG's header, then nothing: truncated
    png = base64.b64encode(header + b"\0" * 64).decode()
    assert images.size(png) == (3000, 100)
    asyncio.run(images.prepare([png]))
    assert images.for_model(png) is None


def test_prepared_copies_are_kept_and_bounded() -> None:
    pngs = [gradient(2000 + i, 500) for i in range(images._PREPARED_KEPT + 4)]
    asyncio.run(images.prepare(pngs))
    assert len(images._prepared) <= images._PREPARED_KEPT
    assert images.for_model(pngs[-1]) is not None
    assert images.for_model(pngs[0]) is None  # the oldest was let go; the next request prepares it again
