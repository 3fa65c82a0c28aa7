"""Insertion-based list scheduling: device timelines with idle gaps.

HEFT (Topcuoglu, Hariri, Wu, TPDS 2002) and the heuristic partitioner both place a
node into the earliest idle gap of a device that is long enough and starts no
earlier than the node's ready time ("insertion-based policy"). :class:`Timeline`
keeps one device's busy intervals sorted; :func:`insertion_schedule` schedules a
whole placement in a given priority order that way. Either gives a valid schedule
under the delay model (rules 1-3 of MODEL.md), often shorter than the canonical
(non-delay, non-insertion) one.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

import numpy as np

from .problem import Problem

__all__ = ["Timeline", "insertion_schedule", "priority_order"]


class Timeline:
    """The busy intervals of one device, sorted and disjoint (zero-length ones allowed)."""

    __slots__ = ("starts", "finishes")

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.finishes: list[float] = []

    def earliest_start(self, ready: float, duration: float) -> float:
        """The earliest ``t >= ready`` such that ``[t, t + duration]`` fits between busy intervals."""
        starts, finishes = self.starts, self.finishes
        i = bisect_right(finishes, ready)
        t = ready
        while i < len(starts):
            if t + duration <= starts[i]:
                return t
            if finishes[i] > t:
                t = finishes[i]
            i += 1
        return t

    def end(self) -> float:
        """When the device's last busy interval ends (0 when idle)."""
        return self.finishes[-1] if self.finishes else 0.0

    def reserve(self, start: float, finish: float) -> None:
        """Mark ``[start, finish]`` busy; it must come from :meth:`earliest_start`."""
        i = bisect_left(self.starts, start)
        # keep zero-length intervals after longer ones that start at the same time
        while i < len(self.starts) and self.starts[i] == start and self.finishes[i] <= start:
            i += 1
        self.starts.insert(i, start)
        self.finishes.insert(i, finish)


def priority_order(problem: Problem, priority: np.ndarray) -> np.ndarray:
    """Nodes by decreasing ``priority``, ties by topological position.

    For bottom levels (``bl(u) >= bl(w)`` on every edge) this is a topological order
    even with zero-time nodes and free transfers.
    """
    rank = np.empty(problem.n_nodes, dtype=np.int64)
    rank[problem.topo] = np.arange(problem.n_nodes)
    return np.lexsort((rank, -np.asarray(priority, dtype=np.float64)))


def insertion_schedule(problem: Problem, placement: np.ndarray, order: np.ndarray,
                       duration: np.ndarray | None = None, transfer: np.ndarray | None = None) -> np.ndarray:
    """Start times for ``placement`` when nodes are taken in ``order``, each into the earliest
    idle gap of its device after its data has arrived. ``order`` must be topological
    (see :func:`priority_order`)."""
    placement = np.asarray(placement, dtype=np.int64)
    dur = (problem.duration(placement) if duration is None else duration).tolist()
    comm = (problem.transfer_times(placement) if transfer is None else transfer)
    in_ptr = problem.in_ptr.tolist()
    pred = problem.edge_src[problem.in_edges].tolist()
    pcomm = comm[problem.in_edges].tolist()
    place = placement.tolist()
    lines = [Timeline() for _ in range(problem.n_devices)]
    start = [0.0] * problem.n_nodes
    finish = [0.0] * problem.n_nodes
    for v in np.asarray(order).tolist():
        ready = 0.0
        for i in range(in_ptr[v], in_ptr[v + 1]):
            r = finish[pred[i]] + pcomm[i]
            if r > ready:
                ready = r
        line = lines[place[v]]
        s = line.earliest_start(ready, dur[v])
        f = s + dur[v]
        line.reserve(s, f)
        start[v] = s
        finish[v] = f
    return np.asarray(start)
