"""``cpsat``: exact placement and scheduling with OR-Tools CP-SAT.

The model, top-down (names as in the code):

* ``x[v, d]``: node ``v`` runs on device ``d`` (only for allowed pairs); exactly one per
  node; nodes of a colocation group share their literals.
* ``S[v]``, ``E[v]``: start and end; one optional interval ``S[v] .. E[v]`` of length
  ``dur(v, d)`` per allowed device, present iff ``x[v, d]``; ``AddNoOverlap`` per device.
* Edge ``(u, w)``: ``S[w] >= E[u]``, plus the transfer when the ends are apart. With the
  same transfer time ``c`` between every device pair, a literal ``apart[e]`` is forced
  true whenever the devices differ (``x[u, d] and not x[w, d] -> apart``) and
  ``S[w] >= E[u] + c * apart``. With per-pair links, for each device ``a`` of ``u``:
  ``x[u, a] -> S[w] >= E[u] + sum_b c(a, b) x[w, b]``, which is exact because exactly
  one ``x[w, b]`` holds and ``c(a, a) = 0``.
* Static memory: ``sum_v memory(v) x[v, d] <= memory(d)`` per device.
* Peak memory (``memory_model="peak"`` on a graph with the param/output/temp split): one
  ``AddCumulative`` per device, of capacity ``memory(d) - sum_v param(v) x[v, d]``, over
  optional intervals for temporaries, outputs and received copies (see
  :func:`_add_peak_memory`). Starts are then CP-SAT's own, not tightened afterwards.
* Objective: the makespan ``M >= E[v]``. Redundant rows that tighten the bound: the load
  of each device, the total load over all devices, heads and tails (critical path
  at the fastest speed) on every start.
* Symmetry: within each class of interchangeable devices (same memory, speed, allowed
  nodes and links) devices are used in order of first use along the topological order.
* Hint: a placement (the ``hint`` argument, else ``heft`` when installed) relabelled to
  that first-use order, with a full integer schedule, through ``AddHint``.

**Time is integral in CP-SAT.** When every duration and transfer is a whole number of
``1/scale`` seconds for a round scale (STG: scale 1) the model is the real problem and
CP-SAT's proof is a proof. Otherwise durations and transfers are rounded *up* on a
fine power-of-ten grid (the worst rounding loss along a chain is about 2e-7 of the
makespan): the integer schedule is then valid in seconds, and the bound returned is
CP-SAT's bound minus the most rounding any chain can gain (see
:class:`~optpart.solvers._exact_common.TimeGrid`), so it stays a valid lower bound of the
real problem. The returned schedule keeps CP-SAT's placement and device orders with
start times recomputed in seconds (never later). ``optimal`` is claimed only when CP-SAT
proved its model optimal *and* the real makespan meets the real bound within 1e-6.

Memory rows are exact for whole-byte memories (the usual case); otherwise they are
rounded conservatively, and then neither ``optimal`` nor ``infeasible`` is claimed.

Statuses: ``optimal`` (proven as above), ``feasible`` (with the bound), ``infeasible``
(CP-SAT proved no placement fits), ``unknown`` (nothing found within the time limit).

Options: ``deterministic`` (default True: one thread, CP-SAT's interleaved portfolio,
the same answer run after run), ``workers`` (parallel CP-SAT workers when
``deterministic=False``, default 4), ``log`` (print the CP-SAT search log), ``memory_model``
(``"static"`` or ``"peak"``; without the peak split both are the static rows), ``use_hint``
(default True: compute a ``heft`` hint when none is given).

Under ``"peak"`` the model is exact when the time grid is exact and no zero-time node holds
or receives memory; otherwise it is conservative and ``optimal``/``infeasible`` are not
claimed (``feasible``/``unknown`` instead, with only the generic lower bound).

References: Laborie, Rogerie, Shaw, Vilim, "IBM ILOG CP optimizer for scheduling",
Constraints 23 (2018) (optional intervals); Perron, Didier, Gay, "The CP-SAT-LP solver",
CP 2023; Tang, Yi et al. on exact DAG scheduling with communication delays (ILP/CP
formulations of P|prec,c_ij|C_max).
"""

from __future__ import annotations

