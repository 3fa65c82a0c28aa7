"""Helpers shared by the exact solvers ``cpsat`` and ``milp``.

* re-exported for the solvers: the time tables of :mod:`.exact_times`, the bounds of
  :mod:`.exact_bounds` and the replay :func:`~optpart.schedule.replay.tighten_schedule`.
* :class:`TimeGrid` (from :mod:`.exact_grid`): the integer time grid CP-SAT needs. When every duration and
  transfer is an integer multiple of ``1 / scale`` for a small ``scale`` (STG: integer
  times and free links, scale 1) the grid is exact. Otherwise quantities are rounded
  *up* (so an integer schedule stays valid in seconds) and the grid records the most
  rounding a chain of the schedule can accumulate, which is subtracted from the solver's
  bound to keep it a valid lower bound of the real problem.
* :func:`device_classes`: devices that are interchangeable (same memory, speed, allowed
  nodes, and links unchanged by swapping them), for symmetry breaking.
* :func:`relabel`: a placement with devices of each class renumbered in order of first
  use, the form symmetry breaking keeps.
* :class:`Budget`, :func:`heuristic_start`, :func:`fallback`: the wall-clock budget of a
  call, the heuristic's answer every exact solver starts from (and never does worse
  than), and that answer returned when the exact model does not fit the budget.
* :func:`schedule_fits`, :func:`replay_if_shorter`: a large-neighbourhood sub-solve's answer
  replayed in seconds, kept only when shorter and within memory.
"""

from __future__ import annotations

import math
import time as _time

import numpy as np

from ...evaluate import canonical_schedule, problem_lower_bound
from ...model.memory import fits, overflow_message, static_memory
from ...model.problem import Problem
from ...result import Status
from ...schedule.replay import tighten_schedule
from ..base import Solution, SolverError
from .exact_bounds import (comm_lower_bound, heads_tails, heads_tails_comm, min_transfer, reachability,
                           window_bound, window_cuts)
from .exact_times import durations, transfer_table, uniform_transfers
from .exact_grid import TimeGrid, _close, _integral, integral_memory, time_grid  # noqa: F401 (re-exported)
from .path_bounds import memory_path_bound

__all__ = [
    "durations",
    "transfer_table",
    "uniform_transfers",
    "TimeGrid",
    "time_grid",
    "integral_memory",
    "device_classes",
    "relabel",
    "tighten_schedule",
    "heads_tails",
    "reachability",
    "min_transfer",
    "heads_tails_comm",
    "comm_lower_bound",
    "window_cuts",
    "window_bound",
    "Budget",
    "solve_within",
    "unlimited",
    "OutOfTime",
    "heuristic_start",
    "start_from_heuristic",
    "schedule_fits",
    "replay_if_shorter",
    "too_big",
    "solution_makespan",
    "fallback",
]


def device_classes(problem: Problem) -> list[list[int]]:
    """Groups (of size >= 2) of interchangeable devices, each sorted by index.

    Two devices are interchangeable when they have the same memory and speed, the same
    allowed nodes (no pin or forbid tells them apart), and swapping them leaves the
    latency and bandwidth matrices unchanged. Swapping two such devices in any placement
    and schedule gives a placement and schedule of the same makespan.

    The exact solvers use the classes to break symmetry (search over one labelling only).

    Parameters
    ----------
    problem : Problem
        The problem whose devices are compared.

    Returns
    -------
    list of list of int
        The classes with two or more devices, each sorted ascending; devices alike to no
        other are left out.
    """
    k = problem.n_devices
    lat, bw, allowed = problem.latency, problem.bandwidth, problem.allowed
    mem, speed = problem.device_memory, problem.device_speed

    def swappable(a: int, b: int) -> bool:
        if mem[a] != mem[b] or speed[a] != speed[b]:
            return False
        if not np.array_equal(allowed[:, a], allowed[:, b]):
            return False
        # Swapping a and b leaves a matrix unchanged iff rows a and b agree off {a, b},
        # columns a and b agree off {a, b}, and the 2 x 2 block is symmetric in the swap:
        # O(k) per pair instead of permuting the whole k x k matrix.
        others = np.ones(k, dtype=bool)
        others[[a, b]] = False
        for mat in (lat, bw):
            if not (np.array_equal(mat[a, others], mat[b, others])
                    and np.array_equal(mat[others, a], mat[others, b])
                    and mat[a, b] == mat[b, a] and mat[a, a] == mat[b, b]):
                return False
        return True

    classes: list[list[int]] = []
    assigned = [False] * k
    for a in range(k):
        if assigned[a]:
            continue
        cls = [a]
        for b in range(a + 1, k):
            if not assigned[b] and swappable(a, b):
                cls.append(b)
        # swappable is checked against the class head; transpositions with one common
        # member generate the whole symmetric group, so the class is interchangeable.
        for b in cls:
            assigned[b] = True
        if len(cls) > 1:
            classes.append(cls)
    return classes


