"""The DAG as integer arrays: edge checks, CSR adjacency, Kahn's order, and a cycle report.

Edges ``0..m-1`` run ``src[e] -> dst[e]``. The out-edges of ``v`` are
``out_edges[out_ptr[v]:out_ptr[v+1]]`` and its in-edges ``in_edges[in_ptr[v]:in_ptr[v+1]]``
(edge ids, in edge order). The topological order is Kahn's (A. B. Kahn, "Topological
sorting of large networks", CACM 5(11), 1962) with a FIFO queue seeded with the sources
in index order: deterministic, O(V + E).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import numpy as np

from ..errors import ProblemError
from .columns import check_sum

__all__ = ["Adjacency", "check_edges", "adjacency", "kahn_order", "is_kahn_order", "node_on_cycle",
           "topological_order"]


class Adjacency(NamedTuple):
    """CSR adjacency over edge ids (stable in edge order)."""

    out_edges: np.ndarray
    out_ptr: np.ndarray
    in_edges: np.ndarray
    in_ptr: np.ndarray


def check_edges(edge_src: Any, edge_dst: Any, edge_bytes: Any, node_ids: Sequence[str]
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The edge arrays, checked: endpoints in range, bytes finite >= 0, no loop, no duplicate.

    Parameters
    ----------
    edge_src, edge_dst : array_like of int
        Node indices of each edge's ends.
    edge_bytes : array_like of float or None
        Bytes per edge (None: all 0).
    node_ids : sequence of str
        The node ids, to name the offending edge.

    Returns
    -------
    tuple of numpy.ndarray
        ``(src, dst, bytes)`` as int64, int64, float64.
    """
    n = len(node_ids)
    try:
        src = np.asarray(edge_src, dtype=np.int64).reshape(-1)
        dst = np.asarray(edge_dst, dtype=np.int64).reshape(-1)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ProblemError(f"edge endpoints must be node indices (integers): {exc}") from None
    if src.shape != dst.shape:
        raise ProblemError(f"edge_src has {src.size} entries but edge_dst has {dst.size}")
    m = src.size
    if edge_bytes is None:
        eb = np.zeros(m)
    else:
        try:
            eb = np.asarray(edge_bytes, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError, OverflowError) as exc:
            raise ProblemError(f"edge bytes must be numbers: {exc}") from None
        if eb.shape != (m,):
            raise ProblemError(f"edge_bytes has {eb.size} entries for {m} edges")
    for arr, what in ((src, "source"), (dst, "destination")):
        bad = (arr < 0) | (arr >= n)
        if bad.any():
            e = int(np.flatnonzero(bad)[0])
            raise ProblemError(f"edge {e} has {what} index {int(arr[e])}, outside 0..{n - 1}")
    name = lambda e: f"edge '{node_ids[src[e]]}' -> '{node_ids[dst[e]]}'"  # noqa: E731
    bad = ~np.isfinite(eb) | (eb < 0)
    if bad.any():
        e = int(np.flatnonzero(bad)[0])
        raise ProblemError(f"{name(e)} has bytes={float(eb[e])!r}; it must be a finite number >= 0")
    check_sum(eb, "edge field 'bytes'", name)
    loops = src == dst
    if loops.any():
        e = int(np.flatnonzero(loops)[0])
        raise ProblemError(f"cycle: node '{node_ids[src[e]]}' has an edge to itself")
    if m:
        key = src * n + dst
        order = np.argsort(key, kind="stable")
        dup = np.flatnonzero(key[order][1:] == key[order][:-1])
        if dup.size:
            raise ProblemError(f"duplicate {name(int(order[dup[0] + 1]))} (a pair of nodes has at most one edge)")
    return src, dst, eb


def adjacency(src: np.ndarray, dst: np.ndarray, n: int) -> Adjacency:
    """CSR adjacency of the edges ``src -> dst`` over ``n`` nodes.

    Parameters
    ----------
    src, dst : numpy.ndarray
        Checked edge ends (:func:`check_edges`).
    n : int
        The node count.

    Returns
    -------
    Adjacency
        Out- and in-edge CSR arrays.
    """
    out_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=out_ptr[1:])
    in_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=in_ptr[1:])
    return Adjacency(np.argsort(src, kind="stable"), out_ptr, np.argsort(dst, kind="stable"), in_ptr)


def _kahn(dst: np.ndarray, adj: Adjacency) -> list[int]:
    """The nodes Kahn's algorithm removes, in its order (all of them unless there is a cycle).

    The loop walks ``order`` while appending to it (the list is the queue), over plain
    Python lists: the fastest pure-Python form (about 2 s for 10^6 nodes).
    """
    indeg = np.diff(adj.in_ptr).tolist()
    out_ptr = adj.out_ptr.tolist()
    succ = dst[adj.out_edges].tolist()
    order = [v for v, d in enumerate(indeg) if d == 0]
    append = order.append
    for v in order:  # grows while walked: a FIFO queue
        for w in succ[out_ptr[v]:out_ptr[v + 1]]:
            d = indeg[w] - 1
            indeg[w] = d
            if not d:
                append(w)
    return order


def kahn_order(dst: np.ndarray, adj: Adjacency) -> list[int] | None:
    """Kahn's order, or None when the graph has a cycle.

    Parameters
    ----------
    dst : numpy.ndarray
        Edge destinations (int64, one per edge).
    adj : Adjacency
        The graph's CSR adjacency.

    Returns
    -------
    list of int or None
        Every node index once, each after its predecessors; None when a cycle keeps
        some node from being removed.
    """
    order = _kahn(dst, adj)
    return order if len(order) == adj.in_ptr.size - 1 else None


