"""The shell kernel's entry point: bash_kernel, without pexpect's pause before every send.

bash_kernel drives bash through pexpect, whose `spawn` waits `delaybeforesend` (50 ms) before each line it
sends. A cell sends two lines (the code, then `echo $?` for its exit status) and a start sends five, so a bare
`echo hi` took 106 ms and a start ~250 ms more, nearly all of it that sleep (measured: bench/roundtrip.py's
shell case). The pause guards against a program that turns terminal echo off only after printing its prompt
(a password prompt) and would echo input that came too early. bash here never does that: pexpect opens its
terminal with echo off before bash starts (`echo=False`), readline keeps the echo state it finds, and every
line is sent only after the prompt it answers has been read. So the pause buys nothing and goes.

This module runs in the kernel's own process (the kernelspec in specs.py runs it by module name, found on the
server's install, never the workspace); it imports nothing of the server's.
"""

from __future__ import annotations

from typing import Any


def _without_send_delay() -> None:
    import pexpect

    original = pexpect.spawn.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self.delaybeforesend = None  # why: the module docstring

    pexpect.spawn.__init__ = __init__  # type: ignore[method-assign]


def main() -> None:
    _without_send_delay()
    from bash_kernel.kernel import BashKernel
    from ipykernel.kernelapp import IPKernelApp

    IPKernelApp.launch_instance(kernel_class=BashKernel)


if __name__ == "__main__":
    main()
