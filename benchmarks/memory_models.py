"""Static vs peak (liveness) memory on the bundled training graphs; prints Markdown tables.

Part ``own`` (default): each bundled instance at its own devices. For each solver
(``--solvers``, default heuristic, heft, etf) and memory model (static, peak): status,
makespan, the worst device's peak / capacity *under the liveness model* (a static answer
above 1.00 breaks peak memory on a real allocator), the worst static / capacity, and time.

Part ``known`` (``--part known``): capacities at which a placement is *known* to fit under
peak. For each instance and reference solver (static answer at 10x the instance's memory:
heuristic, heft, etf, topo, single), the capacity is set to the reference placement's own
liveness peak; the heuristic under peak must then find a placement, and the table shows
its makespan over the reference's (<= 1.000 means never slower than the known placement).

    python benchmarks/memory_models.py                     # about 1 minute
    python benchmarks/memory_models.py --part known        # about 3 minutes
    python benchmarks/memory_models.py --instances instances/small/*.json --quick
"""

from __future__ import annotations

import argparse
import glob
import time
from pathlib import Path

from _common import table

import optpart
from optpart import Device

ROOT = Path(__file__).resolve().parent.parent


def _instances(paths: list[str] | None) -> list[Path]:
    if paths:
        return [Path(p) for p in paths]
    found = sorted(glob.glob(str(ROOT / "instances" / "*.json*")) + glob.glob(str(ROOT / "instances" / "small" / "*.json")))
    return [Path(p) for p in found]


def _ratio(used, cap) -> str:
    return f"{float((used / cap).max()):.2f}"


def own(files: list[Path], solvers: list[str], effort: float | None) -> None:
    rows = []
    for path in files:
        p = optpart.load(str(path))
        if p.n_devices == 0 or not p.has_split:
            continue
        for solver in solvers:
            for model in ("static", "peak"):
                opts = {"memory_model": model}
                if solver == "heuristic" and effort is not None:
                    opts["effort"] = effort
                t0 = time.perf_counter()
                r = optpart.solve(p, solver, **opts)
                dt = time.perf_counter() - t0
                ok = r.status.has_solution
                rows.append([path.name.split(".")[0], solver, model, r.status.value,
                             f"{r.makespan * 1e3:.2f}" if ok else "-",
                             _ratio(r.memory_peak, p.device_memory) if ok else "-",
                             _ratio(r.memory_static, p.device_memory) if ok else "-", f"{dt:.2f}",
                             "" if ok else r.message[:70]])
    print(table(rows, ["instance", "solver", "model", "status", "makespan ms", "peak/cap", "static/cap", "time s",
                       "why not"]))


def known(files: list[Path], refs: list[str], effort: float | None) -> None:
    rows = []
    for path in files:
        p = optpart.load(str(path))
        if p.n_devices == 0 or not p.has_split:
            continue
        roomy = p.with_memory_scale(10.0)
        for ref_name in refs:
            ref = optpart.solve(roomy, ref_name)
            if not ref.status.has_solution:
                rows.append([path.name.split(".")[0], ref_name, "-", "-", ref.status.value, "-", "-", "-"])
                continue
            cap = float(ref.memory_peak.max())
            q = p.with_devices([Device(d.id, cap, d.speed) for d in p.devices])
            opts = {"memory_model": "peak"} | ({"effort": effort} if effort is not None else {})
            t0 = time.perf_counter()
            r = optpart.solve(q, "heuristic", **opts)
            dt = time.perf_counter() - t0
            ok = r.status.has_solution
            rows.append([path.name.split(".")[0], ref_name, f"{cap / 2**30:.3f}", f"{ref.makespan * 1e3:.2f}",
                         r.status.value, f"{r.makespan * 1e3:.2f}" if ok else "-",
                         f"{r.makespan / ref.makespan:.3f}" if ok else "-", f"{dt:.2f}"])
    print(table(rows, ["instance", "known fit", "capacity GiB", "its makespan ms", "heuristic (peak)",
                       "makespan ms", "ratio", "time s"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["own", "known"], action="append")
    ap.add_argument("--instances", nargs="*")
    ap.add_argument("--solvers", default="heuristic,heft,etf")
    ap.add_argument("--refs", default="heuristic,heft,etf,topo,single")
    ap.add_argument("--quick", action="store_true", help="heuristic at effort 0")
    args = ap.parse_args()
    files = _instances(args.instances)
    effort = 0.0 if args.quick else None
    for part in args.part or ["own"]:
        print(f"\n## {part}\n")
        if part == "own":
            own(files, args.solvers.split(","), effort)
        else:
            known(files, args.refs.split(","), effort)


if __name__ == "__main__":
    main()
