"""What a person reads is what runs: the characters of code that do not show, or that change how the text
around them is shown ("Trojan Source", CVE-2021-42574).

A right-to-left override in a string or a comment reorders the rest of its line on the screen, so a call can
read as part of a comment; a zero-width space, or a Hangul filler (which Python accepts in a name), shows as
nothing at all; a lone carriage return ends a Python line that an editor shows as one. Code holding any of
them is rated at least medium (safety/risk.py), with the characters named, and every client shows each one
as a visible `<U+XXXX>` marker on its cards instead of the character itself.

The set is defined by what Unicode says of each character, not by a list of tricks: it is *hidden* when its
general category is Cc (a control; tab and line feed excepted, and a carriage return directly before a line
feed), Cf (format), Co (private use), Cn (unassigned), Cs (a lone surrogate), Zl or Zp (line and paragraph
separators), or when it is a Default_Ignorable_Code_Point (DerivedCoreProperties.txt: what renders as nothing
when a font has no glyph for it). Two exceptions keep emoji readable, as neither can reorder or hide text:
the variation selectors (U+FE00..U+FE0F, U+E0100..U+E01EF: "⚠️" is U+26A0 U+FE0F), and the zero-width joiner
between two symbols ("👩‍💻"; the symbol before it may carry its variation selector: "❤️‍🔥"). The clients'
definitions mirror this one, checked against its answers (clients/hidden-characters.json).
"""

from __future__ import annotations

import re
import unicodedata

# Unicode 15's Default_Ignorable_Code_Point ranges (DerivedCoreProperties.txt); Python's unicodedata does not
# expose the property. Most are Cf or Cn anyway; these also catch the letters and marks that show as blank.
_DEFAULT_IGNORABLE = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
    (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
    (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)  # fmt: skip
_VARIATION_SELECTORS = ((0xFE00, 0xFE0F), (0xE0100, 0xE01EF))
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cn", "Cs", "Zl", "Zp"})
_SYMBOLS = frozenset({"So", "Sk"})
_ASCII_HIDDEN = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # ASCII's controls but tab and line feed
ZWJ = "\u200d"
_CONTROL_NAMES = {"\r": "carriage return", "\x0b": "vertical tab", "\x0c": "form feed", "\x08": "backspace",
                  "\x1b": "escape", "\x00": "null", "\x85": "next line"}
SHOWN = 3  # characters named in a reason; the rest are counted

# What each kind does to the display, for the reason.
_BIDI = frozenset({0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)})


def _within(code_point: int, ranges: tuple[tuple[int, int], ...]) -> bool:
    return any(low <= code_point <= high for low, high in ranges)


def _hidden_char(ch: str) -> bool:
    """Hidden by itself, before the two cases that depend on neighbours (carriage return, joiner)."""
    code_point = ord(ch)
    if _within(code_point, _VARIATION_SELECTORS):
        return False
    return unicodedata.category(ch) in _HIDDEN_CATEGORIES or _within(code_point, _DEFAULT_IGNORABLE)


def _joins_symbols(code: str, offset: int) -> bool:
    """The joiner at `offset` is inside an emoji sequence: a symbol before it (with the variation selector
    of its emoji form, "❤️‍🔥"), a symbol after it."""
    before = offset - 1
    if before > 0 and _within(ord(code[before]), _VARIATION_SELECTORS):
        before -= 1
    return unicodedata.category(code[before]) in _SYMBOLS and unicodedata.category(code[offset + 1]) in _SYMBOLS


def hidden(code: str) -> list[tuple[int, str]]:
    """The hidden characters of `code`, in order: (offset, character). Linear in the code; ASCII code
    without controls (most code) is found clean by two scans in C."""
    if code.isascii() and _ASCII_HIDDEN.search(code) is None:
        return []
    suspects = {ch for ch in set(code) if ch not in "\t\n" and _hidden_char(ch)}
    if not suspects:
        return []
    found: list[tuple[int, str]] = []
    last = len(code) - 1
    for offset, ch in enumerate(code):
        if ch not in suspects:
            continue
        if ch == "\r" and offset < last and code[offset + 1] == "\n":
            continue  # a Windows line end: shown as the line end it is
        if ch == ZWJ and 0 < offset < last and _joins_symbols(code, offset):
            continue  # inside an emoji sequence
        found.append((offset, ch))
    return found


def marker(ch: str) -> str:
    """How a client shows a hidden character: `<U+202E>`."""
    return f"<U+{ord(ch):04X}>"


def reason(code: str) -> str | None:
    """The rating's reason when `code` holds hidden characters (the first few named, with their lines);
    None when it holds none."""
    found = hidden(code)
    if not found:
        return None
    named: list[str] = []
    seen: set[str] = set()
    for offset, ch in found:
        if ch in seen:
            continue
        seen.add(ch)
        if len(named) < SHOWN:
            line = code.count("\n", 0, offset) + 1
            name = unicodedata.name(ch, "").lower() or _CONTROL_NAMES.get(ch) or (
                "a control character" if unicodedata.category(ch) == "Cc" else "unassigned"
            )
            named.append(f"{marker(ch)} ({name}) on line {line}")
    more = len(seen) - len(named)
    listed = ", ".join(named) + (f" and {more} more" if more > 0 else "")
    reorders = any(ord(ch) in _BIDI for ch in seen)
    what = "characters that change the order the text around them is shown in" if reorders else (
        "characters that do not show"
    )
    return f"the code holds {what}: {listed}; what you read may not be what runs"


__all__ = ["hidden", "marker", "reason"]
