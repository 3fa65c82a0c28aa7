"""Decoding and replay: a CP-SAT solution or a sub-solve's answer to a schedule in seconds,
and the checks a schedule must pass before it is returned (constraints, memory)."""

from __future__ import annotations

import numpy as np

from ...errors import SolverError
from ...model.memory import fits, overflow_message, peak_memory, static_memory
from ...model.problem import Problem
from ...schedule.replay import tighten_schedule


def fits_rows(problem: Problem, placement: np.ndarray, mem: np.ndarray, cap: np.ndarray) -> bool:
    """Whether a placement keeps the constraints and the integer memory rows (``cap`` -1: none).

    Parameters
    ----------
    problem : Problem
    placement : numpy.ndarray
    mem, cap : numpy.ndarray
        Integer memories and capacities.

    Returns
    -------
    bool
    """
    if not problem.respects_constraints(placement):
        return False
    used = np.bincount(placement, weights=mem.astype(np.float64), minlength=problem.n_devices)
    return bool(((cap < 0) | (used <= cap)).all())


def _schedule_fits(problem: Problem, place: np.ndarray, start: np.ndarray, memory_model: str) -> bool:
    """Constraints kept and every device within memory under ``memory_model`` (liveness on the
    schedule's times under ``"peak"``)."""
    if not problem.respects_constraints(place):
        return False
    if memory_model == "peak" and problem.has_split:
        return overflow_message(problem, place, start, start + problem.duration(place), "peak") is None
    return bool(np.all(fits(static_memory(problem, place), problem.device_memory)))


def replay_if_shorter(problem: Problem, found: tuple, makespan: float, memory_model: str) -> tuple:
    """A sub-solve's ``(placement, key, key_end)`` replayed in seconds in its order, and whether
    it is kept: ``(verdict, placement, start, makespan)`` with ``verdict`` ``"kept"``,
    ``"memory"`` (shorter, but breaks memory or constraints) or ``"longer"``.

    Parameters
    ----------
    problem : Problem
    found : tuple
        The sub-solve's placement and its starts and ends in any unit.
    makespan : float
        The incumbent's makespan in seconds.
    memory_model : str

    Returns
    -------
    tuple
    """
    place, key, key_end = found
    start = tighten_schedule(problem, place, key, key_end)
    ms = float((start + problem.duration(place)).max())
    if not ms < makespan * (1 - 1e-12):
        return "longer", place, start, ms
    if not _schedule_fits(problem, place, start, memory_model):
        return "memory", place, start, ms
    return "kept", place, start, ms


def has_instants(problem: Problem) -> bool:
    """Whether a zero-time node holds or receives memory (an instant tensor the peak model
    counts conservatively, so no proof is claimed).

    Parameters
    ----------
    problem : Problem

    Returns
    -------
    bool
    """
    held = (problem.output_bytes > 0) | (problem.temp_bytes > 0)
    fed = np.zeros(problem.n_nodes, dtype=bool)
    fed[problem.edge_dst[problem.output_bytes[problem.edge_src] > 0]] = True
    return bool(((problem.time <= 0) & (held | fed)).any())


def _peak_fits(problem: Problem, placement: np.ndarray, start: np.ndarray) -> bool:
    """Whether every device's liveness peak fits (:mod:`optpart.model.memory`)."""
    finish = start + problem.duration(placement)
    return bool(np.all(fits(peak_memory(problem, placement, start, finish), problem.device_memory)))


