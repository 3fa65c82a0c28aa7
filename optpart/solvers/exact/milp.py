"""``milp``: exact placement and scheduling as a mixed-integer linear program (PuLP).

The formulation (a disjunctive model in the style of Davidović et al. and Venugopalan &
Sinnen for scheduling with communication delays):

* ``x[v, d]`` binary for allowed pairs, one per node; nodes of a colocation group share
  their variables. ``S[v] >= 0`` continuous start, ``M`` the makespan.
* Run time ``p(v) = sum_d dur(v, d) x[v, d]``; ``M >= S[v] + p(v)``.
* Edge ``(u, w)`` with the same transfer ``c`` between every device pair: ``apart[e] >=
  x[u, d] - x[w, d]`` for every ``d`` and ``S[w] >= S[u] + p(u) + c apart[e]``. With
  per-pair links: ``S[w] >= S[u] + p(u) + c(a, b) (x[u, a] + x[w, b] - 1)`` for every
  pair ``a != b``, which binds exactly when ``u`` is on ``a`` and ``w`` on ``b``.
* Only pairs that the DAG leaves unordered (no path between them, from bitset
  reachability) get an order binary ``y[i, j]`` and a same-device variable
  ``same >= x[i, d] + x[j, d] - 1``; big-M rows ``S[j] >= S[i] + p(i) - H (1 - y) - H
  (1 - same)`` and the reverse keep them apart on one device. ``H`` is an upper bound
  on the makespan (a heuristic's, else all nodes and transfers in sequence).
* Static memory rows per device; lower-bound rows: each device's load, the total load
  over ``k``, heads and tails at the fastest speed on every start.

Times are in a power-of-two unit near the horizon (``milp_model.time_unit``: the
backends' tolerances are absolute), converted back to seconds on the way out. The returned schedule keeps the MILP's placement and
device orders with start times recomputed in seconds, which removes solver tolerances
and never delays a node. Statuses are read from the backend itself, never from PuLP's
``LpStatus`` alone (a time-limited run is "Optimal" in PuLP's eyes): ``optimal`` only
when the backend reports a proven optimum with gap 0 and the recomputed makespan meets
the best bound within 1e-6; ``feasible`` with the best bound otherwise; ``unknown``
without a solution; ``infeasible`` when the backend proves it.

Options: ``backend`` (``"highs"``, default, through highspy; or ``"cbc"``), ``threads``
(default 2, used when ``deterministic=False``), ``deterministic`` (default True: one
thread), ``log`` (print the backend log),
``use_hint`` (default True: a ``heft`` placement, when installed, gives ``H``).

References: T. Davidović, L. Liberti, N. Maculan, N. Mladenović, "Towards the optimal
solution of the multiprocessor scheduling problem with communication delays", MISTA
2007; S. Venugopalan, O. Sinnen, "ILP formulations for optimal task scheduling with
communication delays on parallel systems", IEEE TPDS 26(1), 2015.
"""

from __future__ import annotations


import numpy as np

from ...errors import SolverError
from ...evaluate import canonical_schedule, problem_lower_bound
from ...model.memory import fits, overflow_message, static_memory
from ...model.problem import Problem
from ...result import Status
from ..base import Solution
from ..spec import Option, SolverSpec
from . import _exact_common as xc
from . import milp_backend as mback
from . import milp_model as mb
from . import milp_time_indexed as ti

__all__ = ["solve", "SPEC", "DEFAULT_TIME_LIMIT", "root_lp_bound"]

#: Seconds when the caller gives no time limit.
DEFAULT_TIME_LIMIT = 60.0
#: The heuristic that gives the incumbent gets the same time limit as a standalone
#: ``heuristic`` run (it stops its optional stages at half of it, and usually finishes far
#: earlier), so with equal limits and seeds the exact answer is never worse than
#: ``optpart solve --solver heuristic``; the search gets whatever time is left.
HEURISTIC_SHARE = 1.0
#: Model terms PuLP builds per second (conservative) and the most ever built (memory guard).
BUILD_RATE = 20_000.0
MAX_TERMS = 2_000_000
_COUNT_PAIRS_UP_TO = 4000

