"""Verified export (interpreter.exportNotebook with verify, docs/protocol.md "Verified export"): how long the
re-run in a fresh kernel takes against the session's own compute time for the same cells (the baseline,
measured in the same run: the runs' durations), and how many cells come out identical or equivalent, over a
scripted corpus, through a real language server (pytest-lsp client as the editor) and real kernels.

    .venv/bin/python bench/export_verify.py [--sessions N]

The corpus: seven hand-written sessions, then sessions made from templates with varied seeds and sizes
(pandas, scikit-learn, matplotlib, numpy, file I/O read and written, seeded randomness, reprs and the clock,
turns undone by the user: a rebound variable and a rewritten file put back before the session goes on),
106 in all; a few are not deterministic on purpose (an unseeded generator, an input file gone before the
export) and must come out "differs" with their cause named. Between sessions the conversation is reset and
the python kernel restarted (each session starts clean).

The first verification waits for a whole kernel start; each later one takes the fresh kernel the server
started ahead once the one before answered (kernels/spare.py), as a user who verifies again after a fix does.

Goals (issue 20): >= 98 % of the sessions run top to bottom in the fresh kernel; >= 99 % of the cells
identical or equivalent, every difference with a named cause; <= 1 % false mismatches in the deterministic
sessions; verification time <= 1.2 x the session's compute time.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
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


UNDO = "#undo"  # a step of a session: the user undoes the run before it

TEMPLATES: list[tuple[str, bool, list[str]]] = [
    ("pandas groupby", True, [
        "import numpy as np\nimport pandas as pd\nrng = np.random.default_rng({seed})\n"
        "df = pd.DataFrame({{'g': rng.integers(0, 5, {n}), 'v': rng.normal(size={n})}})",
        "print(df.groupby('g')['v'].agg(['mean', 'count']).round(6))",
        "df['w'] = df['v'].cumsum()\nprint(df.describe().round(4))",
    ]),
    ("sklearn linear", True, [
        "from sklearn.datasets import make_classification\nfrom sklearn.linear_model import LogisticRegression\n"
        "X, y = make_classification(n_samples={n}, n_features=8, random_state={seed})",
        "model = LogisticRegression(max_iter=500).fit(X, y)\nprint(round(model.score(X, y), 6), model.coef_.round(4))",
    ]),
    ("sklearn forest", True, [
        "from sklearn.datasets import make_regression\nfrom sklearn.ensemble import RandomForestRegressor\n"
        "X, y = make_regression(n_samples={n}, n_features=5, noise=0.1, random_state={seed})",
        "forest = RandomForestRegressor(n_estimators=10, random_state={seed}).fit(X, y)\n"
        "print(round(forest.score(X, y), 6))",
    ]),
    ("matplotlib seeded", True, [
        "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nimport numpy as np",
        "rng = np.random.default_rng({seed})\nplt.figure(figsize=(3, 2))\nplt.plot(rng.normal(size=50).cumsum())\n"
        "plt.title('walk {seed}')\nplt.show()",
    ]),
    ("file written and read", True, [
        "with open('out-{seed}.txt', 'w') as f:\n    f.write('\\n'.join(str(i * {seed}) for i in range({n})))",
        "import hashlib\nprint(hashlib.sha256(open('out-{seed}.txt', 'rb').read()).hexdigest())",
    ]),
    ("csv input", True, [
        "import pandas as pd\ntable = pd.read_csv('in-{seed}.csv')\nprint(table.shape)",
        "print(table.sum().to_dict())",
    ]),
    ("numpy linalg", True, [
        "import numpy as np\nm = np.random.default_rng({seed}).normal(size=(60, 60))",
        "print(np.round(np.linalg.svd(m, compute_uv=False)[:3], 6))",
    ]),
    ("reprs and clock", True, [
        "import datetime, time, uuid\nclass Box:\n    pass\nprint(Box(), uuid.uuid4(), datetime.datetime.now())",
        "t0 = time.perf_counter()\nsum(range({n}))\nprint(f'took {{time.perf_counter() - t0:.4f}} s')",
    ]),
    ("undone rebinding", True, [
        "a = {seed}\nnames = ['x'] * 3",
        "a = a * 1000  # a mistake, undone\nnames.append('wrong')",
        UNDO,
        "print(a + 1, names)",
    ]),
    ("undone file rewrite", True, [
        "open('kept-{seed}.txt', 'w').write('good {seed}')",
        "open('kept-{seed}.txt', 'w').write('bad')  # undone: the file comes back",
        UNDO,
        "print(open('kept-{seed}.txt').read())",
    ]),
    ("seeded stdlib random", True, [
        "import random\nrandom.seed({seed})\nprint([random.randint(0, 99) for _ in range(8)])",
        "print(random.choice('abcdef'), round(random.gauss(0, 1), 6))",
    ]),
    ("dataclasses and json", True, [
        "import json\nfrom dataclasses import asdict, dataclass\n@dataclass\nclass P:\n    x: int\n    y: list",
        "points = [P(i, [i] * 2) for i in range({seed})]\nprint(json.dumps([asdict(p) for p in points])[:200])",
    ]),
]

# Not deterministic on purpose: each must come out "differs" with this cause (a substring of it).
UNSTABLE: list[tuple[str, str, list[str]]] = [
    ("unseeded random", "seed not set", ["import random\nprint(random.random())"]),
    ("unseeded numpy", "seed not set", ["import numpy as np\nprint(np.random.rand(3))"]),
    ("input file gone", "missing input file", ["print(open('gone.csv').read())", "print('after')"]),
]


def corpus() -> list[tuple[str, bool, list[str], str | None]]:
    """(name, deterministic, cells, the cause expected where not deterministic)."""
    sessions: list[tuple[str, bool, list[str], str | None]] = [
        (n, d, c, None if d else "seed not set") for n, d, c in CORPUS  # the hand-written one: unseeded random
    ]
    for variant in range(8):
        seed, n = 7 + variant * 13, 200 + variant * 150
        for name, deterministic, cells in TEMPLATES:
            made = [c if c == UNDO else c.format(seed=seed, n=n) for c in cells]
            sessions.append((f"{name} #{variant + 1}", deterministic, made, None))
    sessions += [(name, False, cells, cause) for name, cause, cells in UNSTABLE]
    return sessions


async def one(s: Session, name: str, cells: list[str]) -> dict[str, Any]:
    await s.command(p.RESET, {})
    idle = lambda: sum(n["state"] == "idle" for n in s.notes[p.KERNEL_STATUS] if n["language"] == "python")  # noqa: E731
    before = idle()
    await s.command(p.RESTART_KERNEL, {"language": "python"})  # answers at once: wait for the kernel to be back
    await s.wait_for(lambda: idle() > before or None, 120, "the python kernel to restart")
    for code in cells:
        if code == UNDO:
            await s.command(p.UNDO, {})
            continue
        run_id, status = await s.run_and_wait(code, timeout=300)
        if status["state"] != "ok":
            raise SystemExit(f"{name}: a session cell failed: {s.text(run_id)[:300]}")
    if name == "input file gone":
        (s.root / "gone.csv").unlink()  # after the session, before the export: the fresh run misses it
    asked = time.perf_counter()
    result = await s.command(p.EXPORT_NOTEBOOK, {"path": "bench.ipynb", "overwrite": True, "verify": True}, 600)
    # As the user waits: the command's whole round trip (the notebook written twice, the re-run's writes in
    # the workspace put back afterwards), beside the re-run's own `seconds`.
    return {**result["verification"], "commandSeconds": time.perf_counter() - asked}


async def main(sessions: int) -> None:
    chosen = corpus()[:sessions]
    with tempfile.TemporaryDirectory() as tmp:
        root, home = Path(tmp) / "bench ws", Path(tmp) / "home"
        root.mkdir()
        home.mkdir()
        for variant in range(8):  # the csv inputs the sessions read
            seed = 7 + variant * 13
            (root / f"in-{seed}.csv").write_text("a,b\n" + "\n".join(f"{i},{i * seed}" for i in range(100)) + "\n")
        (root / "gone.csv").write_text("x\n1\n")
        s = await start_session(root, home)
        rows = []
        try:
            for name, deterministic, cells, expected in chosen:
                rows.append((name, deterministic, expected, await one(s, name, cells)))
        finally:
            await stop_session(s)
    ratios, ratios_net, same, cells_total, det_same, det_cells, top_to_bottom = [], [], 0, 0, 0, 0, 0
    unnamed, surprises = [], []
    for name, deterministic, expected, v in rows:
        matched = v["identical"] + v["equivalent"]
        ratios.append(v["seconds"] / max(v["sessionSeconds"], 1e-3))
        ratios_net.append((v["seconds"] - v["startSeconds"]) / max(v["sessionSeconds"], 1e-3))
        same, cells_total = same + matched, cells_total + v["cells"]
        top_to_bottom += v["notRun"] == 0
        causes = [d["cause"] for d in v["differs"]]
        unnamed += [f"{name}: {c[:80]}" for c in causes if c.startswith("output")]
        if deterministic:
            det_same, det_cells = det_same + matched, det_cells + v["cells"]
            if matched < v["cells"]:
                surprises.append(f"{name}: {'; '.join(causes) or 'not run'}"[:160])
        elif not any(str(expected) in c for c in causes):
            surprises.append(f"{name}: expected '{expected}', got {causes or 'no difference'}"[:160])
    total_session = sum(v["sessionSeconds"] for *_r, v in rows)
    total_verify = sum(v["seconds"] for *_r, v in rows)
    total_start = sum(v["startSeconds"] for *_r, v in rows)
    n = len(rows)
    print(f"sessions: {n} ({sum(d for _n, d, _e, _v in rows)} deterministic), cells: {cells_total}")
    print(f"ran top to bottom in the fresh kernel: {top_to_bottom}/{n} ({top_to_bottom / n:.1%}); goal >= 98 %")
    print(f"identical or equivalent: {same}/{cells_total} cells ({same / cells_total:.1%}); goal >= 99 %")
    print(f"false mismatches in the deterministic sessions: {det_cells - det_same}/{det_cells} "
          f"({(det_cells - det_same) / max(det_cells, 1):.1%}); goal <= 1 %")
    print(f"differences without a named cause: {len(unnamed)}" + "".join(f"\n  {u}" for u in unnamed))
    print(f"sessions not as expected: {len(surprises)}" + "".join(f"\n  {x}" for x in surprises))
    print(f"verification / session compute time: total {total_verify / total_session:.2f}x "
          f"(median per session {statistics.median(ratios):.2f}x; without the fresh kernel's start "
          f"{(total_verify - total_start) / total_session:.2f}x, median {statistics.median(ratios_net):.2f}x; "
          f"the start {total_start / n:.2f} s per session); goal <= 1.2x")
    waited = [v["commandSeconds"] / max(v["sessionSeconds"], 1e-3) for *_r, v in rows]
    print(f"  as the user waits (the export command's round trip, the re-run's writes put back included): total "
          f"{sum(v['commandSeconds'] for *_r, v in rows) / total_session:.2f}x, median per session "
          f"{statistics.median(waited):.2f}x")
    if n > 1:
        # After a verification the next one's kernel starts ahead (kernels/spare.py): only the first waits for a
        # whole start; the others wait for what of the spare's start was not over yet (reset, restart, runs).
        later = [v["startSeconds"] for *_r, v in rows[1:]]
        print(f"  the fresh kernel's start: first verification {rows[0][3]['startSeconds']:.2f} s; later ones "
              f"(the spare started ahead) median {statistics.median(later):.3f} s, max {max(later):.3f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=len(corpus()))
    asyncio.run(main(parser.parse_args().sessions))
