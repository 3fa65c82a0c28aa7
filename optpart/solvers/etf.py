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
member (see :class:`~optpart.solvers._listsched_common.MemoryBook`), so the
placement never overflows. When a ready node has no device with room left the
answer is ``unknown`` with the reason.

Complexity: each ready node enters a pending heap (keyed by its input-arrival time)
and then a ready heap (keyed by priority) of each device it may use, stale entries
are dropped lazily, and a step compares the ``k`` devices' next start times:
O(E k + V k log V) in all, not the O(V^2 k) of the textbook loop.
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from ..problem import Problem
from ..result import Status
from ._listsched_common import MemoryBook, mean_costs, pair_costs, upward_rank
from .base import Solution

__all__ = ["solve"]


def solve(problem: Problem, *, time_limit: float | None = None, seed: int = 0,
          hint: np.ndarray | None = None) -> Solution:
    """Place and schedule ``problem`` with m-ETF; see the module docstring."""
    n, k = problem.n_nodes, problem.n_devices
    wbar, cbar = mean_costs(problem)
    neg_prio = (-upward_rank(problem, wbar, cbar)).tolist()
    inv_speed = (1.0 / problem.device_speed).tolist()
    lat, inv_bw = pair_costs(problem)
    time_s = problem.time.tolist()
    in_ptr = problem.in_ptr.tolist()
    pred = problem.edge_src[problem.in_edges].tolist()
    pbytes = problem.edge_bytes[problem.in_edges].tolist()
    out_ptr = problem.out_ptr.tolist()
    succ = problem.edge_dst[problem.out_edges].tolist()
    indeg = np.diff(problem.in_ptr).tolist()
    book = MemoryBook(problem)

    place = [-1] * n
    start = [0.0] * n
    finish = [0.0] * n
    avail = [0.0] * k
    pending: list[list] = [[] for _ in range(k)]  # (input arrival on d, -priority, node)
    ready: list[list] = [[] for _ in range(k)]    # (-priority, node): inputs there by avail[d]
    push, pop = heapq.heappush, heapq.heappop

    def release(v: int) -> None:
        """``v``'s predecessors are all scheduled: offer it to every device it may use."""
        preds = [(finish[pred[i]], place[pred[i]], pbytes[i]) for i in range(in_ptr[v], in_ptr[v + 1])]
        for d in book.devices_for(v):
            r = 0.0
            for fu, du, b in preds:
                x = fu if du == d else fu + lat[du][d] + b * inv_bw[du][d]
                if x > r:
                    r = x
            push(pending[d], (r, neg_prio[v], v))
        released.append(v)

    released: list[int] = []
    for v in range(n):
        if indeg[v] == 0:
            release(v)

    def candidate(d: int) -> tuple[float, tuple[float, int] | None]:
        """Device ``d``'s next start time and the (-priority, node) it would start then.

        Entries whose inputs are there by the time the device is free move to its ready
        heap (``avail`` only grows, so they stay ready); stale entries are dropped.
        """
        rdy, pend, a = ready[d], pending[d], avail[d]
        while pend and pend[0][0] <= a:
            _, np_, v = pop(pend)
            if place[v] < 0:
                push(rdy, (np_, v))
        while rdy and (place[rdy[0][1]] >= 0 or not book.fits(rdy[0][1], d)):
            pop(rdy)
        if rdy:
            return a, rdy[0]
        while pend and (place[pend[0][2]] >= 0 or not book.fits(pend[0][2], d)):
            pop(pend)
        if pend:  # the device waits for data; the heap's top is the best node arriving first
            return pend[0][0], (pend[0][1], pend[0][2])
        return math.inf, None

    for _ in range(n):
        # The earliest start over devices; ties by the priority of the node each would start.
        best_t, best_key, best_d = math.inf, None, -1
        for d in range(k):
            t, key = candidate(d)
            if key is None or t > best_t:
                continue
            if t < best_t or key < best_key:
                best_t, best_key, best_d = t, key, d
        if best_d < 0:
            waiting = [v for v in released if place[v] < 0]
            return Solution(Status.UNKNOWN, message=book.no_room_message(problem, waiting[0], "m-ETF"))
        d = best_d
        if ready[d] and ready[d][0] == best_key:
            pop(ready[d])
        else:
            pop(pending[d])
        v = best_key[1]
        f = best_t + time_s[v] * inv_speed[d]
        place[v], start[v], finish[v] = d, best_t, f
        avail[d] = f
        book.place(v, d)
        for i in range(out_ptr[v], out_ptr[v + 1]):
            w = succ[i]
            indeg[w] -= 1
            if indeg[w] == 0:
                release(w)

    return Solution(Status.FEASIBLE, placement=np.asarray(place, dtype=np.int64), start=np.asarray(start),
                    stats={"priority": "bottom level, mean costs"})