#: Options, memory models and arguments this solver takes (checked by the registry). Its
#: memory rows are static, and neither model bounds the other (a received copy counts under
#: peak only): under peak it starts from the heuristic's peak-feasible schedule and returns the
#: MILP's placement only when the evaluator confirms it fits under peak, else the heuristic's.
SPEC = SolverSpec(
    options=(
        Option("backend", str, "highs", "MILP backend", choices=("highs", "cbc")),
        Option("threads", int, 2, "backend threads when deterministic=false", min=1, max=256),
        Option("deterministic", bool, True, "one thread: reproducible"),
        Option("log", bool, False, "print the backend's log"),
        Option("use_hint", bool, True, "warm start from the heuristic's schedule (never return worse)"),
        Option("export_model", str, None, "write the MILP to this file (.mps, else LP format)", allow_none=True),
        Option("window_cuts", bool, True, "energetic window rows that lift the LP bound (docs/exact.md)"),
        Option("formulation", str, "big-m", "big-m (order binaries) or time-indexed (whole time units, "
               "small horizons; docs/exact.md)", choices=("big-m", "time-indexed")),
        Option("max_nodes", int, None, "deterministic work limit: branch-and-bound nodes of the backend "
               "(HiGHS mip_max_nodes, CBC maxNodes; None: no limit)", min=1, allow_none=True),
    ),
    memory_models=("static", "peak"),
    uses_hint=True,
    uses_time_limit=True,
)


