"""``cpsat``: exact placement and scheduling with OR-Tools CP-SAT.

The model (built in :mod:`optpart.solvers.exact.cpsat_model`, one function per family):

* ``x[v, d]``: node ``v`` runs on device ``d`` (only for allowed pairs); exactly one per
  node; nodes of a colocation group share their literals.
* ``S[v]``, ``E[v]``: start and end; one optional interval ``S[v] .. E[v]`` of length
  ``dur(v, d)`` per allowed device, present iff ``x[v, d]``; ``add_no_overlap`` per device.
* Edge ``(u, w)``: ``S[w] >= E[u]``, plus the transfer when the ends are apart (a literal
  ``apart[e]`` with uniform links, per-pair terms otherwise).
* Static memory: ``sum_v memory(v) x[v, d] <= memory(d)`` per device. Peak memory
  (``memory_model="peak"`` on a graph with the param/output/temp split): one cumulative
  per device over tensor lifetimes (see :func:`optpart.solvers.exact.cpsat_peak.add_peak_memory`).
* Objective: the makespan. Redundant rows: device loads, total load, heads and tails,
  the generic lower bound; symmetry breaking within classes of interchangeable devices.

**The call, phase by phase, within one wall-clock budget** (``time_limit``, default 60 s;
the whole call ends within about ``time_limit + 2 s``):

1. The incumbent: the ``heuristic`` solver's placement *and schedule* (called directly,
   with a share of the budget). The answer is never worse than it.
2. The model size is estimated; when it cannot be built in the time left (or would need
   gigabytes), or the graph has ``WINDOW_MIN_NODES`` nodes or more, the incumbent is
   improved by CP-SAT sub-solves, unit moves that shift stage boundaries with the whole
   step re-timed (:mod:`optpart.solvers.exact.lns_units`), then time-slab windows
   (:mod:`optpart.solvers.exact.lns_window`), and returned with a message saying why
   (``lns=False``: the incumbent as it is).
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
:class:`~optpart.solvers.exact._exact_common.TimeGrid`). ``optimal`` is claimed only when the
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

import numpy as np

from ...errors import SolverError
from ...evaluate import canonical_schedule
from ...model.problem import Problem
from ...result import Status
from ...schedule.replay import integer_schedule
from . import _exact_common as xc
from . import cpsat_decode as dec
from . import cpsat_model as cm
from . import cpsat_search as cs
from .cpsat_bounds import SEGMENT_SHARE, closed_form_bound, meets, segment_step, target_units
from .cpsat_rules import order_twins
from ..base import Solution
from ..spec import Option, SolverSpec

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
#: Graphs from this size on give ``LNS_SHARE`` of the search budget to LNS (option ``lns``).
LNS_MIN_NODES = 100
LNS_SHARE = 0.5
#: From this many nodes (or when the full model is too big to build) the search is the
#: windowed LNS of :mod:`optpart.solvers.exact.lns_window`: sub-models of ``window_size`` nodes
#: with the rest fixed. Measured: the full peak model of densenet121 (1,943 nodes) is built
#: but 120 s of search leave the heuristic's schedule unimproved (docs/exact.md).
WINDOW_MIN_NODES = 600

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
        Option("window_size", int, 200, "nodes per windowed sub-solve on large graphs (lns_window)",
               min=2, max=100000),
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
        large-neighbourhood search around the incumbent (:mod:`optpart.solvers.exact.lns`) when
        the full search has not proven optimality.
        From ``WINDOW_MIN_NODES`` nodes, or when the full model is too big to build, the
        search is by unit moves and windows instead (:mod:`optpart.solvers.exact.lns_units`:
        stage boundaries shifted, every start re-timed, at most half the time left or half
        of ``deterministic_time``; then :mod:`optpart.solvers.exact.lns_window`: sub-models of
        ``window_size`` nodes with the rest fixed, ``lns_window.WINDOW_DTIME`` deterministic
        seconds each under ``deterministic_time``). False: the heuristic's schedule is returned there.
    lns_rounds : int, optional
        Cap on the rounds of that search (default: until the time limit).
    window_size : int
        Nodes per windowed sub-solve at first (default 200; doubled after a pass without gain).

    Returns
    -------
    Solution
    """
    budget = xc.Budget(DEFAULT_TIME_LIMIT if time_limit is None else float(time_limit))
    peak = memory_model == "peak" and problem.has_split  # without the split static is exact
    n = problem.n_nodes
    if n == 0:
        return Solution(Status.OPTIMAL, placement=np.zeros(0, dtype=np.int64), start=np.zeros(0),
                        memory_model=memory_model, stats={"stop_reason": "proven optimal"})
    stats: dict = {"peak_model": peak}

    # 1. The incumbent: the heuristic's placement and schedule.
    incumbent = None
    if use_hint:
        incumbent = xc.start_from_heuristic(problem, stats, time_limit=HEURISTIC_SHARE * budget.limit_s, seed=seed,
                                            memory_model="peak" if peak else "static")

    # 2. Size the model before building it.
    size = cm.estimate_size(problem, peak)
    stats["model_terms_estimate"] = size
    reserve = 0.2 + 2e-5 * (n + problem.n_edges)  # decoding and scoring
    why = xc.too_big("cpsat", size, BUILD_RATE, MAX_TERMS, budget, reserve)
    if why is None and n >= WINDOW_MIN_NODES and lns:
        why = (f"cpsat: the full model of {n:,} nodes is not searched (windows from "
               f"{WINDOW_MIN_NODES:,} nodes)")
    if why is not None:
        stats["stop_reason"] = "model not built"
        if not lns:
            return xc.fallback(problem, incumbent, memory_model, why, stats)
        from .lns_window import solve_by_windows
        return solve_by_windows(problem, incumbent, memory_model, budget, reserve, why, stats, seed=seed,
                                size=window_size, deterministic_time=deterministic_time, log=log)

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
    hint_p, hint_units = _choose_hint(problem, data, mv, incumbent, hint)
    if hint_p is not None:
        cm.add_hint(mv.model, data, mv, hint_p, hint_units)
        if not peak:  # the hint's integer schedule is valid, so the optimum is no later
            mv.model.add(mv.makespan <= int((hint_units + data.dur[np.arange(n), hint_p]).max()))
    # Segments between cut nodes: small exact sub-solves give a bound and span rows.
    seg_dtime = None if deterministic_time is None else SEGMENT_SHARE * deterministic_time
    seg_lb = segment_step(data, mv, budget, SEGMENT_SHARE * (budget.left() - reserve), seg_dtime, seed, stats,
                          solve)
    if seg_lb > 0 and deterministic_time is not None:
        deterministic_time -= seg_dtime
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
    closed_lb = closed_form_bound(data, seg_lb)
    search = cs.search(problem, data, mv, search_left * share, seed, deterministic, workers, log,
                     deterministic_time, stats, target_units=target_units(data, closed_lb, hint_p, hint_units))
    solver, name = search.solver, search.name
    bound_valid = not peak or (data.grid.exact and not dec.has_instants(problem))
    confirmed, better = None, None
    if name in ("OPTIMAL", "INFEASIBLE"):
        confirmed, better = (cs.confirm(problem, data, mv, solver, name, budget, reserve, search.dtime,
                                      confirm_deterministic_time, seed, log, stats) if confirm else (False, None))
    if name == "INFEASIBLE":
        return _infeasible(problem, incumbent, memory_model, stats, confirmed,
                           exact=data.mem_exact and bound_valid)
    cp_bound = data.grid.bound_seconds(search.bound_units) if bound_valid and not search.at_target else 0.0
    if name == "OPTIMAL" and not confirmed:
        cp_bound = 0.0  # an unconfirmed proof gives no bound either
    sol = cs.values(problem, data, mv, solver) if name in ("OPTIMAL", "FEASIBLE") else None
    if better is not None:  # the confirmation refuted the proof with a shorter schedule
        sol = better
    if use_lns and name != "OPTIMAL" and not search.at_target and budget.left() > reserve + 0.2:
        base = sol if sol is not None else (None if hint_p is None else (hint_p, hint_units))
        if base is not None:
            sol = _polish(data, mv, base, sol, budget, reserve, seed, lns_rounds, deterministic_time,
                          1 if deterministic else workers, stats)
    if sol is None:
        stats["stop_reason"] = _stop_reason(search.dtime, deterministic_time)
        return xc.fallback(problem, incumbent, memory_model,
                           f"cpsat: CP-SAT found no solution ({stats['stop_reason']} of a "
                           f"{budget.limit_s:g} s call)", stats, lower_bound=cp_bound)

    # 5. Decode and compare with the incumbent.
    def relax(place: np.ndarray, start: np.ndarray) -> float:
        if budget.left() <= reserve + 0.3:
            return 0.0
        from .cpsat_relax import relaxed_bound
        return relaxed_bound(problem, data, place, start, budget, reserve, deterministic_time, seed, log, stats)

    return _answer(problem, data, sol, name, confirmed, cp_bound, bound_valid, incumbent, inc_ms, memory_model,
                   budget, _stop_reason(search.dtime, deterministic_time), solver, stats, closed_lb, seg_lb, relax)


