"""Phase 2, *merging and mapping*: give every cluster of phase 1 a device.

ParDNN (Qararyah et al., Parallel Computing 2021, section 4.2) maps the ``k`` primary
clusters one per device (the critical path to the fastest device; here the fastest
unused device whose capacity holds the cluster, the smallest such, so that unequal
capacities do not force the memory step to split a primary) and then takes the
secondary clusters heaviest first:

* **merging**: a cluster whose communication with already mapped nodes outweighs its
  own computation (its "parallel gain") is folded into the cluster it talks to most,
  i.e. it goes to that cluster's device;
* **mapping**: otherwise it goes to the device that minimises the *overload* it would
  cause within its level span (the time window ``[min top level, max top level + run
  time]`` of its nodes: how much the device's load in that window plus the cluster's
  own run time exceeds the window) plus the communication it would cut with its
  already mapped neighbours. Run times use each device's speed and transfers the
  per-pair links, so heterogeneous devices and links count.

Device loads are kept per time bucket (``n_buckets`` equal slices of the critical path
length) in plain lists, so each cluster costs O(k * window + its edges): near-linear. The
edges a cluster shares with clusters mapped before it (the only ones whose far end has a
device when it is mapped) are gathered once for all clusters with numpy, in the order
the cluster's nodes and their out- then in-edges come, so the byte sums are the same.
Memory is a soft preference here (devices with room for the cluster first); phase 4
enforces it.
"""

from __future__ import annotations

import numpy as np

from ..._docstrings import fill_doc
from ...model.memory import MEMORY_RTOL, fits
from .schedule import Graph

__all__ = ["map_clusters"]


@fill_doc
def map_clusters(g: Graph, top: list[float], paths: list[list[int]], allowed: np.ndarray,
                 memory: list[float], capacity: list[float], n_buckets: int = 256,
                 cluster_of: list[int] | None = None) -> list[int]:
    """Device of every node after merging and mapping the paths of :func:`slice_paths`.

    Parameters
    ----------
    %(g)s
    top : list of float
        Top level of every node under mean costs (seconds): where its run falls in time.
    paths : list of list of int
        The paths in slicing order (heaviest first); the first ones become primaries.
    allowed : numpy.ndarray
        ``(n, k)`` bool: which devices each node may use.
    memory : list of float
        Bytes of every node (static model).
    capacity : list of float
        Bytes usable per device.
    n_buckets : int
        Time buckets of the per-device load profile a cluster is fitted into.
    cluster_of : list of int, optional
        The path index of every node (:func:`slice_paths`'s first result; rebuilt when None).

    Returns
    -------
    list of int
        Device of every node (memory may still overflow: the memory step repairs it).
    """
    n, k = g.n, g.k
    place = [-1] * n
    if n == 0:
        return place
    speed, time, mt = g.speed, g.time, g.mean_time
    span_end = max(t + m for t, m in zip(top, mt))
    scale = n_buckets / span_end if span_end > 0 else 0.0
    last = n_buckets - 1
    top_np = np.asarray(top, dtype=np.float64)  # buckets in numpy: the same products, truncated
    bucket = np.minimum(last, (top_np * scale).astype(np.int64)).tolist()
    end_bucket = np.minimum(last, ((top_np + np.asarray(mt, dtype=np.float64)) * scale).astype(np.int64)).tolist()
    del top_np
    load = [[0.0] * n_buckets for _ in range(k)]
    used = [0.0] * k
    allowed_np = allowed
    dev_order = sorted(range(k), key=lambda d: (-speed[d], d))
    lat, bw = g.lat, g.bw
    bucket_len = span_end / n_buckets if n_buckets else 0.0
    mean_inv_speed = sum(1.0 / s for s in speed) / k
    all_allowed = bool(allowed_np.all())
    every = [True] * k
    cap_hi = [c + MEMORY_RTOL * max(1.0, abs(c)) for c in capacity]  # above: fits() says no
    cross_ptr, cross_node, cross_bytes = _earlier_edges(g, paths, cluster_of)
    t_of, m_of, b_of, e_of = time.__getitem__, memory.__getitem__, bucket.__getitem__, end_bucket.__getitem__

    def assign(nodes: list[int], d: int) -> None:
        ld = load[d]
        inv = 1.0 / speed[d]
        for v in nodes:
            place[v] = d
            ld[bucket[v]] += time[v] * inv
            used[d] += memory[v]

    def comm_bytes(c: int) -> list[float]:
        """Bytes path ``c`` exchanges with each device (its edges to already mapped paths)."""
        comm_to = [0.0] * k
        for x in range(cross_ptr[c], cross_ptr[c + 1]):
            comm_to[place[cross_node[x]]] += cross_bytes[x]
        return comm_to

    # Primaries: the heaviest paths, one per device (fastest first); a path that is
    # communication-bound with what is already mapped is no primary (it is merged below).
    n_primary = 0
    c = 0
    primary_on = [False] * k
    while c < len(paths) and n_primary < k:
        nodes = paths[c]
        if c > 0:
            total = sum(comm_bytes(c))
            work = sum(time[v] for v in nodes)
            if total > 0 and g.mean_lat + total * g.mean_inv_bw > work * mean_inv_speed:
                break
        ok = allowed_np[nodes].all(axis=0)
        # the fastest unused device that may take the path and holds it (of those, the
        # smallest: larger ones stay for larger paths), else the fastest unused one
        mem = sum(memory[v] for v in nodes)
        free = [e for e in dev_order if ok[e] and not primary_on[e]] or [e for e in dev_order if ok[e]]
        d = min(free, key=lambda e: (not fits(mem, capacity[e]), -speed[e],
                                     capacity[e] if fits(mem, capacity[e]) else 0.0, e)) if free else dev_order[0]
        primary_on[d] = True
        assign(nodes, d)
        n_primary += 1
        c += 1
    n_primary = c

    for c in range(n_primary, len(paths)):
        nodes = paths[c]
        comm_to = comm_bytes(c)
        work = sum(map(t_of, nodes))  # left to right, as a loop would add them
        mem = sum(map(m_of, nodes))
        lo = min(map(b_of, nodes))
        hi = max(map(e_of, nodes))
        window = (hi - lo + 1) * bucket_len
        if all_allowed:
            ok = every
        elif len(nodes) == 1:
            ok = allowed_np[nodes[0]].tolist()
        else:
            ok = allowed_np[nodes].all(axis=0).tolist()
        # cost of cutting the bytes that go to device e when the cluster sits on d
        best_key, best_d = None, -1
        total_bytes = sum(comm_to)
        merge = False
        talk_d = -1
        if total_bytes > 0:
            mean_cut = g.mean_lat + total_bytes * g.mean_inv_bw
            merge = mean_cut > work * mean_inv_speed
            if merge:
                talk_d = comm_to.index(max(comm_to))
        talk = [(e, b) for e, b in enumerate(comm_to) if b > 0] if total_bytes > 0 else ()  # its devices
        for d in range(k):
            if not ok[d]:
                continue
            x = used[d] + mem
            # plain <= first: fits() only adds a slack, never more than ``cap_hi`` allows
            room = x <= capacity[d] or (x <= cap_hi[d] and fits(x, capacity[d]))
            if merge:
                primary = 0.0 if d == talk_d else 1.0
            else:
                primary = 0.0
            cut = 0.0
            for e, b in talk:
                if e != d:
                    cut += lat[e][d] + b / bw[e][d]
            ld = sum(load[d][lo:hi + 1])
            over = ld + work / speed[d] - window
            if over < 0.0:
                over = 0.0
            key = (0 if room else 1, primary, over + cut, ld, d)
            if best_key is None or key < best_key:
                best_key, best_d = key, d
        if best_d < 0:
            best_d = dev_order[0]
        assign(nodes, best_d)
    return place


