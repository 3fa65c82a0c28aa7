"""``cpsat``: exact placement and scheduling with OR-Tools CP-SAT.

The model (built in :mod:`optpart.solvers.cpsat_model`, one function per family):

* ``x[v, d]``: node ``v`` runs on device ``d`` (only for allowed pairs); exactly one per
  node; nodes of a colocation group share their literals.
* ``S[v]``, ``E[v]``: start and end; one optional interval ``S[v] .. E[v]`` of length
  ``dur(v, d)`` per allowed device, present iff ``x[v, d]``; ``add_no_overlap`` per device.
* Edge ``(u, w)``: ``S[w] >= E[u]``, plus the transfer when the ends are apart (a literal
  ``apart[e]`` with uniform links, per-pair terms otherwise).
* Static memory: ``sum_v memory(v) x[v, d] <= memory(d)`` per device. Peak memory
  (``memory_model="peak"`` on a graph with the param/output/temp split): one cumulative
  per device over tensor lifetimes (see ``_add_peak_memory``).
* Objective: the makespan. Redundant rows: device loads, total load, heads and tails,
  the generic lower bound; symmetry breaking within classes of interchangeable devices.

**The call, phase by phase, within one wall-clock budget** (``time_limit``, default 60 s;
the whole call ends within about ``time_limit + 2 s``):

1. The incumbent: the ``heuristic`` solver's placement *and schedule* (called directly,
   with a share of the budget). The answer is never worse than it.
2. The model size is estimated; when it cannot be built in the time left (or would need
   gigabytes) the incumbent is returned with a message saying why.
3. Build, hint (the incumbent's full schedule on the integer grid), solve with the
   workaround of google/or-tools#5293 (``presolve_inclusion_work_limit = 0``) in two
   phases (:func:`_search`): the plain CP search (one worker, no LP) with half the
   budget, then CP-SAT's portfolio with the rest when the first did not finish.
4. **Confirmation of every proof**: an ``OPTIMAL`` answer of value ``z`` is re-solved
   independently with presolve off (the same optimisation hinted with the solution, a
   deterministic budget, the plain CP search first): only ``OPTIMAL`` at ``z`` confirms
   it, a lower value refutes it (and its schedule is used); an ``INFEASIBLE`` model must
   stay ``INFEASIBLE`` without presolve. The search leaves it ``CONFIRM_SHARE`` of the
   wall budget. Unconfirmed: status ``feasible`` with the generic bound, and the message
   says so.
5. Decode (placement, integer starts to seconds, tightened), compare with the incumbent.

**Time is integral in CP-SAT.** When every duration and transfer is a whole number of
``1/scale`` seconds for a round scale (STG: scale 1) the model is the real problem.
Otherwise durations and transfers are rounded *up* on a fine power-of-ten grid and the
bound is CP-SAT's minus the most rounding any chain can gain (see
:class:`~optpart.solvers._exact_common.TimeGrid`). ``optimal`` is claimed only when the
proof is confirmed *and* the real makespan meets the real bound within 1e-6. Memory rows
are exact for whole-byte memories, else conservative (then neither ``optimal`` nor
``infeasible`` is claimed). Under ``"peak"`` the model is exact when the time grid is exact
and no zero-time node holds or receives memory; otherwise it is conservative.

Statuses: ``optimal`` (proven and confirmed), ``feasible`` (with the bound), ``infeasible``
(confirmed), ``unknown`` (nothing found). ``stats["stop_reason"]`` says why the run
stopped: ``proven optimal``, ``proven infeasible``, ``proof not confirmed``, ``time limit``,
``deterministic time limit``, ``model not built``.

References: Laborie, Rogerie, Shaw, Vilim, "IBM ILOG CP optimizer for scheduling",
Constraints 23 (2018) (optional intervals); Perron, Didier, Gay, "The CP-SAT-LP solver",
CP 2023; Pisinger, Ropke, "Large neighborhood search", Handbook of Metaheuristics (2010).
"""

from __future__ import annotations

