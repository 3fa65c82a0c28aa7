"""One exact solver call: its wall-clock budget, the heuristic's incumbent it starts from (and
never returns worse than), CP-SAT runs within the budget, and the fallback to the incumbent."""

from __future__ import annotations

import math
import threading
import time as _time

import numpy as np

from ...evaluate import canonical_schedule, problem_lower_bound
from ...model.problem import Problem
from ...result import Status
from ..base import Solution, SolverError
from .bounds import memory_path_bound

#: Wall budgets from this many seconds on count as no limit (a timer cannot wait that long).
UNLIMITED_S = 1e9


class OutOfTime(Exception):
    """Raised while building a model when the budget runs out; the caller falls back."""


class Budget:
    """The wall-clock budget of one call; every phase asks what is left.

    Parameters
    ----------
    limit_s : float
        Seconds for the whole call.
    """

    def __init__(self, limit_s: float) -> None:
        self.limit_s = float(limit_s)
        self.t0 = _time.perf_counter()

    def elapsed(self) -> float:
        """Seconds since the call started.

        Returns
        -------
        float
        """
        return _time.perf_counter() - self.t0

    def left(self) -> float:
        """Seconds left before the deadline (negative once past it).

        Returns
        -------
        float
        """
        return self.limit_s - self.elapsed()


def unlimited(seconds: float) -> bool:
    """True when ``seconds`` is no wall limit (``inf`` or from :data:`UNLIMITED_S` on).

    Parameters
    ----------
    seconds : float
        A budget.

    Returns
    -------
    bool
    """
    return not math.isfinite(float(seconds)) or float(seconds) >= UNLIMITED_S


def solve_within(solver, model, seconds: float) -> int:
    """Run CP-SAT for at most ``seconds`` of wall time; its status code.

    A timer calls ``stop_search`` at the budget (CP-SAT's own ``max_time_in_seconds``, set a
    little above, stops interleaved search early, at 60-85% of it). When the C++ solver raises
    (or-tools 9.15's presolve on some small peak models: ``IndexError: raw_hash_map<>::at``) the
    search runs once more with presolve off in the time left.

    Parameters
    ----------
    solver : ortools.sat.python.cp_model.CpSolver
    model : ortools.sat.python.cp_model.CpModel
    seconds : float
        The wall budget (:func:`unlimited`: CP-SAT's own limits only).

    Returns
    -------
    int

    Raises
    ------
    SolverError
        When the solver raises with presolve off, or on both attempts.
    """
    t0 = _time.perf_counter()

    def run(budget_s: float) -> int:
        if unlimited(budget_s):
            return solver.solve(model)
        budget_s = max(0.05, float(budget_s))
        solver.parameters.max_time_in_seconds = 1.2 * budget_s + 0.5
        timer = threading.Timer(budget_s, solver.stop_search)
        timer.daemon = True
        timer.start()
        try:
            return solver.solve(model)
        finally:
            timer.cancel()

    try:
        return run(seconds)
    except Exception as exc:  # raised by the C++ solver
        if not solver.parameters.cp_model_presolve:
            raise SolverError(f"CP-SAT failed ({type(exc).__name__}: {exc})") from None
        first = f"{type(exc).__name__}: {exc}"
    solver.parameters.cp_model_presolve = False
    try:
        return run(seconds - (_time.perf_counter() - t0))
    except Exception as exc:
        raise SolverError(f"CP-SAT failed with presolve ({first}) and without it "
                          f"({type(exc).__name__}: {exc})") from None


def start_from_heuristic(problem: Problem, stats: dict, *, time_limit: float, seed: int,
                         memory_model: str) -> Solution:
    """The ``heuristic`` solver's answer, the incumbent (called directly, so its bugs surface);
    its makespan goes to ``stats["heuristic_makespan"]``.

    Parameters
    ----------
    problem : Problem
    stats : dict
    time_limit : float
    seed : int
    memory_model : str

    Returns
    -------
    Solution
    """
    from .. import heuristic
    incumbent = heuristic.solve(problem, time_limit=max(float(time_limit), 1e-3), seed=seed,
                                memory_model=memory_model)
    ms = solution_makespan(problem, incumbent)
    if np.isfinite(ms):
        stats["heuristic_makespan"] = ms
    return incumbent