def relabel(placement: np.ndarray, classes: list[list[int]], order: np.ndarray) -> np.ndarray:
    """Renumber the devices of each class in order of first use along ``order`` (node ids).

    This maps a placement onto the canonical labelling of the symmetry breaking, e.g. so a
    heuristic incumbent can be given as a hint to a model that forbids the other labellings.
    Devices of a class that no node uses take the class's remaining labels.

    Parameters
    ----------
    placement : numpy.ndarray
        Device index per node (length n).
    classes : list of list of int
        Interchangeable device classes, as from :func:`device_classes`.
    order : numpy.ndarray
        Node ids in the order that defines "first use" (e.g. a topological order).

    Returns
    -------
    numpy.ndarray
        A new int64 placement; ``placement`` itself is not changed.
    """
    out = np.asarray(placement, dtype=np.int64).copy()
    for cls in classes:
        members = set(cls)
        mapping: dict[int, int] = {}
        for v in np.asarray(order).tolist():
            d = int(placement[v])
            if d in members and d not in mapping:
                mapping[d] = cls[len(mapping)]
        for d in cls:  # unused devices take the remaining labels
            if d not in mapping:
                mapping[d] = cls[len(mapping)]
        for v in range(out.size):
            d = int(placement[v])
            if d in mapping:
                out[v] = mapping[d]
    return out


