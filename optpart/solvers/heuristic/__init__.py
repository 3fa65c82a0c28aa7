"""``heuristic``: list-scheduling constructions, then a search along the critical chain; always within memory.

One pipeline (:mod:`.pipeline`) under either memory model:

1. the constructions of :data:`.pipeline.CONSTRUCTIONS`, in order: HEFT's (exactly the
   ``heft`` baseline's schedule), m-ETF's (exactly ``etf``'s), HEFT with near candidates,
   HEFT in seeded noisy orders, the hint, everything on one device; each candidate is kept
   when it fits the memory model (under ``peak``: on its own schedule) and beats the
   incumbent, and a list scheduler that provably cannot beat the incumbent stops early;
2. under ``peak``, the memory step of the seed method (:mod:`optpart.solvers.pardnn`)
   repairs the static answer when no construction fits (:mod:`.peak`);
3. the search (:mod:`.search`) from the incumbent: moves the critical chain points at,
   re-timed incrementally, within a deterministic budget set by ``effort`` and the size;
4. on training steps, the pipeline-stage placement (:mod:`.stage_seed`), a finished answer.

So the answer is never worse than ``heft``, ``etf`` or ``single``, nor than the hint. Stages
after the first two are skipped once the incumbent is within ``gap`` of the proven lower bound.
Deterministic without a time limit (randomness only from ``seed``, drawn in the canonical node
order, so renumbering the nodes changes nothing); a time limit stops stages early
(``stats["stopped"]`` says where). See docs/heuristic.md.
"""

from __future__ import annotations

import time as _time

import numpy as np

from ..._gc import no_gc
from ...evaluate import time_tolerance
from ...model.memory import fits
from ...model.problem import Problem
from ...result import Status
from ...schedule import Graph, justify
from ...units import format_bytes
from ..base import Solution
from ..spec import Option, SolverSpec
from .pipeline import Run, construct
from .search import improve

__all__ = ["solve", "SPEC"]

SPEC = SolverSpec(
    options=(Option("effort", float, 1.0, "0: constructions only; 1: default; higher: more search", min=0.0,
                    finite=True),
             Option("gap", float, 1e-4, "skip the later stages once a candidate is within this fraction of the "
                    "proven lower bound (0: only at the bound)", min=0.0, finite=True),
             Option("workers", int, 2, "processes for the first constructions (1: one process)", min=1)),
    memory_models=("static", "peak"), uses_hint=True, uses_time_limit=True)

#: Search budget, in work units (:mod:`.search`) per unit of effort: ``SEARCH_WORK``, at most
#: ``SEARCH_SMALL`` per node and edge, never above ``MAX_SEARCH_WORK`` whatever the effort (a time
#: limit stops it earlier). It runs when the budget pays for ``SEARCH_FROM`` reschedules of the
#: whole graph (up to 30,000 nodes + edges at effort 1): on larger graphs each move re-times a
#: large part of the graph and the search measurably does not pay (benchmarks/RESULTS.md).
SEARCH_WORK, SEARCH_SMALL, SEARCH_FROM, MAX_SEARCH_WORK = 1_200_000, 6_000, 40, 10 ** 10
#: Graphs up to this many nodes are perturbed at local optima (iterated local search).
PERTURB_NODES = 300
_DEFAULT_EFFORT = 1.0
_DEADLINE_SHARE = 0.5   # share of the time limit the stages may use (the rest: the check and output)


@SPEC.checked("heuristic")
def solve(problem: Problem, *, time_limit: float | None = None, seed: int = 0, hint=None,
          memory_model: str = "static", effort: float = 1.0, gap: float = 1e-4, workers: int = 2) -> Solution:
    """Place and schedule ``problem`` (see the module docstring).

    Parameters
    ----------
    problem : Problem
        The instance, with devices.
    time_limit : float, optional
        Wall-clock cap (makes the result depend on timing); stages stop at half of it.
    seed : int
        Seeds the noisy orders and the perturbations (equal seeds, equal results without a
        time limit).
    hint : placement, optional
        A starting placement, one of the candidates (projected onto the constraints).
    memory_model : {"static", "peak"}
        The memory model every returned placement respects.
    effort : float
        0: constructions only; 1 (default); higher: more noisy orders and search (capped).
        Above 1 the default effort's answer is a candidate too, so more effort never returns
        a worse answer.
    gap : float
        Once a candidate is within this fraction of the proven lower bound, the stages after
        HEFT's and m-ETF's constructions are skipped (``stats["within_gap"]``).
    workers : int
        Processes the first constructions may use: from 2*10^5 nodes + edges, on Linux with two
        CPUs or more, m-ETF's construction runs in a forked process beside HEFT's. The answer is
        the same with 1.

    Returns
    -------
    Solution
        The best placement found and its schedule; ``infeasible`` when the pinned nodes alone
        overflow a device (static) or a proof exists (peak); ``unknown`` with the reason when
        no placement within memory was found.
    """
    t0 = _time.perf_counter()
    deadline = None if time_limit is None else t0 + _DEADLINE_SHARE * float(time_limit)
    if problem.n_nodes == 0:
        return Solution(Status.OPTIMAL, placement=np.zeros(0, dtype=np.int64), start=np.zeros(0),
                        memory_model=memory_model)
    reason = _infeasible(problem, memory_model)
    if reason is not None:
        return Solution(Status.INFEASIBLE, message=reason, memory_model=memory_model)
    g = Graph(problem)
    sol, ms = _solve_at(problem, g, memory_model, effort, seed, hint, deadline, gap, workers)
    if effort > _DEFAULT_EFFORT and sol.status is Status.FEASIBLE:   # more effort never loses what less finds
        low, low_ms = _solve_at(problem, g, memory_model, _DEFAULT_EFFORT, seed, hint, deadline, gap, workers)
        if low_ms < ms:
            low.stats["kept"] = f"the answer at effort {_DEFAULT_EFFORT:g} (shorter than at effort {effort:g})"
            low.stats["effort_makespan"] = ms
            sol = low
    return sol


