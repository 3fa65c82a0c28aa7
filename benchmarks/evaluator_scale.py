"""Evaluator speed and memory on large graphs.

Builds a random DAG with ~2 edges per node (numpy), places it on 8 devices in
contiguous blocks, and times: building the Problem (validation, CSR, topological
order), the canonical schedule, and the full evaluate() (schedule + memory +
bounds). Each size runs in its own process so peak memory is per size.

    python benchmarks/evaluator_scale.py            # 1e5 and 1e6 nodes
    python benchmarks/evaluator_scale.py 100000     # chosen sizes
"""

from __future__ import annotations

import json
import subprocess
import sys

from _common import peak_rss_mib, random_dag, table, timed


def measure(n: int) -> dict:
    import numpy as np
    import optpart

    t_build, p = timed(lambda: random_dag(n, edges_per_node=2, k=8))
    placement = (np.arange(n) * 8) // n
    t_sched, _ = timed(lambda: optpart.canonical_schedule(p, placement))
    optpart.bounds.forget(p)
    t_eval, r = timed(lambda: optpart.evaluate(p, placement))
    t_check, _ = timed(lambda: optpart.violations(p, r))
    return {"nodes": n, "edges": p.n_edges, "build_s": t_build, "schedule_s": t_sched, "evaluate_s": t_eval,
            "check_s": t_check, "peak_mib": peak_rss_mib()}


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--one":
        print(json.dumps(measure(int(sys.argv[2]))))
        return
    sizes = [int(a) for a in sys.argv[1:]] or [100_000, 1_000_000]
    rows = []
    for n in sizes:
        out = subprocess.run([sys.executable, __file__, "--one", str(n)], capture_output=True, text=True, check=True)
        m = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append([f"{m['nodes']:,}", f"{m['edges']:,}", f"{m['build_s']:.2f}", f"{m['schedule_s']:.2f}",
                     f"{m['evaluate_s']:.2f}", f"{m['check_s']:.2f}", f"{m['peak_mib']:.0f}"])
    print(table(rows, ["nodes", "edges", "build s", "canonical schedule s", "evaluate s", "check s", "peak RSS MiB"]))
    print("\nevaluate = canonical schedule + static and peak memory + lower bounds (target: 1e6 nodes, 2e6 edges < 10 s)")


if __name__ == "__main__":
    main()
