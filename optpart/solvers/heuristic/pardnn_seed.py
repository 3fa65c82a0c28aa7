"""``pardnn``: the ParDNN seed method alone, for comparison with the published ParDNN.

ParDNN (Qararyah, Wahib, Dikbayir, Belviranli, Unat, "A computational-graph
partitioning method for training memory-constrained DNNs", Parallel Computing 105,
2021), following the authors' code (ParCoreLab/pardnn) step by step; the phases live
in :mod:`optpart.solvers.heuristic` and run through :func:`~optpart.solvers.heuristic.seed.seed_placement`:

1. slicing (:mod:`~optpart.solvers.heuristic.seed_slicing`): linear clusters by bottom level,
   with the K-path recomputation for the ``k`` primaries;
2. merging and mapping (:mod:`~optpart.solvers.heuristic.seed_mapping`): communication against
   the work potential of each cluster's span, the rest to the least-loaded primary;
3. refinement against the simulated schedule (:mod:`~optpart.solvers.heuristic.seed_refine`);
4. the memory step (:mod:`~optpart.solvers.heuristic.seed_memory`), under the static or
   the peak (liveness) model.

The answer is the placement with the schedule the memory step checked (insertion in
bottom-level order, :func:`optpart.schedule.insertion.schedule_placement`, no
justification): the seed method without any of the heuristic's constructions or
search. It always respects memory in the model it runs under; when the memory step
finds no placement the answer is ``unknown`` with the reason. Deterministic.
"""

from __future__ import annotations

import numpy as np

from ...model.problem import Problem
from ...result import Status
from ..base import Solution
from .schedule import Graph
from .seed import seed_placement
from ..spec import SolverSpec

__all__ = ["solve", "SPEC"]

SPEC = SolverSpec(options=(), memory_models=("static", "peak"), uses_hint=False, uses_time_limit=False)


@SPEC.checked("pardnn")
def solve(problem: Problem, *, time_limit: float | None = None, seed: int = 0, hint=None,
          memory_model: str = "static") -> Solution:
    """Place ``problem`` with ParDNN's four phases (see the module docstring).

    Parameters
    ----------
    problem : Problem
        The problem, with devices.
    memory_model : {"static", "peak"}
        The memory model the placement and its schedule respect.
    time_limit, seed, hint
        Not used (the seed method is deterministic and runs to completion).

    Returns
    -------
    Solution
        ``feasible`` with the placement and start times, or ``unknown`` with the reason.
    """
    if problem.n_nodes == 0:
        return Solution(Status.FEASIBLE, placement=np.zeros(0, dtype=np.int64), start=np.zeros(0),
                        memory_model=memory_model)
    res = seed_placement(problem, Graph(problem), memory_model=memory_model)
    if res is None:
        if memory_model == "peak":
            why = ("the peak-model memory step got stuck in its four attempts (from the refined and the "
                   "variable-balanced placement, toward least communication and toward most room): no unit "
                   "on an overflowing device could move to a device with room on its liveness timeline")
        else:
            why = ("the memory step found no placement within memory (its guarantee needs every device to "
                   "hold total/k plus the largest colocation group, and no forbidden devices)")
        return Solution(Status.UNKNOWN, message=f"pardnn: {why}", memory_model=memory_model)
    return Solution(Status.FEASIBLE, placement=np.asarray(res.place, dtype=np.int64), start=np.asarray(res.start),
                    memory_model=memory_model, stats={"phases": "slicing, mapping, refinement, memory", **res.stats})