import time as _time

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
          hint: np.ndarray | None = None, workers: int = 4, deterministic: bool = True,
          log: bool = False, memory_model: str = "static", use_hint: bool = True,
          parameters: dict | None = None) -> Solution:
    """Solve ``problem`` to optimality (or until ``time_limit``) with CP-SAT.

    Parameters
    ----------
    problem : Problem
        With devices; screened by :meth:`Problem.infeasibility` beforehand.
    time_limit : float, optional
        Seconds for the whole call (model building included); default 60.
    seed : int
        CP-SAT ``random_seed``.
    hint : ndarray, optional
        A placement to start from.
    workers : int
        CP-SAT ``num_workers`` when ``deterministic`` is False.
    deterministic : bool
        Default True: one thread running CP-SAT's subsolver portfolio interleaved in
        deterministic batches, so equal inputs give equal results (unless the time limit
        stops the search). It was also the fastest setting on a 2-core machine. False runs
        ``workers`` threads in parallel (faster with many cores, not reproducible).
    log : bool
        Print CP-SAT's progress log.
    memory_model : {"static", "peak"}
        ``"peak"``: liveness memory of MODEL.md section 3 (equal to static without the split).
    use_hint : bool
        When no ``hint`` is given, start from a ``heft`` placement if that solver exists.
    parameters : dict, optional
        Raw CP-SAT parameters (``SatParameters`` field names), applied last; for experts.

    Returns
    -------
    Solution
    """
    from ortools.sat.python import cp_model

    t0 = _time.perf_counter()
    limit = DEFAULT_TIME_LIMIT if time_limit is None else float(time_limit)
    if memory_model not in ("static", "peak"):
        raise SolverError(f"cpsat: memory_model={memory_model!r} must be 'static' or 'peak'")
    # Peak memory differs from static only with the split; without it the static rows are exact.
    peak = memory_model == "peak" and problem.has_split
    if workers < 1:
        raise SolverError(f"cpsat: workers={workers} must be >= 1")
    n, k = problem.n_nodes, problem.n_devices
    if n == 0:
        return Solution(Status.OPTIMAL, placement=np.zeros(0, dtype=np.int64), start=np.zeros(0),
                        memory_model=memory_model)

    allowed = problem.allowed
    dur_s = xc.durations(problem)
    comm_s = xc.transfer_table(problem)
    lb_s = problem_lower_bound(problem)
    mem, cap, mem_exact = xc.integral_memory(problem)
    if peak:
        pk_param, pk_out, pk_temp, cap, mem_exact = _peak_bytes(problem)
    classes = xc.device_classes(problem)

    # Hint placement: given, else a heuristic; relabelled to first-use order of each class.
    topo = problem.topo
    hint_p = None
    if hint is not None:
        hint_p = np.asarray(hint, dtype=np.int64)
    elif use_hint:
        hint_p = xc.heuristic_hint(problem, seed=seed, time_limit=max(1.0, min(5.0, 0.1 * limit)))
    upper_s = None
    if hint_p is not None:
        hint_p = xc.relabel(hint_p, classes, topo)
        if not _fits(problem, hint_p, mem, np.full(k, -1, dtype=np.int64) if peak else cap):
            hint_p = None
        else:
            upper_s = 1.01 * float(canonical_schedule(problem, hint_p)[1].max())

    # The time grid (see the module docstring): exact when it can be, else fine.
    grid = xc.time_grid(dur_s, comm_s, horizon_s=max(lb_s, 1e-9), upper_s=upper_s)
    dur = np.where(allowed, grid.up(np.where(allowed, dur_s, 0.0)), 0)
    comm = grid.up(comm_s) if comm_s.size else np.zeros((0, k, k), dtype=np.int64)

    # Horizon: every node in sequence at its slowest allowed speed, every transfer at its worst.
    horizon = int(dur.max(axis=1).sum() + (comm.reshape(comm.shape[0], -1).max(axis=1).sum() if comm.size else 0))
    horizon = max(horizon, 1)

    hint_start = None
    if hint_p is not None:
        hint_start = _integer_schedule(problem, hint_p, dur, comm)
    if hint_p is not None and not peak:  # under peak the hint's schedule may not fit memory
        horizon = min(horizon, int(max(hint_start[v] + dur[v, hint_p[v]] for v in range(n))))

    model = cp_model.CpModel()
    min_dur = [int(dur[v][allowed[v]].min()) for v in range(n)]
    head, tail = xc.heads_tails(problem, min_dur)
    pooled = False if peak else _pooled(problem, classes, comm, mem, cap, min_dur)

    # Variables: assignment literals (shared inside colocation groups), start, end.
    x: dict[tuple[int, int], object] = {}
    group_of = problem.group_of.tolist()
    leader = [v if group_of[v] < 0 else int(problem.groups[group_of[v]][0]) for v in range(n)]
    for v in range(n):
        for d in range(k):
            if allowed[v, d] and not pooled:
                x[v, d] = x[leader[v], d] if leader[v] != v else model.NewBoolVar(f"x_{v}_{d}")
    S, E = [], []
    for v in range(n):
        hi_s = horizon - tail[v] - min_dur[v]
        if hi_s < head[v]:
            hi_s = head[v]  # the hint's horizon is reachable; keep the domain non-empty
        S.append(model.NewIntVar(head[v], hi_s, f"S_{v}"))
        E.append(model.NewIntVar(head[v] + min_dur[v], max(horizon - tail[v], head[v] + min_dur[v]), f"E_{v}"))
    makespan = model.NewIntVar(0, horizon, "makespan")
    if pooled:
        # Identical devices, free transfers, no memory or constraint that binds: a schedule
        # with at most k nodes running at once is a placement (interval colouring), so the
        # cumulative below is the whole resource model. Zero-time sources start at 0.
        for v in range(n):
            if min_dur[v] == 0 and problem.in_ptr[v] == problem.in_ptr[v + 1]:
                model.Add(S[v] == 0)

    # Each node on exactly one device (once per group: members share the literals).
    for v in range(n):
        if leader[v] == v and not pooled:
            model.AddExactlyOne([x[v, d] for d in range(k) if allowed[v, d]])

    # One optional interval per allowed (node, device); no overlap on a device.
    per_device: list[list] = [[] for _ in range(k)]
    for v in range(n):
        devs = [d for d in range(k) if allowed[v, d]]
        if pooled:
            model.Add(E[v] == S[v] + int(dur[v, 0]))
            continue
        if len(devs) == 1 or len({int(dur[v, d]) for d in devs}) == 1:
            model.Add(E[v] == S[v] + int(dur[v, devs[0]]))
            for d in devs:
                per_device[d].append(model.NewOptionalFixedSizeIntervalVar(
                    S[v], int(dur[v, d]), x[v, d], f"I_{v}_{d}"))
        else:
            for d in devs:
                per_device[d].append(model.NewOptionalIntervalVar(
                    S[v], int(dur[v, d]), E[v], x[v, d], f"I_{v}_{d}"))
    for d in range(k):
        if len(per_device[d]) > 1:
            model.AddNoOverlap(per_device[d])
    # Redundant: at most k nodes run at any time (energetic reasoning across devices).
    if k > 1 and n > k:
        whole = []
        for v in range(n):
            sizes = sorted({int(dur[v, d]) for d in range(k) if allowed[v, d]})
            size = sizes[0] if len(sizes) == 1 else model.NewIntVar(sizes[0], sizes[-1], f"len_{v}")
            whole.append(model.NewIntervalVar(S[v], size, E[v], f"I_{v}"))
        model.AddCumulative(whole, [1] * n, k)

    if peak:
        # NoOverlap ignores zero-size intervals, and the schedule is not re-sequenced after
        # solving under peak: keep zero-time nodes out of the inside of runs on their device.
        for w in range(n):
            if min_dur[w] > 0 or problem.time[w] > 0:
                continue
            for u in range(n):
                common = [d for d in range(k) if allowed[w, d] and allowed[u, d]]
                if u == w or not common or int(dur[u][allowed[u]].max()) == 0:
                    continue
                before = model.NewBoolVar(f"zb_{w}_{u}")
                for d in common:
                    model.Add(S[w] <= S[u]).OnlyEnforceIf([before, x[w, d], x[u, d]])
                    model.Add(S[w] >= E[u]).OnlyEnforceIf([before.Not(), x[w, d], x[u, d]])

    # Precedence with communication delays.
    uniform = xc.uniform_transfers(comm) if comm.size else np.ones(0, dtype=bool)
    src, dst = problem.edge_src.tolist(), problem.edge_dst.tolist()
    for e in range(problem.n_edges):
        u, w = src[e], dst[e]
        du = [d for d in range(k) if allowed[u, d]]
        dw = [d for d in range(k) if allowed[w, d]]
        model.Add(S[w] >= E[u])
        if leader[u] == leader[w] or k == 1 or pooled:
            continue  # always on one device
        pairs = [(a, b) for a in du for b in dw if a != b]
        if not pairs or max(int(comm[e, a, b]) for a, b in pairs) == 0:
            continue
        if uniform[e]:
            c = int(comm[e, pairs[0][0], pairs[0][1]])
            apart = model.NewBoolVar(f"apart_{e}")
            for d in du:
                if allowed[w, d]:
                    model.AddBoolOr([x[u, d].Not(), apart, x[w, d]])
                else:
                    model.AddImplication(x[u, d], apart)
            model.Add(S[w] >= E[u] + c * apart)
        else:
            for a in du:
                terms = [int(comm[e, a, b]) * x[w, b] for b in dw if b != a and comm[e, a, b] > 0]
                if terms:
                    model.Add(S[w] >= E[u] + sum(terms)).OnlyEnforceIf(x[u, a])

    # Memory: peak (liveness) through cumulatives, else static rows per device.
    if peak:
        _add_peak_memory(model, problem, x, S, E, makespan, dur, comm, horizon,
                         pk_param, pk_out, pk_temp, cap, grid.exact)
    for d in ([] if peak else range(k)):
        if cap[d] < 0:
            continue
        nodes = [v for v in range(n) if allowed[v, d] and mem[v] > 0]
        if sum(int(mem[v]) for v in nodes) > cap[d] and not pooled:
            model.Add(sum(int(mem[v]) * x[v, d] for v in nodes) <= int(cap[d]))

    # Objective and redundant bound rows: makespan covers every end, every device's load
    # and the total load; heads/tails are in the domains above.
    for v in range(n):
        model.Add(makespan >= E[v] + tail[v])
    loads = []
    for d in range(k):
        if pooled:
            break
        terms = [int(dur[v, d]) * x[v, d] for v in range(n) if allowed[v, d] and dur[v, d] > 0]
        if terms:
            load = sum(terms)
            model.Add(load <= makespan)
            loads.append(load)
    if len(loads) > 1:
        model.Add(sum(loads) <= k * makespan)
    if pooled:
        model.Add(int(dur[:, 0].sum()) <= k * makespan)
    model.Add(makespan >= int(np.ceil(lb_s * grid.scale * (1 - 1e-9))) - int(np.ceil(grid.slack_units))
              if lb_s > 0 else makespan >= 0)
    model.Minimize(makespan)

    # Symmetry: devices of a class are used in order of first use along the topological order.
    for cls in ([] if pooled else classes):
        seen: list[int] = []  # earlier nodes (leaders) that may use the class
        done_leaders: set[int] = set()
        for v in topo.tolist():
            lv = leader[v]
            if lv in done_leaders or not allowed[lv, cls[0]]:
                continue
            done_leaders.add(lv)
            for j in range(1, len(cls)):
                if not seen:
                    model.Add(x[lv, cls[j]] == 0)
                else:
                    model.Add(x[lv, cls[j]] <= sum(x[u, cls[j - 1]] for u in seen))
            seen.append(lv)

    # Hint: the placement and its integer schedule.
    if hint_p is not None and hint_start is not None:
        for (v, d), lit in x.items():
            if leader[v] == v:
                model.AddHint(lit, int(hint_p[v] == d))
        for v in range(n):
            model.AddHint(S[v], int(hint_start[v]))
            model.AddHint(E[v], int(hint_start[v] + dur[v, hint_p[v]]))

    # Search: placement literals first, then each start at its earliest value (the
    # "set times" idea of Le Pape et al.); the portfolio workers use their own searches.
    lits = [x[v, d] for (v, d) in sorted(x) if leader[v] == v]
    if lits:
        model.AddDecisionStrategy(lits, cp_model.CHOOSE_FIRST, cp_model.SELECT_MAX_VALUE)
    model.AddDecisionStrategy(S, cp_model.CHOOSE_LOWEST_MIN, cp_model.SELECT_MIN_VALUE)
    model.AddDecisionStrategy(E + [makespan], cp_model.CHOOSE_FIRST, cp_model.SELECT_MIN_VALUE)

    solver = cp_model.CpSolver()
    params = solver.parameters
    params.max_time_in_seconds = max(0.1, limit - (_time.perf_counter() - t0))
    params.random_seed = int(seed)
    params.num_workers = int(workers)
    if deterministic:
        # One thread running CP-SAT's portfolio of subsolvers interleaved in deterministic
        # batches: identical results run after run, and far stronger than one plain worker.
        params.num_workers = 1
        params.interleave_search = True
    params.log_search_progress = bool(log)
    for key, value in (parameters or {}).items():
        if not hasattr(params, key):
            raise SolverError(f"cpsat: unknown CP-SAT parameter '{key}'")
        setattr(params, key, value)
    code = solver.Solve(model)

    stats = {"pooled": pooled, "scale": grid.scale, "exact_time": grid.exact, "exact_memory": mem_exact,
             "cpsat_status": solver.StatusName(code), "symmetry_classes": [list(c) for c in classes]}
    if deterministic:  # search counters repeat only in deterministic mode
        stats["branches"] = int(solver.NumBranches())
    if code == cp_model.MODEL_INVALID:
        raise SolverError(f"cpsat built an invalid model for '{problem.name}': {model.Validate()}")
    # Under peak on an inexact time grid the model is conservative (rounded-up times change
    # liveness), so neither its bound nor its infeasibility carries over to the real problem.
    # A zero-time node gives zero-length intervals; real times may then separate two of
    # them by less than one grid unit, which the integer model cannot, so again no proof.
    bound_valid = not peak or (grid.exact and not _has_instants(problem))
    stats["peak_model"] = peak
    if code == cp_model.INFEASIBLE:
        if mem_exact and bound_valid:
            return Solution(Status.INFEASIBLE, message="CP-SAT proved that no placement fits memory and "
                            "constraints", stats=stats, memory_model=memory_model)
        return Solution(Status.UNKNOWN, message="CP-SAT found no placement within the conservatively "
                        + ("modelled peak memory" if peak else "rounded memory rows"),
                        stats=stats, memory_model=memory_model)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        if hint_p is not None and hint_start is not None:
            # Nothing better than the hint: return it, valid, with CP-SAT's bound.
            ends = hint_start + dur[np.arange(n), hint_p]
            start = xc.tighten_schedule(problem, hint_p, hint_start, ends)
            if peak and not _peak_fits(problem, hint_p, start):
                return Solution(Status.UNKNOWN, message=f"CP-SAT found no placement within {limit:g} s",
                                lower_bound=grid.bound_seconds(solver.BestObjectiveBound()) if bound_valid else 0.0,
                                stats=stats, memory_model=memory_model)
            stats["from_hint"] = True
            return Solution(Status.FEASIBLE, placement=hint_p, start=start,
                            lower_bound=grid.bound_seconds(solver.BestObjectiveBound()) if bound_valid else 0.0,
                            message=f"CP-SAT found no solution within {limit:g} s; this is the hint "
                                    "placement with CP-SAT's bound", stats=stats, memory_model=memory_model)
        return Solution(Status.UNKNOWN, message=f"CP-SAT found no placement within {limit:g} s",
                        lower_bound=(grid.bound_seconds(solver.BestObjectiveBound())
                                     if code == cp_model.UNKNOWN and bound_valid else 0.0),
                        stats=stats, memory_model=memory_model)

    s_int = np.array([solver.Value(S[v]) for v in range(n)], dtype=np.float64)
    if pooled:
        place, s_int = _colour(problem, s_int, dur[:, 0].tolist())
    else:
        place = np.empty(n, dtype=np.int64)
        for v in range(n):
            place[v] = next(d for d in range(k) if allowed[v, d] and solver.BooleanValue(x[v, d]))
    e_int = s_int + dur[np.arange(n), place]
    if peak:
        # Keep CP-SAT's own start times: moving starts earlier (as tightening does) changes
        # which tensors are live together. Every real interval lies inside its model interval.
        start = s_int / grid.scale
        if not _peak_fits(problem, place, start):
            # Float rounding at equal times (an end a hair after a start) can add up two
            # tensors the model kept apart: shift nodes by tiny offsets that put every end
            # before the starts it meets in the integer schedule, else try the tightened one.
            stats["peak_float_fix"] = True
            start = next((c for c in (_separate_ties(problem, place, s_int, e_int, comm, grid.scale),
                                      xc.tighten_schedule(problem, place, s_int, e_int))
                          if c is not None and _peak_fits(problem, place, c)), None)
        if start is None:
            # Only float rounding of the times in seconds can get here; never return it.
            stats["peak_check_failed"] = True
            return Solution(Status.UNKNOWN, message="CP-SAT's schedule exceeds peak memory once converted "
                            "to seconds (floating-point rounding at equal times)",
                            lower_bound=grid.bound_seconds(solver.BestObjectiveBound()) if bound_valid else 0.0,
                            stats=stats, memory_model=memory_model)
    else:
        start = xc.tighten_schedule(problem, place, s_int, e_int)
    real_ms = float((start + problem.duration(place)).max())
    bound = grid.bound_seconds(solver.BestObjectiveBound()) if bound_valid else 0.0
    if code == cp_model.OPTIMAL and grid.exact:
        bound = max(bound, solver.ObjectiveValue() / grid.scale)
    bound = min(bound, real_ms)
    stats["objective_units"] = solver.ObjectiveValue()
    proven = (code == cp_model.OPTIMAL and mem_exact and bound_valid
              and real_ms <= bound + 9e-7 * max(real_ms, 1e-12))
    message = ""
    if code == cp_model.OPTIMAL and not proven:
        message = (f"CP-SAT proved its model optimal on a time grid of 1/{grid.scale:g} s; rounding "
                   "leaves the gap shown" if mem_exact and bound_valid else
                   "CP-SAT proved its model optimal, but peak memory is modelled conservatively here "
                   "(zero-time nodes holding memory, or an inexact time grid)" if mem_exact else
                   "CP-SAT proved its model optimal, but memory rows were rounded conservatively")
    return Solution(Status.OPTIMAL if proven else Status.FEASIBLE, placement=place, start=start,
                    lower_bound=bound, message=message, stats=stats, memory_model=memory_model)


