"""Comparing a cell's outputs from the session with its outputs from a fresh run (verify.py): identical, or
equivalent after named normalisations, or different (with the first differing lines).

Every normalisation is named in the verdict, so a reader knows what was forgiven: memory addresses
(`0x…`), object ids (integers of 12+ digits, what `id()` prints on 64-bit builds), UUIDs, timestamps (ISO
dates and times, epoch seconds near now) and durations (a number with a time unit), progress-bar redraws
(`\\r`: only what a terminal would still show), the workspace and temp directories, floats within rtol
1e-9, then 1e-6 (named as such). PNG images whose bytes differ are compared by decoded pixels (Pillow).
Pure functions: verify.py calls them in a worker thread (image decoding never runs on the event loop).
"""

from __future__ import annotations

import base64
import difflib
import io
import math
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

RTOL_TIGHT = 1e-9
RTOL_LOOSE = 1e-6
IMAGE_MIMES = ("image/png",)
DIFF_CHARS = 300  # the short diff a `differs: output` verdict carries

_UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,16}\b")
_ISO_TIME = re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([+-]\d{2}:?\d{2}|Z)?")
_CLOCK = re.compile(r"\b\d{1,2}:\d{2}:\d{2}(\.\d+)?\b")
_DURATION = re.compile(r"\b\d+(\.\d+)?(e-?\d+)?\s?(ns|µs|us|ms|s|sec|secs|seconds?|min|minutes?)\b")
_TEMP = re.compile(re.escape(tempfile.gettempdir().rstrip("/")) + r"/[\w.\-]+")
_NUMBER = re.compile(r"-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?")


@dataclass
class Comparison:
    verdict: str  # "identical" | "equivalent" | "differs"
    normalisations: list[str] = field(default_factory=list)
    diff: str = ""  # for "differs": the first differing lines
    error_change: str = ""  # for "differs": an error that appeared or went away, in words
    new_error: dict[str, Any] | None = None


