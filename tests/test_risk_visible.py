"""What a person reads is what runs (safety/visible.py): code holding characters that do not show, or that
reorder the text shown around them, is never low, whatever it does, and the reason names each one as the
clients show it (`<U+202E>`). The set is Unicode's own (general categories and Default_Ignorable_Code_Point),
so these samples stand for their categories, not for a list the rater knows."""

from __future__ import annotations

from pathlib import Path

import pytest

from hidden_samples import MIRROR
from interpreter_lsp.safety import visible
from interpreter_lsp.safety.risk import assess

# One or more per kind: what each hides or reorders.
HIDDEN = {
    "right-to-left override (Cf, bidi)": "\u202e",
    "left-to-right isolate (Cf, bidi)": "\u2066",
    "arabic letter mark (Cf, bidi)": "\u061c",
    "zero width space (Cf)": "\u200b",
    "byte order mark inside the code (Cf)": "\ufeff",
    "soft hyphen (Cf)": "\u00ad",
    "tag character (Cf)": "\U000e0041",
    "hangul filler, a letter Python takes in a name (Default_Ignorable)": "\u3164",
    "hangul choseong filler (Default_Ignorable)": "\u115f",
    "escape (Cc)": "\x1b",
    "backspace (Cc)": "\x08",
    "a lone carriage return, a line end to Python (Cc)": "\r",
    "next line (Cc, C1)": "\x85",
    "private use (Co)": "\ue000",
    "unassigned (Cn)": "\u0378",
    "lone surrogate (Cs)": "\ud800",
    "line separator (Zl)": "\u2028",
    "paragraph separator (Zp)": "\u2029",
}

SHOWN = {
    "tab": "if True:\n\tprint(1)\n",
    "a Windows line end": "a = 1\r\nb = 2\r\n",
    "an emoji with its variation selector": 'print("⚠️ careful")',
    "an emoji sequence joined by zero-width joiners": 'print("👩‍💻 done")',
    "a joined emoji whose first symbol carries its variation selector": 'print("❤️‍🔥 🏳️‍🌈")',
    "letters of other scripts, right-to-left ones too": 'print("héllo, 世界, مرحبا, שלום")',
    "a no-break space in a string": 'print("10\u00a0km")',
}


@pytest.mark.parametrize("kind", list(HIDDEN))
def test_each_kind_of_hidden_character_is_found_named_and_makes_low_code_medium(kind: str, tmp_path: Path) -> None:
    ch = HIDDEN[kind]
    code = f'x = 1\nlabel = "a{ch}b"\nprint(x)'
    assert visible.hidden(code) == [(code.index(ch), ch)]
    risk = assess(code, "python", tmp_path, home=tmp_path / "home")
    assert risk.level == "medium", (kind, risk)  # a lone carriage return: also a string Python finds unended
    [reason] = [r for r in risk.reasons if "what you read may not be what runs" in r]
    assert f"<U+{ord(ch):04X}>" in reason and "on line 2" in reason, reason
    assert assess(code.replace(ch, ""), "python", tmp_path, home=tmp_path / "home").level == "low"


@pytest.mark.parametrize("kind", list(SHOWN))
def test_what_shows_as_what_it_is_stays_as_the_rules_rate_it(kind: str, tmp_path: Path) -> None:
    code = SHOWN[kind]
    assert visible.hidden(code) == []
    assert visible.reason(code) is None
    assert assess(code, "python", tmp_path, home=tmp_path / "home").level == "low"


def test_a_joiner_outside_an_emoji_sequence_is_hidden() -> None:
    for code in ('name = "ad\u200dmin"', '"\u200d👩"', '"👩\u200d"'):
        assert [ch for _o, ch in visible.hidden(code)] == ["\u200d"], code


def test_trojan_source_in_python_and_shell_is_medium_and_says_it_reorders_the_text(tmp_path: Path) -> None:
    python = 'access = "user"\nif access != "user\u202e \u2066# Check if admin\u2069 \u2066":\n    print("admin")'
    shell = 'echo "hello\u202e \u2066# nothing to see\u2069 \u2066"'
    for code, language in ((python, "python"), (shell, "shell")):
        clean = code.replace("\u202e", "").replace("\u2066", "").replace("\u2069", "")
        assert assess(clean, language, tmp_path, home=tmp_path / "home").level == "low", language
        risk = assess(code, language, tmp_path, home=tmp_path / "home")
        assert risk.level == "medium", (language, risk)
        [reason] = [r for r in risk.reasons if "what you read" in r]
        assert reason.startswith("the code holds characters that change the order the text around them is shown in")
        assert "<U+202E> (right-to-left override)" in reason and "<U+2069> (pop directional isolate)" in reason