def _peak_bytes(problem: Problem) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]:
    """Integer ``param``/``output``/``temp`` bytes and capacities for the peak model.

    Exact (as :func:`~optpart.solvers._exact_common.integral_memory`) when every figure is a
    whole number of ``1/s`` bytes for ``s`` in 1, 10, ..., 1e6; otherwise bytes are rounded
    up and capacities down on a scale near 1e12, which is conservative (``exact=False``).
    Infinite capacities map to -1 (no constraint).
    """
    arrs = [np.asarray(a, dtype=np.float64) for a in (problem.param_bytes, problem.output_bytes,
                                                       problem.temp_bytes)]
    cap = problem.device_memory
    finite = np.isfinite(cap)
    cap0 = np.where(finite, cap, 0.0)
    allb = np.concatenate(arrs)
    # Worst sum on a device: every param, every output (produced and received), every temp.
    total = float(arrs[0].sum() + 2 * arrs[1].sum() + arrs[2].sum()) + float(cap0.max(initial=0.0)) + 1.0
    for s in (1, 10, 100, 1000, 10**4, 10**5, 10**6):
        if total * s >= 2**53:
            break
        if xc._integral(allb * s):
            ints = [np.rint(a * s).astype(np.int64) for a in arrs]
            c_int = np.where(finite, np.floor(cap0 * s), -1).astype(np.int64)
            return ints[0], ints[1], ints[2], c_int, True
    s = 1e12 / total
    ints = [np.ceil(a * s - 1e-9).astype(np.int64) for a in arrs]
    c_int = np.where(finite, np.floor(cap0 * s), -1).astype(np.int64)
    return ints[0], ints[1], ints[2], c_int, False


