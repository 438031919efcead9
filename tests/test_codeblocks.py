"""The streamed code-block parser: which blocks a reply proposes, however the reply is chunked."""

from __future__ import annotations

import random
import time

import pytest

from interpreter_lsp.agent.codeblocks import BlockParser, CodeBlock, parse_blocks

F = "```"  # keeps the table readable


def blocks(text: str, default_language: str = "python") -> list[tuple[str, str, bool]]:
    return [(b.language, b.code, b.complete) for b in parse_blocks(text, default_language)]


CASES: list[tuple[str, str, list[tuple[str, str, bool]]]] = [
    ("no code", "Just an answer, no code.", []),
    ("one python block", f"Let me check.\n{F}python\nprint(1)\n{F}\nDone.", [("python", "print(1)", True)]),
    ("closing fence at the very end", f"{F}python\nx = 1\nprint(x)\n{F}", [("python", "x = 1\nprint(x)", True)]),
    (
        "two blocks in one reply",
        f"First:\n{F}python\na = 1\n{F}\nThen:\n{F}bash\nls -la\n{F}\n",
        [("python", "a = 1", True), ("shell", "ls -la", True)],
    ),
    ("tilde fence", "~~~python\nprint('t')\n~~~\n", [("python", "print('t')", True)]),
    ("alias py", f"{F}py\nprint(2)\n{F}", [("python", "print(2)", True)]),
    ("alias sh", f"{F}sh\necho hi\n{F}", [("shell", "echo hi", True)]),
    ("alias zsh", f"{F}zsh\necho hi\n{F}", [("shell", "echo hi", True)]),
    ("alias python3 upper case", f"{F}Python3\nprint(3)\n{F}", [("python", "print(3)", True)]),
    ("other kernels keep their name", f"{F}r\nprint(1)\n{F}", [("r", "print(1)", True)]),
    ("js alias", f"{F}js\nconsole.log(1)\n{F}", [("javascript", "console.log(1)", True)]),
    ("attributes after the tag", f'{F}python title="x.py" {{linenos}}\nprint(4)\n{F}', [("python", "print(4)", True)]),
    ("tag with a file name", f"{F}python:src/app.py\nprint(5)\n{F}", [("python", "print(5)", True)]),
    ("pandoc style tag", f"{F}{{.python}}\nprint(6)\n{F}", [("python", "print(6)", True)]),
    ("space before the tag", f"{F} python\nprint(7)\n{F}", [("python", "print(7)", True)]),
    ("untagged block defaults to python", f"{F}\nprint(8)\n{F}", [("python", "print(8)", True)]),
    ("longer fence", "````python\nprint(9)\n````", [("python", "print(9)", True)]),
    (
        "a shorter fence inside a longer one is content",
        f"````python\ns = '''\n{F}\nnot a fence\n{F}\n'''\n````",
        [("python", f"s = '''\n{F}\nnot a fence\n{F}\n'''", True)],
    ),
    (
        "markdown block holding a python block is not run",
        f"````markdown\n# Title\n{F}python\nprint('inside docs')\n{F}\n````\n{F}python\nprint('real')\n{F}",
        [("python", "print('real')", True)],
    ),
    ("closing fence may be longer", f"{F}python\nprint(10)\n`````", [("python", "print(10)", True)]),
    (
        "closing fence must be the same char",
        f"{F}python\nprint(11)\n~~~\nx\n{F}",
        [("python", "print(11)\n~~~\nx", True)],
    ),
    (
        "text after a would-be closing fence keeps the block open",
        f"{F}python\nprint(12)\n{F} trailing\n{F}",
        [("python", f"print(12)\n{F} trailing", True)],
    ),
    (
        "fence indented 2 spaces: its indentation is removed",
        f"1. Run:\n  {F}python\n  for i in range(2):\n      print(i)\n  {F}\n",
        [("python", "for i in range(2):\n    print(i)", True)],
    ),
    (
        "fence nested in a list item (4 spaces)",
        f"1. Step one\n\n    {F}bash\n    echo step\n    {F}\n",
        [("shell", "echo step", True)],
    ),
    (
        "CRLF line endings",
        f"{F}python\r\nprint(13)\r\nprint(14)\r\n{F}\r\nok\r\n",
        [("python", "print(13)\nprint(14)", True)],
    ),
    (
        "unterminated last block",
        f"Here:\n{F}python\nimport os\nprint(os.getcwd())",
        [("python", "import os\nprint(os.getcwd())", False)],
    ),
    ("unterminated block ending in a newline", f"{F}python\nprint(15)\n", [("python", "print(15)", False)]),
    ("non-executable: text", f"{F}text\nhello\n{F}", []),
    ("non-executable: output", f"{F}output\n1\n2\n{F}", []),
    ("non-executable: json", f'{F}json\n{{"a": 1}}\n{F}', []),
    ("non-executable: yaml", f"{F}yaml\na: 1\n{F}", []),
    ("non-executable: toml", f"{F}toml\n[tool]\n{F}", []),
    ("non-executable: diff", f"{F}diff\n-a\n+b\n{F}", []),
    ("non-executable: md", f"{F}md\n# x\n{F}", []),
    ("non-executable: plaintext", f"{F}plaintext\nx\n{F}", []),
    ("empty block", f"{F}python\n\n   \n{F}", []),
    (
        "think section is ignored",
        f"<think>\nMaybe:\n{F}python\nprint('draft')\n{F}\n</think>\nHere it is:\n{F}python\nprint('final')\n{F}",
        [("python", "print('final')", True)],
    ),
    (
        "think closed on the same line as text",
        f"<think>plan: {F}python\n</think>Now {F}python\nprint(16)\n{F}",
        [("python", "print(16)", True)],
    ),
    ("think tag inside code is code", f"{F}python\nprint('<think>')\n{F}", [("python", "print('<think>')", True)]),
    (
        "console session: prompts stripped, output dropped",
        f"{F}console\n$ ls\nREADME.md  src\n$ echo done\ndone\n{F}",
        [("shell", "ls\necho done", True)],
    ),
    (
        "bash block written as a session",
        f"{F}bash\n$ pip install rich \\\n    requests\nCollecting rich\n$ python -V\n{F}",
        [("shell", "pip install rich \\\n    requests\npython -V", True)],
    ),
    (
        "untagged session is shell",
        f"{F}\n$ git status\nOn branch main\n{F}",
        [("shell", "git status", True)],
    ),
    ("a $ variable is not a prompt", f"{F}bash\necho $HOME\n{F}", [("shell", "echo $HOME", True)]),
    (
        "python console session",
        f"{F}pycon\n>>> x = [1,\n...      2]\n>>> len(x)\n2\n{F}",
        [("python", "x = [1,\n     2]\nlen(x)", True)],
    ),
    ("fence opened after prose on the same line", f"Sure: {F}python\nprint(17)\n{F}", [("python", "print(17)", True)]),
    (
        "fence opened after a list marker, code indented",
        f"- {F}python\n  x = 1\n  print(x)\n  {F}",
        [("python", "x = 1\nprint(x)", True)],
    ),
    ("inline triple backticks are not a fence", f"Wrap code in {F}python{F} fences.\nNo code here.", []),
    ("inline fence without a tag opens nothing", f"Use {F} to fence code.\nprint(1) is prose.", []),
    (
        "indented code line keeps relative indentation",
        f"{F}python\ndef f():\n    return 1\n\nprint(f())\n{F}",
        [("python", "def f():\n    return 1\n\nprint(f())", True)],
    ),
]


