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

Times stay in seconds (floats). The returned schedule keeps the MILP's placement and
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

import os
import re
import tempfile
import time as _time
import warnings

import numpy as np

from ..errors import SolverError
from ..evaluate import canonical_schedule, problem_lower_bound
from ..problem import Problem
from ..result import Status
from .base import Solution
from . import _exact_common as xc

__all__ = ["solve", "DEFAULT_TIME_LIMIT"]

#: Seconds when the caller gives no time limit.
DEFAULT_TIME_LIMIT = 60.0


def solve(problem: Problem, *, time_limit: float | None = None, seed: int = 0,
          hint: np.ndarray | None = None, backend: str = "highs", threads: int = 2,
          deterministic: bool = True, log: bool = False, use_hint: bool = True) -> Solution:
    """Solve ``problem`` exactly (or until ``time_limit``) as a MILP.

    Parameters
    ----------
    problem : Problem
        With devices; screened by :meth:`Problem.infeasibility` beforehand.
    time_limit : float, optional
        Seconds for the backend; default 60.
    seed : int
        Backend random seed.
    hint : ndarray, optional
        A placement; its schedule's makespan tightens the big-M.
    backend : {"highs", "cbc"}
    threads : int
        Backend threads when ``deterministic`` is False.
    deterministic : bool
        Default True: one thread, so equal inputs give equal results (time limit aside).
    log : bool
    use_hint : bool

    Returns
    -------
    Solution
    """
    import pulp

    t0 = _time.perf_counter()
    limit = DEFAULT_TIME_LIMIT if time_limit is None else float(time_limit)
    if backend not in ("highs", "cbc"):
        raise SolverError(f"milp: backend={backend!r} must be 'highs' or 'cbc'")
    if threads < 1:
        raise SolverError(f"milp: threads={threads} must be >= 1")
    n, k = problem.n_nodes, problem.n_devices
    if n == 0:
        return Solution(Status.OPTIMAL, placement=np.zeros(0, dtype=np.int64), start=np.zeros(0))
    allowed = problem.allowed
    dur = xc.durations(problem)
    comm = xc.transfer_table(problem)
    lb_s = problem_lower_bound(problem)

    # Upper bound H for the big-M rows: a heuristic's makespan, else everything in sequence.
    horizon = float(np.where(allowed, dur, 0).max(axis=1).sum())
    if comm.size:
        horizon += float(comm.reshape(comm.shape[0], -1).max(axis=1).sum())
    hint_p = np.asarray(hint, dtype=np.int64) if hint is not None else (
        xc.heuristic_hint(problem, seed=seed, time_limit=max(1.0, min(5.0, 0.1 * limit))) if use_hint else None)
    hint_ok = hint_p is not None and _fits(problem, hint_p)
    hint_start = None
    if hint_ok:
        hint_start, f = canonical_schedule(problem, hint_p)
        horizon = min(horizon, float(f.max()))
    horizon = max(horizon * (1 + 1e-9) + 1e-9, lb_s)
    H = horizon

    min_dur = [float(dur[v][allowed[v]].min()) for v in range(n)]
    head, tail = xc.heads_tails(problem, min_dur)

    prob = pulp.LpProblem(f"optpart_{_safe(problem.name)}", pulp.LpMinimize)
    group_of = problem.group_of.tolist()
    leader = [v if group_of[v] < 0 else int(problem.groups[group_of[v]][0]) for v in range(n)]
    x: dict[tuple[int, int], pulp.LpVariable] = {}
    for v in range(n):
        for d in range(k):
            if allowed[v, d]:
                x[v, d] = x[leader[v], d] if leader[v] != v else _var(prob, f"x_{v}_{d}", cat="Binary")
    S = [_var(prob, f"S_{v}", lowBound=head[v], upBound=max(head[v], H - tail[v] - min_dur[v]))
         for v in range(n)]
    M = _var(prob, "makespan", lowBound=lb_s, upBound=H)
    prob += M

    def p(v: int):
        devs = [d for d in range(k) if allowed[v, d]]
        vals = {float(dur[v, d]) for d in devs}
        if len(vals) == 1:
            return vals.pop()
        return pulp.lpSum(float(dur[v, d]) * x[v, d] for d in devs)

    # Each node on exactly one device.
    for v in range(n):
        if leader[v] == v:
            prob += pulp.lpSum(x[v, d] for d in range(k) if allowed[v, d]) == 1, f"one_{v}"
    # Makespan covers every finish plus the node's tail.
    for v in range(n):
        prob += M >= S[v] + p(v) + tail[v], f"end_{v}"

    # Precedence with communication delays.
    uniform = xc.uniform_transfers(comm) if comm.size else np.ones(0, dtype=bool)
    src, dst = problem.edge_src.tolist(), problem.edge_dst.tolist()
    for e in range(problem.n_edges):
        u, w = src[e], dst[e]
        du = [d for d in range(k) if allowed[u, d]]
        dw = [d for d in range(k) if allowed[w, d]]
        pairs = [(a, b) for a in du for b in dw if a != b]
        if leader[u] == leader[w] or not pairs or max(float(comm[e, a, b]) for a, b in pairs) == 0:
            prob += S[w] >= S[u] + p(u), f"prec_{e}"
        elif uniform[e]:
            c = float(comm[e, pairs[0][0], pairs[0][1]])
            apart = _var(prob, f"apart_{e}", lowBound=0, upBound=1)
            for d in du:
                prob += apart >= x[u, d] - (x[w, d] if allowed[w, d] else 0), f"apart_{e}_{d}"
            prob += S[w] >= S[u] + p(u) + c * apart, f"prec_{e}"
        else:
            prob += S[w] >= S[u] + p(u), f"prec_{e}"
            for a, b in pairs:
                c = float(comm[e, a, b])
                if c > 0:
                    prob += S[w] >= S[u] + p(u) + c * (x[u, a] + x[w, b] - 1), f"prec_{e}_{a}_{b}"

    # Unordered pairs that may share a device never overlap there.
    desc = xc.reachability(problem)
    n_pairs = 0
    for i in range(n):
        for j in range(i + 1, n):
            if (desc[i] >> j) & 1 or (desc[j] >> i) & 1:
                continue
            common = [d for d in range(k) if allowed[i, d] and allowed[j, d]]
            if not common:
                continue
            y = _var(prob, f"y_{i}_{j}", cat="Binary")
            if leader[i] == leader[j]:
                prob += S[j] >= S[i] + p(i) - H * (1 - y), f"ord_{i}_{j}"
                prob += S[i] >= S[j] + p(j) - H * y, f"ord_{j}_{i}"
            else:
                same = _var(prob, f"same_{i}_{j}", lowBound=0, upBound=1)
                for d in common:
                    prob += same >= x[i, d] + x[j, d] - 1, f"same_{i}_{j}_{d}"
                prob += S[j] >= S[i] + p(i) - H * (1 - y) - H * (1 - same), f"ord_{i}_{j}"
                prob += S[i] >= S[j] + p(j) - H * y - H * (1 - same), f"ord_{j}_{i}"
            n_pairs += 1

    # Static memory per device and the load of each device.
    cap = problem.device_memory
    for d in range(k):
        nodes = [v for v in range(n) if allowed[v, d]]
        if np.isfinite(cap[d]) and float(problem.memory[nodes].sum()) > cap[d]:
            prob += pulp.lpSum(float(problem.memory[v]) * x[v, d] for v in nodes) <= float(cap[d]), f"mem_{d}"
        terms = [float(dur[v, d]) * x[v, d] for v in nodes if dur[v, d] > 0]
        if terms:
            prob += pulp.lpSum(terms) <= M, f"load_{d}"
    prob += pulp.lpSum(float(dur[v, d]) * x[v, d] for (v, d) in x) <= k * M, "work"

    remaining = max(0.1, limit - (_time.perf_counter() - t0))
    n_threads = 1 if deterministic else int(threads)
    stats: dict = {"backend": backend, "unordered_pairs": n_pairs, "horizon": H}
    if backend == "highs":
        if not log:
            _silence_highs_banner()
        # HiGHS keeps one thread pool per process, sized by the first run; a later run
        # asking for another thread count fails unless the pool is reset first.
        import highspy
        if hasattr(highspy.Highs, "resetGlobalScheduler"):
            highspy.Highs.resetGlobalScheduler(True)
        solver = pulp.HiGHS(msg=bool(log), timeLimit=remaining, threads=n_threads, gapRel=0.0, gapAbs=0.0,
                            random_seed=int(seed) % 2**31, mip_feasibility_tolerance=1e-9)
        prob.solve(solver)
        h = prob.solverModel
        info = h.getInfo()
        model_status = h.modelStatusToString(h.getModelStatus())
        has_solution = info.primal_solution_status == 2  # kSolutionStatusFeasible
        bound = float(info.mip_dual_bound)
        proven = model_status == "Optimal"
        # Every variable is bounded, so "infeasible or unbounded" means infeasible.
        infeasible = model_status in ("Infeasible", "Primal infeasible or unbounded")
        stats.update(model_status=model_status, nodes=int(info.mip_node_count))
        if np.isfinite(info.mip_gap):
            stats["mip_gap"] = float(info.mip_gap)
    else:
        fd, log_path = tempfile.mkstemp(suffix=".log", prefix="optpart_cbc_")
        os.close(fd)
        try:
            with warnings.catch_warnings():  # PuLP 3.3 deprecates the bundled CBC it still ships
                warnings.simplefilter("ignore", DeprecationWarning)
                solver = pulp.PULP_CBC_CMD(msg=bool(log), timeLimit=remaining, threads=n_threads, gapRel=0.0,
                                           gapAbs=0.0, logPath=log_path,
                                           options=[f"randomSeed {int(seed) % 2**31 + 1}"])
            prob.solve(solver)
            with open(log_path) as fh:
                text = fh.read()
        finally:
            os.unlink(log_path)
        model_status = pulp.LpStatus[prob.status]
        has_solution = prob.sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible)
        proven = prob.sol_status == pulp.LpSolutionOptimal
        infeasible = (prob.sol_status == pulp.LpSolutionInfeasible
                      or (prob.status == pulp.LpStatusInfeasible and not has_solution))
        bound = _cbc_bound(text)
        stats.update(model_status=model_status, sol_status=prob.sol_status)
    if infeasible:
        return Solution(Status.INFEASIBLE, message=f"the MILP ({backend}) proved that no placement fits "
                        "memory and constraints", stats=stats)
    if not has_solution:
        if backend == "highs" and model_status in ("Model error", "Solve error", "Load error", "Not Set"):
            raise SolverError(f"milp: HiGHS failed on '{problem.name}' ({model_status})")
        if hint_ok:
            # Nothing better than the hint: return it, valid, with the MILP's bound.
            lb = bound - 1e-9 * max(abs(bound), 1.0) if np.isfinite(bound) else 0.0
            stats["from_hint"] = True
            return Solution(Status.FEASIBLE, placement=hint_p, start=hint_start, lower_bound=max(lb, 0.0),
                            message=f"the MILP ({backend}) found no solution within {limit:g} s; "
                                    "this is the hint placement with the MILP's bound", stats=stats)
        return Solution(Status.UNKNOWN, message=f"the MILP ({backend}) found no placement within {limit:g} s "
                        f"({model_status})", stats=stats)

    place = np.empty(n, dtype=np.int64)
    for v in range(n):
        vals = [(x[v, d].varValue or 0.0, -d) for d in range(k) if allowed[v, d]]
        place[v] = -max(vals)[1]
    if not _fits(problem, place):
        raise SolverError(f"milp ({backend}) returned a placement that breaks memory or constraints on "
                          f"'{problem.name}' (solver tolerance)")
    key = np.array([S[v].varValue or 0.0 for v in range(n)], dtype=np.float64)
    start = xc.tighten_schedule(problem, place, key, key + problem.duration(place))
    real_ms = float((start + problem.duration(place)).max())
    obj = float(pulp.value(M)) if M.varValue is not None else real_ms
    if proven and not np.isfinite(bound):
        bound = obj
    bound = bound - 1e-9 * max(abs(bound), 1.0) if np.isfinite(bound) else 0.0
    bound = max(0.0, min(bound, real_ms))
    claim = proven and real_ms <= bound + 9e-7 * max(real_ms, 1e-12)
    message = "" if claim or not proven else (
        f"the backend proved its optimum {obj:.9g}, but the recomputed makespan is {real_ms:.9g}")
    stats["objective"] = obj
    return Solution(Status.OPTIMAL if claim else Status.FEASIBLE, placement=place, start=start,
                    lower_bound=bound, message=message, stats=stats)