class Budget:
    """The wall-clock budget of one solver call: every phase asks what is left.

    The deadline is ``start + limit``; phases that cannot be interrupted (the heuristic,
    model building, decoding) check :meth:`left` between steps and are sized from
    estimates, so the whole call ends within the limit plus a small margin.
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


def solve_within(solver, model, seconds: float) -> int:
    """Run a CP-SAT ``solver`` on ``model`` for at most ``seconds`` of wall time.

    A timer calls ``stop_search`` at the budget, and CP-SAT's own ``max_time_in_seconds``
    is set a little above it (a safety net): with only its own limit, CP-SAT's interleaved
    search stops once it expects the next batch not to fit, measured at 60-85% of the
    limit on 50-node models, which left a fifth of every budget unused.

    CP-SAT's presolve can raise from C++ on some models (or-tools 9.15 throws
    ``IndexError: raw_hash_map<>::at`` on small peak-memory models; upstream reports of
    the same class: google/or-tools#5091, #5288). The search then runs once more with
    presolve off, in the time left; a second failure is a :class:`SolverError`.

    Parameters
    ----------
    solver : ortools.sat.python.cp_model.CpSolver
        The solver; its ``max_time_in_seconds`` (and on a retry ``cp_model_presolve``) is set here.
    model : ortools.sat.python.cp_model.CpModel
        The model to solve.
    seconds : float
        The wall budget; ``inf`` or a value from :data:`UNLIMITED_S` on means no wall limit.

    Returns
    -------
    int
        CP-SAT's status code (``cp_model.OPTIMAL``, ``FEASIBLE``, ...).

    Raises
    ------
    SolverError
        When the C++ solver raises (with presolve off already, or on both attempts).
    """
    import threading
    t0 = _time.perf_counter()

    def run(budget_s: float) -> int:
        if unlimited(budget_s):  # no wall limit: CP-SAT's own limits (deterministic time) only
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
    except Exception as exc:  # an exception out of the C++ solver, never our own code
        if not solver.parameters.cp_model_presolve:
            raise SolverError(f"CP-SAT failed ({type(exc).__name__}: {exc})") from None
        first = f"{type(exc).__name__}: {exc}"
    solver.parameters.cp_model_presolve = False
    try:
        return run(seconds - (_time.perf_counter() - t0))
    except Exception as exc:
        raise SolverError(f"CP-SAT failed with presolve ({first}) and without it "
                          f"({type(exc).__name__}: {exc})") from None


#: Wall budgets from this many seconds on (about 31 years) count as no limit: a thread timer
#: cannot wait that long (``threading.TIMEOUT_MAX``), and no run does.
UNLIMITED_S = 1e9


def unlimited(seconds: float) -> bool:
    """True when ``seconds`` is no wall limit at all (``inf`` or a huge value).

    Parameters
    ----------
    seconds : float
        A time budget in seconds.

    Returns
    -------
    bool
    """
    return not math.isfinite(float(seconds)) or float(seconds) >= UNLIMITED_S


class OutOfTime(Exception):
    """Raised inside model building when the budget runs out; the caller falls back."""


def heuristic_start(problem: Problem, *, time_limit: float, seed: int, memory_model: str) -> Solution:
    """The ``heuristic`` solver's answer (placement and schedule), the exact solvers' incumbent.

    Called directly, not through the registry: a bug in the heuristic surfaces here.
    ``time_limit`` caps its improvement phases (its constructions always run).

    Parameters
    ----------
    problem : Problem
        The problem.
    time_limit : float
        Seconds for the heuristic's improvement phases (at least 1 ms is given).
    seed : int
        The heuristic's random seed.
    memory_model : str
        The memory model the heuristic must respect (the exact solver's own).

    Returns
    -------
    Solution
        The heuristic's solution (possibly with nodes left unplaced when it found no fit).
    """
    from .. import heuristic as pardnn
    return pardnn.solve(problem, time_limit=max(float(time_limit), 1e-3), seed=seed, memory_model=memory_model)


def start_from_heuristic(problem: Problem, stats: dict, *, time_limit: float, seed: int,
                         memory_model: str) -> Solution:
    """:func:`heuristic_start`, with its makespan recorded as ``stats["heuristic_makespan"]``.

    Parameters
    ----------
    problem : Problem
        The problem.
    stats : dict
        The call's statistics (updated when the heuristic placed every node).
    time_limit : float
        Seconds for the heuristic's improvement phases.
    seed : int
        The heuristic's seed.
    memory_model : str
        The memory model its placement must respect.

    Returns
    -------
    Solution
        The heuristic's answer, the exact solver's incumbent.
    """
    incumbent = heuristic_start(problem, time_limit=time_limit, seed=seed, memory_model=memory_model)
    ms = solution_makespan(problem, incumbent)
    if np.isfinite(ms):  # inf: the heuristic found no placement
        stats["heuristic_makespan"] = ms
    return incumbent


def too_big(name: str, terms: int, rate: float, cap: int, budget: "Budget", reserve: float,
            what: str = "exact model") -> str | None:
    """Why a model of ``terms`` terms is not built within the budget (None: build it).

    Parameters
    ----------
    name : str
        The solver, for the message.
    terms : int
        Estimated variables plus constraint terms.
    rate : float
        Terms built per second.
    cap : int
        The most terms ever built (a memory guard).
    budget : Budget
        The call's budget; building may use half of what is left after ``reserve``.
    reserve : float
        Seconds kept for decoding and scoring.
    what : str
        The model's name, for the message.

    Returns
    -------
    str or None
    """
    if terms <= cap and terms / rate <= 0.5 * (budget.left() - reserve):
        return None
    return (f"{name}: {what} not built: about {terms:,} terms would take about {terms / rate:.1f} s to build, "
            f"more than the {budget.limit_s:g} s time limit allows" + (f" (cap {cap:,} terms)" if terms > cap else ""))


def solution_makespan(problem: Problem, sol: Solution) -> float:
    """Makespan of a solution's own schedule (canonical when it has none); inf without placement.

    Parameters
    ----------
    problem : Problem
        The problem the solution places.
    sol : Solution
        A solver's answer.

    Returns
    -------
    float
        Seconds.
    """
    if sol.placement is None:
        return float("inf")
    place = np.asarray(sol.placement, dtype=np.int64)
    if problem.n_nodes == 0:
        return 0.0
    if sol.start is None:
        return float(canonical_schedule(problem, place)[1].max())
    return float((np.asarray(sol.start, dtype=np.float64) + problem.duration(place)).max())


def fallback(problem: Problem, incumbent: Solution | None, memory_model: str, reason: str,
             stats: dict, lower_bound: float = 0.0) -> Solution:
    """The incumbent (the heuristic's answer) as the result, with ``reason`` in the message.

    Status ``feasible`` (``optimal`` only when the heuristic itself proved it), the best
    of the generic bound, the memory-forced path bound
    (:func:`~optpart.solvers.exact.path_bounds.memory_path_bound`) and ``lower_bound``;
    ``unknown`` when there is no incumbent.

    Parameters
    ----------
    problem, incumbent, memory_model
        The problem, the heuristic's answer (or None) and the memory model it respects.
    reason, stats : str, dict
        Why the exact search gave up (``stats["stop_reason"]`` unless set) and its stats.
    lower_bound : float
        A bound the exact solver proved (seconds; 0: none).

    Returns
    -------
    Solution
    """
    stats = dict(stats)
    stats["stop_reason"] = stats.get("stop_reason", reason)
    stats["from_heuristic"] = True
    bound = max(problem_lower_bound(problem), float(lower_bound), memory_path_bound(problem, memory_model))
    if incumbent is None or incumbent.placement is None:
        status = incumbent.status if incumbent is not None and incumbent.status is Status.INFEASIBLE \
            else Status.UNKNOWN
        msg = reason if incumbent is None or not incumbent.message else f"{reason}; heuristic: {incumbent.message}"
        return Solution(status, lower_bound=bound, message=msg, memory_model=memory_model, stats=stats)
    status = Status.OPTIMAL if incumbent.status is Status.OPTIMAL else Status.FEASIBLE
    bound = max(bound, float(incumbent.lower_bound or 0.0))
    return Solution(status, placement=np.asarray(incumbent.placement, dtype=np.int64), start=incumbent.start,
                    lower_bound=bound, message=f"{reason}; this is the heuristic's schedule",
                    memory_model=memory_model, stats=stats)


def schedule_fits(problem: Problem, place: np.ndarray, start: np.ndarray, memory_model: str) -> bool:
    """Constraints kept and memory within every device under ``memory_model``.

    Parameters
    ----------
    problem : Problem
        The problem.
    place, start : ndarray
        A schedule: device and start (seconds) of every node.
    memory_model : str
        ``"static"`` or ``"peak"`` (the liveness model, checked on the schedule's times).

    Returns
    -------
    bool
        True when the placement respects the constraints and every device holds its memory.
    """
    if not problem.respects_constraints(place):
        return False
    if memory_model == "peak" and problem.has_split:
        return overflow_message(problem, place, start, start + problem.duration(place), "peak") is None
    return bool(np.all(fits(static_memory(problem, place), problem.device_memory)))


def replay_if_shorter(problem: Problem, found: tuple, makespan: float, memory_model: str) -> tuple:
    """A sub-solve's answer replayed in seconds, and whether a large-neighbourhood search keeps it.

    Parameters
    ----------
    problem : Problem
        The problem.
    found : tuple
        ``(placement, key, key_end)``: the sub-solve's placement and its starts and ends in any
        unit (the order :func:`~optpart.schedule.replay.tighten_schedule` replays).
    makespan : float
        The incumbent's makespan in seconds.
    memory_model : str
        ``"static"`` or ``"peak"``: the model a kept schedule fits (:func:`schedule_fits`).

    Returns
    -------
    tuple
        ``(verdict, placement, start, makespan)``: ``verdict`` is ``"kept"`` (shorter and
        within memory), ``"memory"`` (shorter, refused by memory or constraints) or
        ``"longer"`` (not shorter); the replayed schedule and its makespan in seconds.
    """
    place, key, key_end = found
    start = tighten_schedule(problem, place, key, key_end)
    ms = float((start + problem.duration(place)).max())
    if not ms < makespan * (1 - 1e-12):
        return "longer", place, start, ms
    if not schedule_fits(problem, place, start, memory_model):
        return "memory", place, start, ms
    return "kept", place, start, ms
