"""Schedule a fixed placement: insertion in a given order, and double justification.

* :func:`insertion_times`: the one insertion replay. Nodes are taken in a given order
  (topological for the direction) and each goes into the earliest idle gap of its
  device, found by :class:`~optpart.schedule.gaps.GapLine`, after its inputs arrived
  (HEFT's insertion policy, Topcuoglu et al., IEEE TPDS 2002, with the placement
  fixed). With ``reverse=True`` the reversed graph is scheduled (successors act as
  predecessors); :func:`justify` mirrors the times.
* :func:`justify`: double justification (Valls, Ballestin, Quintanilla, "Justification
  and RCPSP: a technique that pays", EJOR 165(2), 2005): schedule the reversed graph in
  decreasing finish order, then the graph again in increasing order of those starts.
  The better of old and new is kept, so it never lengthens a schedule.
* :func:`schedule_placement`: bottom-level order, insertion, justification: what the
  heuristic returns for a placement.
* :func:`insertion_schedule`: the same replay on a :class:`~optpart.model.problem.Problem`
  with optional custom durations and transfers (the public, array-in array-out form;
  exact solvers may use it to replay their order).

All give valid schedules under the delay model (docs/model.md section 2), zero-duration
nodes included (see :mod:`optpart.schedule.gaps`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .._docstrings import fill_doc
from ..model.paths import bottom_levels_csr, priority_order
from ..model.problem import Problem
from .gaps import GapLine
from .graph import Graph, no_gc

__all__ = ["insertion_times", "insertion_schedule", "justify", "schedule_placement", "placement_levels",
           "edge_comm"]


@fill_doc
def edge_comm(g: Graph, place: Sequence[int], reverse: bool = False) -> list[float]:
    """Transfer time per in-edge CSR position (out-edge position with ``reverse``) under ``place``.

    Parameters
    ----------
    %(g_place)s
    reverse : bool
        Per out-edge position instead (the backward pass of justification).

    Returns
    -------
    list of float
        Seconds per edge position; 0 where both ends share a device.
    """
    p = g.problem
    pl = np.asarray(place, dtype=np.int64)
    edges = p.out_edges if reverse else p.in_edges
    a = pl[p.edge_src[edges]]
    b = pl[p.edge_dst[edges]]
    lat = g.lat_array
    bw = g.bw_array
    if lat.size == 0 or edges.size == 0:
        return [0.0] * int(edges.size)
    return (lat[a, b] + p.edge_bytes[edges] / bw[a, b]).tolist()


def _durations(g: Graph, place: Sequence[int]) -> list[float]:
    """Run time of every node on its device, ``time / speed`` as :meth:`Problem.duration`
    (``g.time`` itself when every speed is 1: ``x / 1`` is ``x``; do not mutate)."""
    speed = g.speed
    if speed.count(1.0) == len(speed):
        return g.time
    return (g.problem.time / np.asarray(speed, dtype=np.float64)[np.asarray(place, dtype=np.int64)]).tolist()


def _replay(order: Sequence[int], place: Sequence[int], dur: Sequence[float], ptr: Sequence[int],
            nbr: Sequence[int], comm: Sequence[float], n: int, k: int, link: bool = False
            ) -> tuple[list[float], list[float]]:
    with no_gc():
        return _replay_loop(order, place, dur, ptr, nbr, comm, n, k, link)


def _replay_loop(order, place, dur, ptr, nbr, comm, n: int, k: int, link: bool = False
                 ) -> tuple[list[float], list[float]]:
    # ``link``: ``comm`` holds the one uniform link's time of every edge (:attr:`Graph.in_link`),
    # paid only between devices (what :func:`edge_comm` gives, without a list per placement)
    # One timeline per device that runs a node (made on first use: O(used devices), not O(k)).
    lines = {d: GapLine() for d in set(place)} if k > 64 else [GapLine() for _ in range(k)]
    start = [0.0] * n
    finish = [0.0] * n
    for v in order:
        ready = 0.0
        pv = place[v]
        if link:
            for i in range(ptr[v], ptr[v + 1]):
                u = nbr[i]
                r = finish[u] + comm[i] if place[u] != pv else finish[u]
                if r > ready:
                    ready = r
        else:
            for i in range(ptr[v], ptr[v + 1]):
                r = finish[nbr[i]] + comm[i]
                if r > ready:
                    ready = r
        line = lines[pv]
        d = dur[v]
        end = line.end
        if ready >= end and d > 0.0:  # the common case, inlined: start at once after the end
            s = ready
            f = line.end = ready + d
            if ready > end:
                line.add_gap(end, ready)  # what reserve(ready, f) does past the end
        elif d > 0.0 and (not line.bend or ready >= line.bend[-1]):
            s = end  # inside the last busy stretch, no gap ahead: at the end (earliest_start's answer)
            f = line.end = end + d
        else:
            s = line.earliest_start(ready, d)
            f = s + d
            line.reserve(s, f)
        start[v] = s
        finish[v] = f
    return start, finish


@fill_doc
def insertion_times(g: Graph, place: Sequence[int], order: Sequence[int], reverse: bool = False
                    ) -> tuple[list[float], list[float]]:
    """``(start, finish)`` lists of the insertion schedule of ``place`` taking nodes in ``order``.

    Parameters
    ----------
    %(g_place)s
    order : sequence of int
        A topological order (reverse topological with ``reverse``).
    reverse : bool
        Schedule the reversed graph (justification's backward pass).

    Returns
    -------
    tuple of list of float
        ``(start, finish)`` per node, seconds.
    """
    ptr, nbr = (g.out_ptr, g.succ) if reverse else (g.in_ptr, g.pred)
    return _replay(order, place, _durations(g, place), ptr, nbr, edge_comm(g, place, reverse), g.n, g.k)


def insertion_schedule(problem: Problem, placement, order, duration: np.ndarray | None = None,
                       transfer: np.ndarray | None = None) -> np.ndarray:
    """Start times for ``placement`` when nodes are taken in ``order`` (topological), each
    into the earliest idle gap of its device after its data arrived. ``duration`` (per
    node) and ``transfer`` (per edge id) default to the problem's under the placement.

    Parameters
    ----------
    problem : Problem
    placement : array_like of int
        Device of every node.
    order : array_like of int
        A topological order.
    duration : numpy.ndarray, optional
        Run time per node (default: the problem's under ``placement``).
    transfer : numpy.ndarray, optional
        Transfer time per edge id (default: the problem's under ``placement``).

    Returns
    -------
    numpy.ndarray
        Start time of every node (float64, seconds).
    """
    placement = np.asarray(placement, dtype=np.int64)
    dur = (problem.duration(placement) if duration is None else np.asarray(duration, dtype=np.float64)).tolist()
    comm = problem.transfer_times(placement) if transfer is None else np.asarray(transfer, dtype=np.float64)
    start, _ = _replay(np.asarray(order).tolist(), placement.tolist(), dur, problem.in_ptr.tolist(),
                       problem.edge_src[problem.in_edges].tolist(), comm[problem.in_edges].tolist(),
                       problem.n_nodes, problem.n_devices)
    return np.asarray(start, dtype=np.float64)


@fill_doc
def placement_levels(g: Graph, place: Sequence[int]) -> list[float]:
    """Bottom levels under ``place`` (run time on its device, transfers between devices).

    Parameters
    ----------
    %(g_place)s

    Returns
    -------
    list of float
        Per node, the longest path to a sink, seconds (its own run time included).
    """
    return bottom_levels_csr(g.topo.tolist(), g.out_ptr, g.succ, _durations(g, place),
                             edge_comm(g, place, reverse=True))


def _makespan(f: Sequence[float]) -> float:
    return max(f) if len(f) else 0.0


@fill_doc
def justify(g: Graph, place: Sequence[int], start: Sequence[float], finish: Sequence[float], rounds: int = 1
            ) -> tuple[list[float], list[float], float]:
    """Double justification, ``rounds`` times at most; the best of the input and the results.

    Parameters
    ----------
    %(g_place)s
    start, finish : sequence of float
        The schedule to justify, seconds.
    rounds : int
        At most this many forward-backward rounds (stops when one gains nothing).

    Returns
    -------
    tuple
        ``(start, finish, makespan)`` of the best schedule seen (the input included).
    """
    best = (list(start), list(finish), _makespan(finish))
    rank = g.rank
    dur = _durations(g, place)
    # forward: under uniform links the graph's per-edge link times, paid between devices (no
    # list per placement: 61 MiB at 10^6 nodes)
    fwd = g.in_link if g.uniform else edge_comm(g, place)
    bwd = edge_comm(g, place, reverse=True)
    for _ in range(rounds):
        _s, f, ms = best
        # right-justify: the reversed graph, latest finish first (ties: later topological position first)
        order = np.lexsort((-rank, -np.asarray(f))).tolist()
        _rs, rf = _replay(order, place, dur, g.out_ptr, g.succ, bwd, g.n, g.k)
        del _rs, order
        # left-justify: forward in increasing order of the right-justified starts (= -rf)
        order = np.lexsort((rank, -np.asarray(rf))).tolist()
        del rf
        s2, f2 = _replay(order, place, dur, g.in_ptr, g.pred, fwd, g.n, g.k, link=g.uniform)
        del order
        ms2 = _makespan(f2)
        if ms2 < ms - 1e-12 * max(1.0, ms):
            best = (s2, f2, ms2)
        else:
            break
    return best


@fill_doc
def schedule_placement(g: Graph, place: Sequence[int], justify_rounds: int = 1
                       ) -> tuple[list[float], list[float], float]:
    """Bottom-level order, insertion, then ``justify_rounds`` rounds of justification.

    Parameters
    ----------
    %(g_place)s
    justify_rounds : int
        Rounds of :func:`justify` after the insertion schedule (0: none).

    Returns
    -------
    tuple
        ``(start, finish, makespan)``, seconds.
    """
    order = np.lexsort((g.rank, -np.asarray(placement_levels(g, place)))).tolist()  # ties: canonical (topological)
    s, f = insertion_times(g, place, order)
    if justify_rounds > 0:
        return justify(g, place, s, f, justify_rounds)
    return s, f, _makespan(f)
