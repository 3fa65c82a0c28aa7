"""The heuristic against the planted optimum and the list-scheduling baselines, 200 to 10^6 nodes.

One Markdown table, one row per size N: planted-optimum DAGs
(:func:`optpart.generators.planted_dag`: the optimum is the planted makespan, proven by the
work bound), both of its shapes (``chains=True``: every node also reads its planted
predecessor, no slack anywhere; ``chains=False`` with a narrow window: wide joins whose
producers must be gathered), K in {2, 4, 8}, CCR in {0.1, 1, 5}, ``--seeds`` seeds. Every
problem is solved through :func:`optpart.solve` (screening and the final check included) by
``heuristic`` (default effort), ``heft`` and ``etf``; at N <= ``--all-baselines-upto`` (default:
every size) also by ``topo``, ``metis`` and ``pardnn``. Columns: graphs; heuristic mean, median
and max gap to the optimum; every baseline's mean gap; how many graphs the heuristic is worse than the best
baseline run on them (0 is the promise); the median ratio heuristic / min(heft, etf) of
makespans; the median ratio of solve times heuristic / heft.

``--generators``: a second table on graphs nobody tuned on and with no planted optimum, the
project's other generators (:func:`optpart.generators.layered_dag`, ``fork_join_dag``,
``training_graph``, ``large_training_graph``) at the same sizes, K 2/4/8, CCR 0.1/1/5 (``training_graph``:
its own CCR), memory slack 1.1 (tight) and ``--seeds``; gaps are to the proven lower bound
(:func:`optpart.evaluate.problem_lower_bound`), so they overstate the distance to the optimum.

``--million``: one planted graph of 10^6 nodes written to ``.npz`` and solved through the
command line end to end (``optpart solve FILE -o OUT``: read, solve, check, write), wall
seconds and peak RSS of that process.

Run under ``nice -n 10``; times are medians of ratios within one run (shared machine).

    nice -n 10 python benchmarks/heuristic_planted_scale.py                      # 200 .. 1e5
    nice -n 10 python benchmarks/heuristic_planted_scale.py --sizes 200 2000 --seeds 0 1 2
    nice -n 10 python benchmarks/heuristic_planted_scale.py --sizes --million    # the 1e6 CLI run
    nice -n 10 python benchmarks/heuristic_planted_scale.py --sizes 200 2000 --seeds 5 6 7 --generators
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


def _solve(problem, solver: str) -> tuple[float, float]:
    """(makespan, seconds) of ``optpart.solve``; inf when the solver finds no placement."""
    t0 = time.perf_counter()
    r = optpart.solve(problem, solver)
    dt = time.perf_counter() - t0
    return (float(r.makespan) if r.status.has_solution else float("inf")), dt


def _row(n: int, seeds: list[int], ks, ccrs, all_baselines: bool) -> list:
    extra = ["topo", "metis", "pardnn"] if all_baselines else []
    gaps: dict[str, list[float]] = {s: [] for s in ["heuristic", "heft", "etf", *extra]}
    worse, vs_best, t_ratio, graphs = 0, [], [], 0
    for shape, kw in _SHAPES.items():
        for k in ks:
            for ccr in ccrs:
                for seed in seeds:
                    p = planted_dag(n, k, ccr=ccr, seed=seed, **kw)
                    opt = float(p.meta["optimum"])
                    res = {s: _solve(p, s) for s in ["heuristic", "heft", "etf", *extra]}
                    graphs += 1
                    for s in gaps:
                        gaps[s].append(res[s][0] / opt - 1.0)
                    h = res["heuristic"][0]
                    best = min(v[0] for s, v in res.items() if s != "heuristic")
                    if h > best * (1 + 1e-9):
                        worse += 1
                        print(f"  worse: n={n} {shape} k={k} ccr={ccr} seed={seed}: heuristic {h:.6g}, "
                              f"best baseline {best:.6g}", file=sys.stderr)
                    vs_best.append(h / min(res["heft"][0], res["etf"][0]))
                    t_ratio.append(res["heuristic"][1] / max(res["heft"][1], 1e-9))
                    print(f"  done: n={n} {shape} k={k} ccr={ccr} seed={seed}: gap {h / opt - 1:.4%}, "
                          f"time / heft {t_ratio[-1]:.2f}x", file=sys.stderr)
    pct = lambda xs: f"{100 * float(np.mean(xs)):.2f}%"  # noqa: E731
    hg = gaps["heuristic"]
    return [n, graphs, pct(hg), f"{100 * statistics.median(hg):.2f}%", f"{100 * max(hg):.2f}%",
            *(pct(gaps[s]) if s in gaps else "-" for s in _BASELINES),
            f"{worse} of {graphs} (vs heft, etf{', topo, metis, pardnn' if extra else ''})",
            f"{statistics.median(vs_best):.4f}", f"{statistics.median(t_ratio):.2f}x"]


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
                h = res["heuristic"][0]
                best = min(v[0] for s, v in res.items() if s != "heuristic")
                if h > best * (1 + 1e-9):
                    worse += 1
                    print(f"  worse: {kind} n={p.n_nodes} k={k} ccr={ccr} seed={seed}: heuristic {h:.6g}, "
                          f"best baseline {best:.6g}", file=sys.stderr)
                t_ratio.append(res["heuristic"][1] / max(res["heft"][1], 1e-9))
                print(f"  done: {kind} n={p.n_nodes} k={k} ccr={ccr} seed={seed}", file=sys.stderr)

    def pct(xs):
        finite = [x for x in xs if np.isfinite(x)]
        missing = len(xs) - len(finite)
        return f"{100 * float(np.mean(finite)):.2f}%" + (f" ({missing} none)" if missing else "") if finite else "-"
    return [kind, f"{int(np.median(nodes))}", graphs, *(pct(gaps[s]) for s in solvers),
            f"{worse} of {graphs}", f"{statistics.median(t_ratio):.2f}x"]


def _million(k: int = 4) -> list:
    """Write a 10^6-node planted graph to .npz and solve it through the CLI (wall s, RSS MiB)."""
    from e2e_scale import cli

    from optpart.formats.npz import write_npz

    p = planted_dag(1_000_000, k, ccr=1.0, seed=0)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "planted-1m.npz"
        write_npz(p, path)
        rows = []
        for solver in ("heft", "heuristic"):
            r = cli(str(path), solver, None, str(Path(tmp) / f"out-{solver}.json"))
            out = optpart.load_result(Path(tmp) / f"out-{solver}.json", p)
            gap = f"{100 * (out.makespan / p.meta['optimum'] - 1):.2f}%" if out.status.has_solution else "-"
            rows.append([p.n_nodes, p.n_edges, k, solver, f"{r['wall']:.1f}", f"{r['cpu']:.1f}",
                         f"{r['rss_mib']:.0f}", gap])
            print(f"  done: 1e6 {solver}", file=sys.stderr)
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
    ap.add_argument("--million", action="store_true", help="also the 10^6-node .npz through the CLI")
    ap.add_argument("--generators", action="store_true",
                    help="also the other generators' graphs (gaps to the proven lower bound)")
    args = ap.parse_args(argv)
    rows = [_row(n, args.big_seeds if n >= 100_000 else args.seeds, args.ks, args.ccrs,
                 n <= args.all_baselines_upto) for n in args.sizes]
    if rows:
        print(table(rows, ["N", "graphs", "heuristic mean gap", "median gap", "max gap",
                           *(f"{b} mean gap" for b in _BASELINES), "heuristic worse than best baseline",
                           "median heuristic / min(heft, etf)",
                           "median time heuristic / heft"]))
    if args.generators:
        grows = [_generator_row(kind, n, args.seeds, args.ks, args.ccrs) for n in args.sizes for kind in _GENERATORS]
        print()
        print(table(grows, ["generator", "median nodes", "graphs", "heuristic gap to bound",
                            *(f"{b} gap" for b in _BASELINES), "heuristic worse than best baseline",
                            "median time heuristic / heft"]))
    if args.million:
        print()
        print(table(_million(), ["nodes", "edges", "k", "solver", "CLI wall s (read, solve, check, write)",
                                 "CLI CPU s", "peak RSS MiB", "gap to optimum"]))


if __name__ == "__main__":
    main()
