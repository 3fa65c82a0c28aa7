"""Graph views and the schedulers shared by every phase of the heuristic.

:class:`Graph` copies a :class:`~optpart.problem.Problem` once into plain Python lists
(CSR adjacency over integer node ids) so that every later loop runs on ints and floats.

Schedulers (all under the delay model of MODEL.md section 2):

* :func:`bottom_levels`: the bottom level of every node under a placement (run time
  plus the heaviest transfer + bottom level over its successors).
* :func:`list_schedule`: insertion-based list scheduling of a placement in a given
  topological order (HEFT's "insertion policy", Topcuoglu et al., TPDS 2002): each node
  goes into the earliest idle gap of its device after its inputs have arrived. The same
  routine schedules the reversed graph, which :func:`justify` uses.
* :func:`schedule_placement`: the schedule the heuristic returns for a placement:
  bottom-level order, insertion, then double justification.
* :func:`justify`: forward-backward improvement ("double justification", Valls,
  Ballestin, Quintanilla, EJOR 2005): schedule the reversed graph in decreasing finish
  order, then the graph again in increasing start order. It never lengthens the schedule
  (the better of old and new is kept) and often closes idle gaps left by list scheduling.
* :func:`critical_chain`: the nodes that determine the makespan, traced backward from
  the last finish through the binding data arrival or the device predecessor.
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np

from ...problem import Problem

__all__ = ["Graph", "bottom_levels", "priority_order", "earliest_gap", "occupy_gap", "list_schedule", "schedule_placement",
           "justify", "critical_chain"]

_SCAN_LIMIT = 64  # idle gaps examined per insertion before appending at the end (keeps it near-linear)


class Graph:
    """A problem as plain lists: what the hot loops read."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.n = n = problem.n_nodes
        self.k = k = problem.n_devices
        self.out_ptr = problem.out_ptr.tolist()
        self.succ = problem.edge_dst[problem.out_edges].tolist()
        self.out_bytes = problem.edge_bytes[problem.out_edges].tolist()
        self.in_ptr = problem.in_ptr.tolist()
        self.pred = problem.edge_src[problem.in_edges].tolist()
        self.in_bytes = problem.edge_bytes[problem.in_edges].tolist()
        self.time = problem.time.tolist()
        self.speed = problem.device_speed.tolist()
        self.lat = problem.latency.tolist()
        self.bw = problem.bandwidth.tolist()
        self.topo = problem.topo
        rank = np.empty(n, dtype=np.int64)
        rank[problem.topo] = np.arange(n)
        self.rank = rank
        off = ~np.eye(k, dtype=bool)
        if k > 1:
            lat_off, bw_off = problem.latency[off], problem.bandwidth[off]
            self.uniform = bool((lat_off == lat_off[0]).all() and (bw_off == bw_off[0]).all())
            self.mean_lat = float(lat_off.mean())
            self.mean_inv_bw = float((1.0 / bw_off).mean())
        else:
            self.uniform, self.mean_lat, self.mean_inv_bw = True, 0.0, 0.0
        # Mean transfer time of an edge cut between two devices, per out-edge position.
        self.out_comm_mean = [self.mean_lat + b * self.mean_inv_bw for b in self.out_bytes] if k > 1 else \
            [0.0] * len(self.out_bytes)
        inv_speed = 1.0 / problem.device_speed
        self.mean_time = (problem.time * float(inv_speed.mean())).tolist()
        self.fast_time = (problem.time / float(problem.device_speed.max())).tolist()

    def comm(self, nbytes: float, a: int, b: int) -> float:
        """Transfer time of ``nbytes`` from device ``a`` to ``b`` (0 on one device)."""
        if a == b:
            return 0.0
        return self.lat[a][b] + nbytes / self.bw[a][b]


def bottom_levels(g: Graph, place: list[int]) -> list[float]:
    """Bottom level of every node under ``place`` (the canonical priority)."""
    out_ptr, succ, ob, lat, bw, speed, time = g.out_ptr, g.succ, g.out_bytes, g.lat, g.bw, g.speed, g.time
    bl = [0.0] * g.n
    for v in g.topo[::-1].tolist():
        pv = place[v]
        best = 0.0
        for i in range(out_ptr[v], out_ptr[v + 1]):
            w = succ[i]
            pw = place[w]
            x = bl[w] if pw == pv else bl[w] + lat[pv][pw] + ob[i] / bw[pv][pw]
            if x > best:
                best = x
        bl[v] = time[v] / speed[pv] + best
    return bl


def priority_order(g: Graph, priority, descending: bool = True) -> list[int]:
    """Nodes by ``priority`` (decreasing by default), ties by topological position."""
    pr = np.asarray(priority, dtype=np.float64)
    return np.lexsort((g.rank, -pr if descending else pr)).tolist()


