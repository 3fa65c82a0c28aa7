"""The schedule the windowed search of ``cpsat`` starts from on large graphs.

The windows of :mod:`optpart.solvers.exact.lns_window` improve a schedule locally; where they
start decides most of what they can reach. Candidates, each scored by the one
evaluator under the requested memory model, and the shortest kept:

1. the ``heuristic`` solver's answer (``cpsat``'s incumbent, run before this at effort 1:
   the answer is never worse than it);
2. the pipeline-stage placement of :mod:`optpart.solvers.heuristic.stage_seed` (forward stages, each
   backward node beside the activations it reads, then single moves along the critical
   chain) at its full evaluation cap (the heuristic offers it too, within its own smaller
   budget; docs/heuristic.md);
3. when the time left affords ``effort`` 2 or more, the heuristic again with more effort
   (one unit per :data:`DEEP_SECONDS_PER_EFFORT` s of :data:`DEEP_SHARE` of the time left,
   up to :data:`MAX_DEEP_EFFORT`, hinted with its first placement): on graphs whose
   parallel work its search balances (lstm-lm) the extra evaluations pay more than windows
   do. It is not hinted with the stage placement: from there its search stays there
   (lstm-lm: 0.02766 s against 0.0252 s).
"""

from __future__ import annotations

import time

import numpy as np

from ...model.problem import Problem
from ...result import Status
from . import _exact_common as xc
from ..base import Solution
from ..heuristic.stage_seed import stage_seed

__all__ = ["best_start", "SEED_SHARE", "DEEP_SHARE", "MAX_DEEP_EFFORT"]

#: Share of the time left that the pipeline-stage search may take at most.
SEED_SHARE = 0.15
#: Share of the time left for the heuristic run after the stage search (or deepened).
DEEP_SHARE = 0.6
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

    The deepened heuristic runs whenever the time left affords ``effort`` 2, whichever of the
    first two is shorter: where it pays (lstm-lm, 0.0295 -> 0.0252 s) the stage placement can
    still beat the first heuristic answer (0.0276 s), and where the stage placement wins by
    far the windows it leaves less time to found little more (docs/exact.md).

    Parameters
    ----------
    problem : Problem
        The problem.
    incumbent : Solution or None
        The heuristic's answer (valid under ``memory_model``), or None.
    memory_model : str
        ``"static"`` or ``"peak"``: what every candidate must fit.
    budget : Budget
        The call's budget; the stage search and the heuristic take shares of it.
    reserve : float
        Seconds kept for the caller.
    stats : dict
        Updated with ``stage_seed_makespan``, ``deep_heuristic_makespan`` and
        ``deep_heuristic_effort`` when they ran, and ``start_from``.
    seed : int
        The heuristic's seed.
    deterministic_time : float, optional
        When given, the deepened heuristic's effort comes from it (``deterministic_time /
        DEEP_SECONDS_PER_EFFORT``, same cap), not from the wall clock, so that runs repeat.
    Returns
    -------
    tuple of (Solution or None, str)
        The best start (None when no candidate has a schedule) and where it came from
        (``"heuristic"``, ``"stage seed"`` or ``"deep heuristic"``).
    """
    best, origin = incumbent, "heuristic"
    best_ms = _makespan(problem, incumbent)
    left = max(0.0, budget.left() - reserve)
    # Its evaluation cap ends it; the wall share is a safety stop (all the time left when
    # the run is to repeat under a deterministic budget).
    share_s = left if deterministic_time is not None else SEED_SHARE * left
    seeded = stage_seed(problem, memory_model, deadline=time.perf_counter() + share_s)
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
    if effort >= 2.0 and incumbent is not None and incumbent.placement is not None:
        from .. import heuristic as pardnn
        # under a deterministic budget its effort bounds its work; the time left is only a safety stop
        cap = share if deterministic_time is None else max(0.0, budget.left() - reserve)
        deep = pardnn.solve(problem, time_limit=cap, seed=seed, hint=incumbent.placement,
                            memory_model=memory_model, effort=effort)
        ms = _makespan(problem, deep)
        if np.isfinite(ms):
            stats["deep_heuristic_makespan"] = ms
            stats["deep_heuristic_effort"] = effort
        if ms < best_ms * (1 - 1e-12):
            best, best_ms, origin = deep, ms, "deep heuristic"
    stats["start_from"] = origin
    return (best if np.isfinite(best_ms) else None), origin
