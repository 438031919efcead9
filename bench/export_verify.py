"""Verified export (interpreter.exportNotebook with verify, docs/protocol.md "Verified export"): how long the
re-run in a fresh kernel takes against the session's own compute time for the same cells (the baseline,
measured in the same run: the runs' durations), and how many cells come out identical or equivalent, over a
small scripted corpus, through a real language server (pytest-lsp client as the editor) and real kernels.

    .venv/bin/python bench/export_verify.py [--sessions N]

Between sessions the conversation is reset and the python kernel restarted (each session starts clean).
Goals (issue 20): verification time <= 1.2 x the session's compute time; >= 99 % of the cells of the
deterministic sessions identical or equivalent, every difference with a named cause.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from harness import Session, start_session, stop_session
from interpreter_lsp import protocol as p

# (name, deterministic?, cells). Compute-heavy cells make the session's time more than a kernel start.
CORPUS: list[tuple[str, bool, list[str]]] = [
    ("numpy compute", True, [
        "import numpy as np\nrng = np.random.default_rng(1)\na = rng.normal(size=(400, 400))",
        "for _ in range(20):\n    a = a @ a.T / np.linalg.norm(a)\nprint(round(float(a.sum()), 6))",
        "print(np.linalg.eigvalsh(a)[-3:])",
    ]),
    ("stdlib loops", True, [
        "total = 0\nfor i in range(3_000_000):\n    total += i * i % 7\nprint(total)",
        "words = [str(i)[::-1] for i in range(200_000)]\nprint(len(set(words)), sorted(words)[:3])",
    ]),
    ("file I/O", True, [
        "with open('bench-in.csv', 'w') as f:\n    f.write('\\n'.join(f'{i},{i*i}' for i in range(50_000)))",
        "rows = [line.split(',') for line in open('bench-in.csv')]\nprint(len(rows), sum(int(r[1]) for r in rows))",
    ]),
    ("reprs and clock", True, [
        "import time, uuid\nclass T: pass\nprint(T(), id(T()), uuid.uuid4())",
        "t0 = time.perf_counter()\nsum(range(2_000_000))\nprint(f'took {time.perf_counter() - t0:.3f} s')",
    ]),
    ("matplotlib", True, [
        "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nimport numpy as np",
        "x = np.linspace(0, 10, 500)\nplt.plot(x, np.sin(x))\nplt.title('sine')\nplt.show()",
    ]),
    ("seeded random", True, [
        "import random\nrandom.seed(3)\nprint([random.randint(0, 99) for _ in range(10)])",
    ]),
    ("unseeded random", False, [
        "import random\nprint(random.random())",
    ]),
]


async def one(s: Session, name: str, cells: list[str]) -> dict[str, Any]:
    await s.command(p.RESET, {})
    idle = lambda: sum(n["state"] == "idle" for n in s.notes[p.KERNEL_STATUS] if n["language"] == "python")  # noqa: E731
    before = idle()
    await s.command(p.RESTART_KERNEL, {"language": "python"})  # answers at once: wait for the kernel to be back
    await s.wait_for(lambda: idle() > before or None, 120, "the python kernel to restart")
    for code in cells:
        run_id, status = await s.run_and_wait(code, timeout=300)
        if status["state"] != "ok":
            raise SystemExit(f"{name}: a session cell failed: {s.text(run_id)[:300]}")
    result = await s.command(p.EXPORT_NOTEBOOK, {"path": "bench.ipynb", "overwrite": True, "verify": True}, 600)
    return result["verification"]


async def main(sessions: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root, home = Path(tmp) / "bench ws", Path(tmp) / "home"
        root.mkdir()
        home.mkdir()
        s = await start_session(root, home)
        rows = []
        try:
            for name, deterministic, cells in CORPUS[:sessions]:
                rows.append((name, deterministic, await one(s, name, cells)))
        finally:
            await stop_session(s)
    print(f"{'session':<18} {'cells':>5} {'same':>4} {'differs (cause)':<28} {'session s':>9} {'verify s':>8} "
          f"{'start s':>7} {'ratio':>6} {'ratio-start':>11}")
    ratios, ratios_net, same, cells_total, det_same, det_cells = [], [], 0, 0, 0, 0
    for name, deterministic, v in rows:
        matched = v["identical"] + v["equivalent"]
        ratio = v["seconds"] / max(v["sessionSeconds"], 1e-3)
        net = (v["seconds"] - v["startSeconds"]) / max(v["sessionSeconds"], 1e-3)
        ratios.append(ratio)
        ratios_net.append(net)
        same, cells_total = same + matched, cells_total + v["cells"]
        if deterministic:
            det_same, det_cells = det_same + matched, det_cells + v["cells"]
        causes = "; ".join(f"{d['cell']}: {d['cause']}" for d in v["differs"])[:28] or "-"
        print(f"{name:<18} {v['cells']:>5} {matched:>4} {causes:<28} {v['sessionSeconds']:>9.2f} "
              f"{v['seconds']:>8.2f} {v['startSeconds']:>7.2f} {ratio:>6.2f} {net:>11.2f}")
    total_session = sum(v["sessionSeconds"] for _n, _d, v in rows)
    total_verify = sum(v["seconds"] for _n, _d, v in rows)
    total_start = sum(v["startSeconds"] for _n, _d, v in rows)
    print(f"\nverification / session compute time: total {total_verify / total_session:.2f}x "
          f"(median per session {statistics.median(ratios):.2f}x; without the fresh kernel's start "
          f"{(total_verify - total_start) / total_session:.2f}x, median {statistics.median(ratios_net):.2f}x); "
          "goal <= 1.2x")
    print(f"identical or equivalent: {same}/{cells_total} cells ({same / cells_total:.0%}); deterministic sessions "
          f"{det_same}/{det_cells} ({det_same / max(det_cells, 1):.0%}, false mismatches "
          f"{det_cells - det_same}); goal >= 99 %")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=len(CORPUS))
    asyncio.run(main(parser.parse_args().sessions))
