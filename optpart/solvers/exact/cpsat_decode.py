"""Decoding CP-SAT's answer into a schedule in seconds (helpers of :mod:`optpart.solvers.exact.cpsat`).

* :func:`separate_ties` / :func:`peak_fits`: under peak memory the integer starts are
  kept; float rounding at equal times is separated by tiny offsets.
* :func:`has_instants`: whether a tensor interval may have zero length (then peak
  memory is modelled conservatively and nothing is claimed).
* :func:`colour`: devices for a pooled schedule (greedy interval colouring).
* :func:`fits_rows`: whether a placement fits the integer memory rows (re-exported by :mod:`.cpsat_model`).
"""

from __future__ import annotations

import numpy as np

from ...errors import SolverError
from ...model.memory import fits, peak_memory
from ...model.problem import Problem

__all__ = ["separate_ties", "has_instants", "peak_fits", "colour", "fits_rows"]


def separate_ties(problem: Problem, place: np.ndarray, s_int: np.ndarray, e_int: np.ndarray,
                   comm: np.ndarray, scale: float) -> np.ndarray | None:
    """CP-SAT's starts in seconds plus tiny offsets so that, on every device, a tensor
    interval ending at integer time ``t`` ends (in floating point) no later than one
    starting at ``t``: each node whose time makes such an end gets a smaller offset than
    the node whose time makes the start. None when those orders form a cycle.

    Why: the integer model lets a tensor be freed and another allocated at the same unit;
    converted to seconds, float rounding could make them overlap and the peak check of
    :mod:`optpart.model.memory` fail although the integer schedule fits.

    Parameters
    ----------
    problem : Problem
        The problem (edges, output and temporary bytes).
    place : numpy.ndarray
        Device per node.
    s_int : numpy.ndarray
        CP-SAT's integer start per node, in grid units.
    e_int : numpy.ndarray
        CP-SAT's integer end per node, in grid units.
    comm : numpy.ndarray
        Integer transfer times, m x k x k (edge, source device, target device).
    scale : float
        Units per second of the time grid.

    Returns
    -------
    numpy.ndarray or None
        Start per node in seconds (each offset below 1 % of a unit), or None when the
        required orders are cyclic and no offsets exist.
    """
    n, k = problem.n_nodes, problem.n_devices
    src, dst = problem.edge_src.tolist(), problem.edge_dst.tolist()
    pl = [int(d) for d in place]
    si = [int(v) for v in s_int]
    ei = [int(v) for v in e_int]
    ci = [int(comm[e, pl[src[e]], pl[dst[e]]]) for e in range(len(src))]
    out, tmp = problem.output_bytes, problem.temp_bytes
    span = max(ei, default=0)
    span_nodes = {v for v in range(n) if ei[v] == span}
    cons: list[list[int]] = [[] for _ in range(n)]
    for e in range(len(src)):
        cons[src[e]].append(e)
    ivs = []  # (device, start, end, start node, end nodes)
    for v in range(n):
        if tmp[v] > 0:
            ivs.append((pl[v], si[v], ei[v], v, {v}))
        if out[v] <= 0:
            continue
        ends = [(ei[dst[e]] if pl[dst[e]] == pl[v] else ei[v] + ci[e],
                 dst[e] if pl[dst[e]] == pl[v] else v) for e in cons[v]]
        if not ends:
            ivs.append((pl[v], si[v], span, v, set(span_nodes)))
        else:
            top = max(t for t, _ in ends)
            ivs.append((pl[v], si[v], top, v, {u for t, u in ends if t == top}))
        for d in range(k):
            es = [e for e in cons[v] if pl[dst[e]] == d and d != pl[v]]
            if es:
                arrive = min(ei[v] + ci[e] for e in es)
                ends = [(ei[dst[e]], dst[e]) for e in es] + [(arrive, v)]
                top = max(t for t, _ in ends)
                ivs.append((d, arrive, top, v, {u for t, u in ends if t == top}))
    succ: list[set[int]] = [set() for _ in range(n)]
    by_start: dict[tuple[int, int], set[int]] = {}
    for d, b, _, sv, _ in ivs:
        by_start.setdefault((d, b), set()).add(sv)
    for v in range(n):  # a zero-time node sharing its start with a run on its device goes first
        if ei[v] == si[v]:
            for u in range(n):
                if u != v and pl[u] == pl[v] and si[u] == si[v] and ei[u] > si[u]:
                    succ[v].add(u)
    for d, b, f, _, enodes in ivs:
        if f > b:
            for sv in by_start.get((d, f), ()):
                for u in enodes:
                    if u != sv:
                        succ[u].add(sv)
    indeg = [0] * n
    for u in range(n):
        for v in succ[u]:
            indeg[v] += 1
    level = [0] * n
    queue = [v for v in range(n) if indeg[v] == 0]
    seen = 0
    while queue:
        u = queue.pop()
        seen += 1
        for v in succ[u]:
            level[v] = max(level[v], level[u] + 1)
            indeg[v] -= 1
            if indeg[v] == 0:
                queue.append(v)
    if seen < n:
        return None
    unit = 1.0 / scale
    step = min(1e-12 * max(span * unit, 1.0), 0.01 * unit / (n + 1))
    return s_int / scale + np.asarray(level, dtype=np.float64) * step


