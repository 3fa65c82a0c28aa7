"""Replay a placement and a per-device order as earliest starts, in seconds or on an integer grid.

Both exact solvers end the same way: a solver's schedule (CP-SAT's integer starts, a MILP's
float starts with its tolerance) becomes a placement plus an order of the nodes, and the
schedule users get is that order's earliest starts (a semi-active schedule: every node starts
as soon as its device is free and every input has arrived). :func:`device_order` extracts the
order, :func:`replay` is the one replay loop, and two wrappers give it its units:

* :func:`tighten_schedule`: seconds, with the model's own arithmetic (``time / speed`` and
  ``latency + bytes / bandwidth``, i.e. :meth:`Problem.duration` and
  :meth:`Problem.transfer_times`), so the replayed makespan is the evaluator's to the last bit;
* :func:`integer_schedule`: integer units of a solver's time grid (durations and transfers
  rounded up by the caller), the hint CP-SAT starts from.

:func:`schedule_tails` reads a schedule the other way: the longest path from each node to
the end of its schedule graph (the nodes where ``start + tail`` is the makespan are critical).

A semi-active replay of a valid schedule never starts a node later than that schedule did
(by induction along the order), so tightening only ever shortens a solver's answer.
"""

from __future__ import annotations

import heapq
from typing import Sequence

import numpy as np

from ..model.problem import Problem

__all__ = ["device_order", "replay", "tighten_schedule", "integer_schedule", "schedule_tails"]


def device_order(problem: Problem, key: np.ndarray, key_end: np.ndarray) -> list[int]:
    """Nodes in the order a schedule runs them, always topological.

    Parameters
    ----------
    problem : Problem
        The graph.
    key, key_end : ndarray
        Starts and finishes of any schedule (any unit). Nodes are taken by ``(start, finish,
        topological position)`` among those whose predecessors are taken, so a zero-time node
        sharing its start with a longer node of its device runs first, and a successor that a
        solver's tolerance puts a hair before its predecessor still comes after it.

    Returns
    -------
    list of int
        Node ids.
    """
    ks = np.asarray(key, dtype=np.float64).tolist()
    ke = np.asarray(key_end, dtype=np.float64).tolist()
    rk = problem.topo_rank.tolist()
    out_ptr = problem.out_ptr.tolist()
    succ = problem.edge_dst[problem.out_edges].tolist()
    indeg = np.diff(problem.in_ptr).tolist()
    heap = [(ks[v], ke[v], rk[v], v) for v in range(problem.n_nodes) if indeg[v] == 0]
    heapq.heapify(heap)
    order: list[int] = []
    while heap:
        v = heapq.heappop(heap)[3]
        order.append(v)
        for i in range(out_ptr[v], out_ptr[v + 1]):
            w = succ[i]
            indeg[w] -= 1
            if indeg[w] == 0:
                heapq.heappush(heap, (ks[w], ke[w], rk[w], w))
    return order


def replay(problem: Problem, placement: Sequence[int], order: Sequence[int], dur: Sequence,
           comm: Sequence, zero=0.0) -> list:
    """Earliest starts of ``order`` (topological) with each device running its nodes in that order.

    Parameters
    ----------
    problem : Problem
        The graph (its CSR in-edges).
    placement : sequence of int
        Device of every node.
    order : sequence of int
        Every node once, predecessors first.
    dur : sequence
        Run time of every node on its device (floats or ints: the unit of the answer).
    comm : sequence
        Transfer time of every edge under the placement (0 within a device), same unit.
    zero : float or int
        The unit's zero (``0`` keeps integer arithmetic integral).

    Returns
    -------
    list
        Start of every node.
    """
    n = problem.n_nodes
    in_ptr = problem.in_ptr.tolist()
    in_edges = problem.in_edges.tolist()
    src = problem.edge_src.tolist()
    free = [zero] * problem.n_devices
    start = [zero] * n
    finish = [zero] * n
    for v in order:
        d = placement[v]
        s = free[d]
        for i in range(in_ptr[v], in_ptr[v + 1]):
            e = in_edges[i]
            r = finish[src[e]] + comm[e]
            if r > s:
                s = r
        start[v] = s
        finish[v] = s + dur[v]
        free[d] = finish[v]
    return start