def _separate_ties(problem: Problem, place, s_int, e_int, comm, scale) -> np.ndarray | None:
    """CP-SAT's starts in seconds plus offsets below 1% of a unit so that, on every device, a
    tensor freed at integer time ``t`` is freed no later (in floating point) than one allocated
    at ``t``; None when the orders this needs form a cycle."""
    n, k = problem.n_nodes, problem.n_devices
    src, dst = problem.edge_src.tolist(), problem.edge_dst.tolist()
    pl, si, ei = [int(d) for d in place], [int(v) for v in s_int], [int(v) for v in e_int]
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
        ends = [(ei[dst[e]], dst[e]) if pl[dst[e]] == pl[v] else (ei[v] + ci[e], v) for e in cons[v]]
        top = max((t for t, _ in ends), default=None)
        ivs.append((pl[v], si[v], span, v, set(span_nodes)) if top is None else
                   (pl[v], si[v], top, v, {u for t, u in ends if t == top}))
        for d in range(k):
            es = [e for e in cons[v] if pl[dst[e]] == d and d != pl[v]]
            if es:
                arrive = min(ei[v] + ci[e] for e in es)
                ends = [(ei[dst[e]], dst[e]) for e in es] + [(arrive, v)]
                top = max(t for t, _ in ends)
                ivs.append((d, arrive, top, v, {u for t, u in ends if t == top}))
    succ: list[set[int]] = [set() for _ in range(n)]
    by_start: dict = {}
    for d, b, _, sv, _ in ivs:
        by_start.setdefault((d, b), set()).add(sv)
    for v in range(n):  # a zero-time node sharing its start with a run on its device goes first
        if ei[v] == si[v]:
            succ[v].update(u for u in range(n) if u != v and pl[u] == pl[v] and si[u] == si[v] and ei[u] > si[u])
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
    level, queue, seen = [0] * n, [v for v in range(n) if indeg[v] == 0], 0
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
    step = min(1e-12 * max(span / scale, 1.0), 0.01 / scale / (n + 1))
    return s_int / scale + np.asarray(level, dtype=np.float64) * step


def _colour(problem: Problem, s_int: np.ndarray, dur: list) -> tuple[np.ndarray, np.ndarray]:
    """Devices for a pooled schedule (greedy interval colouring in start order); a zero-time
    sink that finds every device busy waits for the first to free up."""
    n, k = problem.n_nodes, problem.n_devices
    rank = problem.topo_rank
    key = s_int.tolist()
    free = [0.0] * k
    place = np.zeros(n, dtype=np.int64)
    start = s_int.copy()
    for v in sorted(range(n), key=lambda v: (key[v], dur[v] > 0, int(rank[v]))):
        d = next((d for d in range(k) if free[d] <= key[v]), -1)
        if d < 0:
            if dur[v] > 0:
                raise SolverError(f"cpsat: pooled schedule runs more than {k} nodes at time {key[v]}")
            d = min(range(k), key=lambda e: (free[e], e))
            start[v] = free[d]
        else:
            free[d] = key[v] + dur[v]
        place[v] = d
    return place, start


def values(data, mv, solver) -> tuple[np.ndarray, np.ndarray]:
    """CP-SAT's placement and integer starts (a pooled model's devices by ``_colour``).

    Parameters
    ----------
    data : CpData
    mv : CpModelVars
    solver : ortools.sat.python.cp_model.CpSolver

    Returns
    -------
    tuple of numpy.ndarray
    """
    problem = data.problem
    n, k = problem.n_nodes, problem.n_devices
    s_int = np.array([solver.value(mv.S[v]) for v in range(n)], dtype=np.int64)
    if data.pooled:
        place, s = _colour(problem, s_int.astype(np.float64), data.dur[:, 0].tolist())
        return place, np.asarray(s, dtype=np.int64)
    allowed = problem.allowed
    place = np.array([next(d for d in range(k) if allowed[v, d] and solver.boolean_value(mv.x[v, d]))
                      for v in range(n)], dtype=np.int64)
    return place, s_int


def to_seconds(data, place: np.ndarray, s_int: np.ndarray, stats: dict) -> np.ndarray | None:
    """Start times in seconds of an integer schedule: replayed in its order under static memory
    (never later); under peak CP-SAT's own starts (moving a start changes liveness), ties
    separated when float rounding breaks the peak check; None when nothing fits.

    Parameters
    ----------
    data : CpData
    place, s_int : numpy.ndarray
        Device and integer start per node.
    stats : dict

    Returns
    -------
    numpy.ndarray or None
    """
    problem = data.problem
    s_int = np.asarray(s_int, dtype=np.float64)
    e_int = s_int + data.dur[np.arange(problem.n_nodes), place]
    if not data.peak:
        return tighten_schedule(problem, place, s_int, e_int)
    start = s_int / data.grid.scale
    if _peak_fits(problem, place, start):
        return start
    stats["peak_float_fix"] = True
    for cand in (_separate_ties(problem, place, s_int, e_int, data.comm, data.grid.scale),
                 tighten_schedule(problem, place, s_int, e_int)):
        if cand is not None and _peak_fits(problem, place, cand):
            return cand
    stats["peak_check_failed"] = True
    return None
