"""Rating never blocks the server: `rate` runs off the event loop within a time budget, rating is linear in
the input, and the Python and shell scanners reach each other only through `Context.nested`."""

from __future__ import annotations

import ast
import asyncio
import shlex
import time
from pathlib import Path

from interpreter_lsp.protocol import Risk
from interpreter_lsp.safety import context as safety_context
from interpreter_lsp.safety.risk import assess, rate

WORKSPACE = Path.home() / "src" / "demo"
SAFETY = Path(safety_context.__file__).parent


async def test_rate_gives_what_assess_gives() -> None:
    for language, code in [("shell", "rm -rf ~"), ("python", "import os\nos.remove('a.txt')"), ("ruby", "x")]:
        assert await rate(code, language, WORKSPACE) == assess(code, language, WORKSPACE)
    written = [WORKSPACE / "job.py"]
    assert await rate("%run job.py", "python", WORKSPACE, written=written) == assess(
        "%run job.py", "python", WORKSPACE, written=written
    )


async def test_rating_runs_off_the_event_loop() -> None:
    """While a large input is rated, the loop keeps answering (a ticker keeps ticking)."""
    ticks = 0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0.001)

    code = "\n".join(f"echo line {i} | grep {i} > out_{i}.txt" for i in range(3000))
    task = asyncio.create_task(ticker())
    try:
        start = time.perf_counter()
        risk = await rate(code, "shell", WORKSPACE, budget=60)
        took = time.perf_counter() - start
    finally:
        stop.set()
        await task
    assert risk.level == "low"
    assert took > 0.05, "too small an input to show anything"
    assert ticks >= 5, f"the loop ticked {ticks} times in {took:.2f} s of rating"


async def test_over_budget_is_at_least_medium_with_a_reason() -> None:
    code = "\n".join(f"x_{i} = [open('f{i}.txt').read() for _ in range(3)]" for i in range(20_000))
    risk = await rate(code, "python", WORKSPACE, budget=0.01)
    assert risk.level in ("medium", "high")
    assert "the code took too long to check in full: read it before it runs" in risk.reasons


async def test_over_budget_keeps_what_was_found_before_the_deadline() -> None:
    code = "import shutil\nshutil.rmtree('/')\n" + "\n".join(f"x_{i} = open('f{i}').read()" for i in range(6_000))
    too_long = "the code took too long to check in full: read it before it runs"
    # The budget in this machine's time, now: enough to parse and check the first lines, far from enough for
    # all 6,000 (checking them takes about five parses). On a busy machine one rating can be slowed more than
    # the parse measured just before it (the deadline comes before any line was checked) or less (it checks
    # everything): each try measures again, and the budget moves between two and six parses.
    for attempt in range(30):
        start = time.perf_counter()
        ast.parse(code)
        budget = (2 + attempt % 5) * (time.perf_counter() - start)
        risk = await rate(code, "python", WORKSPACE, budget=budget)
        if too_long in risk.reasons and len(risk.reasons) > 1:
            break
    assert risk.level == "high", risk
    assert "deletes the whole file system: /" in risk.reasons
    assert too_long in risk.reasons


def test_a_long_shell_word_rates_in_linear_time() -> None:
    """A 46 KB line took 40 s (a backreference regex tried from every position): now well under a second."""
    for code in ("echo " + "a" * 46_000, "ls # " + "x" * 46_000, "x" + " " * 46_000 + "= 1"):
        start = time.perf_counter()
        assess(code, "shell", WORKSPACE)
        assess("!ls\n" + code, "python", WORKSPACE)
        assert time.perf_counter() - start < 10.0  # seconds on a busy core; quiet, ~0.05 s


def test_code_inside_code_goes_through_one_depth_guard() -> None:
    code = "ls"
    for _ in range(8):
        code = f"bash -c {shlex.quote(code)}"
    assert assess(code, "shell", WORKSPACE) == Risk(
        level="medium", reasons=["code nested too deep to check (code that writes code that runs code)"]
    )
    shallow = "python3 -c " + shlex.quote("import os; os.system('bash -c \"rm -rf ~\"')")
    assert assess(shallow, "shell", WORKSPACE).level == "high"


def test_the_scanners_import_each_other_nowhere() -> None:
    """shell/ never imports python/ (nor the reverse), and no module imports inside a function: the only
    bridge is Context.nested(), with its one depth guard."""
    for package, other in (("shell", "python"), ("python", "shell")):
        for module in (SAFETY / package).glob("*.py"):
            tree = ast.parse(module.read_text())
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom):
                    assert not (node.module or "").startswith(f"interpreter_lsp.safety.{other}"), module
            for function in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
                imports = [n for n in ast.walk(function) if isinstance(n, (ast.Import, ast.ImportFrom))]
                allowed = [n for n in imports if isinstance(n, ast.Import) and n.names[0].name == "bashlex"]
                assert imports == allowed, f"{module.name}: {function.name} imports inside a function"
    guards = [p for p in SAFETY.rglob("*.py") if "MAX_DEPTH" in p.read_text()]
    assert guards == [SAFETY / "context.py"]
