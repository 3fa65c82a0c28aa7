"""Lower bounds on the optimal makespan that hold for every problem (``docs/model.md`` section 4).

Each bound relaxes the problem in one way, so each is at most the makespan of any
valid schedule:

* :func:`critical_path_bound` drops all communication and runs every node at the
  fastest speed it may use: no schedule beats the heaviest chain of precedences.
* :func:`work_bound` lets the work flow like a fluid over all devices: total work
  over total speed.
* :func:`largest_node_bound` the single longest node at its fastest allowed speed.
* :func:`window_energy` the work that must run after a time ``h`` (or before ``M - t``),
  given how early each node can start and how much must follow it (Fernandez and Bussell's
  bound), from any valid heads and tails.

:func:`lower_bound` is the maximum of the first three (every evaluation computes it, so it
stays one longest-path pass). The exact solvers add the energetic bound, with
communication-aware heads and tails, to the bound they report (``optpart.solvers.exact.bounds``).
:func:`problem_lower_bound` is the same number, computed once per problem and kept
in a cache owned by this module (a problem is immutable, so the cache never goes stale,
and nothing is written into the problem).
"""

from __future__ import annotations

import weakref

import numpy as np

from ._docstrings import fill_doc
from .model.paths import bottom_levels_csr, top_levels_csr
from .model.problem import Problem
from .model.constraints import best_allowed

__all__ = ["critical_path_bound", "work_bound", "largest_node_bound", "window_energy",
           "lower_bound", "all_bounds", "problem_lower_bound", "forget"]

#: Thresholds per side of the two-sided windows of :func:`window_energy` (the one-sided ones
#: are exact over every breakpoint).
TWO_SIDED_THRESHOLDS = 24


def _fastest_durations(problem: Problem) -> np.ndarray:
    """Each node's run time on the fastest device it is allowed on (speed 1 without devices)."""
    if problem.n_devices == 0:
        return problem.time.copy()
    if problem.has_constraints:
        speeds = best_allowed(problem.allowed, problem.device_speed, 0.0)
        speeds[speeds <= 0] = problem.device_speed.max()
    else:
        speeds = problem.device_speed.max()
    return problem.time / speeds


def critical_path_bound(problem: Problem) -> float:
    """Longest path with zero communication and every node at its fastest allowed speed.

    Parameters
    ----------
    problem : Problem
        Its DAG, times, speeds and allowed devices give the chain and the fastest runs.

    Returns
    -------
    float
        Seconds; no schedule beats the heaviest chain of precedences (0 without nodes).
    """
    if problem.n_nodes == 0:
        return 0.0
    dur = _fastest_durations(problem)
    top = top_levels_csr(problem.topo.tolist(), problem.out_ptr.tolist(),
                         problem.edge_dst[problem.out_edges].tolist(), dur.tolist())
    return float((np.asarray(top, dtype=np.float64) + dur).max())


def work_bound(problem: Problem) -> float:
    """Total work (time at speed 1) divided by the total speed of all devices.

    Parameters
    ----------
    problem : Problem
        Its times at speed 1 and its device speeds.

    Returns
    -------
    float
        Seconds: the work spread like a fluid over every device (speed 1 without devices).
    """
    total_speed = float(problem.device_speed.sum()) if problem.n_devices else 1.0
    return float(problem.time.sum()) / total_speed


def largest_node_bound(problem: Problem) -> float:
    """The longest single node at its fastest allowed speed.

    Parameters
    ----------
    problem : Problem
        Its times and the fastest device each node may use.

    Returns
    -------
    float
        Seconds (0 without nodes).
    """
    if problem.n_nodes == 0:
        return 0.0
    return float(_fastest_durations(problem).max())


def _one_sided(head: np.ndarray, dur: np.ndarray, k: float) -> float:
    """``max_h h + W(h) / k`` over every breakpoint ``h`` with ``W(h) > 0``, where ``W(h) =
    sum_v clip(head_v + dur_v - h, 0, dur_v)`` is the work that must run after ``h``."""
    end = head + dur
    hs = np.unique(np.concatenate([head, end]))
    by_head = np.sort(head)
    h_order = np.argsort(head, kind="stable")
    suffix = lambda a: np.concatenate([np.cumsum(a[::-1])[::-1], [0.0]])  # noqa: E731
    dur_after = suffix(dur[h_order])        # sum of dur over head >= h
    end_after_h = suffix(end[h_order])      # sum of end over head >= h
    by_end = np.sort(end)
    end_after = suffix(by_end)              # sum of end over end > h
    a = np.searchsorted(by_head, hs, side="left")    # first index with head >= h
    b = np.searchsorted(by_end, hs, side="right")    # first index with end > h
    n = head.size
    started = (end_after[b] - hs * (n - b)) - (end_after_h[a] - hs * (n - a))  # runs across h
    work = dur_after[a] + started
    ok = work > 1e-12 * max(1.0, float(dur.sum()))
    return float((hs[ok] + work[ok] / k).max()) if ok.any() else 0.0


