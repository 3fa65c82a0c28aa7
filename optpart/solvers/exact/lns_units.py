"""Unit moves: the neighbourhood that shifts a stage boundary, the whole step re-timed.

The time-slab windows of :mod:`optpart.solvers.exact.lns_window` keep every node outside the
slab at its start. On a training step that cannot reach the moves that matter: a forward node
and the backward nodes that read its saved tensors run 0.05-0.2 s apart, so moving the pair
across a stage boundary (where the critical path changes device) is never inside one slab,
and a node moved alone pays for its tensor crossing back (docs/exact.md, "Why the windows
find nothing"). This neighbourhood moves *units* instead:

* every node has an **anchor**, a position in the forward pass's topological order
  (:func:`~optpart.solvers.heuristic.stage_seed.stage_anchors`: a backward node follows the
  latest forward node it reads), and the device of position ``i`` is the device of the
  ``i``-th forward node; a **cut** is a position where that device changes;
* a **move** takes the ``r`` positions just before a cut (``r`` = 1, 2, 4, ... 32) and sends
  every node anchored there to the device after the cut, or the ``r`` positions after it
  to the device before (with whole colocation groups; nodes a pin keeps stay);
* each move is an exact CP-SAT sub-solve of the whole step: the moved nodes are placed on
  their new device wherever its order has room (one no-overlap), every other node keeps its
  device and its place in its device's order but **all start times are free** (a chain per
  device, every precedence with the transfer the placement implies), and the makespan must
  shorten. Heads and tails of the fixed part bound every start, so CP-SAT proves most moves
  optimal or impossible in well under a thousandth of a deterministic second (median 3e-5
  on vit-b16's and densenet121's moves; a few reach the per-move cap).

The answer is replayed in seconds with the model's own arithmetic
(:func:`~optpart.schedule.replay.tighten_schedule`), kept only when shorter and within memory
under the requested model (the liveness model is checked, not modelled), and the moves are
tried again from the new schedule, cuts on the schedule's critical chain first, until a full
pass finds nothing.

Graphs without a forward pass (no ``phase`` and no liveness split) anchor every node at its
own topological position: a move then sends a run of consecutive nodes across a device
change of the topological order.

Measured on the bundled training graphs from the heuristic's schedule (docs/exact.md, "Unit
moves"): the moves shorten vit-b16 by 1.46% (the 0|1 boundary moved from the middle of an MLP,
74 MiB crossing twice, to its input, 18.5 MiB), densenet121 by 0.31% and gpt2 by 0.16%, where
the slab windows found nothing; 4, 14 and 22 s for every move of a full pass.

References: P. Shaw, "Using constraint programming and local search methods to solve vehicle
routing problems", CP 1998 (LNS); GPipe (Huang et al., NeurIPS 2019) and PipeDream
(Narayanan et al., SOSP 2019) for stage boundaries as the unit of a placement.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from ...model.problem import Problem
from ...schedule.replay import integer_schedule, schedule_tails
from ..heuristic.stage_seed import forward_set, stage_anchors
from . import _exact_common as xc

__all__ = ["improve_units", "unit_moves", "retime_move", "anchors_of", "incumbent_grid", "IncumbentGrid"]

#: Time units per incumbent makespan (durations and transfers rounded up on this grid).
RESOLUTION = 10**7
#: Positions moved across a cut, smallest first.
RADII = (1, 2, 4, 8, 16, 32)
#: CP-SAT deterministic seconds per move at most (measured: median 3e-5, 90% under 5e-4;
#: 3 of densenet121's first 55 moves reach it).
MOVE_DTIME = 0.2
#: Wall seconds a move may take at most without a deterministic budget.
MOVE_WALL_S = 5.0
#: Under a deterministic budget each move is also charged this many deterministic seconds per
#: node and edge: its model is built in Python (about 1e-5 s per item here), and moves that
#: the bounds rule out cost CP-SAT nothing, so without it a budget would not bound their count.
BUILD_DTIME_PER_ITEM = 1e-5


def anchors_of(problem: Problem) -> tuple[np.ndarray, np.ndarray]:
    """``(anchor, forward_order)``: each node's anchor position and the forward nodes by position.

    The first forward set of :func:`~optpart.solvers.heuristic.stage_seed.forward_set`; when
    there is none, every node is its own anchor in topological order.

    Parameters
    ----------
    problem : Problem
        The problem.

    Returns
    -------
    tuple of (ndarray, ndarray)
        ``anchor[v]``, a position in the forward order, and the forward nodes in that order.
    """
    sets = forward_set(problem)
    forward = sets[0] if sets else np.ones(problem.n_nodes, dtype=bool)
    anchor = stage_anchors(problem, forward)
    return anchor, problem.topo[forward[problem.topo]]


def unit_moves(problem: Problem, anchor: np.ndarray, forward_order: np.ndarray, place: np.ndarray,
               start: np.ndarray) -> Iterator[tuple[np.ndarray, int]]:
    """The moves of ``place``, most promising first: ``(nodes, device)`` pairs, made lazily
    (a graph with a device change at every position has ``12 n`` of them).

    Cuts nearest to a device change of the schedule's critical chain come first; each cut
    gives both directions at every radius of :data:`RADII`. A move keeps only nodes allowed on
    its device that are not there yet, whole colocation groups (a group with a member that
    cannot go is left out); empty and repeated moves are dropped.

    Parameters
    ----------
    problem : Problem
        The problem.
    anchor, forward_order : ndarray
        From :func:`anchors_of`.
    place, start : ndarray
        The incumbent schedule (its critical chain orders the cuts).

    Yields
    ------
    tuple of (ndarray, int)
        The nodes a move sends, and their new device.
    """
    n = problem.n_nodes
    if forward_order.size < 2:
        return
    devs = place[forward_order]
    cuts = np.flatnonzero(devs[1:] != devs[:-1]) + 1
    if cuts.size == 0:
        return
    end = start + problem.duration(place)
    ms = float(end.max())
    tail = schedule_tails(problem, place, start)
    crit = np.abs(start + tail - ms) <= 1e-9 * max(ms, 1e-300)
    # Device changes along the critical chain: critical edges between critical nodes on two devices.
    src, dst = problem.edge_src, problem.edge_dst
    change = crit[src] & crit[dst] & (place[src] != place[dst])
    hot = np.unique(np.concatenate([anchor[src[change]], anchor[dst[change]]]))
    if hot.size:
        pos = np.searchsorted(hot, cuts)
        near = np.minimum(np.abs(cuts - hot[np.clip(pos - 1, 0, hot.size - 1)]),
                          np.abs(cuts - hot[np.clip(pos, 0, hot.size - 1)]))
    else:
        near = np.zeros(cuts.size, dtype=np.int64)
    order = np.lexsort((cuts, near))
    by_anchor = np.argsort(anchor, kind="stable")
    sorted_anchor = anchor[by_anchor]
    group_of, groups, allowed = problem.group_of, problem.groups, problem.allowed
    seen = set()
    for c in cuts[order].tolist():
        for r in RADII:
            for lo, hi, d in ((c - r, c, int(devs[c])), (c, c + r, int(devs[c - 1]))):
                lo, hi = max(0, lo), min(forward_order.size, hi)
                nodes = by_anchor[np.searchsorted(sorted_anchor, lo):np.searchsorted(sorted_anchor, hi)]
                nodes = _with_groups(nodes, d, group_of, groups, allowed, n)
                nodes = nodes[place[nodes] != d]
                if nodes.size == 0:
                    continue
                key = (d, nodes.tobytes())
                if key not in seen:
                    seen.add(key)
                    yield nodes, d


def _with_groups(nodes: np.ndarray, d: int, group_of: np.ndarray, groups, allowed: np.ndarray,
                 n: int) -> np.ndarray:
    """``nodes`` allowed on ``d`` with their colocation groups whole (groups that cannot all go dropped)."""
    take = np.zeros(n, dtype=bool)
    take[nodes] = True
    for g in np.unique(group_of[nodes]).tolist():
        if g < 0:
            continue
        members = np.asarray(groups[g])
        take[members] = bool(allowed[members, d].all())
    take &= allowed[:, d]
    return np.flatnonzero(take)


class IncumbentGrid(NamedTuple):
    """What every move of one incumbent shares: its time grid, its integer schedule, its order."""

    #: ``n x k`` durations and ``m x k x k`` transfers on the grid (:data:`RESOLUTION` units per
    #: incumbent makespan), rounded up.
    dur_tab: np.ndarray
    comm_tab: np.ndarray
    #: The longest makespan on the grid a move may have: the incumbent's there, minus one unit.
    horizon: int
    #: The nodes by the incumbent's start (then end, then topological position).
    order: list


def incumbent_grid(problem: Problem, place: np.ndarray, start: np.ndarray) -> IncumbentGrid | None:
    """The grid every move of the incumbent ``(place, start)`` is solved on; None for a zero makespan.

    Parameters
    ----------
    problem : Problem
        The problem.
    place, start : ndarray
        The incumbent (a valid schedule, seconds).

    Returns
    -------
    IncumbentGrid or None
        The tables, the horizon and the order (None when the makespan is zero: nothing is shorter).
    """
    n = problem.n_nodes
    end = start + problem.duration(place)
    ms = float(end.max()) if n else 0.0
    if not ms > 0:
        return None
    scale = RESOLUTION / ms
    # Entries of devices a node may not use are infinite; they are never read (set to 0).
    dur_tab = np.ceil(np.nan_to_num(xc.durations(problem) * scale, posinf=0.0)).astype(np.int64)
    comm_tab = np.ceil(np.nan_to_num(xc.transfer_table(problem) * scale, posinf=0.0)).astype(np.int64)
    inc = integer_schedule(problem, place, start, dur_tab, comm_tab)
    horizon = int((inc + dur_tab[np.arange(n), place]).max()) - 1
    order = np.lexsort((problem.topo_rank, end, start)).tolist()
    return IncumbentGrid(dur_tab, comm_tab, horizon, order)


def retime_move(problem: Problem, place: np.ndarray, start: np.ndarray, nodes: np.ndarray, device: int, *,
                seconds: float, dtime: float, seed: int = 0,
                grid: IncumbentGrid | None = None) -> tuple[tuple | None, float]:
    """One move's CP-SAT sub-solve: ``nodes`` to ``device``, every start re-timed, a shorter makespan.

    Parameters
    ----------
    problem : Problem
        The problem.
    place, start : ndarray
        The incumbent (a valid schedule, seconds).
    nodes : ndarray
        The moved nodes (none on ``device`` yet, all allowed there).
    device : int
        Their new device.
    seconds : float
        Wall-clock cap of the solve.
    dtime : float
        CP-SAT deterministic seconds at most.
    seed : int
        CP-SAT's seed.
    grid : IncumbentGrid, optional
        :func:`incumbent_grid` of ``(place, start)``, when the caller tries several moves of it.

    Returns
    -------
    tuple
        ``(found, dtime)``: ``found`` is ``(placement, key, key_end)``, the new placement and
        the sub-solve's starts and ends on its grid (an order for
        :func:`~optpart.schedule.replay.tighten_schedule`), or None when the move cannot
        shorten the step (proven, or not found within the budget); ``dtime`` is the CP-SAT
        deterministic time the solve took (0 when the bounds alone ruled the move out).
    """
    from ortools.sat.python import cp_model

    grid = grid if grid is not None else incumbent_grid(problem, place, start)
    if grid is None:
        return None, 0.0
    n, m_edges = problem.n_nodes, problem.n_edges
    moved = np.zeros(n, dtype=bool)
    moved[nodes] = True
    new_place = place.copy()
    new_place[nodes] = device
    horizon = grid.horizon
    dur = grid.dur_tab[np.arange(n), new_place]
    comm = grid.comm_tab[np.arange(m_edges), new_place[problem.edge_src], new_place[problem.edge_dst]]
    # The hint: the incumbent's order replayed with the move (valid, usually a little long).
    hint = integer_schedule(problem, new_place, start, grid.dur_tab, grid.comm_tab)
    # Device chains of the nodes that stay, in the incumbent's order; heads and tails of that
    # fixed part (the moved nodes left out) bound every start.
    stay = [v for v in grid.order if not moved[v]]
    prev_on = np.full(n, -1, dtype=np.int64)
    last: dict = {}
    for v in stay:
        d = int(place[v])
        prev_on[v] = last.get(d, -1)
        last[d] = v
    head, tail = _heads_tails(problem, stay, prev_on, moved, dur, comm)
    m = cp_model.CpModel()
    S = [None] * n
    for v in range(n):
        hi = horizon - dur[v] if moved[v] else horizon - int(tail[v])
        lo = 0 if moved[v] else int(head[v])
        if hi < lo:
            return None, 0.0  # the part that stays is already too long
        S[v] = m.new_int_var(lo, hi, "")
        m.add_hint(S[v], int(min(max(hint[v], lo), hi)))
    dl = dur.tolist()
    for v in stay:
        u = int(prev_on[v])
        if u >= 0:
            m.add(S[v] >= S[u] + dl[u])
    src, dst = problem.edge_src.tolist(), problem.edge_dst.tolist()
    cl = comm.tolist()
    for e in range(m_edges):
        m.add(S[dst[e]] >= S[src[e]] + dl[src[e]] + cl[e])
    on_dev = [v for v in stay if place[v] == device] + np.flatnonzero(moved).tolist()
    m.add_no_overlap([m.new_fixed_size_interval_var(S[v], dl[v], "") for v in on_dev])
    span = m.new_int_var(0, horizon, "makespan")
    ends = set(last.values()) | set(np.flatnonzero(moved).tolist()) | \
        set(np.flatnonzero(np.diff(problem.out_ptr) == 0).tolist())
    for v in sorted(ends):
        m.add(span >= S[v] + dl[v])
    m.minimize(span)
    solver = cp_model.CpSolver()
    prm = solver.parameters
    prm.num_workers = 1
    prm.random_seed = int(seed)
    prm.max_deterministic_time = float(dtime)
    prm.linearization_level = 0  # measured: the LP only slows these pure scheduling models
    prm.cp_model_presolve = False
    # Every precedence here is unconditional, and the no-overlap's reasoning over precedences
    # between its intervals dominated the search (vit-b16's best move, measured: a first
    # solution after about 1 deterministic second and the proof after 2.2 with it; proven
    # optimal in 0.03 without).
    prm.use_precedences_in_disjunctive_constraint = False
    code = xc.solve_within(solver, m, seconds)
    used = float(solver.deterministic_time)
    if solver.status_name(code) not in ("OPTIMAL", "FEASIBLE"):
        return None, used
    key = np.array([solver.value(s) for s in S], dtype=np.float64)
    return (new_place, key, key + dur), used


def _heads_tails(problem: Problem, stay: list, prev_on: np.ndarray, moved: np.ndarray, dur: np.ndarray,
                 comm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Earliest starts and longest paths to the end (with the node's own time) of the part
    that stays: its precedences and device chains, the moved nodes and their edges left out
    (any schedule of the move keeps these paths, so they bound its starts from both sides)."""
    n = problem.n_nodes
    head = np.zeros(n, dtype=np.int64)
    tail = np.zeros(n, dtype=np.int64)
    next_on = np.full(n, -1, dtype=np.int64)
    for v in stay:
        if prev_on[v] >= 0:
            next_on[prev_on[v]] = v
    src, dst = problem.edge_src.tolist(), problem.edge_dst.tolist()
    in_ptr, in_e = problem.in_ptr.tolist(), problem.in_edges.tolist()
    out_ptr, out_e = problem.out_ptr.tolist(), problem.out_edges.tolist()
    mv, dl, cl = moved.tolist(), dur.tolist(), comm.tolist()
    hd, tl, pv, nx = [0] * n, [0] * n, prev_on.tolist(), next_on.tolist()
    for v in stay:
        u = pv[v]
        h = hd[u] + dl[u] if u >= 0 else 0
        for i in range(in_ptr[v], in_ptr[v + 1]):
            e = in_e[i]
            u = src[e]
            if not mv[u] and hd[u] + dl[u] + cl[e] > h:
                h = hd[u] + dl[u] + cl[e]
        hd[v] = h
    for v in reversed(stay):
        w = nx[v]
        t = tl[w] if w >= 0 else 0
        for i in range(out_ptr[v], out_ptr[v + 1]):
            e = out_e[i]
            w = dst[e]
            if not mv[w] and cl[e] + tl[w] > t:
                t = cl[e] + tl[w]
        tl[v] = dl[v] + t
    head[:] = hd
    tail[:] = tl
    return head, tail