def _separate_ties(problem: Problem, place: np.ndarray, s_int: np.ndarray, e_int: np.ndarray,
                   comm: np.ndarray, scale: float) -> np.ndarray | None:
    """CP-SAT's starts in seconds plus tiny offsets so that, on every device, a tensor
    interval ending at integer time ``t`` ends (in floating point) no later than one
    starting at ``t``: each node whose time makes such an end gets a smaller offset than
    the node whose time makes the start. None when those orders form a cycle."""
    n, k = problem.n_nodes, problem.n_devices
    src, dst = problem.edge_src.tolist(), problem.edge_dst.tolist()
    pl = [int(d) for d in place]
    si = [int(v) for v in s_int]
    ei = [int(v) for v in e_int]
    ci = [int(comm[e, pl[src[e]], pl[dst[e]]]) for e in range(len(src))]
    out, tmp = problem.output_bytes, problem.temp_bytes
    span = max(ei, default=0)
    span_nodes = {v for v in range(n) if ei[v] == span}
    cons: list[list[int]] = [[] for _ in range(n)]
    for e in range(len(src)):
        cons[src[e]].append(e)
    ivs = []  # (device, start, end, start node, end nodes)
    for v in range(n):
        if tmp[v] > 0:
            ivs.append((pl[v], si[v], ei[v], v, {v}))
        if out[v] <= 0:
            continue
        ends = [(ei[dst[e]] if pl[dst[e]] == pl[v] else ei[v] + ci[e],
                 dst[e] if pl[dst[e]] == pl[v] else v) for e in cons[v]]
        if not ends:
            ivs.append((pl[v], si[v], span, v, set(span_nodes)))
        else:
            top = max(t for t, _ in ends)
            ivs.append((pl[v], si[v], top, v, {u for t, u in ends if t == top}))
        for d in range(k):
            es = [e for e in cons[v] if pl[dst[e]] == d and d != pl[v]]
            if es:
                arrive = min(ei[v] + ci[e] for e in es)
                ends = [(ei[dst[e]], dst[e]) for e in es] + [(arrive, v)]
                top = max(t for t, _ in ends)
                ivs.append((d, arrive, top, v, {u for t, u in ends if t == top}))
    succ: list[set[int]] = [set() for _ in range(n)]
    by_start: dict[tuple[int, int], set[int]] = {}
    for d, b, _, sv, _ in ivs:
        by_start.setdefault((d, b), set()).add(sv)
    for v in range(n):  # a zero-time node sharing its start with a run on its device goes first
        if ei[v] == si[v]:
            for u in range(n):
                if u != v and pl[u] == pl[v] and si[u] == si[v] and ei[u] > si[u]:
                    succ[v].add(u)
    for d, b, f, _, enodes in ivs:
        if f > b:
            for sv in by_start.get((d, f), ()):
                for u in enodes:
                    if u != sv:
                        succ[u].add(sv)
    indeg = [0] * n
    for u in range(n):
        for v in succ[u]:
            indeg[v] += 1
    level = [0] * n
    queue = [v for v in range(n) if indeg[v] == 0]
    seen = 0
    while queue:
        u = queue.pop()
        seen += 1
        for v in succ[u]:
            level[v] = max(level[v], level[u] + 1)
            indeg[v] -= 1
            if indeg[v] == 0:
                queue.append(v)
    if seen < n:
        return None
    unit = 1.0 / scale
    step = min(1e-12 * max(span * unit, 1.0), 0.01 * unit / (n + 1))
    return s_int / scale + np.asarray(level, dtype=np.float64) * step


