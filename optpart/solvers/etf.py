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

from ..paths import upward_rank
from ..problem import Problem
from ..result import Status
from ..schedule import Graph, NoRoom, StaticPolicy, etf_schedule
from .base import Solution
from .spec import SolverSpec

__all__ = ["solve", "SPEC"]

SPEC = SolverSpec(options=(), memory_models=("static", "peak"), uses_hint=False, uses_time_limit=False)


def solve(problem: Problem, *, time_limit: float | None = None, seed: int = 0,
          hint: np.ndarray | None = None, memory_model: str = "static") -> Solution:
    """Place and schedule ``problem`` with m-ETF; see the module docstring.

    Parameters
    ----------
    problem : Problem
        The instance.
    time_limit : float, optional
        Accepted for the common solver signature; the construction is one pass and ignores it.
    seed : int
        Accepted for the common signature (the construction is deterministic).
    hint : numpy.ndarray, optional
        Ignored (the baseline starts from nothing).
    memory_model : {"static", "peak"}
        ``peak`` (on a problem with split memory): the liveness policy checks every slot while
        scheduling; else the static budget.

    Returns
    -------
    Solution
        The placement and status (``unknown`` with a one-line reason when nothing fits).
    """
    peak = memory_model == "peak" and problem.has_split
    if peak:  # liveness tracked while scheduling, as Baechi's m-ETF keeps memory in its simulation
        from ..schedule.liveness import LivenessPolicy
        policy = LivenessPolicy(problem)
    else:
        policy = StaticPolicy(problem, solver="m-ETF")
    try:
        res = etf_schedule(Graph(problem), upward_rank(problem).tolist(), policy)
    except NoRoom as stuck:
        return Solution(Status.UNKNOWN, message=stuck.message, memory_model=memory_model)
    if peak:
        from ..memory import overflow_message
        reason = overflow_message(problem, np.asarray(res.place), np.asarray(res.start), np.asarray(res.finish),
                                  "peak", "m-ETF")
        if reason is not None:
            return Solution(Status.UNKNOWN, message=reason, memory_model="peak")
        return Solution(Status.FEASIBLE, placement=np.asarray(res.place, dtype=np.int64),
                        start=np.asarray(res.start), memory_model="peak",
                        stats={"priority": "bottom level, mean costs"})
    return Solution(Status.FEASIBLE, placement=np.asarray(res.place, dtype=np.int64), start=np.asarray(res.start),
                    stats={"priority": "bottom level, mean costs"})