def improve_units(problem: Problem, place: np.ndarray, start: np.ndarray, budget: xc.Budget, *,
                  memory_model: str, reserve: float, seed: int = 0, max_seconds: float = math.inf,
                  max_dtime: float | None = None, log=None) -> tuple[np.ndarray, np.ndarray, dict]:
    """Improve a valid schedule by unit moves until a full pass finds nothing or the budget ends.

    Parameters
    ----------
    problem : Problem
        The problem.
    place, start : ndarray
        The incumbent: device and start (seconds) of every node, valid under ``memory_model``.
    budget : Budget
        The call's wall-clock budget; the moves stop ``reserve`` seconds before its end.
    memory_model : str
        ``"static"`` or ``"peak"``: the model every accepted schedule respects.
    reserve : float
        Seconds of the budget kept for the caller.
    seed : int
        CP-SAT's seed.
    max_seconds : float
        Wall seconds the moves may take at most (the caller's share for them; ignored under
        ``max_dtime``).
    max_dtime : float, optional
        A deterministic budget: the moves stop once their CP-SAT deterministic seconds (plus
        :data:`BUILD_DTIME_PER_ITEM` per node and edge for each model built) add up to it,
        and no move is cut short by the wall clock, so that runs repeat.
    log : callable, optional
        Called with one progress line per improvement.

    Returns
    -------
    tuple
        ``(place, start, stats)``: the best schedule (the incumbent when no move shortened it)
        and ``unit_solves``, ``unit_improvements``, ``unit_failed_memory``,
        ``unit_start_makespan``, ``unit_end_makespan``.
    """
    place = np.asarray(place, dtype=np.int64).copy()
    start = np.asarray(start, dtype=np.float64).copy()
    ms = float((start + problem.duration(place)).max()) if problem.n_nodes else 0.0
    stats = {"unit_solves": 0, "unit_improvements": 0, "unit_failed_memory": 0, "unit_start_makespan": ms}
    anchor, forward_order = anchors_of(problem)
    used = 0.0
    # Under a deterministic budget only the call's own limit may cut the moves short.
    stop = budget.elapsed() + (max_seconds if max_dtime is None else math.inf)
    moves, grid = unit_moves(problem, anchor, forward_order, place, start), incumbent_grid(problem, place, start)
    while grid is not None and (move := next(moves, None)) is not None:
        wall = min(budget.left() - reserve, stop - budget.elapsed())
        if wall <= 0.1 or (max_dtime is not None and used >= max_dtime):
            break
        nodes, d = move
        dtime = MOVE_DTIME if max_dtime is None else min(MOVE_DTIME, max_dtime - used)
        got, spent = retime_move(problem, place, start, nodes, d, seconds=wall if max_dtime is not None else
                                 min(wall, MOVE_WALL_S), dtime=dtime, seed=seed + stats["unit_solves"], grid=grid)
        stats["unit_solves"] += 1
        used += spent + BUILD_DTIME_PER_ITEM * (problem.n_nodes + problem.n_edges)
        if got is None:
            continue
        verdict, new_place, new_start, new_ms = xc.replay_if_shorter(problem, got, ms, memory_model)
        stats["unit_failed_memory"] += int(verdict == "memory")
        if verdict != "kept":
            continue
        place, start, ms = new_place, new_start, new_ms
        stats["unit_improvements"] += 1
        if log is not None:
            log(f"cpsat unit moves: {stats['unit_solves']} solved, makespan {ms:.6g} s ({budget.elapsed():.1f} s)")
        # From the new schedule:
        moves, grid = unit_moves(problem, anchor, forward_order, place, start), incumbent_grid(problem, place, start)
    stats["unit_end_makespan"] = ms
    return place, start, stats
