"""Phase 1, *slicing*: linear clustering by bottom level (ParDNN's primary and secondary paths).

ParDNN (Qararyah, Wahib, Dikbayir, Belviranli, Unat, "A computational-graph
partitioning method for training memory-constrained DNNs", Parallel Computing 105,
2021, section 4.1) cuts the graph into *linear clusters* (paths). We follow the
authors' C++ port (ParCoreLab/pardnn, ``Graph::obtain_linear_clusters``):

1. **Primary clusters** (``k`` of them, one per device). Bottom levels ``b(v) = w(v) +
   max over successors (c(v, x) + b(x))`` on the whole graph; the first path starts at
   the node of highest ``b`` and repeatedly steps to the unclustered successor of highest
   ``b`` until none is left. After each primary path the bottom levels are *recomputed
   on the remaining graph* (the unclustered nodes and the edges among them; the "K-path
   recomputation"), and the next primary path starts at the remaining node of highest
   recomputed level and follows the recomputed levels.
2. **Secondary clusters** (the rest). Once the ``k`` primaries exist, levels are computed
   once more with the primaries *clustered*: an edge inside one primary costs nothing.
   Every unclustered node is ranked by its weighted level ``t(v) + b(v)`` (top plus
   bottom level: the heaviest path through it); a secondary path starts at the
   unclustered node of highest weighted level and follows the successor of highest
   clustered bottom level, clustered or not, stopping when that successor already
   belongs to a cluster (it does not climb to the node's predecessors).

Costs: ``w`` is the mean run time over the devices a node may use and ``c`` the mean
transfer time of the edge (:func:`optpart.model.paths.mean_costs`), since nothing is placed
yet. Ties go to the lower topological position. Time: ``O(k (V + E) + V log V)``
(``k + 2`` level sweeps and one heap).

Differences from the C++ port (see docs/heuristic.md, "The seed method"): the port
stops a path at a node of level 0 and so leaves zero-time operators unclustered (it
reads integer durations of at least 1); here every node joins a cluster. The port
breaks ties by hash-map order; here by topological position.
"""

from __future__ import annotations

import heapq
from typing import Sequence

import numpy as np

from ..._docstrings import fill_doc
from ...model.paths import bottom_levels_csr, top_levels_csr
from ...schedule import Graph

__all__ = ["linear_clusters", "clustered_levels"]

_NEG = float("-inf")


@fill_doc
def clustered_levels(g: Graph, cluster: Sequence[int]) -> tuple[list[float], list[float]]:
    """Top and bottom levels when an edge inside one cluster is free.

    Parameters
    ----------
    %(g)s
    cluster : sequence of int
        Cluster of every node; ``-1`` means no cluster (its edges always cost).

    Returns
    -------
    (top, bottom) : tuple of lists
        As :func:`levels`, with the transfers inside a cluster set to zero.
    """
    out_ptr, succ, cm, mt = g.out_ptr, g.succ, g.out_comm_mean, g.mean_time
    cl = np.asarray(cluster, dtype=np.int64)
    src = np.repeat(np.arange(g.n), np.diff(np.asarray(out_ptr, dtype=np.int64)))
    dst = np.asarray(succ, dtype=np.int64)
    same = (cl[src] == cl[dst]) & (cl[src] >= 0)
    w = np.where(same, 0.0, np.asarray(cm, dtype=np.float64)).tolist()
    topo = g.topo.tolist()
    return top_levels_csr(topo, out_ptr, succ, mt, w), bottom_levels_csr(topo, out_ptr, succ, mt, w)


def _residual_bottom(g: Graph, topo: list[int], visited: list[bool]) -> list[float]:
    """Bottom levels of the unclustered subgraph (edges into clustered nodes dropped)."""
    succ, cm = g.succ, g.out_comm_mean
    w = [_NEG if visited[succ[i]] else cm[i] for i in range(len(succ))]
    return bottom_levels_csr(topo, g.out_ptr, succ, g.mean_time, w)


def _follow(g: Graph, v: int, key: list[float], visited: list[bool], rank: list[int],
            into_clustered: bool) -> int:
    """The successor of ``v`` with the highest ``key`` (lowest topological position on ties),
    among the unclustered ones unless ``into_clustered``; -1 when there is none."""
    out_ptr, succ = g.out_ptr, g.succ
    best, nxt = _NEG, -1
    for i in range(out_ptr[v], out_ptr[v + 1]):
        w = succ[i]
        if not into_clustered and visited[w]:
            continue
        x = key[w]
        if x > best or (x == best and nxt >= 0 and rank[w] < rank[nxt]):
            best, nxt = x, w
    return nxt


@fill_doc
def linear_clusters(g: Graph, k: int | None = None) -> tuple[list[list[int]], int]:
    """Slice the graph into primary and secondary paths (see the module docstring).

    Parameters
    ----------
    %(g)s
    k : int, optional
        Number of primary clusters (default: the number of devices).

    Returns
    -------
    (paths, n_primary) : tuple
        The node lists of every path in slicing order, each in path order (a chain of
        edges), and how many of the first paths are primaries (``min(k, paths)``).
        Every node is in exactly one path.
    """
    n = g.n
    k = g.k if k is None else k
    if n == 0:
        return [], 0
    topo = g.topo.tolist()
    rank = g.canon
    visited = [False] * n
    paths: list[list[int]] = []
    bottom = bottom_levels_csr(topo, g.out_ptr, g.succ, g.mean_time, g.out_comm_mean)
    left = n
    # 1. primaries, with the K-path recomputation of the bottom levels
    while len(paths) < k and left > 0:
        s = min((v for v in range(n) if not visited[v]), key=lambda v: (-bottom[v], rank[v]))
        path = []
        v = s
        while v >= 0:
            visited[v] = True
            path.append(v)
            v = _follow(g, v, bottom, visited, rank, into_clustered=False)
        paths.append(path)
        left -= len(path)
        if left > 0:
            bottom = _residual_bottom(g, topo, visited)
    n_primary = len(paths)
    if left == 0:
        return paths, n_primary
    # 2. secondaries, by weighted level with the primaries clustered
    cluster = [-1] * n
    for c, path in enumerate(paths):
        for v in path:
            cluster[v] = c
    top, bottom = clustered_levels(g, cluster)
    heap = [(-(top[v] + bottom[v]), rank[v], v) for v in range(n) if not visited[v]]
    heapq.heapify(heap)
    while heap:
        v = heapq.heappop(heap)[2]
        if visited[v]:
            continue
        path = []
        while v >= 0 and not visited[v]:
            visited[v] = True
            path.append(v)
            v = _follow(g, v, bottom, visited, rank, into_clustered=True)
        paths.append(path)
    return paths, n_primary
