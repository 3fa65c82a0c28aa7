"""Phase 2, *merging and mapping*: give every cluster of phase 1 a device.

ParDNN (Qararyah et al., Parallel Computing 2021, section 4.2) maps the ``k`` primary
clusters one per device (the critical path to the fastest device) and then takes the
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
length) in plain lists, so each cluster costs O(k * window + its edges): near-linear.
Memory is a soft preference here (devices with room for the cluster first); phase 4
enforces it.
"""

from __future__ import annotations

import numpy as np

from ...memory import fits
from .schedule import Graph

__all__ = ["map_clusters"]


def map_clusters(g: Graph, top: list[float], paths: list[list[int]], allowed: np.ndarray,
                 memory: list[float], capacity: list[float], n_buckets: int = 256) -> list[int]:
    """Device of every node after merging and mapping the paths of :func:`slice_paths`.

    Parameters
    ----------
    g : Graph
        The problem as plain lists (:class:`optpart.schedule.graph.Graph`).
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
    load = [[0.0] * n_buckets for _ in range(k)]
    used = [0.0] * k
    allowed_np = allowed
    dev_order = sorted(range(k), key=lambda d: (-speed[d], d))
    out_ptr, succ, ob, in_ptr, pred, ib = g.out_ptr, g.succ, g.out_bytes, g.in_ptr, g.pred, g.in_bytes
    lat, bw = g.lat, g.bw
    bucket_len = span_end / n_buckets if n_buckets else 0.0
    mean_inv_speed = sum(1.0 / s for s in speed) / k
    all_allowed = bool(allowed_np.all())
    every = [True] * k

    def assign(nodes: list[int], d: int) -> None:
        ld = load[d]
        inv = 1.0 / speed[d]
        for v in nodes:
            place[v] = d
            ld[bucket[v]] += time[v] * inv
            used[d] += memory[v]

    def comm_bytes(nodes: list[int]) -> list[float]:
        comm_to = [0.0] * k
        for v in nodes:
            for i in range(out_ptr[v], out_ptr[v + 1]):
                pw = place[succ[i]]
                if pw >= 0:
                    comm_to[pw] += ob[i]
            for i in range(in_ptr[v], in_ptr[v + 1]):
                pu = place[pred[i]]
                if pu >= 0:
                    comm_to[pu] += ib[i]
        return comm_to

    # Primaries: the heaviest paths, one per device (fastest first); a path that is
    # communication-bound with what is already mapped is no primary (it is merged below).
    n_primary = 0
    c = 0
    while c < len(paths) and n_primary < k:
        nodes = paths[c]
        if c > 0:
            total = sum(comm_bytes(nodes))
            work = sum(time[v] for v in nodes)
            if total > 0 and g.mean_lat + total * g.mean_inv_bw > work * mean_inv_speed:
                break
        ok = allowed_np[nodes].all(axis=0)
        # the next fastest device, unless the path may not go there
        d = dev_order[n_primary]
        if not ok[d]:
            free = [e for e in dev_order if ok[e]]
            d = free[0] if free else d
        assign(nodes, d)
        n_primary += 1
        c += 1
    n_primary = c

    for c in range(n_primary, len(paths)):
        nodes = paths[c]
        comm_to = comm_bytes(nodes)
        work = 0.0
        mem = 0.0
        lo, hi = last, 0
        for v in nodes:
            work += time[v]
            mem += memory[v]
            if bucket[v] < lo:
                lo = bucket[v]
            if end_bucket[v] > hi:
                hi = end_bucket[v]
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
        talk = [(e, b) for e, b in enumerate(comm_to) if b > 0]  # the devices it exchanges bytes with
        for d in range(k):
            if not ok[d]:
                continue
            x = used[d] + mem
            room = x <= capacity[d] or fits(x, capacity[d])  # plain <= first: fits() only adds slack
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
