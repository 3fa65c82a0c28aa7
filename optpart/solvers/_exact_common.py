"""Helpers shared by the exact solvers ``cpsat`` and ``milp``.

* re-exported for the solvers: the time tables of :mod:`.exact_times`, the bounds of
  :mod:`.exact_bounds` and the replay :func:`~optpart.schedule.replay.tighten_schedule`.
* :class:`TimeGrid`: the integer time grid CP-SAT needs. When every duration and
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
"""

from __future__ import annotations

import math
import time as _time
from dataclasses import dataclass

import numpy as np

from ..evaluate import canonical_schedule, problem_lower_bound
from ..problem import Problem
from ..result import Status
from ..schedule.replay import tighten_schedule
from .base import Solution, SolverError
from .exact_bounds import (comm_lower_bound, heads_tails, heads_tails_comm, min_transfer, reachability,
                           window_bound, window_cuts)
from .exact_times import durations, transfer_table, uniform_transfers
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
    "too_big",
    "solution_makespan",
    "fallback",
]


@dataclass(frozen=True)
class TimeGrid:
    """Integer time units of ``1 / scale`` seconds.

    ``exact`` is True when every duration and transfer is a whole number of units, so
    the integer model is the real problem. Otherwise ``slack_units`` bounds how many
    units a chain of nodes and transfers can gain by rounding up: any real schedule
    rounded onto the grid (same placement and order) ends at most that much later.
    """

    scale: float
    exact: bool
    slack_units: float

    def up(self, seconds: np.ndarray) -> np.ndarray:
        """Seconds to units, rounded up (exact quantities are kept as they are)."""
        x = np.asarray(seconds, dtype=np.float64) * self.scale
        r = np.rint(x)
        return np.where(_close(x, r), r, np.ceil(x)).astype(np.int64)

    def bound_seconds(self, bound_units: float) -> float:
        """A valid lower bound in seconds from a lower bound in units of the rounded-up model."""
        b = (float(bound_units) - self.slack_units) / self.scale
        return max(0.0, b * (1 - 1e-12))


#: Candidate exact scales, ascending: round decimal ones, and every power of two up to
#: 2**62 (binary fractions such as 2**-30 s, the nanosecond-scale times of traced graphs).
_EXACT_SCALES = tuple(sorted({1, 2, 4, 5, 8, 10, 16, 20, 25, 32, 50, 64, 100, 128, 200, 250, 256, 500,
                              1000, 10**4, 10**5, 10**6} | {2**j for j in range(63)}))