def window_energy(head, tail, dur, k: float) -> float:
    """Fernandez and Bussell's energetic bound from valid heads, tails and durations.

    A node starts at or after ``head_v``, runs ``dur_v`` at least, and ``tail_v`` of work
    follows it; in a window ``[h, M - t]`` at least ``max(0, dur_v - max(0, h - head_v) -
    max(0, t - tail_v))`` of it runs, and ``k`` devices (``k`` the total speed over the
    fastest, for fastest durations) hold at most ``k (M - h - t)``. A window where that work
    is positive is not empty, so ``M >= h + t + W / k`` for every such ``(h, t)``
    (E. B. Fernandez and B. Bussell, "Bounds on the number of processors and time for
    multiprocessor optimal schedules", IEEE Trans. Computers 22(8), 1973; energetic
    reasoning of Baptiste, Le Pape and Nuijten, "Constraint-Based Scheduling", 2001).
    One-sided windows (``t = 0`` or ``h = 0``) are tried at every breakpoint in
    ``O(n log n)``; two-sided ones on :data:`TWO_SIDED_THRESHOLDS` thresholds per side.

    Parameters
    ----------
    head, tail, dur : array_like of float
        Valid heads, tails and least durations, one per node, in one unit.
    k : float
        Devices (or total speed over the fastest speed, with fastest durations).

    Returns
    -------
    float
        The bound in the unit of the inputs (0 without nodes or work).
    """
    head = np.asarray(head, dtype=np.float64)
    tail = np.asarray(tail, dtype=np.float64)
    dur = np.asarray(dur, dtype=np.float64)
    if dur.size == 0 or k <= 0 or not np.isfinite(dur).all():
        return 0.0
    best = max(_one_sided(head, dur, k), _one_sided(tail, dur, k))
    pick = lambda v: np.unique(np.quantile(np.concatenate([v, v + dur]),  # noqa: E731
                                           np.linspace(0.0, 1.0, TWO_SIDED_THRESHOLDS)))
    for h in pick(head).tolist():
        inside = np.maximum(0.0, dur - np.maximum(0.0, h - head))
        for t in pick(tail).tolist():
            w = float(np.maximum(0.0, inside - np.maximum(0.0, t - tail)).sum())
            if w > 1e-12 * max(1.0, float(dur.sum())):
                best = max(best, h + t + w / k)
    return best


@fill_doc
def all_bounds(problem: Problem) -> dict[str, float]:
    """Every bound by name.

    Parameters
    ----------
    %(problem)s

    Returns
    -------
    dict of str to float
        ``critical_path``, ``work`` and ``largest_node``, in seconds.
    """
    return {
        "critical_path": critical_path_bound(problem),
        "work": work_bound(problem),
        "largest_node": largest_node_bound(problem),
    }


def lower_bound(problem: Problem) -> float:
    """The best (largest) of the generic lower bounds.

    Parameters
    ----------
    problem : Problem
        Every generic bound of it is taken.

    Returns
    -------
    float
        Seconds; at most the makespan of every valid schedule, under either memory model.
    """
    return max(all_bounds(problem).values())


_CACHE: "weakref.WeakKeyDictionary[Problem, float]" = weakref.WeakKeyDictionary()


def problem_lower_bound(problem: Problem) -> float:
    """:func:`lower_bound` of ``problem``, computed once per problem object (weakly cached).

    Parameters
    ----------
    problem : Problem
        The problem; the cache key (problems are immutable).

    Returns
    -------
    float
        Seconds, the same number as :func:`lower_bound` (problems are immutable).
    """
    cached = _CACHE.get(problem)
    if cached is None:
        cached = _CACHE[problem] = lower_bound(problem)
    return cached


def forget(problem: Problem) -> None:
    """Drop the cached bound of ``problem`` (benchmarks that time the bound's computation).

    Parameters
    ----------
    problem : Problem
        The problem whose cached bound goes (nothing happens when none is cached).
    """
    _CACHE.pop(problem, None)
