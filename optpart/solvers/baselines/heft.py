"""``heft``: Heterogeneous Earliest Finish Time with insertion, memory-aware by default.

HEFT (Topcuoglu, Hariri and Wu, "Performance-effective and low-complexity task
scheduling for heterogeneous computing", IEEE TPDS 13(3):260-274, 2002) has two phases:

1. *Prioritise*: every node gets its upward rank under mean costs,
   ``rank(v) = wbar(v) + max over successors w of (cbar(v, w) + rank(w))``, where
   ``wbar`` is the mean of ``time / speed`` over the devices the node may use and
   ``cbar`` the mean of ``latency + bytes / bandwidth`` over ordered device pairs.
   Nodes are taken by decreasing rank (ties: topological position, which keeps the
   order topological when times or transfers are zero).
2. *Select a device*: the node goes to the device where it finishes earliest, with
   per-pair links and per-device speeds, inserted into the earliest idle gap of the
   device that starts after its inputs have arrived (the paper's insertion policy).
   Ties: the lower device index.

The result's schedule is HEFT's own insertion schedule.

Memory (static model): with ``memory_aware=True`` (the default) a device whose
memory would overflow is skipped. A colocation group goes where its first
scheduled member goes, and that member may only pick a device with room for the
whole group, which then reserves it; so the placement never overflows. When a node
finds no device with room the answer is ``unknown`` with the reason (memory-aware
greed can dead-end where another placement fits). ``memory_aware=False`` is the
classic memory-blind HEFT, for reference: if its placement breaks memory it is *not*
returned; the answer is ``unknown`` saying which device overflows by how much.

The loop is :func:`optpart.schedule.eft.eft_schedule` (the one EFT engine) with the
static memory policy :class:`optpart.schedule.policy.StaticPolicy`.

Complexity: O(E k) for data-arrival times, O(V k log gaps) for the device choice
(true earliest fit, :class:`optpart.schedule.gaps.GapLine`).
"""

from __future__ import annotations

import numpy as np

from ..._docstrings import fill_doc
from ...model.paths import priority_order, upward_rank
from ...model.problem import Problem
from ...schedule import Graph, eft_schedule
from ..base import Solution, engine_solution
from ..spec import Option, SolverSpec

__all__ = ["solve", "heft_order", "SPEC"]

SPEC = SolverSpec(
    options=(Option("memory_aware", bool, True, "skip devices without room (false: classic memory-blind HEFT)"),),
    memory_models=("static", "peak"), uses_hint=False, uses_time_limit=False)


def heft_order(problem: Problem) -> list[int]:
    """HEFT's node order: decreasing upward rank under mean costs, ties by topological position.

    Parameters
    ----------
    problem : Problem

    Returns
    -------
    list of int
        A topological order of the nodes.
    """
    return priority_order(problem, upward_rank(problem)).tolist()


@SPEC.checked("heft")
@fill_doc
def solve(problem: Problem, *, time_limit: float | None = None, seed: int = 0,
          hint: np.ndarray | None = None, memory_model: str = "static", memory_aware: bool = True) -> Solution:
    """Place and schedule ``problem`` with HEFT; see the module docstring.

    Parameters
    ----------
    %(construction_args)s
    memory_model : {"static", "peak"}
        ``peak`` (on a problem with split memory): the liveness policy checks every slot while
        scheduling; else the static budget.
    memory_aware : bool
        Skip devices without room for the node (default). False: the classic
        memory-blind HEFT, whose overflowing placement is answered ``unknown``.

    Returns
    -------
    %(solution)s
    """
    return engine_solution(problem, memory_model, "heft" if memory_aware else "heft (memory-blind)",
                           lambda policy: eft_schedule(Graph(problem), heft_order(problem), policy),
                           {"rank": "upward, mean costs", "memory_aware": memory_aware}, memory_aware)
