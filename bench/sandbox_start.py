"""Time from starting a python kernel to its first answer, in the bubblewrap sandbox vs without it, measured
interleaved in the same run through the server's own Kernel class (launcher, kernelspec, sandbox wrapper).

    .venv/bin/python bench/sandbox_start.py [--rounds 8]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from interpreter_lsp.kernels.kernel import Kernel
from interpreter_lsp.kernels.sandbox import SandboxConfig, wrap_command
from interpreter_lsp.kernels.specs import choose_kernel
from interpreter_lsp.safety.secrets import kernel_environment


async def time_start(root: Path, runtime: Path, sandboxed: bool, n: int) -> float:
    choice = choose_kernel("python", root, runtime / "specs")
    env = kernel_environment(dict(os.environ))
    wrapper = None
    if sandboxed:
        config = SandboxConfig(workspace=root, runtime_dir=runtime)
        env = wrap_command([], env, config)[1]

        def wrapper(cmd: list[str], runtime_dir: Path, launcher: list[str]) -> list[str]:
            return wrap_command(cmd, env, replace(config, runtime_dir=runtime_dir), launcher)[0]

    kernel = Kernel(choice, cwd=root, runtime_dir=runtime / f"k{n}", env=env, on_state=lambda *_: None,
                    command_wrapper=wrapper)
    start = time.perf_counter()
    await kernel.start()
    elapsed = time.perf_counter() - start
    await kernel.shutdown()
    return elapsed


async def main(rounds: int) -> None:
    with tempfile.TemporaryDirectory(prefix="ilsp-bench-") as tmp:
        root, runtime = Path(tmp) / "ws", Path(tmp) / "rt"
        root.mkdir()
        runtime.mkdir(mode=0o700)
        await time_start(root, runtime, True, 0)  # warm the file cache
        plain, boxed = [], []
        for n in range(rounds):
            plain.append(await time_start(root, runtime, False, 2 * n + 1))
            boxed.append(await time_start(root, runtime, True, 2 * n + 2))
    p, b = statistics.median(plain) * 1000, statistics.median(boxed) * 1000
    print(f"kernel start -> ready, median of {rounds}: sandboxed {b:.0f} ms, plain {p:.0f} ms, ratio {b / p:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=8)
    asyncio.run(main(parser.parse_args().rounds))