def node_on_cycle(src: np.ndarray, dst: np.ndarray, adj: Adjacency) -> int:
    """A node that lies on a cycle of a graph that has one.

    Nodes Kahn's algorithm cannot remove each keep a predecessor that is also left;
    walking predecessors must revisit a node, and that node lies on a cycle.

    Parameters
    ----------
    src, dst : numpy.ndarray
        Edge ends of a graph that :func:`kahn_order` found cyclic.
    adj : Adjacency
        Its CSR adjacency; in-edges are walked backwards from a node left over.

    Returns
    -------
    int
        The index of a node on a cycle (the smallest-index start, walked back).
    """
    remaining = set(range(adj.in_ptr.size - 1)).difference(_kahn(dst, adj))
    v = min(remaining)
    seen: set[int] = set()
    while v not in seen:
        seen.add(v)
        for i in range(adj.in_ptr[v], adj.in_ptr[v + 1]):
            u = int(src[adj.in_edges[i]])
            if u in remaining:
                v = u
                break
    return v


def topological_order(src: np.ndarray, dst: np.ndarray, adj: Adjacency, node_ids: Sequence[str],
                      claimed: Any = None) -> np.ndarray:
    """Kahn's order of the graph, or an error naming a node on a cycle.

    Parameters
    ----------
    src, dst : numpy.ndarray
        Edge ends.
    adj : Adjacency
        The graph's CSR adjacency.
    node_ids : sequence of str
        Node ids, for the cycle message.
    claimed : array_like of int, optional
        An order read from a file (``.npz``): checked in O(V + E) to be exactly Kahn's
        (:func:`is_kahn_order`) and used instead of running the algorithm; any other
        order is an error.

    Returns
    -------
    numpy.ndarray of int64
        Kahn's topological order (smallest ready index first).
    """
    if claimed is not None and is_kahn_order(claimed, src, adj.in_edges, adj.in_ptr):
        return np.array(claimed, dtype=np.int64)
    order = kahn_order(dst, adj)
    if order is None:
        raise ProblemError(f"cycle: node '{node_ids[node_on_cycle(src, dst, adj)]}' lies on a cycle")
    if claimed is not None:
        raise ProblemError("the given topological order (topo; in a .npz file the member "
                           "'topo.npy') is not the one of this graph (Kahn's algorithm, FIFO from "
                           "the sources in index order): the file was edited; rewrite it with optpart")
    return np.asarray(order, dtype=np.int64)


def is_kahn_order(order, src: np.ndarray, in_edges: np.ndarray, in_ptr: np.ndarray) -> bool:
    """Is ``order`` exactly what :func:`kahn_order` returns? O(V + E) numpy.

    Kahn's algorithm with a FIFO queue seeded with the sources in index order appends
    node ``w`` while it processes ``w``'s predecessor that comes *last* in the order,
    at the edge from it (out-edges in edge-id order). So the order it returns is the
    sources in index order, then every other node sorted by the key (position of its
    last predecessor, id of the edge from it). Conversely, a permutation that is
    topological and has exactly that form is that order: by induction over positions,
    the nodes appended while processing position ``j`` depend only on the first
    ``j + 1`` nodes, which agree. The keys are distinct (no duplicate edges), so "sorted"
    is "strictly increasing along the order": no sort is needed.

    Reference: A. B. Kahn, "Topological sorting of large networks", Communications of
    the ACM 5(11), 1962.

    Parameters
    ----------
    order : array_like of int
        The claimed order (read from a ``.npz`` file), one node index per position.
    src : numpy.ndarray
        Edge sources (int64, one per edge).
    in_edges, in_ptr : numpy.ndarray
        The CSR in-adjacency (:class:`Adjacency`): in-edge ids of ``v`` are
        ``in_edges[in_ptr[v]:in_ptr[v+1]]``.

    Returns
    -------
    bool
        True exactly when ``order`` equals :func:`kahn_order`'s result; False for any other
        permutation, a non-integer array or the wrong length.
    """
    order = np.asarray(order)
    n = in_ptr.size - 1
    if order.shape != (n,) or order.dtype.kind not in "iu":
        return False
    if n == 0:
        return True
    order = order.astype(np.int64, copy=False)
    if order.min() < 0 or order.max() >= n:
        return False
    pos = np.full(n, -1, dtype=np.int64)
    pos[order] = np.arange(n)
    if (pos < 0).any():  # a repeated node leaves another without a position
        return False
    src_in = src[in_edges]           # predecessors, grouped by node (CSR of in-edges)
    dst_in = np.repeat(np.arange(n), np.diff(in_ptr))
    pe = pos[src_in]
    if (pe >= pos[dst_in]).any():    # not topological (this also proves there is no cycle)
        return False
    indeg = np.diff(in_ptr)
    inner = indeg > 0
    sources = np.flatnonzero(~inner)
    s = sources.size
    if not np.array_equal(order[:s], sources):
        return False
    if s == n:
        return True
    last_pos = np.maximum.reduceat(pe, in_ptr[:-1][inner])  # per non-source node, ascending id
    is_last = pe == np.repeat(last_pos, indeg[inner])       # one edge per node: preds are distinct
    key1 = np.zeros(n, dtype=np.int64)
    key2 = np.zeros(n, dtype=np.int64)
    key1[inner] = last_pos
    key2[inner] = in_edges[is_last]
    k1, k2 = key1[order[s:]], key2[order[s:]]
    rising = (k1[1:] > k1[:-1]) | ((k1[1:] == k1[:-1]) & (k2[1:] > k2[:-1]))
    return bool(rising.all())
