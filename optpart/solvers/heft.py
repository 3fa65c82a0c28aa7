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

Complexity: O(E k) for data-arrival times, O(V k log V) for the device choice,
plus the scan of idle gaps before a node's ready time on each device.
"""

from __future__ import annotations

import numpy as np

from ..problem import Problem
from ..result import Status
from ..timeline import priority_order
from ._listsched_common import GapLine, MemoryBook, mean_costs, overflow_message, pair_costs, upward_rank
from .base import Solution

__all__ = ["solve"]


def solve(problem: Problem, *, time_limit: float | None = None, seed: int = 0,
          hint: np.ndarray | None = None, memory_aware: bool = True) -> Solution:
    """Place and schedule ``problem`` with HEFT; see the module docstring.

    Parameters
    ----------
    memory_aware : bool
        Skip devices without room for the node (default). False: the classic
        memory-blind HEFT, whose overflowing placement is answered ``unknown``.
    """
    n, k = problem.n_nodes, problem.n_devices
    wbar, cbar = mean_costs(problem)
    rank = upward_rank(problem, wbar, cbar)
    order = priority_order(problem, rank).tolist()

    inv_speed = (1.0 / problem.device_speed).tolist()
    lat, inv_bw = pair_costs(problem)
    time_s = problem.time.tolist()
    in_ptr = problem.in_ptr.tolist()
    pred = problem.edge_src[problem.in_edges].tolist()
    pbytes = problem.edge_bytes[problem.in_edges].tolist()
    book = MemoryBook(problem, memory_aware=memory_aware)
    positive = problem.time[problem.time > 0]
    shortest = float(positive.min()) if positive.size else 0.0
    lines = [GapLine(min_gap=shortest * inv_speed[d]) for d in range(k)]
    place = [-1] * n
    start = [0.0] * n
    finish = [0.0] * n
    solver = "heft" if memory_aware else "heft (memory-blind)"

    for v in order:
        devices = book.devices_for(v)
        if not devices:
            return Solution(Status.UNKNOWN, message=book.no_room_message(problem, v, solver))
        preds = [(finish[pred[i]], place[pred[i]], pbytes[i]) for i in range(in_ptr[v], in_ptr[v + 1])]
        best_f, best_s, best_d = float("inf"), 0.0, -1
        for d in devices:
            ready = 0.0
            for fu, du, b in preds:
                r = fu if du == d else fu + lat[du][d] + b * inv_bw[du][d]
                if r > ready:
                    ready = r
            dur = time_s[v] * inv_speed[d]
            s = lines[d].earliest_start(ready, dur)
            if s + dur < best_f:
                best_f, best_s, best_d = s + dur, s, d
        lines[best_d].reserve(best_s, best_f)
        book.place(v, best_d)
        place[v], start[v], finish[v] = best_d, best_s, best_f

    placement = np.asarray(place, dtype=np.int64)
    if not memory_aware:
        reason = overflow_message(problem, placement, solver)
        if reason is not None:
            return Solution(Status.UNKNOWN, message=reason)
    return Solution(Status.FEASIBLE, placement=placement, start=np.asarray(start),
                    stats={"rank": "upward, mean costs", "memory_aware": memory_aware})