@SPEC.checked("milp")
def solve(problem: Problem, *, time_limit: float | None = None, seed: int = 0,
          hint: np.ndarray | None = None, memory_model: str = "static", backend: str = "highs",
          threads: int = 2, deterministic: bool = True, log: bool = False, use_hint: bool = True,
          export_model: str | None = None, window_cuts: bool = True, formulation: str = "big-m",
          max_nodes: int | None = None) -> Solution:
    """Solve ``problem`` exactly (or until ``time_limit``) as a MILP.

    Parameters
    ----------
    problem : Problem
        With devices; screened by :meth:`Problem.infeasibility` beforehand.
    time_limit : float, optional
        Seconds for the whole call (heuristic, model building, solve, decoding); default 60.
    seed : int
        Backend random seed and the heuristic's seed.
    hint : ndarray, optional
        A placement; its canonical schedule is the warm start when it beats the heuristic's.
    memory_model : {"static", "peak"}
        The MILP has static memory rows; under ``"peak"`` on a graph with the split its
        placements still fit (peak <= static) but it claims neither optimality nor a bound.
    backend : {"highs", "cbc"}
    threads : int
        Backend threads when ``deterministic`` is False.
    deterministic : bool
        Default True: one thread, so equal inputs give equal results (time limit aside).
    log : bool
    use_hint : bool
        Start from the heuristic (default True): its schedule is the warm start (HiGHS) and
        gives the big-M; the answer is never worse than it.
    export_model : str, optional
        Write the MILP to this file (``.mps``, else LP format).
    window_cuts : bool
        Add the energetic window rows (default True; see :func:`root_lp_bound`); big-M only.
    formulation : {"big-m", "time-indexed"}
        ``"time-indexed"``: :mod:`optpart.solvers.exact.milp_time_indexed`, for whole time units
        and at most ``MAX_BINARIES`` start binaries (else :class:`SolverError`, one line).
    max_nodes : int, optional
        A work limit independent of the machine's speed: the backend stops after this many
        branch-and-bound nodes (HiGHS ``mip_max_nodes``, CBC ``maxNodes``), with one thread
        the same run on every machine. Tests bound ``milp`` with it (the time limit is
        then only a safety net); stopped there, ``stats["stop_reason"]`` is ``"work limit"``.

    Returns
    -------
    Solution
    """
    budget = xc.Budget(DEFAULT_TIME_LIMIT if time_limit is None else float(time_limit))
    limit = budget.limit_s
    n = problem.n_nodes
    if n == 0:
        return Solution(Status.OPTIMAL, placement=np.zeros(0, dtype=np.int64), start=np.zeros(0),
                        memory_model=memory_model, stats={"stop_reason": "proven optimal"})
    # The static rows are exact for the static model; under peak (with the split) they are
    # a restriction: placements fit, but proofs and bounds do not carry over.
    claims = not (memory_model == "peak" and problem.has_split)
    stats: dict = {"backend": backend, "formulation": formulation}

    # 1. The incumbent: the heuristic's placement and schedule, under the requested model
    #    (under peak it is the answer whenever the MILP's static rows give a placement that
    #    does not fit the liveness model).
    incumbent = None
    if use_hint or not claims:
        incumbent = xc.start_from_heuristic(problem, stats, time_limit=HEURISTIC_SHARE * limit, seed=seed,
                                            memory_model=memory_model if problem.has_split else "static")

    # 2. Size the model before building it: the order rows of unordered pairs dominate.
    reserve = 0.2 + 2e-5 * (n + problem.n_edges)
    n_terms = _estimate_terms(problem)
    stats["model_terms_estimate"] = n_terms
    why = xc.too_big("milp", n_terms, BUILD_RATE, MAX_TERMS, budget, reserve)
    if why is not None:
        stats["stop_reason"] = "model not built"
        return xc.fallback(problem, incumbent, memory_model, why, stats)
    allowed = problem.allowed
    dur = xc.durations(problem)
    comm = xc.transfer_table(problem)
    lb_s = problem_lower_bound(problem)

    # Upper bound H for the big-M rows: a heuristic's makespan, else everything in sequence.
    horizon = float(np.where(allowed, dur, 0).max(axis=1).sum())
    if comm.size:
        horizon += float(comm.reshape(comm.shape[0], -1).max(axis=1).sum())
    warm = _choose_warm(problem, incumbent, hint)
    hint_p, hint_start = warm if warm is not None else (None, None)
    hint_ok = hint_p is not None
    if hint_ok:
        horizon = min(horizon, float((hint_start + problem.duration(hint_p)).max()))
    horizon = max(horizon * (1 + 1e-9), lb_s)
    H = horizon
    unit = mb.time_unit(H) if formulation != "time-indexed" else 1.0

    try:
        if formulation == "time-indexed":
            ti_size = ti.check_size(problem, dur, comm, H)  # SolverError when it cannot be built
            n_terms = ti_size.terms(problem)
            stats.update(model_terms_estimate=n_terms, start_binaries=ti_size.binaries, time_scale=ti_size.scale)
            why = xc.too_big("milp", n_terms, BUILD_RATE, MAX_TERMS, budget, reserve, "time-indexed model")
            if why is not None:
                stats["stop_reason"] = "model not built"
                return xc.fallback(problem, incumbent, memory_model, why, stats)
            mm = ti.build(problem, dur, ti_size, lb_s, budget, reserve)
        else:
            mm = mb.build(problem, dur / unit, comm / unit, H / unit, lb_s / unit, budget, reserve,
                          window_cuts=window_cuts)
            mm.unit = unit
    except xc.OutOfTime as exc:
        stats["stop_reason"] = "model not built"
        return xc.fallback(problem, incumbent, memory_model, f"milp: {exc}", stats)
    prob, x, S, M = mm.prob, mm.x, mm.S, mm.M
    aparts, orders, n_pairs = mm.aparts, mm.orders, len(mm.orders)

    if export_model:
        _export(prob, export_model)
    if budget.left() < reserve + 0.3:
        stats["stop_reason"] = "model not built"
        return xc.fallback(problem, incumbent, memory_model, "milp: the time limit ran out while building the "
                           "model", stats)
    # The backend's own model transfer happens inside the call: keep time for it.
    remaining = max(0.1, budget.left() - reserve - n_terms / (4 * BUILD_RATE))
    n_threads = 1 if deterministic else int(threads)
    time_arg = None if xc.unlimited(remaining) else remaining  # None: the backend's own no-limit
    stats.update(unordered_pairs=n_pairs, horizon=H)
    if max_nodes is not None:
        stats["max_nodes"] = int(max_nodes)
    warm_values = None
    if hint_ok:
        warm_values = _warm_values(problem, hint_p, hint_start, x, S, M, aparts, orders, mm.unit)
        if mm.extra_warm is not None:
            warm_values.update(mm.extra_warm(hint_p, hint_start))
    run = mback.run_highs if backend == "highs" else mback.run_cbc
    out = run(prob, warm_values, time_arg, n_threads, seed, log, max_nodes=max_nodes)
    stats.update(out.stats)
    model_status, has_solution, proven, infeasible, bound = (out.model_status, out.has_solution, out.proven,
                                                             out.infeasible, out.bound * mm.unit)
    stats["stop_reason"] = ("proven optimal" if proven else "proven infeasible" if infeasible
                            else "work limit" if out.node_limit else "time limit")
    if not claims:
        bound, proven = float("-inf"), False
    if infeasible:
        if claims:
            return Solution(Status.INFEASIBLE, message=f"the MILP ({backend}) proved that no placement fits "
                            "memory and constraints", stats=stats, memory_model=memory_model)
        return xc.fallback(problem, incumbent, memory_model, "milp: no placement fits the static rows", stats)
    if not has_solution:
        if backend == "highs" and model_status in ("Model error", "Solve error", "Load error", "Not Set"):
            raise SolverError(f"milp: HiGHS failed on '{problem.name}' ({model_status})")
        lb = bound * (1 - 1e-9) if np.isfinite(bound) else 0.0
        return xc.fallback(problem, incumbent, memory_model,
                           f"milp: the MILP ({backend}) found no solution ({model_status}; time limit "
                           f"{limit:g} s for the call)", stats, lower_bound=max(lb, 0.0))
    return _answer(problem, mm, incumbent, memory_model, backend, claims, proven, bound, limit, stats)


