"""Rating time of 1 KB, 16 KB and 200 KB inputs, Python and shell, with the ratio against parsing the same
input (ast.parse / bashlex.parse, measured in the same run): the rater should cost a small multiple of
the parse, at every size (linear, like the parse).

    .venv/bin/python bench/risk_speed.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import ast
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import bashlex

from interpreter_lsp.safety.risk import assess

ROOT = Path.home() / "src" / "demo"
PYTHON_LINES = [
    "import os, shutil, subprocess",
    "data = [row.strip() for row in open('data/input.csv')]",
    "os.makedirs('out/plots', exist_ok=True)",
    "subprocess.run(['git', 'status'], check=True)",
    "print(sum(len(x) for x in data) / max(len(data), 1))",
]
SHELL_LINES = [
    "mkdir -p out && cp -r src out/",
    "grep -rn TODO src | head -20 > todo.txt",
    'for f in *.txt; do wc -l "$f"; done',
    "python -m pytest -q tests/ 2>&1 | tail -5",
    "rm -f build/*.o",
]
SIZES = {"1 KB": 1_000, "16 KB": 16_000, "200 KB": 199_000}


def sample(lines: list[str], size: int) -> str:
    out: list[str] = []
    total = 0
    while total < size:
        line = lines[len(out) % len(lines)]
        out.append(line)
        total += len(line) + 1
    return "\n".join(out)


def long_word(size: int) -> str:
    return "echo " + "a" * size  # the shape that took 40 s at 46 KB (a backreference regex)


def best(fn: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    assess("ls", "shell", ROOT)  # imports bashlex once
    print(f"{'input':28s} {'rate':>10s} {'parse':>10s} {'ratio':>7s}")
    ratios: list[float] = []
    cases: list[tuple[str, str, str, Callable[[str], object]]] = []
    for label, size in SIZES.items():
        cases.append((f"python {label}", "python", sample(PYTHON_LINES, size), ast.parse))
        cases.append((f"shell {label}", "shell", sample(SHELL_LINES, size), bashlex.parse))
        cases.append((f"shell {label} one word", "shell", long_word(size), bashlex.parse))
    for name, language, code, parse in cases:
        rated = best(lambda code=code, language=language: assess(code, language, ROOT), args.rounds)
        parsed = best(lambda code=code, parse=parse: parse(code), args.rounds)
        ratio = rated / parsed
        ratios.append(ratio)
        print(f"{name:28s} {rated * 1000:8.1f} ms {parsed * 1000:8.1f} ms {ratio:6.2f}x")
    print(f"median ratio rate/parse: {statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    main()
