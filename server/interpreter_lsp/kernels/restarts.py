"""When a kernel that fails to start is tried again, and what the user reads when it is not.

A start that fails because the kernel's process exited before it answered (an interpreter without
ipykernel, a workspace `ipykernel_launcher.py` that exits, a kernel that crashes at import) is tried again
after a growing delay, at most MAX_STARTS times in a row; so is a kernel that dies within STABLE_AFTER
seconds of being ready (a crash loop). Then the kernel stays dead, with one message that says why: the
interpreter, the missing module when there is one, the exit code, and the last lines of its stderr. Runs
get that message at once; a restart asked for (interpreter.restartKernel) or a settings change starts it
again, nothing else does.

Before this, each such exit was a "death" that restarted the kernel at once: 82-165 starts in a few
seconds, one "kernel died" note each, with no reason.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from .specs import KernelChoice

MAX_STARTS = 3  # failed starts in a row before the kernel stays dead
FIRST_DELAY = 0.5  # seconds before the second start; doubled for each one after
STABLE_AFTER = 30.0  # a kernel ready this long started well: its next death begins a new count

_MISSING = re.compile(r"No module named '?([A-Za-z_][\w.]*)'?")


@dataclass
class StartFailures:
    """The failed starts (and early deaths) of one language's kernel, in a row."""

    count: int = 0
    ready_at: float | None = field(default=None, repr=False)

    def ready(self) -> None:
        self.ready_at = time.monotonic()

    def failed(self) -> float | None:
        """A start failed, or the kernel died: the delay before the next start, or None when it stays dead.
        A kernel that had been ready STABLE_AFTER seconds ran well: the count starts over (`count` is 1
        then: this failure is news, the ones after it in the streak are not)."""
        if self.ready_at is not None and time.monotonic() - self.ready_at >= STABLE_AFTER:
            self.count = 0
        self.ready_at = None
        self.count += 1
        if self.count >= MAX_STARTS:
            return None
        return FIRST_DELAY * 2 ** (self.count - 1)

    def in_streak(self) -> bool:
        """Whether failures are being counted now (not since a kernel ran well, or never)."""
        stable = self.ready_at is not None and time.monotonic() - self.ready_at >= STABLE_AFTER
        return self.count > 0 and not stable

    def reset(self) -> None:
        self.count = 0
        self.ready_at = None


def start_failure(language: str, choice: KernelChoice, cause: str, stderr: str) -> str:
    """The sentence for a kernel whose process exited before it answered: what ran, how it ended, in its
    own words (its stderr's last lines), and what to do."""
    who = choice.interpreter or f"the kernelspec {choice.name!r}"
    missing = _MISSING.findall(stderr)
    text = f"The {language} kernel could not start: {who} exited before the kernel answered ({cause})."
    if missing:
        module = missing[-1]
        text += f" The module {module} is missing there."
    if stderr:
        text += " Its last lines on stderr:\n" + "\n".join(f"    {line}" for line in stderr.splitlines())
    if missing and missing[-1].split(".")[0] in ("ipykernel_launcher", "ipykernel"):
        python = choice.interpreter or "that interpreter"
        text += (
            f"\nInstall ipykernel for it ({python} -m pip install ipykernel), or set interpreter.kernel.python "
            "to an interpreter that has it; then restart the kernel."
        )
    elif missing:
        text += f"\nInstall {missing[-1].split('.')[0]} for that interpreter; then restart the kernel."
    else:
        text += (
            "\nFix what its stderr says (or choose another interpreter: interpreter.kernel.python); then restart "
            "the kernel."
        )
    return text


def crash_loop(language: str, cause: str, count: int) -> str:
    """The sentence for a kernel that kept dying soon after it started."""
    return (
        f"The {language} kernel died {count} times within {STABLE_AFTER:.0f} s of starting ({cause}); it stays "
        "stopped. Look at what the code run at its start does (the server log has its stderr at --log-level "
        "INFO), then restart the kernel."
    )
