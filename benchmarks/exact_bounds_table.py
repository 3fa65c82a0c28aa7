"""Lower bounds on the bundled real training graphs: the generic bound and the memory-forced path bound.

For each real instance in ``instances/`` and each memory model: the generic bound
(``optpart.lower_bound``: critical path, work over total speed, largest node), the
communication-aware critical path (``exact_bounds.comm_lower_bound``), the critical path
with the transfers memory forces along it (``path_bounds.memory_path_bound``), and the
time each takes. Every bound is a valid lower bound; the exact solvers report the largest.

Example::

    python benchmarks/exact_bounds_table.py
"""

from __future__ import annotations

import time
from pathlib import Path

from _common import table

import optpart
from optpart.solvers.exact_bounds import comm_lower_bound
from optpart.solvers.path_bounds import memory_path_bound

ROOT = Path(__file__).resolve().parent.parent / "instances"
REAL = ("densenet121", "gpt2", "lstm-lm", "resnet50", "vit-b16")


def main() -> None:
    """Print the bound table."""
    rows = []
    for name in REAL:
        p = optpart.load(ROOT / f"{name}-training.json")
        generic = optpart.lower_bound(p)
        comm = comm_lower_bound(p)
        for model in ("static", "peak"):
            t0 = time.perf_counter()
            path = memory_path_bound(p, model)
            wall = time.perf_counter() - t0
            best = max(generic, comm, path)
            rows.append([name, model, f"{generic:.6g}", f"{comm:.6g}", f"{path:.6g}", f"{best:.6g}",
                         f"{100 * (best - generic) / generic:+.2f}%", f"{wall:.2f}"])
    print(table(rows, ["instance", "model", "generic (s)", "comm path (s)", "memory path (s)", "best (s)",
                       "lift", "path bound s"]))


if __name__ == "__main__":
    main()