def _has_instants(problem: Problem) -> bool:
    """Can a tensor interval have zero length (a zero-time node holding or receiving memory)?"""
    held = (problem.output_bytes > 0) | (problem.temp_bytes > 0)
    fed = np.zeros(problem.n_nodes, dtype=bool)
    fed[problem.edge_dst[problem.output_bytes[problem.edge_src] > 0]] = True
    return bool(((problem.time <= 0) & (held | fed)).any())


def _peak_fits(problem: Problem, placement: np.ndarray, start: np.ndarray) -> bool:
    """Does the schedule respect peak memory, with the tolerance of :func:`optpart.violations`?"""
    from ..evaluate import peak_memory
    finish = start + problem.duration(placement)
    used = peak_memory(problem, placement, start, finish)
    cap = problem.device_memory
    return bool((used <= cap * (1 + 1e-9) + 1e-9).all())


def _add_peak_memory(model, problem: Problem, x: dict, S: list, E: list, makespan, dur: np.ndarray,
                     comm: np.ndarray, horizon: int, param: np.ndarray, out: np.ndarray,
                     temp: np.ndarray, cap: np.ndarray, exact_time: bool) -> None:
    """Peak (liveness) memory of MODEL.md section 3 as one cumulative per device.

    Capacity ``cap(d) - sum param(v) x[v, d]``; optional intervals (all on integer time):

    * temp of ``v`` on ``d``: ``[S(v), E(v))``, present iff ``x[v, d]``;
    * output of ``u`` on ``d(u)``: ``[S(u), O(u))`` with ``O(u) >= E(w)`` for each consumer
      ``w`` on ``d(u)``, ``O(u) >= E(u) + c`` for each consumer elsewhere (per-pair delay),
      ``O(u) >= makespan`` without consumers;
    * copy of ``u`` received on ``e``: present iff ``u`` is not on ``e`` and a consumer is;
      ``[A, B)`` with ``F(u) <= A <= F(u) + c(u, w)`` and ``B >= E(w)`` for each consumer ``w`` on ``e``.

    Ends are only bounded below and the copy's start only above, so a model interval
    contains the real one and the solver may take it equal: the model is exact. A
    zero-length interval (counted at its instant by :func:`~optpart.evaluate.peak_memory`)
    becomes one unit long: with integer endpoints, a half-open interval overlaps
    ``[t, t + 1)`` iff it contains ``t``, so this is exact too. On an inexact (rounded-up)
    time grid, where real times are earlier than the model's, a copy starts at ``S(u)``
    and ends one unit after its last consumer: conservative, and checked after solving.
    A copy whose consumer on ``e`` takes zero time also ends one unit after that consumer
    (it may be an instant at the first arrival, which the start's bound alone can miss):
    conservative, and such graphs get no proof (see :func:`_has_instants`).
    """
    n, k = problem.n_nodes, problem.n_devices
    allowed = problem.allowed
    h1 = horizon + 1
    items: list[list[tuple]] = [[] for _ in range(k)]
    cons: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for e, (u, w) in enumerate(zip(problem.edge_src.tolist(), problem.edge_dst.tolist())):
        cons[u].append((e, w))
    for v in range(n):
        devs = [d for d in range(k) if allowed[v, d]]
        if temp[v] > 0:
            for d in devs:
                if cap[d] >= 0:
                    iv = model.NewOptionalFixedSizeIntervalVar(S[v], max(int(dur[v, d]), 1), x[v, d], f"pt_{v}_{d}")
                    items[d].append((iv, int(temp[v])))
        if out[v] <= 0:
            continue
        if any(cap[d] >= 0 for d in devs):
            o_end = model.NewIntVar(0, h1, f"po_end_{v}")
            model.Add(o_end >= E[v])
            model.Add(o_end >= S[v] + 1)
            if not cons[v]:
                model.Add(o_end >= makespan)
            for e, w in cons[v]:
                for a in devs:
                    if allowed[w, a]:
                        model.Add(o_end >= E[w]).OnlyEnforceIf([x[v, a], x[w, a]])
                    terms = [int(comm[e, a, b]) * x[w, b] for b in range(k)
                             if b != a and allowed[w, b] and comm[e, a, b] > 0]
                    if terms:
                        model.Add(o_end >= E[v] + sum(terms)).OnlyEnforceIf(x[v, a])
            size = model.NewIntVar(1, h1, f"po_len_{v}")
            for d in devs:
                if cap[d] >= 0:
                    iv = model.NewOptionalIntervalVar(S[v], size, o_end, x[v, d], f"po_{v}_{d}")
                    items[d].append((iv, int(out[v])))
        for d in range(k):  # copies received on d
            if cap[d] < 0:
                continue
            ws = [(e, w) for e, w in cons[v] if allowed[w, d]]
            others = [a for a in devs if a != d]
            if not ws or not others:
                continue
            r = model.NewBoolVar(f"pr_{v}_{d}")
            here = [x[v, d]] if allowed[v, d] else []
            if here:
                model.AddImplication(r, x[v, d].Not())
            model.AddBoolOr([x[w, d] for _, w in ws] + [r.Not()])
            for _, w in ws:
                model.AddBoolOr([x[w, d].Not(), r] + here)
            a_beg = model.NewIntVar(0, horizon, f"pa_{v}_{d}")
            a_end = model.NewIntVar(0, h1, f"pb_{v}_{d}")
            if exact_time:
                model.Add(a_beg >= E[v])
                for e, w in ws:
                    for a in others:
                        model.Add(a_beg <= E[v] + int(comm[e, a, d])).OnlyEnforceIf([x[v, a], x[w, d]])
            else:
                model.Add(a_beg == S[v])
            for _, w in ws:
                # A zero-time consumer may finish at the first arrival: the copy is then an
                # instant there, while the start above may lie earlier; cover that instant.
                pad = 0 if exact_time and dur[w, d] > 0 else 1
                model.Add(a_end >= E[w] + pad).OnlyEnforceIf(x[w, d])
            model.Add(a_end >= a_beg + 1)
            size = model.NewIntVar(1, h1, f"pc_len_{v}_{d}")
            items[d].append((model.NewOptionalIntervalVar(a_beg, size, a_end, r, f"pc_{v}_{d}"), int(out[v])))
    for d in range(k):
        if cap[d] < 0:
            continue
        held = [int(param[v]) * x[v, d] for v in range(n) if allowed[v, d] and param[v] > 0]
        room = model.NewIntVar(0, int(cap[d]), f"room_{d}")
        model.Add(room == int(cap[d]) - sum(held))
        if items[d]:
            model.AddCumulative([iv for iv, _ in items[d]], [q for _, q in items[d]], room)


