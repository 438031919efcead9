"""Every benchmark in bench/ runs, as a smoke run: a few iterations, its closing figures printed, no
assertion on time (issue 21: a benchmark nothing runs drifts away from the code and breaks unnoticed).

Marked `bench`: not part of the default run; scripts/test.d/60-bench.sh runs it (`-m bench`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gateways import gateway_missing

pytestmark = [pytest.mark.bench, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench"

# bench file -> (arguments for a smoke run, words its output must hold)
SMOKE = {
    "context_budget.py": (["5"], []),
    "first_delta.py": (["--cold", "1", "--later", "1", "--wait", "1", "--rounds", "2"],
                       ["openai: cold first delta", "anthropic: cold", "ollama: cold", "raw httpx",
                        "s after `initialized`"]),
    "gateway_roundtrip.py": (["--runs", "3", "--floods", "1"], ["ratio"]),
    "export_verify.py": (["--sessions", "2"], []),
    "loop.py": (["--turns", "3"], ["loop turn", "its parts bare", "ratio"]),
    "mcp_gate.py": (["--samples", "5", "--calls", "20"], []),
    "memory.py": (["--turns", "3", "--formats", "openai,ollama"], ["before the first model call",
                                                                   "after 3 more turns", "+ litellm"]),
    "prompt_tokens.py": ([], []),
    "risk_corpus.py": ([], []),
    "risk_speed.py": (["--rounds", "1"], []),
    "roundtrip.py": (["--runs", "5"], ["round trip print(1)", "bare kernel", "ratio"]),
    "sandbox_start.py": (["--rounds", "2"], []),
    "startup.py": (["--rounds", "2"], ["spawn -> initialize", "bare pygls", "ratio"]),
    "undo.py": (["2"], ["held as a fork", "packed"]),
}  # fmt: skip


def test_every_benchmark_is_listed() -> None:
    assert sorted(p.name for p in BENCH.glob("*.py")) == sorted(SMOKE), "add the new benchmark to SMOKE"


@pytest.mark.parametrize("name", sorted(SMOKE))
def test_the_benchmark_runs(name: str) -> None:
    if name == "gateway_roundtrip.py" and (why := gateway_missing("kg")):
        pytest.skip(why)
    args, words = SMOKE[name]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "server"), str(REPO / "tests")])}
    done = subprocess.run(
        [sys.executable, str(BENCH / name), *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=850
    )
    assert done.returncode == 0, f"{name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert done.stdout.strip(), f"{name} printed nothing"
    for word in words:
        assert word in done.stdout, f"{name} no longer prints {word!r}:\n{done.stdout}"
    print(done.stdout)  # the figures, in the suite's log