import time as _time
from dataclasses import dataclass

import numpy as np

from ..errors import SolverError
from ..problem import Problem
from ..result import Status
from . import _exact_common as xc
from . import cpsat_decode as dec
from . import cpsat_model as cm
from .base import Solution
from .spec import Option, SolverSpec

__all__ = ["solve", "SPEC", "DEFAULT_TIME_LIMIT"]

#: Seconds when the caller gives no time limit.
DEFAULT_TIME_LIMIT = 60.0
#: The heuristic that gives the incumbent gets the same time limit as a standalone
#: ``heuristic`` run (it stops its optional stages at half of it, and usually finishes far
#: earlier), so with equal limits and seeds the exact answer is never worse than
#: ``optpart solve --solver heuristic``; the search gets whatever time is left.
HEURISTIC_SHARE = 1.0
#: Model terms (variables plus constraint terms) built per second, a conservative
#: figure for this machine class, and the most terms ever built (memory guard).
BUILD_RATE = 40_000.0
MAX_TERMS = 3_000_000
#: Share of the remaining search time kept for the confirmation of a proof: a confirmation
#: re-proves from scratch without presolve, so it needs a fair share (it had 10% before).
CONFIRM_SHARE = 0.25
#: Share of the search budget (wall and deterministic) first given to the plain CP search.
CP_FIRST_SHARE = 0.5
#: Graphs from this size on give ``LNS_SHARE`` of the search budget to LNS (option ``lns``).
LNS_MIN_NODES = 100
LNS_SHARE = 0.5

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
    ),
    memory_models=("static", "peak"),
    uses_hint=True,
    uses_time_limit=True,
)


