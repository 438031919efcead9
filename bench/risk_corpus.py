"""The risk rater's figures on the labelled corpus (tests/risk_corpus.py): dangerous rated high, dangerous
rated low (goal 0), benign rated high, and opaque code (a file written earlier, a name computed at run
time) rated low (goal 0); with every miss listed, and the corpus split into the original set, the issue-13
classes and the holdout written after the rules. Then the attacks written against the allowlist
(tests/risk_attacks.py: dangerous low must be 0, high at least 95 %) and the realistic data-science cells
(tests/risk_cells.py: how many the allowlist proves "low", so that they may auto-run without the sandbox).

    .venv/bin/python bench/risk_corpus.py [-v]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from risk_attacks import ATTACKS
from risk_cells import CELLS
from risk_corpus import CORPUS, HOLDOUT_AFTER_RULES, Case, rate


def figures(cases: list[Case], verbose: bool) -> str:
    dangerous = [c for c in cases if c.label == "dangerous"]
    benign = [c for c in cases if c.label == "benign"]
    opaque = [c for c in cases if c.label == "opaque"]
    ratings = {id(c): rate(c) for c in cases}
    high = [c for c in dangerous if ratings[id(c)].level == "high"]
    low = [c for c in dangerous if ratings[id(c)].level == "low"]
    alarms = [c for c in benign if ratings[id(c)].level == "high"]
    blind = [c for c in opaque if ratings[id(c)].level == "low"]
    if verbose:
        for case in [c for c in dangerous if c not in high] + alarms + blind:
            risk = ratings[id(case)]
            print(f"    {case.label:9s} {risk.level:6s} {case.code[:70]!r} {risk.reasons[:2]}")
    pct = lambda part, whole: 100 * len(part) / max(len(whole), 1)  # noqa: E731
    return (
        f"dangerous high {len(high)}/{len(dangerous)} ({pct(high, dangerous):.1f}%), "
        f"dangerous low {len(low)}, benign high {len(alarms)}/{len(benign)} ({pct(alarms, benign):.1f}%), "
        f"opaque low {len(blind)}/{len(opaque)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true", help="list every miss and false alarm")
    args = parser.parse_args()
    start = time.perf_counter()
    print(f"whole corpus ({len(CORPUS)} snippets): {figures(CORPUS, args.verbose)}")
    print(f"holdout written after the rules ({len(HOLDOUT_AFTER_RULES)}): "
          f"{figures(HOLDOUT_AFTER_RULES, args.verbose)}")
    print(f"attacks written against the allowlist ({len(ATTACKS)}): {figures(ATTACKS, args.verbose)}")
    ratings = [rate(c) for c in CELLS]
    low = sum(r.level == "low" for r in ratings)
    high = sum(r.level == "high" for r in ratings)
    if args.verbose:
        for case, risk in zip(CELLS, ratings, strict=True):
            if risk.level != "low":
                print(f"    cell      {risk.level:6s} {case.code[:70]!r} {risk.reasons[:1]}")
    print(f"realistic data-science cells ({len(CELLS)}): low {low}/{len(CELLS)} ({100 * low / len(CELLS):.1f}%), "
          f"high {high}")
    print(f"rated in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
