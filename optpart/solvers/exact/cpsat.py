"""``cpsat``: exact placement and scheduling with OR-Tools CP-SAT.

A call, within one wall-clock budget (``time_limit``, default 60 s):

1. the incumbent: the ``heuristic`` solver's placement and schedule (the answer is never worse);
2. the model's size is estimated; when it cannot be built in the time left, or the graph has
   ``WINDOW_MIN_NODES`` nodes or more, the incumbent is improved by CP-SAT sub-solves
   (:mod:`optpart.solvers.exact.lns`) and returned with the best bound of
   :func:`~optpart.solvers.exact.bounds.bound_parts`;
3. otherwise the model (:mod:`optpart.solvers.exact.cpsat_model`) hinted with the incumbent; with
   static memory, the segments between cut nodes solved on their own give a bound and span rows;
4. the search (:func:`~optpart.solvers.exact.cpsat_search.search`): a schedule at the best bound
   proven without search when the hint is longer, the plain CP search, then the portfolio; from
   ``LNS_MIN_NODES`` nodes half the search budget goes to LNS around the best schedule;
5. every proof re-solved without presolve (:func:`~optpart.solvers.exact.cpsat_search.confirm`);
6. decoding in seconds; under peak, where the model on a rounded grid is a restriction, the
   confirmed optimum of its relaxation (times rounded down) is the bound.

``optimal`` is claimed when a confirmed proof (exact memory rows, a valid peak model) meets the
makespan recomputed in seconds within 1e-6, or when the makespan meets a bound proven without a
search of the whole model (``stats["proof"]`` names it).
"""

from __future__ import annotations

import numpy as np

from ...errors import SolverError
from ...evaluate import canonical_schedule, problem_lower_bound
from ...model.constraints import Constraints
from ...model.problem import Problem
from ...result import Status
from ...schedule.replay import integer_schedule
from ..base import Solution
from ..spec import Option, SolverSpec
from . import cpsat_model as cm
from . import cpsat_search as cs
from .bounds import closed_form_bound, comm_lower_bound, meets, reachability
from .call import (Budget, OutOfTime, fallback, solution_makespan, start_from_heuristic, too_big,
                   warm_starts)
from .decode import fits_rows, has_instants, to_seconds, values
from .grid import durations, relabel

#: Seconds when the caller gives no time limit.
DEFAULT_TIME_LIMIT = 60.0
#: Terms built per second (conservative) and the most ever built.
BUILD_RATE, MAX_TERMS = 40_000.0, 3_000_000
#: Share of the search time kept for the certificate of a proof.
CONFIRM_SHARE = 0.25
#: From this size (or with ``lns_rounds``) LNS takes ``LNS_SHARE`` of the search budget.
LNS_MIN_NODES, LNS_SHARE = 100, 0.5
#: From this size the full model is not searched: unit moves and windows instead.
WINDOW_MIN_NODES = 600
#: Share of the search budget for the segments' sub-solves; the target phase's tolerance above a bound.
SEGMENT_SHARE, TARGET_TOL = 0.1, 5e-7

#: Options, memory models and arguments this solver takes (checked by the registry).
SPEC = SolverSpec(
    options=(
        Option("workers", int, 4, "CP-SAT workers in parallel when deterministic=false", min=1, max=256),
        Option("deterministic", bool, True, "one thread, CP-SAT's portfolio interleaved: reproducible"),
        Option("log", bool, False, "print CP-SAT's search log"),
        Option("use_hint", bool, True, "start from the heuristic's schedule (never return worse)"),
        Option("deterministic_time", float, None, "CP-SAT deterministic-time budget of the search "
               "(machine-independent)", min=0, allow_none=True),
        Option("confirm", bool, True, "confirm every proof by a re-solve without presolve"),
        Option("confirm_deterministic_time", float, None, "deterministic budget of a confirmation "
               "(default: three times the search's, at least 10)", min=0, allow_none=True),
        Option("export_model", str, None, "write the CP-SAT model to this file (.pbtxt/.txt: text)",
               allow_none=True),
        Option("lns", bool, True, "large-neighbourhood search around the incumbent when not proven"),
        Option("lns_rounds", int, None, "cap on LNS rounds (default: until the time limit)", min=0,
               allow_none=True),
        Option("window_size", int, 200, "nodes per windowed sub-solve on large graphs", min=2, max=100000),
    ),
    memory_models=("static", "peak"),
    uses_hint=True,
    uses_time_limit=True,
)