def solve(problem: Problem, *, time_limit: float | None = None, seed: int = 0,
          hint: np.ndarray | None = None, memory_model: str = "static", workers: int = 4,
          deterministic: bool = True, log: bool = False, use_hint: bool = True,
          deterministic_time: float | None = None, confirm: bool = True,
          confirm_deterministic_time: float | None = None, export_model: str | None = None,
          lns: bool = True, lns_rounds: int | None = None) -> Solution:
    """Solve ``problem`` to optimality (or until ``time_limit``) with CP-SAT.

    Parameters
    ----------
    problem : Problem
        With devices; screened by :meth:`Problem.infeasibility` beforehand.
    time_limit : float, optional
        Seconds for the whole call (heuristic, model building, solve, confirmation,
        decoding); default 60.
    seed : int
        CP-SAT ``random_seed`` and the heuristic's seed.
    hint : ndarray, optional
        A placement to start from (used when its schedule beats the heuristic's).
    memory_model : {"static", "peak"}
        ``"peak"``: liveness memory of docs/model.md section 3 (static without the split).
    workers : int
        CP-SAT ``num_workers`` when ``deterministic`` is False.
    deterministic : bool
        Default True: one thread running CP-SAT's portfolio interleaved in deterministic
        batches; equal inputs give equal results unless the wall-clock limit stops it.
    log : bool
        Print CP-SAT's progress log.
    use_hint : bool
        Start from the heuristic (default True). False: the bare model, no incumbent.
    deterministic_time : float, optional
        CP-SAT ``max_deterministic_time`` of the search: a budget independent of machine speed.
    confirm : bool
        Confirm every proof by an independent re-solve (default True).
    confirm_deterministic_time : float, optional
        Deterministic budget of a confirmation (default: three times the search's, at least 10).
    export_model : str, optional
        Write the CP-SAT model (with hint) to this file: text proto (``.pbtxt``/``.txt``)
        or binary otherwise.
    lns : bool
        On graphs of at least ``LNS_MIN_NODES`` nodes (or whenever ``lns_rounds`` is given),
        give part of the search budget to a
        large-neighbourhood search around the incumbent (:mod:`optpart.solvers.lns`) when
        the full search has not proven optimality.
    lns_rounds : int, optional
        Cap on the rounds of that search (default: until the time limit).

    Returns
    -------
    Solution
    """
    budget = xc.Budget(DEFAULT_TIME_LIMIT if time_limit is None else float(time_limit))
    if memory_model not in ("static", "peak"):
        raise SolverError(f"cpsat: memory_model={memory_model!r} must be 'static' or 'peak'")
    if workers < 1:
        raise SolverError(f"cpsat: workers={workers} must be >= 1")
    peak = memory_model == "peak" and problem.has_split  # without the split static is exact
    n = problem.n_nodes
    if n == 0:
        return Solution(Status.OPTIMAL, placement=np.zeros(0, dtype=np.int64), start=np.zeros(0),
                        memory_model=memory_model, stats={"stop_reason": "proven optimal"})
    stats: dict = {"peak_model": peak}

    # 1. The incumbent: the heuristic's placement and schedule.
    incumbent = None
    if use_hint:
        incumbent = xc.heuristic_start(problem, time_limit=HEURISTIC_SHARE * budget.limit_s, seed=seed,
                                       memory_model="peak" if peak else "static")
        ms = xc.solution_makespan(problem, incumbent)
        if np.isfinite(ms):  # inf: the heuristic found no placement
            stats["heuristic_makespan"] = ms

    # 2. Size the model before building it.
    size = cm.estimate_size(problem, peak)
    stats["model_terms_estimate"] = size
    reserve = 0.2 + 2e-5 * (n + problem.n_edges)  # decoding and scoring
    if size > MAX_TERMS or size / BUILD_RATE > 0.5 * (budget.left() - reserve):
        stats["stop_reason"] = "model not built"
        return xc.fallback(problem, incumbent, memory_model,
                           f"cpsat: exact model not built: about {size:,} terms would take about "
                           f"{size / BUILD_RATE:.1f} s to build, more than the {budget.limit_s:g} s time limit allows"
                           + (f" (cap {MAX_TERMS:,} terms)" if size > MAX_TERMS else ""), stats)

    # 3. Data, model, hint.
    inc_ms = xc.solution_makespan(problem, incumbent) if incumbent is not None else float("inf")
    data = cm.prepare(problem, peak, inc_ms if np.isfinite(inc_ms) else None)
    stats.update(scale=data.grid.scale, exact_time=data.grid.exact, exact_memory=data.mem_exact,
                 pooled=data.pooled, symmetry_classes=[list(c) for c in data.classes])
    try:
        mv = cm.build(data, budget, reserve + 0.5)
    except xc.OutOfTime as exc:
        stats["stop_reason"] = "model not built"
        return xc.fallback(problem, incumbent, memory_model, f"cpsat: {exc}", stats)
    hint_p, hint_units = _choose_hint(problem, data, incumbent, hint)
    if hint_p is not None:
        cm.add_hint(mv.model, data, mv, hint_p, hint_units)
        if not peak:  # the hint's integer schedule is valid, so the optimum is no later
            mv.model.add(mv.makespan <= int((hint_units + data.dur[np.arange(n), hint_p]).max()))
    if export_model:
        _export(mv.model, export_model)

    # 4. Solve, then confirm any proof.
    search_left = budget.left() - reserve
    if search_left <= 0.05:
        stats["stop_reason"] = "time limit"
        return xc.fallback(problem, incumbent, memory_model, "cpsat: the time limit ran out before the search",
                           stats)
    # Below LNS_MIN_NODES proofs are within reach and the whole budget goes to the search,
    # unless LNS rounds are asked for explicitly.
    use_lns = lns and not data.pooled and (n >= LNS_MIN_NODES if lns_rounds is None else lns_rounds > 0)
    share = (1 - CONFIRM_SHARE if confirm else 1.0) * (1 - LNS_SHARE if use_lns else 1.0)
    search = _search(problem, data, mv, search_left * share, seed, deterministic, workers, log,
                     deterministic_time, stats)
    solver, name = search.solver, search.name
    bound_valid = not peak or (data.grid.exact and not dec.has_instants(problem))
    confirmed, better = None, None
    if name in ("OPTIMAL", "INFEASIBLE"):
        confirmed, better = (_confirm(problem, data, mv, solver, name, budget, reserve, search.dtime,
                                      confirm_deterministic_time, seed, log, stats) if confirm else (False, None))
    if name == "INFEASIBLE":
        return _infeasible(problem, incumbent, memory_model, stats, confirmed,
                           exact=data.mem_exact and bound_valid)
    cp_bound = data.grid.bound_seconds(search.bound_units) if bound_valid else 0.0
    if name == "OPTIMAL" and not confirmed:
        cp_bound = 0.0  # an unconfirmed proof gives no bound either
    sol = _values(problem, data, mv, solver) if name in ("OPTIMAL", "FEASIBLE") else None
    if better is not None:  # the confirmation refuted the proof with a shorter schedule
        sol = better
    if use_lns and name != "OPTIMAL" and budget.left() > reserve + 0.2:
        base = sol if sol is not None else (None if hint_p is None else (hint_p, hint_units))
        if base is not None:
            from . import lns as _lns
            round_dtime = 0.5 if deterministic_time is None else min(0.5, deterministic_time)
            rounds = lns_rounds
            if rounds is None and deterministic_time is not None:  # a deterministic budget for LNS too
                rounds = max(1, int(deterministic_time / round_dtime))
            better_place, better_units, lns_stats = _lns.improve(
                data, mv, base[0], base[1], budget, reserve=reserve, seed=seed, max_rounds=rounds,
                round_dtime=round_dtime, workers=1 if deterministic else workers)
            stats.update(lns_stats)
            if lns_stats["lns_improvements"]:
                sol = (better_place, better_units)
    if sol is None:
        stats["stop_reason"] = _stop_reason(search.dtime, deterministic_time)
        return xc.fallback(problem, incumbent, memory_model,
                           f"cpsat: CP-SAT found no solution ({stats['stop_reason']} of a "
                           f"{budget.limit_s:g} s call)", stats, lower_bound=cp_bound)

    # 5. Decode and compare with the incumbent.
    place, start = _decode(problem, data, sol[0], sol[1], stats)
    if start is None:
        return xc.fallback(problem, incumbent, memory_model, "cpsat: CP-SAT's schedule exceeds peak memory "
                           "once converted to seconds (floating-point rounding at equal times)", stats,
                           lower_bound=cp_bound)
    real_ms = float((start + problem.duration(place)).max())
    bound = cp_bound
    if name == "OPTIMAL" and confirmed and data.grid.exact and bound_valid:
        bound = max(bound, solver.objective_value / data.grid.scale)
    stats["objective_units"] = int((np.asarray(sol[1]) + data.dur[np.arange(n), sol[0]]).max())
    proven = bool(name == "OPTIMAL" and confirmed and data.mem_exact and bound_valid)
    message = _proof_message(name, confirmed, data, bound_valid, stats)
    if proven and real_ms > bound + 9e-7 * max(real_ms, 1e-12):
        proven = False
        message = (f"CP-SAT proved its model optimal on a time grid of 1/{data.grid.scale:g} s; rounding "
                   "leaves the gap shown")
    if name == "OPTIMAL":
        stats["stop_reason"] = "proven optimal" if confirmed else "proof not confirmed"
    else:
        stats["stop_reason"] = _stop_reason(search.dtime, deterministic_time)
    if np.isfinite(inc_ms) and inc_ms < real_ms - 1e-12 * max(real_ms, 1.0):
        stats["from_heuristic"] = True
        place, start, real_ms = np.asarray(incumbent.placement, dtype=np.int64), incumbent.start, inc_ms
        message = "; ".join(m for m in (message, "CP-SAT found nothing better than the heuristic's schedule")
                            if m)
        proven = proven and real_ms <= bound + 9e-7 * max(real_ms, 1e-12)
    bound = min(bound, real_ms)
    if stats["stop_reason"] in ("time limit", "deterministic time limit"):
        message = "; ".join(m for m in (message, f"stopped by the {stats['stop_reason']} "
                                        f"({budget.limit_s:g} s for the call)") if m)
    return Solution(Status.OPTIMAL if proven else Status.FEASIBLE, placement=place, start=start,
                    lower_bound=bound, message=message, stats=stats, memory_model=memory_model)


