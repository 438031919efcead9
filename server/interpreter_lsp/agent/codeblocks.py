"""Incremental parser for fenced code blocks in a streamed Markdown reply.

Feed it the reply delta by delta; it returns each runnable block as soon as its closing fence line is
complete, and `finish()` returns an unterminated last block (`complete=False`). Work is proportional to the
text fed: every character is looked at a constant number of times, whatever the chunking, and any chunking
of the same reply yields the same blocks.

What counts as a block (CommonMark fenced code blocks, with a few allowances for how models write):
- Fences of ``` or ~~~, three or more; the closing fence is the same character, at least as long, with
  nothing after it. A longer fence can hold shorter ones (a ```` block containing ``` lines).
- An opening fence may be indented (up to 3 spaces in CommonMark; deeper too, because models nest fences in
  list items); that much indentation is removed from the block's lines, and a closing fence may be indented
  at most 3 spaces more than the opening one.
- A fence may also open at the end of a line of prose ("Run this: ```python"), if a language tag follows it.
- The language is the first word of the info string (```python title="x.py" -> python; ```python:a.py ->
  python), mapped by `canonical_language` (py -> python, sh/bash/zsh/console -> shell).
- Untagged blocks get the parser's default language (python unless the caller says otherwise: an untagged
  block in a reply about Python is almost always Python; Open Interpreter defaults to python too), except
  that an untagged block written as a shell session ("$ ls") is shell.
- Blocks tagged as data or prose (text, markdown, output, json, yaml, toml, diff, ...) are not code to run
  and are skipped, as are blocks with nothing but whitespace in them.
- Shell sessions (```console, or any shell block whose lines start with "$ "): the "$ " prompts are
  stripped and the output lines dropped; Python console blocks (">>> ") likewise. Indentation common to
  all lines of a block is removed.
- `<think>...</think>` sections (reasoning models) are ignored, fences inside them included.
- Line endings may be \\n or \\r\\n.
`index` numbers the blocks returned, from 0, in reply order.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass

from interpreter_lsp.languages import PYTHON, SHELL, canonical_language

# Tags of blocks that show data, output or prose: never proposed to run.
NON_EXECUTABLE_TAGS: frozenset[str] = frozenset(
    {
        "text", "txt", "plaintext", "plain", "markdown", "md", "output", "out", "result", "stdout",
        "stderr", "json", "jsonc", "json5", "jsonl", "yaml", "yml", "toml", "ini", "cfg", "conf", "env",
        "diff", "patch", "csv", "tsv", "xml", "html", "css", "svg", "log", "mermaid", "dot", "graphql",
        "rst", "tex", "latex", "dockerfile", "makefile", "properties", "http", "none", "ascii", "tree",
    }
)  # fmt: skip

_FENCE = re.compile(r"(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)")
_TRAILING_FENCE = re.compile(r"(?P<fence>`{3,}|~{3,})[ \t]*(?P<tag>[A-Za-z][\w+#.-]*)[ \t]*$")
_THINK_OPEN = re.compile(r"^[ \t]*<(think|thinking|reasoning)>")
_SHELL_PROMPT = re.compile(r"^[ \t]*\$ ")
_PY_PROMPT = re.compile(r"^(>>>|\.\.\.)( |$)")


@dataclass(frozen=True)
class CodeBlock:
    language: str  # canonical (languages.canonical_language)
    code: str  # without the fences, without a trailing newline
    complete: bool  # False only for an unterminated last block returned by finish()
    index: int  # 0-based order among the blocks of this reply


@dataclass
class _OpenFence:
    char: str
    length: int
    indent: int
    tag: str  # lower-cased first word of the info string, "" if none
    lines: list[str]


class BlockParser:
    """Turns a streamed Markdown reply into runnable code blocks. One parser per reply."""

    def __init__(self, default_language: str = PYTHON) -> None:
        self._default_language = canonical_language(default_language) or PYTHON
        self._partial: list[str] = []  # pieces of the current, unfinished line
        self._fence: _OpenFence | None = None
        self._think_close: str | None = None  # "</think>" while inside a reasoning section
        self._count = 0
        self._finished = False

    def feed(self, delta: str) -> list[CodeBlock]:
        """Blocks whose closing fence line completed within this delta."""
        if self._finished:
            raise RuntimeError("BlockParser.feed() after finish(): use a new parser for a new reply")
        out: list[CodeBlock] = []
        start = 0
        while (newline := delta.find("\n", start)) != -1:
            self._partial.append(delta[start:newline])
            line = "".join(self._partial)
            self._partial.clear()
            self._line(line[:-1] if line.endswith("\r") else line, out)
            start = newline + 1
        if start < len(delta):
            self._partial.append(delta[start:])
        return out

    def finish(self) -> list[CodeBlock]:
        """At the end of the stream: the last line, and an unterminated block (complete=False)."""
        if self._finished:
            return []
        self._finished = True
        out: list[CodeBlock] = []
        if self._partial:
            line = "".join(self._partial)
            self._partial.clear()
            self._line(line[:-1] if line.endswith("\r") else line, out)
        fence, self._fence = self._fence, None
        if fence is not None:
            self._emit(fence, complete=False, out=out)
        return out

    # -- one complete line at a time -----------------------------------------------------------------

    def _line(self, line: str, out: list[CodeBlock]) -> None:
        if self._fence is not None:
            self._fence_line(self._fence, line, out)
        elif self._think_close is not None:
            end = line.find(self._think_close)
            if end != -1:
                rest = line[end + len(self._think_close) :]
                self._think_close = None
                if rest.strip():
                    self._line(rest, out)
        else:
            self._prose_line(line, out)

    def _prose_line(self, line: str, out: list[CodeBlock]) -> None:
        think = _THINK_OPEN.match(line)
        if think:
            self._think_close = f"</{think.group(1)}>"
            self._line(line[think.end() :], out)  # the same line may close it again
            return
        match = _FENCE.fullmatch(line)
        if match and self._open(match.group("indent"), match.group("fence"), match.group("info")):
            return
        if "`" in line or "~" in line:
            trailing = _TRAILING_FENCE.search(line)
            # Only a lone fence at the end of prose: "Sure: ```python", not "``` inline ``` words".
            if trailing and trailing.start() > 0 and trailing.group("fence")[0] not in line[: trailing.start()]:
                self._open("", trailing.group("fence"), trailing.group("tag"))

    def _open(self, indent: str, fence: str, info: str) -> bool:
        if fence[0] == "`" and "`" in info:
            return False  # CommonMark: a backtick fence's info string has no backticks (``` inline ```)
        self._fence = _OpenFence(fence[0], len(fence), _width(indent), _first_word(info), [])
        return True

    def _fence_line(self, fence: _OpenFence, line: str, out: list[CodeBlock]) -> None:
        stripped = line.lstrip(" \t")
        if stripped.startswith(fence.char * fence.length):
            run = len(stripped) - len(stripped.lstrip(fence.char))
            if (
                run >= fence.length
                and not stripped[run:].strip()
                and _width(line[: len(line) - len(stripped)]) <= fence.indent + 3
            ):
                self._fence = None
                self._emit(fence, complete=True, out=out)
                return
        fence.lines.append(_dedent(line, fence.indent))

    def _emit(self, fence: _OpenFence, *, complete: bool, out: list[CodeBlock]) -> None:
        tag = fence.tag
        if tag in NON_EXECUTABLE_TAGS:
            return
        language = canonical_language(tag) if tag else self._default_language
        lines = fence.lines
        if (language == SHELL or not tag) and any(_SHELL_PROMPT.match(line) for line in lines):
            language, lines = SHELL, _shell_session(lines)
        if language == PYTHON and any(line.startswith(">>> ") for line in lines):
            lines = _python_session(lines)
        # Common indentation goes (a fence opened after "- " in a list leaves its code indented).
        code = textwrap.dedent("\n".join(lines)).strip("\n")
        if not code.strip():
            return
        out.append(CodeBlock(language=language, code=code, complete=complete, index=self._count))
        self._count += 1


def parse_blocks(text: str, default_language: str = PYTHON) -> list[CodeBlock]:
    """All runnable blocks of a whole reply (what feeding it in any pieces yields)."""
    parser = BlockParser(default_language)
    return parser.feed(text) + parser.finish()


def _first_word(info: str) -> str:
    words = info.strip().split(None, 1)
    if not words:
        return ""
    word = words[0].strip("{}").lstrip(".")
    for separator in (":", ",", "{"):
        word = word.split(separator, 1)[0]
    return word.lower()


def _width(indent: str) -> int:
    return sum(4 if char == "\t" else 1 for char in indent)


def _dedent(line: str, width: int) -> str:
    removed = 0
    index = 0
    while index < len(line) and removed < width and line[index] in " \t":
        removed += 4 if line[index] == "\t" else 1
        index += 1
    return line[index:]


def _shell_session(lines: list[str]) -> list[str]:
    """Commands of a shell session transcript: "$ " lines (and their "\\" continuations), no output."""
    commands: list[str] = []
    continuing = False
    for line in lines:
        prompt = _SHELL_PROMPT.match(line)
        if prompt:
            commands.append(line[prompt.end() :])
        elif continuing:
            commands.append(line)
        else:
            continue
        continuing = commands[-1].rstrip().endswith("\\")
    return commands


def _python_session(lines: list[str]) -> list[str]:
    """Statements of a Python console transcript: ">>> " and "... " lines, without the prompts."""
    return [line[4:] if len(line) > 3 else "" for line in lines if _PY_PROMPT.match(line)]
