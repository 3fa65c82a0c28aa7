"""The search of ``cpsat`` and the certificate every proof must pass.

:func:`search` runs up to three phases in one budget: a *target* phase (the plain CP search for
any schedule at a bound proven without search: optimal by that bound), the plain CP search
(one worker, no LP relaxation, the model's decision strategy with clause learning) and, when it
did not end the search, CP-SAT's portfolio hinted with its best schedule. On graphs with
communication the LP bound stays at the communication-aware critical path, so proofs come from
search, which the plain search alone does sooner than the portfolio.

:func:`confirm` is the certificate: an ``OPTIMAL`` of value ``z`` is re-solved independently
with presolve off (the workaround of the false proofs of google/or-tools#5293), hinted with the
solution; only ``OPTIMAL`` at ``z`` confirms it, a lower value refutes it. An ``INFEASIBLE`` must
stay ``INFEASIBLE``.
"""

from __future__ import annotations

import time as _time
from dataclasses import dataclass

from ...errors import SolverError
from .call import Budget, solve_within
from .cpsat_model import CpData, CpModelVars, add_hint
from .decode import values

#: Shares of the search budget (wall and deterministic): the plain CP search first, the target phase.
CP_FIRST_SHARE, TARGET_SHARE = 0.5, 0.2


def make_solver(seed: int, deterministic: bool, workers: int, log: bool, deterministic_time: float | None,
                portfolio: bool = True, presolve: bool = True):
    """A CP-SAT solver with our parameters (presolve's inclusion detection off: or-tools#5293).

    Parameters
    ----------
    seed : int
    deterministic : bool
        The portfolio interleaved on one thread (repeatable).
    workers : int
        Workers of the portfolio when not ``deterministic``.
    log : bool
    deterministic_time : float or None
        Deterministic limit.
    portfolio : bool
        False: the plain CP search (one worker, no LP relaxation).
    presolve : bool
        False: no presolve at all (the certificate).

    Returns
    -------
    ortools.sat.python.cp_model.CpSolver
    """
    from ortools.sat.python import cp_model
    solver = cp_model.CpSolver()
    params = solver.parameters
    if deterministic_time is not None:
        params.max_deterministic_time = float(deterministic_time)
    params.random_seed = int(seed)
    params.num_workers = int(workers)
    if not portfolio:
        params.num_workers, params.interleave_search, params.linearization_level = 1, False, 0
    elif deterministic:
        params.num_workers, params.interleave_search = 1, True
    params.presolve_inclusion_work_limit = 0
    params.cp_model_presolve = bool(presolve)
    params.log_search_progress = bool(log)
    return solver


@dataclass
class SearchResult:
    """The solver holding the best solution (None: none), CP-SAT's status name, the best bound in
    grid units, the deterministic seconds used, and whether the target phase ended the search."""

    solver: object
    name: str
    bound_units: float
    dtime: float
    at_target: bool = False


def search(data: CpData, mv: CpModelVars, seconds: float, seed: int, deterministic: bool, workers: int,
           log: bool, deterministic_time: float | None, stats: dict, target_units: int | None = None) -> SearchResult:
    """The target phase (when ``target_units``), the plain CP search, then the portfolio.

    Parameters
    ----------
    data : CpData
    mv : CpModelVars
    seconds : float
        Wall budget of all phases.
    seed : int
    deterministic : bool
        Portfolio interleaved on one thread.
    workers : int
        Portfolio workers otherwise.
    log : bool
    deterministic_time : float or None
        Deterministic budget of all phases.
    stats : dict
    target_units : int, optional
        A makespan at or below which any schedule is optimal by a bound.

    Returns
    -------
    SearchResult

    Raises
    ------
    SolverError
        When CP-SAT reports the model invalid.
    """
    t0 = _time.perf_counter()
    dtime, phases = 0.0, []
    if target_units is not None:  # any schedule at the target is optimal by its bound
        bounded = mv.model.clone()
        bounded.add(bounded.get_int_var_from_proto_index(mv.makespan.index) <= int(target_units))
        solver = make_solver(seed, True, 1, log, None if deterministic_time is None else
                             TARGET_SHARE * deterministic_time, portfolio=False)
        solver.parameters.stop_after_first_solution = True
        found = solver.status_name(solve_within(solver, bounded, TARGET_SHARE * seconds)) in ("OPTIMAL", "FEASIBLE")
        dtime = float(solver.deterministic_time)
        phases.append(f"target {target_units}: {'found' if found else 'not found'}")
        if found:
            _record(stats, "FEASIBLE", phases, deterministic, dtime, int(solver.num_branches))
            return SearchResult(solver, "FEASIBLE", float("-inf"), dtime, at_target=True)
        seconds -= _time.perf_counter() - t0
        if deterministic_time is not None:
            deterministic_time = max(deterministic_time - dtime, 1e-3)
    dtime0 = dtime
    solver = make_solver(seed, deterministic, workers, log, None if deterministic_time is None else
                         CP_FIRST_SHARE * deterministic_time, portfolio=False)
    t0 = _time.perf_counter()
    name = _checked(data, mv, solver, solve_within(solver, mv.model, CP_FIRST_SHARE * seconds))
    bound, dtime, branches = float(solver.best_objective_bound), dtime0 + float(solver.deterministic_time), \
        int(solver.num_branches)
    phases.append(f"cp search: {name}")
    best = solver if name in ("OPTIMAL", "FEASIBLE") else None
    rest = seconds - (_time.perf_counter() - t0)
    rest_dtime = None if deterministic_time is None else deterministic_time - (dtime - dtime0)
    if name not in ("OPTIMAL", "INFEASIBLE") and rest > 0.05 and (rest_dtime is None or rest_dtime > 1e-3):
        if best is not None:  # the plain search's best is the portfolio's hint and upper end
            mv.model.clear_hints()
            add_hint(mv.model, data, mv, *values(data, mv, best))
            mv.model.add(mv.makespan <= int(round(best.objective_value)))
        second = make_solver(seed, deterministic, workers, log, rest_dtime)
        name2 = _checked(data, mv, second, solve_within(second, mv.model, rest))
        phases.append(f"portfolio: {name2}")
        dtime += float(second.deterministic_time)
        branches += int(second.num_branches)
        if name2 in ("OPTIMAL", "INFEASIBLE") or (name2 == "FEASIBLE" and (
                best is None or second.objective_value < best.objective_value)):
            best = second
        name = name2 if name2 in ("OPTIMAL", "INFEASIBLE") else "FEASIBLE" if best is not None else name
        bound = max(bound, float(second.best_objective_bound))
    _record(stats, name, phases, deterministic, dtime, branches)
    return SearchResult(best, name, bound, dtime)


