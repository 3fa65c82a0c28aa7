"""Time and peak memory of the ``heuristic`` solver (and ``heft`` beside it) on large graphs.

Three measurements, each in its own subprocess so the peak RSS is that of one run:

* generated training graphs (:func:`optpart.generators.large_training_graph`, colocated
  weights and updates, 1.5x the graph's memory in total) of ``--sizes`` nodes on
  ``--ks`` devices: solver time alone (``solve`` of the solver module), time through
  ``optpart.solve`` (adds the registry's screening and the final check), peak RSS, and
  the ratio heuristic / heft of the solver times measured in the same run;
* ``--files`` (default: the bundled ``instances/scale/transformer-1e5.json.gz`` and,
  when built with ``python instances/make.py scale``, ``transformer-1m.npz`` and
  ``transformer-1m.json.gz``): the same through the command line end to end
  (``optpart solve FILE -o OUT``: reading, solving, checking, writing), wall and CPU
  seconds and peak RSS of the process.

Run on a shared machine, the figures are indicative (several engineers share 2 cores).

    python benchmarks/heuristic_scale.py                            # 1e4, 1e5; files
    python benchmarks/heuristic_scale.py --sizes 100000 --ks 4 8 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from _common import table


HERE = Path(__file__).resolve().parent

_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {root!r})
import optpart
from optpart.generators import large_training_graph
from optpart.solvers.registry import get_solver
n, k, solver = {n}, {k}, {solver!r}
t0 = time.perf_counter()
p = large_training_graph(n, seed=0, k=k, memory_slack=1.5)
t1 = time.perf_counter()
get_solver(solver)(p)
t2 = time.perf_counter()
r = optpart.solve(p, solver)
t3 = time.perf_counter()
print(json.dumps({{"nodes": p.n_nodes, "edges": p.n_edges, "gen": t1 - t0, "solver": t2 - t1, "solve": t3 - t2,
                  "status": r.status.value, "makespan": r.makespan if r.status.has_solution else None,
                  "gap": r.gap if r.status.has_solution else None,
                  "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def run_one(n: int, k: int, solver: str) -> dict:
    code = _CHILD.format(root=str(HERE.parent), n=n, k=k, solver=solver)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_cli(path: Path, solver: str) -> dict:
    """``optpart solve FILE -s SOLVER -o OUT`` in a subprocess: wall and CPU seconds, peak RSS
    (:func:`e2e_scale.cli`, this child's own figures)."""
    import tempfile

    from e2e_scale import cli

    with tempfile.TemporaryDirectory() as tmp:
        return cli(str(path), solver, None, str(Path(tmp) / "out.json"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--ks", type=int, nargs="+", default=[4, 8])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--files", type=Path, nargs="*", default=None,
                    help="problem files to solve through the CLI (default: the scale instances)")
    args = ap.parse_args()
    rows = []
    for n in args.sizes:
        for k in args.ks:
            res = {s: [run_one(n, k, s) for _ in range(args.repeat)] for s in ("heft", "heuristic")}
            for solver in ("heuristic", "heft"):
                runs = res[solver]
                last = runs[-1]
                gap = f"{100 * last['gap']:.2f}%" if last["gap"] is not None else last["status"]
                ratio = statistics.median(h["solver"] / max(f["solver"], 1e-9)
                                          for h, f in zip(res["heuristic"], res["heft"]))
                rows.append([last["nodes"], last["edges"], k, solver,
                             f"{statistics.median(r['solver'] for r in runs):.2f}",
                             f"{statistics.median(r['solve'] for r in runs):.2f}",
                             f"{ratio:.2f}" if solver == "heuristic" else "-",
                             f"{max(r['rss'] for r in runs):.0f}", gap])
                print(f"  done: n={n} k={k} {solver}", file=sys.stderr)
    print(table(rows, ["nodes", "edges", "k", "solver", "solver s", "optpart.solve s", "heuristic/heft",
                       "peak RSS MiB", "gap to bound"]))
    files = args.files
    if files is None:
        scale = HERE.parent / "instances" / "scale"
        files = [f for f in (scale / "transformer-1e5.json.gz", scale / "transformer-1m.npz",
                             scale / "transformer-1m.json.gz") if f.exists()]
    if files:
        print()
        rows = []
        for f in files:
            r = run_cli(f, "heuristic")
            rows.append([f.name, "heuristic", f"{r['wall']:.1f}", f"{r['cpu']:.1f}", f"{r['rss_mib']:.0f}"])
            print(f"  done: {f.name}", file=sys.stderr)
        print(table(rows, ["file", "solver", "CLI end to end wall s (read, solve, check, write)",
                           "CLI CPU s (user+sys)", "peak RSS MiB"]))


if __name__ == "__main__":
    main()
