"""How large a problem do the exact solvers prove optimal, and how fast?

For each graph family, size and solver: the share of runs proven optimal within
``--time-limit`` and the median wall time to proof (over proven runs) with the median
CPU time (user + sys of this process, ``time.process_time``) beside it, since wall time
on a shared machine is inflated by the other users, with tight memory
(capacities close to the loads) and loose memory (unlimited), on 4 identical devices,
CCR 1. Families (all from :mod:`optpart.generators`):

* ``planted``: :func:`honest_planted`, planted optima that do not leak the planted schedule
  (:func:`planted_dag`: ids and edge order shuffled, no device chains; tight: capacities
  1.05x the largest planted need); the optimum is known, and any ``optimal`` or bound above
  it is counted as a false claim.
* ``layered``: :func:`layered_dag` (tight: 1.05x the fair share).
* ``forkjoin``: :func:`fork_join_dag`, fork-join stages with communication (tight: 1.05x).

``--stg``: the STG 50-task instances with published optima (``Case50_{p}_OPT.csv``; rows
with a 4th field are unproven and skipped): share proven, results below an optimum
(must be 0), optimality claims that differ from the published optimum (must be 0).

``--root-lp``: per graph (tight memory), the work bound, the communication-aware
critical path, and the MILP's root LP bound without and with the energetic window rows
(:func:`optpart.solvers.exact.milp.root_lp_bound`), over the optimum (planted) or, for the
other families, over the best makespan ``milp`` finds within ``--time-limit`` (with its
proven bound), so a ratio below 1 there is a gap to an upper bound, not to the optimum.

``--table`` (the frontier table): for each family, size and solver, graphs proven
optimal within ``--time-limit`` (default 60 s), the median wall and CPU time to proof and
the gaps left at the limit; on seeds and graphs other than the ones the solver was tuned
on (``--seeds``, default 200-203). Rows: ``planted`` 40/80/120 (tight memory, static),
``forkjoin`` stages 80/120 (tight), ``forkjoin1`` (:func:`literature_fork_join`: one
fork-join with communication, widths 16/20/24/28 on 4 devices, in four shapes: random CCR 1,
equal fork times, equal join costs, CCR 10), ``milp`` on planted 40, and the 76-node MLP
training step under peak
(``instances/small/mlp4-torch-training.json``). ``--table-only`` restricts the rows to
some families. Wall times depend on the load: state it; CPU time is the process's own.

The machine is shared: report medians, and rerun before comparing two versions.

Examples::

    python benchmarks/exact_frontier.py --family planted --sizes 20 40 60 80 --per-size 8
    python benchmarks/exact_frontier.py --family layered --sizes 30 50 --solvers cpsat
    python benchmarks/exact_frontier.py --family planted --sizes 40 --solvers milp --time-limit 60
    python benchmarks/exact_frontier.py --root-lp --family layered --sizes 20 40 --per-size 3 -t 20
    OPTPART_SHARED_DATA=/work/shared/data python benchmarks/exact_frontier.py --stg --time-limit 60 --stg-limit 30
    nice -n 10 python benchmarks/exact_frontier.py --table --time-limit 60
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np

from _common import table

import optpart
from optpart.formats.stg import read_stg
from optpart.generators import fork_join_dag, fork_join_graph, layered_dag, planted_dag

K = 4


def shuffled(problem: optpart.Problem, seed: int) -> optpart.Problem:
    """The same problem with node ids, node order and edge order drawn at random (nothing leaks)."""
    rng = np.random.default_rng(seed)
    n = problem.n_nodes
    perm = rng.permutation(n)          # new node i is old node perm[i]
    new_of = np.empty(n, dtype=np.int64)
    new_of[perm] = np.arange(n)
    eorder = rng.permutation(problem.n_edges)
    return optpart.Problem.from_arrays(
        [f"v{i}" for i in range(n)], problem.time[perm], problem.memory[perm],
        new_of[problem.edge_src[eorder]], new_of[problem.edge_dst[eorder]], problem.edge_bytes[eorder],
        devices=problem.devices, links=problem.links, name=f"{problem.name}-shuffled",
        meta={"optimum": problem.meta.get("optimum")})


def honest_planted(n: int, seed: int, k: int = K) -> optpart.Problem:
    """A planted optimum that does not leak (:func:`planted_dag`'s defaults: shuffled ids and
    edge order, no device chains, near edges; CCR 1, capacities 1.05x the largest planted need)."""
    return planted_dag(n, k, ccr=1.0, seed=seed)


def literature_fork_join(width: int, kind: str, seed: int, k: int = K) -> optpart.Problem:
    """One fork-join with communication in the shapes of the fork-join literature (Wang and
    Sinnen, ICPP 2022): ``random`` (:func:`fork_join_graph`, CCR 1), ``equal-fork`` (every
    branch the same time), ``equal-join`` (every transfer into the sink the same), ``ccr10``
    (transfers ten times the node times); ids shuffled."""
    base = fork_join_graph(width, k=k, ccr=10.0 if kind == "ccr10" else 1.0, seed=seed)
    time_, nbytes = base.time.copy(), base.edge_bytes.copy()
    if kind == "equal-fork":
        time_[1:width + 1] = np.rint(time_[1:width + 1].mean())
    elif kind == "equal-join":
        nbytes[width:] = np.rint(nbytes[width:].mean())
    q = optpart.Problem.from_arrays(list(base.node_ids), time_, base.memory, base.edge_src, base.edge_dst, nbytes,
                                    devices=base.devices, links=base.links, name=f"fj-{kind}-{width}-s{seed}")
    return shuffled(q, seed)


def make(family: str, n: int, seed: int, tight: bool) -> optpart.Problem:
    """One instance; ``tight``: capacities near the loads, else unlimited memory."""
    if family == "planted":
        p = honest_planted(n, seed)
        return p if tight else p.with_devices(K)
    if family == "layered":
        return layered_dag(n, k=K, ccr=1.0, memory_slack=1.05 if tight else None, seed=seed)
    if family == "forkjoin":
        return fork_join_dag(n, k=K, ccr=1.0, memory_slack=1.05 if tight else None, seed=seed)
    raise SystemExit(f"--family {family!r}: expected planted, layered or forkjoin")


def _median(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f}" if xs else "-"


def run(family: str, sizes: list[int], per_size: int, time_limit: float, solvers: list[str],
        memories: list[str]) -> str:
    rows = []
    for n in sizes:
        for name in solvers:
            cells, false_claims = [], 0
            for memory in memories:
                proven, times, cpus = 0, [], []
                for seed in range(per_size):
                    p = make(family, n, seed, memory == "tight")
                    t0, c0 = time.perf_counter(), time.process_time()
                    r = optpart.solve(p, name, time_limit=time_limit, seed=0)
                    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                    if r.ok:
                        optpart.check(p, r)
                    if r.status is optpart.Status.OPTIMAL:
                        proven += 1
                        times.append(wall)
                        cpus.append(cpu)
                        opt = p.meta.get("optimum")
                        if opt is not None and r.makespan > opt * (1 + 1e-9) + 1e-9:
                            false_claims += 1
                    print(f"  {family} n={n} {name} {memory} seed={seed}: {r.status.value} "
                          f"{r.makespan:.6g} gap {r.gap:.4f} {wall:.1f}s (cpu {cpu:.1f}s) "
                          f"{r.stats.get('stop_reason', '')}",
                          file=sys.stderr, flush=True)
                cells.append(f"{proven}/{per_size} ({_median(times)} s, cpu {_median(cpus)} s)")
            rows.append([n, name, *cells, false_claims if family == "planted" else "-"])
    return table(rows, ["nodes", "solver", *[f"proven (median wall, cpu s to proof; {m})" for m in memories],
                        "false optimal claims"])


def root_lp(family: str, sizes: list[int], per_size: int, time_limit: float) -> str:
    """Root LP bound of the MILP without / with the window rows, against the optimum or best known."""
    import numpy as np

    from optpart.solvers.exact.bounds import comm_lower_bound
    from optpart.solvers.exact.grid import durations
    from optpart.solvers.exact.milp import root_lp_bound
    rows = []
    for n in sizes:
        for seed in range(per_size):
            p = make(family, n, seed, True)
            dur = durations(p)
            work = float(np.where(p.allowed, dur, np.inf).min(axis=1).sum()) / p.n_devices
            before, after = root_lp_bound(p, window_cuts=False), root_lp_bound(p)
            opt = p.meta.get("optimum")
            if opt is None:
                r = optpart.solve(p, "milp", time_limit=time_limit, seed=0)
                optpart.check(p, r)
                ref = f"{r.makespan:.4g} ({r.status.value}, bound {r.lower_bound:.4g})"
                opt = r.makespan
            else:
                ref = f"{opt:.4g} (planted optimum)"
            rows.append([family, n, seed, f"{work / opt:.4f}", f"{comm_lower_bound(p) / opt:.4f}",
                         f"{before / opt:.4f}", f"{after / opt:.4f}", ref])
    return table(rows, ["family", "n", "seed", "work / ref", "comm path / ref", "root LP before / ref",
                        "root LP after / ref", "ref"])


#: The STG data: ``$OPTPART_SHARED_DATA/stg`` (as the tests), else beside the checkout.
STG = Path(os.environ.get("OPTPART_SHARED_DATA", Path(__file__).resolve().parent.parent.parent / "shared" / "data")) / "stg"


def _optima(p: int) -> list[tuple[str, int]]:
    out = []
    for line in (STG / "optima" / f"Case50_{p}_OPT.csv").read_text().splitlines():
        fields = line.strip().split(",")
        if len(fields) == 3:  # a 4th field marks an unproven value
            out.append((fields[0], int(fields[2])))
    return out


def stg(procs: list[int], time_limit: float, limit: int | None, solver: str) -> str:
    """STG 50-task instances with published optima: share proven, results below an optimum."""
    if not STG.exists():
        return f"STG data not found at {STG}"
    rows = []
    for p in procs:
        cases = _optima(p)[:limit] if limit else _optima(p)
        proven, below, wrong_claim, times = 0, 0, 0, []
        for rel, opt in cases:
            problem = read_stg(STG / rel).with_devices(p)
            t0 = time.perf_counter()
            r = optpart.solve(problem, solver, time_limit=time_limit, seed=0)
            wall = time.perf_counter() - t0
            if r.ok:
                optpart.check(problem, r)
                below += r.makespan < opt - 1e-9
            if r.status is optpart.Status.OPTIMAL:
                proven += 1
                times.append(wall)
                wrong_claim += abs(r.makespan - opt) > 1e-9
            print(f"  p={p} {rel}: {r.status.value} {r.makespan:g} (opt {opt}) {wall:.1f}s",
                  file=sys.stderr, flush=True)
        rows.append([p, solver, len(cases), f"{100 * proven / max(len(cases), 1):.1f}%", _median(times),
                     below, wrong_claim])
    return table(rows, ["p", "solver", "instances", "proven", "median s to proof", "below optimum",
                        "optimal != published"])


#: The frontier table's rows: (family, size label, solver, memory model, instance maker per seed).
#: ``forkjoin1`` sizes read ``width x devices``; its seeds are the table's first two.
MLP = Path(__file__).resolve().parent.parent / "instances" / "small" / "mlp4-torch-training.json"


def _frontier_rows(seeds: list[int]) -> list[tuple]:
    rows = []
    for n in (40, 80, 120):
        rows.append(("planted", str(n), "cpsat", "static", [partial(honest_planted, n, s) for s in seeds]))
    for n in (80, 120):
        rows.append(("forkjoin", str(n), "cpsat", "static",
                     [partial(fork_join_dag, n, k=K, ccr=1.0, memory_slack=1.05, seed=s) for s in seeds]))
    for w in (16, 20, 24, 28):
        rows.append(("forkjoin1", f"{w + 2}", "cpsat", "static",
                     [partial(literature_fork_join, w, kind, seeds[0])
                      for kind in ("random", "equal-fork", "equal-join", "ccr10")]))
    rows.append(("planted", "40", "milp", "static", [partial(honest_planted, 40, s) for s in seeds[:3]]))
    if MLP.exists():
        rows.append(("mlp4 training (peak)", "76", "cpsat", "peak", [partial(optpart.load, str(MLP))]))
    return rows


def frontier(seeds: list[int], time_limit: float, only: list[str] | None, dtime: float | None = None) -> str:
    """The frontier table: per family, size and solver, proven count, medians to proof, gaps at the limit.

    ``dtime``: a deterministic budget instead of the wall limit (CP-SAT deterministic seconds,
    ``milp`` 2,000 branch-and-bound nodes per deterministic second), for a loaded machine
    where wall seconds measure the other users; the medians are then deterministic seconds."""
    out = []
    for family, size, solver, memory, makers in _frontier_rows(seeds):
        if only and family.split()[0] not in only:
            continue
        proven, walls, cpus, gaps = 0, [], [], []
        for make in makers:
            p = make()
            t0, c0 = time.perf_counter(), time.process_time()
            kw = {} if dtime is None else ({"deterministic_time": dtime} if solver == "cpsat" else
                                            {"max_nodes": int(2000 * dtime)})
            r = optpart.solve(p, solver, time_limit=time_limit if dtime is None else 1e5, seed=0,
                              memory_model=memory, **kw)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            if dtime is not None and solver == "cpsat":
                wall = float(r.stats.get("deterministic_seconds", 0.0))
            optpart.check(p, r)
            opt = p.meta.get("optimum")
            if opt is not None and r.lower_bound > opt * (1 + 1e-9) + 1e-9:
                raise SystemExit(f"bound above the optimum on {p.name}: {r.lower_bound} > planted {opt}")
            if r.status is optpart.Status.OPTIMAL:
                if opt is not None and r.makespan > opt * (1 + 1e-9) + 1e-9:
                    raise SystemExit(f"false optimality claim on {p.name}: {r.makespan} > planted {opt}")
                proven += 1
                walls.append(wall)
                cpus.append(cpu)
            else:
                gaps.append(r.gap)
            print(f"  {family} {p.name} {solver}: {r.status.value} {r.makespan:.6g} gap {r.gap:.2e} "
                  f"{wall:.1f}s (cpu {cpu:.1f}s) {r.stats.get('proof', r.stats.get('stop_reason', ''))}",
                  file=sys.stderr, flush=True)
        gap = "-" if not gaps else f"{100 * statistics.median(gaps):.2f}% (max {100 * max(gaps):.2f}%)"
        out.append([family, size, solver, memory, f"{proven}/{len(makers)}", _median(walls), _median(cpus), gap])
    what = "wall s" if dtime is None else "deterministic s (cpsat)"
    return table(out, ["family", "nodes", "solver", "memory", "proven", f"median {what} to proof",
                       "median cpu s to proof", "gap at the limit (median of unproven)"])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", default="planted", choices=["planted", "layered", "forkjoin"])
    ap.add_argument("--sizes", type=int, nargs="+", default=[20, 40, 60, 80])
    ap.add_argument("--per-size", type=int, default=8)
    ap.add_argument("-t", "--time-limit", type=float, default=60.0)
    ap.add_argument("--root-lp", action="store_true", help="root LP bounds of the MILP without/with window rows")
    ap.add_argument("--solvers", nargs="+", default=["cpsat", "milp"])
    ap.add_argument("--memory", nargs="+", default=["tight", "loose"], choices=["tight", "loose"])
    ap.add_argument("--stg", action="store_true", help="run the STG 50-task instances instead")
    ap.add_argument("--procs", type=int, nargs="+", default=[2, 4, 8, 16])
    ap.add_argument("--stg-limit", type=int, default=None, help="first N instances per p")
    ap.add_argument("--stg-solver", default="cpsat")
    ap.add_argument("--table", action="store_true", help="the frontier table (see the docstring)")
    ap.add_argument("--table-only", nargs="+", default=None,
                    choices=["planted", "forkjoin", "forkjoin1", "mlp4"], help="with --table: these families")
    ap.add_argument("--seeds", type=int, nargs="+", default=[200, 201, 202, 203], help="with --table")
    ap.add_argument("--dtime", type=float, default=None,
                    help="with --table: a deterministic budget per run instead of --time-limit")
    args = ap.parse_args(argv)
    if args.table:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        limit = f"time limit {args.time_limit:g} s" if args.dtime is None else f"deterministic budget {args.dtime:g} s"
        print(f"Frontier: K={K} identical devices, {limit}, seeds "
              f"{args.seeds}, load average {load:.1f} on {os.cpu_count()} cores at the start\n")
        print(frontier(args.seeds, args.time_limit, args.table_only, args.dtime))
        return
    if args.stg:
        print(f"STG 50-task instances, {args.stg_solver}, time limit {args.time_limit:g} s\n")
        print(stg(args.procs, args.time_limit, args.stg_limit, args.stg_solver))
        return
    if args.root_lp:
        print(f"{args.family} DAGs, {K} devices, CCR 1, tight memory: MILP root LP bounds "
              f"(reference: planted optimum, else milp within {args.time_limit:g} s)\n")
        print(root_lp(args.family, args.sizes, args.per_size, args.time_limit))
        return
    print(f"{args.family} DAGs, {K} devices, CCR 1, time limit {args.time_limit:g} s, "
          f"{args.per_size} graphs per size (shared machine: medians)\n")
    print(run(args.family, args.sizes, args.per_size, args.time_limit, args.solvers, args.memory))


if __name__ == "__main__":
    main()