def has_instants(problem: Problem) -> bool:
    """Can a tensor interval have zero length (a zero-time node holding or receiving memory)?

    Parameters
    ----------
    problem : Problem
        The problem (times and the peak split).

    Returns
    -------
    bool
        True when some zero-time node has temporaries or an output, or is fed bytes: such
        instants are modelled conservatively, so the solver claims no proof.
    """
    held = (problem.output_bytes > 0) | (problem.temp_bytes > 0)
    fed = np.zeros(problem.n_nodes, dtype=bool)
    fed[problem.edge_dst[problem.output_bytes[problem.edge_src] > 0]] = True
    return bool(((problem.time <= 0) & (held | fed)).any())


def peak_fits(problem: Problem, placement: np.ndarray, start: np.ndarray) -> bool:
    """Does the schedule respect peak memory under the one fit rule of :mod:`optpart.model.memory`?

    Parameters
    ----------
    problem : Problem
        The problem.
    placement : ndarray
        Device per node.
    start : ndarray
        Start times in seconds.

    Returns
    -------
    bool
        Whether every device's liveness peak fits its capacity.
    """
    finish = start + problem.duration(placement)
    return bool(np.all(fits(peak_memory(problem, placement, start, finish), problem.device_memory)))


def colour(problem: Problem, s_int: np.ndarray, dur: list) -> tuple[np.ndarray, np.ndarray]:
    """Devices for a pooled schedule: in start order, each node takes the lowest free device.

    At most k positive-length runs overlap, so one is always free (greedy interval colouring).
    A zero-time sink that finds every device busy waits for the first device to free up,
    which moves no other node. Returns the placement and the (possibly moved) starts.

    Parameters
    ----------
    problem : Problem
        The problem (its topological ranks break ties between equal starts).
    s_int : numpy.ndarray
        Start per node from the pooled model (grid units, as floats).
    dur : list
        Duration per node in grid units (the same on every device in a pool).

    Returns
    -------
    tuple of (numpy.ndarray, numpy.ndarray)
        Device per node, and start per node (a copy of ``s_int``, with waiting zero-time sinks moved).

    Raises
    ------
    SolverError
        When more than ``k`` positive-length nodes overlap (the pooled model was violated).
    """
    n, k = problem.n_nodes, problem.n_devices
    rank = problem.topo_rank
    key = s_int.tolist()
    order = sorted(range(n), key=lambda v: (key[v], dur[v] > 0, int(rank[v])))
    free = [0.0] * k
    place = np.zeros(n, dtype=np.int64)
    start = s_int.copy()
    for v in order:
        s = key[v]
        d = next((d for d in range(k) if free[d] <= s), -1)
        if d < 0:
            if dur[v] > 0:
                raise SolverError(f"cpsat: pooled schedule runs more than {k} nodes at time {s}")
            d = min(range(k), key=lambda e: (free[e], e))
            start[v] = free[d]
        else:
            free[d] = s + dur[v]
        place[v] = d
    return place, start


def fits_rows(problem: Problem, placement: np.ndarray, mem: np.ndarray, cap: np.ndarray) -> bool:
    """Does an integer placement respect allowed devices, groups and the integer memory rows?

    Used to decide whether a placement (e.g. the heuristic's) may be a hint or a fallback
    of the integer model: its rounded memories must fit the rounded capacities.

    Parameters
    ----------
    problem : Problem
        The problem (allowed devices and colocation groups).
    placement : numpy.ndarray
        Device per node (int).
    mem : numpy.ndarray
        Integer memory per node.
    cap : numpy.ndarray
        Integer capacity per device, -1 where unlimited.

    Returns
    -------
    bool
        True when the placement is allowed and every device's total fits its capacity.
    """
    if not problem.respects_constraints(placement):
        return False
    used = np.bincount(placement, weights=mem.astype(np.float64), minlength=problem.n_devices)
    return bool(((cap < 0) | (used <= cap)).all())
