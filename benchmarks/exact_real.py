"""The exact solvers on the bundled real training graphs: what ``cpsat`` buys over the heuristic.

For each real instance in ``instances/`` (traced training steps, 1,245-4,303 operators, the
devices and links their files declare, the peak memory model by default), one row per
solver and time limit: the makespan, the proven lower bound, the gap ``(makespan - bound)
/ makespan``, the status, why the run stopped, and wall time. Every result is checked by
the evaluator (``optpart.check``) and an ``optimal`` is counted in the last column only when
the makespan meets the bound. For ``cpsat`` on the windowed path a column says which schedule
it started from and how many unit moves and windows improved it (of those solved). Under the
table: the mean proven gap of each solver and time limit over the instances run, and the machine's load average at the start and
the end. ``--instances gpt2xl`` adds the compressed GPT-2 XL step (4,845 operators).

The machine is shared: rerun before comparing two versions; wall times are for scale only.

Examples::

    python benchmarks/exact_real.py                      # heuristic, cpsat at 30 and 120 s
    python benchmarks/exact_real.py --limits 30 --instances gpt2 lstm-lm
    python benchmarks/exact_real.py --memory-model static --solvers heuristic cpsat milp
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from _common import table

import optpart

ROOT = Path(__file__).resolve().parent.parent / "instances"
REAL = ("densenet121", "gpt2", "lstm-lm", "resnet50", "vit-b16")


def one(problem: optpart.Problem, solver: str, limit: float | None, memory_model: str) -> list:
    """One table row for ``solver`` on ``problem`` (``limit``: None for the heuristic's default)."""
    t0 = time.perf_counter()
    r = optpart.solve(problem, solver, time_limit=limit, seed=0, memory_model=memory_model)
    wall = time.perf_counter() - t0
    optpart.check(problem, r)
    claim = r.status is optpart.Status.OPTIMAL
    assert not claim or r.makespan <= r.lower_bound * (1 + 1e-6) + 1e-12, "an optimal claim above its bound"
    print(f"  {problem.name} {solver} {limit}: {r.status.value} {r.makespan:.6g} bound {r.lower_bound:.6g} "
          f"{wall:.1f}s {r.stats.get('stop_reason', '')}", file=sys.stderr, flush=True)
    st = r.stats
    how = "-" if "start_from" not in st else (
        f"{st['start_from']}; units {st.get('unit_improvements', 0)}/{st.get('unit_solves', 0)}; "
        f"windows {st.get('window_improvements', 0)}/{st.get('window_solves', 0)}")
    return [problem.name, solver if limit is None else f"{solver} {limit:g} s", f"{r.makespan:.6g}",
            f"{r.lower_bound:.6g}", f"{100 * r.gap:.2f}%", r.status.value, st.get("stop_reason", "-"), how,
            f"{wall:.0f}"]


def main(argv: list[str] | None = None) -> None:
    """Print the real-graph table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instances", nargs="+", default=list(REAL), help="names in instances/ (without -training.json)")
    ap.add_argument("--solvers", nargs="+", default=["heuristic", "cpsat"])
    ap.add_argument("--limits", nargs="+", type=float, default=[30.0, 120.0],
                    help="time limits of the exact solvers (s)")
    ap.add_argument("--memory-model", default="peak", choices=("static", "peak"))
    args = ap.parse_args(argv)
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    rows = []
    gaps: dict = {}
    for name in args.instances:
        path = ROOT / f"{name}-training.json"
        p = optpart.load(path if path.exists() else path.with_name(path.name + ".gz"))
        for solver in args.solvers:
            limits = [None] if solver in ("heuristic", "heft", "etf", "topo", "single", "metis") else args.limits
            for limit in limits:
                row = one(p, solver, limit, args.memory_model)
                rows.append(row)
                gaps.setdefault(row[1], []).append(float(row[4].rstrip("%")))
    print(table(rows, ["instance", "solver", "makespan (s)", "bound (s)", "gap", "status", "stop reason",
                       "start; improving / solved sub-solves", "wall s"]))
    print()
    print(table([[k, f"{statistics.mean(v):.1f}%", len(v)] for k, v in gaps.items()],
                ["solver", "mean proven gap", "instances"]))
    print(f"load average at end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
