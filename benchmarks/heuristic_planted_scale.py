"""The heuristic against the planted optimum and every baseline, 200 to 10^6 nodes: issue 23's table.

One command prints both tables (issue 23):

1. one row per size N: planted-optimum DAGs (:func:`optpart.generators.planted_dag`: the optimum
   is the planted makespan, proven by the work bound), both of its shapes (``chains=True``:
   every node also reads its planted predecessor, no slack anywhere; ``chains=False`` with a
   narrow window: wide joins whose producers must be gathered), K in {2, 4, 8}, CCR in
   {0.1, 1, 5}, ``--seeds`` seeds (``--big-seeds`` from 10^5 nodes on). Every problem is solved
   through :func:`optpart.solve` (screening and the final check included) by ``heuristic``
   (default effort) and the baselines ``heft``, ``etf``, ``topo``, ``metis``, ``pardnn`` (the
   last three up to ``--all-baselines-upto`` nodes). Columns: graphs; the heuristic's mean,
   median and max gap to the optimum; every baseline's mean gap; on how many graphs the
   heuristic is worse than the best baseline run on it (0 is the promise); the median ratio of
   solve times heuristic / heft over all graphs and per shape (medians of per-graph ratios
   within this run; each time the fastest of ``--repeat`` runs, heft and heuristic alternating,
   so that a burst of load on a shared machine does not land on one solver; wall time: from
   2*10^5 nodes + edges the heuristic builds m-ETF's schedule in a second process beside HEFT's,
   ``--workers 1`` keeps it to one);
2. ``10^6`` nodes end to end through the command line, both shapes (K=4, CCR 1, seed 0): the
   graph written to ``.npz`` (a temp file, by a process of its own) and ``optpart solve FILE -o
   OUT`` run in a fresh process (read, solve, check, write): wall seconds, CPU seconds of all its
   processes, peak memory (the kernel's peak RSS, ``os.wait4`` as ``/usr/bin/time -v``; for the
   heuristic, which forks a second process, also the sum of both processes' PSS sampled every
   0.25 s in a second run, which counts every page once: ``e2e_scale.cli``; the timed run is
   not sampled, since reading a process's PSS slows it), and the gap to the planted optimum.
   These run first, while this process is small (a child's peak RSS counts its parent's at the
   exec).

``--generators``: a second table on graphs nobody tuned on and with no planted optimum, the
project's other generators (:func:`optpart.generators.layered_dag`, ``fork_join_dag``,
``training_graph``, ``large_training_graph``) at the same sizes, K 2/4/8, CCR 0.1/1/5 (``training_graph``:
its own CCR), memory slack 1.1 (tight) and ``--seeds``; gaps are to the proven lower bound
(:func:`optpart.evaluate.problem_lower_bound`), so they overstate the distance to the optimum.

Run under ``nice -n 10``; a shared machine makes wall times noisy: compare the ratios, and say
the load. The defaults are the whole table (about an hour on a busy 2-core machine)::

    nice -n 10 python benchmarks/heuristic_planted_scale.py --seeds 3 4 --big-seeds 1
    nice -n 10 python benchmarks/heuristic_planted_scale.py --sizes 200 2000 --no-million
    nice -n 10 python benchmarks/heuristic_planted_scale.py --sizes --million-only   # the 1e6 CLI runs
    nice -n 10 python benchmarks/heuristic_planted_scale.py --sizes 200 2000 --seeds 5 6 7 --generators --no-million
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import table

import optpart
from optpart.generators import planted_dag

_BASELINES = ["heft", "etf", "topo", "metis", "pardnn"]
_SHAPES = {"chains": {"chains": True}, "joins": {"chains": False, "window": 8}}


_WORKERS = [2]  # the heuristic's workers option (--workers)


def _solve(problem, solver: str, repeat: int = 1) -> tuple[float, float]:
    """(makespan, seconds) of ``optpart.solve``, the fastest of ``repeat`` runs (the same answer
    each time); inf when the solver finds no placement."""
    times = []
    options = {"workers": _WORKERS[0]} if solver == "heuristic" else {}
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = optpart.solve(problem, solver, **options)
        times.append(time.perf_counter() - t0)
    return (float(r.makespan) if r.status.has_solution else float("inf")), min(times)


def _behind_best(res: dict, where: str) -> int:
    """1 (said on stderr) when the heuristic's makespan in ``res`` is above the best baseline's, else 0."""
    h = res["heuristic"][0]
    best = min(v[0] for s, v in res.items() if s != "heuristic")
    if h > best * (1 + 1e-9):
        print(f"  worse: {where}: heuristic {h:.6g}, best baseline {best:.6g}", file=sys.stderr)
        return 1
    return 0


def _row(n: int, seeds: list[int], ks, ccrs, all_baselines: bool, repeat: int) -> list:
    extra = ["topo", "metis", "pardnn"] if all_baselines else []
    gaps: dict[str, list[float]] = {s: [] for s in ["heuristic", "heft", "etf", *extra]}
    worse, graphs = 0, 0
    t_ratio: dict[str, list[float]] = {shape: [] for shape in _SHAPES}
    for shape, kw in _SHAPES.items():
        for k in ks:
            for ccr in ccrs:
                for seed in seeds:
                    p = planted_dag(n, k, ccr=ccr, seed=seed, **kw)
                    opt = float(p.meta["optimum"])
                    timed = ("heuristic", "heft")  # the ratio's two: the fastest of `repeat`, alternating
                    res = {s: _solve(p, s) for s in ["heft", "heuristic", "etf", *extra]}
                    for _ in range(repeat - 1):
                        for s in timed:
                            res[s] = (res[s][0], min(res[s][1], _solve(p, s)[1]))
                    graphs += 1
                    for s in gaps:
                        gaps[s].append(res[s][0] / opt - 1.0)
                    h = res["heuristic"][0]
                    worse += _behind_best(res, f"n={n} {shape} k={k} ccr={ccr} seed={seed}")
                    t_ratio[shape].append(res["heuristic"][1] / max(res["heft"][1], 1e-9))
                    print(f"  done: n={n} {shape} k={k} ccr={ccr} seed={seed}: gap {h / opt - 1:.4%}, "
                          f"time / heft {t_ratio[shape][-1]:.2f}x", file=sys.stderr)
    pct = lambda xs: f"{100 * float(np.mean(xs)):.2f}%"  # noqa: E731
    hg = gaps["heuristic"]
    every = [x for xs in t_ratio.values() for x in xs]
    return [f"{n:,}", graphs, pct(hg), f"{100 * statistics.median(hg):.2f}%", f"{100 * max(hg):.2f}%",
            *(pct(gaps[s]) if s in gaps else "-" for s in _BASELINES),
            f"{worse} of {graphs}", f"{statistics.median(every):.2f}x",
            *(f"{statistics.median(t_ratio[shape]):.2f}x" for shape in _SHAPES)]


_MAKE = """
import sys
sys.path.insert(0, {root!r})
from optpart.formats.npz import write_npz
from optpart.generators import planted_dag
p = planted_dag(1_000_000, {k}, ccr=1.0, seed=0, **{kw!r})
write_npz(p, {path!r})
print(repr(float(p.meta["optimum"])))
"""


def _generated(kind: str, n: int, k: int, ccr: float, seed: int):
    """One graph of the project's other generators, about ``n`` nodes, memory slack 1.1."""
    from optpart import generators as gen

    if kind == "layered_dag":
        return gen.layered_dag(n, ccr=ccr, k=k, memory_slack=1.1, seed=seed)
    if kind == "fork_join_dag":
        return gen.fork_join_dag(n, ccr=ccr, k=k, memory_slack=1.1, seed=seed)
    if kind == "training_graph":   # 2 + 4 width + ... nodes per layer
        return gen.training_graph(max(1, n // 10), width=2, ccr=ccr, k=k, memory_slack=1.1, seed=seed)
    return gen.large_training_graph(n, seed=seed, k=k, memory_slack=1.1, ccr=ccr)


_GENERATORS = ["layered_dag", "fork_join_dag", "training_graph", "large_training_graph"]


def _generator_row(kind: str, n: int, seeds: list[int], ks, ccrs) -> list:
    from optpart.evaluate import problem_lower_bound

    solvers = ["heuristic", *_BASELINES]
    gaps: dict[str, list[float]] = {s: [] for s in solvers}
    worse, t_ratio, graphs, nodes = 0, [], 0, []
    for k in ks:
        for ccr in ccrs:
            for seed in seeds:
                p = _generated(kind, n, k, ccr, seed)
                lb = float(problem_lower_bound(p))
                res = {s: _solve(p, s) for s in solvers}
                graphs += 1
                nodes.append(p.n_nodes)
                for s in solvers:
                    gaps[s].append(res[s][0] / lb - 1.0 if lb > 0 else 0.0)
                worse += _behind_best(res, f"{kind} n={p.n_nodes} k={k} ccr={ccr} seed={seed}")
                t_ratio.append(res["heuristic"][1] / max(res["heft"][1], 1e-9))
                print(f"  done: {kind} n={p.n_nodes} k={k} ccr={ccr} seed={seed}", file=sys.stderr)

    def pct(xs):
        finite = [x for x in xs if np.isfinite(x)]
        missing = len(xs) - len(finite)
        return f"{100 * float(np.mean(finite)):.2f}%" + (f" ({missing} none)" if missing else "") if finite else "-"
    return [kind, f"{int(np.median(nodes))}", graphs, *(pct(gaps[s]) for s in solvers),
            f"{worse} of {graphs}", f"{statistics.median(t_ratio):.2f}x"]


def _million(k: int = 4) -> list:
    """Each shape's 10^6-node planted graph written to .npz and solved through the CLI by heft
    and the heuristic (wall s, CPU s, RSS MiB, gap).

    The graph is built in a process of its own and the CLI runs are started from this one while
    it is still small: the kernel's peak RSS of a child counts its parent's at the moment the
    child execs (vfork), so a child started by a process holding a 10^6-node problem reported
    the parent's 1.4-1.8 GiB.
    """
    import json
    import subprocess

    from e2e_scale import cli

    root = str(Path(__file__).resolve().parent.parent)
    rows = []
    for shape, kw in _SHAPES.items():
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"planted-1m-{shape}.npz"
            made = subprocess.run([sys.executable, "-c", _MAKE.format(root=root, k=k, kw=kw, path=str(path))],
                                  capture_output=True, text=True, check=True)
            optimum = float(made.stdout.strip().splitlines()[-1])
            for solver in ("heft", "heuristic"):
                out = Path(tmp) / f"out-{solver}.json"
                options = [f"workers={_WORKERS[0]}"] if solver == "heuristic" else []
                r = cli(str(path), solver, None, str(out), options)  # timed: nothing samples it
                if solver == "heuristic":  # its processes' memory, summed, in a run of its own
                    m = cli(str(path), solver, None, str(out), options, sample_memory=True)
                    r["rss_mib"], r["processes"] = max(r["rss_mib"], m["rss_mib"]), m["processes"]
                doc = json.loads(out.read_text())
                gap = f"{100 * (doc['makespan'] / optimum - 1):.2f}%" if doc.get("makespan") is not None else "-"
                rows.append([shape, "1,000,000", k, solver, f"{r['wall']:.1f}", f"{r['cpu']:.1f}",
                             f"{r['rss_mib']:.0f}", r["processes"], gap, doc.get("stats", {}).get("construction", "-")])
                print(f"  done: 1e6 {shape} {solver}: {r['wall']:.1f} s, {r['rss_mib']:.0f} MiB", file=sys.stderr)
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[200, 2000, 20_000, 100_000])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--big-seeds", type=int, nargs="+", default=[0],
                    help="seeds at N >= 10^5 (each graph costs tens of seconds)")
    ap.add_argument("--ks", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--ccrs", type=float, nargs="+", default=[0.1, 1.0, 5.0])
    ap.add_argument("--all-baselines-upto", type=int, default=10 ** 6,
                    help="sizes up to which topo, metis and pardnn are run as well")
    ap.add_argument("--generators", action="store_true",
                    help="also the other generators' graphs (gaps to the proven lower bound)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of heuristic and heft per graph, alternating; the fastest of each is timed")
    ap.add_argument("--no-million", dest="million", action="store_false",
                    help="skip the 10^6-node CLI runs")
    ap.add_argument("--million-only", action="store_true", help="only the 10^6-node CLI runs")
    ap.add_argument("--workers", type=int, default=2,
                    help="the heuristic's workers option (default 2; 1: one process at every size)")
    args = ap.parse_args(argv)
    _WORKERS[0] = args.workers
    sizes = [] if args.million_only else args.sizes
    # the 10^6-node CLI runs first, while this process is small (see _million)
    million = _million() if args.million or args.million_only else []
    rows = [_row(n, args.big_seeds if n >= 100_000 else args.seeds, args.ks, args.ccrs,
                 n <= args.all_baselines_upto, max(1, args.repeat)) for n in sizes]
    if rows:
        print(table(rows, ["N", "graphs", "heuristic mean gap", "median", "max",
                           *(f"{b} gap" for b in _BASELINES), "heuristic worse than best baseline",
                           "median time heuristic / heft", *(f"{s} only" for s in _SHAPES)]))
    if args.generators:
        grows = [_generator_row(kind, n, args.seeds, args.ks, args.ccrs) for n in args.sizes for kind in _GENERATORS]
        print()
        print(table(grows, ["generator", "median nodes", "graphs", "heuristic gap to bound",
                            *(f"{b} gap" for b in _BASELINES), "heuristic worse than best baseline",
                            "median time heuristic / heft"]))
    if million:
        print()
        print(table(million, ["shape", "nodes", "k", "solver", "CLI wall s (read, solve, check, write)",
                              "CLI CPU s (all processes)", "peak memory MiB (RSS; summed PSS of 2)", "processes",
                              "gap to optimum", "construction"]))


if __name__ == "__main__":
    main()
