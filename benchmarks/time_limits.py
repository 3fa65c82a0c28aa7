"""Does every solver keep its time limit? Wall time of the whole ``optpart.solve`` call.

For each solver that declares ``uses_time_limit`` (plus, for reference, the fast baselines),
each time limit and each graph size, one call of :func:`optpart.solve` (screening, solver,
re-scoring and checking included) is timed. ``over`` is wall time minus the limit: the
project's claim is that it stays under 2 s. The graphs are training graphs
(:func:`optpart.generators.large_training_graph`) with tight memory on 4 devices.

    python benchmarks/time_limits.py                      # limits 1,5 s; sizes 1e3, 1e4
    python benchmarks/time_limits.py --limits 1,10 --sizes 1000,10000,100000 --solvers heuristic,cpsat

Prints a Markdown table; not a test (wall times depend on the machine).
"""

from __future__ import annotations

import argparse
import time

from _common import table

import optpart
from optpart.generators import large_training_graph
from optpart.solvers.registry import solver_spec

CLAIM_S = 2.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--solvers", default="heuristic,cpsat,milp,heft", help="comma-separated solver names")
    ap.add_argument("--limits", default="1,5", help="time limits in seconds, comma-separated")
    ap.add_argument("--sizes", default="1000,10000", help="graph sizes (nodes), comma-separated")
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument("--memory-model", default="peak", choices=("peak", "static"))
    args = ap.parse_args()
    names = [s for s in args.solvers.split(",") if s in optpart.available_solvers()]
    limits = [float(x) for x in args.limits.split(",")]
    sizes = [int(x) for x in args.sizes.split(",")]
    rows = []
    for n in sizes:
        problem = large_training_graph(n, seed=0, k=args.devices)
        for name in names:
            honours = solver_spec(name).uses_time_limit
            for limit in limits:
                t0 = time.perf_counter()
                r = optpart.solve(problem, name, memory_model=args.memory_model, time_limit=limit, seed=0)
                wall = time.perf_counter() - t0
                over = wall - limit
                verdict = "-" if not honours else ("ok" if over <= CLAIM_S else "OVER")
                rows.append([name, "yes" if honours else "no", f"{limit:g}", problem.n_nodes, r.status.value,
                             f"{wall:.2f}", f"{over:+.2f}", verdict])
                print(f"  {name} n={problem.n_nodes} limit={limit:g}: {wall:.2f} s", flush=True)
    print()
    print(table(rows, ["solver", "honours limit", "limit s", "nodes", "status", "wall s", "wall - limit",
                       f"within {CLAIM_S:g} s"]))


if __name__ == "__main__":
    main()
