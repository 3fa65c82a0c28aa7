"""Memory in use over time per device, under the liveness (peak) model of MODEL.md section 3.

:func:`memory_timeline` replays the events of :func:`optpart.evaluate.peak_memory`
(same intervals, same half-open rule, same order of equal-time events) and returns
the running level after every event instead of only its maximum, so that
``max(bytes)`` of a device equals its peak memory exactly.
"""

from __future__ import annotations

import numpy as np

from ..evaluate import _as_placement
from ..problem import Problem

__all__ = ["memory_timeline"]


def memory_timeline(problem: Problem, placement, start, finish) -> list[tuple[np.ndarray, np.ndarray]]:
    """Bytes in use over time on each device: ``[(times, bytes), ...]``, one pair per device.

    ``bytes[i]`` is the level from ``times[i]`` on (draw with ``drawstyle="steps-post"``).
    The first point is ``(0, params)``: the ``param_bytes`` held all step; the last is at
    the makespan. A zero-length interval (a tensor used at the instant it is made)
    appears as a spike: two points at the same time. ``max(bytes)`` equals
    :func:`optpart.peak_memory` for that device.
    """
    placement = _as_placement(problem, placement)
    n, k = problem.n_nodes, problem.n_devices
    start = np.asarray(start, dtype=np.float64)
    finish = np.asarray(finish, dtype=np.float64)
    makespan = float(finish.max()) if n else 0.0
    base = np.bincount(placement, weights=problem.param_bytes, minlength=k).astype(np.float64)
    flat = [(np.array([0.0, makespan]), np.array([base[d], base[d]])) for d in range(k)]
    if n == 0 or not problem.has_split:
        return flat
    out_b, tmp_b = problem.output_bytes, problem.temp_bytes
    src, dst = problem.edge_src, problem.edge_dst
    a, b = placement[src], placement[dst]
    comm = problem.transfer_times(placement)
    # The output of u lives on d(u) until its last local consumer ends or its last transfer out lands.
    end = np.full(n, -np.inf)
    local = a == b
    np.maximum.at(end, src[local], finish[dst[local]])
    np.maximum.at(end, src[~local], finish[src[~local]] + comm[~local])
    end[np.isinf(end)] = makespan
    devs, begs, ends, sizes = [placement, placement], [start, start], [end, finish], [out_b, tmp_b]
    # A received copy lives on the consumer's device from its first arrival to its last use there.
    remote = ~local
    if remote.any():
        key = src[remote] * k + b[remote]
        uniq, inv = np.unique(key, return_inverse=True)
        arrive = np.full(uniq.size, np.inf)
        np.minimum.at(arrive, inv, finish[src[remote]] + comm[remote])
        last = np.full(uniq.size, -np.inf)
        np.maximum.at(last, inv, finish[dst[remote]])
        devs.append(uniq % k)
        begs.append(arrive)
        ends.append(np.maximum(last, arrive))
        sizes.append(out_b[uniq // k])
    dev, beg, fin, size = (np.concatenate(x) for x in (devs, begs, ends, sizes))
    keep = size > 0
    dev, beg, fin, size = dev[keep], beg[keep], fin[keep], size[keep]
    if size.size == 0:
        return flat
    instant = fin <= beg
    # Same order as peak_memory: at equal times, proper removals, then additions, then instant removals.
    ev_dev = np.concatenate([dev, dev])
    ev_time = np.concatenate([beg, fin])
    ev_order = np.concatenate([np.ones(size.size), np.where(instant, 2, 0)])
    ev_delta = np.concatenate([size, -size])
    order = np.lexsort((ev_order, ev_time, ev_dev))
    ev_dev, ev_time, ev_delta = ev_dev[order], ev_time[order], ev_delta[order]
    bounds = np.searchsorted(ev_dev, np.arange(k + 1))
    out = []
    for d in range(k):
        lo, hi = int(bounds[d]), int(bounds[d + 1])
        level = np.cumsum(ev_delta[lo:hi])
        times = np.concatenate([[0.0], ev_time[lo:hi], [makespan]])
        values = base[d] + np.concatenate([[0.0], level, [level[-1] if level.size else 0.0]])
        out.append((times, np.maximum(values, base[d])))
    return out
