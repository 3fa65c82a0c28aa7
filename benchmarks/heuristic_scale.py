"""Time and peak memory of the ``heuristic`` solver on large DNN-like training graphs.

Graphs: :func:`optpart.generators.large_training_graph` (a stacked transformer-like
training step, colocated weights and updates) of 10^4, 10^5 and 10^6 nodes on k = 4, 8
and 16 devices holding 1.5x the graph's memory in total. Each run is a separate
subprocess, so the peak RSS is that of one solve (graph generation included; the
generation time is reported apart). Baselines heft/etf/topo, when installed, run at
10^4 and 10^5 nodes for comparison. Figures are medians over ``--repeat`` runs.

Targets (2 cores): 10^5 nodes under 2 s, 10^6 nodes under 20 s and 4 GB.

    python benchmarks/heuristic_scale.py                       # 1e4, 1e5, 1e6
    python benchmarks/heuristic_scale.py --sizes 10000 100000 --ks 4 8 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from _common import table

import optpart

HERE = Path(__file__).resolve().parent

_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {root!r})
import optpart
from optpart.generators import large_training_graph
n, k, solver = {n}, {k}, {solver!r}
t0 = time.perf_counter()
p = large_training_graph(n, seed=0, k=k, memory_slack=1.5)
t1 = time.perf_counter()
r = optpart.solve(p, solver)
t2 = time.perf_counter()
print(json.dumps({{"nodes": p.n_nodes, "edges": p.n_edges, "gen": t1 - t0, "solve": t2 - t1,
                  "status": r.status.value, "makespan": r.makespan if r.status.has_solution else None,
                  "gap": r.gap if r.status.has_solution else None,
                  "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def run_one(n: int, k: int, solver: str) -> dict:
    code = _CHILD.format(root=str(HERE.parent), n=n, k=k, solver=solver)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--ks", type=int, nargs="+", default=[4, 8, 16])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--baseline-max", type=int, default=100_000, help="largest size the baselines run on")
    args = ap.parse_args()
    baselines = [s for s in ("heft", "etf", "topo") if s in optpart.available_solvers()]
    rows = []
    for n in args.sizes:
        for k in args.ks:
            for solver in ["heuristic"] + (baselines if n <= args.baseline_max else []):
                runs = [run_one(n, k, solver) for _ in range(args.repeat)]
                last = runs[-1]
                gap = f"{100 * last['gap']:.2f}%" if last["gap"] is not None else last["status"]
                rows.append([last["nodes"], last["edges"], k, solver,
                             f"{statistics.median(r['solve'] for r in runs):.2f}",
                             f"{statistics.median(r['gen'] for r in runs):.2f}",
                             f"{max(r['rss'] for r in runs):.0f}", gap])
                print(f"  done: n={n} k={k} {solver}", file=sys.stderr)
    print(table(rows, ["nodes", "edges", "k", "solver", "solve s (median)", "generate s", "peak RSS MiB",
                       "gap to bound"]))


if __name__ == "__main__":
    main()
