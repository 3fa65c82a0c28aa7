"""Quality of the ``heuristic`` solver against known optima and bounds; prints Markdown tables.

Parts (``--part``, repeatable; all by default):

* ``cpsat``: >= 200 random layered DAGs of 10-20 nodes, k = 2-4, communication-to-
  computation ratio 0.1-5, loose (2x) and tight (1.1x) memory, against CP-SAT optima
  (only instances CP-SAT proves optimal count). Mean, p95 and max gap; HEFT beside it.
  Optima are cached in ``--cache`` (a JSON file) so reruns are quick.
* ``stg``: the STG 50-task graphs with proven optima (p = 2, 4, 8, 16), free links;
  mean gap and share of optima hit, HEFT and ETF beside it.
* ``planted``: planted-optimum DAGs (:func:`optpart.generators.planted_dag`), N in
  {200, 2,000, 20,000} (``--sizes``), K in {2, 4, 8}, ccr in {0.1, 1, 5}, capacities
  1.05x and 1.5x the planted loads, seeds 0 and 1 (108 problems): per N, the heuristic
  against heft (better/equal/worse), mean gap to the optimum of heuristic, pardnn (the
  seed method), heft and etf, optimum hits, and the median time ratio heuristic/heft.
* ``dnn``: the dnn-partitioning graphs (their own devices and links): makespan and gap
  to the lower bound for the heuristic and the list-scheduling baselines.

    python benchmarks/heuristic_quality.py                    # everything (about 15-25 minutes)
    python benchmarks/heuristic_quality.py --part stg --quick # a few minutes
    python benchmarks/heuristic_quality.py --part planted     # the planted grid (several minutes)
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
from _common import table

import optpart
from optpart.generators import layered_dag, planted_dag

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"


def _gap(value: float, best: float) -> float:
    return (value - best) / best if best > 0 else 0.0


def _stats(gaps: list[float]) -> tuple[str, str, str]:
    if not gaps:
        return "-", "-", "-"
    a = np.asarray(gaps) * 100
    return f"{a.mean():.2f}%", f"{np.percentile(a, 95):.2f}%", f"{a.max():.2f}%"


def _baselines(names: list[str]) -> list[str]:
    avail = optpart.available_solvers()
    return [s for s in names if s in avail]


def part_cpsat(quick: bool, cache_path: Path) -> None:
    print("## Heuristic vs CP-SAT optima (10-20 nodes)\n")
    if "cpsat" not in optpart.available_solvers():
        print("cpsat solver not installed (optpart/solvers/cpsat.py missing): part skipped\n")
        return
    cache = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    count = 60 if quick else 240
    rng = np.random.default_rng(2024)
    rows_by: dict[tuple, list[float]] = {}
    all_gaps, heft_gaps, hit, skipped = [], [], 0, 0
    base = _baselines(["heft"])
    t_h = []
    for i in range(count):
        n = int(rng.integers(10, 21))
        k = int(rng.integers(2, 5))
        ccr = float(rng.choice([0.1, 0.5, 1.0, 2.0, 5.0]))
        tight = bool(i % 2)
        p = layered_dag(n, ccr=ccr, k=k, memory_slack=1.1 if tight else 2.0, seed=1000 + i)
        key = f"{p.name}-k{k}-{'tight' if tight else 'loose'}"
        if key not in cache:
            r = optpart.solve(p, "cpsat", time_limit=60)
            cache[key] = [r.status.value, r.makespan if r.status.has_solution else None]
            cache_path.write_text(json.dumps(cache))
        status, opt = cache[key]
        if status != "optimal":
            skipped += 1
            continue
        t0 = time.perf_counter()
        h = optpart.solve(p, "heuristic")
        t_h.append(time.perf_counter() - t0)
        optpart.check(p, h)
        if not h.status.has_solution:
            skipped += 1
            continue
        g = _gap(h.makespan, opt)
        all_gaps.append(g)
        hit += g <= 1e-6
        rows_by.setdefault((k, "tight" if tight else "loose", ccr >= 2), []).append(g)
        if base:
            hb = optpart.solve(p, "heft")
            if hb.status.has_solution:
                heft_gaps.append(_gap(hb.makespan, opt))
    rows = []
    for key in sorted(rows_by):
        k, mem, hi = key
        rows.append([k, mem, "2-5" if hi else "0.1-1", len(rows_by[key]), *_stats(rows_by[key])])
    print(table(rows, ["k", "memory", "ccr", "instances", "mean gap", "p95 gap", "max gap"]))
    print()
    summary = [["heuristic", len(all_gaps), *_stats(all_gaps), f"{100 * hit / max(1, len(all_gaps)):.0f}%",
                f"{statistics.median(t_h) * 1000:.0f} ms" if t_h else "-"]]
    if heft_gaps:
        summary.append(["heft", len(heft_gaps), *_stats(heft_gaps), "-", "-"])
    print(table(summary, ["solver", "instances", "mean gap", "p95 gap", "max gap", "optimum hit", "median time"]))
    print(f"\n({skipped} instances without a proven optimum or a heuristic answer were skipped)\n")


def part_stg(quick: bool) -> None:
    print("## STG 50-task graphs with proven optima (free links)\n")
    root = DATA / "stg"
    if not root.exists():
        print(f"STG data not found at {root}: part skipped\n")
        return
    solvers = ["heuristic"] + _baselines(["heft", "etf"])
    rows = []
    for p_dev in (2, 4, 8, 16):
        csv = root / "optima" / f"Case50_{p_dev}_OPT.csv"
        lines = csv.read_text().splitlines()
        if quick:
            lines = lines[:40]
        gaps = {s: [] for s in solvers}
        times = []
        for line in lines:
            f = line.strip().split(",")
            if len(f) != 3:
                continue  # a fourth field marks an unproven optimum
            opt = float(f[2])
            prob = optpart.load(root / f[0]).with_devices(p_dev)
            for s in solvers:
                t0 = time.perf_counter()
                r = optpart.solve(prob, s)
                if s == "heuristic":
                    times.append(time.perf_counter() - t0)
                optpart.check(prob, r)
                gaps[s].append(_gap(r.makespan, opt))
        for s in solvers:
            a = np.asarray(gaps[s])
            rows.append([p_dev, s, a.size, f"{100 * a.mean():.3f}%", f"{100 * a.max():.2f}%",
                         f"{100 * np.mean(a <= 1e-9):.0f}%",
                         f"{statistics.median(times) * 1000:.0f} ms" if s == "heuristic" else "-"])
    print(table(rows, ["p", "solver", "instances", "mean gap", "max gap", "optimum hit", "median time"]))
    print()


_ALL = ("heuristic", "pardnn", "heft", "etf")


def planted_grid(sizes: list[int], seeds: list[int], ks=(2, 4, 8)):
    """The planted benchmark: every (N, K, ccr, capacity, seed); capacity is 1.05x or 1.5x the planted loads."""
    for n in sizes:
        for k in ks:
            for ccr in (0.1, 1.0, 5.0):
                for cap in (1.05, 1.5):
                    for seed in seeds:
                        p = planted_dag(n, k, ccr=ccr, seed=seed)
                        if cap != 1.05:
                            p = p.with_memory_scale(cap / 1.05)  # keeps meta (the planted optimum)
                        yield n, k, ccr, cap, seed, p


def part_planted(quick: bool, sizes: list[int] | None = None, ks=(2, 4, 8), solvers=None) -> None:
    """Per N: the heuristic against heft (better/equal/worse), mean gap to the planted optimum
    of heuristic, pardnn (the seed method), heft and etf, and the median time ratio heuristic/heft."""
    print("## Planted-optimum random DAGs (optimum known exactly)\n")
    solvers = list(dict.fromkeys(["heuristic", "heft", *(solvers or ["pardnn", "etf"])]))
    sizes = sizes or ([200, 2000] if quick else [200, 2000, 20000])
    seeds = [0] if quick else [0, 1]
    by_n: dict[int, dict] = {}
    for n, k, ccr, cap, seed, p in planted_grid(sizes, seeds, ks):
        opt = p.meta["optimum"]
        row = by_n.setdefault(n, {"gap": {s: [] for s in solvers}, "time": {s: [] for s in solvers}, "cmp": [],
                                  "hit": {s: 0 for s in solvers}})
        ms = {}
        for s in solvers:
            t0 = time.perf_counter()
            r = optpart.solve(p, s)
            row["time"][s].append(time.perf_counter() - t0)
            optpart.check(p, r)
            ms[s] = r.makespan if r.status.has_solution else float("inf")
            row["gap"][s].append(_gap(ms[s], opt))
            row["hit"][s] += ms[s] <= opt * (1 + 1e-9)
        tol = 1e-9 * ms["heft"]
        h, f = ms["heuristic"], ms["heft"]
        row["cmp"].append(-1 if h < f - tol else (1 if h > f + tol else 0))
    rows = []
    for n in sorted(by_n):
        row = by_n[n]
        c = row["cmp"]
        ratio = statistics.median(h / max(f, 1e-9) for h, f in zip(row["time"]["heuristic"], row["time"]["heft"]))
        rows.append([n, len(c), f"{c.count(-1)}/{c.count(0)}/{c.count(1)}",
                     *(f"{100 * np.mean(row['gap'][s]):.2f}%" if s in solvers else "-" for s in _ALL),
                     " ".join(f"{row['hit'][s]}" if s in solvers else "-" for s in _ALL),
                     f"{ratio:.2f}", f"{statistics.median(row['time']['heuristic']):.2f} s"])
    print(table(rows, ["N", "problems", "heuristic vs heft better/equal/worse", "gap heuristic", "gap pardnn",
                       "gap heft", "gap etf", "optimum hit h/p/heft/etf", "median time ratio heuristic/heft",
                       "median heuristic time"]))
    print()


def part_dnn(quick: bool) -> None:
    print("## dnn-partitioning graphs (their own devices and links)\n")
    root = DATA / "dnn-partitioning"
    if not root.exists():
        print(f"dnn-partitioning data not found at {root}: part skipped\n")
        return
    solvers = ["heuristic"] + _baselines(["heft", "etf", "topo"])
    rows = []
    for f in sorted(root.glob("*.json")):
        p = optpart.load(f)
        for s in solvers:
            t0 = time.perf_counter()
            r = optpart.solve(p, s)
            dt = time.perf_counter() - t0
            optpart.check(p, r)
            if r.status.has_solution:
                rows.append([f.stem, p.n_nodes, p.n_devices, s, f"{r.makespan:.6g}", f"{100 * r.gap:.2f}%",
                             f"{dt:.2f} s"])
            else:
                rows.append([f.stem, p.n_nodes, p.n_devices, s, r.status.value, "-", f"{dt:.2f} s"])
    print(table(rows, ["graph", "nodes", "k", "solver", "makespan (s)", "gap to bound", "time"]))
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", action="append", choices=["cpsat", "stg", "planted", "dnn"])
    ap.add_argument("--quick", action="store_true", help="fewer instances")
    ap.add_argument("--sizes", type=int, nargs="+", help="planted part: node counts (default 200 2000 20000)")
    ap.add_argument("--ks", type=int, nargs="+", default=[2, 4, 8], help="planted part: device counts")
    ap.add_argument("--solvers", nargs="+", choices=["heuristic", "pardnn", "heft", "etf"],
                    help="planted part: solvers (heuristic and heft are needed for the comparison)")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/optpart-heuristic-cpsat-optima.json"),
                    help="JSON file caching the CP-SAT optima")
    args = ap.parse_args()
    parts = args.part or ["cpsat", "stg", "planted", "dnn"]
    for part in parts:
        if part == "cpsat":
            part_cpsat(args.quick, args.cache)
        elif part == "stg":
            part_stg(args.quick)
        elif part == "planted":
            part_planted(args.quick, args.sizes, tuple(args.ks), args.solvers)
        else:
            part_dnn(args.quick)


if __name__ == "__main__":
    main()
