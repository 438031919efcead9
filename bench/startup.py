"""Time from spawning the server to its `initialize` answer, vs a bare pygls server measured the same way
in the same run (interleaved). litellm and the kernel must stay off that path.

The server's own start uses its cache of the code attrs and cattrs generate (code_cache.py; warm after the
first start, in a cache directory of the bench's own); "first start" is the same with an empty cache
directory each time, as just after an install or an upgrade of Python.

    .venv/bin/python bench/startup.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types as t
from pytest_lsp import client_capabilities
from pytest_lsp.client import make_test_lsp_client

BARE_SERVER = """
from pygls.lsp.server import LanguageServer
server = LanguageServer("bare", "0")
server.start_io()
"""


async def time_to_initialize(argv: list[str], root: Path, cache: Path | None = None) -> float:
    client = make_test_lsp_client()
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)} if cache is not None else None
    start = time.perf_counter()
    await client.start_io(*argv, cwd=str(root), env=env)
    await asyncio.wait_for(
        client.initialize_session(
            t.InitializeParams(capabilities=client_capabilities("visual-studio-code"), root_uri=root.as_uri(),
                               workspace_folders=[t.WorkspaceFolder(uri=root.as_uri(), name="ws")])
        ),
        60,
    )
    elapsed = time.perf_counter() - start
    await asyncio.wait_for(client.shutdown_session(), 60)
    await client.stop()
    return elapsed


async def main(rounds: int) -> None:
    with tempfile.TemporaryDirectory(prefix="ilsp-bench-") as tmp:
        root = Path(tmp)
        bare_script = root / "bare_server.py"
        bare_script.write_text(BARE_SERVER)
        ours_argv = [sys.executable, "-m", "interpreter_lsp"]
        bare_argv = [sys.executable, str(bare_script)]
        warm = root / "cache"
        await time_to_initialize(ours_argv, root, warm)  # warm the file cache for both, and the server's own
        await time_to_initialize(bare_argv, root)
        ours, first, bare = [], [], []
        for i in range(rounds):
            ours.append(await time_to_initialize(ours_argv, root, warm))
            bare.append(await time_to_initialize(bare_argv, root))
            first.append(await time_to_initialize(ours_argv, root, root / f"empty-cache-{i}"))
    o, b, f = (statistics.median(x) * 1000 for x in (ours, bare, first))
    print(
        f"spawn -> initialize answered, median of {rounds}: interpreter-lsp {o:.0f} ms, bare pygls {b:.0f} ms, "
        f"ratio {o / b:.2f}x (target <= 1.3x)\n"
        f"  a first start (empty code cache): {f:.0f} ms, ratio {f / b:.2f}x"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    asyncio.run(main(parser.parse_args().rounds))
