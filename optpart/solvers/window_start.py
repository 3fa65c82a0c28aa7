"""The schedule the windowed search of ``cpsat`` starts from on large graphs.

The windows of :mod:`optpart.solvers.lns_window` improve a schedule locally; where they
start decides most of what they can reach. Three candidates, each scored by the one
evaluator under the requested memory model, and the shortest kept:

1. the ``heuristic`` solver's answer (``cpsat``'s incumbent, run before this);
2. the pipeline-stage placement of :mod:`optpart.solvers.stage_seed` (forward stages, each
   backward node beside the activations it reads): on the memory-bound training graphs of
   ``instances/`` it is 8-33% shorter than the heuristic's schedule (measured in
   docs/exact.md);
3. when the heuristic's answer is still the best, the heuristic again with more effort
   (``effort`` up to :data:`MAX_DEEP_EFFORT`, hinted with its first placement) in half of
   the time left: on graphs whose parallel work the heuristic's search balances (lstm-lm)
   its extra evaluations pay more than windows do.
"""

from __future__ import annotations

import time

import numpy as np

from ..problem import Problem
from ..result import Status
from . import _exact_common as xc
from .base import Solution
from .stage_seed import stage_seed

__all__ = ["best_start", "SEED_SHARE", "DEEP_SHARE", "MAX_DEEP_EFFORT"]

#: Share of the time left that the pipeline-stage search may take at most.
SEED_SHARE = 0.15
#: Share of the time left for the deepened heuristic (when its first answer is the best start).
DEEP_SHARE = 0.5
#: The deepened heuristic's effort: one unit per ``DEEP_SECONDS_PER_EFFORT`` s of its share, at most this.
MAX_DEEP_EFFORT = 8.0
DEEP_SECONDS_PER_EFFORT = 5.0


def _makespan(problem: Problem, sol: Solution | None) -> float:
    """The makespan of a solution with a full schedule (inf otherwise)."""
    if sol is None or sol.placement is None or sol.start is None:
        return float("inf")
    return xc.solution_makespan(problem, sol)


def best_start(problem: Problem, incumbent: Solution | None, memory_model: str, budget: xc.Budget,
               reserve: float, stats: dict, *, seed: int = 0,
               deterministic_time: float | None = None) -> tuple[Solution | None, str]:
    """The shortest of the heuristic's schedule, the stage placement and the deepened heuristic.

    Parameters
    ----------
    problem : Problem
        The problem.
    incumbent : Solution or None
        The heuristic's answer (valid under ``memory_model``), or None.
    memory_model : str
        ``"static"`` or ``"peak"``: what every candidate must fit.
    budget : Budget
        The call's budget; the stage search and the deepened heuristic take shares of it.
    reserve : float
        Seconds kept for the caller.
    stats : dict
        Updated with ``stage_seed_makespan`` and ``deep_heuristic_makespan`` when they ran,
        and ``start_from`` (``"heuristic"``, ``"stage seed"`` or ``"deep heuristic"``).
    seed : int
        The heuristic's seed.
    deterministic_time : float, optional
        When given, the deepened heuristic's effort comes from it (``deterministic_time /
        DEEP_SECONDS_PER_EFFORT``, same cap), not from the wall clock, so that runs repeat.

    Returns
    -------
    tuple of (Solution or None, str)
        The best start (None when no candidate has a schedule) and where it came from.
    """
    best, origin = incumbent, "heuristic"
    best_ms = _makespan(problem, incumbent)
    left = max(0.0, budget.left() - reserve)
    seeded = stage_seed(problem, memory_model, deadline=time.perf_counter() + SEED_SHARE * left)
    if seeded is not None:
        ms = float((seeded[1] + problem.duration(seeded[0])).max())
        stats["stage_seed_makespan"] = ms
        if ms < best_ms * (1 - 1e-12):
            best = Solution(Status.FEASIBLE, placement=seeded[0], start=seeded[1], memory_model=memory_model,
                            lower_bound=0.0)
            best_ms, origin = ms, "stage seed"
    share = DEEP_SHARE * max(0.0, budget.left() - reserve)
    basis = share if deterministic_time is None else deterministic_time
    effort = min(MAX_DEEP_EFFORT, basis / DEEP_SECONDS_PER_EFFORT)
    if origin == "heuristic" and effort >= 2.0 and incumbent is not None and incumbent.placement is not None:
        from . import pardnn
        deep = pardnn.solve(problem, time_limit=share, seed=seed, hint=incumbent.placement,
                            memory_model=memory_model, effort=effort)
        ms = _makespan(problem, deep)
        if np.isfinite(ms):
            stats["deep_heuristic_makespan"] = ms
            stats["deep_heuristic_effort"] = effort
        if ms < best_ms * (1 - 1e-12):
            best, best_ms, origin = deep, ms, "deep heuristic"
    stats["start_from"] = origin
    return (best if np.isfinite(best_ms) else None), origin