def _checked(data: CpData, mv: CpModelVars, solver, code: int) -> str:
    name = solver.status_name(code)
    if name == "MODEL_INVALID":
        raise SolverError(f"cpsat built an invalid model for '{data.problem.name}': {mv.model.validate()}")
    return name


def _record(stats: dict, name: str, phases: list, deterministic: bool, dtime: float, branches: int) -> None:
    stats["cpsat_status"] = name
    stats["search_phases"] = phases
    if deterministic:  # search counters repeat only in deterministic mode
        stats["deterministic_seconds"] = round(dtime, 3)
        stats["branches"] = branches


def confirm(data: CpData, mv: CpModelVars, solver, name: str, budget: Budget, reserve: float, search_dtime: float,
            confirm_dtime: float | None, seed: int, log: bool, stats: dict) -> tuple[bool, tuple | None]:
    """The certificate: an independent re-solve with presolve off, ``(confirmed, better or None)``.

    The plain CP search first (half the budget), then the portfolio; deterministic budget
    ``confirm_dtime``, default three times the search's, at least 10 s.

    Parameters
    ----------
    data : CpData
    mv : CpModelVars
    solver : ortools.sat.python.cp_model.CpSolver
    name : str
        ``"OPTIMAL"`` or ``"INFEASIBLE"``.
    budget : Budget
    reserve : float
    search_dtime : float
        The search's deterministic seconds.
    confirm_dtime : float or None
        The certificate's deterministic budget.
    seed : int
    log : bool
    stats : dict

    Returns
    -------
    tuple
        Whether the claim holds, and ``(placement, units)`` when the re-solve found a shorter schedule.
    """
    check = mv.model.clone()
    check.clear_hints()
    z = None
    if name == "OPTIMAL":
        z = int(round(solver.objective_value))
        if z <= int(check.proto.variables[mv.makespan.index].domain[0]):
            stats["confirmation"] = "trivial (the makespan's lower end meets the optimum)"
            return True, None
        for v in range(data.problem.n_nodes):
            check.add_hint(check.get_int_var_from_proto_index(mv.S[v].index), int(solver.value(mv.S[v])))
        for (v, d), lit in mv.x.items():
            if data.leader[v] == v:
                check.add_hint(check.get_bool_var_from_proto_index(lit.index), int(solver.boolean_value(lit)))
    dtime = confirm_dtime if confirm_dtime is not None else max(10.0, 3.0 * float(search_dtime))
    used, parts, result, confirmer = 0.0, [], "UNKNOWN", None
    for portfolio, share in ((False, 0.5), (True, 1.0)):
        left = budget.left() - reserve
        if left <= 0.05 or dtime - used <= 1e-3:
            break
        confirmer = make_solver(seed + 1, True, 1, log, share * (dtime - used), portfolio=portfolio, presolve=False)
        result = confirmer.status_name(solve_within(confirmer, check, share * left))
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
        return False, values(data, mv, confirmer)
    return result == "OPTIMAL" and int(round(confirmer.objective_value)) == z, None
