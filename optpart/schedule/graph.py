"""A problem as plain Python lists, and the one data-arrival rule.

The schedulers' hot loops read :class:`Graph` (CSR adjacency over integer node ids,
run times, device speeds, per-pair latency and bandwidth with 0 and inf on the diagonal)
and never touch numpy or networkx per node: converting once costs O(V + E) and then every
pass is plain loops over ints and floats.

Data arrival (docs/model.md section 2, rule 2): node ``v`` may start on device ``d``
once every input has arrived, ``max over in-edges (u, v) of F(u) + c(u, v)`` with
``c = latency + bytes / bandwidth`` between different devices and 0 on one device.
:func:`arrivals` is that rule for a list of candidate devices; the engine, the
insertion replays and the heuristic all call it. The engine computes as the model does
(:meth:`Problem.transfer_times`, :meth:`Problem.duration`): it divides by the bandwidth
and the speed, never multiplies by an inverse, so its times are the evaluator's to the last
bit (tests/test_engine.py).
"""

from __future__ import annotations

import copy
import heapq
import weakref
from array import array
from functools import cached_property
from typing import Sequence

import numpy as np

from .._docstrings import fill_doc
from .._gc import no_gc  # re-exported: the schedulers' hot loops pause the collector
from ..model.paths import bottom_levels_csr, mean_costs, top_levels_csr
from ..model.problem import Problem

__all__ = ["Graph", "arrivals", "arrival", "uniform_arrival", "no_gc", "canonical_order", "topological_order"]