def _fits(problem: Problem, placement: np.ndarray, mem: np.ndarray, cap: np.ndarray) -> bool:
    """Does an integer placement respect allowed devices, groups and the integer memory rows?"""
    n = problem.n_nodes
    if placement.shape != (n,) or not problem.allowed[np.arange(n), placement].all():
        return False
    for members in problem.groups:
        if np.unique(placement[members]).size > 1:
            return False
    used = np.bincount(placement, weights=mem.astype(np.float64), minlength=problem.n_devices)
    return bool(((cap < 0) | (used <= cap)).all())


def _integer_schedule(problem: Problem, placement: np.ndarray, dur: np.ndarray, comm: np.ndarray) -> np.ndarray:
    """Integer starts for a placement on the grid: canonical order, earliest starts with rounded times."""
    start_s, _ = canonical_schedule(problem, placement)
    n = problem.n_nodes
    rank = np.empty(n, dtype=np.int64)
    rank[problem.topo] = np.arange(n)
    order = np.lexsort((rank, start_s + problem.duration(placement), start_s)).tolist()
    in_ptr = problem.in_ptr.tolist()
    in_edges = problem.in_edges.tolist()
    src = problem.edge_src.tolist()
    place = placement.tolist()
    free = [0] * problem.n_devices
    start = [0] * n
    fin = [0] * n
    for v in order:
        s = free[place[v]]
        for i in range(in_ptr[v], in_ptr[v + 1]):
            e = in_edges[i]
            u = src[e]
            r = fin[u] + int(comm[e, place[u], place[v]])
            if r > s:
                s = r
        start[v] = s
        fin[v] = s + int(dur[v, place[v]])
        free[place[v]] = fin[v]
    return np.asarray(start, dtype=np.int64)


