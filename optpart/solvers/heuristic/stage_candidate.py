"""The pipeline-stage placement (:mod:`.stage_seed`) as a candidate of the heuristic, within its budget.

Offered after the heuristic's search, as a finished answer: it comes with its own local
search (the cut descent and the moves along the critical chain), and when it was offered
before the search and won the construction stage, the search from it found nothing on the
bundled training graphs while the search from the other constructions went further
(densenet121 under peak: 0.128264 s from the stage placement against 0.128203 s; docs/heuristic.md).
So the heuristic's answer is never worse than the stage placement, nor than without it.
Under ``peak`` (graphs with the liveness split) it is offered on every graph; under
``static`` on a training step that declares its phases (every node has a ``phase``, some
``"forward"``, some not: :func:`.stage_seed.phase_forward`).
"""

from __future__ import annotations

import numpy as np

from ...model.memory import fits
from ...model.problem import Problem
from .schedule import Graph, justify
from .stage_seed import MAX_EVALS, phase_forward, stage_seed

__all__ = ["STAGE_WORK", "MIN_EVALS", "stage_candidate", "static_stage_candidate"]

#: The heuristic's budget for it: (nodes + edges) x evaluations per round, per unit of effort
#: (the bundled training graphs of 2,400-11,000 nodes + edges get 55-240 at effort 1).
STAGE_WORK = 600_000
#: Fewer evaluations per round do not pay: the cut descent (4 stages, 2 forward sets) could not try each cut once.
MIN_EVALS = 16


def stage_candidate(problem: Problem, memory_model: str, effort: float, deadline: float | None = None
                    ) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`stage_seed` as a candidate of the heuristic, within its budget.

    ``max_evals = min(MAX_EVALS, effort * STAGE_WORK / (V + E))``, so its cost, at most
    ``3 max_evals`` canonical schedules of O((V + E) log V), is O(effort * STAGE_WORK log V)
    whatever the size; skipped when the budget does not pay :data:`MIN_EVALS` per round.

    Parameters
    ----------
    problem : Problem
        The problem, with devices.
    memory_model : {"static", "peak"}
        The model the placement must fit.
    effort : float
        The heuristic's effort.
    deadline : float, optional
        ``time.perf_counter()`` value from a user's time limit (None: the clock is not read).

    Returns
    -------
    tuple of (ndarray, ndarray) or None
        ``(placement, start)`` as :func:`stage_seed` gives it, or None (skipped, or nothing fits).
    """
    evals = int(min(MAX_EVALS, effort * STAGE_WORK / max(1, problem.n_nodes + problem.n_edges)))
    if evals < MIN_EVALS:
        return None
    return stage_seed(problem, memory_model, deadline=deadline, max_evals=evals)


def static_stage_candidate(problem: Problem, g: Graph, capacity: list[float], effort: float,
                           deadline: float | None, justify_rounds: int) -> tuple | None:
    """The static model's stage candidate on a declared training step, justified, within ``capacity``.

    Parameters
    ----------
    problem : Problem
        The problem.
    g : Graph
        The problem as plain lists.
    capacity : list of float
        Bytes usable per device (static model; the heuristic may lower them).
    effort : float
        The heuristic's effort.
    deadline : float, optional
        ``time.perf_counter()`` value from a user's time limit.
    justify_rounds : int
        Rounds of double justification (never lengthens the schedule).

    Returns
    -------
    tuple or None
        ``(makespan, place, start, finish)`` as lists, or None (no declared phases, skipped
        by the budget, or nothing within ``capacity``).
    """
    declared = phase_forward(problem)
    if declared is None or declared.all() or not declared.any():  # not a declared forward/backward step
        return None
    got = stage_candidate(problem, "static", effort, deadline)
    if got is None:
        return None
    place, start = got
    if not fits(np.bincount(place, weights=problem.memory, minlength=g.k), np.asarray(capacity)).all():
        return None
    s, f, ms = justify(g, place.tolist(), start.tolist(), (start + problem.duration(place)).tolist(), justify_rounds)
    return ms, place.tolist(), s, f
