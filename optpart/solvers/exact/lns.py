"""Large-neighbourhood search: CP-SAT sub-solves around an incumbent schedule.

* :func:`improve`: on the full model (100 to 600 nodes), each round frees a window of the
  topological order (or two devices within a wider one), freezes the rest of the placement and
  the starts well before the window, and asks for a strictly shorter makespan.
* On graphs whose full model is not built (:func:`solve_by_windows`): the best start
  (``_best_start``: the heuristic, the pipeline-stage placement, a deeper heuristic run),
  then **unit moves** (:func:`improve_units`): a stage boundary shifted by ``r`` forward
  positions with the backward nodes anchored there, every start re-timed by one exact
  sub-solve of the whole step; then **windows** (:func:`improve_windows`): a slab of the
  schedule re-placed and re-timed with the rest fixed.

Every sub-solve's answer is replayed in seconds in its order (never later than the
sub-solve's schedule) and kept only when shorter and within memory under the requested model.

References: P. Shaw, CP 1998 (LNS); Pisinger and Ropke, Handbook of Metaheuristics (2010);
Godard, Laborie and Nuijten, ICAPS 2005 (time windows).
"""

from __future__ import annotations

import math
import time

import numpy as np

from ...model.memory import memory_timeline
from ...model.problem import Problem
from ...result import Status
from ...schedule.replay import integer_schedule, schedule_tails
from ..base import Solution
from ..incumbent import offer
from ..heuristic.stage_seed import forward_set, stage_anchors, stage_seed
from .bounds import bound_parts
from .call import Budget, fallback, solution_makespan, solve_within
from .decode import replay_if_shorter
from .grid import durations, transfer_table

#: Windows: time units per incumbent makespan (a coarser grid than the moves': finer ones left
#: slack that CP-SAT shaved one unit at a time), wall seconds per ``WINDOW_DTIME`` at most,
#: deterministic seconds per window at first and at most, and time bins of the peak headroom rows.
WINDOW_RESOLUTION, WINDOW_WALL_S, WINDOW_DTIME, MAX_WINDOW_DTIME, HEADROOM_BINS = 10**5, 3.0, 0.1, 1.6, 32
#: Unit moves: time units per incumbent makespan, forward positions moved, deterministic and wall
#: seconds per move at most, deterministic seconds charged per node and edge of a move's model
#: (built in Python: without it a deterministic budget would not bound the moves' count).
MOVE_RESOLUTION, RADII, MOVE_DTIME, MOVE_WALL_S, BUILD_DTIME_PER_ITEM = 10**7, (1, 2, 4, 8, 16, 32), 0.2, 5.0, 1e-5
#: Shares of the time left: unit moves, the stage search, the deeper heuristic; its effort per
#: ``DEEP_SECONDS_PER_EFFORT`` s up to ``MAX_DEEP_EFFORT``; the region bound's deterministic seconds.
UNITS_SHARE, SEED_SHARE, DEEP_SHARE, DEEP_SECONDS_PER_EFFORT, MAX_DEEP_EFFORT = 0.5, 0.15, 0.6, 5.0, 8.0
REGION_SHARE, REGION_DTIME_MAX = 0.05, 20.0


