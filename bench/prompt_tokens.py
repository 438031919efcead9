"""Prompt tokens of our first request vs Open Interpreter's default system message.

Both are counted with litellm's counter for gpt-4o, with the same user message ("plot the sine function",
no selection, an empty kernel). Open Interpreter's text is a reconstruction of its
`interpreter/core/default_system_message.py` (plus the execution instructions it appends for models that
write Markdown code blocks), written from its published source; it is labelled as such in the output.

Run: .venv/bin/python bench/prompt_tokens.py
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))

from interpreter_lsp.agent.prompt import PromptContext, system_message, user_message
from interpreter_lsp.llm.loader import get_litellm

COUNTING_MODEL = "gpt-4o"
REQUEST = "plot the sine function"
WORKSPACE = "/home/user/project"
OS_NAME = "Linux"

# Reconstruction (not a verbatim copy) of Open Interpreter's default system message, with the user name
# and OS it appends filled in as this benchmark's.
OPEN_INTERPRETER_SYSTEM_MESSAGE = f"""\
You are Open Interpreter, a world-class programmer that can complete any goal by executing code.
For advanced requests, start by writing a plan.
When you execute code, it will be executed **on the user's machine**. The user has given you **full and \
complete permission** to execute any code necessary to complete the task. Execute the code.
You can access the internet. Run **any code** to achieve the goal, and if at first you don't succeed, try \
again and again.
You can install new packages.
When a user refers to a filename, they're likely referring to an existing file in the directory you're \
currently executing code in.
Write messages to the user in Markdown.
In general, try to **make plans** with as few steps as possible. As for actually executing code to carry out \
that plan, for *stateful* languages (like python, javascript, shell, but NOT for html which starts from 0 \
every time) **it's critical not to try to do everything in one code block.** You should try something, print \
information about it, then continue from there in tiny, informed steps. You will never get it right on the \
first try, and attempting it in one go will often lead to errors you cant see.
You are capable of **any** task.

User's Name: user
User's OS: {OS_NAME}"""

# Appended for models that write code as Markdown blocks (the mode we use with every model).
OPEN_INTERPRETER_EXECUTION_INSTRUCTIONS = """\
To execute code on the user's machine, write a markdown code block. Specify the language after the ```. \
You will receive the output. Use any programming language."""


def count(litellm: object, system: str, user: str) -> int:
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    return int(litellm.token_counter(model=COUNTING_MODEL, messages=messages))  # type: ignore[attr-defined]


def main() -> None:
    litellm = asyncio.run(get_litellm())
    ours_system = system_message(PromptContext(workspace=WORKSPACE, os_name=OS_NAME, languages=["python", "shell"]))
    ours_user = user_message(REQUEST, selection=None, variables=None)
    theirs_system = OPEN_INTERPRETER_SYSTEM_MESSAGE + "\n\n" + OPEN_INTERPRETER_EXECUTION_INSTRUCTIONS

    ours = count(litellm, ours_system, ours_user)
    theirs = count(litellm, theirs_system, REQUEST)
    print(f"prompt tokens: ours {ours}, open-interpreter {theirs} (ratio {ours / theirs:.2f})")
    print(
        f"  counted with litellm.token_counter(model={COUNTING_MODEL!r}); user message {REQUEST!r}, no selection;"
        " open-interpreter's system message is a reconstruction of its default_system_message.py plus its"
        " Markdown execution instructions (with tool calling it sends an `execute` tool schema instead)."
    )


if __name__ == "__main__":
    main()