@SPEC.checked("cpsat")
def solve(problem: Problem, *, time_limit: float | None = None, seed: int = 0,
          hint: np.ndarray | None = None, memory_model: str = "static", workers: int = 4,
          deterministic: bool = True, log: bool = False, use_hint: bool = True,
          deterministic_time: float | None = None, confirm: bool = True,
          confirm_deterministic_time: float | None = None, export_model: str | None = None,
          lns: bool = True, lns_rounds: int | None = None, window_size: int = 200) -> Solution:
    """Solve ``problem`` to optimality (or until ``time_limit``) with CP-SAT.

    Parameters
    ----------
    problem : Problem
    time_limit : float, optional
    seed : int
    hint : ndarray, optional
        A placement (used when its schedule beats the heuristic's).
    memory_model : {"static", "peak"}
    workers : int
        CP-SAT workers when ``deterministic`` is False.
    deterministic : bool
        One thread: equal inputs, equal results unless the wall-clock limit stops the search.
    log : bool
    use_hint : bool
        Start from the heuristic (False: the bare model, no never-worse guarantee).
    deterministic_time : float, optional
        CP-SAT deterministic seconds of the search: a budget independent of the machine.
    confirm : bool
        Confirm every proof (False: an ``OPTIMAL`` is reported ``feasible``).
    confirm_deterministic_time : float, optional
        Deterministic budget of a confirmation (default three times the search's, at least 10).
    export_model : str, optional
        Write the model (text proto for ``.pbtxt``/``.txt``).
    lns : bool
        Large-neighbourhood search from ``LNS_MIN_NODES`` nodes, and unit moves and windows from
        ``WINDOW_MIN_NODES`` nodes or when the model is too big (False: the incumbent there).
    lns_rounds : int, optional
        Cap on LNS rounds (also turns LNS on below ``LNS_MIN_NODES``).
    window_size : int
        Nodes per windowed sub-solve at first.

    Returns
    -------
    Solution
    """
    budget = Budget(DEFAULT_TIME_LIMIT if time_limit is None else float(time_limit))
    peak = memory_model == "peak" and problem.has_split
    n = problem.n_nodes
    if n == 0:
        return Solution(Status.OPTIMAL, placement=np.zeros(0, dtype=np.int64), start=np.zeros(0),
                        memory_model=memory_model, stats={"stop_reason": "proven optimal"})
    stats: dict = {"peak_model": peak}
    incumbent = start_from_heuristic(problem, stats, time_limit=budget.limit_s, seed=seed,
                                     memory_model="peak" if peak else "static") if use_hint else None
    stats["model_terms_estimate"] = size = cm.estimate_size(problem, peak)
    reserve = 0.2 + 2e-5 * (n + problem.n_edges)
    why = too_big("cpsat", size, BUILD_RATE, MAX_TERMS, budget, reserve)
    if why is None and n >= WINDOW_MIN_NODES and lns:
        why = f"cpsat: the full model of {n:,} nodes is not searched (windows from {WINDOW_MIN_NODES:,} nodes)"
    if why is not None:
        stats["stop_reason"] = "model not built"
        if not lns:
            return fallback(problem, incumbent, memory_model, why, stats)
        from .lns import solve_by_windows
        return solve_by_windows(problem, incumbent, memory_model, budget, reserve, why, stats, seed=seed,
                                size=window_size, deterministic_time=deterministic_time, log=log)
    inc_ms = solution_makespan(problem, incumbent) if incumbent is not None else float("inf")
    data = cm.prepare(problem, peak, inc_ms if np.isfinite(inc_ms) else None)
    stats.update(scale=data.grid.scale, exact_time=data.grid.exact, exact_memory=data.mem_exact,
                 pooled=data.pooled, symmetry_classes=[list(c) for c in data.classes])
    try:
        mv = cm.build(data, budget, reserve + 0.5)
    except OutOfTime as exc:
        stats["stop_reason"] = "model not built"
        return fallback(problem, incumbent, memory_model, f"cpsat: {exc}", stats)
    hint_p, hint_units = _choose_hint(data, mv, incumbent, hint)
    seg_dtime = None if deterministic_time is None else SEGMENT_SHARE * deterministic_time
    seg_lb = _segment_bound(data, mv, budget, SEGMENT_SHARE * (budget.left() - reserve), seg_dtime, seed, stats)
    if seg_lb > 0 and deterministic_time is not None:
        deterministic_time -= seg_dtime
    if export_model:
        _export(mv.model, export_model)
    search_left = budget.left() - reserve
    if search_left <= 0.05:
        stats["stop_reason"] = "time limit"
        return fallback(problem, incumbent, memory_model, "cpsat: the time limit ran out before the search", stats)
    use_lns = lns and not data.pooled and (n >= LNS_MIN_NODES if lns_rounds is None else lns_rounds > 0)
    share = (1 - CONFIRM_SHARE if confirm else 1.0) * (1 - LNS_SHARE if use_lns else 1.0)
    closed_lb = closed_form_bound(problem, data.lb_s, data.grid, seg_lb)
    found = cs.search(data, mv, search_left * share, seed, deterministic, workers, log, deterministic_time, stats,
                      target_units=_target_units(data, closed_lb, hint_p, hint_units))
    name = found.name
    bound_valid = not peak or (data.grid.exact and not has_instants(problem))
    confirmed, better = None, None
    if name in ("OPTIMAL", "INFEASIBLE"):
        confirmed, better = cs.confirm(data, mv, found.solver, name, budget, reserve, found.dtime,
                                       confirm_deterministic_time, seed, log, stats) if confirm else (False, None)
    if name == "INFEASIBLE":
        return _infeasible(problem, incumbent, memory_model, stats, confirmed, exact=data.mem_exact and bound_valid)
    cp_bound = data.grid.bound_seconds(found.bound_units) if bound_valid and not found.at_target else 0.0
    if name == "OPTIMAL" and not confirmed:
        cp_bound = 0.0  # an unconfirmed proof gives no bound either
    sol = better if better is not None else values(data, mv, found.solver) if name in ("OPTIMAL", "FEASIBLE") else None
    base = sol if sol is not None else (None if hint_p is None else (hint_p, hint_units))
    if use_lns and name != "OPTIMAL" and not found.at_target and base is not None and budget.left() > reserve + 0.2:
        sol = _polish(data, mv, base, sol, budget, reserve, seed, lns_rounds, deterministic_time,
                      1 if deterministic else workers, stats)
    stop = "deterministic time limit" if deterministic_time is not None and \
        found.dtime >= 0.99 * deterministic_time else "time limit"
    if sol is None:
        stats["stop_reason"] = stop
        return fallback(problem, incumbent, memory_model, f"cpsat: CP-SAT found no solution ({stop} of a "
                        f"{budget.limit_s:g} s call)", stats, lower_bound=cp_bound)
    objective = found.solver.objective_value if name == "OPTIMAL" else None
    return _answer(data, sol, name, confirmed, cp_bound, bound_valid, objective, incumbent, inc_ms, memory_model,
                   budget, stop, stats, closed_lb, seg_lb, (deterministic_time, seed, log, reserve))


