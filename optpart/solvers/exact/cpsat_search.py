"""The search and the confirmation of ``cpsat``: CP-SAT parameters, the two search phases,
the independent re-solve that every proof must pass, and reading a solution back.

Called by :func:`optpart.solvers.exact.cpsat.solve` (see its module docstring for the phases of
a call); the model is :mod:`optpart.solvers.exact.cpsat_model`.
"""

from __future__ import annotations

import time as _time
from dataclasses import dataclass

import numpy as np

from ...errors import SolverError
from ...model.problem import Problem
from . import _exact_common as xc
from . import cpsat_decode as dec
from . import cpsat_model as cm

__all__ = ["make_solver", "cp_search_params", "SearchResult", "search", "confirm", "values", "CP_FIRST_SHARE",
           "TARGET_SHARE"]

#: Share of the search budget (wall and deterministic) first given to the plain CP search.
CP_FIRST_SHARE = 0.5
#: Share of the search budget given to the target phase (a schedule at the lower bound), when asked.
TARGET_SHARE = 0.2


def make_solver(seed: int, deterministic: bool, workers: int, log: bool, deterministic_time: float | None,
            portfolio: bool = True):
    """A CP-SAT solver with our parameters, including the presolve workaround of or-tools#5293.

    ``portfolio=False``: the plain constraint-programming search (one worker, no LP
    relaxation: ``linearization_level = 0``), which follows the model's decision
    strategy with clause learning; see :func:`search` for why it runs first.

    Parameters
    ----------
    seed : int
        CP-SAT's random seed.
    deterministic : bool
        Run the portfolio interleaved on one thread, so results repeat run after run.
    workers : int
        Number of search workers (ignored, set to 1, when ``deterministic`` or not ``portfolio``).
    log : bool
        Print CP-SAT's search log.
    deterministic_time : float or None
        CP-SAT's deterministic time limit, or None for none.
    portfolio : bool
        True: CP-SAT's portfolio of subsolvers; False: the plain CP search.

    Returns
    -------
    ortools.sat.python.cp_model.CpSolver
        The configured solver.
    """
    from ortools.sat.python import cp_model
    solver = cp_model.CpSolver()
    params = solver.parameters
    if deterministic_time is not None:
        params.max_deterministic_time = float(deterministic_time)
    params.random_seed = int(seed)
    params.num_workers = int(workers)
    if not portfolio:
        cp_search_params(params)
    elif deterministic:
        # One thread running CP-SAT's portfolio of subsolvers interleaved in deterministic
        # batches: identical results run after run, and far stronger than one plain worker.
        params.num_workers = 1
        params.interleave_search = True
    # google/or-tools#5293: presolve's inclusion detection can remove feasible solutions
    # and lead to a false optimality proof; turning it off is the reported workaround.
    params.presolve_inclusion_work_limit = 0
    params.log_search_progress = bool(log)
    return solver


def cp_search_params(params) -> None:
    """One worker, no interleaving, no LP relaxation: deterministic by construction.

    Parameters
    ----------
    params : ortools.sat.sat_parameters_pb2.SatParameters
        The solver's parameters, changed in place.
    """
    params.num_workers = 1
    params.interleave_search = False
    params.linearization_level = 0


@dataclass
class SearchResult:
    """What the search phases found: the solver holding the best solution (None: none),
    CP-SAT's status name, the best proven bound in grid units, deterministic seconds used."""

    solver: object
    name: str
    bound_units: float
    dtime: float
    at_target: bool = False