def test_the_reason_names_the_first_few_and_counts_the_rest() -> None:
    code = "".join(f'x{i} = "{ch}"\n' for i, ch in enumerate("\u200b\u200c\u2060\u00ad\u3164\u200b"))
    reason = visible.reason(code)
    assert reason is not None
    assert "<U+200B> (zero width space) on line 1" in reason and "<U+200C>" in reason and "<U+2060>" in reason
    assert "<U+00AD>" not in reason and "and 2 more" in reason  # five distinct: three named, two counted
    assert reason.startswith("the code holds characters that do not show:")


def test_hidden_characters_make_any_language_and_already_risky_code_say_so(tmp_path: Path) -> None:
    risky = 'import shutil\nshutil.rmtree("/")  # \u202e'
    risk = assess(risky, "python", tmp_path, home=tmp_path / "home")
    assert risk.level == "high" and any("<U+202E>" in r for r in risk.reasons)
    other = assess('console.log("\u200b")', "javascript", tmp_path, home=tmp_path / "home")
    assert other.level == "medium" and any("<U+200B>" in r for r in other.reasons)


# ---- the clients' mirror -----------------------------------------------------------------------------------
# Each client draws the hidden characters of code as markers on its cards, by its own definition (VS Code:
# src/webview/hidden.ts; Emacs; Neovim). They are checked against these cases, which are the server's answers:
# one file, written from safety/visible.py, that each client's tests read. Regenerate it after a change here:
#     .venv/bin/python tests/test_risk_visible.py


def _mirror_cases() -> list[list[int]]:
    """Code points of each case: every character of the ranges that matter (the ASCII and Latin-1 controls,
    the general punctuation block, the fillers, the variation selectors, the specials, the tags), each between
    two letters; and the sequences whose answer depends on neighbours (carriage returns, joiners)."""
    import unicodedata

    singles = [
        *range(0x00, 0x100), 0x034F, 0x061C, 0x115F, 0x1160, 0x17B4, 0x17B5, *range(0x180B, 0x1810),
        *range(0x2000, 0x2070), 0x3164, 0x2800, *range(0xFE00, 0xFE10), 0xFEFF, 0xFFA0, *range(0xFFF0, 0xFFFE),
        0xE000, 0xF8FF, 0x0378, 0xD800, 0xDFFF, 0x1BCA0, 0x1BCA3, 0x1D173, 0x1D17A, 0xE0000, 0xE0001, 0xE0041,
        0xE007F, 0xE0100, 0xE01EF, 0xE01F0, 0xF0000, 0x10FFFD, 0x3000, 0x00A0, 0x05D0, 0x0627, 0x4E16, 0x1F600,
    ]  # fmt: skip
    # Every answer holds whatever Unicode version a client has (Python 3.10 has 13.0, 3.13 has 15.1, browsers
    # newer): each of these unassigned somewhere is a Default_Ignorable_Code_Point (hidden, assigned or not:
    # U+180F came in 14.0), but U+0378, which stays unassigned.
    assert all(c == 0x0378 or unicodedata.category(chr(c)) != "Cn" or visible.hidden(chr(c)) for c in singles)
    cases = [[0x61, c, 0x62] for c in singles]
    sequences = [
        "a\r\nb", "a\rb", "a\r", "\rb", "a\r\r\nb", "👩\u200d💻", "❤️\u200d🔥", "🏳️\u200d🌈", "a\u200db", "👩\u200d",
        "\u200d💻", "\ufe0f\u200d🔥", "x\u200d\u200dy", "👩\u200d\u200d💻", "\t\n", "⚠️",
    ]
    return cases + [[ord(ch) for ch in text] for text in sequences]


def _mirror() -> dict[str, object]:
    cases = []
    for points in _mirror_cases():
        text = "".join(map(chr, points))
        cases.append({"codePoints": points, "hidden": [offset for offset, _ch in visible.hidden(text)]})
    return {
        "about": "Written by tests/test_risk_visible.py from server/interpreter_lsp/safety/visible.py: for each "
        "case, the indexes (in code points) of its hidden characters. Each client's tests check their own "
        "definition against it.",
        "cases": cases,
    }


def _mirror_text() -> str:
    import json

    return json.dumps(_mirror(), indent=None, separators=(",", ":")).replace('{"codePoints"', '\n{"codePoints"') + "\n"


def test_the_clients_mirror_is_the_servers_answers() -> None:
    stale = "stale: run .venv/bin/python tests/test_risk_visible.py"
    assert MIRROR.read_text(encoding="utf-8") == _mirror_text(), stale


if __name__ == "__main__":
    MIRROR.write_text(_mirror_text(), encoding="utf-8")
    print(f"wrote {MIRROR}")