def _polish(data, mv, base: tuple, sol: tuple | None, budget: xc.Budget, reserve: float, seed: int,
            lns_rounds: int | None, deterministic_time: float | None, workers: int, stats: dict) -> tuple | None:
    """Large-neighbourhood rounds from ``base`` (:func:`optpart.solvers.exact.lns.improve`), under a
    deterministic budget when one is given: the improved ``(placement, units)``, else ``sol``."""
    from . import lns as _lns
    round_dtime = 0.5 if deterministic_time is None else min(0.5, deterministic_time)
    rounds = lns_rounds
    if rounds is None and deterministic_time is not None:  # a deterministic budget for LNS too
        rounds = max(1, int(deterministic_time / round_dtime))
    better_place, better_units, lns_stats = _lns.improve(
        data, mv, base[0], base[1], budget, reserve=reserve, seed=seed, max_rounds=rounds,
        round_dtime=round_dtime, workers=workers)
    stats.update(lns_stats)
    return (better_place, better_units) if lns_stats["lns_improvements"] else sol


def _answer(problem: Problem, data, sol: tuple, name: str, confirmed: bool | None, cp_bound: float,
            bound_valid: bool, incumbent: Solution | None, inc_ms: float, memory_model: str, budget: xc.Budget,
            search_stop: str, solver, stats: dict, closed_lb: float, seg_lb: float, relax) -> Solution:
    """CP-SAT's schedule in seconds, its proven bound and status, or the incumbent when that is
    shorter: optimal when the proof is confirmed, the memory rows exact and the rounded
    makespan meets the bound, or when the makespan meets ``closed_lb`` (a bound with no
    proof of CP-SAT on the whole model behind it: closed-form, or ``seg_lb`` from segments), or,
    where the peak model is a restriction, when it meets ``relax(place, start)``: the proven
    optimum of the relaxation (:func:`optpart.solvers.exact.cpsat_relax.relaxed_bound`)."""
    n = problem.n_nodes
    place, start = _decode(problem, data, sol[0], sol[1], stats)
    if start is None:
        return xc.fallback(problem, incumbent, memory_model, "cpsat: CP-SAT's schedule exceeds peak memory "
                           "once converted to seconds (floating-point rounding at equal times)", stats,
                           lower_bound=cp_bound)
    real_ms = float((start + problem.duration(place)).max())
    bound = max(cp_bound, closed_lb)
    if name == "OPTIMAL" and confirmed and data.grid.exact and bound_valid:
        bound = max(bound, solver.objective_value / data.grid.scale)
    stats["objective_units"] = int((np.asarray(sol[1]) + data.dur[np.arange(n), sol[0]]).max())
    proven = bool(name == "OPTIMAL" and confirmed and data.mem_exact and bound_valid)
    message = _proof_message(name, confirmed, data, bound_valid, stats)
    if proven and real_ms > bound + 9e-7 * max(real_ms, 1e-12):
        proven = False
        message = (f"CP-SAT proved its model optimal on a time grid of 1/{data.grid.scale:g} s; rounding "
                   "leaves the gap shown")
    by_bound = not proven and meets(real_ms, closed_lb)
    if by_bound:  # the schedule meets a closed-form bound: optimal without any solver proof
        proven, message = True, ""
        stats["proof"] = "segment bound" if seg_lb > 0 and meets(real_ms, seg_lb) else "closed-form lower bound"
        stats.setdefault("confirmation", "trivial (the makespan meets a bound proven without a search of the "
                         "whole model: closed-form, or segments whose own proofs were confirmed)")
    if name == "OPTIMAL" or by_bound:
        stats["stop_reason"] = "proven optimal" if confirmed or by_bound else "proof not confirmed"
    else:
        stats["stop_reason"] = search_stop
    if np.isfinite(inc_ms) and inc_ms < real_ms - 1e-12 * max(real_ms, 1.0):
        stats["from_heuristic"] = True
        place, start, real_ms = np.asarray(incumbent.placement, dtype=np.int64), incumbent.start, inc_ms
        message = "; ".join(m for m in (message, "CP-SAT found nothing better than the heuristic's schedule")
                            if m)
        proven = proven and meets(real_ms, bound)
    if data.peak and not bound_valid and not proven:
        # The peak model was a restriction here: its relaxation gives the bound (cpsat_relax).
        relaxed = relax(place, start)
        bound = max(bound, relaxed)
        if relaxed > 0 and meets(real_ms, relaxed):
            proven, stats["proof"], stats["stop_reason"] = True, "relaxation", "proven optimal"
            message = "; ".join(m for m in (message, "optimal: the schedule meets the proven optimum of the "
                                            "peak model's relaxation") if m and "conservatively" not in m)
    bound = min(bound, real_ms)
    if stats["stop_reason"] in ("time limit", "deterministic time limit"):
        message = "; ".join(m for m in (message, f"stopped by the {stats['stop_reason']} "
                                        f"({budget.limit_s:g} s for the call)") if m)
    return Solution(Status.OPTIMAL if proven else Status.FEASIBLE, placement=place, start=start,
                    lower_bound=bound, message=message, stats=stats, memory_model=memory_model)


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