def improve(data, mv, place: np.ndarray, start_units: np.ndarray, budget: Budget, *, reserve: float, seed: int,
            round_dtime: float = 0.5, window: int = 24, max_rounds: int | None = None,
            workers: int = 1) -> tuple[np.ndarray, np.ndarray, dict]:
    """LNS on the full model from ``(place, start_units)`` (a schedule of it) until the budget ends.

    Parameters
    ----------
    data : CpData
    mv : CpModelVars
    place, start_units : numpy.ndarray
        The start: device and start (units) per node.
    budget : Budget
    reserve : float
    seed : int
    round_dtime : float
        Deterministic seconds per round.
    window : int
        Nodes freed per round at first (doubled after a pass without gain).
    max_rounds : int, optional
        Cap on rounds.
    workers : int
        CP-SAT workers per round.

    Returns
    -------
    tuple
        Placement, integer starts, and ``lns_rounds``, ``lns_improvements``, ``lns_start_units``,
        ``lns_end_units``.
    """
    from ortools.sat.python import cp_model
    problem = data.problem
    n, k, dur = problem.n_nodes, problem.n_devices, data.dur
    rng = np.random.default_rng(seed)
    pos = problem.topo_rank
    place, start = np.asarray(place, dtype=np.int64).copy(), np.asarray(start_units, dtype=np.int64).copy()
    best = int((start + dur[np.arange(n), place]).max())
    stats = {"lns_rounds": 0, "lns_improvements": 0, "lns_start_units": best}
    w, cursor, since = max(4, min(window, n)), 0, 0
    while (max_rounds is None or stats["lns_rounds"] < max_rounds) and budget.left() > reserve + 0.05:
        pair = None
        if k >= 2 and stats["lns_rounds"] % 2 == 1:
            pair = tuple(int(d) for d in rng.choice(k, size=2, replace=False))
        lo, hi = cursor, min(n, cursor + (w if pair is None else 2 * w))
        win = problem.topo[lo:hi]
        free = np.zeros(n, dtype=bool)
        free[win if pair is None else win[np.isin(place[win], pair)]] = True
        check = mv.model.clone()
        check.clear_hints()
        var = check.proto.variables
        for (v, d), lit in mv.x.items():
            dom = var[lit.index].domain
            if data.leader[v] == v and not free[v] and dom[0] <= int(place[v] == d) <= dom[-1]:
                dom[0] = dom[-1] = int(place[v] == d)
        ends = start + dur[np.arange(n), place]
        for v in np.flatnonzero((pos < max(0, lo - w)) & ~free).tolist():  # the past is frozen
            for iv, val in ((mv.S[v].index, int(start[v])), (mv.E[v].index, int(ends[v]))):
                dom = var[iv].domain
                if len(dom) == 2 and dom[0] <= val <= dom[1]:
                    dom[0] = dom[1] = val
        dom = var[mv.makespan.index].domain
        if best - 1 < dom[0]:
            break  # the incumbent meets the makespan's lower end
        dom[len(dom) - 1] = min(int(dom[len(dom) - 1]), best - 1)
        for (v, d), lit in mv.x.items():
            if data.leader[v] == v:
                check.add_hint(check.get_bool_var_from_proto_index(lit.index), int(place[v] == d))
        solver = cp_model.CpSolver()
        prm = solver.parameters
        prm.num_workers, prm.random_seed = int(workers), int(seed) + stats["lns_rounds"]
        prm.max_deterministic_time, prm.presolve_inclusion_work_limit = float(round_dtime), 0
        code = solve_within(solver, check, budget.left() - reserve)
        stats["lns_rounds"] += 1
        if solver.status_name(code) in ("OPTIMAL", "FEASIBLE"):
            new_start = np.array([solver.value(mv.S[v]) for v in range(n)], dtype=np.int64)
            new_place = np.array([next(d for d in range(k) if (data.leader[v], d) in mv.x
                                       and solver.boolean_value(mv.x[data.leader[v], d])) for v in range(n)])
            ms = int((new_start + dur[np.arange(n), new_place]).max())
            if ms < best:
                place, start, best = new_place, new_start, ms
                offer(place)  # kept if the solve is interrupted (integer starts: the canonical schedule)
                stats["lns_improvements"] += 1
                since = 0
        since += 1
        cursor = hi if hi < n else 0
        if cursor == 0 and since > max(1, n // w):
            w, since = min(n, 2 * w), 0
    stats["lns_end_units"] = best
    return place, start, stats


def _best_start(problem: Problem, incumbent: Solution | None, memory_model: str, budget: Budget, reserve: float,
               stats: dict, *, seed: int = 0, deterministic_time: float | None = None) -> tuple[Solution | None, str]:
    """The shortest of the heuristic's schedule, the pipeline-stage placement and, when the time
    left affords effort 2 or more, the heuristic again with more effort, hinted with its first
    placement (under ``deterministic_time`` its effort comes from that budget, so runs repeat)."""
    def makespan(sol):
        return float("inf") if sol is None or sol.placement is None or sol.start is None \
            else solution_makespan(problem, sol)
    best, origin, best_ms = incumbent, "heuristic", makespan(incumbent)
    left = max(0.0, budget.left() - reserve)
    seeded = stage_seed(problem, memory_model, deadline=time.perf_counter() +
                        (left if deterministic_time is not None else SEED_SHARE * left))
    if seeded is not None:
        stats["stage_seed_makespan"] = ms = float((seeded[1] + problem.duration(seeded[0])).max())
        if ms < best_ms * (1 - 1e-12):
            best = Solution(Status.FEASIBLE, placement=seeded[0], start=seeded[1], memory_model=memory_model,
                            lower_bound=0.0)
            best_ms, origin = ms, "stage seed"
    share = DEEP_SHARE * max(0.0, budget.left() - reserve)
    effort = min(MAX_DEEP_EFFORT, (share if deterministic_time is None else deterministic_time) / DEEP_SECONDS_PER_EFFORT)
    if effort >= 2.0 and incumbent is not None and incumbent.placement is not None:
        from .. import heuristic
        deep = heuristic.solve(problem, time_limit=share if deterministic_time is None else
                               max(0.0, budget.left() - reserve), seed=seed, hint=incumbent.placement,
                               memory_model=memory_model, effort=effort)
        ms = makespan(deep)
        if np.isfinite(ms):
            stats.update(deep_heuristic_makespan=ms, deep_heuristic_effort=effort)
        if ms < best_ms * (1 - 1e-12):
            best, best_ms, origin = deep, ms, "deep heuristic"
    stats["start_from"] = origin
    return (best if np.isfinite(best_ms) else None), origin


def solve_by_windows(problem: Problem, incumbent: Solution | None, memory_model: str, budget: Budget, reserve: float,
                     why: str, stats: dict, *, seed: int = 0, size: int = 200,
                     deterministic_time: float | None = None, log: bool = False) -> Solution:
    """``cpsat``'s answer when the full model is not built: the best start improved by unit moves
    (at most ``UNITS_SHARE`` of the time left) then windows, with the best of
    :func:`~optpart.solvers.exact.bounds.bound_parts` (``stats["bounds"]``).

    Parameters
    ----------
    problem : Problem
    incumbent : Solution or None
    memory_model : str
    budget : Budget
    reserve : float
    why : str
        Why the full model is not built.
    stats : dict
    seed : int
    size : int
        Nodes per window at first.
    deterministic_time : float, optional
        A deterministic budget: ``UNITS_SHARE`` for the moves, one window per ``WINDOW_DTIME`` of the rest.
    log : bool

    Returns
    -------
    Solution
    """
    heuristic = incumbent
    incumbent, origin = _best_start(problem, incumbent, memory_model, budget, reserve, stats, seed=seed,
                                   deterministic_time=deterministic_time)
    stats["bounds"] = bound_parts(problem, memory_model,
                                  region_dtime=min(REGION_DTIME_MAX, REGION_SHARE * budget.limit_s))
    bound = max(stats["bounds"].values())
    if incumbent is None:
        return fallback(problem, heuristic, memory_model, why, stats, lower_bound=bound)
    say = print if log else None
    place, start, ust = improve_units(problem, incumbent.placement, incumbent.start, budget, memory_model=memory_model,
                                      reserve=reserve, seed=seed,
                                      max_seconds=UNITS_SHARE * max(0.0, budget.left() - reserve),
                                      max_dtime=None if deterministic_time is None else UNITS_SHARE * deterministic_time,
                                      log=say)
    stats.update(ust)
    limit = None if deterministic_time is None else max(1, int((1 - UNITS_SHARE) * deterministic_time / WINDOW_DTIME))
    place, start, wst = improve_windows(problem, place, start, budget, memory_model=memory_model, reserve=reserve,
                                        seed=seed, size=size, max_windows=limit, log=say)
    stats.update(wst)
    if not wst["window_improvements"] and not ust["unit_improvements"] and origin == "heuristic":
        stats["stop_reason"] = "model not built"
        return fallback(problem, incumbent, memory_model, f"{why}; {ust['unit_solves']} unit moves and "
                        f"{wst['window_solves']} windowed sub-solves found nothing shorter", stats, lower_bound=bound)
    stats["stop_reason"] = "deterministic time limit" if limit is not None and wst["window_solves"] >= limit \
        else "time limit"
    ms0, ms = ust["unit_start_makespan"], wst["window_end_makespan"]
    msg = (f"{why}; started from the {origin}'s schedule (makespan {ms0:.6g} s), which CP-SAT sub-solves "
           f"improved by {100 * (ms0 - ms) / ms0:.2f}% ({ust['unit_improvements']} of {ust['unit_solves']} "
           f"unit moves, {wst['window_improvements']} of {wst['window_solves']} windows of up to "
           f"{wst['window_size']} nodes)")
    return Solution(Status.FEASIBLE, placement=place, start=start, message=msg, memory_model=memory_model,
                    lower_bound=min(max(bound, float(incumbent.lower_bound or 0.0)), ms), stats=stats)


def improve_windows(problem: Problem, place: np.ndarray, start: np.ndarray, budget: Budget, *, memory_model: str,
                    reserve: float, seed: int = 0, size: int = 200, max_size: int = 800,
                    window_dtime: float = WINDOW_DTIME, max_windows: int | None = None,
                    log=None) -> tuple[np.ndarray, np.ndarray, dict]:
    """Improve a schedule window by window: the next ``size`` nodes by start, re-placed and re-timed
    inside their slab with the rest fixed (releases and deadlines from fixed neighbours, fixed
    nodes occupying their devices), the objective the longest path leaving the window. Only
    windows touching the critical path are solved; after a pass without gain windows double (to
    ``max_size``), then start small again with four times the budget.

    Parameters
    ----------
    problem : Problem
    place, start : numpy.ndarray
    budget : Budget
    memory_model : str
    reserve : float
    seed : int
    size, max_size : int
        Nodes per window at first and at most.
    window_dtime : float
        Deterministic seconds per window at first.
    max_windows : int, optional
        Cap on windows solved (then no window is cut by the wall clock).
    log : callable, optional

    Returns
    -------
    tuple
        Placement, start and ``window_solves``, ``window_improvements``, ``window_failed_memory``,
        ``window_start_makespan``, ``window_end_makespan``, ``window_size``.
    """
    n = problem.n_nodes
    place, start = np.asarray(place, dtype=np.int64).copy(), np.asarray(start, dtype=np.float64).copy()
    dur_s, comm_s = durations(problem), transfer_table(problem)
    ms = float((start + problem.duration(place)).max())
    stats = {"window_solves": 0, "window_improvements": 0, "window_start_makespan": ms, "window_failed_memory": 0}
    size = size0 = max(2, min(size, n))
    cursor, since = 0, 0
    while (max_windows is None or stats["window_solves"] < max_windows) and budget.left() > reserve + 0.3:
        end = start + problem.duration(place)
        tail = schedule_tails(problem, place, start)
        order = np.lexsort((problem.topo_rank, start))
        crit = np.abs(start + tail - ms) <= 1e-9 * ms
        cursor = 0 if cursor >= n else cursor
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
        wall = budget.left() - reserve
        got = _solve_window(problem, place, start, end, tail, win, dur_s, comm_s, ms, memory_model,
                            seed + stats["window_solves"], window_dtime,
                            min(wall, WINDOW_WALL_S * window_dtime / WINDOW_DTIME) if max_windows is None else wall)
        stats["window_solves"] += 1
        if got is None:
            continue
        verdict, new_place, new_start, new_ms = replay_if_shorter(problem, got, ms, memory_model)
        stats["window_failed_memory"] += int(verdict == "memory")
        if verdict == "kept":
            place, start, ms = new_place, new_start, new_ms
            offer(place, start)
            stats["window_improvements"] += 1
            since = 0
            if log is not None:
                log(f"cpsat windows: {stats['window_solves']} solved, makespan {ms:.6g} s ({budget.elapsed():.1f} s)")
    stats.update(window_end_makespan=ms, window_size=size)
    return place, start, stats


def _solve_window(problem: Problem, place, start, end, tail, win, dur_s, comm_s, ms, memory_model, seed, dtime,
                  wall: float):
    """One window's sub-solve on a grid of ``1 / WINDOW_RESOLUTION`` of the makespan, every time
    rounded down (so the incumbent is a solution): ``(placement, key, key_end)`` or None."""
    from ortools.sat.python import cp_model
    n, k, allowed = problem.n_nodes, problem.n_devices, problem.allowed
    scale = WINDOW_RESOLUTION / ms

    def down(seconds: float) -> int:
        return int(math.floor(seconds * scale))
    in_win = np.zeros(n, dtype=bool)
    in_win[win] = True
    t_lo, t_hi = float(start[win].min()), float(end[win].max())
    lo_u, hi_u = down(t_lo), down(t_hi)
    free, leader = in_win.copy(), np.arange(n)
    for g in np.unique(problem.group_of[win]).tolist():  # groups move only when whole in the window
        if g >= 0:
            members = problem.groups[g]
            if not in_win[members].all():
                free[members] = False
            else:
                leader[members] = int(members[0])
    m = cp_model.CpModel()
    x, shared, S, E, ivs = {}, {}, {}, {}, [[] for _ in range(k)]
    wl = win.tolist()
    for v in wl:
        devs = np.flatnonzero(allowed[v]).tolist() if free[v] else [int(place[v])]
        S[v], E[v] = m.new_int_var(lo_u, hi_u, ""), m.new_int_var(lo_u, hi_u, "")
        first = (int(leader[v]), devs[0]) not in shared or not free[v]
        for d in devs:
            key = (int(leader[v]) if free[v] else v, d)
            if key not in shared:
                shared[key] = m.new_bool_var("")
                m.add_hint(shared[key], int(place[v] == d))
            x[v, d] = lit = shared[key]
            p = down(dur_s[v, d])
            m.add(E[v] == S[v] + p).only_enforce_if(lit)
            ivs[d].append(m.new_optional_interval_var(S[v], p, E[v], lit, ""))
        if first:
            m.add_exactly_one([x[v, d] for d in devs])
        m.add_hint(S[v], down(start[v]))
    for v in np.flatnonzero(~in_win & (start < t_hi) & (end > t_lo)).tolist():  # fixed nodes in the slab
        a = down(start[v])
        b, a = min(hi_u, a + down(end[v] - start[v])), max(lo_u, a)
        if b > a:
            ivs[int(place[v])].append(m.new_fixed_size_interval_var(a, b - a, ""))
    for d in range(k):
        if len(ivs[d]) > 1:
            m.add_no_overlap(ivs[d])
    obj = m.new_int_var(lo_u, hi_u + down(float(tail.max())) + 1, "obj")
    _window_paths(problem, m, x, S, E, obj, wl, in_win, place, start, end, tail, comm_s, t_hi, down)
    if memory_model == "peak" and problem.has_split:
        _peak_rows(problem, m, x, free, place, start, end, in_win, t_hi)
    else:
        _static_rows(problem, m, x, free, place)
    m.minimize(obj)
    solver = cp_model.CpSolver()
    prm = solver.parameters
    prm.num_workers, prm.random_seed, prm.max_deterministic_time = 1, int(seed), float(dtime)
    prm.presolve_inclusion_work_limit, prm.cp_model_presolve = 0, False
    if solver.status_name(solve_within(solver, m, wall)) not in ("OPTIMAL", "FEASIBLE"):
        return None
    new_place, key, key_end = place.copy(), start.copy(), end.copy()
    for v in wl:
        new_place[v] = next(d for d in range(k) if (v, d) in x and solver.boolean_value(x[v, d]))
        key[v], key_end[v] = solver.value(S[v]) / scale, solver.value(E[v]) / scale
    return new_place, key, key_end


def _window_paths(problem: Problem, m, x, S, E, obj, wl, in_win, place, start, end, tail, comm_s, t_hi, down):
    """Precedence inside the window, releases and deadlines from the fixed rest, and the objective:
    the longest path leaving the window (the tail after each fixed successor, or after the next
    fixed node on the device)."""
    k = problem.n_devices
    src, dst = problem.edge_src, problem.edge_dst
    after = np.flatnonzero(~in_win & (start >= t_hi))
    next_tail = np.zeros(k)  # the tail of the next fixed node on each device after the slab
    for d in range(k):
        on = after[place[after] == d]
        if on.size:
            next_tail[d] = float(tail[on[np.argmin(start[on])]])
    for v in wl:
        for e in problem.in_edges[problem.in_ptr[v]:problem.in_ptr[v + 1]].tolist():
            u = int(src[e])
            for d in (d for d in range(k) if (v, d) in x):
                if not in_win[u]:
                    m.add(S[v] >= down(end[u] + comm_s[e, place[u], d])).only_enforce_if(x[v, d])
                    continue
                for a in (a for a in range(k) if (u, a) in x):
                    m.add(S[v] >= E[u] + (down(comm_s[e, a, d]) if a != d else 0)).only_enforce_if([x[u, a], x[v, d]])
        for d in (d for d in range(k) if (v, d) in x):
            q = next_tail[d]
            for e in problem.out_edges[problem.out_ptr[v]:problem.out_ptr[v + 1]].tolist():
                w = int(dst[e])
                if not in_win[w]:
                    c = float(comm_s[e, d, place[w]])
                    m.add(E[v] + down(c) <= down(start[w])).only_enforce_if(x[v, d])
                    q = max(q, c + float(tail[w]))
            m.add(obj >= E[v] + down(q)).only_enforce_if(x[v, d])


def _static_rows(problem: Problem, m, x: dict, free: np.ndarray, place: np.ndarray) -> None:
    """Static memory of the free nodes within what the fixed nodes leave on each device."""
    cap, mem = problem.device_memory, problem.memory
    used = np.bincount(place[~free], weights=mem[~free], minlength=problem.n_devices)
    for d in range(problem.n_devices):
        terms = [(int(v), lit) for (v, dd), lit in x.items() if dd == d and free[v]]
        room = float(cap[d]) - float(used[d])
        if np.isfinite(cap[d]) and terms and float(sum(mem[v] for v, _ in terms)) > room:
            m.add(sum(int(math.ceil(mem[v])) * lit for v, lit in terms) <= int(math.floor(room)))


def _peak_rows(problem: Problem, m, x: dict, free, place, start, end, in_win, t_hi: float) -> None:
    """Under peak: what moved nodes bring to a device (parameters in every bin; temporaries and
    output from the slab's start to the last fixed consumer; copies of inputs until the slab's end
    plus a transfer; its old device keeps a copy for fixed successors there) fits the room the
    incumbent leaves, per device and time bin. Re-timing alone can lengthen lifetimes: every
    accepted schedule is re-checked."""
    cap, ms = problem.device_memory, float(end.max())
    edges = np.linspace(0.0, ms, HEADROOM_BINS + 1)
    room = np.zeros((problem.n_devices, HEADROOM_BINS))
    for d, (times, level) in enumerate(memory_timeline(problem, place, start, end)):
        lo = np.maximum(0, np.searchsorted(times, edges[:-1], side="right") - 1)
        hi = np.maximum(lo, np.searchsorted(times, edges[1:], side="left") - 1)
        room[d] = cap[d] - np.array([level[a:b + 1].max() for a, b in zip(lo.tolist(), hi.tolist())])
    out_b, tmp_b, par_b = problem.output_bytes, problem.temp_bytes, problem.param_bytes
    src, dst = problem.edge_src, problem.edge_dst
    comm = transfer_table(problem)
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
                if out_b[u] > 0 and (in_win[u] or place[u] != dd):
                    arrive = t_lo if in_win[u] else float(end[u] + comm[e, place[u], dd])
                    terms.append((out_b[u], bins(min(arrive, t_lo), t_hi + slack)))
            for size, span in terms:
                for b in span if size > 0 else ():
                    rows.setdefault((dd, b), []).append(int(math.ceil(size)) * lit)
        elif out_b[v] > 0:
            here = fixed_out[place[dst[fixed_out]] == dd]
            if here.size or fixed_out.size < outs.size:
                for b in bins(t_lo, max([t_hi + slack] + end[dst[here]].tolist())):
                    rows.setdefault((dd, b), []).append(int(math.ceil(out_b[v])) * (1 - lit))
    for (d, b), terms in rows.items():
        if np.isfinite(cap[d]):
            m.add(sum(terms) <= max(0, int(math.floor(room[d, b]))))


def _anchors_of(problem: Problem) -> tuple[np.ndarray, np.ndarray]:
    """Each node's anchor (a position in the forward pass: a backward node follows the latest
    forward node it reads) and the forward nodes by position; without a forward pass, every node
    anchored at its topological position."""
    sets = forward_set(problem)
    forward = sets[0] if sets else np.ones(problem.n_nodes, dtype=bool)
    return stage_anchors(problem, forward), problem.topo[forward[problem.topo]]


def unit_moves(problem: Problem, anchor: np.ndarray, forward_order: np.ndarray, place: np.ndarray,
               start: np.ndarray):
    """The moves of a schedule, lazily, cuts nearest to a device change of its critical chain
    first: the ``r`` positions before a cut (where the forward order changes device) to the
    device after it, or the ``r`` after it to the device before, for ``r`` in ``RADII``; whole
    colocation groups, allowed nodes not already there; no empty or repeated move.

    Parameters
    ----------
    problem : Problem
    anchor, forward_order : numpy.ndarray
        From ``_anchors_of``.
    place, start : numpy.ndarray

    Yields
    ------
    tuple of (numpy.ndarray, int)
        The nodes moved and their device.
    """
    devs = place[forward_order]
    cuts = np.flatnonzero(devs[1:] != devs[:-1]) + 1
    if forward_order.size < 2 or cuts.size == 0:
        return
    ms = float((start + problem.duration(place)).max())
    crit = np.abs(start + schedule_tails(problem, place, start) - ms) <= 1e-9 * max(ms, 1e-300)
    src, dst = problem.edge_src, problem.edge_dst
    change = crit[src] & crit[dst] & (place[src] != place[dst])
    hot = np.unique(np.concatenate([anchor[src[change]], anchor[dst[change]]]))
    near = np.zeros(cuts.size, dtype=np.int64)
    if hot.size:
        pos = np.searchsorted(hot, cuts)
        near = np.minimum(np.abs(cuts - hot[np.clip(pos - 1, 0, hot.size - 1)]),
                          np.abs(cuts - hot[np.clip(pos, 0, hot.size - 1)]))
    by_anchor = np.argsort(anchor, kind="stable")
    sorted_anchor = anchor[by_anchor]
    seen = set()
    for c in cuts[np.lexsort((cuts, near))].tolist():
        for r in RADII:
            for lo, hi, d in ((c - r, c, int(devs[c])), (c, c + r, int(devs[c - 1]))):
                lo, hi = max(0, lo), min(forward_order.size, hi)
                take = np.zeros(problem.n_nodes, dtype=bool)
                nodes = by_anchor[np.searchsorted(sorted_anchor, lo):np.searchsorted(sorted_anchor, hi)]
                take[nodes] = True
                for g in np.unique(problem.group_of[nodes]).tolist():
                    if g >= 0:
                        members = np.asarray(problem.groups[g])
                        take[members] = bool(problem.allowed[members, d].all())
                nodes = np.flatnonzero(take & problem.allowed[:, d])
                nodes = nodes[place[nodes] != d]
                if nodes.size and (d, nodes.tobytes()) not in seen:
                    seen.add((d, nodes.tobytes()))
                    yield nodes, d


def _incumbent_grid(problem: Problem, place: np.ndarray, start: np.ndarray) -> tuple | None:
    """What every move of one incumbent shares: ``(dur, comm, horizon, order)``, run times and
    transfers on a grid of ``1 / MOVE_RESOLUTION`` of its makespan (rounded up), the longest
    makespan a move may have (the incumbent's on the grid less one unit) and the nodes by start;
    None for a zero makespan."""
    end = start + problem.duration(place)
    ms = float(end.max()) if problem.n_nodes else 0.0
    if not ms > 0:
        return None
    scale = MOVE_RESOLUTION / ms
    dur = np.ceil(np.nan_to_num(durations(problem) * scale, posinf=0.0)).astype(np.int64)
    comm = np.ceil(np.nan_to_num(transfer_table(problem) * scale, posinf=0.0)).astype(np.int64)
    inc = integer_schedule(problem, place, start, dur, comm)
    horizon = int((inc + dur[np.arange(problem.n_nodes), place]).max()) - 1
    return dur, comm, horizon, np.lexsort((problem.topo_rank, end, start)).tolist()


def retime_move(problem: Problem, place: np.ndarray, start: np.ndarray, nodes: np.ndarray, device: int, *,
                seconds: float, dtime: float, seed: int = 0, grid: tuple | None = None) -> tuple[tuple | None, float]:
    """One move's sub-solve: ``nodes`` onto ``device`` wherever its order has room, every other
    node on its device in its order, every start free, a strictly shorter makespan. Heads and
    tails of the part that stays bound every start; the no-overlap's reasoning over precedences
    is off (it dominated these pure precedence models).

    Parameters
    ----------
    problem : Problem
    place, start : numpy.ndarray
    nodes : numpy.ndarray
        The moved nodes.
    device : int
        Their device.
    seconds : float
        Wall cap.
    dtime : float
        Deterministic seconds at most.
    seed : int
    grid : tuple, optional
        ``_incumbent_grid`` of the incumbent.

    Returns
    -------
    tuple
        ``(found, dtime)``: ``(placement, key, key_end)`` or None, and the deterministic seconds used.
    """
    from ortools.sat.python import cp_model
    grid = grid if grid is not None else _incumbent_grid(problem, place, start)
    if grid is None:
        return None, 0.0
    dur_tab, comm_tab, horizon, order = grid
    n = problem.n_nodes
    moved = np.zeros(n, dtype=bool)
    moved[nodes] = True
    new_place = place.copy()
    new_place[nodes] = device
    dur = dur_tab[np.arange(n), new_place]
    comm = comm_tab[np.arange(problem.n_edges), new_place[problem.edge_src], new_place[problem.edge_dst]]
    hint = integer_schedule(problem, new_place, start, dur_tab, comm_tab)
    stay = [v for v in order if not moved[v]]
    prev_on, last = [-1] * n, {}
    for v in stay:
        prev_on[v] = last.get(int(place[v]), -1)
        last[int(place[v])] = v
    head, tail = _stay_heads_tails(problem, stay, prev_on, moved, dur, comm)
    m = cp_model.CpModel()
    S = []
    for v in range(n):
        lo, hi = (0, horizon - dur[v]) if moved[v] else (head[v], horizon - tail[v])
        if hi < lo:
            return None, 0.0  # the part that stays is already too long
        S.append(m.new_int_var(lo, hi, ""))
        m.add_hint(S[v], int(min(max(hint[v], lo), hi)))
    dl, cl = dur.tolist(), comm.tolist()
    for v in stay:
        if prev_on[v] >= 0:
            m.add(S[v] >= S[prev_on[v]] + dl[prev_on[v]])
    for e, (u, w) in enumerate(zip(problem.edge_src.tolist(), problem.edge_dst.tolist())):
        m.add(S[w] >= S[u] + dl[u] + cl[e])
    on_dev = [v for v in stay if place[v] == device] + np.flatnonzero(moved).tolist()
    m.add_no_overlap([m.new_fixed_size_interval_var(S[v], dl[v], "") for v in on_dev])
    span = m.new_int_var(0, horizon, "makespan")
    for v in sorted(set(last.values()) | set(np.flatnonzero(moved).tolist())
                    | set(np.flatnonzero(np.diff(problem.out_ptr) == 0).tolist())):
        m.add(span >= S[v] + dl[v])
    m.minimize(span)
    solver = cp_model.CpSolver()
    prm = solver.parameters
    prm.num_workers, prm.random_seed, prm.max_deterministic_time = 1, int(seed), float(dtime)
    prm.linearization_level, prm.cp_model_presolve, prm.use_precedences_in_disjunctive_constraint = 0, False, False
    code = solve_within(solver, m, seconds)
    if solver.status_name(code) not in ("OPTIMAL", "FEASIBLE"):
        return None, float(solver.deterministic_time)
    key = np.array([solver.value(s) for s in S], dtype=np.float64)
    return (new_place, key, key + dur), float(solver.deterministic_time)


def _stay_heads_tails(problem: Problem, stay: list, prev_on: list, moved, dur, comm) -> tuple[list, list]:
    """Earliest starts and longest paths to the end of the part that stays (its precedences and
    device chains; moved nodes and their edges left out): any schedule of the move keeps them."""
    n = problem.n_nodes
    next_on = [-1] * n
    for v in stay:
        if prev_on[v] >= 0:
            next_on[prev_on[v]] = v
    src, dst = problem.edge_src.tolist(), problem.edge_dst.tolist()
    in_ptr, in_e = problem.in_ptr.tolist(), problem.in_edges.tolist()
    out_ptr, out_e = problem.out_ptr.tolist(), problem.out_edges.tolist()
    mv, dl, cl = moved.tolist(), dur.tolist(), comm.tolist()
    hd, tl = [0] * n, [0] * n
    for v in stay:
        u = prev_on[v]
        hd[v] = max([hd[u] + dl[u] if u >= 0 else 0] + [hd[src[e]] + dl[src[e]] + cl[e]
                                                         for e in in_e[in_ptr[v]:in_ptr[v + 1]] if not mv[src[e]]])
    for v in reversed(stay):
        w = next_on[v]
        tl[v] = dl[v] + max([tl[w] if w >= 0 else 0] + [cl[e] + tl[dst[e]] for e in out_e[out_ptr[v]:out_ptr[v + 1]]
                                                         if not mv[dst[e]]])
    return hd, tl


def improve_units(problem: Problem, place: np.ndarray, start: np.ndarray, budget: Budget, *, memory_model: str,
                  reserve: float, seed: int = 0, max_seconds: float = math.inf, max_dtime: float | None = None,
                  log=None) -> tuple[np.ndarray, np.ndarray, dict]:
    """Improve a schedule by unit moves (:func:`unit_moves`, :func:`retime_move`), starting again
    from every improvement, until a full pass finds nothing or the budget ends.

    Parameters
    ----------
    problem : Problem
    place, start : numpy.ndarray
    budget : Budget
    memory_model : str
    reserve : float
    seed : int
    max_seconds : float
        Wall seconds for the moves (ignored under ``max_dtime``).
    max_dtime : float, optional
        A deterministic budget (CP-SAT's seconds plus ``BUILD_DTIME_PER_ITEM`` per node and edge
        of each model); no move is then cut by the wall clock.
    log : callable, optional

    Returns
    -------
    tuple
        Placement, start and ``unit_solves``, ``unit_improvements``, ``unit_failed_memory``,
        ``unit_start_makespan``, ``unit_end_makespan``.
    """
    place, start = np.asarray(place, dtype=np.int64).copy(), np.asarray(start, dtype=np.float64).copy()
    ms = float((start + problem.duration(place)).max()) if problem.n_nodes else 0.0
    stats = {"unit_solves": 0, "unit_improvements": 0, "unit_failed_memory": 0, "unit_start_makespan": ms}
    anchor, forward_order = _anchors_of(problem)
    used = 0.0
    stop = budget.elapsed() + (max_seconds if max_dtime is None else math.inf)
    moves, grid = unit_moves(problem, anchor, forward_order, place, start), _incumbent_grid(problem, place, start)
    while grid is not None and (move := next(moves, None)) is not None:
        wall = min(budget.left() - reserve, stop - budget.elapsed())
        if wall <= 0.1 or (max_dtime is not None and used >= max_dtime):
            break
        got, spent = retime_move(problem, place, start, *move, seconds=wall if max_dtime is not None else
                                 min(wall, MOVE_WALL_S), dtime=MOVE_DTIME if max_dtime is None else
                                 min(MOVE_DTIME, max_dtime - used), seed=seed + stats["unit_solves"], grid=grid)
        stats["unit_solves"] += 1
        used += spent + BUILD_DTIME_PER_ITEM * (problem.n_nodes + problem.n_edges)
        if got is None:
            continue
        verdict, new_place, new_start, new_ms = replay_if_shorter(problem, got, ms, memory_model)
        stats["unit_failed_memory"] += int(verdict == "memory")
        if verdict != "kept":
            continue
        place, start, ms = new_place, new_start, new_ms
        offer(place, start)
        stats["unit_improvements"] += 1
        if log is not None:
            log(f"cpsat unit moves: {stats['unit_solves']} solved, makespan {ms:.6g} s ({budget.elapsed():.1f} s)")
        moves, grid = unit_moves(problem, anchor, forward_order, place, start), _incumbent_grid(problem, place, start)
    stats["unit_end_makespan"] = ms
    return place, start, stats
