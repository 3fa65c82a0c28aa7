"""``pardnn``: the ParDNN seed method alone, for comparison with the full ``heuristic``.

ParDNN (Qararyah, Wahib, Dikbayir, Belviranli, Unat, "A computational-graph
partitioning method for training memory-constrained DNNs", Parallel Computing 105,
2021) in four phases, each a module of :mod:`optpart.solvers.pardnn`:

1. slicing (:mod:`~optpart.solvers.pardnn.slicing`): heaviest paths by bottom level
   under mean costs; the first ``k`` are the primary clusters;
2. merging and mapping (:mod:`~optpart.solvers.pardnn.mapping`): communication-bound
   clusters merge, the rest go where windowed load plus cut communication is least;
3. refinement (:mod:`~optpart.solvers.pardnn.refine`): critical-chain moves against the
   simulated schedule (at most ``refine_evals`` schedule evaluations);
4. the memory step (:mod:`~optpart.solvers.pardnn.memory`): constraints projected,
   memory repaired (memory freed per communication added), and a greedy fill as the
   last resort, so the static memory of every device fits.

The placement is scheduled by the shared insertion replay in bottom-level order
(:func:`optpart.schedule.insertion.schedule_placement`, no justification): the seed
method's answer without any of the heuristic's constructions or search. It always
respects memory (static model): when the memory step cannot fit the graph the answer
is ``unknown`` with the reason. Deterministic.
"""

from __future__ import annotations

import numpy as np

from ..problem import Problem
from ..result import Status
from .base import Solution
from .pardnn import pardnn_placement
from .pardnn.schedule import Graph, schedule_placement
from .spec import Option, SolverSpec

__all__ = ["solve", "SPEC"]

SPEC = SolverSpec(
    options=(Option("refine_evals", int, 20, "schedule evaluations of the refinement phase", min=0),),
    memory_models=("static",), uses_hint=False, uses_time_limit=False)


def solve(problem: Problem, *, time_limit: float | None = None, seed: int = 0, hint=None,
          memory_model: str = "static", refine_evals: int = 20) -> Solution:
    """Place ``problem`` with ParDNN's four phases and schedule the placement (see the module docstring)."""
    if problem.n_nodes == 0:
        return Solution(Status.FEASIBLE, placement=np.zeros(0, dtype=np.int64), start=np.zeros(0))
    g = Graph(problem)
    capacity = problem.device_memory.astype(float).tolist()
    place = pardnn_placement(problem, g, capacity, refine_evals=int(refine_evals))
    if place is None:
        return Solution(Status.UNKNOWN, message="pardnn: the memory step found no placement within memory "
                                                "(it needs every device to hold total/k plus the largest "
                                                "colocation group)")
    start, _finish, _ms = schedule_placement(g, place, 0)
    return Solution(Status.FEASIBLE, placement=np.asarray(place, dtype=np.int64), start=np.asarray(start),
                    stats={"phases": "slicing, mapping, refinement, memory"})
