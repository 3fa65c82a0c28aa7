"""The heuristic on the benchmark set: gaps to the planted optimum, baselines, time against heft.

One command prints every table of benchmarks/RESULTS.md's heuristic section:

1. **planted** (:func:`optpart.generators.planted_dag`: shuffled ids and edge order, no device
   chains, equal capacities, the optimum known): one row per size, over ``--rules`` x K
   (``--ks``) x CCR (``--ccrs``) x ``--seeds`` (``--big-seeds`` from 10^5 nodes), under
   ``--model`` (static by default). Columns: the heuristic's mean / median / max gap to the
   optimum, each baseline's mean gap, on how many graphs the heuristic is worse than the best
   baseline run on it, and the median over graphs of the time ratio heuristic / heft (each the
   fastest of ``--repeat`` alternating runs of :func:`optpart.solve`, screening and check
   included);
2. ``--generators``: the project's other generators (layered, fork-join, training steps) at
   the same sizes, gaps to the proven lower bound (:func:`optpart.evaluate.problem_lower_bound`);
3. ``--real``: the bundled training graphs (``instances/*.json``, their own devices) under
   both memory models, makespans;
4. ``--million FILE``: a 10^6-node ``.npz`` (``python instances/make.py scale`` writes
   ``instances/scale/transformer-1m.npz``) through the command line, heft then the
   heuristic: wall and CPU seconds, peak memory, makespan, gap to the lower bound.

``--jsonl FILE`` appends one record per solve (the heuristic's ``stats`` included).

    nice -n 10 python benchmarks/heuristic_table.py --sizes 200 2000 20000 100000 --seeds 11 12 --big-seeds 11
    nice -n 10 python benchmarks/heuristic_table.py --sizes 200 2000 --generators --real --no-planted
    nice -n 10 python benchmarks/heuristic_table.py --sizes --million instances/scale/transformer-1m.npz
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import table

import optpart
from optpart.evaluate import problem_lower_bound
from optpart.generators import planted_dag
from optpart.generators.planted import EDGE_RULES

ROOT = Path(__file__).resolve().parent.parent
BASELINES = ["heft", "etf", "topo", "metis", "pardnn", "single"]


def solve(problem, solver: str, model: str, repeat: int = 1, **options) -> tuple[float, float, dict]:
    """``(makespan, fastest seconds, stats)`` of ``optpart.solve``; inf without a placement."""
    times, r = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = optpart.solve(problem, solver, memory_model=model, **options)
        times.append(time.perf_counter() - t0)
    ms = float(r.makespan) if r.status.has_solution else float("inf")
    return ms, min(times), dict(r.stats)


def run_graph(p, ref: float, model: str, baselines: list[str], repeat: int, out, where: dict) -> dict:
    """Every solver on ``p``; heft and the heuristic timed ``repeat`` times, alternating."""
    res = {s: solve(p, s, model) for s in ["heft", "heuristic", *[b for b in baselines if b != "heft"]]}
    for _ in range(repeat - 1):
        for s in ("heft", "heuristic"):
            ms, t, st = solve(p, s, model)
            res[s] = (res[s][0], min(res[s][1], t), res[s][2])
    rec = {**where, "nodes": p.n_nodes, "edges": p.n_edges, "ref": ref, "model": model,
           "makespan": {s: v[0] for s, v in res.items()}, "seconds": {s: v[1] for s, v in res.items()},
           "stats": res["heuristic"][2]}
    if out is not None:
        out.write(json.dumps(rec, default=str) + "\n")
        out.flush()
    h, best = res["heuristic"][0], min(v[0] for s, v in res.items() if s != "heuristic")
    print(f"  {where}: gap {h / ref - 1:.3%}, best baseline {best / ref - 1:.3%}, "
          f"time / heft {res['heuristic'][1] / max(res['heft'][1], 1e-9):.2f}x", file=sys.stderr)
    return rec


def summarise(recs: list[dict], label: str, baselines: list[str]) -> list:
    """One table row over ``recs``."""
    gap = lambda r, s: r["makespan"][s] / r["ref"] - 1.0  # noqa: E731
    hg = [gap(r, "heuristic") for r in recs]
    worse = sum(r["makespan"]["heuristic"] > min(v for s, v in r["makespan"].items() if s != "heuristic") * (1 + 1e-9)
                for r in recs)
    ratio = [r["seconds"]["heuristic"] / max(r["seconds"]["heft"], 1e-9) for r in recs]

    def pct(xs):
        finite = [x for x in xs if np.isfinite(x)]
        none = len(xs) - len(finite)
        return (f"{100 * float(np.mean(finite)):.2f}%" if finite else "-") + (f" ({none} none)" if none else "")
    return [label, len(recs), pct(hg), f"{100 * statistics.median(hg):.2f}%", f"{100 * max(hg):.2f}%",
            *(pct([gap(r, b) for r in recs]) for b in baselines), f"{worse} of {len(recs)}",
            f"{statistics.median(ratio):.2f}x", f"{statistics.median(r['seconds']['heuristic'] for r in recs):.3g} s"]


def planted_rows(args, out) -> list:
    rows = []
    for n in args.sizes:
        recs = []
        for rule in args.rules:
            for k in args.ks:
                for ccr in args.ccrs:
                    for seed in (args.big_seeds if n >= 100_000 else args.seeds):
                        p = planted_dag(n, k, ccr=ccr, edges=rule, memory_model=args.model, seed=seed)
                        where = {"set": "planted", "n": n, "rule": rule, "k": k, "ccr": ccr, "seed": seed}
                        recs.append(run_graph(p, float(p.meta["optimum"]), args.model, args.baselines,
                                              args.repeat, out, where))
        rows.append(summarise(recs, f"{n:,}", args.baselines))
    return rows


def generated(kind: str, n: int, k: int, ccr: float, seed: int):
    """One graph of the other generators, about ``n`` nodes, memory slack 1.1."""
    from optpart import generators as gen

    if kind == "layered_dag":
        return gen.layered_dag(n, ccr=ccr, k=k, memory_slack=1.1, seed=seed)
    if kind == "fork_join_dag":
        return gen.fork_join_dag(n, ccr=ccr, k=k, memory_slack=1.1, seed=seed)
    if kind == "training_graph":
        return gen.training_graph(max(1, n // 10), width=2, ccr=ccr, k=k, memory_slack=1.1, seed=seed)
    return gen.large_training_graph(n, seed=seed, k=k, memory_slack=1.1, ccr=ccr)


def generator_rows(args, out) -> list:
    rows = []
    for n in args.sizes:
        for kind in ("layered_dag", "fork_join_dag", "training_graph", "large_training_graph"):
            recs = []
            for k in args.ks:
                for ccr in (min(args.ccrs), max(args.ccrs)):
                    p = generated(kind, n, k, ccr, args.seeds[0])
                    where = {"set": kind, "n": n, "k": k, "ccr": ccr, "seed": args.seeds[0]}
                    recs.append(run_graph(p, float(problem_lower_bound(p)), args.model, args.baselines, 1, out,
                                          where))
            rows.append(summarise(recs, f"{kind} {n:,}", args.baselines))
    return rows


def real_rows(args, out) -> list:
    rows = []
    files = sorted((ROOT / "instances").glob("*.json")) + sorted((ROOT / "instances").glob("*.json.gz"))
    for f in files:
        p = optpart.load(f)
        for model in ("static", "peak"):
            where = {"set": "real", "file": f.name, "model": model}
            rec = run_graph(p, float(problem_lower_bound(p)), model, args.baselines, 1, out, where)
            ms = rec["makespan"]
            best = min(v for s, v in ms.items() if s != "heuristic")
            rows.append([f.name.split("-training")[0], model, f"{ms['heuristic']:.6g}",
                         *(f"{ms[b]:.6g}" if np.isfinite(ms[b]) else "none" for b in args.baselines),
                         "yes" if ms["heuristic"] > best * (1 + 1e-9) else "no",
                         f"{rec['seconds']['heuristic'] / max(rec['seconds']['heft'], 1e-9):.1f}x"])
    return rows


def million_rows(path: str) -> list:
    from e2e_scale import cli

    p = optpart.load(path)
    lb = float(problem_lower_bound(p))
    del p
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for solver in ("heft", "heuristic"):
            out = Path(tmp) / f"{solver}.json"
            r = cli(path, solver, None, str(out), [])
            doc = json.loads(out.read_text())
            ms = doc.get("makespan")
            rows.append([Path(path).name, solver, f"{r['wall']:.1f}", f"{r['cpu']:.1f}", f"{r['rss_mib']:.0f}",
                         f"{ms:.6g}" if ms is not None else "-", f"{100 * (ms / lb - 1):.2f}%" if ms else "-",
                         doc.get("stats", {}).get("construction", "-")])
            print(f"  1e6 {solver}: {r['wall']:.1f} s", file=sys.stderr)
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[200, 2000, 20_000, 100_000])
    ap.add_argument("--rules", nargs="+", default=list(EDGE_RULES), choices=EDGE_RULES)
    ap.add_argument("--ks", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--ccrs", type=float, nargs="+", default=[0.1, 1.0, 5.0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[11, 12])
    ap.add_argument("--big-seeds", type=int, nargs="+", default=[11])
    ap.add_argument("--model", default="static", choices=["static", "peak"])
    ap.add_argument("--baselines", nargs="+", default=BASELINES)
    ap.add_argument("--repeat", type=int, default=2, help="alternating runs of heft and the heuristic, fastest kept")
    ap.add_argument("--no-planted", dest="planted", action="store_false")
    ap.add_argument("--generators", action="store_true")
    ap.add_argument("--real", action="store_true")
    ap.add_argument("--million", metavar="FILE", help="a 10^6-node .npz through the CLI")
    ap.add_argument("--jsonl", help="append one JSON record per graph to this file")
    args = ap.parse_args(argv)
    out = open(args.jsonl, "a") if args.jsonl else None
    million = million_rows(args.million) if args.million else []   # first, while this process is small
    head = ["N", "graphs", "heuristic mean gap", "median", "max", *(f"{b} gap" for b in args.baselines),
            "heuristic worse than best baseline", "median time heuristic / heft", "median heuristic time"]
    if args.planted and args.sizes:
        print(f"planted_dag, rules {', '.join(args.rules)}, K {args.ks}, CCR {args.ccrs}, model {args.model}\n")
        print(table(planted_rows(args, out), head))
    if args.generators:
        print()
        print(table(generator_rows(args, out), ["generator " + head[0], *head[1:]]))
    if args.real:
        print()
        print(table(real_rows(args, out), ["instance", "model", "heuristic", *args.baselines,
                                           "worse than best baseline", "time / heft"]))
    if million:
        print()
        print(table(million, ["file", "solver", "CLI wall s", "CLI CPU s", "peak RSS MiB", "makespan",
                              "gap to bound", "construction"]))


if __name__ == "__main__":
    main()