def _close(x: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Where ``x`` equals the integer ``r`` up to float noise, *relative* to ``x``: no
    absolute floor, so a half unit (or 1e-10 of one) is never taken for zero."""
    return np.abs(x - r) <= 1e-9 * np.abs(x)


def _integral(x: np.ndarray) -> bool:
    return bool(_close(x, np.rint(x)).all())


def time_grid(dur: np.ndarray, comm: np.ndarray, horizon_s: float, resolution: float = 2e-7,
              max_units: float = 2e9, upper_s: float | None = None) -> TimeGrid:
    """Choose the time grid for durations ``dur`` (n x k) and transfers ``comm`` (m x k x k).

    An exact scale is used when one of a few round scales makes every finite quantity an
    integer and keeps the makespan's upper end ``upper_s`` (default: every node and
    transfer in sequence) below ``max_units``. Otherwise the scale makes the largest
    possible rounding loss (one unit per node and per edge of a chain, at most ``2 n - 1``)
    about ``resolution`` of ``horizon_s`` (a lower bound of the makespan), within the same cap.
    """
    n = dur.shape[0]
    qd = dur[np.isfinite(dur)]
    qc = comm.reshape(-1)
    q = np.concatenate([qd, qc])
    q = q[q > 0]
    horizon_s = max(float(horizon_s), 1e-12)
    if upper_s is None:
        upper_s = float(np.where(np.isfinite(dur), dur, 0.0).max(axis=1).sum()) if n else 0.0
        if comm.size:
            upper_s += float(comm.reshape(comm.shape[0], -1).max(axis=1).sum())
    upper_s = max(float(upper_s), horizon_s)
    for s in _EXACT_SCALES:
        if upper_s * s > max_units:
            break
        if q.size == 0 or _integral(q * s):
            return TimeGrid(float(s), True, 0.0)
    # Inexact: a power of ten (so integral quantities stay integral) fine enough that the
    # worst rounding loss of a chain (below one unit per rounded node and edge) is about
    # `resolution` of the horizon's lower end.
    want = (2 * n) / (resolution * horizon_s)
    scale = 10.0 ** math.ceil(math.log10(want))
    while scale > 1e-6 and upper_s * scale > max_units:
        scale /= 10.0
    return TimeGrid(scale, False, _slack(dur, comm, scale))


def _slack(dur: np.ndarray, comm: np.ndarray, scale: float) -> float:
    """Most units a chain of distinct nodes and edges gains by rounding up on ``scale``."""
    n = dur.shape[0]
    x = np.where(np.isfinite(dur), dur, 0.0) * scale
    err_nodes = np.where(np.isfinite(dur), np.ceil(x) - x, 0.0)
    err_nodes[_close(x, np.rint(x))] = 0.0
    total = float(err_nodes.max(axis=1).sum()) if n else 0.0
    if comm.size:
        y = comm * scale
        err = np.ceil(y) - y
        err[_close(y, np.rint(y))] = 0.0
        per_edge = np.sort(err.reshape(comm.shape[0], -1).max(axis=1))[::-1]
        total += float(per_edge[: max(n - 1, 0)].sum())
    # Any path through the schedule (precedence and device order) visits each node once
    # and uses at most n - 1 transfers; one unit of margin covers float error.
    return total + 1.0


def integral_memory(problem: Problem) -> tuple[np.ndarray, np.ndarray, bool]:
    """Integer node memories and device capacities for an integer model.

    When every node memory is a whole number of ``1/s`` bytes for ``s`` in 1, 10, ..., 1e6
    (whole bytes: the usual case), memories become those integers and capacities are
    rounded down, which is exact: a sum of integers is at most ``c`` iff it is at most
    ``floor(c)`` (``exact=True``; sums stay below 2**53). Otherwise memories are scaled so that the total
    reaches ~1e12 and rounded up: a placement that fits the integer rows fits the real
    ones, but the rows may exclude a placement that fits exactly at the limit, so the
    solver may then claim neither optimality nor infeasibility. Infinite capacities map
    to -1 (no row).

    Parameters
    ----------
    problem : Problem
        The problem (static ``memory`` per node, capacities).

    Returns
    -------
    tuple
        ``(memories, capacities, exact)``: int64 arrays and whether the rows are exact.
    """
    mem = problem.memory
    cap = problem.device_memory
    finite = np.isfinite(cap)
    cap0 = np.where(finite, cap, 0.0)
    top = float(max(mem.max(initial=0.0), cap0.max(initial=0.0), 1e-300))
    total = float(mem.sum()) + top
    for s in (1, 10, 100, 1000, 10**4, 10**5, 10**6):
        if total * s >= 2**53:  # keep every sum of a memory row exact and far from overflow
            break
        if _integral(mem * s):
            m_int = np.rint(mem * s).astype(np.int64)
            c_int = np.where(finite, np.floor(cap0 * s), -1).astype(np.int64)
            return m_int, c_int, True
    s = 1e12 / max(total, 1e-300)
    m_int = np.ceil(mem * s - 1e-9).astype(np.int64)
    c_int = np.where(finite, np.floor(cap0 * s), -1).astype(np.int64)
    return m_int, c_int, False


def device_classes(problem: Problem) -> list[list[int]]:
    """Groups (of size >= 2) of interchangeable devices, each sorted by index.

    Two devices are interchangeable when they have the same memory and speed, the same
    allowed nodes (no pin or forbid tells them apart), and swapping them leaves the
    latency and bandwidth matrices unchanged. Swapping two such devices in any placement
    and schedule gives a placement and schedule of the same makespan.
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
    """Renumber the devices of each class in order of first use along ``order`` (node ids)."""
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
        """Seconds since the call started."""
        return _time.perf_counter() - self.t0

    def left(self) -> float:
        """Seconds left before the deadline (negative once past it)."""
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
    """
    from . import pardnn
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
    (:func:`~optpart.solvers.path_bounds.memory_path_bound`) and ``lower_bound``;
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