def _choose_hint(problem: Problem, data: cm.CpData, mv: cm.CpModelVars, incumbent: Solution | None,
                 hint: np.ndarray | None) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The hint placement (relabelled for symmetry breaking) and its integer schedule: the
    heuristic's schedule, or the given placement's canonical schedule when that is shorter;
    twins put in the model's order (no longer, see :func:`cpsat_rules.order_twins`)."""
    k = problem.n_devices
    no_rows = np.full(k, -1, dtype=np.int64)
    best = None
    for place, start in ([(np.asarray(incumbent.placement, dtype=np.int64), incumbent.start)]
                         if incumbent is not None and incumbent.placement is not None else []) + \
                        ([(np.asarray(hint, dtype=np.int64), None)] if hint is not None else []):
        if not cm.fits_rows(problem, place, data.mem, no_rows if data.peak else data.cap):
            continue
        if start is None:
            start = canonical_schedule(problem, place)[0]
        units = integer_schedule(problem, place, start, data.dur, data.comm)
        ms = int((units + data.dur[np.arange(problem.n_nodes), place]).max())
        if best is None or ms < best[0]:
            best = (ms, place, units)
    if best is None:
        return None, None
    _, place, units = best
    if mv.twins is not None:
        place, units = order_twins(mv.twins, place, units)
    # Relabel devices of each class to first-use order; the schedule is unchanged by it.
    return xc.relabel(place, data.classes, data.sym_order), units


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