def _polish(data: cm.CpData, mv: cm.CpModelVars, base: tuple, sol: tuple | None, budget: Budget, reserve: float,
            seed: int, lns_rounds: int | None, deterministic_time: float | None, workers: int, stats: dict):
    """LNS rounds from ``base`` (one per 0.5 deterministic s under a deterministic budget): the
    improved ``(placement, units)``, else ``sol``."""
    from .lns import improve
    round_dtime = 0.5 if deterministic_time is None else min(0.5, deterministic_time)
    rounds = lns_rounds if lns_rounds is not None or deterministic_time is None else \
        max(1, int(deterministic_time / round_dtime))
    place, units, lns_stats = improve(data, mv, base[0], base[1], budget, reserve=reserve, seed=seed,
                                      max_rounds=rounds, round_dtime=round_dtime, workers=workers)
    stats.update(lns_stats)
    return (place, units) if lns_stats["lns_improvements"] else sol


def _answer(data: cm.CpData, sol: tuple, name: str, confirmed: bool | None, cp_bound: float, bound_valid: bool,
            objective, incumbent: Solution | None, inc_ms: float, memory_model: str, budget: Budget,
            search_stop: str, stats: dict, closed_lb: float, seg_lb: float, relax_args: tuple) -> Solution:
    """CP-SAT's schedule in seconds with its bound and status, or the incumbent when shorter."""
    problem, n = data.problem, data.problem.n_nodes
    place = sol[0]
    start = to_seconds(data, place, sol[1], stats)
    if start is None:
        return fallback(problem, incumbent, memory_model, "cpsat: CP-SAT's schedule exceeds peak memory once "
                        "converted to seconds (floating-point rounding at equal times)", stats, lower_bound=cp_bound)
    real_ms = float((start + problem.duration(place)).max())
    bound = max(cp_bound, closed_lb)
    if name == "OPTIMAL" and confirmed and data.grid.exact and bound_valid:
        bound = max(bound, objective / data.grid.scale)
    stats["objective_units"] = int((np.asarray(sol[1]) + data.dur[np.arange(n), sol[0]]).max())
    proven = bool(name == "OPTIMAL" and confirmed and data.mem_exact and bound_valid)
    notes = [_proof_message(name, confirmed, data, bound_valid, stats)]
    if proven and real_ms > bound + 9e-7 * max(real_ms, 1e-12):
        proven = False
        notes = [f"CP-SAT proved its model optimal on a time grid of 1/{data.grid.scale:g} s; rounding "
                 "leaves the gap shown"]
    by_bound = not proven and meets(real_ms, closed_lb)
    if by_bound:  # optimal by a bound proven without a search of the whole model
        proven, notes = True, []
        stats["proof"] = "segment bound" if seg_lb > 0 and meets(real_ms, seg_lb) else "closed-form lower bound"
        stats.setdefault("confirmation", "trivial (the makespan meets a bound proven without a search of the "
                         "whole model: closed-form, or segments whose own proofs were confirmed)")
    stats["stop_reason"] = ("proven optimal" if confirmed or by_bound else "proof not confirmed") \
        if name == "OPTIMAL" or by_bound else search_stop
    if np.isfinite(inc_ms) and inc_ms < real_ms - 1e-12 * max(real_ms, 1.0):
        stats["from_heuristic"] = True
        place, start, real_ms = np.asarray(incumbent.placement, dtype=np.int64), incumbent.start, inc_ms
        notes.append("CP-SAT found nothing better than the heuristic's schedule")
        proven = proven and meets(real_ms, bound)
    if data.peak and not bound_valid and not proven and budget.left() > relax_args[3] + 0.3:
        relaxed = relaxed_bound(data, place, start, budget, *relax_args, stats)
        bound = max(bound, relaxed)
        if relaxed > 0 and meets(real_ms, relaxed):
            proven, stats["proof"], stats["stop_reason"] = True, "relaxation", "proven optimal"
            notes = [m for m in notes if "conservatively" not in m] + [
                "optimal: the schedule meets the proven optimum of the peak model's relaxation"]
    if stats["stop_reason"] in ("time limit", "deterministic time limit"):
        notes.append(f"stopped by the {stats['stop_reason']} ({budget.limit_s:g} s for the call)")
    return Solution(Status.OPTIMAL if proven else Status.FEASIBLE, placement=place, start=start,
                    lower_bound=min(bound, real_ms), message="; ".join(m for m in notes if m), stats=stats,
                    memory_model=memory_model)


