"""Phase 1, *slicing*: cut the graph into heavy paths (ParDNN's clusters).

ParDNN (Qararyah, Wahib, Dikbayir, Belviranli, Unat, Parallel Computing 2021) slices
the graph into paths: the heaviest path by bottom level (computation plus
communication) is the *critical path*; the heaviest paths of what remains follow. The
first ``k`` paths are the *primary clusters* (one per device), the rest *secondary
clusters* that phase 2 merges and maps.

Our levels: the bottom level of a node uses mean run times over the devices and the
mean transfer time of a cut edge (nothing is placed yet). Levels are computed once on
the whole graph; a path then starts at the unsliced node of highest bottom level and
follows, at each step, the unsliced successor with the heaviest transfer + bottom
level. Because bottom levels decrease along every edge, a path's first node has no
unsliced predecessor, so each path is the heaviest path of the remaining graph *as
measured by the original levels*; recomputing levels after every path (as the paper
does) would cost O(V (V + E)), so we compute them once and leave what this
approximation misses to the schedule-aware phases 3 and 6. Every node and edge is visited a
constant number of times: O((V + E) + V log V) overall.
"""

from __future__ import annotations

import numpy as np

from ..._docstrings import fill_doc
from .schedule import Graph

__all__ = ["levels", "slice_paths"]


def levels(g: Graph) -> tuple[list[float], list[float]]:
    """Top and bottom levels with mean run times and mean transfer times.

    ``top[v]``: longest path (computation + communication) ending just before ``v``;
    ``bottom[v]``: longest path starting at ``v`` (its own run time included).

    Parameters
    ----------
    g : Graph
        The problem as plain lists (:class:`optpart.schedule.graph.Graph`); the levels are
        computed once per graph and shared with HEFT's order and m-ETF's priority.

    Returns
    -------
    tuple of list of float
        ``(top, bottom)`` per node, seconds (fresh lists the caller may change).
    """
    return list(g.mean_top), list(g.mean_bottom)  # computed once per graph (copies)


@fill_doc
def slice_paths(g: Graph, bottom: list[float] | None = None) -> tuple[list[int], list[list[int]]]:
    """Slice the graph into paths, heaviest first.

    Parameters
    ----------
    %(g)s
    bottom : list of float, optional
        Bottom level of every node under mean costs (seconds; :func:`levels` when None).

    Returns
    -------
    tuple
        ``(cluster_of, paths)``: the path index of every node and the node lists of the
        paths in slicing order (``paths[0]`` is the critical path).
    """
    n = g.n
    if bottom is None:
        bottom = levels(g)[1]
    out_ptr, succ = g.out_ptr, g.succ
    cm = g.out_comm_mean_array.tolist()  # read for a pass, not kept (61 MiB at 10^6 nodes)
    cluster = [-1] * n
    paths: list[list[int]] = []
    order = np.lexsort((g.rank, -np.asarray(bottom, dtype=np.float64))).tolist() if n else []
    heaviest = _heaviest_successor(g, bottom)
    for s in order:
        if cluster[s] >= 0:
            continue
        c = len(paths)
        path = [s]
        cluster[s] = c
        v = s
        while True:
            nxt = heaviest[v]
            if nxt < 0:  # a sink
                break
            if cluster[nxt] >= 0:  # the heaviest is taken: the heaviest of the others still free
                best, nxt = -1.0, -1
                for i in range(out_ptr[v], out_ptr[v + 1]):
                    w = succ[i]
                    if cluster[w] < 0:
                        x = cm[i] + bottom[w]
                        if x > best:
                            best, nxt = x, w
                if nxt < 0:
                    break
            cluster[nxt] = c
            path.append(nxt)
            v = nxt
        paths.append(path)
    return cluster, paths


def _heaviest_successor(g: Graph, bottom: list[float]) -> list[int]:
    """Per node, the successor with the largest transfer + bottom level (the first such in CSR
    order, as a scan keeping strict improvements finds it); -1 for a sink. numpy, O(V + E)."""
    p = g.problem
    n = g.n
    out = np.full(n, -1, dtype=np.int64)
    m = len(g.succ)
    if m == 0:
        return out.tolist()
    succ = p.edge_dst[p.out_edges]
    x = g.out_comm_mean_array + np.asarray(bottom, dtype=np.float64)[succ]
    ptr = p.out_ptr
    deg = np.diff(ptr)
    has = np.flatnonzero(deg > 0)
    best = np.maximum.reduceat(x, ptr[has])  # ptr[has] strictly increases: one segment per node
    pos = np.arange(m)
    hit = np.where(x == np.repeat(best, deg[has]), pos, m)
    out[has] = succ[np.minimum.reduceat(hit, ptr[has])]
    return out.tolist()