def search(problem: Problem, data: cm.CpData, mv: cm.CpModelVars, seconds: float, seed: int,
            deterministic: bool, workers: int, log: bool, deterministic_time: float | None,
            stats: dict, target_units: int | None = None) -> SearchResult:
    """The search, in up to three phases sharing ``seconds`` (and ``deterministic_time``).

    0. With ``target_units``: ``TARGET_SHARE`` of the budget to the plain CP search for any
       schedule of makespan at most ``target_units`` (:func:`target_phase`). The caller
       sets the target where a schedule proves itself optimal against a closed-form lower
       bound; when one is found the search ends there (``at_target``), no proof needed.
    1. ``CP_FIRST_SHARE`` of the budget to the plain CP search (:func:`cp_search_params`).
    2. When that did not end the search, CP-SAT's portfolio (interleaved on one thread
       when ``deterministic``) with the rest, hinted with phase 1's best schedule.

    Why: on layered and fork-join graphs with communication the LP relaxation stays at
    the communication-aware critical path (docs/exact.md), so proofs come from search,
    not from the bound: CP-SAT's log shows the bound flat until the ``no_lp`` subsolver
    finds the optimum and closes the tree within a second. Interleaved on one thread,
    that subsolver gets about an eighth of the time; run alone it proves 50-node layered
    graphs in 0.3-1.0 deterministic s instead of 2.4-2.8, and 50-node fork-join graphs in
    under 0.2 (docs/exact.md, "Measured"). The portfolio stays as the second phase for
    what the plain search does not close (LP-based bounds, CP-SAT's own LNS).

    Parameters
    ----------
    problem : Problem
        The problem (for error messages and decoding phase 1's solution).
    data : CpData
        The model's integer data.
    mv : CpModelVars
        The built model and its variables (phase 2 adds a hint and a makespan cap).
    seconds : float
        The wall budget of both phases.
    seed : int
        CP-SAT's random seed.
    deterministic : bool
        Run the portfolio interleaved on one thread (repeatable results).
    workers : int
        Workers of the portfolio phase.
    log : bool
        Print CP-SAT's search log.
    deterministic_time : float or None
        The deterministic budget of both phases, or None for none.
    stats : dict
        The call's statistics; ``cpsat_status``, ``search_phases`` (and in deterministic
        mode ``deterministic_seconds`` and ``branches``) are set.
    target_units : int, optional
        A makespan (grid units) any schedule at or below which is good enough (phase 0).

    Returns
    -------
    SearchResult
        The solver with the best solution (or None), the status, the bound and the deterministic seconds.

    Raises
    ------
    SolverError
        When CP-SAT reports the model invalid.
    """
    t0 = _time.perf_counter()
    dtime0, phases0 = 0.0, []
    if target_units is not None:
        found, dtime0 = target_phase(data, mv, target_units, TARGET_SHARE * seconds, seed, log,
                                     None if deterministic_time is None else TARGET_SHARE * deterministic_time)
        phases0 = [f"target {target_units}: {'found' if found is not None else 'not found'}"]
        if found is not None:
            stats["cpsat_status"] = "FEASIBLE"
            stats["search_phases"] = phases0
            if deterministic:
                stats["deterministic_seconds"] = round(dtime0, 3)
                stats["branches"] = int(found.num_branches)
            return SearchResult(found, "FEASIBLE", float("-inf"), dtime0, at_target=True)
        seconds -= _time.perf_counter() - t0
        if deterministic_time is not None:
            deterministic_time = max(deterministic_time - dtime0, 1e-3)
    phase1 = None if deterministic_time is None else CP_FIRST_SHARE * deterministic_time
    solver = make_solver(seed, deterministic, workers, log, phase1, portfolio=False)
    t0 = _time.perf_counter()
    code = xc.solve_within(solver, mv.model, CP_FIRST_SHARE * seconds)
    name = solver.status_name(code)
    if name == "MODEL_INVALID":
        raise SolverError(f"cpsat built an invalid model for '{problem.name}': {mv.model.validate()}")
    bound, dtime = float(solver.best_objective_bound), dtime0 + float(solver.deterministic_time)
    branches = int(solver.num_branches)
    phases = phases0 + [f"cp search: {name}"]
    best = solver if name in ("OPTIMAL", "FEASIBLE") else None
    rest = seconds - (_time.perf_counter() - t0)
    rest_dtime = None if deterministic_time is None else deterministic_time - (dtime - dtime0)
    if name not in ("OPTIMAL", "INFEASIBLE") and rest > 0.05 and (rest_dtime is None or rest_dtime > 1e-3):
        if best is not None:  # phase 1's best schedule is the portfolio's hint and upper end
            place, units = values(problem, data, mv, best)
            mv.model.clear_hints()
            cm.add_hint(mv.model, data, mv, place, units)
            mv.model.add(mv.makespan <= int(round(best.objective_value)))
        second = make_solver(seed, deterministic, workers, log, rest_dtime)
        code = xc.solve_within(second, mv.model, rest)
        name2 = second.status_name(code)
        phases.append(f"portfolio: {name2}")
        dtime += float(second.deterministic_time)
        branches += int(second.num_branches)
        if name2 in ("OPTIMAL", "INFEASIBLE") or (name2 == "FEASIBLE" and (
                best is None or second.objective_value < best.objective_value)):
            best = second
        if name2 in ("OPTIMAL", "INFEASIBLE"):
            name = name2
        elif best is not None:
            name = "FEASIBLE"
        bound = max(bound, float(second.best_objective_bound))
        if name2 == "MODEL_INVALID":
            raise SolverError(f"cpsat built an invalid model for '{problem.name}': {mv.model.validate()}")
    stats["cpsat_status"] = name
    stats["search_phases"] = phases
    if deterministic:  # wall times stay out of results; search counters repeat only in deterministic mode
        stats["deterministic_seconds"] = round(dtime, 3)
        stats["branches"] = branches
    return SearchResult(best, name, bound, dtime)