def _solver(seed: int, deterministic: bool, workers: int, log: bool, deterministic_time: float | None,
            portfolio: bool = True):
    """A CP-SAT solver with our parameters, including the presolve workaround of or-tools#5293.

    ``portfolio=False``: the plain constraint-programming search (one worker, no LP
    relaxation: ``linearization_level = 0``), which follows the model's decision
    strategy with clause learning; see :func:`_search` for why it runs first.
    """
    from ortools.sat.python import cp_model
    solver = cp_model.CpSolver()
    params = solver.parameters
    if deterministic_time is not None:
        params.max_deterministic_time = float(deterministic_time)
    params.random_seed = int(seed)
    params.num_workers = int(workers)
    if not portfolio:
        _cp_search(params)
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


def _cp_search(params) -> None:
    """One worker, no interleaving, no LP relaxation: deterministic by construction."""
    params.num_workers = 1
    params.interleave_search = False
    params.linearization_level = 0


@dataclass
class _Search:
    """What the search phases found: the solver holding the best solution (None: none),
    CP-SAT's status name, the best proven bound in grid units, deterministic seconds used."""

    solver: object
    name: str
    bound_units: float
    dtime: float


def _search(problem: Problem, data: cm.CpData, mv: cm.CpModelVars, seconds: float, seed: int,
            deterministic: bool, workers: int, log: bool, deterministic_time: float | None,
            stats: dict) -> _Search:
    """The search, in two phases sharing ``seconds`` (and ``deterministic_time``).

    1. ``CP_FIRST_SHARE`` of the budget to the plain CP search (:func:`_cp_search`).
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
    """
    phase1 = None if deterministic_time is None else CP_FIRST_SHARE * deterministic_time
    solver = _solver(seed, deterministic, workers, log, phase1, portfolio=False)
    t0 = _time.perf_counter()
    code = xc.solve_within(solver, mv.model, CP_FIRST_SHARE * seconds)
    name = solver.status_name(code)
    if name == "MODEL_INVALID":
        raise SolverError(f"cpsat built an invalid model for '{problem.name}': {mv.model.validate()}")
    bound, dtime = float(solver.best_objective_bound), float(solver.deterministic_time)
    branches = int(solver.num_branches)
    phases = [f"cp search: {name}"]
    best = solver if name in ("OPTIMAL", "FEASIBLE") else None
    rest = seconds - (_time.perf_counter() - t0)
    rest_dtime = None if deterministic_time is None else deterministic_time - dtime
    if name not in ("OPTIMAL", "INFEASIBLE") and rest > 0.05 and (rest_dtime is None or rest_dtime > 1e-3):
        if best is not None:  # phase 1's best schedule is the portfolio's hint and upper end
            place, units = _values(problem, data, mv, best)
            mv.model.clear_hints()
            cm.add_hint(mv.model, data, mv, place, units)
            mv.model.add(mv.makespan <= int(round(best.objective_value)))
        second = _solver(seed, deterministic, workers, log, rest_dtime)
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
    return _Search(best, name, bound, dtime)


