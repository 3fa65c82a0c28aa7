"""How large a problem do the exact solvers prove optimal, and how fast?

Part 1 (default): random layered DAGs (``optpart.generators.layered_dag``) of 10-60 nodes
on 4 identical devices, CCR 1, memory ``--slack`` times the fair share; for each size and
solver, the share proven optimal within ``--time-limit`` and the median time to proof
(over proven runs). Target for cpsat: >= 90% of 30-node graphs within 10 s.

Part 2 (``--stg``): the STG 50-task instances with proven optima (``Case50_{p}_OPT.csv``,
rows with a 4th field are unproven and skipped) for p = 2, 4, 8, 16 with cpsat: the share
proven within the time limit, median time, and the number of results *below* a proven
optimum (must be 0). Target: >= 95% proven within 60 s.

Examples::

    python benchmarks/exact_frontier.py --per-size 10 --time-limit 60
    python benchmarks/exact_frontier.py --sizes 30 --per-size 20 --time-limit 10 --solvers cpsat
    python benchmarks/exact_frontier.py --stg --time-limit 60 --stg-limit 30 --procs 2 4 8 16
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from _common import table

import optpart
from optpart.formats.stg import read_stg
from optpart.generators import layered_dag

STG = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "stg"


def _median(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f}" if xs else "-"


def frontier(sizes: list[int], per_size: int, time_limit: float, solvers: list[str], slack: float) -> str:
    rows = []
    for n in sizes:
        for name in solvers:
            proven, times, gaps = 0, [], []
            for seed in range(per_size):
                problem = layered_dag(n, k=4, ccr=1.0, memory_slack=slack, seed=seed)
                t0 = time.perf_counter()
                r = optpart.solve(problem, name, time_limit=time_limit, seed=0)
                wall = time.perf_counter() - t0
                if r.ok:
                    optpart.check(problem, r)
                    gaps.append(r.gap)
                if r.status is optpart.Status.OPTIMAL:
                    proven += 1
                    times.append(wall)
            rows.append([n, name, per_size, f"{100 * proven / per_size:.0f}%", _median(times),
                         f"{100 * statistics.median(gaps):.2f}%" if gaps else "-"])
            print(f"  n={n} {name}: {proven}/{per_size} proven", file=sys.stderr, flush=True)
    return table(rows, ["nodes", "solver", "runs", "proven", "median s to proof", "median gap"])


def _optima(p: int) -> list[tuple[str, int]]:
    out = []
    for line in (STG / "optima" / f"Case50_{p}_OPT.csv").read_text().splitlines():
        fields = line.strip().split(",")
        if len(fields) == 3:  # a 4th field marks an unproven value
            out.append((fields[0], int(fields[2])))
    return out


def stg(procs: list[int], time_limit: float, limit: int | None, solver: str) -> str:
    if not STG.exists():
        return f"STG data not found at {STG}"
    rows = []
    for p in procs:
        cases = _optima(p)[:limit] if limit else _optima(p)
        proven, below, wrong_claim, times = 0, 0, 0, []
        for rel, opt in cases:
            problem = read_stg(STG / rel).with_devices(p)
            t0 = time.perf_counter()
            r = optpart.solve(problem, solver, time_limit=time_limit, seed=0)
            wall = time.perf_counter() - t0
            if r.ok:
                optpart.check(problem, r)
                below += r.makespan < opt - 1e-9
            if r.status is optpart.Status.OPTIMAL:
                proven += 1
                times.append(wall)
                wrong_claim += abs(r.makespan - opt) > 1e-9
            print(f"  p={p} {rel}: {r.status.value} {r.makespan:g} (opt {opt}) {wall:.1f}s",
                  file=sys.stderr, flush=True)
        rows.append([p, solver, len(cases), f"{100 * proven / max(len(cases), 1):.1f}%", _median(times),
                     below, wrong_claim])
    return table(rows, ["p", "solver", "instances", "proven", "median s to proof", "below optimum",
                        "optimal != published"])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 20, 30, 40, 50, 60])
    ap.add_argument("--per-size", type=int, default=10)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--solvers", nargs="+", default=["cpsat", "milp"])
    ap.add_argument("--slack", type=float, default=1.5, help="device memory over the fair share")
    ap.add_argument("--stg", action="store_true", help="run the STG 50-task instances instead")
    ap.add_argument("--procs", type=int, nargs="+", default=[2, 4, 8, 16])
    ap.add_argument("--stg-limit", type=int, default=None, help="first N instances per p")
    ap.add_argument("--stg-solver", default="cpsat")
    args = ap.parse_args(argv)
    if args.stg:
        print(f"STG 50-task instances, {args.stg_solver}, time limit {args.time_limit:g} s\n")
        print(stg(args.procs, args.time_limit, args.stg_limit, args.stg_solver))
    else:
        print(f"layered DAGs, 4 devices, CCR 1, memory slack {args.slack:g}, "
              f"time limit {args.time_limit:g} s, {args.per_size} graphs per size\n")
        print(frontier(args.sizes, args.per_size, args.time_limit, args.solvers, args.slack))


if __name__ == "__main__":
    main()
