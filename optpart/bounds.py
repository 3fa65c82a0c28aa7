"""Lower bounds on the optimal makespan that hold for every problem (``docs/model.md`` section 4).

Each bound relaxes the problem in one way, so each is at most the makespan of any
valid schedule:

* :func:`critical_path_bound` drops all communication and runs every node at the
  fastest speed it may use: no schedule beats the heaviest chain of precedences.
* :func:`work_bound` lets the work flow like a fluid over all devices: total work
  over total speed.
* :func:`largest_node_bound` the single longest node at its fastest allowed speed.

:func:`lower_bound` is their maximum. Exact solvers add the bound they prove.
:func:`problem_lower_bound` is the same number, computed once per problem and kept
in a cache owned by this module (a problem is immutable, so the cache never goes stale,
and nothing is written into the problem).
"""

from __future__ import annotations

import weakref

import numpy as np

from .paths import top_levels_csr
from .problem import Problem, best_allowed

__all__ = ["critical_path_bound", "work_bound", "largest_node_bound", "lower_bound", "all_bounds",
           "problem_lower_bound", "forget"]


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


def all_bounds(problem: Problem) -> dict[str, float]:
    """Every bound by name.

    Parameters
    ----------
    problem : Problem
        The problem.

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
