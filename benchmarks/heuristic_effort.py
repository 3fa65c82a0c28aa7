"""Does the default effort spend its time where it pays? The heuristic at effort 1 and 4 on
every bundled real instance (``instances/*.json*``, their own devices), under each memory
model asked for (default: ``peak``, the default of the CLI and ``optpart.solve``, then
``static``), one Markdown table: makespans, the excess of the default over effort 4
(target <= 1%) and both solve times (through ``optpart.solve``).

    nice -n 10 python benchmarks/heuristic_effort.py
    nice -n 10 python benchmarks/heuristic_effort.py --models peak --efforts 1 8 --files instances/gpt2-training.json
    nice -n 10 python benchmarks/heuristic_effort.py --stage   # and the stage placement alone

``--stage`` adds the pipeline-stage placement alone (:func:`optpart.solvers.heuristic.stage_seed.stage_seed`
at its own cap, as ``cpsat``'s windows start from it; the heuristic offers it within its budget) and
its excess over the default.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from _common import table

import optpart

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = sorted(p for p in (ROOT / "instances").glob("*.json*"))
    ap.add_argument("--files", type=Path, nargs="+", default=default)
    ap.add_argument("--efforts", type=float, nargs=2, default=[1.0, 4.0], metavar=("DEFAULT", "HIGH"))
    ap.add_argument("--models", nargs="+", default=["peak", "static"], choices=["peak", "static"])
    ap.add_argument("--stage", action="store_true", help="also the stage placement alone")
    args = ap.parse_args(argv)
    lo, hi = args.efforts
    rows = []
    for model in args.models:
        for f in args.files:
            p = optpart.load(f)
            out = []
            for effort in (lo, hi):
                t0 = time.perf_counter()
                r = optpart.solve(p, "heuristic", effort=effort, memory_model=model)
                out.append((r.makespan if r.status.has_solution else float("inf"), time.perf_counter() - t0,
                            r.status.value))
            (m1, t1, s1), (m4, t4, s4) = out
            excess = f"{100 * (m1 / m4 - 1):.2f}%" if m4 < float("inf") else "-"
            rows.append([model, f.name, p.n_nodes, p.n_devices, f"{m1:.6g} ({s1})", f"{m4:.6g} ({s4})", excess,
                         f"{t1:.1f}", f"{t4:.1f}"])
            if args.stage:
                from optpart.solvers.heuristic.stage_seed import stage_seed
                t0 = time.perf_counter()
                got = stage_seed(p, model)
                ms = float((got[1] + p.duration(got[0])).max()) if got is not None else float("inf")
                rows[-1] += [f"{ms:.6g}", f"{100 * (ms / m1 - 1):.2f}%" if ms < float("inf") else "-",
                             f"{time.perf_counter() - t0:.1f}"]
            print(f"  done: {model} {f.name}", file=sys.stderr)
    print(table(rows, ["model", "instance", "nodes", "devices", f"makespan effort {lo:g}",
                       f"makespan effort {hi:g}", f"effort {lo:g} over effort {hi:g}", f"s at {lo:g}",
                       f"s at {hi:g}"] + (["stage placement alone", "its excess over the default", "s (stage)"]
                                          if args.stage else [])))


if __name__ == "__main__":
    main()