def root_lp_bound(problem: Problem, *, window_cuts: bool = True, horizon: float | None = None,
                  formulation: str = "big-m") -> float:
    """The makespan bound of the MILP's LP relaxation at the root (seconds; HiGHS, no cuts of its own).

    ``horizon`` is the big-M upper bound (default: every node and transfer in sequence);
    with ``formulation="time-indexed"`` it is the time horizon, so give a short one (a
    known makespan): the model is refused beyond ``milp_time_indexed.MAX_BINARIES``.
    Used to measure how far the window rows lift the relaxation (benchmarks/exact_frontier.py
    ``--root-lp``, docs/exact.md). A valid lower bound of the static-memory problem.

    Parameters
    ----------
    problem : Problem
        The problem, with devices.
    window_cuts : bool
        Add the energetic window rows (False: the round-1 model, to compare).
    horizon : float, optional
        Big-M upper bound, or the time-indexed horizon, in seconds.
    formulation : {"big-m", "time-indexed"}
        Which MILP to relax.

    Returns
    -------
    float
        The LP optimum's makespan in seconds.
    """
    import pulp
    if problem.n_nodes == 0:
        return 0.0
    dur = xc.durations(problem)
    comm = xc.transfer_table(problem)
    if horizon is None:
        horizon = float(np.where(problem.allowed, dur, 0).max(axis=1).sum())
        if comm.size:
            horizon += float(comm.reshape(comm.shape[0], -1).max(axis=1).sum())
    lb_s = problem_lower_bound(problem)
    horizon = max(float(horizon) * (1 + 1e-9), lb_s)
    if formulation == "time-indexed":
        mm = ti.build(problem, dur, ti.check_size(problem, dur, comm, horizon), lb_s)
    else:
        unit = mb.time_unit(horizon)
        mm = mb.build(problem, dur / unit, comm / unit, horizon / unit, lb_s / unit, window_cuts=window_cuts)
        mm.unit = unit
    for var in mm.prob.variables():
        var.cat = pulp.LpContinuous
    mback.silence_highs_banner()
    mm.prob.solve(pulp.HiGHS(msg=False, threads=1))
    if mm.prob.status != pulp.LpStatusOptimal:
        raise SolverError(f"milp: the LP relaxation of '{problem.name}' did not solve "
                          f"({pulp.LpStatus[mm.prob.status]})")
    return float(pulp.value(mm.M)) * mm.unit


