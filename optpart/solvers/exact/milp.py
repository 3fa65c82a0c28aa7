"""``milp``: exact placement and scheduling as a MILP (PuLP with HiGHS or CBC), the independent
cross-check of ``cpsat`` on small graphs.

A call: the heuristic's schedule (the incumbent: the warm start and the big-M), a size check,
the model of :mod:`optpart.solvers.exact.milp_model`, the backend, then the backend's placement
with its device orders replayed in seconds (removing solver tolerances, never delaying a
node); the incumbent when that is shorter. Statuses come from the backend itself, never from
PuLP's ``LpStatus`` (which calls a time-limited run "Optimal"): ``optimal`` only on a proven
optimum with gap 0 whose replayed makespan meets the bound. Memory rows are static: under
``"peak"`` on a graph with the liveness split the placements still fit when the evaluator says
so, and nothing is claimed.
"""

from __future__ import annotations

import math
import os
import re
import sys
import tempfile
import warnings

import numpy as np

from ...errors import SolverError
from ...evaluate import canonical_schedule, problem_lower_bound
from ...model.memory import fits, overflow_message, static_memory
from ...model.problem import Problem
from ...result import Status
from ...schedule.replay import tighten_schedule
from ..base import Solution
from ..spec import Option, SolverSpec
from . import milp_model as mb
from .bounds import reachability
from .call import (Budget, OutOfTime, fallback, solution_makespan, start_from_heuristic, too_big, unlimited,
                   warm_starts)
from .grid import durations, transfer_table

#: Seconds when the caller gives no time limit.
DEFAULT_TIME_LIMIT = 60.0
#: Model terms PuLP builds per second (conservative), and the most ever built.
BUILD_RATE, MAX_TERMS = 20_000.0, 2_000_000