_BANNER_DONE = False


def _silence_highs_banner() -> None:
    """HiGHS prints a banner on stdout when the process creates its first solver object;
    create that first object with stdout pointed at /dev/null."""
    global _BANNER_DONE
    if _BANNER_DONE:
        return
    _BANNER_DONE = True
    import sys
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


def _var(prob, name: str, lowBound=None, upBound=None, cat: str = "Continuous"):
    """A variable attached to ``prob`` (PuLP >= 3.3 API, with the older one as fallback)."""
    import pulp
    if hasattr(prob, "add_variable"):
        return prob.add_variable(name, lowBound, upBound, cat=cat)
    return pulp.LpVariable(name, lowBound=lowBound, upBound=upBound, cat=cat)


def _fits(problem: Problem, placement: np.ndarray) -> bool:
    n = problem.n_nodes
    if placement.shape != (n,) or not problem.allowed[np.arange(n), placement].all():
        return False
    for members in problem.groups:
        if np.unique(placement[members]).size > 1:
            return False
    used = np.bincount(placement, weights=problem.memory, minlength=problem.n_devices)
    return bool((used <= problem.device_memory * (1 + 1e-9) + 1e-9).all())


def _cbc_bound(log_text: str) -> float:
    """CBC's best bound from its log ("best possible" or an optimal objective), else -inf."""
    found = re.findall(r"best possible\s+(-?[0-9.eE+-]+)", log_text)
    if found:
        return float(found[-1])
    found = re.findall(r"Objective value:\s+(-?[0-9.eE+-]+)", log_text)
    if found and "Optimal solution found" in log_text:
        return float(found[-1])
    return float("-inf")


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)[:40] or "problem"