def _confirm(problem: Problem, data: cm.CpData, mv: cm.CpModelVars, solver, name: str, budget: xc.Budget,
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
            _cp_search(params)
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
        return False, _values(problem, data, mv, confirmer)
    return result == "OPTIMAL" and int(round(confirmer.objective_value)) == z, None


def _infeasible(problem: Problem, incumbent: Solution | None, memory_model: str, stats: dict,
                confirmed: bool | None, exact: bool) -> Solution:
    """CP-SAT says no placement fits: claim it only when confirmed and the rows are exact."""
    if confirmed and exact:
        stats["stop_reason"] = "proven infeasible"
        return Solution(Status.INFEASIBLE, message="CP-SAT proved that no placement fits memory and "
                        "constraints (confirmed without presolve)", stats=stats, memory_model=memory_model)
    stats["stop_reason"] = "proof not confirmed" if exact else "search exhausted"
    why = ("CP-SAT found no placement but its proof was not confirmed" if exact else
           "CP-SAT found no placement within the conservatively rounded memory rows")
    if incumbent is not None and incumbent.placement is not None:
        return xc.fallback(problem, incumbent, memory_model, f"cpsat: {why}", stats)
    return Solution(Status.UNKNOWN, message=why, stats=stats, memory_model=memory_model)


def _choose_hint(problem: Problem, data: cm.CpData, incumbent: Solution | None,
                 hint: np.ndarray | None) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The hint placement (relabelled for symmetry breaking) and its integer schedule: the
    heuristic's schedule, or the given placement's canonical schedule when that is shorter."""
    k = problem.n_devices
    no_rows = np.full(k, -1, dtype=np.int64)
    best = None
    for place, start in ([(np.asarray(incumbent.placement, dtype=np.int64), incumbent.start)]
                         if incumbent is not None and incumbent.placement is not None else []) + \
                        ([(np.asarray(hint, dtype=np.int64), None)] if hint is not None else []):
        if not cm.fits_rows(problem, place, data.mem, no_rows if data.peak else data.cap):
            continue
        units = cm.integer_schedule(problem, place, start, data.dur, data.comm)
        ms = int((units + data.dur[np.arange(problem.n_nodes), place]).max())
        if best is None or ms < best[0]:
            best = (ms, place, units)
    if best is None:
        return None, None
    _, place, units = best
    # Relabel devices of each class to first-use order; the schedule is unchanged by it.
    return xc.relabel(place, data.classes, problem.topo), units


def _values(problem: Problem, data: cm.CpData, mv: cm.CpModelVars, solver) -> tuple[np.ndarray, np.ndarray]:
    """CP-SAT's placement and integer starts (pooled schedules get their devices here)."""
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


def _decode(problem: Problem, data: cm.CpData, place: np.ndarray, s_int: np.ndarray, stats: dict
            ) -> tuple[np.ndarray, np.ndarray | None]:
    """Start times in seconds of an integer schedule (None when peak memory breaks on float rounding)."""
    n = problem.n_nodes
    s_int = np.asarray(s_int, dtype=np.float64)
    e_int = s_int + data.dur[np.arange(n), place]
    if not data.peak:
        return place, xc.tighten_schedule(problem, place, s_int, e_int)
    # Keep CP-SAT's own starts under peak: moving starts earlier changes which tensors
    # are live together. Every real interval lies inside its model interval.
    start = s_int / data.grid.scale
    if dec.peak_fits(problem, place, start):
        return place, start
    stats["peak_float_fix"] = True
    for cand in (dec.separate_ties(problem, place, s_int, e_int, data.comm, data.grid.scale),
                 xc.tighten_schedule(problem, place, s_int, e_int)):
        if cand is not None and dec.peak_fits(problem, place, cand):
            return place, cand
    stats["peak_check_failed"] = True
    return place, None


def _proof_message(name: str, confirmed: bool | None, data: cm.CpData, bound_valid: bool, stats: dict) -> str:
    """Why an OPTIMAL answer of CP-SAT is not claimed as optimal (empty when it is)."""
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


def _stop_reason(dtime: float, deterministic_time: float | None) -> str:
    if deterministic_time is not None and dtime >= 0.99 * deterministic_time:
        return "deterministic time limit"
    return "time limit"


def _export(model, path: str) -> None:
    """Write the model proto: text for ``.pbtxt``/``.txt``, binary otherwise."""
    try:
        ok = model.export_to_file(str(path))
    except OSError as exc:  # pragma: no cover - the OS message names the path
        raise SolverError(f"cpsat: option export_model={path!r}: {exc}") from None
    if not ok:
        raise SolverError(f"cpsat: option export_model={path!r}: could not write the model there")