#: Options, memory models and arguments this solver takes (checked by the registry).
SPEC = SolverSpec(
    options=(
        Option("backend", str, "highs", "MILP backend", choices=("highs", "cbc")),
        Option("threads", int, 2, "backend threads when deterministic=false", min=1, max=256),
        Option("deterministic", bool, True, "one thread: reproducible"),
        Option("log", bool, False, "print the backend's log"),
        Option("use_hint", bool, True, "warm start from the heuristic's schedule (never return worse)"),
        Option("export_model", str, None, "write the MILP to this file (.mps, else LP format)", allow_none=True),
        Option("window_cuts", bool, True, "energetic window rows that lift the LP bound (docs/exact.md)"),
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
          export_model: str | None = None, window_cuts: bool = True, max_nodes: int | None = None) -> Solution:
    """Solve ``problem`` exactly (or until ``time_limit``) as a MILP.

    Parameters
    ----------
    problem : Problem
    time_limit : float, optional
    seed : int
    hint : ndarray, optional
        A placement; its canonical schedule is the warm start when shorter than the heuristic's.
    memory_model : {"static", "peak"}
    backend : {"highs", "cbc"}
        HiGHS through highspy (warm-started) or PuLP's bundled CBC.
    threads : int
        Backend threads when ``deterministic`` is False.
    deterministic : bool
        One thread: equal inputs, equal results (time limit aside).
    log : bool
    use_hint : bool
        Start from the heuristic (never return worse).
    export_model : str, optional
        Write the MILP (``.mps``, else LP format).
    window_cuts : bool
        Add the energetic window rows.
    max_nodes : int, optional
        Branch-and-bound nodes at most: a work limit independent of the machine.

    Returns
    -------
    Solution
    """
    budget = Budget(DEFAULT_TIME_LIMIT if time_limit is None else float(time_limit))
    n = problem.n_nodes
    if n == 0:
        return Solution(Status.OPTIMAL, placement=np.zeros(0, dtype=np.int64), start=np.zeros(0),
                        memory_model=memory_model, stats={"stop_reason": "proven optimal"})
    claims = not (memory_model == "peak" and problem.has_split)
    stats: dict = {"backend": backend}
    incumbent = None
    if use_hint or not claims:
        incumbent = start_from_heuristic(problem, stats, time_limit=budget.limit_s, seed=seed,
                                         memory_model=memory_model if problem.has_split else "static")
    reserve = 0.2 + 2e-5 * (n + problem.n_edges)
    stats["model_terms_estimate"] = n_terms = _estimate_terms(problem)
    why = too_big("milp", n_terms, BUILD_RATE, MAX_TERMS, budget, reserve)
    if why is not None:
        stats["stop_reason"] = "model not built"
        return fallback(problem, incumbent, memory_model, why, stats)
    dur, comm = durations(problem), transfer_table(problem)
    warm = _choose_warm(problem, incumbent, hint)
    horizon = _horizon(problem, dur, comm)
    if warm is not None:
        horizon = min(horizon, float((warm[1] + problem.duration(warm[0])).max()))
    horizon = max(horizon * (1 + 1e-9), problem_lower_bound(problem))
    unit = mb.time_unit(horizon)
    try:
        mm = mb.build(problem, dur / unit, comm / unit, horizon / unit, problem_lower_bound(problem) / unit,
                      budget, reserve, windows=window_cuts, unit=unit)
    except OutOfTime as exc:
        stats["stop_reason"] = "model not built"
        return fallback(problem, incumbent, memory_model, f"milp: {exc}", stats)
    if export_model:
        try:
            (mm.prob.writeMPS if str(export_model).lower().endswith(".mps") else mm.prob.writeLP)(str(export_model))
        except OSError as exc:
            raise SolverError(f"milp: option export_model={export_model!r}: {exc.strerror or exc}") from None
    if budget.left() < reserve + 0.3:
        stats["stop_reason"] = "model not built"
        return fallback(problem, incumbent, memory_model, "milp: the time limit ran out while building the model",
                        stats)
    remaining = max(0.1, budget.left() - reserve - n_terms / (4 * BUILD_RATE))
    stats.update(unordered_pairs=len(mm.orders), horizon=horizon)
    if max_nodes is not None:
        stats["max_nodes"] = int(max_nodes)
    values = mb.warm_values(problem, mm, *warm) if warm is not None else None
    run = _run_highs if backend == "highs" else _run_cbc
    status, has_solution, proven, infeasible, bound, node_limit = run(
        mm.prob, values, None if unlimited(remaining) else remaining, 1 if deterministic else int(threads), seed,
        log, max_nodes, stats)
    bound *= mm.unit
    stats["stop_reason"] = ("proven optimal" if proven else "proven infeasible" if infeasible
                            else "work limit" if node_limit else "time limit")
    if not claims:
        bound, proven = float("-inf"), False
    if infeasible:
        if claims:
            return Solution(Status.INFEASIBLE, message=f"the MILP ({backend}) proved that no placement fits "
                            "memory and constraints", stats=stats, memory_model=memory_model)
        return fallback(problem, incumbent, memory_model, "milp: no placement fits the static rows", stats)
    if not has_solution:
        if backend == "highs" and status in ("Model error", "Solve error", "Load error", "Not Set"):
            raise SolverError(f"milp: HiGHS failed on '{problem.name}' ({status})")
        return fallback(problem, incumbent, memory_model, f"milp: the MILP ({backend}) found no solution ({status}; "
                        f"time limit {budget.limit_s:g} s for the call)", stats,
                        lower_bound=max(bound * (1 - 1e-9), 0.0) if np.isfinite(bound) else 0.0)
    return _answer(problem, mm, incumbent, memory_model, backend, claims, proven, bound, budget.limit_s, stats)


def _horizon(problem: Problem, dur: np.ndarray, comm: np.ndarray) -> float:
    """Every node at its slowest and every transfer at its worst, in sequence."""
    h = float(np.where(problem.allowed, dur, 0).max(axis=1).sum())
    return h + (float(comm.reshape(comm.shape[0], -1).max(axis=1).sum()) if comm.size else 0.0)


def root_lp_bound(problem: Problem, *, window_cuts: bool = True, horizon: float | None = None) -> float:
    """The bound of the MILP's LP relaxation at the root (seconds; HiGHS without cuts of its own),
    a valid lower bound of the static-memory problem; measures what the window rows lift.

    Parameters
    ----------
    problem : Problem
    window_cuts : bool
        Add the energetic window rows.
    horizon : float, optional
        The big-M upper bound (default: everything in sequence).

    Returns
    -------
    float
    """
    import pulp
    if problem.n_nodes == 0:
        return 0.0
    dur, comm = durations(problem), transfer_table(problem)
    lb = problem_lower_bound(problem)
    horizon = max(float(_horizon(problem, dur, comm) if horizon is None else horizon) * (1 + 1e-9), lb)
    unit = mb.time_unit(horizon)
    mm = mb.build(problem, dur / unit, comm / unit, horizon / unit, lb / unit, windows=window_cuts, unit=unit)
    for var in mm.prob.variables():
        var.cat = pulp.LpContinuous
    _silence_highs_banner()
    mm.prob.solve(pulp.HiGHS(msg=False, threads=1))
    if mm.prob.status != pulp.LpStatusOptimal:
        raise SolverError(f"milp: the LP relaxation of '{problem.name}' did not solve "
                          f"({pulp.LpStatus[mm.prob.status]})")
    return float(pulp.value(mm.M)) * unit


def _estimate_terms(problem: Problem) -> int:
    """Variables plus terms before building: the order rows of unordered pairs dominate
    (counted exactly up to 4,000 nodes, all pairs above)."""
    n, k, m = problem.n_nodes, problem.n_devices, problem.n_edges
    pairs = n * (n - 1) // 2
    if n <= 4000:
        pairs -= sum(bin(b).count("1") for b in reachability(problem))
    return 4 * n * k + m * (4 + 3 * k) + 64 * n * k + pairs * (8 + 4 * k)


def _fits(problem: Problem, placement: np.ndarray) -> bool:
    return problem.respects_constraints(placement) and bool(
        np.all(fits(static_memory(problem, placement), problem.device_memory)))


def _choose_warm(problem: Problem, incumbent: Solution | None, hint: np.ndarray | None):
    """The shorter of the heuristic's schedule and the hint's canonical one that fit the rows."""
    best = None
    for place, start in warm_starts(incumbent, hint):
        if _fits(problem, place):
            start = np.asarray(canonical_schedule(problem, place)[0] if start is None else start, dtype=np.float64)
            ms = float((start + problem.duration(place)).max())
            if best is None or ms < best[0]:
                best = (ms, place, start)
    return None if best is None else best[1:]


def _answer(problem: Problem, mm, incumbent: Solution | None, memory_model: str, backend: str, claims: bool,
            proven: bool, bound: float, limit: float, stats: dict) -> Solution:
    """The backend's placement with its order replayed in seconds; the incumbent when shorter;
    ``optimal`` when proven and the replayed makespan meets the bound."""
    import pulp
    n, k, allowed = problem.n_nodes, problem.n_devices, problem.allowed
    place = np.array([-max((mm.x[v, d].varValue or 0.0, -d) for d in range(k) if allowed[v, d])[1]
                      for v in range(n)], dtype=np.int64)
    if not _fits(problem, place):
        raise SolverError(f"milp ({backend}) returned a placement that breaks memory or constraints on "
                          f"'{problem.name}' (solver tolerance)")
    q = 1e-7 * mm.horizon  # starts snapped: backend noise must not reorder equal starts
    raw = np.array([s.varValue or 0.0 for s in mm.S], dtype=np.float64)
    key = (np.rint(raw / q) * q if q > 0 else np.zeros(n)) * mm.unit
    start = tighten_schedule(problem, place, key, key + problem.duration(place))
    real_ms = float((start + problem.duration(place)).max())
    obj = float(pulp.value(mm.M)) * mm.unit if mm.M.varValue is not None else real_ms
    if not claims and overflow_message(problem, place, start, start + problem.duration(place), "peak"):
        stats["milp_breaks_peak"] = True
        return fallback(problem, incumbent, memory_model,
                        "milp: the MILP's placement (static memory rows) breaks peak memory", stats)
    if proven and not np.isfinite(bound):
        bound = obj
    bound = bound * (1 - 1e-9) if np.isfinite(bound) else 0.0
    notes = []
    inc_ms = solution_makespan(problem, incumbent) if incumbent is not None else float("inf")
    if inc_ms < real_ms - 1e-12 * max(real_ms, 1.0):
        stats["from_heuristic"] = True
        place, start, real_ms = np.asarray(incumbent.placement, dtype=np.int64), incumbent.start, inc_ms
        notes.append("the MILP found nothing better than the heuristic's schedule")
    bound = max(0.0, min(bound, real_ms))
    claim = proven and real_ms <= bound + 9e-7 * max(real_ms, 1e-12)
    if proven and not claim:
        notes.append(f"the backend proved its optimum {obj:.9g}, but the recomputed makespan is {real_ms:.9g}")
    if not claims:
        notes.append("static memory rows under the peak model: no proof or bound claimed")
    if stats["stop_reason"] == "time limit":
        notes.append(f"stopped by the time limit ({limit:g} s for the call)")
    elif stats["stop_reason"] == "work limit":
        notes.append(f"stopped by the work limit (max_nodes={stats.get('max_nodes')})")
    stats["objective"] = obj
    return Solution(Status.OPTIMAL if claim else Status.FEASIBLE, placement=place, start=start,
                    lower_bound=bound, message="; ".join(notes), stats=stats, memory_model=memory_model)


def _run_highs(prob, warm: dict | None, time_limit, threads: int, seed: int, log: bool, max_nodes, stats: dict):
    """HiGHS, warm-started through ``Highs.setSolution``: ``(status, has solution, proven,
    infeasible, bound, stopped by max_nodes)``; the status is HiGHS's own."""
    import highspy
    import pulp
    if not log:
        _silence_highs_banner()
    if hasattr(highspy.Highs, "resetGlobalScheduler"):  # the thread pool is sized by the first run
        highspy.Highs.resetGlobalScheduler(True)

    class WarmHiGHS(pulp.HiGHS):
        warm_used = False

        def callSolver(self, lp):  # noqa: N802 - PuLP's name
            if warm:
                cols = [0.0] * lp.solverModel.getNumCol()
                for var, val in warm.items():
                    index = getattr(var, "index", None)  # a variable in no row has no column
                    if index is not None and 0 <= index < len(cols):
                        cols[index] = float(val)
                sol = highspy.HighsSolution()
                sol.col_value, sol.value_valid = cols, True
                self.warm_used = lp.solverModel.setSolution(sol) == highspy.HighsStatus.kOk
            lp.solverModel.run()

        def findSolutionValues(self, lp):  # noqa: N802 - PuLP maps no status for the node limit
            try:
                return super().findSolutionValues(lp)
            except KeyError:
                return pulp.LpStatusNotSolved, pulp.LpSolutionIntegerFeasible

    extra = {} if max_nodes is None else {"mip_max_nodes": int(max_nodes)}
    solver = WarmHiGHS(msg=bool(log), timeLimit=time_limit, threads=threads, gapRel=0.0, gapAbs=0.0,
                       random_seed=int(seed) % 2**31, mip_feasibility_tolerance=1e-9, **extra)
    prob.solve(solver)
    h = prob.solverModel
    info = h.getInfo()
    status = h.modelStatusToString(h.getModelStatus())
    stats.update(model_status=status, nodes=int(info.mip_node_count), warm_start=solver.warm_used)
    if math.isfinite(info.mip_gap):
        stats["mip_gap"] = float(info.mip_gap)
    proven = status == "Optimal"
    return (status, info.primal_solution_status == 2, proven,
            status in ("Infeasible", "Primal infeasible or unbounded"),  # every variable is bounded
            float(info.mip_dual_bound), not proven and max_nodes is not None and stats["nodes"] >= max_nodes)


def _run_cbc(prob, warm: dict | None, time_limit, threads: int, seed: int, log: bool, max_nodes, stats: dict):
    """PuLP's bundled CBC (``warmStart``; seed + 1, since CBC reads 0 as the clock); the bound
    and node count are read from its log. Same tuple as :func:`_run_highs`."""
    import pulp
    for var, val in (warm or {}).items():
        var.setInitialValue(val)
    fd, log_path = tempfile.mkstemp(suffix=".log", prefix="optpart_cbc_")
    os.close(fd)
    try:
        with warnings.catch_warnings():  # PuLP 3.3 deprecates the CBC it still ships
            warnings.simplefilter("ignore", DeprecationWarning)
            solver = pulp.PULP_CBC_CMD(msg=bool(log), timeLimit=time_limit, threads=threads, gapRel=0.0, gapAbs=0.0,
                                       logPath=log_path, warmStart=warm is not None,
                                       options=[f"randomSeed {int(seed) % 2**31 + 1}"]
                                       + ([] if max_nodes is None else [f"maxNodes {int(max_nodes)}"]))
        prob.solve(solver)
        with open(log_path) as fh:
            text = fh.read()
    finally:
        os.unlink(log_path)
    has_solution = prob.sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible)
    infeasible = prob.sol_status == pulp.LpSolutionInfeasible or (
        prob.status == pulp.LpStatusInfeasible and not has_solution)
    proven = prob.sol_status == pulp.LpSolutionOptimal
    stats.update(model_status=pulp.LpStatus[prob.status], sol_status=prob.sol_status)
    nodes = re.findall(r"Enumerated nodes:\s+([0-9]+)", text)
    if nodes:
        stats["nodes"] = int(nodes[-1])
    bound = re.findall(r"best possible\s+(-?[0-9.eE+-]+)", text)
    if not bound and "Optimal solution found" in text:
        bound = re.findall(r"Objective value:\s+(-?[0-9.eE+-]+)", text)
    return (pulp.LpStatus[prob.status], has_solution, proven, infeasible,
            float(bound[-1]) if bound else float("-inf"),
            not proven and max_nodes is not None and "node limit" in text.lower())


_BANNER_DONE = False


def _silence_highs_banner() -> None:
    """HiGHS prints a banner when the process creates its first solver: create it into /dev/null."""
    global _BANNER_DONE
    if _BANNER_DONE:
        return
    _BANNER_DONE = True
    import highspy
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError):
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