def warm_starts(incumbent: Solution | None, hint: np.ndarray | None) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """The warm starts an exact model may take, the incumbent's first.

    Parameters
    ----------
    incumbent : Solution, optional
    hint : numpy.ndarray, optional

    Returns
    -------
    list of (numpy.ndarray, numpy.ndarray or None)
        ``(placement, start)``; the hint's start is None (its canonical schedule is made when it fits).
    """
    starts = [] if incumbent is None or incumbent.placement is None else [
        (np.asarray(incumbent.placement, dtype=np.int64), incumbent.start)]
    return starts + ([] if hint is None else [(np.asarray(hint, dtype=np.int64), None)])


def too_big(name: str, terms: int, rate: float, cap: int, budget: Budget, reserve: float) -> str | None:
    """Why a model of ``terms`` terms is not built (None: build it): more than ``cap``, or more
    than half the time left at ``rate`` terms per second.

    Parameters
    ----------
    name : str
        The solver, for the message.
    terms : int
        Estimated variables plus constraint terms.
    rate : float
        Terms built per second.
    cap : int
        The most terms ever built.
    budget : Budget
    reserve : float

    Returns
    -------
    str or None
    """
    if terms <= cap and terms / rate <= 0.5 * (budget.left() - reserve):
        return None
    return (f"{name}: exact model not built: about {terms:,} terms would take about {terms / rate:.1f} s to "
            f"build, more than the {budget.limit_s:g} s time limit allows"
            + (f" (cap {cap:,} terms)" if terms > cap else ""))


def solution_makespan(problem: Problem, sol: Solution) -> float:
    """A solution's makespan (its own schedule, else the canonical one); inf without placement.

    Parameters
    ----------
    problem : Problem
    sol : Solution
        A solver's answer.

    Returns
    -------
    float
    """
    if sol.placement is None:
        return float("inf")
    if problem.n_nodes == 0:
        return 0.0
    place = np.asarray(sol.placement, dtype=np.int64)
    if sol.start is None:
        return float(canonical_schedule(problem, place)[1].max())
    return float((np.asarray(sol.start, dtype=np.float64) + problem.duration(place)).max())


def fallback(problem: Problem, incumbent: Solution | None, memory_model: str, reason: str,
             stats: dict, lower_bound: float = 0.0) -> Solution:
    """The incumbent as the answer, ``reason`` in the message, with the best of the generic
    bound, the memory path and ``lower_bound``; ``unknown`` without an incumbent.

    Parameters
    ----------
    problem : Problem
    incumbent : Solution or None
    memory_model : str
    reason : str
        Why the exact search gave up.
    stats : dict
    lower_bound : float
        A bound the exact solver proved (seconds).

    Returns
    -------
    Solution
    """
    stats = dict(stats)
    stats.setdefault("stop_reason", reason)
    stats["from_heuristic"] = True
    bound = max(problem_lower_bound(problem), float(lower_bound), memory_path_bound(problem, memory_model))
    if incumbent is None or incumbent.placement is None:
        status = Status.INFEASIBLE if incumbent is not None and incumbent.status is Status.INFEASIBLE \
            else Status.UNKNOWN
        msg = reason if incumbent is None or not incumbent.message else f"{reason}; heuristic: {incumbent.message}"
        return Solution(status, lower_bound=bound, message=msg, memory_model=memory_model, stats=stats)
    status = Status.OPTIMAL if incumbent.status is Status.OPTIMAL else Status.FEASIBLE
    return Solution(status, placement=np.asarray(incumbent.placement, dtype=np.int64), start=incumbent.start,
                    lower_bound=max(bound, float(incumbent.lower_bound or 0.0)),
                    message=f"{reason}; this is the heuristic's schedule", memory_model=memory_model, stats=stats)