def _pooled(problem: Problem, classes: list[list[int]], comm: np.ndarray, mem: np.ndarray,
            cap: np.ndarray, min_dur: list) -> bool:
    """May the devices be modelled as one pool of capacity k (P|prec|Cmax)?

    True when all devices are interchangeable, every transfer is free, no memory row can
    bind, there is no colocation group, and every zero-time node is a source or a sink
    (a zero-time node must sit between the runs of its device, which a pool cannot see).
    """
    k, n = problem.n_devices, problem.n_nodes
    if k < 2 or len(classes) != 1 or len(classes[0]) != k or problem.groups:
        return False
    if comm.size and int(comm.max()) > 0:
        return False
    total = int(mem.sum())
    if any(c >= 0 and total > c for c in cap.tolist()):
        return False
    indeg = np.diff(problem.in_ptr).tolist()
    outdeg = np.diff(problem.out_ptr).tolist()
    return all(min_dur[v] > 0 or indeg[v] == 0 or outdeg[v] == 0 for v in range(n))


def _colour(problem: Problem, s_int: np.ndarray, dur: list) -> tuple[np.ndarray, np.ndarray]:
    """Devices for a pooled schedule: in start order, each node takes the lowest free device.

    At most k positive-length runs overlap, so one is always free (greedy interval colouring).
    A zero-time sink that finds every device busy waits for the first device to free up,
    which moves no other node. Returns the placement and the (possibly moved) starts.
    """
    n, k = problem.n_nodes, problem.n_devices
    rank = np.empty(n, dtype=np.int64)
    rank[problem.topo] = np.arange(n)
    key = s_int.tolist()
    order = sorted(range(n), key=lambda v: (key[v], dur[v] > 0, int(rank[v])))
    free = [0.0] * k
    place = np.zeros(n, dtype=np.int64)
    start = s_int.copy()
    for v in order:
        s = key[v]
        d = next((d for d in range(k) if free[d] <= s), -1)
        if d < 0:
            if dur[v] > 0:
                raise SolverError(f"cpsat: pooled schedule runs more than {k} nodes at time {s}")
            d = min(range(k), key=lambda e: (free[e], e))
            start[v] = free[d]
        else:
            free[d] = s + dur[v]
        place[v] = d
    return place, start