def _merged(outputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Outputs as a comparable list: consecutive stream chunks of one stream joined (a run splits them where
    its messages fell), execution counts, metadata and tracebacks (ANSI, paths) left out."""
    merged: list[dict[str, Any]] = []
    for out in outputs:
        kind = out.get("output_type")
        if kind == "stream":
            text = out.get("text", "")
            text = "".join(text) if isinstance(text, list) else str(text)
            if merged and merged[-1]["output_type"] == "stream" and merged[-1]["name"] == out.get("name"):
                merged[-1]["text"] += text
            else:
                merged.append({"output_type": "stream", "name": out.get("name"), "text": text})
        elif kind in ("execute_result", "display_data"):
            data = {k: ("".join(v) if isinstance(v, list) else v) for k, v in dict(out.get("data", {})).items()}
            merged.append({"output_type": "data", "data": data})
        elif kind == "error":
            merged.append({"output_type": "error", "ename": out.get("ename"), "evalue": out.get("evalue")})
    return merged


def _texts(item: dict[str, Any]) -> list[tuple[str, str]]:
    if item["output_type"] == "stream":
        return [(f"stream {item['name']}", item["text"])]
    if item["output_type"] == "error":
        return [("error", f"{item['ename']}: {item['evalue']}")]
    return [(mime, value) for mime, value in sorted(item["data"].items()) if mime not in IMAGE_MIMES]


def _redraws(text: str) -> str:
    """What a terminal shows of text with carriage returns: each line's last redraw."""
    return "\n".join(line.rsplit("\r", 1)[-1] if "\r" in line else line for line in text.split("\n"))


def _substitutions(roots: tuple[str, ...]) -> list[tuple[str, Callable[[str], str]]]:
    subs: list[tuple[str, Callable[[str], str]]] = [("progress-bar redraws", _redraws)]
    for root in sorted({r.rstrip("/") for r in roots if r and r != "/"}, key=len, reverse=True):
        subs.append(("workspace path", lambda s, root=root: s.replace(root, "<workspace>")))
    subs += [
        ("temp paths", lambda s: _TEMP.sub("<temp>", s)),
        ("UUIDs", lambda s: _UUID.sub("<uuid>", s)),
        ("memory addresses", lambda s: _ADDRESS.sub("0x<address>", s)),
        ("timestamps", lambda s: _CLOCK.sub("<time>", _ISO_TIME.sub("<timestamp>", s))),
        ("durations", lambda s: _DURATION.sub("<duration>", s)),
    ]
    return subs


def _numbers(old: str, new: str, now: float) -> tuple[bool, set[str]]:
    """Whether two texts differ only in numbers that may differ, and the normalisations that took."""
    old_parts, new_parts = _NUMBER.split(old), _NUMBER.split(new)
    old_nums, new_nums = _NUMBER.findall(old), _NUMBER.findall(new)
    if old_parts != new_parts or len(old_nums) != len(new_nums):
        return False, set()
    used: set[str] = set()
    for a, b in zip(old_nums, new_nums, strict=False):
        if a == b:
            continue
        x, y = float(a), float(b)
        digits = lambda s: len(s.lstrip("-"))  # noqa: E731
        if "." not in a + b and "e" not in (a + b).lower() and min(digits(a), digits(b)) >= 12:
            used.add("object ids")
        elif all(now - 10 * 365 * 86400 <= v <= now + 86400 for v in (x, y)):
            used.add("timestamps (epoch seconds)")
        elif math.isclose(x, y, rel_tol=RTOL_TIGHT, abs_tol=0.0):
            used.add("floats (rtol 1e-9)")
        elif math.isclose(x, y, rel_tol=RTOL_LOOSE, abs_tol=0.0):
            used.add("floats (rtol 1e-6)")
        else:
            return False, set()
    return True, used


def _pipeline(old: str, new: str, subs: list[tuple[str, Callable[[str], str]]], now: float) -> tuple[bool, set[str]]:
    changed: set[str] = set()
    for name, sub in subs:
        a, b = sub(old), sub(new)
        if a != old or b != new:
            changed.add(name)
        old, new = a, b
        if old == new:
            return True, changed
    same, numeric = _numbers(old, new, now)
    return same, changed | numeric


def _text_equivalent(old: str, new: str, roots: tuple[str, ...], now: float) -> tuple[bool, set[str]]:
    """Equal after normalisations, and the ones it needed: a substitution that also rewrote text the two sides
    shared (the same path on both) is not named unless the texts differ without it."""
    subs = _substitutions(roots)
    same, changed = _pipeline(old, new, subs, now)
    if not same:
        return False, set()
    needed = set(changed)
    for name in sorted(changed):
        if name in {n for n, _ in subs} and _pipeline(old, new, [s for s in subs if s[0] not in (name,)], now)[0]:
            subs = [s for s in subs if s[0] != name]
            needed.discard(name)
    return True, needed


def _png_pixels(encoded: str) -> tuple[tuple[int, int], bytes] | None:
    from PIL import Image

    try:
        raw = base64.b64decode(encoded)
        with Image.open(io.BytesIO(raw), formats=["PNG"]) as image:  # PNG only: never another decoder
            rgba = image.convert("RGBA")
            return rgba.size, rgba.tobytes()
    except Exception:
        return None


def _image_equivalent(old: str, new: str) -> tuple[bool, str]:
    a, b = _png_pixels(old), _png_pixels(new)
    if a is None or b is None:
        return False, "an image could not be decoded as PNG"
    if a[0] != b[0]:
        return False, f"image size {a[0][0]}x{a[0][1]} became {b[0][0]}x{b[0][1]}"
    if a[1] == b[1]:
        return True, ""
    differing = sum(1 for x, y in zip(a[1][0::4], b[1][0::4], strict=False) if x != y)
    share = differing / max(1, len(a[1]) // 4)
    return False, f"image pixels differ ({share:.1%} of pixels by their red channel)"


def _short_diff(old: str, new: str) -> str:
    lines = difflib.unified_diff(old.splitlines(), new.splitlines(), "session", "fresh run", n=0, lineterm="")
    text = "\n".join(list(lines)[2:])
    return text if len(text) <= DIFF_CHARS else text[: DIFF_CHARS - 1] + "…"


def _describe(outputs: list[dict[str, Any]]) -> str:
    return "\n".join(f"[{kind}] {text}" for item in outputs for kind, text in _texts(item))


def _error(outputs: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((o for o in outputs if o["output_type"] == "error"), None)


def compare(
    old_outputs: list[dict[str, Any]], new_outputs: list[dict[str, Any]], roots: tuple[str, ...] = (),
    now: float | None = None,
) -> Comparison:
    """The session's outputs against the fresh run's. `roots`: the workspace (and other) paths to normalise."""
    now = time.time() if now is None else now
    old, new = _merged(old_outputs), _merged(new_outputs)
    if old == new:
        return Comparison("identical")
    old_error, new_error = _error(old), _error(new)
    if (old_error is None) != (new_error is None) or (
        old_error and new_error and old_error["ename"] != new_error["ename"]
    ):
        if new_error is not None:
            change = f"{new_error['ename']}: {new_error['evalue']}"[:200]
            change = f"an error the session did not have ({change})"
        else:
            change = f"the session's error ({old_error['ename']}) did not happen again"  # type: ignore[index]
        return Comparison("differs", error_change=change, new_error=new_error)
    used: set[str] = set()
    kinds_old = [(o["output_type"], sorted(o.get("data", {}))) for o in old]
    kinds_new = [(o["output_type"], sorted(o.get("data", {}))) for o in new]
    if kinds_old != kinds_new:
        return Comparison("differs", diff=_short_diff(_describe(old), _describe(new)))
    for a, b in zip(old, new, strict=False):
        for (kind, text_a), (_kind, text_b) in zip(_texts(a), _texts(b), strict=False):
            if text_a == text_b:
                continue
            same, names = _text_equivalent(str(text_a), str(text_b), roots, now)
            if not same:
                return Comparison("differs", diff=_short_diff(f"[{kind}] {text_a}", f"[{kind}] {text_b}"))
            used |= names
        for mime in IMAGE_MIMES:
            image_a, image_b = a.get("data", {}).get(mime), b.get("data", {}).get(mime)
            if image_a is not None and image_a != image_b:
                same, why = _image_equivalent(str(image_a), str(image_b))
                if not same:
                    return Comparison("differs", diff=why)
                used.add("images by decoded pixels")
    return Comparison("equivalent", sorted(used or {"output chunking"}))