@fill_doc
class Graph:
    """A problem as plain lists: what the hot loops read (built once, O(V + E))."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.n = problem.n_nodes
        self.k = k = problem.n_devices
        self.out_ptr = problem.out_ptr.tolist()
        self.succ = problem.edge_dst[problem.out_edges].tolist()
        self.in_ptr = problem.in_ptr.tolist()
        self.pred = problem.edge_src[problem.in_edges].tolist()
        self.time = problem.time.tolist()
        self.speed = problem.device_speed.tolist()
        lat = problem.latency.astype(np.float64).copy()
        bw = problem.bandwidth.astype(np.float64).copy()
        np.fill_diagonal(lat, 0.0)
        np.fill_diagonal(bw, np.inf)  # latency + bytes / inf = 0 on one device
        self.lat = lat.tolist()
        self.bw = bw.tolist()
        # The same matrices as arrays, for vectorised per-edge transfer times (converting the
        # nested lists back on every call is O(k^2) per schedule evaluation).
        self.lat_array, self.bw_array = lat, bw
        self.topo = problem.topo
        if k > 1:
            off = ~np.eye(k, dtype=bool)
            lat_off, bw_off = problem.latency[off], problem.bandwidth[off]
            self.uniform = bool((lat_off == lat_off[0]).all() and (bw_off == bw_off[0]).all())
            self.mean_lat = float(lat_off.mean())
            self.mean_inv_bw = float((1.0 / bw_off).mean())
            #: the one link's bandwidth when ``uniform`` (inf otherwise: not read)
            self.link_bw = float(bw_off[0]) if self.uniform else np.inf
            if self.uniform:  # the exact pair values, not a mean that may round
                self.mean_lat, self.mean_inv_bw = float(lat_off[0]), float(1.0 / bw_off[0])
        else:
            self.uniform, self.mean_lat, self.mean_inv_bw, self.link_bw = True, 0.0, 0.0, np.inf
        wbar, cbar = mean_costs(problem)
        #: mean run time per node (HEFT's w-bar); the ``time`` list itself when the numbers are the
        #: same to the bit (equal speeds, no restriction: 32 MiB less at 10^6 nodes)
        self.mean_time = self.time if _same_bits(wbar, problem.time) else wbar.tolist()
        #: mean transfer per out-edge position (c-bar) as an array: the levels and the slicing read
        #: it once each, so the list (:attr:`out_comm_mean`) is built only for the code that indexes it
        self.out_comm_mean_array = cbar[problem.out_edges]

    # Levels under mean costs: HEFT's order, m-ETF's priority and the seed method's slicing all
    # read them, so they are computed once per graph (callers get copies).
    @cached_property
    def mean_bottom(self) -> list[float]:
        """Bottom level of every node under mean costs (HEFT's upward rank), seconds; do not mutate."""
        return bottom_levels_csr(self.topo.tolist(), self.out_ptr, self.succ, self.mean_time, self._out_comm_mean())

    @cached_property
    def mean_top(self) -> list[float]:
        """Top level of every node under mean costs (longest path ending just before it), seconds; do not mutate."""
        return top_levels_csr(self.topo.tolist(), self.out_ptr, self.succ, self.mean_time, self._out_comm_mean())

    @cached_property
    def out_comm_mean(self) -> list[float]:
        """Mean transfer time per out-edge position (HEFT's c-bar), seconds; built on first use."""
        return self.out_comm_mean_array.tolist()

    def _out_comm_mean(self) -> list[float]:
        """:attr:`out_comm_mean` when built, else a list for one pass (not kept)."""
        return self.__dict__.get("out_comm_mean") or self.out_comm_mean_array.tolist()

    @cached_property
    def in_bytes(self) -> list[float]:
        """Bytes of each in-edge position (CSR order of ``pred``); built on first use (under uniform
        links the constructions read :attr:`in_link` instead)."""
        return self.problem.edge_bytes[self.problem.in_edges].tolist()

    @cached_property
    def in_link(self) -> list[float]:
        """Per in-edge position, the transfer time over the one link when ``uniform``:
        ``mean_lat + bytes / link_bw``, seconds (numpy adds and divides as Python does, so these
        are the engines' per-edge sums to the last bit; read only under uniform links)."""
        eb = self.problem.edge_bytes[self.problem.in_edges]
        return (self.mean_lat + eb / self.link_bw).tolist()

    @cached_property
    def rank(self) -> np.ndarray:
        """:attr:`canon` as an array: the tie-break of the insertion replays and justification."""
        return np.asarray(self.canon, dtype=np.int64)

    @cached_property
    def canon(self) -> list[int]:
        """Each node's position in the canonical order: by top level, then decreasing bottom level
        under mean costs, then depth (edges on the longest path from a source: it keeps the order
        topological where zero-time nodes tie the levels), decreasing memory, and topological
        position. Ties, between nodes alike in all of these, are the input's order: schedulers
        that break ties, draw noise or scan nodes by it give the same answer under any
        renumbering of a graph without such ties. Do not mutate."""
        depth = [0] * self.n
        out_ptr, succ = self.out_ptr, self.succ
        for v in self.topo.tolist():
            d = depth[v] + 1
            for i in range(out_ptr[v], out_ptr[v + 1]):
                if d > depth[succ[i]]:
                    depth[succ[i]] = d
        key = np.lexsort((self.problem.topo_rank, -self.problem.memory, depth, -np.asarray(self.mean_bottom),
                          np.asarray(self.mean_top)))
        pos = np.empty(self.n, dtype=np.int64)
        pos[key] = np.arange(self.n)
        return pos.tolist()

    @cached_property
    def tail(self) -> list[float]:
        """Per node, the longest chain of successors after it at the fastest speed, no transfers:
        every schedule ends at least this long after the node finishes (seconds; do not mutate)."""
        fastest = (self.problem.time / max(self.speed, default=1.0)).tolist()
        bottom = bottom_levels_csr(self.topo.tolist(), self.out_ptr, self.succ, fastest, [0.0] * len(self.succ))
        return [b - f for b, f in zip(bottom, fastest)]

    # Read only by the ParDNN seed method's phases, built on first use (not by every EFT run).
    @cached_property
    def out_bytes(self) -> list[float]:
        """Bytes of each out-edge position (CSR order of ``succ``)."""
        return self.problem.edge_bytes[self.problem.out_edges].tolist()

    def compact(self) -> "Graph":
        """A copy whose per-node and per-edge sequences are :class:`array.array` buffers.

        For a forked process (:mod:`.forked`): reading a list's items writes their reference
        counts, so a child reading the parent's lists copies every page they sit on (hundreds
        of MiB at 10^6 nodes); these arrays are built from the problem's numpy buffers, which
        the child only reads. Same values to the bit; the engines index either alike.

        Returns
        -------
        Graph
        """
        c = copy.copy(self)
        pr = self.problem
        c.time = _array("d", pr.time)
        c.in_ptr, c.out_ptr = _array("q", pr.in_ptr), _array("q", pr.out_ptr)
        c.pred, c.succ = _array("q", pr.edge_src[pr.in_edges]), _array("q", pr.edge_dst[pr.out_edges])
        c.__dict__.pop("in_link", None)
        if self.uniform and self.k > 1:
            c.__dict__["in_link"] = _array("d", self.mean_lat + pr.edge_bytes[pr.in_edges] / self.link_bw)
        return c

    def comm(self, nbytes: float, a: int, b: int) -> float:
        """Transfer time of ``nbytes`` from device ``a`` to ``b`` (0 on one device).

        Parameters
        ----------
        nbytes : float
            Bytes of the tensor.
        a, b : int
            Sending and receiving device.

        Returns
        -------
        float
            ``latency + nbytes / bandwidth`` in seconds; 0 when ``a == b``.
        """
        return self.lat[a][b] + nbytes / self.bw[a][b]

    def duration(self, v: int, d: int) -> float:
        """Run time of ``v`` on device ``d``.

        Parameters
        ----------
        %(v_d)s

        Returns
        -------
        float
            ``time[v] / speed[d]`` in seconds.
        """
        return self.time[v] / self.speed[d]


_CANON: "weakref.WeakKeyDictionary[Problem, np.ndarray]" = weakref.WeakKeyDictionary()


def canonical_order(problem: Problem) -> np.ndarray:
    """The nodes in the canonical order (:attr:`Graph.canon`), a topological order computed once
    per problem (weakly cached): for code that walks a graph in topological order and should not
    depend on how its nodes are numbered.

    Parameters
    ----------
    problem : Problem
        The problem (immutable: the cache key).

    Returns
    -------
    numpy.ndarray of int64
        Node indices, first to last.
    """
    order = _CANON.get(problem)
    if order is None:
        order = _CANON[problem] = np.argsort(np.asarray(Graph(problem).canon), kind="stable")
    return order


def _array(code: str, values: np.ndarray) -> array:
    """``values`` as an :class:`array.array` of ``code`` ("d": float64, "q": int64)."""
    out = array(code)
    out.frombytes(np.ascontiguousarray(values, dtype=np.float64 if code == "d" else np.int64).tobytes())
    return out


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two float arrays hold the same numbers to the bit (so one list may stand for both)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and bool(np.array_equal(a.view(np.int64), b.view(np.int64)))


@fill_doc
def arrivals(g: Graph, v: int, devices: Sequence[int], place: Sequence[int], finish: Sequence[float]
             ) -> list[float]:
    """When all of ``v``'s inputs are on each device of ``devices`` (predecessors placed).

    Parameters
    ----------
    %(g)s
    %(v)s
    devices : sequence of int
        The candidate devices.
    place : sequence of int
        Device index of every node.
        (every predecessor of ``v`` placed).
    finish : sequence of float
        Finish time of every node (predecessors of ``v`` set), seconds.

    Returns
    -------
    list of float
        Per device of ``devices``, the latest input arrival there (0 without inputs).
    """
    lat, bw = g.lat, g.bw
    lo, hi = g.in_ptr[v], g.in_ptr[v + 1]
    pred, ib = g.pred, g.in_bytes
    out = []
    for d in devices:
        ready = 0.0
        for i in range(lo, hi):
            u = pred[i]
            pu = place[u]
            r = finish[u] + (lat[pu][d] + ib[i] / bw[pu][d])  # F(u) + c(u, v), as the evaluator adds
            if r > ready:
                ready = r
        out.append(ready)
    return out


@fill_doc
def arrival(g: Graph, v: int, d: int, place: Sequence[int], finish: Sequence[float]) -> float:
    """When all of ``v``'s inputs are on device ``d``.

    Parameters
    ----------
    %(g)s
    %(v_d)s
    place : sequence of int
        Device index of every node.
    finish : sequence of float
        Finish time of every node, seconds.

    Returns
    -------
    float
        The latest arrival of ``v``'s inputs on ``d`` (0 without inputs).
    """
    return arrivals(g, v, (d,), place, finish)[0]


def uniform_arrival(v: int, in_ptr: Sequence[int], pred: Sequence[int], link: Sequence[float],
                    place: Sequence[int], finish: Sequence[float]) -> tuple[float, int, float]:
    """When ``v``'s inputs are on each device under one uniform link: ``(r, home, a)``.

    Every input sent over the link arrives at ``finish + link`` (``link``: the edge's
    ``lat + bytes / bw``, :attr:`Graph.in_link`); ``r`` is the latest of those, sent from
    device ``home``. On every device but ``home`` the inputs are there at ``r`` (an input made
    on that device finishes before it could have arrived from elsewhere, and ``r`` is at least
    that arrival); on ``home``, at ``a <= r``: the latest arrival from the other devices or the
    latest finish of an input made on ``home``.

    Parameters
    ----------
    v : int
        Node index (every predecessor placed).
    in_ptr, pred : sequence of int
        The in-adjacency of :class:`Graph` (CSR).
    link : sequence of float
        Transfer time of each in-edge over the link (seconds; :attr:`Graph.in_link`).
    place : sequence of int
        Device index of every node.
    finish : sequence of float
        Finish time of every node, seconds.

    Returns
    -------
    tuple
        ``(r, home, a)``: ``home`` is -1 (and ``r == a``) when no input has to travel.
    """
    t1 = t2 = 0.0
    d1 = -1
    lo, hi = in_ptr[v], in_ptr[v + 1]
    for i in range(lo, hi):  # the best remote arrival (device d1) and the best from elsewhere
        u = pred[i]
        pu = place[u]
        x = finish[u] + link[i]  # the model's F(u) + c(u, v)
        if pu == d1:
            if x > t1:
                t1 = x
        elif x > t1:
            t1, t2, d1 = x, t1, pu
        elif x > t2:
            t2 = x
    a = t2
    if d1 >= 0:
        for i in range(lo, hi):  # inputs made on d1 itself arrive there when they finish
            u = pred[i]
            if place[u] == d1 and finish[u] > a:
                a = finish[u]
    return t1, d1, a


def topological_order(g: Graph, priority) -> list[int]:
    """Nodes by decreasing ``priority`` but never before a predecessor (Kahn's algorithm with a
    heap keyed by ``(-priority, canonical position)``).

    Parameters
    ----------
    g : Graph
        The problem as plain lists.
    priority : sequence of float
        Per node; higher goes first when ready.

    Returns
    -------
    list of int
        A topological order.
    """
    pr = (-np.asarray(priority, dtype=np.float64)).tolist()
    canon = g.canon
    indeg = [g.in_ptr[v + 1] - g.in_ptr[v] for v in range(g.n)]
    heap = [(pr[v], canon[v], v) for v in range(g.n) if indeg[v] == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        v = heapq.heappop(heap)[2]
        out.append(v)
        for i in range(g.out_ptr[v], g.out_ptr[v + 1]):
            w = g.succ[i]
            indeg[w] -= 1
            if indeg[w] == 0:
                heapq.heappush(heap, (pr[w], canon[w], w))
    return out
