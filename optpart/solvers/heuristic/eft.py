"""Memory-aware earliest-finish-time constructions for the heuristic.

HEFT's construction (Topcuoglu, Hariri, Wu, TPDS 2002) through the shared engine
:func:`optpart.schedule.eft.eft_schedule`: nodes in a topological priority order (by
default decreasing upward rank under mean costs, :func:`optpart.model.paths.upward_rank`),
each on the device where it finishes earliest with insertion, among the devices the
static memory policy allows (:class:`optpart.schedule.policy.StaticPolicy`; a colocation
group reserves its whole memory when its first member is placed).

With the default order and every device as a candidate this *is* ``heft``'s schedule,
which is how the heuristic is never worse than ``heft``. Memory: any order of
first-fit placements succeeds when every device holds ``total / k`` plus the largest
unit, so under that condition this never gets stuck (see :mod:`.memory`).
"""

from __future__ import annotations

import heapq
from typing import Sequence

import numpy as np

from ..._docstrings import fill_doc
from ...model.paths import priority_order as _priority_order
from ...schedule import NoRoom, StaticPolicy, eft_schedule as _engine
from .schedule import Graph

__all__ = ["upward_rank", "heft_order", "topological_priority", "eft_schedule"]


@fill_doc
def upward_rank(g: Graph) -> list[float]:
    """HEFT's upward rank (:func:`optpart.model.paths.upward_rank`) from the graph's mean costs.

    Parameters
    ----------
    %(g)s

    Returns
    -------
    list of float
        Per node, seconds.
    """
    return list(g.mean_bottom)  # computed once per graph (a copy: callers may change it)


@fill_doc
def heft_order(g: Graph) -> list[int]:
    """Decreasing upward rank, ties by topological position (HEFT's order).

    Parameters
    ----------
    %(g)s

    Returns
    -------
    list of int
        A topological order.
    """
    return _priority_order(g.problem, np.asarray(upward_rank(g))).tolist()


@fill_doc
def topological_priority(g: Graph, priority: Sequence[float]) -> list[int]:
    """Nodes by decreasing ``priority`` but never before a predecessor (Kahn's algorithm
    with a heap keyed by (-priority, node index)).

    Parameters
    ----------
    %(g)s
    priority : sequence of float
        Per node; higher goes first when ready.

    Returns
    -------
    list of int
        A topological order.
    """
    pr = (-np.asarray(priority, dtype=np.float64)).tolist()
    indeg = [g.in_ptr[v + 1] - g.in_ptr[v] for v in range(g.n)]
    heap = [(pr[v], v) for v in range(g.n) if indeg[v] == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        _, v = heapq.heappop(heap)
        out.append(v)
        for i in range(g.out_ptr[v], g.out_ptr[v + 1]):
            w = g.succ[i]
            indeg[w] -= 1
            if indeg[w] == 0:
                heapq.heappush(heap, (pr[w], w))
    return out


@fill_doc
def eft_schedule(g: Graph, capacity: Sequence[float], order: Sequence[int] | None = None,
                 candidates: str = "all") -> tuple[list[int], list[float], list[float]] | None:
    """``(place, start, finish)`` of the memory-aware EFT construction within ``capacity``
    (static model), or None when some node finds no allowed device with room.

    Parameters
    ----------
    %(g)s
    capacity : sequence of float
        Bytes usable per device.
    order : sequence of int, optional
        The node order (default: HEFT's).
    candidates : {"all", "near"}
        Devices tried per node (see :func:`optpart.schedule.eft.eft_schedule`).

    Returns
    -------
    tuple or None
        ``(place, start, finish)`` lists, or None on a dead end.
    """
    if order is None:
        order = heft_order(g)
    try:
        res = _engine(g, order, StaticPolicy(g.problem, capacity=capacity, solver="heuristic"), candidates)
    except NoRoom:
        return None
    return res.place, res.start, res.finish