def _proof_message(name: str, confirmed: bool | None, data: cm.CpData, bound_valid: bool, stats: dict) -> str:
    """Why an OPTIMAL of CP-SAT is not claimed (empty when it is)."""
    if name != "OPTIMAL":
        return ""
    if not confirmed:
        return ("CP-SAT reported its model optimal but an independent re-solve without presolve did not "
                f"confirm it ({stats.get('confirmation', 'confirmation off')}); only the generic bound is kept")
    if not data.mem_exact:
        return "CP-SAT proved its model optimal, but memory rows were rounded conservatively"
    if not bound_valid:
        return ("CP-SAT proved its model optimal, but peak memory is modelled conservatively here "
                "(zero-time nodes holding memory, or an inexact time grid)")
    return ""


def _infeasible(problem: Problem, incumbent: Solution | None, memory_model: str, stats: dict,
                confirmed: bool | None, exact: bool) -> Solution:
    """No placement fits: claimed only when confirmed and the rows are exact."""
    if confirmed and exact:
        stats["stop_reason"] = "proven infeasible"
        return Solution(Status.INFEASIBLE, message="CP-SAT proved that no placement fits memory and "
                        "constraints (confirmed without presolve)", stats=stats, memory_model=memory_model)
    stats["stop_reason"] = "proof not confirmed" if exact else "search exhausted"
    why = ("CP-SAT found no placement but its proof was not confirmed" if exact else
           "CP-SAT found no placement within the conservatively rounded memory rows")
    if incumbent is not None and incumbent.placement is not None:
        return fallback(problem, incumbent, memory_model, f"cpsat: {why}", stats)
    return Solution(Status.UNKNOWN, message=why, stats=stats, memory_model=memory_model)


