"""What every placement must hold under the liveness (peak) model, whatever its schedule.

Lower bounds on the memory a node's device (:func:`running_need`) and all devices together
(:func:`live_at_start`) hold when a node starts, and the proven reasons of infeasibility
built on them (:func:`peak_infeasibility`), for the heuristic under peak (:mod:`.peak`) and
:mod:`optpart.fit`. Intervals as in docs/model.md section 3.
"""

from __future__ import annotations

import numpy as np

from ...memory import fits
from ...problem import Problem
from ...units import format_bytes

__all__ = ["live_at_start", "peak_infeasibility", "running_need"]


def running_need(problem: Problem) -> np.ndarray:
    """Bytes surely live on a node's device when it starts, whatever the placement.

    At ``S(v)`` its device holds the parameters of ``v`` (of its whole colocation group),
    ``v``'s temporaries and output, and, when ``v`` runs for a positive time, the output
    of each predecessor (as the producer's own tensor or as a received copy): every one
    of those intervals contains ``S(v)`` (docs/model.md section 3, half-open intervals).
    """
    n = problem.n_nodes
    param = problem.param_bytes.astype(np.float64).copy()
    for grp in problem.groups:
        param[grp] = float(problem.param_bytes[grp].sum())
    inputs = np.zeros(n)
    if problem.n_edges:
        np.add.at(inputs, problem.edge_dst, problem.output_bytes[problem.edge_src])
    inputs[problem.time <= 0] = 0.0
    return param + problem.temp_bytes + problem.output_bytes + inputs


_LIVE_BOUND_NODES = 12_000  # nodes up to which live_at_start runs (bitsets: O(n^2 / 8) bytes of work)


def live_at_start(problem: Problem) -> np.ndarray | None:
    """Bytes surely live *on all devices together* when each node starts, whatever the
    placement and schedule; None above ``_LIVE_BOUND_NODES`` nodes.

    At ``S(v)``: every parameter (held all step); ``v``'s temporaries and output; and,
    when ``v`` runs for a positive time, the output of every strict ancestor ``u`` of ``v``
    with a consumer among ``v`` and its descendants. Such a tensor exists somewhere from
    ``S(u) <= S(v)`` until that consumer finishes after ``S(v)``: on ``u``'s device until
    its transfers land, and on the consumer's device from the first arrival there, which
    is no later, so the two half-open intervals leave no gap (docs/model.md section 3). On a
    training graph this is every saved activation when the loss runs, so the largest value
    over ``K`` is a bound on the capacity ``K`` equal devices need.
    """
    n = problem.n_nodes
    if n == 0 or n > _LIVE_BOUND_NODES:
        return None
    topo = problem.topo.tolist()
    in_ptr, out_ptr = problem.in_ptr.tolist(), problem.out_ptr.tolist()
    pred = problem.edge_src[problem.in_edges].tolist()
    succ = problem.edge_dst[problem.out_edges].tolist()
    anc_self = [0] * n  # bitset: ancestors of v and v
    for v in topo:
        b = 1 << v
        for i in range(in_ptr[v], in_ptr[v + 1]):
            b |= anc_self[pred[i]]
        anc_self[v] = b
    desc = [0] * n  # bitset: strict descendants of v
    for v in reversed(topo):
        b = 0
        for i in range(out_ptr[v], out_ptr[v + 1]):
            w = succ[i]
            b |= desc[w] | (1 << w)
        desc[v] = b
    out = problem.output_bytes.astype(np.float64)
    nbytes = (n + 7) // 8
    held = np.zeros(n)
    for u in range(n):
        if out[u] <= 0 or out_ptr[u + 1] == out_ptr[u]:
            continue
        reach = 0  # nodes v with a consumer of u among v and its descendants
        for i in range(out_ptr[u], out_ptr[u + 1]):
            reach |= anc_self[succ[i]]
        bits = reach & desc[u]
        if bits:
            row = np.unpackbits(np.frombuffer(bits.to_bytes(nbytes, "little"), dtype=np.uint8),
                                bitorder="little")[:n]
            held += out[u] * row
    held[problem.time <= 0] = 0.0
    return float(problem.param_bytes.sum()) + problem.temp_bytes + out + held


def peak_infeasibility(problem: Problem) -> str | None:
    """A proven reason that no placement fits under peak, or None.

    Checked: a node whose running need (:func:`running_need`) exceeds every device it may
    use; the parameters of the nodes pinned to a device exceed it.
    """
    cap = problem.device_memory
    need = running_need(problem)
    room = np.where(problem.allowed, cap[None, :], -np.inf).max(axis=1) if problem.n_nodes else np.zeros(0)
    bad = np.flatnonzero(~fits(need, room))
    if bad.size:
        v = int(bad[0])
        return (f"node '{problem.node_ids[v]}' needs {format_bytes(need[v])} while it runs (parameters, "
                f"temporaries, output and inputs) but the largest device it may use has {format_bytes(room[v])}")
    live = live_at_start(problem)
    total_cap = float(cap.sum())
    if live is not None and not fits(float(live.max()), total_cap):
        v = int(np.argmax(live))
        return (f"when node '{problem.node_ids[v]}' starts, {format_bytes(live[v])} are live on the devices "
                f"together (all parameters, and every tensor produced before it and read by it or after it) "
                f"but all devices hold {format_bytes(total_cap)}")
    pinned = problem.pin >= 0
    if pinned.any():
        load = np.bincount(problem.pin[pinned], weights=problem.param_bytes[pinned], minlength=problem.n_devices)
        over = np.flatnonzero(~fits(load, cap))
        if over.size:
            d = int(over[0])
            return (f"the parameters of the nodes pinned to device '{problem.device_ids[d]}' need "
                    f"{format_bytes(load[d])} but it has {format_bytes(cap[d])}")
    return None
