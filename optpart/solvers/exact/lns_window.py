"""Window large-neighbourhood search for graphs whose full exact model is too big.

When the CP-SAT model of the whole graph cannot be built (or searched usefully) within the
time limit, ``cpsat`` improves the incumbent schedule window by window. A **window** is a
slab of the schedule: the ``size`` nodes that start next in the incumbent's order (sorted
by start, then topological position, so every predecessor of a window node is in the
window or before it). Each window is a real exact sub-solve on CP-SAT:

* window nodes may move to any allowed device (nodes of a colocation group only when the
  whole group is in the window; otherwise they keep their device but may be re-timed) and
  are re-timed inside the slab ``[first start, last finish]``;
* everything else keeps its device and start: fixed predecessors give release times and
  fixed successors deadlines (both with the transfer the chosen device implies), fixed
  nodes that overlap the slab occupy their device (one no-overlap per device);
* static memory: the window's nodes fit what the fixed nodes leave on each device; under
  the peak model every accepted move is re-checked with the liveness model instead;
* the objective is the longest path leaving the window: ``max(end(v) + q(v, d))``, with
  ``q`` the tail of the incumbent's schedule graph (precedence and device order) after
  each fixed successor, or after the next fixed node on the device.

The window's schedule with the fixed rest is a valid schedule, so replaying its device
orders (:func:`~optpart.schedule.replay.tighten_schedule`, in seconds, the model's own
arithmetic) never delays a node; the replayed schedule is kept only when its makespan is
shorter and it fits memory. Windows are taken where the incumbent's critical path runs
(windows without a critical node are skipped) and slide by half a window; after a full
pass without an improvement the window doubles (up to ``max_size``), and at that size the
windows start small again with four times the deterministic budget (up to
``MAX_WINDOW_DTIME``).

Times are integers of ``1e-5`` of the incumbent's makespan, every quantity rounded down, so
the incumbent itself is a solution of every window (``floor(a) + floor(b) <= floor(a + b)``);
a window's answer may be off by a unit per node, which the replay in seconds removes.

References: P. Shaw, "Using constraint programming and local search methods to solve
vehicle routing problems", CP 1998 (LNS); D. Pisinger, S. Ropke, "Large neighborhood
search", Handbook of Metaheuristics, 2010; time-window decompositions for scheduling as
in Godard, Laborie, Nuijten, ICAPS 2005.
"""

from __future__ import annotations

import math

import numpy as np

from ...model.memory import memory_timeline
from ...model.problem import Problem
from ...schedule.replay import schedule_tails
from . import _exact_common as xc
from .lns_units import improve_units
from .window_start import best_start

__all__ = ["improve_windows", "schedule_tails"]

#: Time units per incumbent makespan. Finer grids (10**7 before) left every window a slack of
#: rounding units that CP-SAT spent its budget shaving one unit at a time; at 10**5 a window
#: of the bundled graphs finds as many or more real improvements in the same budget.
RESOLUTION = 10**5
#: Wall seconds a window of ``WINDOW_DTIME`` may take at most (in proportion for larger
#: budgets) without a deterministic budget; its deterministic budget usually ends it first.
WINDOW_WALL_S = 3.0
#: CP-SAT deterministic seconds per window at first; after a pass without gain at the largest
#: window size, windows start small again with four times the budget, up to the maximum.
WINDOW_DTIME = 0.1
MAX_WINDOW_DTIME = 1.6
#: Time bins of the peak headroom rows (room per device and bin, from the incumbent's timeline).
HEADROOM_BINS = 32
#: Share of the time left (or of a deterministic budget) the unit moves of
#: :mod:`optpart.solvers.exact.lns_units` may take before the windows; they stop sooner when a
#: full pass finds nothing.
UNITS_SHARE = 0.5
#: The region bound's CP-SAT deterministic seconds: this share of the call's time limit, at most the maximum.
REGION_SHARE = 0.05
REGION_DTIME_MAX = 20.0