def tighten_schedule(problem: Problem, placement: np.ndarray, key: np.ndarray,
                     key_end: np.ndarray) -> np.ndarray:
    """Earliest start times (seconds) keeping, on every device, the order of a given schedule.

    Parameters
    ----------
    problem : Problem
        The problem; durations and transfers are the model's (:meth:`Problem.duration`,
        :meth:`Problem.transfer_times`).
    placement : ndarray
        Device of every node.
    key, key_end : ndarray
        Starts and finishes of any valid schedule of the placement (any unit, see
        :func:`device_order`). If ``key`` (scaled) is a valid schedule with durations and
        transfers at least the real ones, no start increases.

    Returns
    -------
    ndarray
        Start of every node in seconds.
    """
    placement = np.asarray(placement, dtype=np.int64)
    order = device_order(problem, key, key_end)
    start = replay(problem, placement.tolist(), order, problem.duration(placement).tolist(),
                   problem.transfer_times(placement).tolist())
    return np.asarray(start, dtype=np.float64)


def integer_schedule(problem: Problem, placement: np.ndarray, start_s: np.ndarray,
                     dur: np.ndarray, comm: np.ndarray) -> np.ndarray:
    """Integer starts on a solver's time grid, keeping the device order of a schedule in seconds.

    Parameters
    ----------
    problem : Problem
        The graph.
    placement : ndarray
        Device of every node.
    start_s : ndarray
        Starts (seconds) of a valid schedule of the placement: its order is kept.
    dur : ndarray
        ``n x k`` integer durations on the grid (rounded up).
    comm : ndarray
        ``m x k x k`` integer transfers on the grid (rounded up, 0 within a device).

    Returns
    -------
    ndarray
        Integer start of every node (int64): a valid schedule of the integer model.
    """
    placement = np.asarray(placement, dtype=np.int64)
    start_s = np.asarray(start_s, dtype=np.float64)
    order = device_order(problem, start_s, start_s + problem.duration(placement))
    nodes = np.arange(problem.n_nodes)
    dur_v = np.asarray(dur, dtype=np.int64)[nodes, placement].tolist()
    comm_e = (np.asarray(comm, dtype=np.int64)[np.arange(problem.n_edges), placement[problem.edge_src],
                                               placement[problem.edge_dst]].tolist() if problem.n_edges else [])
    return np.asarray(replay(problem, placement.tolist(), order, dur_v, comm_e, zero=0), dtype=np.int64)


def schedule_tails(problem: Problem, place: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Longest path from each node's start to the end of the schedule graph.

    The schedule graph has the precedence edges (weighted by the transfer the placement
    implies) and, on every device, an edge from each node to the next one it runs.

    Parameters
    ----------
    problem : Problem
        The problem.
    place : ndarray
        Device of every node.
    start : ndarray
        Start of every node in seconds (a valid schedule of ``place``).

    Returns
    -------
    ndarray
        ``tail[v]`` in seconds: ``start[v] + tail[v]`` is the makespan on critical nodes.
    """
    n = problem.n_nodes
    dur = problem.duration(place)
    comm = problem.transfer_times(place)
    order = np.lexsort((problem.topo_rank, start + dur, start))
    nxt = np.full(n, -1, dtype=np.int64)
    last = np.full(problem.n_devices, -1, dtype=np.int64)
    for v in order[::-1].tolist():
        nxt[v] = last[place[v]]
        last[place[v]] = v
    tail = np.zeros(n)
    out_ptr, out_e = problem.out_ptr, problem.out_edges
    dst = problem.edge_dst
    for v in order[::-1].tolist():
        t = tail[nxt[v]] if nxt[v] >= 0 else 0.0
        es = out_e[out_ptr[v]:out_ptr[v + 1]]
        if es.size:
            t = max(t, float((comm[es] + tail[dst[es]]).max()))
        tail[v] = dur[v] + t
    return tail
