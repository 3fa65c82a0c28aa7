"""Cost of the sweep machinery itself (optpart.bench), apart from the solvers.

Measures, with the ``single`` solver on 200-node graphs (so the solver takes well under
a millisecond):

* sweep throughput per executor (inline, a pool of 1 and 2 worker processes): wall time
  for N runs including process start, pickling, one SQLite commit per run;
* a resume that finds every run done (plan + hash + skip);
* ``summarize`` over a database of 20,000 rows, and loading those rows;
* ``memory_timeline`` on a 100,000-node schedule.

Figures are medians over ``--repeat`` runs (default 3).

    python benchmarks/sweep_overhead.py            # N = 200 runs
    python benchmarks/sweep_overhead.py 400 --repeat 5
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from _common import random_dag, table

import optpart  # noqa: E402
from optpart.bench import db as bdb  # noqa: E402
from optpart.bench import plan_sweep, run_sweep, summarize  # noqa: E402
from optpart.evaluate import memory_timeline  # noqa: E402
from optpart.generators import layered_dag  # noqa: E402


def median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="?", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="optpart-bench-"))
    files = []
    for seed in range(4):
        files.append(work / f"g{seed}.json")
        optpart.save(layered_dag(200, seed=seed), files[-1])
    scales = [1.0 + 0.5 * i for i in range(max(1, args.runs // 8))]
    specs = plan_sweep(files, ["single"], devices=[1, 2], memory_scales=scales)
    n = len(specs)
    rows = []
    counter = iter(range(10**6))
    for label, kwargs in [("inline", {"executor": "inline"}), ("local --jobs 1", {"jobs": 1}),
                          ("local --jobs 2", {"jobs": 2})]:
        def fresh_sweep():
            run_sweep(specs, work / f"r{next(counter)}.sqlite", **kwargs)
        t = median_time(fresh_sweep, args.repeat)
        rows.append([f"sweep, {label}", n, f"{t:.3f}", f"{1e3 * t / n:.2f}", f"{n / t:.0f}"])
    done_db = work / "done.sqlite"
    run_sweep(specs, done_db, executor="inline")
    t = median_time(lambda: run_sweep(plan_sweep(files, ["single"], devices=[1, 2], memory_scales=scales),
                                      done_db, executor="inline"), args.repeat)
    rows.append(["resume, all done (plan + hash + skip)", n, f"{t:.3f}", f"{1e3 * t / n:.2f}", f"{n / t:.0f}"])
    # A large database, written directly.
    big = work / "big.sqlite"
    con = bdb.connect(big)
    rng = np.random.default_rng(0)
    m = 20_000
    with con:
        for i in range(m):
            mk = float(rng.uniform(1, 2))
            con.execute("INSERT INTO runs (problem_hash, problem, solver, options, devices, memory_scale, status, "
                        "makespan, lower_bound, gap, wall_seconds, version, timestamp) "
                        "VALUES (?, ?, ?, '{}', ?, 1.0, 'feasible', ?, 1.0, ?, 0.1, 'x', 't')",
                        (f"h{i // 5}", f"p{i // 5}", f"s{i % 5}", 2 + i % 3, mk, (mk - 1) / mk))
    con.close()
    t_load = median_time(lambda: bdb.load_runs(big), args.repeat)
    loaded = bdb.load_runs(big)
    t_sum = median_time(lambda: summarize(loaded), args.repeat)
    rows.append(["load_runs, 20k rows", m, f"{t_load:.3f}", f"{1e3 * t_load / m:.4f}", f"{m / t_load:.0f}"])
    rows.append(["summarize, 20k rows", m, f"{t_sum:.3f}", f"{1e3 * t_sum / m:.4f}", f"{m / t_sum:.0f}"])
    # memory timeline on a large schedule (with the liveness split).
    p = random_dag(100_000, k=8)
    p = optpart.Problem.from_arrays(p.node_ids, p.time, None, p.edge_src, p.edge_dst, p.edge_bytes,
                                    param_bytes=p.memory * 0.5, output_bytes=p.memory * 0.4,
                                    temp_bytes=p.memory * 0.1, devices=list(p.devices), links=p.links)
    placement = (np.arange(p.n_nodes) * 8) // p.n_nodes
    start, finish = optpart.canonical_schedule(p, placement)
    t_mt = median_time(lambda: memory_timeline(p, placement, start, finish), args.repeat)
    rows.append(["memory_timeline, 1e5 nodes, 8 devices", p.n_nodes, f"{t_mt:.3f}", "-", "-"])
    print(table(rows, ["what", "items", "median s", "ms per item", "items per s"]))


if __name__ == "__main__":
    main()