def improve_windows(problem: Problem, place: np.ndarray, start: np.ndarray, budget: xc.Budget, *,
                    memory_model: str, reserve: float, seed: int = 0, size: int = 200, max_size: int = 800,
                    window_dtime: float = WINDOW_DTIME, max_windows: int | None = None,
                    log=None) -> tuple[np.ndarray, np.ndarray, dict]:
    """Improve a valid schedule window by window until the budget (or ``max_windows``) ends.

    Parameters
    ----------
    problem : Problem
        The problem.
    place, start : ndarray
        The incumbent: device and start (seconds) of every node, valid under ``memory_model``.
    budget : Budget
        The call's wall-clock budget.
    memory_model : str
        ``"static"`` or ``"peak"``: the model every accepted schedule respects.
    reserve : float
        Seconds of the budget kept for the caller.
    seed : int
        CP-SAT's seed (plus the window's number).
    size, max_size : int
        Nodes per window at first and at most (windows double after a pass without gain).
    window_dtime : float
        CP-SAT deterministic seconds per window at first (the reproducible budget).
    max_windows : int, optional
        Cap on the windows solved (tests); default until the budget ends.
    log : callable, optional
        Called with one progress line per improvement.

    Returns
    -------
    tuple
        ``(place, start, stats)``: the best schedule found (the incumbent when nothing
        improved it) and statistics (``window_solves``, ``window_improvements``,
        ``window_start_makespan``, ``window_end_makespan``).
    """
    n = problem.n_nodes
    place = np.asarray(place, dtype=np.int64).copy()
    start = np.asarray(start, dtype=np.float64).copy()
    dur_s = xc.durations(problem)
    comm_s = xc.transfer_table(problem)
    ms = float((start + problem.duration(place)).max())
    stats = {"window_solves": 0, "window_improvements": 0, "window_start_makespan": ms,
             "window_failed_memory": 0}
    size = size0 = max(2, min(size, n))
    cursor, since = 0, 0
    while (max_windows is None or stats["window_solves"] < max_windows) and budget.left() > reserve + 0.3:
        end = start + problem.duration(place)
        tail = schedule_tails(problem, place, start)
        order = np.lexsort((problem.topo_rank, start))
        crit = np.abs(start + tail - ms) <= 1e-9 * ms
        if cursor >= n:
            cursor = 0
        win = order[cursor:cursor + size]
        cursor += max(1, size // 2)
        since += 1
        if since > 2 * n // size + 2:  # a full pass without gain: wider windows, then deeper searches
            if size < min(max_size, n):
                size, since = min(max_size, n, 2 * size), 0
            elif window_dtime < MAX_WINDOW_DTIME:
                size, since, window_dtime = size0, 0, 4 * window_dtime
            else:
                break
        if not crit[win].any():
            continue
        got = _solve_window(problem, place, start, end, tail, win, dur_s, comm_s, ms, budget, reserve,
                            memory_model, seed + stats["window_solves"], window_dtime, wall_cap=max_windows is None)
        stats["window_solves"] += 1
        if got is None:
            continue
        verdict, new_place, new_start, new_ms = xc.replay_if_shorter(problem, got, ms, memory_model)
        stats["window_failed_memory"] += int(verdict == "memory")
        if verdict != "kept":
            continue
        place, start, ms = new_place, new_start, new_ms
        stats["window_improvements"] += 1
        since = 0
        if log is not None:
            log(f"cpsat windows: {stats['window_solves']} solved, makespan {ms:.6g} s "
                f"({budget.elapsed():.1f} s)")
    stats["window_end_makespan"] = ms
    stats["window_size"] = size
    return place, start, stats


def _solve_window(problem: Problem, place, start, end, tail, win, dur_s, comm_s, ms, budget, reserve,
                  memory_model, seed, dtime, wall_cap: bool = True):
    """One window's CP-SAT sub-solve: ``(placement, key, key_end)`` in seconds, or None.

    ``wall_cap``: also stop the window after :data:`WINDOW_WALL_S` per ``WINDOW_DTIME``
    deterministic seconds; off under a deterministic budget, where only the call's own time
    limit may cut a window short, so that the answer does not depend on the machine's speed."""
    from ortools.sat.python import cp_model

    n, k = problem.n_nodes, problem.n_devices
    scale = RESOLUTION / ms

    def down(seconds: float) -> int:
        return int(math.floor(seconds * scale))
    in_win = np.zeros(n, dtype=bool)
    in_win[win] = True
    t_lo, t_hi = float(start[win].min()), float(end[win].max())
    lo_u, hi_u = down(t_lo), down(t_hi)
    # Free nodes: their device may change (colocation groups only when whole in the window).
    free = in_win.copy()
    group_of = problem.group_of
    for g in np.unique(group_of[win]).tolist():
        if g >= 0 and not in_win[problem.groups[g]].all():
            free[problem.groups[g]] = False
    leader = np.arange(n)
    for g in np.unique(group_of[win]).tolist():
        if g >= 0 and free[problem.groups[g][0]]:
            leader[problem.groups[g]] = int(problem.groups[g][0])
    allowed = problem.allowed
    m = cp_model.CpModel()
    x: dict = {}
    shared: dict = {}  # (leader, device) -> literal: a free group shares one choice
    S, E = {}, {}
    ivs = [[] for _ in range(k)]
    wl = win.tolist()
    for v in wl:
        devs = [d for d in range(k) if allowed[v, d]] if free[v] else [int(place[v])]
        S[v] = m.new_int_var(lo_u, hi_u, f"s{v}")
        E[v] = m.new_int_var(lo_u, hi_u, f"e{v}")
        first = (int(leader[v]), devs[0]) not in shared or not free[v]
        lits = []
        for d in devs:
            key = (int(leader[v]) if free[v] else v, d)
            if key not in shared:
                shared[key] = m.new_bool_var(f"x{v}_{d}")
                m.add_hint(shared[key], int(place[v] == d))
            x[v, d] = lit = shared[key]
            lits.append(lit)
            p = down(dur_s[v, d])
            m.add(E[v] == S[v] + p).only_enforce_if(lit)
            ivs[d].append(m.new_optional_interval_var(S[v], p, E[v], lit, f"i{v}_{d}"))
        if first:
            m.add_exactly_one(lits)
        m.add_hint(S[v], down(start[v]))
    # Fixed nodes overlapping the slab occupy their device.
    over = np.flatnonzero(~in_win & (start < t_hi) & (end > t_lo))
    for v in over.tolist():
        a = down(start[v])
        b = min(hi_u, a + down(end[v] - start[v]))
        a = max(lo_u, a)
        if b > a:
            ivs[int(place[v])].append(m.new_fixed_size_interval_var(a, b - a, f"f{v}"))
    for d in range(k):
        if len(ivs[d]) > 1:
            m.add_no_overlap(ivs[d])
    # Precedence: inside the window, and release / deadline from the fixed rest.
    obj = m.new_int_var(lo_u, hi_u + down(float(tail.max())) + 1, "obj")
    src, dst = problem.edge_src, problem.edge_dst
    in_ptr, in_e = problem.in_ptr, problem.in_edges
    out_ptr, out_e = problem.out_ptr, problem.out_edges
    # The next fixed node on each device after the slab: its tail follows any window node there.
    after = np.flatnonzero(~in_win & (start >= t_hi))
    next_tail = np.zeros(k)
    for d in range(k):
        on = after[place[after] == d]
        if on.size:
            next_tail[d] = float(tail[on[np.argmin(start[on])]])
    for v in wl:
        for e in in_e[in_ptr[v]:in_ptr[v + 1]].tolist():
            u = int(src[e])
            for d in range(k):
                if (v, d) not in x:
                    continue
                if in_win[u]:
                    for a in range(k):
                        if (u, a) not in x:
                            continue
                        c = down(comm_s[e, a, d]) if a != d else 0
                        m.add(S[v] >= E[u] + c).only_enforce_if([x[u, a], x[v, d]])
                else:
                    m.add(S[v] >= down(end[u] + comm_s[e, place[u], d])).only_enforce_if(x[v, d])
        for d in range(k):
            if (v, d) not in x:
                continue
            q = next_tail[d]
            for e in out_e[out_ptr[v]:out_ptr[v + 1]].tolist():
                w = int(dst[e])
                if not in_win[w]:
                    c = float(comm_s[e, d, place[w]])
                    m.add(E[v] + down(c) <= down(start[w])).only_enforce_if(x[v, d])
                    q = max(q, c + float(tail[w]))
            m.add(obj >= E[v] + down(q)).only_enforce_if(x[v, d])
    _static_rows(problem, m, x, leader, free, place, memory_model)
    if memory_model == "peak" and problem.has_split:
        _peak_rows(problem, m, x, free, place, start, end, in_win, t_hi)
    m.minimize(obj)
    solver = cp_model.CpSolver()
    prm = solver.parameters
    prm.num_workers = 1
    prm.random_seed = int(seed)
    prm.max_deterministic_time = float(dtime)
    prm.presolve_inclusion_work_limit = 0  # google/or-tools#5293
    prm.cp_model_presolve = False  # measured: as good or better per window without it (docs/exact.md)
    wall = budget.left() - reserve
    code = xc.solve_within(solver, m, min(wall, WINDOW_WALL_S * dtime / WINDOW_DTIME) if wall_cap else wall)
    if solver.status_name(code) not in ("OPTIMAL", "FEASIBLE"):
        return None
    new_place = place.copy()
    key = start.copy()
    key_end = end.copy()
    for v in wl:
        d = next(d for d in range(k) if (v, d) in x and solver.boolean_value(x[v, d]))
        new_place[v] = d
        key[v] = solver.value(S[v]) / scale
        key_end[v] = solver.value(E[v]) / scale
    return new_place, key, key_end


def _headroom(problem: Problem, place: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple:
    """``(edges, room)``: :data:`HEADROOM_BINS` equal time bins over the step and, per device
    and bin, its capacity minus the most the incumbent holds there (liveness model)."""
    ms = float(end.max())
    edges = np.linspace(0.0, ms, HEADROOM_BINS + 1)
    room = np.zeros((problem.n_devices, HEADROOM_BINS))
    for d, (times, level) in enumerate(memory_timeline(problem, place, start, end)):
        lo = np.maximum(0, np.searchsorted(times, edges[:-1], side="right") - 1)
        hi = np.maximum(lo, np.searchsorted(times, edges[1:], side="left") - 1)
        top = np.array([level[a:b + 1].max() for a, b in zip(lo.tolist(), hi.tolist())])
        room[d] = problem.device_memory[d] - top
    return edges, room


def _peak_rows(problem: Problem, m, x: dict, free: np.ndarray, place: np.ndarray, start: np.ndarray,
               end: np.ndarray, in_win: np.ndarray, t_hi: float) -> None:
    """Under peak: what moved nodes bring to a device fits the headroom the incumbent leaves
    there, bin by bin of time (:func:`_headroom`).

    A node moved onto ``d`` brings its parameters (every bin), its temporaries and output
    from the slab's start until its last consumer outside the window ends (or the step's end
    without consumers), and a copy of each input from its arrival until the slab's end plus
    the transfer; its old device holds a copy of its output for fixed successors left there.
    Re-timing alone can also lengthen lifetimes, so every accepted schedule is re-checked.
    """
    cap = problem.device_memory
    edges, room = _headroom(problem, place, start, end)
    ms = float(edges[-1])
    out_b, tmp_b, par_b = problem.output_bytes, problem.temp_bytes, problem.param_bytes
    src, dst = problem.edge_src, problem.edge_dst
    comm = xc.transfer_table(problem)
    t_lo = float(start[in_win].min())
    slack = float(comm.max()) if comm.size else 0.0

    def bins(a: float, b: float) -> range:
        return range(max(0, int(np.searchsorted(edges, a, side="right")) - 1),
                     min(HEADROOM_BINS, int(np.searchsorted(edges, b, side="left")) + 1))
    rows: dict = {}
    for (v, dd), lit in x.items():
        if not free[v]:
            continue
        outs = problem.out_edges[problem.out_ptr[v]:problem.out_ptr[v + 1]]
        fixed_out = outs[~in_win[dst[outs]]]
        life = max([t_hi + slack] + end[dst[fixed_out]].tolist()) if outs.size else ms
        if dd != place[v]:
            terms = [(par_b[v], range(HEADROOM_BINS)), (out_b[v] + tmp_b[v], bins(t_lo, life))]
            for e in problem.in_edges[problem.in_ptr[v]:problem.in_ptr[v + 1]].tolist():
                u = int(src[e])
                arrive = t_lo if in_win[u] else float(end[u] + comm[e, place[u], dd])
                if out_b[u] > 0 and (in_win[u] or place[u] != dd):
                    terms.append((out_b[u], bins(min(arrive, t_lo), t_hi + slack)))
            for size, span in terms:
                for b in span if size > 0 else ():
                    rows.setdefault((dd, b), []).append(int(math.ceil(size)) * lit)
        elif out_b[v] > 0:  # its device now: if it leaves, successors left here need a copy
            here = fixed_out[place[dst[fixed_out]] == dd]
            if here.size or fixed_out.size < outs.size:
                until = max([t_hi + slack] + end[dst[here]].tolist())
                for b in bins(t_lo, until):
                    rows.setdefault((dd, b), []).append(int(math.ceil(out_b[v])) * (1 - lit))
    for (d, b), terms in rows.items():
        if np.isfinite(cap[d]):
            m.add(sum(terms) <= max(0, int(math.floor(room[d, b]))))


def _static_rows(problem: Problem, m, x: dict, leader: np.ndarray, free: np.ndarray, place: np.ndarray,
                 memory_model: str) -> None:
    """Static memory of the free nodes within what the fixed nodes leave (static model only;
    under peak see :func:`_peak_rows`)."""
    if memory_model == "peak" and problem.has_split:
        return
    cap = problem.device_memory
    fixed = ~free
    used = np.bincount(place[fixed], weights=problem.memory[fixed], minlength=problem.n_devices)
    for d in range(problem.n_devices):
        if not np.isfinite(cap[d]):
            continue
        terms = [(int(v), lit) for (v, dd), lit in x.items() if dd == d and free[v]]
        if not terms:
            continue
        mem = problem.memory
        room = float(cap[d]) - float(used[d])
        if float(sum(mem[v] for v, _ in terms)) <= room:
            continue
        m.add(sum(int(math.ceil(mem[v])) * lit for v, lit in terms) <= int(math.floor(room)))


def solve_by_windows(problem: Problem, incumbent, memory_model: str, budget: xc.Budget, reserve: float,
                     why: str, stats: dict, *, seed: int = 0, size: int = 200,
                     deterministic_time: float | None = None, log: bool = False):
    """``cpsat``'s answer on a graph whose full model is not built: the incumbent improved by
    unit moves (:func:`~optpart.solvers.exact.lns_units.improve_units`, at most
    :data:`UNITS_SHARE` of the time left) and then by windows.

    Parameters
    ----------
    problem : Problem
        The problem.
    incumbent : Solution or None
        The heuristic's answer (valid under ``memory_model``).
    memory_model : str
        ``"static"`` or ``"peak"``.
    budget : Budget
        The call's budget.
    reserve : float
        Seconds kept for the caller.
    why : str
        Why the full model is not built (kept in the message).
    stats : dict
        The call's statistics (updated).
    seed : int
        CP-SAT's seed.
    size : int
        Nodes per window at first.
    deterministic_time : float, optional
        A deterministic budget (reproducible): :data:`UNITS_SHARE` of it for the unit moves'
        CP-SAT deterministic seconds, then one window per ``WINDOW_DTIME`` of the rest.
    log : bool
        Print one line per improvement.

    Returns
    -------
    Solution
        Status ``feasible``, the best schedule found and the best bound of
        :mod:`optpart.solvers.exact.proven_bounds` (its parts in ``stats["bounds"]``).
    """
    from ...result import Status
    from ..base import Solution
    from .proven_bounds import proven_bound

    heuristic = incumbent
    incumbent, origin = best_start(problem, incumbent, memory_model, budget, reserve, stats, seed=seed,
                                   deterministic_time=deterministic_time)
    # The bounds before the windows: their CP-SAT budget is deterministic, a share of the call's.
    region_dtime = min(REGION_DTIME_MAX, REGION_SHARE * budget.limit_s)
    bound = proven_bound(problem, memory_model, region_dtime=region_dtime, stats=stats)
    if incumbent is None:
        return xc.fallback(problem, heuristic, memory_model, why, stats, lower_bound=bound)
    # Unit moves first (stage boundaries shifted, the whole step re-timed), at most UNITS_SHARE
    # of the time left (or of the deterministic budget), then windows in the rest.
    units_dtime = None if deterministic_time is None else UNITS_SHARE * deterministic_time
    place, start, ust = improve_units(problem, incumbent.placement, incumbent.start, budget,
                                      memory_model=memory_model, reserve=reserve, seed=seed,
                                      max_seconds=UNITS_SHARE * max(0.0, budget.left() - reserve),
                                      max_dtime=units_dtime, log=print if log else None)
    stats.update(ust)
    limit = None if deterministic_time is None else \
        max(1, int((1 - UNITS_SHARE) * deterministic_time / WINDOW_DTIME))
    place, start, wst = improve_windows(problem, place, start, budget,
                                        memory_model=memory_model, reserve=reserve, seed=seed, size=size,
                                        max_windows=limit, log=print if log else None)
    stats.update(wst)
    if not wst["window_improvements"] and not ust["unit_improvements"] and origin == "heuristic":
        stats["stop_reason"] = "model not built"
        return xc.fallback(problem, incumbent, memory_model, f"{why}; {ust['unit_solves']} unit moves and "
                           f"{wst['window_solves']} windowed sub-solves found nothing shorter", stats,
                           lower_bound=bound)
    stats["stop_reason"] = "deterministic time limit" if limit is not None and \
        wst["window_solves"] >= limit else "time limit"
    ms0, ms = ust["unit_start_makespan"], wst["window_end_makespan"]
    bound = min(max(bound, float(incumbent.lower_bound or 0.0)), ms)
    msg = (f"{why}; started from the {origin}'s schedule (makespan {ms0:.6g} s), which CP-SAT sub-solves "
           f"improved by {100 * (ms0 - ms) / ms0:.2f}% ({ust['unit_improvements']} of {ust['unit_solves']} "
           f"unit moves, {wst['window_improvements']} of {wst['window_solves']} windows of up to "
           f"{wst['window_size']} nodes)")
    return Solution(Status.FEASIBLE, placement=place, start=start, lower_bound=bound, message=msg,
                    memory_model=memory_model, stats=stats)