def _choose_hint(data: cm.CpData, mv: cm.CpModelVars, incumbent: Solution | None, hint: np.ndarray | None):
    """The hint: the shorter of the heuristic's schedule and the hint's canonical one on the grid,
    devices relabelled to the symmetry breaking's labelling; added to the model with its
    makespan as a cap (static memory)."""
    problem = data.problem
    best = None
    for place, start in warm_starts(incumbent, hint):
        if not fits_rows(problem, place, data.mem, np.full(problem.n_devices, -1) if data.peak else data.cap):
            continue
        units = integer_schedule(problem, place, canonical_schedule(problem, place)[0] if start is None else start,
                                 data.dur, data.comm)
        ms = int((units + data.dur[np.arange(problem.n_nodes), place]).max())
        if best is None or ms < best[0]:
            best = (ms, place, units)
    if best is None:
        return None, None
    place, units = best[1], best[2]
    place = relabel(place, data.classes, data.sym_order)
    cm.add_hint(mv.model, data, mv, place, units)
    if not data.peak:  # the hint's integer schedule is valid: the optimum is no later
        mv.model.add(mv.makespan <= int((units + data.dur[np.arange(problem.n_nodes), place]).max()))
    return place, units


def _target_units(data: cm.CpData, bound: float, hint_p, hint_units) -> int | None:
    """The target phase's makespan in units (None: none): a schedule at or below it meets
    ``bound`` within :data:`TARGET_TOL`; asked only when the hint is longer."""
    if hint_p is None or bound <= 0:
        return None
    x = bound * data.grid.scale
    target = max(int(np.floor(x * (1 + TARGET_TOL))), int(np.ceil(x * (1 - 1e-12))))
    hint_ms = int((hint_units + data.dur[np.arange(data.problem.n_nodes), hint_p]).max())
    return target if target < hint_ms else None


def _segment_bound(data: cm.CpData, mv: cm.CpModelVars, budget: Budget, seconds: float,
                   deterministic_time: float | None, seed: int, stats: dict) -> float:
    """Static memory: the nodes comparable to every other node (*cut nodes*) cut the schedule
    into segments; the span of each is at least its optimum solved alone (a smaller problem:
    its nodes and edges, every device), so ``makespan >= sum of the optima - the cut nodes
    counted twice`` (series decomposition, Lawler 1978), added as span rows. 0: no segments."""
    problem = data.problem
    if data.peak or data.relaxed:
        return 0.0
    n, desc = problem.n_nodes, reachability(problem)
    n_anc = [0] * n
    for v in range(n):
        d = desc[v]
        while d:
            low = d & -d
            n_anc[low.bit_length() - 1] += 1
            d ^= low
    cuts = [v for v in problem.topo.tolist() if bin(desc[v]).count("1") + n_anc[v] == n - 1]
    ranks, topo = [-1] + [int(problem.topo_rank[c]) for c in cuts] + [n], problem.topo
    segs = []
    for j, (first, last) in enumerate(zip([-1] + cuts, cuts + [-1])):
        members = sorted(set(topo[ranks[j] + 1:ranks[j + 1]].tolist()) | {v for v in (first, last) if v >= 0})
        if len(members) >= 2:
            segs.append((first, last, members))
    if len(segs) < 2:
        return 0.0
    bounds, proven, left = [], 0, len(segs)
    for first, last, nodes in segs:
        sub = _sub_problem(problem, nodes)
        share = max(0.05, min(seconds, budget.left()) / left)
        r = solve(sub, time_limit=share, seed=seed, use_hint=False, lns=False,
                  deterministic_time=1.0 if deterministic_time is None else max(1e-3, deterministic_time / len(segs)))
        ok = r.status is Status.OPTIMAL
        proven += ok
        bounds.append(solution_makespan(sub, r) if ok else max(problem_lower_bound(sub), comm_lower_bound(sub)))
        seconds -= share
        left -= 1
    dur_max = np.where(problem.allowed, durations(problem), 0.0).max(axis=1)
    firsts = {f for f, _, _ in segs}
    lower = max(0.0, float(sum(bounds)) - sum(float(dur_max[c]) for _, c, _ in segs if c >= 0 and c in firsts))
    for (first, last, _), b in zip(segs, bounds):
        mv.model.add((mv.makespan if last < 0 else mv.E[last]) - (0 if first < 0 else mv.S[first])
                     >= int(np.floor(b * data.grid.scale * (1 - 1e-9))))
    stats.update(segments=len(segs), segments_proven=proven, segment_bound=lower)
    return lower