def _infeasible(problem: Problem, memory_model: str) -> str | None:
    """A proven reason no placement fits: the liveness screen under peak, else pinned bytes over a device."""
    if memory_model == "peak" and problem.has_split:
        return problem.infeasibility("peak")
    pinned = problem.pin >= 0
    if not pinned.any():
        return None
    load = np.bincount(problem.pin[pinned], weights=problem.memory[pinned], minlength=problem.n_devices)
    for d in np.flatnonzero(~fits(load, problem.device_memory)).tolist():
        return (f"the nodes pinned to device '{problem.device_ids[d]}' need {format_bytes(load[d])} "
                f"but it has {format_bytes(problem.device_memory[d])}")
    return None


def _solve_at(problem: Problem, g: Graph, memory_model: str, effort: float, seed: int, hint, deadline,
              gap: float, workers: int) -> tuple[Solution, float]:
    """The heuristic at one effort: constructions, the search, the stage placement; the solution
    and its makespan (inf without a placement)."""
    run = Run(problem, g, memory_model, effort, seed, hint, deadline, gap, workers)
    with no_gc():  # millions of small lists at 10^6 nodes: the collector's passes cost more than they free
        construct(run)
        if run.best is None and run.peak:
            from .peak import repair
            repair(run)
        if run.best is None:
            return _no_placement(run, memory_model), float("inf")
        if run.jr and not run.justify_all and not run.settled() and not run.late("the final justification"):
            ms, name, place, s, f = run.best
            s, f, ms2 = justify(g, place, s, f, run.jr)
            if run.fits_peak(place, s, f):
                run.best = (ms2, name, place, s, f)
        _search(run)
        if not run.settled() and not run.late("the stage placement"):
            from .stage_seed import stage_candidate
            stage_candidate(run)
    ms, name, place, s, _ = run.best
    run.stats["construction"] = name
    status = Status.OPTIMAL if ms <= run.lower + time_tolerance(ms) else Status.FEASIBLE
    message = f"stopped early: {run.stats['stopped']}" if "stopped" in run.stats else ""
    return Solution(status, placement=np.asarray(place, dtype=np.int64), start=np.asarray(s),
                    memory_model=memory_model, stats=run.stats, message=message), ms


def _search(run: Run) -> None:
    """The search from the incumbent within its budget (``stats["search"]``: work, moves, gain;
    ``stats["search_seconds"]``: its wall time)."""
    g = run.g
    budget = int(min(MAX_SEARCH_WORK, run.effort * min(SEARCH_WORK, SEARCH_SMALL * run.size)
                     * (1.5 if g.n <= PERTURB_NODES else 1.0)))
    run.stats["search"] = {"work": 0, "budget": budget, "moves": 0, "gain": 0.0}
    if (run.settled() or g.k < 2 or run.effort * SEARCH_WORK < SEARCH_FROM * run.size
            or run.late("the search", 0.5)):
        return
    t0 = _time.perf_counter()
    ms, name, place, s, f = run.best
    admit = None
    if run.peak:
        p = run.problem

        def admit(pl, st, fi) -> bool:
            return run.fits_peak(pl, st, fi)
    small = g.n <= PERTURB_NODES
    out = improve(g, place, s, run.units(), [float("inf")] * g.k if run.peak else run.capacity, budget,
                  run.deadline, admit=admit, seed=run.seed, perturb=small, justify_rounds=run.jr, lower=run.lower,
                  restarts=None if small else _restarts(run), restart_cost=(g.k + 2 + 2 * run.jr) * run.size)
    run.stats["search"] = {"work": out["work"], "budget": budget, "moves": out["moves"],
                           "gain": (ms - out["makespan"]) / ms if ms else 0.0}
    run.stats["search_seconds"] = _time.perf_counter() - t0
    if out["makespan"] < ms:
        s2, f2, ms2 = justify(g, out["place"], out["start"], out["finish"], run.jr)
        if not run.fits_peak(out["place"], s2, f2):
            s2, f2, ms2 = out["start"], out["finish"], out["makespan"]
        run.best = (ms2, name + "+search", out["place"], s2, f2)
    if out["stopped"]:
        run.late("the end of the search")


def _restarts(run: Run):
    """The search's restarts: the run's further noisy orders (:attr:`.pipeline.Run.noisy`), justified."""
    from ...schedule import NoRoom, eft_schedule
    for order in run.noisy:
        try:
            res = eft_schedule(run.g, order, run.policy())
        except NoRoom:
            continue
        s, f, _ = justify(run.g, res.place, res.start, res.finish, run.jr) if run.jr else (res.start, res.finish, 0)
        if run.fits_peak(res.place, s, f):
            yield res.place, s


def _no_placement(run: Run, memory_model: str) -> Solution:
    """``unknown`` with the reason (under peak: the closest candidate's overflow)."""
    if run.peak:
        from ...model.memory import overflow_message
        msg = "no placement within memory under the peak model was found"
        if run.closest is not None:
            _, _, pl, st = run.closest
            st = np.asarray(st)
            msg += "; closest: " + overflow_message(run.problem, np.asarray(pl), st,
                                                    st + run.problem.duration(np.asarray(pl)), "peak")
    else:
        msg = ("no placement within memory was found (the heuristic's guarantee needs every device to hold "
               "total/k plus the largest colocation group, and no forbidden devices)")
    return Solution(Status.UNKNOWN, message=msg, memory_model=memory_model, stats=run.stats)
