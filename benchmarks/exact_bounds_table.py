"""Lower bounds on the bundled real training graphs: the generic bound and each bound the exact solvers add.

For each real instance in ``instances/`` and each memory model, every part of
``optpart.solvers.exact.bounds.bound_parts``: the generic bound (``optpart.lower_bound``:
critical path, work over total speed, largest node), the communication-aware critical path,
the energetic (Fernandez-Bussell) windows on communication-aware heads and tails, the
critical path with the transfers memory forces (per memory model), and the critical path
with its fork-join regions solved by CP-SAT (a deterministic budget of 20 s). Then the best,
its lift over the generic bound, and the seconds all parts took. Every bound is valid for
every placement under the model named; ``cpsat`` reports the best on large graphs.

A second table gives the parts and the seconds they took together on generated training
graphs of 10^4 and 10^5 nodes (``optpart.generators.large_training_graph``): the region
bound is capped by its work limits.

Example::

    python benchmarks/exact_bounds_table.py
    python benchmarks/exact_bounds_table.py --no-scale
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from _common import table

import optpart
from optpart.generators import large_training_graph
from optpart.solvers.exact.bounds import bound_parts

ROOT = Path(__file__).resolve().parent.parent / "instances"
REAL = ("densenet121", "gpt2", "lstm-lm", "resnet50", "vit-b16")
PARTS = ("generic", "comm_path", "energetic", "memory_path", "regions")


def _timed_parts(problem: optpart.Problem, model: str) -> tuple[dict, float]:
    t0 = time.perf_counter()
    parts = bound_parts(problem, model)
    return parts, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> None:
    """Print the bound tables."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-scale", action="store_true", help="skip the 10^4 / 10^5-node timing table")
    args = ap.parse_args(argv)
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    rows = []
    for name in REAL:
        p = optpart.load(ROOT / f"{name}-training.json")
        for model in ("static", "peak"):
            parts, seconds = _timed_parts(p, model)
            best = max(parts.values())
            gen = parts["generic"]
            rows.append([name, model, *(f"{parts[k]:.6g}" for k in PARTS), f"{best:.6g}",
                         f"{100 * (best - gen) / gen:+.2f}%", f"{seconds:.1f}"])
    print(table(rows, ["instance", "model", "generic (s)", "comm path (s)", "energetic (s)", "memory path (s)",
                       "regions (s)", "best (s)", "lift", "all parts s"]))
    if args.no_scale:
        return
    print()
    rows = []
    for n in (10_000, 100_000):
        p = large_training_graph(n, k=4)
        parts, seconds = _timed_parts(p, "peak")
        best = max(parts.values())
        rows.append([f"{p.n_nodes:,}", *(f"{parts[k]:.6g}" for k in PARTS), f"{best:.6g}",
                     f"{100 * (best - parts['generic']) / parts['generic']:+.2f}%", f"{seconds:.1f}"])
    print(table(rows, ["nodes", *(f"{k} (s)" for k in PARTS), "best (s)", "lift", "all parts s"]))
    print(f"load average at end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