@pytest.mark.parametrize(("reply", "expected"), [(c[1], c[2]) for c in CASES], ids=[c[0] for c in CASES])
def test_blocks_of_a_whole_reply(reply: str, expected: list[tuple[str, str, bool]]) -> None:
    assert blocks(reply) == expected


@pytest.mark.parametrize("reply", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_any_chunking_gives_the_same_blocks(reply: str) -> None:
    whole = parse_blocks(reply)

    one_char = BlockParser()
    per_char = [b for ch in reply for b in one_char.feed(ch)] + one_char.finish()
    assert per_char == whole

    rng = random.Random(reply)
    for _ in range(20):
        parser = BlockParser()
        found: list[CodeBlock] = []
        position = 0
        while position < len(reply):
            size = rng.randint(1, 12)
            found += parser.feed(reply[position : position + size])
            position += size
        assert found + parser.finish() == whole


@pytest.mark.parametrize(
    "reply", [c[1] for c in CASES if len(c[1]) < 120], ids=[c[0] for c in CASES if len(c[1]) < 120]
)
def test_split_at_every_position(reply: str) -> None:
    whole = parse_blocks(reply)
    for cut in range(len(reply) + 1):
        parser = BlockParser()
        assert parser.feed(reply[:cut]) + parser.feed(reply[cut:]) + parser.finish() == whole


def test_a_block_is_returned_as_soon_as_its_closing_fence_line_ends() -> None:
    parser = BlockParser()
    assert parser.feed("Plan:\n```python\nprint(1)\n") == []
    assert parser.feed("``") == []
    assert parser.feed("`") == []
    assert parser.feed("\nnext") == [CodeBlock("python", "print(1)", True, 0)]
    assert parser.feed(" step\n```sh\necho 2\n```\n") == [CodeBlock("shell", "echo 2", True, 1)]
    assert parser.finish() == []


def test_indexes_count_only_runnable_blocks() -> None:
    reply = "```text\nx\n```\n```python\na\n```\n```json\n{}\n```\n```bash\nb\n```\n"
    assert [(b.index, b.language) for b in parse_blocks(reply)] == [(0, "python"), (1, "shell")]


def test_default_language_for_untagged_blocks_is_the_callers() -> None:
    assert blocks("```\nls\n```", default_language="sh") == [("shell", "ls", True)]
    assert blocks("```\nprint(1)\n```") == [("python", "print(1)", True)]


def test_finish_is_final() -> None:
    parser = BlockParser()
    parser.feed("```python\nx = 1")
    assert parser.finish() == [CodeBlock("python", "x = 1", False, 0)]
    assert parser.finish() == []
    with pytest.raises(RuntimeError):
        parser.feed("more")


def test_work_is_linear_in_the_reply_length() -> None:
    # One long line streamed a character at a time, then many short lines: no re-scanning of what came before.
    def feed_time(n: int) -> float:
        reply = "x" * n + "\n```python\n" + "print(1)\n" * (n // 9) + "```\n"
        parser = BlockParser()
        started = time.perf_counter()
        for ch in reply:
            parser.feed(ch)
        parser.finish()
        return time.perf_counter() - started

    feed_time(20_000)  # warm up
    small, large = feed_time(20_000), feed_time(160_000)
    assert large < small * 8 * 2.5  # 8x the text: well under the 64x a quadratic parser would take
