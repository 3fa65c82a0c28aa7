"""The heuristic's view of the shared scheduling engine, plus its critical chain.

Everything that turns a placement into a schedule lives in :mod:`optpart.schedule`
(one gap structure, one insertion replay, one justification); this module gives the
heuristic's phases short names for it:

* :class:`Graph`: a problem as plain lists (:class:`optpart.schedule.graph.Graph`);
* :func:`bottom_levels`: bottom levels under a placement
  (:func:`optpart.schedule.insertion.placement_levels`, the engine's function itself);
* :func:`list_schedule`: insertion replay of a placement in an order, forward or on the
  reversed graph (:func:`optpart.schedule.insertion.insertion_times`, likewise);
* :func:`justify`, :func:`schedule_placement`: double justification (Valls et al.,
  EJOR 2005) and the heuristic's schedule of a placement;
* :func:`critical_chain`: the nodes that determine the makespan, traced backward from
  the last finish through the binding data arrival or the device predecessor.
"""

from __future__ import annotations

import numpy as np

from ..._docstrings import fill_doc
from ...evaluate import time_tolerance
from ...schedule.graph import Graph
from ...schedule.insertion import insertion_times as list_schedule
from ...schedule.insertion import justify, schedule_placement
from ...schedule.insertion import placement_levels as bottom_levels

__all__ = ["Graph", "bottom_levels", "priority_order", "list_schedule", "schedule_placement", "justify",
           "critical_chain"]


@fill_doc
def priority_order(g: Graph, priority, descending: bool = True) -> list[int]:
    """Nodes by ``priority`` (decreasing by default), ties by topological position.

    Parameters
    ----------
    %(g)s
    priority : array_like of float
        Per node.
    descending : bool
        Highest first (default) or lowest first.

    Returns
    -------
    list of int
    """
    pr = np.asarray(priority, dtype=np.float64)
    return np.lexsort((g.rank, -pr if descending else pr)).tolist()


@fill_doc
def critical_chain(g: Graph, place: list[int], start: list[float], finish: list[float]) -> list[int]:
    """Nodes on the schedule's critical chain, last first.

    From the node finishing last, step to the predecessor whose data arrives exactly at
    the start (the binding edge), else to the node just before it on its device, until a
    node starts at 0 (or no binding node is found).

    Parameters
    ----------
    %(g)s
    place : list of int
        Device of every node.
    start, finish : list of float
        The schedule, seconds.

    Returns
    -------
    list of int
        Node indices from the last-finishing node back to a start.
    """
    n = g.n
    if n == 0:
        return []
    tol = time_tolerance(max(finish))
    by_dev: list[list[int]] = [[] for _ in range(g.k)]
    for v in np.lexsort((np.asarray(finish), np.asarray(start))).tolist():
        by_dev[place[v]].append(v)
    pos = [0] * n
    for lst in by_dev:
        for i, v in enumerate(lst):
            pos[v] = i
    v = max(range(n), key=lambda x: (finish[x], -x))
    chain = [v]
    seen = {v}
    while start[v] > tol:
        pv = place[v]
        nxt = -1
        for i in range(g.in_ptr[v], g.in_ptr[v + 1]):
            u = g.pred[i]
            if finish[u] + g.comm(g.in_bytes[i], place[u], pv) >= start[v] - tol:
                nxt = u
                break
        if nxt < 0:
            lst = by_dev[pv]
            j = pos[v] - 1
            if j >= 0 and finish[lst[j]] >= start[v] - tol:
                nxt = lst[j]
        if nxt < 0 or nxt in seen:
            break
        chain.append(nxt)
        seen.add(nxt)
        v = nxt
    return chain