def _estimate_terms(problem: Problem) -> int:
    """Variables plus constraint terms of the MILP, counted before building it.

    The order rows of unordered node pairs dominate; they are counted exactly from
    reachability bitsets up to :data:`_COUNT_PAIRS_UP_TO` nodes, above that bounded by
    all pairs (such graphs are far beyond this formulation anyway).
    """
    n, k, m = problem.n_nodes, problem.n_devices, problem.n_edges
    base = 4 * n * k + m * (4 + 3 * k) + 64 * n * k  # the last: window rows (at most 32 sets)
    if n <= _COUNT_PAIRS_UP_TO:
        desc = xc.reachability(problem)
        ordered = sum(bin(b).count("1") for b in desc)
        pairs = n * (n - 1) // 2 - ordered
    else:
        pairs = n * (n - 1) // 2
    return base + pairs * (8 + 4 * k)


def _choose_warm(problem: Problem, incumbent: Solution | None, hint: np.ndarray | None):
    """``(placement, start)`` of the shortest of the heuristic's schedule and the given
    placement's canonical schedule that fit the static rows; None when neither does."""
    best = None
    cands = []
    if incumbent is not None and incumbent.placement is not None:
        cands.append((np.asarray(incumbent.placement, dtype=np.int64), incumbent.start))
    if hint is not None:
        cands.append((np.asarray(hint, dtype=np.int64), None))
    for place, start in cands:
        if not _fits(problem, place):
            continue
        if start is None:
            start = canonical_schedule(problem, place)[0]
        start = np.asarray(start, dtype=np.float64)
        ms = float((start + problem.duration(place)).max())
        if best is None or ms < best[0]:
            best = (ms, place, start)
    return None if best is None else (best[1], best[2])


def _warm_values(problem: Problem, place: np.ndarray, start: np.ndarray, x: dict, S: list, M,
                 aparts: list, orders: list, unit: float = 1.0) -> dict:
    """Every variable's value in the warm-start schedule (placement and start times in seconds;
    ``unit``: seconds per model time unit)."""
    vals: dict = {}
    pl = place.tolist()
    for (v, d), var in x.items():
        vals[var] = 1.0 if pl[v] == d else 0.0
    st = (start / unit).tolist()
    fin = ((start + problem.duration(place)) / unit).tolist()
    for v in range(problem.n_nodes):
        vals[S[v]] = st[v]
    vals[M] = max(fin)
    for u, w, var in aparts:
        vals[var] = 1.0 if pl[u] != pl[w] else 0.0
    for i, j, y, same in orders:
        vals[y] = 1.0 if (st[i], fin[i]) <= (st[j], fin[j]) else 0.0
        if same is not None:
            vals[same] = 1.0 if pl[i] == pl[j] else 0.0
    return vals


def _export(prob, path: str) -> None:
    """Write the MILP: MPS for ``.mps``, LP format otherwise."""
    try:
        if str(path).lower().endswith(".mps"):
            prob.writeMPS(str(path))
        else:
            prob.writeLP(str(path))
    except OSError as exc:
        raise SolverError(f"milp: option export_model={path!r}: {exc.strerror or exc}") from None