def target_phase(data: cm.CpData, mv: cm.CpModelVars, target_units: int, seconds: float, seed: int,
                 log: bool, deterministic_time: float | None) -> tuple[object | None, float]:
    """Look for any schedule of makespan at most ``target_units``: ``(solver holding it or None, dtime)``.

    The model is cloned with ``makespan <= target_units`` and searched by the plain CP search
    (:func:`cp_search_params`), which stops at its first solution. Why: on planted graphs
    the optimum meets the work bound, and the descent from the heuristic's schedule, one
    slightly shorter schedule after another, took 75 solutions and 4 s on a 120-node graph
    whose target the bounded search reached in 0.01 deterministic s (propagation with a
    tight makespan fills the devices without idle time). The solver's variables keep
    their indices in the clone, so :func:`values` reads the solution with ``mv``.

    Parameters
    ----------
    data : CpData
        The model's integer data.
    mv : CpModelVars
        The built model (not changed: a clone is searched).
    target_units : int
        The makespan to reach, in grid units.
    seconds : float
        Wall budget.
    seed : int
        CP-SAT's random seed.
    log : bool
        Print CP-SAT's search log.
    deterministic_time : float or None
        Deterministic budget, or None.

    Returns
    -------
    tuple
        The solver with a solution at or below the target (None when none was found) and
        the deterministic seconds used.
    """
    bounded = mv.model.clone()
    bounded.add(bounded.get_int_var_from_proto_index(mv.makespan.index) <= int(target_units))
    solver = make_solver(seed, True, 1, log, deterministic_time, portfolio=False)
    solver.parameters.stop_after_first_solution = True
    code = xc.solve_within(solver, bounded, seconds)
    name = solver.status_name(code)
    found = solver if name in ("OPTIMAL", "FEASIBLE") else None
    return found, float(solver.deterministic_time)


