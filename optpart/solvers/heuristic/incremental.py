"""A schedule kept as one node sequence per device, re-timed only where a move reaches.

The search (:mod:`.search`) scores placements that differ from the incumbent in a few units;
rescheduling the whole graph for each costs O((V + E) log V). Here every node has a *key*,
increasing along every edge, and each device runs its nodes in key order, each as early as its
inputs (the arrival rule of :mod:`optpart.schedule.graph`) and the node before it allow: a
semi-active schedule of fixed sequences, whose times are a longest path over an acyclic graph
and valid under docs/model.md section 2.

A move sends a node to another device at a key between its predecessors' and successors'
keys: among the first few positions after the device's nodes that end by its ready time, the
first idle gap that holds it (insertion, as HEFT's; Topcuoglu, Hariri, Wu, TPDS 2002), else
the first of them. Re-timing is one pass in key order from the first moved node that
recomputes only *marked* nodes (the moved ones, their successors, their old and new device
successors, then the successors of every node whose times changed) and stops when none is
left: the incremental longest-path update of job-shop local search (Nowicki and Smutnicki,
Management Science 42(6), 1996). :meth:`SequenceSchedule.apply` records every change and
:meth:`SequenceSchedule.undo` restores the exact previous state. ``work`` counts the node
re-timings (a full pass counts ``n``): the search's deterministic budget.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from heapq import heapify, heappop, heappush

import numpy as np

from ..._docstrings import fill_doc
from ...evaluate import time_tolerance
from ...schedule.graph import arrival
from ...schedule.graph import Graph

__all__ = ["SequenceSchedule"]

_GAPS_LOOKED_AT = 16   # idle gaps after its ready time tried for a moved node


@fill_doc
class SequenceSchedule:
    """Device sequences, start and finish times of a placement (see the module docstring).

    Parameters
    ----------
    %(g_place)s
    start : list of float
        A valid schedule of ``place``: its start order (ties by finish, then the canonical
        order :attr:`optpart.schedule.graph.Graph.canon`) gives the keys, so the sequence
        schedule starts no node later than it.
    """

    def __init__(self, g: Graph, place: list[int], start: list[float]) -> None:
        self.g = g
        n, k = g.n, g.k
        st = np.asarray(start, dtype=np.float64)
        fi = st + np.asarray(g.time, dtype=np.float64) / np.asarray(g.speed)[np.asarray(place, dtype=np.int64)]
        # start order; an instant at a run's start goes before it (finish breaks the tie)
        order = np.lexsort((g.canon, fi, st)).tolist() if n else []
        self.place = list(place)
        key = [0.0] * n
        for i, v in enumerate(order):
            key[v] = float(i)
        self.key = key
        self.order, self.okeys = order, [float(i) for i in range(n)]  # every node by key
        self.seq_nodes: list[list[int]] = [[] for _ in range(k)]
        self.seq_keys: list[list[float]] = [[] for _ in range(k)]
        self.prev = [-1] * n   # the node before / after each one on its device (-1: none)
        self.next = [-1] * n
        for v in order:
            d = self.place[v]
            nodes = self.seq_nodes[d]
            if nodes:
                self.prev[v], self.next[nodes[-1]] = nodes[-1], v
            nodes.append(v)
            self.seq_keys[d].append(key[v])
        self.start = [0.0] * n
        self.finish = [0.0] * n
        self.work = 0
        self._log: dict | None = None
        self._mark = [0] * n   # propagation epoch in which each node was last marked to re-simulate
        self._epoch = 0
        self._full(order)

    # ------------------------------------------------------------------ times
    def _dur(self, v: int, d: int) -> float:
        return self.g.time[v] / self.g.speed[d]

    def _ready(self, v: int, d: int) -> float:
        """Latest input arrival of ``v`` on ``d`` (the arrival rule, current finishes)."""
        return arrival(self.g, v, d, self.place, self.finish)

    def _full(self, order: list[int]) -> None:
        """Every node's times in key order (O(V + E))."""
        prev_finish = [0.0] * self.g.k
        place, start, finish = self.place, self.start, self.finish
        for v in order:
            d = place[v]
            s = self._ready(v, d)
            if prev_finish[d] > s:
                s = prev_finish[d]
            f = s + self._dur(v, d)
            start[v], finish[v] = s, f
            prev_finish[d] = f
        self.work += len(order)
        self.makespan = max(finish) if finish else 0.0
        self.total = math.fsum(finish)   # exactly rounded: the same whatever the node order

    def _unlink(self, v: int) -> int:
        """Take ``v`` out of its device's sequence; returns the node that followed it (or -1)."""
        d = self.place[v]
        i = bisect_left(self.seq_keys[d], self.key[v])
        del self.seq_nodes[d][i], self.seq_keys[d][i]
        i = bisect_left(self.okeys, self.key[v])
        while self.order[i] != v:  # another device's node may share the key
            i += 1
        del self.order[i], self.okeys[i]
        p, q = self.prev[v], self.next[v]
        if p >= 0:
            self.next[p] = q
        if q >= 0:
            self.prev[q] = p
        return q

    def _link(self, v: int, d: int, key: float) -> int:
        """Put ``v`` into device ``d``'s sequence at ``key``; returns the node after it (or -1)."""
        self.place[v], self.key[v] = d, key
        nodes, keys = self.seq_nodes[d], self.seq_keys[d]
        j = bisect_left(keys, key)
        nodes.insert(j, v)
        keys.insert(j, key)
        i = bisect_left(self.okeys, key)
        canon = self.g.canon
        while i < len(self.order) and self.okeys[i] == key and canon[self.order[i]] < canon[v]:
            i += 1   # equal keys (on other devices) in the canonical order
        self.order.insert(i, v)
        self.okeys.insert(i, key)
        p = nodes[j - 1] if j > 0 else -1
        q = nodes[j + 1] if j + 1 < len(nodes) else -1
        self.prev[v], self.next[v] = p, q
        if p >= 0:
            self.next[p] = v
        if q >= 0:
            self.prev[q] = v
        return q

    # ------------------------------------------------------------------ moves
    def _position(self, v: int, d: int) -> float | None:
        """The key ``v`` takes on device ``d`` (module docstring), or None when no key is free."""
        g, key = self.g, self.key
        lo = max((key[g.pred[i]] for i in range(g.in_ptr[v], g.in_ptr[v + 1])), default=-1.0)
        hi = min((key[g.succ[i]] for i in range(g.out_ptr[v], g.out_ptr[v + 1])), default=float(g.n))
        keys, nodes = self.seq_keys[d], self.seq_nodes[d]
        i0, i1 = bisect_right(keys, lo), bisect_left(keys, hi)
        ready, dur = self._ready(v, d), self._dur(v, d)
        start, finish = self.start, self.finish
        # times increase along a device's sequence: skip the nodes that end by ``ready``, then
        # look at a few gaps for one that holds ``v`` without delaying the next node
        at = bisect_right(nodes, ready, i0, i1, key=finish.__getitem__)
        for i in range(at, min(i1, at + _GAPS_LOOKED_AT)):
            s = finish[nodes[i - 1]] if i > 0 and finish[nodes[i - 1]] > ready else ready
            if s + dur <= start[nodes[i]]:
                at = i
                break
        self.work += 1
        left = keys[at - 1] if at > 0 and keys[at - 1] > lo else lo
        right = keys[at] if at < len(keys) and keys[at] < hi else hi
        new = 0.5 * (left + right)
        return new if left < new < right else None

    def apply(self, moves: list[tuple[int, int]]) -> bool:
        """Move each node of ``moves`` (``(node, device)`` pairs, in order) and re-simulate.

        Opens a change record that :meth:`undo` reverts (one at a time); False, with
        nothing changed, when some node finds no free key on its device.

        Parameters
        ----------
        moves : list of tuple of int
            ``(node, device)``; a node already on the device is left alone.

        Returns
        -------
        bool
            True when applied (``makespan`` and ``total`` are then the new values).
        """
        g = self.g
        log = self._log = {"moved": [], "times": [], "makespan": self.makespan, "total": self.total}
        seeds: list[int] = []
        for v, d in moves:
            a = self.place[v]
            if a == d:
                continue
            new_key = self._position(v, d)
            if new_key is None:
                self.undo()
                return False
            log["moved"].append((v, a, self.key[v]))
            q = self._unlink(v)
            if q >= 0:
                seeds.append(q)
            q = self._link(v, d, new_key)
            if q >= 0:
                seeds.append(q)
            seeds.append(v)
            seeds.extend(g.succ[g.out_ptr[v]:g.out_ptr[v + 1]])
        self._propagate(seeds)
        return True

    def _propagate(self, seeds: list[int]) -> None:
        """Re-time the nodes reached from ``seeds``, marked nodes only, in key order (a heap of
        the marked ones: the cost is that of the nodes whose times may change, not of the span
        of keys between them)."""
        g, key, place, start, finish, canon = self.g, self.key, self.place, self.start, self.finish, self.g.canon
        succ, out_ptr, pred, in_ptr, ib = g.succ, g.out_ptr, g.pred, g.in_ptr, g.in_bytes
        time, speed, nxt, prev = g.time, g.speed, self.next, self.prev
        times = self._log["times"]
        self._epoch += 1
        epoch, mark = self._epoch, self._mark
        heap = []
        for v in seeds:
            if mark[v] != epoch:
                mark[v] = epoch
                heap.append((key[v], canon[v], v))
        heapify(heap)
        grew, shrank = 0.0, False
        ms, total = self.makespan, self.total
        tol = time_tolerance(ms)
        work = 0
        uniform = g.uniform  # one latency and bandwidth between any two devices: no table lookups
        lat0, bw0 = g.mean_lat, g.link_bw
        while heap:   # a node is final once popped: everything that feeds it has a smaller key
            v = heappop(heap)[2]
            work += 1
            d = place[v]
            s = 0.0
            if uniform:
                for i in range(in_ptr[v], in_ptr[v + 1]):
                    u = pred[i]
                    r = finish[u] if place[u] == d else finish[u] + (lat0 + ib[i] / bw0)
                    if r > s:
                        s = r
            else:
                s = arrival(g, v, d, place, finish)
            p = prev[v]
            if p >= 0 and finish[p] > s:
                s = finish[p]
            f = s + time[v] / speed[d]
            if s != start[v] or f != finish[v]:
                times.append((v, start[v], finish[v]))
                if f < finish[v] and finish[v] >= ms - tol:
                    shrank = True
                if f > grew:
                    grew = f
                total += f - finish[v]
                start[v], finish[v] = s, f
                for w in succ[out_ptr[v]:out_ptr[v + 1]]:
                    if mark[w] != epoch:
                        mark[w] = epoch
                        heappush(heap, (key[w], canon[w], w))
                w = nxt[v]
                if w >= 0 and mark[w] != epoch:
                    mark[w] = epoch
                    heappush(heap, (key[w], canon[w], w))
        self.work += work
        self.total = total
        self.makespan = max(finish) if shrank else max(ms, grew)

    def undo(self) -> None:
        """Revert the last :meth:`apply` exactly (times, keys, sequences, makespan)."""
        log = self._log
        if log is None:
            return
        start, finish = self.start, self.finish
        for v, s, f in reversed(log["times"]):
            start[v], finish[v] = s, f
        for v, a, old_key in reversed(log["moved"]):
            self._unlink(v)
            self._link(v, a, old_key)
        self.makespan, self.total = log["makespan"], log["total"]
        self._log = None

    def commit(self) -> None:
        """Keep the last :meth:`apply` (forget its change record)."""
        self._log = None

    # ------------------------------------------------------------------ the critical chain
    def critical_chain(self) -> list[int]:
        """Nodes that set the makespan, last first: from the last finish, step to the input
        that arrives exactly at the start, else to the device predecessor that ends there.

        Returns
        -------
        list of int
            Node indices, the last-finishing node first.
        """
        g, place, start, finish = self.g, self.place, self.start, self.finish
        if g.n == 0:
            return []
        last = max(finish)
        v = finish.index(last)
        if finish.count(last) > 1:  # ties: the canonical order
            v = min((x for x in range(g.n) if finish[x] == last), key=g.canon.__getitem__)
        chain = [v]
        while start[v] > 0.0:
            d = place[v]
            nxt = -1
            for i in range(g.in_ptr[v], g.in_ptr[v + 1]):
                u = g.pred[i]
                pu = place[u]
                if finish[u] + (g.lat[pu][d] + g.in_bytes[i] / g.bw[pu][d]) == start[v]:
                    nxt = u
                    break
            if nxt < 0:
                nxt = self.prev[v]
                if nxt < 0 or finish[nxt] != start[v]:
                    break
            chain.append(nxt)
            v = nxt
        return chain
