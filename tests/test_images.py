"""Images for a vision model (agent/images.py): a large one is downscaled before it is sent, once and off
the event loop; the original stays what the user sees. Real PNGs, made and read with Pillow."""

from __future__ import annotations

import asyncio
import base64
import io
import os

import pytest
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


# ---- kernel output is data: only PNG is decoded, after a check of its first bytes ----------------------

EPS = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 64 64\n0 0 moveto 64 64 lineto stroke\nshowpage\n%%EOF\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def bmp(width: int, height: int) -> str:
    out = io.BytesIO()
    Image.new("RGB", (width, height), "red").save(out, format="BMP")
    return b64(out.getvalue())


def png_header(width: int, height: int) -> str:
    """A PNG that declares width x height pixels and holds none (a bomb's first bytes are enough)."""
    import struct
    import zlib

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = struct.pack(">I", len(ihdr)) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    return b64(b"\x89PNG\r\n\x1a\n" + chunk)


def test_only_a_png_of_a_bounded_size_may_be_decoded() -> None:
    assert images.check(gradient(640, 480)) is None
    assert images.check(b64(EPS)) == "it is not a PNG image (PostScript/EPS)"
    assert images.check(bmp(40, 30)) == "it is not a PNG image (a BMP image)"
    assert "13377x13377 pixels, over the 25 million" in (images.check(png_header(13377, 13377)) or "")
    assert images.check(png_header(0, 10)) == "its header gives no size"


def test_a_mislabelled_image_gets_a_note_for_the_user() -> None:
    assert images.label_problem("image/png", gradient(10, 10)) is None
    assert images.label_problem("image/png", png_header(13377, 13377)) is None  # a PNG: shown, just not sent
    assert "labelled image/png but is a BMP image" in (images.label_problem("image/png", bmp(4, 4)) or "")
    assert "labelled image/jpeg but is PostScript/EPS" in (images.label_problem("image/jpeg", b64(EPS)) or "")
    assert images.label_problem("text/plain", "x") is None


def test_what_is_not_a_png_is_never_opened_and_no_program_runs(tmp_path, monkeypatch) -> None:
    record = tmp_path / "ran"
    for name in ("gs", "gsx", "gswin32c", "gswin64c"):
        program = tmp_path / name
        program.write_text(f'#!/bin/sh\necho {name} >> "{record}"\nexit 1\n')
        program.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    opened = []
    monkeypatch.setattr(Image, "open", lambda *a, **k: opened.append(a) or pytest.fail("opened"))
    for data in (b64(EPS), bmp(2000, 20), png_header(13377, 13377)):
        assert images.needs_shrinking(data)
        asyncio.run(images.prepare([data]))
        assert images.for_model(data) is None
        assert images.shrink(data) is None  # on its own too
    assert not opened and not record.exists()


def test_the_eps_plugin_cannot_be_imported_once_pillow_is_used_here() -> None:
    import subprocess
    import sys

    code = (
        "from interpreter_lsp.agent import images\nimages._pillow()\nfrom PIL import Image\nImage.init()\n"
        "import sys\nprint(sys.modules.get('PIL.EpsImagePlugin'), 'EPS' in Image.OPEN)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["None", "False"]


def test_one_preparation_per_image_whoever_asks(monkeypatch) -> None:
    png = gradient(3000 + 7, 700)
    calls = []
    shrink = images.shrink
    monkeypatch.setattr(images, "shrink", lambda data: calls.append(data) or shrink(data))

    async def many() -> None:
        await asyncio.gather(*(images.prepare([png]) for _ in range(5)))
        await images.prepare([png])

    asyncio.run(many())
    assert len(calls) == 1
    assert images.for_model(png) is not None
