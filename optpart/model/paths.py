"""Longest paths in the DAG: top and bottom levels under any node and edge weights.

The bottom level of ``v`` is the weight of the heaviest path that starts at ``v``:
``bl(v) = w(v) + max over out-edges (v, x) of (c(v, x) + bl(x))``. It is the
canonical schedule's priority (weights: run times and transfers under a placement),
HEFT's upward rank (mean costs; Topcuoglu et al. 2002) and ParDNN's slicing key.
The top level is the weight of the heaviest path that ends just before ``v``:
``tl(v) = max over in-edges (u, v) of (tl(u) + w(u) + c(u, v))``; with zero edge weights
``max(tl + w)`` is the critical-path lower bound. One sweep of a topological order,
O(V + E), plain loops over integer ids. Integer weights give integer levels.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

if TYPE_CHECKING:
    from .problem import Problem

__all__ = ["bottom_levels_csr", "bottom_levels_by_edge", "top_levels_csr", "mean_costs", "upward_rank",
           "priority_order", "critical_path_nodes"]


def bottom_levels_csr(topo: Sequence[int], out_ptr: Sequence[int], succ: Sequence[int],
                      node_weight: Sequence[float], out_weight: Sequence[float]) -> list[float]:
    """Bottom levels from CSR lists: ``succ[i]``/``out_weight[i]`` for ``i`` in
    ``out_ptr[v]:out_ptr[v+1]`` are the successors of ``v`` and their edge weights.

    Parameters
    ----------
    topo : sequence of int
        A topological order of the nodes.
    out_ptr : sequence of int
        CSR offsets, length ``n + 1``.
    succ : sequence of int
        Successor of each CSR slot.
    node_weight : sequence of float
        Weight per node (a run time in seconds).
    out_weight : sequence of float
        Weight per CSR slot (the edge's transfer time in seconds).

    Returns
    -------
    list of float
        ``bl(v) = w(v) + max over successors (c(v, w) + bl(w))``: the longest path from
        ``v`` to a sink, ``v`` included. Plain lists: the loop is pure Python and O(V + E).
    """
    bl = list(node_weight)
    for v in reversed(topo):
        best = 0
        for i in range(out_ptr[v], out_ptr[v + 1]):
            x = out_weight[i] + bl[succ[i]]
            if x > best:
                best = x
        bl[v] = node_weight[v] + best
    return bl


def bottom_levels_by_edge(problem: Problem, node_weight: np.ndarray, edge_weight: np.ndarray) -> np.ndarray:
    """Bottom levels of ``problem``'s nodes; ``edge_weight`` is indexed by edge id.

    Parameters
    ----------
    problem : Problem
        The graph (its topological order and CSR adjacency).
    node_weight : numpy.ndarray, shape (n_nodes,)
        Weight per node (seconds).
    edge_weight : numpy.ndarray, shape (n_edges,)
        Weight per edge id (seconds).

    Returns
    -------
    numpy.ndarray of float64, shape (n_nodes,)
        The bottom level of every node (see :func:`bottom_levels_csr`).
    """
    levels = bottom_levels_csr(problem.topo.tolist(), problem.out_ptr.tolist(),
                               problem.edge_dst[problem.out_edges].tolist(),
                               np.asarray(node_weight, dtype=np.float64).tolist(),
                               np.asarray(edge_weight, dtype=np.float64)[problem.out_edges].tolist())
    return np.asarray(levels, dtype=np.float64)


def top_levels_csr(topo: Sequence[int], out_ptr: Sequence[int], succ: Sequence[int],
                   node_weight: Sequence[float], out_weight: Sequence[float] | None = None) -> list[float]:
    """Top levels from the same CSR lists; ``out_weight`` None means free edges.

    Parameters
    ----------
    topo : sequence of int
        A topological order; sources first.
    out_ptr, succ : sequence of int
        CSR out-adjacency: successors of ``v`` are ``succ[out_ptr[v]:out_ptr[v+1]]``.
    node_weight : sequence of float
        Weight per node (seconds).
    out_weight : sequence of float, optional
        Weight per CSR slot (seconds); None: edges cost nothing.

    Returns
    -------
    list of float
        ``top(v)``: the longest path from a source to the start of ``v`` (``v`` excluded).
    """
    top = [0] * len(node_weight)
    if out_weight is None:  # free edges (the critical-path bound): successors read as a slice
        for v in topo:
            tv = top[v] + node_weight[v]
            for w in succ[out_ptr[v]:out_ptr[v + 1]]:
                if tv > top[w]:
                    top[w] = tv
        return top
    for v in topo:
        tv = top[v] + node_weight[v]
        for i in range(out_ptr[v], out_ptr[v + 1]):
            w = succ[i]
            x = tv + out_weight[i]
            if x > top[w]:
                top[w] = x
    return top


def mean_costs(problem: Problem) -> tuple[np.ndarray, np.ndarray]:
    """HEFT's average costs: mean run time per node and mean transfer time per edge.

    The node's mean is over the devices it may use of ``time / speed``; the edge's mean
    is over ordered pairs of distinct devices of ``latency + bytes / bandwidth``
    (Topcuoglu, Hariri, Wu, IEEE TPDS 13(3), 2002, section 4.1, which averages latency
    and transfer rate). With one device communication is free. The one mean-cost
    definition: HEFT, m-ETF and the heuristic's ranks all use it.

    Parameters
    ----------
    problem : Problem
        The problem (times, allowed devices, speeds, links).

    Returns
    -------
    wbar : numpy.ndarray of float64, shape (n_nodes,)
        Mean run time of each node over its allowed devices (seconds).
    cbar : numpy.ndarray of float64, shape (n_edges,)
        Mean transfer time of each edge over ordered pairs of distinct devices (seconds).
    """
    k = problem.n_devices
    allowed = problem.allowed
    inv_speed = 1.0 / problem.device_speed
    if allowed.all():  # no restriction: one mean for every node (no n x k product)
        wbar = problem.time * float(inv_speed.sum() / max(k, 1))
    else:
        counts = allowed.sum(axis=1)
        wbar = problem.time * (allowed @ inv_speed) / np.maximum(counts, 1)
    if k < 2:
        return wbar, np.zeros(problem.n_edges)
    off = ~np.eye(k, dtype=bool)
    with np.errstate(divide="ignore"):
        inv_bw = 1.0 / problem.bandwidth
    mean_lat = float(problem.latency[off].mean())
    mean_inv_bw = float(inv_bw[off].mean())
    return wbar, mean_lat + problem.edge_bytes * mean_inv_bw


def upward_rank(problem: Problem) -> np.ndarray:
    """HEFT's upward rank, ``rank(v) = wbar(v) + max over successors w of (cbar(v, w) + rank(w))``:
    the bottom level under :func:`mean_costs` (the one rank definition); O(V + E).

    Parameters
    ----------
    problem : Problem
        The problem.

    Returns
    -------
    numpy.ndarray of float64, shape (n_nodes,)
        The upward rank of every node (seconds).
    """
    return bottom_levels_by_edge(problem, *mean_costs(problem))


def priority_order(problem: Problem, priority: np.ndarray) -> np.ndarray:
    """Nodes by decreasing ``priority``, ties by topological position.

    For bottom levels (``bl(u) >= bl(w)`` on every edge) this is a topological order
    even with zero-time nodes and free transfers.

    Parameters
    ----------
    problem : Problem
        The graph (its ``topo_rank``: each node's position in the topological order).
    priority : array_like of float, shape (n_nodes,)
        Priority per node; higher goes first.

    Returns
    -------
    numpy.ndarray of int64, shape (n_nodes,)
        Node indices, highest priority first.
    """
    return np.lexsort((problem.topo_rank, -np.asarray(priority, dtype=np.float64)))


def critical_path_nodes(problem: Problem, min_dur: np.ndarray) -> tuple[list, list]:
    """The longest path by ``min_dur`` (communication 0): its nodes and the edges between them.

    Parameters
    ----------
    problem : Problem
        The problem (its DAG).
    min_dur : ndarray
        Each node's duration (any unit; seconds here).

    Returns
    -------
    tuple of (list of int, list of int)
        The path's node ids in order and the ids of its ``L - 1`` edges.
    """
    n = problem.n_nodes
    if n == 0:
        return [], []
    md = np.asarray(min_dur, dtype=np.float64).tolist()
    in_ptr = problem.in_ptr.tolist()
    in_edges = problem.in_edges.tolist()
    src = problem.edge_src.tolist()
    top = [0.0] * n
    via = [-1] * n  # the in-edge that gives the top level
    for v in problem.topo.tolist():
        best, arg = 0.0, -1
        for i in range(in_ptr[v], in_ptr[v + 1]):
            e = in_edges[i]
            val = top[src[e]] + md[src[e]]
            if val > best or arg < 0 and val >= best:
                best, arg = val, e
        top[v], via[v] = best, arg
    end = max(range(n), key=lambda v: (top[v] + md[v], -v))
    nodes, edges = [end], []
    while via[nodes[-1]] >= 0:
        e = via[nodes[-1]]
        edges.append(e)
        nodes.append(src[e])
    return nodes[::-1], edges[::-1]
