"""Measure the heuristic's gap to the CP-SAT optimum on the problems of the property test.

``tests/api/test_properties.py::test_heuristic_within_measured_gap_of_optimum`` asserts that the
heuristic stays within ``(1 + g)`` of the optimum on ``problems(max_nodes=9, max_devices=3,
memory=("loose", "just_enough"))``; this script draws that very distribution (the test's
strategy, with a fixed hypothesis seed) and prints the gaps that ``g`` must cover::

    nice -n 10 python benchmarks/property_gap.py --examples 300

Only problems that CP-SAT proves optimal (deterministic time 20 s) count.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, seed, settings

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import optpart  # noqa: E402
from strategies import problems  # noqa: E402


def measure(examples: int, hypothesis_seed: int) -> list[float]:
    """Gaps ``heuristic / optimum - 1`` on ``examples`` drawn problems that CP-SAT proves optimal.

    Parameters
    ----------
    examples : int
        How many problems to draw.
    hypothesis_seed : int
        The seed of the draws.

    Returns
    -------
    list of float
        One gap per problem with a proven optimum above 0.
    """
    gaps: list[float] = []

    @seed(hypothesis_seed)
    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(problem=problems(max_nodes=9, max_devices=3, memory=("loose", "just_enough")))
    def run(problem):
        opt = optpart.solve(problem, "cpsat", seed=0, deterministic=True, deterministic_time=20.0, time_limit=600)
        if opt.status is not optpart.Status.OPTIMAL or opt.makespan <= 0:
            return
        h = optpart.solve(problem, "heuristic", seed=0)
        if h.ok:
            gaps.append(h.makespan / opt.makespan - 1.0)

    run()
    return gaps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    gaps = np.asarray(measure(args.examples, args.seed))
    print(f"| problems with a proven optimum | mean gap | p95 | max |\n|---|---|---|---|\n"
          f"| {gaps.size} | {gaps.mean():.2%} | {np.percentile(gaps, 95):.2%} | {gaps.max():.2%} |")


if __name__ == "__main__":
    main()
