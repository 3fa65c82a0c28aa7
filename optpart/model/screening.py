"""The one infeasibility screen, for both memory models, and the one ``running_need``.

:func:`infeasibility` proves, without solving, that no placement can fit memory and
constraints: what is held for certain under the model (docs/model.md section 3) already
exceeds what the devices may hold. The registry calls it before any solver, so every
solver reports such an instance as ``infeasible`` with the same reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import ProblemError
from ..units import format_bytes
from .constraints import best_allowed
from .memory import fits

if TYPE_CHECKING:
    from .problem import Problem

__all__ = ["running_need", "live_at_start", "infeasibility", "LIVE_BOUND_NODES"]


def running_need(problem: "Problem") -> np.ndarray:
    """Bytes surely live on a node's device while it runs, whatever the placement (peak model).

    At ``S(v)`` its device holds the parameters of ``v`` (of its whole colocation group),
    ``v``'s temporaries and output, and, when ``v`` runs for a positive time, the output
    of each predecessor (as the producer's own tensor or as a received copy): every one
    of those intervals contains ``S(v)`` (docs/model.md section 3, half-open intervals). A
    zero-time node runs for an instant, at which its inputs may be freed, so they do not count.

    Parameters
    ----------
    problem : Problem
        The problem.

    Returns
    -------
    numpy.ndarray of float64
        Bytes per node.
    """
    param = problem.param_bytes.astype(np.float64)
    if len(problem.groups):
        member = problem.group_of >= 0
        totals = np.bincount(problem.group_of[member], weights=problem.param_bytes[member],
                             minlength=len(problem.groups))
        param = np.where(member, totals[np.maximum(problem.group_of, 0)], param)
    inputs = np.zeros(problem.n_nodes)
    if problem.n_edges:
        np.add.at(inputs, problem.edge_dst, problem.output_bytes[problem.edge_src])
    inputs[problem.time <= 0] = 0.0
    return param + problem.temp_bytes + problem.output_bytes + inputs


#: Nodes up to which :func:`live_at_start` runs (bitsets: O(n^2 / 8) bytes of work).
LIVE_BOUND_NODES = 12_000


def live_at_start(problem: "Problem") -> np.ndarray | None:
    """Bytes surely live *on all devices together* when each node starts, whatever the
    placement and schedule; None above ``LIVE_BOUND_NODES`` nodes.

    At ``S(v)``: every parameter (held all step); ``v``'s temporaries and output; and,
    when ``v`` runs for a positive time, the output of every strict ancestor ``u`` of ``v``
    with a consumer among ``v`` and its descendants. Such a tensor exists somewhere from
    ``S(u) <= S(v)`` until that consumer finishes after ``S(v)``: on ``u``'s device until
    its transfers land, and on the consumer's device from the first arrival there, which
    is no later, so the two half-open intervals leave no gap (docs/model.md section 3). On a
    training graph this is every saved activation when the loss runs, so the largest value
    over ``K`` is a bound on the capacity ``K`` equal devices need.

    Parameters
    ----------
    problem : Problem
        The problem (its placement-free data only).

    Returns
    -------
    numpy.ndarray of float64 or None
        Bytes per node; None when the problem has no peak split.
    """
    n = problem.n_nodes
    if n == 0 or n > LIVE_BOUND_NODES:
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


def infeasibility(problem: "Problem", memory_model: str = "peak") -> str | None:
    """A reason why no placement can fit memory and constraints, or None if none is obvious.

    The one place where infeasibility is screened (the registry calls it before any
    solver). Checks, in order: a colocation group larger than every device it may
    use, a node with no allowed device, a node larger than every device it may use,
    the nodes pinned to one device larger than it, and total memory above total
    capacity. This is the proof of both memory models (the peak heuristic's dead ends
    report it too). Under the ``peak`` model only what is held for certain counts: a
    running node holds its parameters, temporaries, output and inputs (:func:`running_need`);
    a set of nodes on one device holds all their parameters plus its largest running
    node; all devices together hold, when any node starts, what :func:`live_at_start` proves
    live then (at least every parameter). Sizes are compared
    with :func:`optpart.model.memory.fits`, the one memory-fit rule.

    Parameters
    ----------
    problem : Problem
        The problem.
    memory_model : str
        ``"peak"`` (the default, as everywhere) or ``"static"``.

    Returns
    -------
    str or None
        One line naming the node, group or device that cannot fit, or None.
    """
    if problem.n_devices == 0:
        return None
    if memory_model not in ("static", "peak"):
        raise ProblemError(f"memory_model={memory_model!r}; use 'static' or 'peak'")
    peak = memory_model == "peak"
    cap = problem.device_memory
    allowed = problem.allowed
    room = best_allowed(allowed, cap, -1.0)  # the largest capacity each node may use

    def held(members: np.ndarray) -> float:
        """Bytes the nodes ``members`` surely hold together on one device."""
        if not peak:
            return float(problem.memory[members].sum())
        running = problem.output_bytes[members] + problem.temp_bytes[members]
        return float(problem.param_bytes[members].sum() + running.max())

    if problem.groups:
        # All groups at once (one reduction per quantity, not a loop of small sums).
        member = problem.group_of >= 0
        gid = problem.group_of[member]
        m = len(problem.groups)
        if peak:
            totals = np.bincount(gid, weights=problem.param_bytes[member], minlength=m)
            running = np.zeros(m)
            np.maximum.at(running, gid, (problem.output_bytes + problem.temp_bytes)[member])
            totals = totals + running
        else:
            totals = np.bincount(gid, weights=problem.memory[member], minlength=m)
        first = np.fromiter((g[0] for g in problem.groups), dtype=np.int64, count=m)
        bad = np.flatnonzero(~fits(totals, room[first]))
        if bad.size:
            members = problem.groups[int(bad[0])]
            total = held(members)
            return (f"colocation group of node '{problem.node_ids[members[0]]}' ({members.size} nodes) needs "
                    f"{format_bytes(total)} but the largest device it may use has "
                    f"{format_bytes(max(room[members[0]], 0))}")
    no_device = ~allowed.any(axis=1)
    if no_device.any():
        v = int(np.flatnonzero(no_device)[0])
        return f"node '{problem.node_ids[v]}' is forbidden on every device"
    need = running_need(problem) if peak else problem.memory
    too_big = ~fits(need, room)
    if too_big.any():
        v = int(np.flatnonzero(too_big)[0])
        what = " while it runs (parameters, temporaries, output and inputs)" if peak else ""
        return (f"node '{problem.node_ids[v]}' needs {format_bytes(need[v])}{what} but the largest device "
                f"it may use has {format_bytes(room[v])}")
    total_cap = float(cap.sum())
    live = live_at_start(problem) if peak else None
    if live is not None and not fits(float(live.max()), total_cap):
        v = int(np.argmax(live))
        return (f"when node '{problem.node_ids[v]}' starts, {format_bytes(live[v])} are live on the devices "
                f"together (all parameters, and every tensor produced before it and read by it or after it) "
                f"but all devices hold {format_bytes(total_cap)}")
    pinned = np.flatnonzero(problem.pin >= 0)
    for d in np.unique(problem.pin[pinned]).tolist():
        members = pinned[problem.pin[pinned] == d]
        total = held(members)
        if not fits(total, cap[d]):
            return (f"the {members.size} node(s) pinned to device '{problem.device_ids[d]}' need "
                    f"{format_bytes(total)} ({memory_model}) but it has {format_bytes(cap[d])}")
    need = float((problem.param_bytes if peak else problem.memory).sum())
    if not fits(need, total_cap):
        return f"the graph needs {format_bytes(need)} but all devices together hold {format_bytes(total_cap)}"
    return None
