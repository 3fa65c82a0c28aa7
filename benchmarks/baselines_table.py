"""Every installed solver side by side: makespan, gap to the lower bound, memory use, time.

Problems: the dnn-partitioning graphs of ``../shared/data/dnn-partitioning`` (skipped with
a message when absent; they carry their own devices and links) and the bundled
``instances/**/*.json*`` (small ones only by default; a graph without devices gets 4
devices holding 1.3x its memory in total). Exact solvers run only on graphs of at most
``--exact-max-nodes`` nodes. A second table times heft, etf, topo and metis on a
``random_dag(n, k=8)`` of ``--scale`` nodes (median of ``--repeat`` runs).

    python benchmarks/baselines_table.py                 # defaults: 10 s per solver, 1e5-node scale run
    python benchmarks/baselines_table.py --time-limit 30 --all --scale 0
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from _common import random_dag, table, timed

import optpart
from optpart.solvers.registry import SOLVERS

ROOT = Path(__file__).resolve().parent.parent
DNN = ROOT.parent / "shared" / "data" / "dnn-partitioning"


def problems(include_large: bool, max_nodes: int) -> list[optpart.Problem]:
    out = []
    if DNN.exists():
        for f in sorted(DNN.glob("*.json")):
            p = optpart.load(f)
            if include_large or p.n_nodes <= max_nodes:
                out.append(p)
    else:
        print(f"(dnn-partitioning graphs not found at {DNN}: skipped)\n")
    for f in sorted(ROOT.glob("instances/**/*.json*")):
        p = optpart.load(f)
        if not p.has_devices:
            p = p.with_devices(4, memory=1.3 * float(p.memory.sum()) / 4)
        if include_large or p.n_nodes <= max_nodes:
            out.append(p)
    return out


def quality(args) -> str:
    rows = []
    for p in problems(args.all, args.max_nodes):
        for name in optpart.available_solvers():
            if SOLVERS[name].exact and p.n_nodes > args.exact_max_nodes:
                continue
            t0 = time.perf_counter()
            r = optpart.solve(p, name, time_limit=args.time_limit, seed=0)
            wall = time.perf_counter() - t0
            if r.ok:
                optpart.check(p, r)
                use = r.memory_static / p.device_memory
                mem = f"{100 * use.max():.0f}% (dev {p.device_ids[int(use.argmax())]})"
                rows.append([p.name, p.n_nodes, p.n_devices, name, r.status.value, f"{r.makespan:.6g}",
                             f"{r.lower_bound:.6g}", f"{100 * r.gap:.1f}%", mem, f"{wall:.2f}"])
            else:
                rows.append([p.name, p.n_nodes, p.n_devices, name, r.status.value, "-", f"{r.lower_bound:.6g}",
                             "-", r.message[:60], f"{wall:.2f}"])
    return table(rows, ["problem", "nodes", "k", "solver", "status", "makespan", "bound", "gap",
                        "max memory used / capacity", "wall s"])


def scale(args) -> str:
    p = random_dag(args.scale, k=8)
    rows = []
    for name in ("heft", "etf", "topo", "metis", "single", "pardnn", "heuristic"):
        if name not in optpart.available_solvers():
            continue
        times, r = [], None
        for _ in range(args.repeat):
            p._lower_bound_cache = None
            t, r = timed(lambda: optpart.solve(p, name, seed=0))
            times.append(t)
        rows.append([name, p.n_nodes, p.n_edges, r.status.value, f"{r.makespan:.4g}", f"{100 * r.gap:.1f}%",
                     f"{statistics.median(times):.2f}"])
    return table(rows, ["solver", "nodes", "edges", "status", "makespan", "gap", "median wall s (solve + check)"])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=10.0, help="seconds per solver and problem")
    ap.add_argument("--max-nodes", type=int, default=1000, help="skip larger problems unless --all")
    ap.add_argument("--all", action="store_true", help="include every problem, however large")
    ap.add_argument("--exact-max-nodes", type=int, default=60, help="exact solvers only up to this size")
    ap.add_argument("--scale", type=int, default=100_000, help="nodes of the scale run (0: skip it)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per solver in the scale run (median)")
    args = ap.parse_args(argv)
    print(f"## Quality (time limit {args.time_limit:g} s per solver)\n")
    print(quality(args))
    if args.scale > 0:
        print(f"\n## Scale: random_dag({args.scale}, k=8)\n")
        print(scale(args))


if __name__ == "__main__":
    sys.exit(main())