def _sub_problem(problem: Problem, nodes: list[int]) -> Problem:
    """The problem on ``nodes``: their edges, every device, the same allowed devices, groups cut."""
    idx = {v: i for i, v in enumerate(nodes)}
    src, dst = problem.edge_src.tolist(), problem.edge_dst.tolist()
    edges = [e for e in range(problem.n_edges) if src[e] in idx and dst[e] in idx]
    ids, dev_ids, allowed = problem.node_ids, problem.device_ids, problem.allowed
    forbid = {ids[v]: tuple(dev_ids[d] for d in range(problem.n_devices) if not allowed[v, d])
              for v in nodes if not allowed[v].all()}
    groups = (tuple(ids[v] for v in g.tolist() if v in idx) for g in problem.groups)
    return Problem.from_arrays([ids[v] for v in nodes], problem.time[nodes], problem.memory[nodes],
                               [idx[src[e]] for e in edges], [idx[dst[e]] for e in edges], problem.edge_bytes[edges],
                               devices=problem.devices, links=problem.links, name=f"{problem.name}:segment",
                               constraints=Constraints(colocate=tuple(g for g in groups if len(g) >= 2),
                                                       forbid=forbid))


def relaxed_bound(data: cm.CpData, place: np.ndarray, start: np.ndarray, budget: Budget,
                  deterministic_time: float | None, seed: int, log: bool, reserve: float, stats: dict) -> float:
    """Under peak where the model is a restriction (rounded grid, instants held a unit): the
    confirmed optimum (seconds) of the same model built as a relaxation (times rounded down,
    empty intervals hold nothing), a lower bound of the real optimum; 0 when not proven.

    Parameters
    ----------
    data : CpData
    place, start : numpy.ndarray
    budget : Budget
    deterministic_time : float or None
        Deterministic budget of the search.
    seed : int
    log : bool
    reserve : float
    stats : dict

    Returns
    -------
    float
    """
    if not data.mem_exact:
        stats["relaxation"] = "not tried (memory rounded)"
        return 0.0
    problem, n = data.problem, data.problem.n_nodes
    ms = float((np.asarray(start) + problem.duration(place)).max())
    rel = cm.prepare(problem, True, ms, relax=True, grid=data.grid)
    try:
        mv = cm.build(rel, budget, reserve + 0.5)
    except OutOfTime:
        stats["relaxation"] = "not built (time limit)"
        return 0.0
    units = data.grid.down(np.asarray(start, dtype=np.float64))
    hint_p = relabel(np.asarray(place, dtype=np.int64), rel.classes, rel.sym_order)
    cm.add_hint(mv.model, rel, mv, hint_p, units)
    cap = int(data.grid.down(np.array([ms]))[0])
    mv.model.add(mv.makespan <= max(cap, int((units + rel.dur[np.arange(n), hint_p]).max())))
    left, sub = budget.left() - reserve, {}
    if left <= 0.1:
        stats["relaxation"] = "no time left"
        return 0.0
    found = cs.search(rel, mv, 0.75 * left, seed, True, 1, log, deterministic_time, sub)
    if found.name != "OPTIMAL":
        stats["relaxation"] = f"not proven ({found.name})"
        return 0.0
    confirmed, _ = cs.confirm(rel, mv, found.solver, found.name, budget, reserve, found.dtime, None, seed, log, sub)
    stats["relaxation"] = (f"optimal {int(round(found.solver.objective_value))} units, "
                           f"{'confirmed' if confirmed else 'not confirmed'} ({sub.get('confirmation', '')})")
    return float(found.solver.objective_value) / data.grid.scale * (1 - 1e-12) if confirmed else 0.0


def _export(model, path: str) -> None:
    """Write the model proto: text for ``.pbtxt``/``.txt``, binary otherwise."""
    try:
        ok = model.export_to_file(str(path))
    except OSError as exc:  # pragma: no cover - the OS message names the path
        raise SolverError(f"cpsat: option export_model={path!r}: {exc}") from None
    if not ok:
        raise SolverError(f"cpsat: option export_model={path!r}: could not write the model there")