def earliest_gap(gs: list[float], ge: list[float], ready: float, dur: float) -> tuple[float, int]:
    """The earliest start ``t >= ready`` inside an idle gap of a device that holds ``dur``,
    and the gap's index; ``(-1.0, -1)`` when no gap (among the first few after ``ready``) holds it."""
    j = bisect_right(ge, ready)
    m = len(gs)
    limit = j + _SCAN_LIMIT
    while j < m and j < limit:
        t = gs[j] if gs[j] > ready else ready
        if t + dur <= ge[j]:
            return t, j
        j += 1
    return -1.0, -1


def occupy_gap(gs: list[float], ge: list[float], j: int, s: float, f: float) -> None:
    """Mark ``[s, f]`` busy inside idle gap ``j`` (split, shrink or remove it)."""
    a, b = gs[j], ge[j]
    if s > a:
        if f < b:
            ge[j] = s
            gs.insert(j + 1, f)
            ge.insert(j + 1, b)
        else:
            ge[j] = s
    elif f < b:
        gs[j] = f
    else:
        del gs[j]
        del ge[j]


def list_schedule(g: Graph, place: list[int], order: list[int], reverse: bool = False
                  ) -> tuple[list[float], list[float]]:
    """Insertion list schedule of ``place`` taking nodes in ``order`` (topological for the
    direction). With ``reverse`` the reversed graph is scheduled (successors act as
    predecessors); the caller mirrors the times. Returns ``(start, finish)`` lists.

    Each device keeps its idle gaps (sorted, positive length) and the end of its last
    busy interval, so a node costs O(log gaps) unless it scans gaps (at most 64).
    """
    if reverse:
        ptr, nbr, nb = g.out_ptr, g.succ, g.out_bytes
    else:
        ptr, nbr, nb = g.in_ptr, g.pred, g.in_bytes
    lat, bw, speed, time = g.lat, g.bw, g.speed, g.time
    n, k = g.n, g.k
    gap_s: list[list[float]] = [[] for _ in range(k)]
    gap_e: list[list[float]] = [[] for _ in range(k)]
    end = [0.0] * k
    start = [0.0] * n
    finish = [0.0] * n
    for v in order:
        pv = place[v]
        ready = 0.0
        for i in range(ptr[v], ptr[v + 1]):
            u = nbr[i]
            pu = place[u]
            r = finish[u] if pu == pv else finish[u] + lat[pu][pv] + nb[i] / bw[pu][pv]
            if r > ready:
                ready = r
        d = time[v] / speed[pv]
        e = end[pv]
        if ready >= e:
            if ready > e:
                gap_s[pv].append(e)
                gap_e[pv].append(ready)
            s = ready
            end[pv] = s + d
        else:
            gs = gap_s[pv]
            s = -1.0
            if gs:
                ge = gap_e[pv]
                s, j = earliest_gap(gs, ge, ready, d)
                if j >= 0 and d > 0:
                    occupy_gap(gs, ge, j, s, s + d)
            if s < 0:
                s = e
                end[pv] = e + d
        start[v] = s
        finish[v] = s + d
    return start, finish


def _forward(g: Graph, place: list[int], order: list[int]) -> tuple[list[float], list[float], float]:
    s, f = list_schedule(g, place, order)
    return s, f, (max(f) if f else 0.0)


def justify(g: Graph, place: list[int], start: list[float], finish: list[float], rounds: int = 1
            ) -> tuple[list[float], list[float], float]:
    """Double justification of a schedule; returns the best of the input and the result."""
    best = (start, finish, max(finish) if finish else 0.0)
    rank = g.rank
    for _ in range(rounds):
        s, f, _ms = best
        # Right-justify: reversed graph, latest finish first (ties: later topological position first).
        order = np.lexsort((-rank, -np.asarray(f))).tolist()
        rs, rf = list_schedule(g, place, order, reverse=True)
        # Left-justify: forward in increasing order of the right-justified starts (= -rf).
        order = np.lexsort((rank, -np.asarray(rf))).tolist()
        s2, f2, ms2 = _forward(g, place, order)
        if ms2 < best[2] - 1e-12 * max(1.0, best[2]):
            best = (s2, f2, ms2)
        else:
            break
    return best


def schedule_placement(g: Graph, place: list[int], justify_rounds: int = 1
                       ) -> tuple[list[float], list[float], float]:
    """The heuristic's schedule for a placement: bottom-level order, insertion, justification."""
    order = priority_order(g, bottom_levels(g, place))
    s, f, ms = _forward(g, place, order)
    if justify_rounds > 0:
        s, f, ms = justify(g, place, s, f, justify_rounds)
    return s, f, ms


def critical_chain(g: Graph, place: list[int], start: list[float], finish: list[float]) -> list[int]:
    """Nodes on the schedule's critical chain, last first.

    From the node finishing last, step to the predecessor whose data arrives exactly at
    the start (the binding edge), else to the node just before it on its device, until a
    node starts at 0 (or no binding node is found).
    """
    n = g.n
    if n == 0:
        return []
    tol = 1e-9 * max(1.0, max(finish))
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
