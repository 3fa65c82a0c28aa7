"""Which phases and bounds of ``cpsat`` win: the same instances with each one removed.

Every run uses a deterministic budget (CP-SAT deterministic seconds, ``--dtime``) and a wall
limit that only guards against a hang, so the counts repeat on any machine. Instances:

* ``planted``: planted graphs that do not leak (:func:`optpart.generators.planted_dag`), K 4,
  CCR 1, tight memory, static;
* ``forkjoin``: fork-join stages in a chain (:func:`fork_join_dag`, tight memory);
* ``forkjoin1``: one fork-join with communication in the literature's shapes
  (:func:`exact_frontier.literature_fork_join`: random CCR 1, equal fork times, equal join
  costs, CCR 10; K 4);
* ``layered``: :func:`layered_dag`, tight memory;
* ``mlp4``: the bundled 76-node MLP training step under peak memory;
* ``stg``: the first STG 50-task instances with a published optimum at 4 processors (when
  the data is present: ``$OPTPART_SHARED_DATA/stg``).

A variant switches one phase off by replacing its function for the run (``VARIANTS``). Per
variant and family: instances proven optimal, the sum of CP-SAT deterministic seconds of
the search, and the mean makespan over the full variant's (a variant that loses makespan
shows above 1). Seeds 300 and up: none used while building the solver.

Example::

    nice -n 10 python benchmarks/exact_ablation.py --dtime 10 > ablation.md
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from functools import partial
from pathlib import Path

from _common import table
from exact_frontier import honest_planted, literature_fork_join

import optpart
from optpart.generators import fork_join_dag, layered_dag

ROOT = Path(__file__).resolve().parent.parent
MLP = ROOT / "instances" / "small" / "mlp4-torch-training.json"
STG = Path(os.environ.get("OPTPART_SHARED_DATA", ROOT.parent / "shared" / "data")) / "stg"


def _stg(limit: int) -> list:
    if not STG.exists():
        return []
    from optpart.formats.stg import read_stg
    out = []
    for line in (STG / "optima" / "Case50_4_OPT.csv").read_text().splitlines()[:limit]:
        fields = line.strip().split(",")
        if len(fields) == 3:
            out.append(partial(lambda rel: read_stg(STG / rel).with_devices(4), fields[0]))
    return out


def families(seeds: list[int], stg_limit: int, fj_widths: tuple = (16, 24),
             fj_kinds: tuple = ("random", "equal-fork", "equal-join", "ccr10")) -> dict:
    """Family name -> (memory model, instance makers)."""
    fams = {
        "planted 40/80": ("static", [partial(honest_planted, n, s) for n in (40, 80) for s in seeds]),
        "planted 120": ("static", [partial(honest_planted, 120, s) for s in seeds[:2]]),
        "forkjoin 80": ("static", [partial(fork_join_dag, 80, k=4, ccr=1.0, memory_slack=1.05, seed=s)
                                   for s in seeds[:2]]),
        "forkjoin1": ("static", [partial(literature_fork_join, w, kind, seeds[0]) for w in fj_widths
                                 for kind in fj_kinds]),
        "layered 40": ("static", [partial(layered_dag, 40, k=4, ccr=1.0, memory_slack=1.05, seed=s)
                                  for s in seeds[:2]]),
    }
    if MLP.exists():
        fams["mlp4 (peak)"] = ("peak", [partial(optpart.load, str(MLP))])
    stg = _stg(stg_limit)
    if stg:
        fams["stg 50 p4"] = ("static", stg)
    return fams


def _off(module: str, name: str, value):
    """A switch that replaces ``module.name`` by ``value`` for the run."""
    import importlib
    return (importlib.import_module(module), name, value)


def variants() -> dict:
    """Variant name -> list of (module, attribute, replacement)."""
    x = "optpart.solvers.exact."
    return {
        "full": [],
        "no symmetry": [_off(x + "cpsat_model", "_symmetry", lambda *a, **k: None)],
        "no segments": [_off(x + "cpsat", "_segment_bound", lambda *a, **k: 0.0)],
        "no target phase": [_off(x + "cpsat", "_target_units", lambda *a, **k: None)],
        "no fork-join bound": [_off(x + "bounds", "fork_join_bound", lambda p: 0.0)],
        "no full-model LNS": [_off(x + "cpsat", "LNS_MIN_NODES", 10**9)],
        "no pooled model": [_off(x + "cpsat_model", "_pooled", lambda *a, **k: False)],
        "no peak relaxation": [_off(x + "cpsat", "relaxed_bound", lambda *a, **k: 0.0)],
    }


#: Where a variant can change anything (the rest of the families are not rerun for it).
WHERE = {
    "no symmetry": ("forkjoin1", "layered"),
    "no segments": ("forkjoin",),
    "no target phase": ("planted", "forkjoin1"),
    "no fork-join bound": ("forkjoin1",),
    "no full-model LNS": ("planted 120", "forkjoin"),
    "no pooled model": ("stg",),
    "no peak relaxation": ("mlp4",),
}


def run(variant: list, fam: tuple, dtime: float, wall: float) -> list[tuple]:
    saved = [(m, a, getattr(m, a)) for m, a, _ in variant]
    for m, a, v in variant:
        setattr(m, a, v)
    try:
        out = []
        memory, makers = fam
        for make in makers:
            p = make()
            t0 = time.perf_counter()
            r = optpart.solve(p, "cpsat", time_limit=wall, seed=0, memory_model=memory,
                              deterministic_time=dtime)
            optpart.check(p, r)
            opt = p.meta.get("optimum")
            if r.status is optpart.Status.OPTIMAL and opt is not None and r.makespan > opt * (1 + 1e-9):
                raise SystemExit(f"false optimality claim on {p.name}")
            if r.lower_bound is not None and opt is not None and r.lower_bound > opt * (1 + 1e-9):
                raise SystemExit(f"bound above the optimum on {p.name}")
            out.append((r.status is optpart.Status.OPTIMAL, float(r.stats.get("deterministic_seconds", 0.0)),
                        r.makespan, time.perf_counter() - t0))
            print(f"    {p.name}: {r.status.value} {r.makespan:.6g} gap {r.gap:.2e} "
                  f"{out[-1][1]:.2f} dt {out[-1][3]:.1f}s", file=sys.stderr, flush=True)
        return out
    finally:
        for m, a, v in saved:
            setattr(m, a, v)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtime", type=float, default=10.0, help="CP-SAT deterministic seconds per call")
    ap.add_argument("--wall", type=float, default=120.0, help="wall limit per call (a hang guard)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[300, 301, 302, 303])
    ap.add_argument("--stg-limit", type=int, default=12)
    ap.add_argument("--variants", nargs="+", default=None)
    ap.add_argument("--families", nargs="+", default=None)
    ap.add_argument("--fj-widths", type=int, nargs="+", default=[16, 24])
    ap.add_argument("--fj-kinds", nargs="+", default=["random", "equal-fork", "equal-join", "ccr10"])
    args = ap.parse_args(argv)
    fams = families(args.seeds, args.stg_limit, tuple(args.fj_widths), tuple(args.fj_kinds))
    if args.families:
        fams = {k: v for k, v in fams.items() if any(k.startswith(f) for f in args.families)}
    vs = variants()
    names = args.variants or list(vs)
    if "full" not in names:
        names = ["full"] + names
    load = os.getloadavg()[0]
    results: dict = {}
    for name in names:
        for fam, spec in fams.items():
            if name != "full" and not any(fam.startswith(f) for f in WHERE.get(name, (fam,))):
                continue
            print(f"{name} / {fam}", file=sys.stderr, flush=True)
            results[name, fam] = run(vs[name], spec, args.dtime, args.wall)
    rows = []
    for fam in fams:
        base = results["full", fam]
        for name in names:
            if (name, fam) not in results:
                continue
            got = results[name, fam]
            ratio = statistics.mean(g[2] / b[2] for g, b in zip(got, base) if b[2] > 0)
            rows.append([fam, name, f"{sum(g[0] for g in got)}/{len(got)}", f"{sum(g[1] for g in got):.2f}",
                         f"{ratio:.5f}", f"{sum(g[3] for g in got):.0f}"])
    print(f"cpsat ablation: deterministic budget {args.dtime:g} s per call, seeds {args.seeds}, "
          f"load {load:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n")
    print(table(rows, ["family", "variant", "proven", "deterministic s (sum)", "makespan / full (mean)",
                       "wall s (sum)"]))


if __name__ == "__main__":
    main()