def confirm(problem: Problem, data: cm.CpData, mv: cm.CpModelVars, solver, name: str, budget: xc.Budget,
             reserve: float, search_dtime: float, confirm_dtime: float | None, seed: int,
             log: bool, stats: dict) -> tuple[bool, tuple | None]:
    """Re-solve independently, with presolve off: ``(confirmed, better solution or None)``.

    After an optimum ``z``: the same optimisation, hinted with CP-SAT's solution, must end
    ``OPTIMAL`` at ``z`` (a lower value means the first proof was false, and its solution
    is returned). After an infeasibility: the model itself must come back ``INFEASIBLE``.

    Why it can cost more than the proof: it proves the optimum again from scratch, without
    presolve's probing and domain reductions, and (before this revision) ran CP-SAT's
    interleaved portfolio, whose LP and LNS subsolvers cannot help a proof that comes from
    search and took most of its time, after the search had used 90% of the wall budget.
    Now it runs the plain CP search first (half its budget), then the portfolio, and gets
    ``CONFIRM_SHARE`` of the search's wall time at least. The budget is deterministic:
    ``confirm_dtime``, default three times the search's deterministic seconds, at least 10.

    Parameters
    ----------
    problem : Problem
        The problem.
    data : CpData
        The model's integer data.
    mv : CpModelVars
        The model that was solved (cloned here, not changed).
    solver : ortools.sat.python.cp_model.CpSolver
        The solver holding the claimed optimum (unused after an infeasibility).
    name : str
        The claimed status, ``"OPTIMAL"`` or ``"INFEASIBLE"``.
    budget : Budget
        The call's wall budget.
    reserve : float
        Seconds to leave for decoding after the confirmation.
    search_dtime : float
        Deterministic seconds the search used (sizes the default budget).
    confirm_dtime : float or None
        The confirmation's deterministic budget, or None for the default.
    seed : int
        The search's seed (the confirmation uses ``seed + 1``).
    log : bool
        Print CP-SAT's search log.
    stats : dict
        The call's statistics; ``confirmation`` is set.

    Returns
    -------
    tuple of (bool, tuple or None)
        Whether the claim was confirmed, and a better (placement, starts in units) when the
        confirmation found one (the first proof was false).
    """
    from ortools.sat.python import cp_model
    check = mv.model.clone()
    check.clear_hints()
    z = None
    if name == "OPTIMAL":
        z = int(round(solver.objective_value))
        if z <= int(check.proto.variables[mv.makespan.index].domain[0]):
            stats["confirmation"] = "trivial (the makespan's lower end meets the optimum)"
            return True, None
        for v in range(problem.n_nodes):
            check.add_hint(check.get_int_var_from_proto_index(mv.S[v].index), int(solver.value(mv.S[v])))
        for (v, d), lit in mv.x.items():
            if data.leader[v] == v:
                check.add_hint(check.get_bool_var_from_proto_index(lit.index), int(solver.boolean_value(lit)))
    dtime = confirm_dtime if confirm_dtime is not None else max(10.0, 3.0 * float(search_dtime))
    used, parts = 0.0, []
    result, confirmer = "UNKNOWN", None
    for portfolio, share in ((False, 0.5), (True, 1.0)):
        left = budget.left() - reserve
        if left <= 0.05 or dtime - used <= 1e-3:
            break
        confirmer = cp_model.CpSolver()
        params = confirmer.parameters
        params.cp_model_presolve = False
        params.num_workers = 1
        if portfolio:
            params.interleave_search = True
        else:
            cp_search_params(params)
        params.random_seed = int(seed) + 1
        params.max_deterministic_time = float(share * (dtime - used) if not portfolio else dtime - used)
        params.log_search_progress = bool(log)
        code = xc.solve_within(confirmer, check, share * left)
        result = confirmer.status_name(code)
        used += float(confirmer.deterministic_time)
        parts.append(f"{'portfolio' if portfolio else 'cp search'} {result}")
        if result in ("OPTIMAL", "INFEASIBLE") or (
                z is not None and result == "FEASIBLE" and int(round(confirmer.objective_value)) < z):
            break
    if confirmer is None:
        stats["confirmation"] = "no time left"
        return False, None
    stats["confirmation"] = f"{result} in {used:.2f} deterministic s ({', '.join(parts)})"
    if z is None:
        return result == "INFEASIBLE", None
    if result in ("OPTIMAL", "FEASIBLE") and int(round(confirmer.objective_value)) < z:
        stats["confirmation"] += ": found a better solution, the proof was false"
        return False, values(problem, data, mv, confirmer)
    return result == "OPTIMAL" and int(round(confirmer.objective_value)) == z, None


def values(problem: Problem, data: cm.CpData, mv: cm.CpModelVars, solver) -> tuple[np.ndarray, np.ndarray]:
    """CP-SAT's placement and integer starts (pooled schedules get their devices here).

    Parameters
    ----------
    problem : Problem
        The problem.
    data : CpData
        The model's integer data (``pooled``: devices are not variables).
    mv : CpModelVars
        The model's variables.
    solver : ortools.sat.python.cp_model.CpSolver
        A solver that holds a solution.

    Returns
    -------
    tuple of (ndarray, ndarray)
        Device per node and start per node in grid units.
    """
    n, k = problem.n_nodes, problem.n_devices
    s_int = np.array([solver.value(mv.S[v]) for v in range(n)], dtype=np.int64)
    if data.pooled:
        place, s_int = dec.colour(problem, s_int.astype(np.float64), data.dur[:, 0].tolist())
        return place, np.asarray(s_int, dtype=np.int64)
    place = np.empty(n, dtype=np.int64)
    allowed = problem.allowed
    for v in range(n):
        place[v] = next(d for d in range(k) if allowed[v, d] and solver.boolean_value(mv.x[v, d]))
    return place, s_int
