"""``etf``: Baechi's m-ETF, earliest task first with memory checks.

ETF (Hwang, Chow, Anger, Lee, "Scheduling precedence graphs in systems with
interprocessor communication times", SIAM J. Comput. 18(2), 1989), in the
memory-constrained form m-ETF of Baechi (Jeon, Cho et al., "Baechi: Fast Device
Placement of Machine Learning Graphs", ACM SoCC 2020): at every step, among the
ready nodes (all predecessors scheduled) and the devices with enough free memory,
take the (node, device) pair that can *start* earliest, ``max(device free time,
arrival of the node's inputs on that device)``; ties go to the higher priority
(the node's bottom level under mean costs, as HEFT's upward rank), then the lower
node index, then the lower device index. Nodes run back to back on a device (no
insertion); that schedule is returned as the result's schedule.

Memory (static model): a device without room for the node is not a candidate; a
colocation group reserves its whole memory on the device of its first scheduled
member (see :class:`~optpart.schedule.policy.StaticPolicy`), so the
placement never overflows. When a ready node has no device with room left the
answer is ``unknown`` with the reason.

The loop is :func:`optpart.schedule.etf.etf_schedule`, shared with the heuristic.

Complexity: each ready node enters a pending heap (keyed by its input-arrival time)
and then a ready heap (keyed by priority) of each device it may use, stale entries
are dropped lazily, and a step compares the ``k`` devices' next start times:
O(E k + V k log V) in all, not the O(V^2 k) of the textbook loop.
"""

from __future__ import annotations

import numpy as np

from ..._docstrings import fill_doc
from ...model.paths import upward_rank
from ...model.problem import Problem
from ...schedule import Graph, etf_schedule
from ..base import Solution, engine_solution
from ..spec import SolverSpec

__all__ = ["solve", "SPEC"]

SPEC = SolverSpec(options=(), memory_models=("static", "peak"), uses_hint=False, uses_time_limit=False)


@SPEC.checked("etf")
@fill_doc
def solve(problem: Problem, *, time_limit: float | None = None, seed: int = 0,
          hint: np.ndarray | None = None, memory_model: str = "static") -> Solution:
    """Place and schedule ``problem`` with m-ETF; see the module docstring.

    Parameters
    ----------
    %(construction_args)s
    memory_model : {"static", "peak"}
        ``peak`` (on a problem with split memory): the liveness policy checks every slot while
        scheduling, as Baechi's m-ETF keeps memory in its simulation; else the static budget.

    Returns
    -------
    %(solution)s
    """
    return engine_solution(problem, memory_model, "m-ETF",
                           lambda policy: etf_schedule(Graph(problem), upward_rank(problem).tolist(), policy),
                           {"priority": "bottom level, mean costs"})
