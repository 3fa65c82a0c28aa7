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

__all__ = ["running_need", "infeasibility"]


def running_need(problem: "Problem") -> np.ndarray:
    """Bytes each node surely holds on its device while it runs, under peak.

    Its parameters, temporaries and output, plus the output of every predecessor (held
    locally or as a received copy until the node finishes). A zero-time node runs for an
    instant, at which its inputs may be freed (half-open intervals), so its inputs do not count.
    """
    inputs = np.zeros(problem.n_nodes)
    np.add.at(inputs, problem.edge_dst, problem.output_bytes[problem.edge_src])
    inputs[problem.time <= 0] = 0.0
    return problem.param_bytes + problem.temp_bytes + problem.output_bytes + inputs

def infeasibility(problem: "Problem", memory_model: str = "static") -> str | None:
    """A reason why no placement can fit memory and constraints, or None if none is obvious.

    The one place where infeasibility is screened (the registry calls it before any
    solver). Checks, in order: a colocation group larger than every device it may
    use, a node with no allowed device, a node larger than every device it may use,
    the nodes pinned to one device larger than it, and total memory above total
    capacity. Under the ``peak`` model only what is held for certain counts: a
    running node holds its parameters, temporaries, output and inputs (:func:`running_need`);
    a set of nodes on one device holds all their parameters plus its largest running
    node; all devices together hold at least every parameter. Sizes are compared
    with :func:`optpart.memory.fits`, the one memory-fit rule.
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
    pinned = np.flatnonzero(problem.pin >= 0)
    for d in np.unique(problem.pin[pinned]).tolist():
        members = pinned[problem.pin[pinned] == d]
        total = held(members)
        if not fits(total, cap[d]):
            return (f"the {members.size} node(s) pinned to device '{problem.device_ids[d]}' need "
                    f"{format_bytes(total)} ({memory_model}) but it has {format_bytes(cap[d])}")
    need = float((problem.param_bytes if peak else problem.memory).sum())
    total_cap = float(cap.sum())
    if not fits(need, total_cap):
        return f"the graph needs {format_bytes(need)} but all devices together hold {format_bytes(total_cap)}"
    return None
