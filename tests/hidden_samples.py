"""What the editors' tests of hidden characters share (safety/visible.py; test_emacs.py, neovim/test_nvim_hidden.py):
the Trojan Source proposal, what of it must never reach the screen, how its lines must read, and the file of
the server's answers that every client's definition is checked against (written by test_risk_visible.py)."""

from __future__ import annotations

from pathlib import Path

MIRROR = Path(__file__).resolve().parents[1] / "clients" / "hidden-characters.json"

# A right-to-left override and isolates make the comparison read as if the string ended before "# admin" (a
# comment); a Hangul filler is a name that shows as a blank; a lone carriage return ends a Python line that
# reads as one.
TROJAN = (
    'access = "user"\n'
    'if access != "none\u202e \u2066# admin\u2069 \u2066":\n'
    '    print("granted")\n'
    "\u3164 = 6 * 7\n"
    'print("filler is", \u3164)\n'
    'x = 1\rprint("after a lone carriage return", x)\n'
)
TROJAN_RAW = ["\u202e", "\u2066", "\u2069", "\u3164", "\r"]  # never on the screen
TROJAN_SHOWN = [  # its lines as an editor must show them
    'if access != "none<U+202E> <U+2066># admin<U+2069> <U+2066>":',
    "<U+3164> = 6 * 7",
    'print("filler is", <U+3164>)',
    'x = 1<U+000D>print("after a lone carriage return", x)',
]