def _fits(problem: Problem, placement: np.ndarray) -> bool:
    """Constraints kept and static memory within every capacity (the MILP's own rows)."""
    return problem.respects_constraints(placement) and bool(
        np.all(fits(static_memory(problem, placement), problem.device_memory)))




def _answer(problem: Problem, mm, incumbent: Solution | None, memory_model: str, backend: str, claims: bool,
            proven: bool, bound: float, limit: float, stats: dict) -> Solution:
    """The backend's solution as a Solution: placement, tightened schedule, bound and claim.

    The placement is re-checked against the static rows and, under peak, against liveness
    (a placement over capacity is never returned); the schedule is the placement's order
    replayed (:func:`~optpart.schedule.replay.tighten_schedule`); the heuristic's schedule
    wins when shorter; ``optimal`` needs the backend's proof *and* the replayed makespan at
    the bound.
    """
    import pulp
    n, k, allowed = problem.n_nodes, problem.n_devices, problem.allowed
    x, S, M = mm.x, mm.S, mm.M
    place = np.empty(n, dtype=np.int64)
    for v in range(n):
        vals = [(x[v, d].varValue or 0.0, -d) for d in range(k) if allowed[v, d]]
        place[v] = -max(vals)[1]
    if not _fits(problem, place):
        raise SolverError(f"milp ({backend}) returned a placement that breaks memory or constraints on "
                          f"'{problem.name}' (solver tolerance)")
    # Starts snapped to 1e-7 of the horizon: backend noise (1e-16 above a zero start) must not
    # put a zero-time node behind a long one that starts at the same time.
    q = 1e-7 * mm.horizon
    raw = np.array([S[v].varValue or 0.0 for v in range(n)], dtype=np.float64)
    key = (np.rint(raw / q) * q if q > 0 else np.zeros(n)) * mm.unit  # horizon 0: every start is 0
    start = xc.tighten_schedule(problem, place, key, key + problem.duration(place))
    real_ms = float((start + problem.duration(place)).max())
    obj = float(pulp.value(M)) * mm.unit if M.varValue is not None else real_ms
    if not claims and overflow_message(problem, place, start, start + problem.duration(place), "peak"):
        # Static rows do not bound liveness: a placement over capacity under peak is never returned.
        stats["milp_breaks_peak"] = True
        return xc.fallback(problem, incumbent, memory_model,
                           "milp: the MILP's placement (static memory rows) breaks peak memory", stats)
    if proven and not np.isfinite(bound):
        bound = obj
    bound = bound * (1 - 1e-9) if np.isfinite(bound) else 0.0  # relative: no absolute floor
    message = ""
    inc_ms = xc.solution_makespan(problem, incumbent) if incumbent is not None else float("inf")
    if inc_ms < real_ms - 1e-12 * max(real_ms, 1.0):
        stats["from_heuristic"] = True
        place, start, real_ms = np.asarray(incumbent.placement, dtype=np.int64), incumbent.start, inc_ms
        message = "the MILP found nothing better than the heuristic's schedule"
    bound = max(0.0, min(bound, real_ms))
    claim = proven and real_ms <= bound + 9e-7 * max(real_ms, 1e-12)
    if proven and not claim:
        message = "; ".join(m for m in (message, f"the backend proved its optimum {obj:.9g}, but the "
                                        f"recomputed makespan is {real_ms:.9g}") if m)
    if not claims:
        message = "; ".join(m for m in (message, "static memory rows under the peak model: no proof or bound "
                                        "claimed") if m)
    if stats["stop_reason"] == "time limit":
        message = "; ".join(m for m in (message, f"stopped by the time limit ({limit:g} s for the call)") if m)
    elif stats["stop_reason"] == "work limit":
        message = "; ".join(m for m in (message, f"stopped by the work limit (max_nodes={stats.get('max_nodes')})")
                            if m)
    stats["objective"] = obj
    return Solution(Status.OPTIMAL if claim else Status.FEASIBLE, placement=place, start=start,
                    lower_bound=bound, message=message, stats=stats, memory_model=memory_model)
