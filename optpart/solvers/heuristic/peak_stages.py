"""Known-feasible-leaning candidates for the peak model: consecutive topological stages.

Under the liveness model a device pays for every tensor it receives, so placements that
keep most tensors on their producer's device are often within memory where list
schedules are not. :func:`chunk_placements` cuts the topological order into one stage per
device (Baechi's m-TOPO cut) by several weights, plus the mirrored pipeline stages of
training graphs (:func:`mirrored_stages`, rebalanced from measured peaks by
:func:`balanced_stages`). Used by :func:`optpart.solvers.heuristic.peak.solve_peak`.
"""

from __future__ import annotations

import numpy as np

from ..._docstrings import fill_doc
from ...model.memory import fits
from ...model.problem import Problem
from .memory import peak_schedule, project_constraints
from .schedule import Graph

__all__ = ["chunk_placements", "balanced_stages", "mirrored_stages"]


@fill_doc
def chunk_placements(problem: Problem, g: Graph):
    """Consecutive stages of the topological order, one per device, cut where the running
    sum of a weight reaches each device's share (Baechi's m-TOPO cut, here by liveness
    weights): ``param + output`` bytes (what a stage holds), static ``memory``, and run time.
    Stages keep most tensors on their producer's device, so few copies are received, which
    is what the peak model punishes. Constraints are projected afterwards.

    Parameters
    ----------
    %(problem_g)s

    Returns
    -------
    list of tuple
        ``(tag, placement)`` pairs, distinct placements only (empty with one device).
    """
    if g.k < 2:
        return []
    order = problem.topo
    cap = problem.device_memory
    share = cap / cap.sum() if np.isfinite(cap).all() and cap.sum() > 0 else np.full(g.k, 1.0 / g.k)
    bounds = np.cumsum(share)[:-1]
    out = []
    seen = set()
    for tag, w in (("chunks-live", problem.param_bytes + problem.output_bytes), ("chunks-static", problem.memory),
                   ("chunks-time", problem.time)):
        w = np.asarray(w, dtype=np.float64)[order]
        total = float(w.sum())
        if not total > 0:
            continue
        mid = (np.cumsum(w) - 0.5 * w) / total  # each node's position by the middle of its weight
        dev = np.searchsorted(bounds, mid, side="right")
        place = np.empty(g.n, dtype=np.int64)
        place[order] = dev
        place = project_constraints(problem, g, place.tolist())
        key = tuple(place)
        if key not in seen:
            seen.add(key)
            out.append((tag, place))
    out += balanced_stages(problem, g, share)
    return out


@fill_doc
def balanced_stages(problem: Problem, g: Graph, share: np.ndarray, rounds: int = 8):
    """:func:`mirrored_stages`, with the stage shares rebalanced from the measured liveness
    peaks (a device at ``x`` times the mean peak/capacity gets its share divided by ``x``)
    for a fixed number of rounds; the placements with the lowest worst peak/capacity and
    the shortest makespan are returned.

    Parameters
    ----------
    %(problem_g)s
    share : numpy.ndarray
        Starting share of each device (sums to 1).
    rounds : int
        Rebalancing rounds at most.

    Returns
    -------
    list of tuple
        ``("stages-balanced", placement)`` and, when another one is faster and fits,
        ``("stages-fast", placement)``.
    """
    cap = problem.device_memory
    share = np.asarray(share, dtype=np.float64)
    found = {}
    for _ in range(rounds):
        place = mirrored_stages(problem, g, np.cumsum(share)[:-1])
        if place is None or tuple(place) in found:
            break
        _, _, ms, peak = peak_schedule(problem, g, place, 0)
        ratio = peak / np.maximum(cap, 1e-300)
        found[tuple(place)] = (float(ratio.max()), ms, place)
        if not np.isfinite(ratio).all() or not ratio.max() > 0:
            break
        share = share * np.clip(float(ratio.mean()) / np.maximum(ratio, 1e-12), 0.5, 2.0)
        share /= share.sum()
    if not found:
        return []
    by_fit = min(found.values(), key=lambda x: (x[0], x[1]))
    by_time = min((x for x in found.values() if fits(x[0], 1.0)), key=lambda x: x[1], default=by_fit)
    return [("stages-balanced", by_fit[2])] + ([("stages-fast", by_time[2])] if by_time is not by_fit else [])


@fill_doc
def mirrored_stages(problem: Problem, g: Graph, bounds: np.ndarray) -> list[int] | None:
    """Pipeline stages for training graphs: forward cut into stages, backward follows its tensors.

    On one device the liveness level peaks at the turn from forward to backward (every
    kept activation is live then). Nodes starting before that instant are cut into
    consecutive stages by ``param + output`` bytes; every later node, in topological order,
    joins the device of its predecessor with the largest output (the activation or gradient
    it reads), so each activation is consumed where it was produced and no copy of it is
    received elsewhere. The layer-wise pipeline split of GPipe (Huang et al., NeurIPS 2019).

    Parameters
    ----------
    %(problem_g)s
    bounds : numpy.ndarray
        Cumulative stage shares (``k - 1`` cut points in (0, 1)).

    Returns
    -------
    list of int or None
        The placement, or None when the forward part is empty or everything.
    """
    from ...model.memory import memory_timeline
    from .schedule import schedule_placement

    s, f, _ = schedule_placement(g, [0] * g.n, 0)
    times, level = memory_timeline(problem, np.zeros(g.n, dtype=np.int64), np.asarray(s), np.asarray(f))[0]
    turn = float(times[int(np.argmax(level))])
    start = np.asarray(s)
    order = problem.topo
    fwd = order[start[order] < turn]
    if fwd.size == 0 or fwd.size == g.n:
        return None
    w = (problem.param_bytes + problem.output_bytes)[fwd].astype(np.float64)
    total = float(w.sum())
    if not total > 0:
        return None
    place = [-1] * g.n
    for v, dv in zip(fwd.tolist(), np.searchsorted(bounds, (np.cumsum(w) - 0.5 * w) / total, side="right").tolist()):
        place[v] = int(dv)
    out_b = problem.output_bytes.tolist()
    for v in order.tolist():
        if place[v] >= 0:
            continue
        best, best_b = 0, -1.0
        for i in range(g.in_ptr[v], g.in_ptr[v + 1]):
            u = g.pred[i]
            if out_b[u] > best_b:
                best, best_b = place[u], out_b[u]
        place[v] = best
    return project_constraints(problem, g, place)
