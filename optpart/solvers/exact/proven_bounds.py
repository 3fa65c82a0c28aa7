"""Every lower bound the exact solvers report on large graphs, and the best of them.

Each part holds for every placement under the memory model named (memory only removes
placements), so their maximum does too:

* ``generic``: :func:`optpart.lower_bound` (critical path, work, largest node);
* ``comm_path``: heads and tails that count communication
  (:func:`~optpart.solvers.exact.exact_bounds.comm_lower_bound`);
* ``energetic``: Fernandez and Bussell's window bound on those heads and tails
  (:func:`optpart.bounds.window_energy`);
* ``memory_path``: the critical path with the transfers memory forces
  (:func:`~optpart.solvers.exact.path_bounds.memory_path_bound`, per memory model);
* ``regions``: the critical path with its fork-join regions solved exactly by CP-SAT
  (:func:`~optpart.solvers.exact.region_bounds.region_path_bound`, a deterministic budget).

``benchmarks/exact_bounds_table.py`` prints each part on the bundled real graphs.
"""

from __future__ import annotations

import time

import numpy as np

from ...bounds import problem_lower_bound, window_energy
from ...model.problem import Problem
from .exact_bounds import heads_tails_comm, min_transfer
from .exact_times import durations, transfer_table
from .path_bounds import memory_path_bound
from .region_bounds import region_path_bound

__all__ = ["bound_parts", "proven_bound"]


def bound_parts(problem: Problem, memory_model: str, *, region_dtime: float = 20.0,
                times: dict | None = None) -> dict[str, float]:
    """Each lower bound by name, in seconds.

    Parameters
    ----------
    problem : Problem
        The problem, with devices.
    memory_model : {"static", "peak"}
        The model every placement keeps (only ``memory_path`` depends on it).
    region_dtime : float
        CP-SAT deterministic seconds for the region bound (0: not computed, reported as 0).
    times : dict, optional
        Receives the wall seconds of each part (``comm_path`` and ``energetic`` share their heads).

    Returns
    -------
    dict of str to float
        ``generic``, ``comm_path``, ``energetic``, ``memory_path`` and ``regions``.
    """
    clock = _Clock(times)
    parts = {"generic": clock("generic", problem_lower_bound, problem)}
    n, k = problem.n_nodes, problem.n_devices
    if n == 0 or k == 0:
        return dict.fromkeys(("generic", "comm_path", "energetic", "memory_path", "regions"), parts["generic"])

    def comm_heads():
        dur = durations(problem)
        min_dur = np.where(problem.allowed, dur, np.inf).min(axis=1)
        head, tail = heads_tails_comm(problem, min_dur.tolist(), min_transfer(problem, transfer_table(problem)))
        return min_dur, np.asarray(head, dtype=np.float64), np.asarray(tail, dtype=np.float64)
    min_dur, head, tail = clock("comm_path", comm_heads)
    parts["comm_path"] = float((head + min_dur + tail).max())
    parts["energetic"] = clock("energetic", window_energy, head, tail, min_dur, float(k))
    parts["memory_path"] = clock("memory_path", memory_path_bound, problem, memory_model)
    parts["regions"] = clock("regions", region_path_bound, problem, budget_dtime=region_dtime) \
        if region_dtime > 0 else 0.0
    return parts


class _Clock:
    """Calls a function and adds its wall seconds to ``times[name]`` (when ``times`` is given)."""

    def __init__(self, times: dict | None) -> None:
        self.times = times

    def __call__(self, name: str, fn, *args, **kwargs):
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        if self.times is not None:
            self.times[name] = self.times.get(name, 0.0) + time.perf_counter() - t0
        return out


def proven_bound(problem: Problem, memory_model: str, *, region_dtime: float = 20.0,
                 stats: dict | None = None) -> float:
    """The best of :func:`bound_parts`.

    Parameters
    ----------
    problem : Problem
        The problem, with devices.
    memory_model : {"static", "peak"}
        The model every placement keeps.
    region_dtime : float
        CP-SAT deterministic seconds for the region bound.
    stats : dict, optional
        Receives ``bounds``: the parts by name.

    Returns
    -------
    float
        Seconds; at most the makespan of every valid schedule under ``memory_model``.
    """
    parts = bound_parts(problem, memory_model, region_dtime=region_dtime)
    if stats is not None:
        stats["bounds"] = parts
    return max(parts.values())
