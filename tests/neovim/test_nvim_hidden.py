"""What a person reads is what runs ("Trojan Source", CVE-2021-42574): code the model proposes can hold
characters that do not show, or that reorder the text around them. The server rates such code medium and
names them; Neovim must also show each one as a visible `<U+202E>` marker wherever the code is read before it
runs or is written (the panel's cards and the model's text, the buffer that edits a proposal, the diff
before writing one), and what runs must be the code as proposed, byte for byte.

Measured in Neovim 0.11 before this client marked anything (a card's code, read off the screen with
screenstring): Neovim shows U+202E, U+2066..U+2069, U+200B and U+FEFF as `<202e>`, C1 controls as `<85>` and
a carriage return as `^M` by itself, but a Hangul filler (U+3164) as a blank, a tag character (U+E0041), a
soft hyphen, U+061C, U+2028 or a private-use character as itself (nothing, or what the terminal makes of
it), and a zero-width joiner or a tag after a letter inside that letter's cell. So the client marks them
all, in one notation, instead of relying on Neovim's own."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterator
from typing import Any

import pytest
from nvim_harness import SLOW_MS, Editor

from hidden_samples import MIRROR, TROJAN, TROJAN_RAW, TROJAN_SHOWN
from interpreter_lsp.safety import visible
from scripted_model import ScriptedModel

# interpreter.history's record of the last run: the code the server ran.
RAN = """
local c = vim.lsp.get_clients({ name = "interpreter_lsp" })[1]
local s = require("interpreter_lsp_test").session()
local code, done = nil, false
require("interpreter_lsp.client").execute(c, "interpreter.history", { uri = vim.uri_from_fname(s.root) }, function(r)
  for _, e in ipairs(type(r) == "table" and r.messages or {}) do
    if e.type == "run" then
      code = e.code
    end
  end
  done = true
end)
vim.wait(10000, function() return done end, 10)
return code
"""


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as m:
        yield m


def settings_for(model: ScriptedModel) -> dict[str, Any]:
    return {"model": "openai/scripted", "apiBase": model.base_url, "apiKey": "sk-test"}


def open_ready(ed: Editor) -> None:
    ed.open("demo.py")
    seen = ed.helper("wait_kernel", "python", "idle", SLOW_MS)
    assert seen["ok"], seen


def proposed_code(ed: Editor) -> str:
    return ed.lua("return require('interpreter_lsp_test').session().proposal_order[1].code")


def test_a_trojan_source_card_shows_each_hidden_character_and_approving_runs_the_code_as_proposed(
    start_editor, model
) -> None:
    model.reply("Here is the check:\n```python\n" + TROJAN + "```\n")
    model.reply("Done.")
    ed: Editor = start_editor(settings_for(model))
    open_ready(ed)
    ed.nvim.command("Interpreter check the access")
    text = "\n".join(ed.wait_panel("pending: a approve"))
    card = text[text.index("**Proposal 1**") :]
    reasons = [line for line in card.split("\n") if line.startswith("  ⚠")]
    assert "risk: medium" in card and any("<U+202E>" in r for r in reasons), card  # the server's reason
    for line in TROJAN_SHOWN:
        assert line in card, card
        assert line in text[: text.index("**Proposal 1**")], "the model's text shows the code so too"
    for raw in TROJAN_RAW:
        assert raw not in text, f"{raw!r} reached the panel's text"
    assert "InterpreterHidden" in ed.helper("highlights_of", "<U+3164> = 6 * 7")

    # On screen, as the user reads it (the panel alone, wide enough not to wrap a line).
    root = ed.lua("return require('interpreter_lsp_test').session().root")
    screen = "\n".join(ed.helper("screen_of", root, 160, 60))
    assert TROJAN_SHOWN[0] in screen and TROJAN_SHOWN[1] in screen, screen
    assert "<202e>" not in screen, "one notation: the client's markers, not Neovim's own"

    # `a` in the panel approves: the run is the proposal's code, byte for byte.
    proposed = proposed_code(ed)
    assert proposed.rstrip("\n") == TROJAN.rstrip("\n")
    ed.nvim.input("a")
    text = "\n".join(ed.wait_panel("Done."))
    run = text[text.index("**Run**") :]
    assert "granted" in run and "filler is 42" in run and "after a lone carriage return 1" in run, run
    assert TROJAN_SHOWN[0] in run, "the run's code shows its characters as the card did"
    assert ed.lua(RAN) == proposed


def test_editing_a_trojan_source_proposal_marks_its_characters_and_write_approves_the_code_unchanged(
    start_editor, model
) -> None:
    model.reply("```python\n" + TROJAN + "```\n")
    model.reply("Done.")
    ed: Editor = start_editor(settings_for(model))
    open_ready(ed)
    ed.nvim.command("Interpreter check the access")
    ed.wait_panel("pending: a approve")
    proposed = proposed_code(ed)
    ed.nvim.command("wincmd l")
    ed.nvim.input("c")
    assert ed.lua("return vim.wait(10000, function() return vim.bo.buftype == 'acwrite' end, 20)")
    # The buffer holds the code itself; the markers are drawn over it.
    assert "\n".join(ed.nvim.current.buffer[:]) == proposed
    # Wide enough not to wrap: Neovim wraps a line by its width before conceal.
    ed.nvim.command("only | set columns=160")
    screen = "\n".join(ed.helper("screen"))
    for line in TROJAN_SHOWN:
        assert line in screen, screen
    assert "<202e>" not in screen and "^M" not in screen, screen
    ed.nvim.command("write")
    text = "\n".join(ed.wait_panel("Done."))
    assert "edited, approved" in text and "granted" in text, text
    assert ed.lua(RAN) == proposed, "writing the buffer approved the code as proposed"


def test_the_diff_before_writing_a_proposal_shows_its_hidden_characters(start_editor) -> None:
    """apply.lua's two reviews (a diff in a split, or inline in the source buffer) are read before the
    proposal is written into a file: both mark the characters; the server writes the code it holds."""
    ed: Editor = start_editor()
    shown = ed.lua(
        """
        local apply = require("interpreter_lsp.apply")
        local code = ...
        local src = vim.api.nvim_create_buf(true, false)
        vim.api.nvim_buf_set_lines(src, 0, -1, false, { "old = 1" })
        vim.api.nvim_set_current_buf(src)
        local prop = { index = 1, code = code }
        local review = apply.review(prop, { buf = src, first = 0, last = 1 }, function() end)
        local diff = vim.api.nvim_buf_get_lines(review.buf, 0, -1, false)
        local groups = {}
        for _, m in ipairs(vim.api.nvim_buf_get_extmarks(review.buf, apply.ns, 0, -1, { details = true })) do
          groups[#groups + 1] = m[4].hl_group
        end
        review.close(false)
        local inline = apply.review_inline(prop, { buf = src, first = 0, last = 1 }, function() end)
        local virtual = {}
        for _, m in ipairs(vim.api.nvim_buf_get_extmarks(src, -1, 0, -1, { details = true })) do
          for _, vl in ipairs(m[4].virt_lines or {}) do
            local parts = {}
            for _, chunk in ipairs(vl) do
              parts[#parts + 1] = chunk[1]
              if chunk[1]:find("^<U%+") then
                groups[#groups + 1] = chunk[2]
              end
            end
            virtual[#virtual + 1] = table.concat(parts)
          end
        end
        inline.close(false)
        return { diff = diff, virtual = virtual, groups = groups }
        """,
        TROJAN,
    )
    diff, virtual = "\n".join(shown["diff"]), "\n".join(shown["virtual"])
    for line in TROJAN_SHOWN:
        assert "+" + line in diff, diff
        assert "+ " + line in virtual, virtual
    for raw in TROJAN_RAW:
        assert raw not in diff and raw not in virtual
    assert "InterpreterHidden" in shown["groups"]


def _expected(text: str) -> str:
    """`text` as the server would have a client show it: each hidden character as its marker, a carriage
    return before a line feed left out."""
    out, at = [], 0
    for offset, ch in visible.hidden(text):
        out += [text[at:offset], visible.marker(ch)]
        at = offset + 1
    out.append(text[at:])
    return "".join(out).replace("\r\n", "\n")


# Characters whose neighbours decide (a joiner between symbols, a carriage return before a line feed).
NEIGHBOURS = [
    "\U0001f469\u200d\U0001f4bb",  # woman, joiner, laptop: an emoji sequence
    "\U0001f9d1\U0001f3fd\u200d\U0001f680",  # a skin tone (Sk) before the joiner
    "\u2764\u200d\U0001f525",
    "\U0001f3f3\ufe0f\u200d\U0001f308",  # a variation selector (Mn) before the joiner: hidden, as the server says
    "a\u200db",
    "\u200d\U0001f4bb",
    "\U0001f469\u200d",
    "\u3164\u200d\u3164",
    "x\ry",
    "x\r",
    "\r\r\n",
    "\u26a0\ufe0f and \U0001f44d\U000e0100",
]


def test_the_hidden_characters_are_the_servers(start_editor) -> None:
    """hidden.lua against the server: the cases of clients/hidden-characters.json (its answers), then
    visible.hidden itself, code point by code point, and the cases that depend on neighbours. Lua has no
    table of unassigned code points: of those, only the ones it knows (the noncharacters and the
    Default_Ignorable ranges) are checked; the rest it leaves as Neovim shows them."""
    ed: Editor = start_editor()
    ignorable = visible._DEFAULT_IGNORABLE  # the server's own list, not a copy

    def known(cp: int) -> bool:
        """Whether hidden.lua knows what the server says of `cp`: every assigned character, and of the
        unassigned ones the noncharacters and the Default_Ignorable ranges."""
        if unicodedata.category(chr(cp)) != "Cn":
            return True
        return (0xFDD0 <= cp <= 0xFDEF) or (cp & 0xFFFE) == 0xFFFE or any(lo <= cp <= hi for lo, hi in ignorable)

    def checked(cp: int) -> bool:
        if cp in (0x0A, 0x0D) or 0xD800 <= cp <= 0xDFFF:
            return False  # a line separator here; a lone surrogate cannot travel as UTF-8 (the mirror has them)
        if 0xE000 <= cp <= 0xF8FF or cp >= 0xF0000:
            return cp in (0xE000, 0xF8FF, 0xF0000, 0xFFFFD, 0xFFFFE, 0x100000, 0x10FFFD, 0x10FFFF)  # samples
        return known(cp)

    # The server's answers for the clients (clients/hidden-characters.json), as code point indexes. Lua builds
    # each text from its code points (a surrogate as its three bytes, as a JSON decoder leaves it).
    mirror = json.loads(MIRROR.read_text(encoding="utf-8"))["cases"]
    found = ed.lua(
        """
        local hidden, out = require("interpreter_lsp.hidden"), {}
        for _, points in ipairs(...) do
          local parts, index_of = {}, {}
          local at = 1
          for i, cp in ipairs(points) do
            local ch = cp < 0x80 and string.char(cp)
              or cp < 0x800 and string.char(0xC0 + math.floor(cp / 0x40), 0x80 + cp % 0x40)
              or cp < 0x10000 and string.char(0xE0 + math.floor(cp / 0x1000), 0x80 + math.floor(cp / 0x40) % 0x40,
                0x80 + cp % 0x40)
              or string.char(0xF0 + math.floor(cp / 0x40000), 0x80 + math.floor(cp / 0x1000) % 0x40,
                0x80 + math.floor(cp / 0x40) % 0x40, 0x80 + cp % 0x40)
            parts[#parts + 1], index_of[at] = ch, i - 1
            at = at + #ch
          end
          local indexes = {}
          for _, f in ipairs(hidden.find(table.concat(parts))) do
            indexes[#indexes + 1] = index_of[f[1]]
          end
          out[#out + 1] = indexes
        end
        return out
        """,
        [case["codePoints"] for case in mirror],
    )
    differ = [
        f"{case['codePoints']}: {got} (server: {case['hidden']})"
        for case, got in zip(mirror, found, strict=True)
        if got != case["hidden"] and all(known(cp) for cp in case["codePoints"])
    ]
    assert not differ, "clients/hidden-characters.json:\n" + "\n".join(differ)

    corpus = [cp for cp in range(0x110000) if checked(cp)]
    text = "\n".join(chr(cp) for cp in corpus)
    shown = ed.lua(
        "local hidden, out = require('interpreter_lsp.hidden'), {} "
        "for _, line in ipairs(vim.split(..., '\\n', { plain = true })) do "
        "out[#out + 1] = (hidden.show(line, true)) end "
        "return table.concat(out, '\\n')",
        text,
    )
    expected = _expected(text).split("\n")
    differ = [
        f"U+{cp:04X}: {got!r} (server: {want!r})"
        for cp, got, want in zip(corpus, shown.split("\n"), expected, strict=True)
        if got != want
    ]
    assert not differ, f"{len(differ)} differ:\n" + "\n".join(differ[:40])

    for case in NEIGHBOURS:
        found = ed.lua(
            "local out = {} for _, f in ipairs(require('interpreter_lsp.hidden').find(...)) do "
            "out[#out + 1] = { f[1], f[3] } end return out",
            case,
        )
        want = [[len(case[:offset].encode()) + 1, ord(ch)] for offset, ch in visible.hidden(case)]
        assert found == want, f"{case!r}: {found} (server: {want})"
        if "\n" not in case:
            assert ed.lua("return (require('interpreter_lsp.hidden').show(...))", case) == _expected(case), case