def _earlier_edges(g: Graph, paths: list[list[int]], cluster_of: list[int] | None
                   ) -> tuple[list[int], list[int], list[float]]:
    """For every path, its edges to nodes of earlier paths: ``(ptr, far node, bytes)`` (CSR by path).

    When path ``c`` is mapped exactly the nodes of paths ``0..c-1`` have a device, so these
    are the edges whose bytes count. Ordered as the nodes of the path, each node's out-edges
    then in-edges in CSR order, so that summing them in this order adds the same floats in
    the same order as walking every edge of the path.
    """
    p = g.problem
    n_paths = len(paths)
    if cluster_of is None:
        cl = np.empty(g.n, dtype=np.int32)
        for c, nodes in enumerate(paths):
            cl[nodes] = c
    else:
        cl = np.asarray(cluster_of, dtype=np.int32)
    pos = np.empty(g.n, dtype=np.int32)  # place of each node within its path
    sizes = np.fromiter(map(len, paths), dtype=np.int64, count=n_paths)
    flat = np.fromiter((v for nodes in paths for v in nodes), dtype=np.int64, count=int(sizes.sum()))
    pos[flat] = np.arange(flat.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    del flat, sizes
    src, dst = p.edge_src, p.edge_dst
    c_src, c_dst = cl[src], cl[dst]
    keep = np.flatnonzero(c_src != c_dst)     # edge ids joining two paths
    late_src = c_src[keep] > c_dst[keep]      # the later path holds the source: one of its out-edges
    del c_src, c_dst
    node = np.where(late_src, src[keep], dst[keep])
    far = np.where(late_src, dst[keep], src[keep])
    slot = np.empty(src.size, dtype=np.int32)  # CSR position of each edge id, out- or in-list
    slot[p.out_edges] = np.arange(src.size, dtype=np.int32)
    out_slot = slot[keep]
    slot[p.in_edges] = np.arange(src.size, dtype=np.int32)
    csr = np.where(late_src, out_slot, slot[keep])
    del slot, out_slot
    order = np.lexsort((csr, ~late_src, pos[node], cl[node]))  # out-edges (late_src) before in-edges
    del csr
    nbytes = p.edge_bytes[keep[order]].tolist()
    ptr = np.searchsorted(cl[node[order]], np.arange(n_paths + 1)).tolist()
    return ptr, far[order].tolist(), nbytes
