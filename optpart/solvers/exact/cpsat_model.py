"""The CP-SAT model of ``cpsat``: data on the integer grid, then one function per constraint family.

Reads top-down like an OR-Tools sample (see the model in :mod:`optpart.solvers.exact.cpsat`):
:func:`prepare` turns a :class:`~optpart.model.problem.Problem` into integer data
(:class:`CpData`), :func:`build` creates the variables and adds each family in turn,
checking the wall-clock budget between families (raising
:class:`~optpart.solvers.exact._exact_common.OutOfTime`), and :func:`estimate_size` sizes the
model before anything is built.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...evaluate import problem_lower_bound
from ...model.problem import Problem
from . import _exact_common as xc
from .cpsat_decode import fits_rows  # noqa: F401 (re-exported)
from .cpsat_peak import add_peak_memory, peak_bytes
from .cpsat_rules import add_search_strategy, add_symmetry, add_twin_order, symmetry_order
from .path_bounds import memory_path_bound

__all__ = ["CpData", "CpModelVars", "prepare", "estimate_size", "build", "add_hint", "fits_rows"]


@dataclass
class CpData:
    """Everything the model needs, on the integer time grid (units of ``1 / grid.scale`` s)."""

    problem: Problem
    peak: bool
    grid: xc.TimeGrid
    dur: np.ndarray            # n x k integer durations (0 where not allowed)
    comm: np.ndarray           # m x k x k integer transfers
    mem: np.ndarray            # integer static memories
    cap: np.ndarray            # integer capacities (-1: unlimited)
    mem_exact: bool
    classes: list
    leader: list
    min_dur: list
    head: list
    tail: list
    horizon: int
    lb_units: int
    pooled: bool
    peak_bytes: tuple = ()     # (param, out, temp) integers under peak
    lb_s: float = 0.0
    relaxed: bool = False      # times rounded down: the model's optimum bounds the real one from below
    sym_order: np.ndarray | None = None  # nodes in the order devices are first used (symmetry breaking)


@dataclass
class CpModelVars:
    """The built model and the variables decoding reads."""

    model: object
    x: dict
    S: list
    E: list
    makespan: object
    n_items: int = 0
    families: list = field(default_factory=list)
    twins: object = None       # the twin order imposed (cpsat_rules.Twins), for the hint


def prepare(problem: Problem, peak: bool, upper_s: float | None, relax: bool = False,
            grid: xc.TimeGrid | None = None) -> CpData:
    """Integer data for the model. ``upper_s``: a known makespan (the incumbent's), which
    bounds the horizon and keeps the grid fine enough.

    Chooses the time grid, rounds durations, transfers and memories onto integers, and
    computes what the constraints use: device classes, colocation leaders, heads and
    tails, the horizon, the lower bound in units, and whether the devices form a pool.

    ``relax=True`` gives the *relaxation* (:mod:`optpart.solvers.exact.cpsat_relax`): times are
    rounded down instead of up, so every real schedule, every time rounded down, is a
    schedule of the integer model, whose optimum in units, over the scale, is a lower
    bound of the real optimum (no rounding slack to take off).

    Parameters
    ----------
    problem : Problem
        The problem.
    peak : bool
        Model peak (liveness) memory instead of static memory.
    upper_s : float or None
        A known makespan in seconds (the incumbent's), or None.
    relax : bool
        Round times down (a relaxation whose optimum bounds the real one), not up.
    grid : TimeGrid, optional
        The time grid to use (default: chosen here).

    Returns
    -------
    CpData
        The integer data.
    """
    n, k = problem.n_nodes, problem.n_devices
    allowed = problem.allowed
    dur_s = xc.durations(problem)
    comm_s = xc.transfer_table(problem)
    lb_s = max(problem_lower_bound(problem), memory_path_bound(problem, "peak" if peak else "static"))
    mem, cap, mem_exact = xc.integral_memory(problem)
    pk: tuple = ()
    if peak:
        p_param, p_out, p_temp, cap, mem_exact = peak_bytes(problem)
        pk = (p_param, p_out, p_temp)
    classes = xc.device_classes(problem)
    if grid is None:
        grid = xc.time_grid(dur_s, comm_s, horizon_s=max(lb_s, 1e-9),
                            upper_s=None if upper_s is None else 1.01 * upper_s)
    rnd = grid.down if relax else grid.up
    dur = np.where(allowed, rnd(np.where(allowed, dur_s, 0.0)), 0)
    comm = rnd(comm_s) if comm_s.size else np.zeros((0, k, k), dtype=np.int64)
    # Horizon: every node in sequence at its slowest speed, every transfer at its worst (rounded
    # up, so that a real schedule rounded down lies within it also in the relaxation).
    top_d, top_c = (grid.up(np.where(allowed, dur_s, 0.0)), grid.up(comm_s)) if relax else (dur, comm)
    horizon = max(int(top_d.max(axis=1).sum() + (top_c.reshape(top_c.shape[0], -1).max(axis=1).sum()
                                                 if top_c.size else 0)), 1)
    min_dur = [int(dur[v][allowed[v]].min()) for v in range(n)]
    head, tail = xc.heads_tails_comm(problem, min_dur, xc.min_transfer(problem, comm))
    group_of = problem.group_of.tolist()
    leader = [v if group_of[v] < 0 else int(problem.groups[group_of[v]][0]) for v in range(n)]
    pooled = False if peak else _pooled(problem, classes, comm, mem, cap, min_dur)
    if relax:  # a real schedule rounded down ends at floor(makespan * scale) >= floor(lb * scale)
        lb_units = int(np.floor(lb_s * grid.scale * (1 - 1e-9)))
    else:
        lb_units = (int(np.ceil(lb_s * grid.scale * (1 - 1e-9))) - int(np.ceil(grid.slack_units))) if lb_s > 0 else 0
    return CpData(problem, peak, grid, dur, comm, mem, cap, mem_exact, classes, leader, min_dur, head, tail,
                  horizon, max(lb_units, 0), pooled, pk, lb_s, relax, symmetry_order(problem))


def estimate_size(problem: Problem, peak: bool) -> int:
    """Rough count of variables and constraint terms the model will hold (linear time).

    Used before building to decide whether the model fits the budget: per allowed
    (node, device) pair a literal, an interval and memory/load terms; per edge a
    precedence and up to ``k`` transfer terms per device pair; under peak, tensor
    intervals and copies per (node, device) and the ordering of zero-time nodes.

    Parameters
    ----------
    problem : Problem
        The problem.
    peak : bool
        Whether peak memory is modelled (adds tensor intervals and zero-time ordering).

    Returns
    -------
    int
        The estimated number of variables and terms.
    """
    n, k, m = problem.n_nodes, problem.n_devices, problem.n_edges
    pairs = int(problem.allowed.sum())
    size = 6 * n + 4 * pairs + m * (3 + 2 * k)
    if peak:
        size += 6 * pairs + m * k * (k + 3)
        zero = int((problem.time <= 0).sum())
        size += 3 * zero * n * k
    return size


def _check(budget: xc.Budget | None, reserve: float, what: str) -> None:
    if budget is not None and budget.left() < reserve:
        raise xc.OutOfTime(f"the time limit ran out while building the model ({what})")


def build(data: CpData, budget: xc.Budget | None = None, reserve: float = 0.0) -> CpModelVars:
    """The CP-SAT model of ``data``; raises :class:`~optpart.solvers.exact._exact_common.OutOfTime`
    when ``budget`` has less than ``reserve`` seconds left between two constraint families.

    Parameters
    ----------
    data : CpData
        The integer data from :func:`prepare`.
    budget : Budget or None
        The call's wall budget; None builds without checking the time.
    reserve : float
        Seconds that must stay left (for search and decoding) after each family.

    Returns
    -------
    CpModelVars
        The model and the variables decoding reads.

    Raises
    ------
    OutOfTime
        When the budget runs below ``reserve`` while building.
    """
    from ortools.sat.python import cp_model

    model = cp_model.CpModel()
    mv = _variables(model, data)
    _check(budget, reserve, "variables")
    # Each node on exactly one device (once per colocation group: members share literals).
    _add_assignment(model, data, mv)
    # One optional interval per allowed (node, device); no overlap on a device; at most k at once.
    _add_intervals(model, data, mv)
    _check(budget, reserve, "intervals")
    if data.peak and not data.relaxed:
        # Zero-time nodes stay out of the inside of runs on their device (starts are kept).
        _add_zero_time_order(model, data, mv)
        _check(budget, reserve, "zero-time order")
    # Precedence with communication delays.
    _add_precedence(model, data, mv)
    _check(budget, reserve, "precedence")
    # Memory: peak (liveness) through cumulatives, else static rows per device.
    if data.peak:
        add_peak_memory(model, data.problem, mv.x, mv.S, mv.E, mv.makespan, data.dur, data.comm,
                         data.horizon, *data.peak_bytes, data.cap, data.grid.exact, relaxed=data.relaxed)
    else:
        _add_static_memory(model, data, mv)
    _check(budget, reserve, "memory")
    # Objective: the makespan covers every end, each device's load and the total load.
    _add_objective(model, data, mv)
    # Symmetry: devices of a class are used in order of first use along data.sym_order.
    add_symmetry(model, data, mv)
    # Dominance: twins sharing a device run in a fixed order (static memory).
    mv.twins = add_twin_order(model, data, mv)
    _check(budget, reserve, "symmetry")
    # Search: placement literals first, then each start at its earliest value.
    add_search_strategy(model, data, mv)
    return mv


def _variables(model, data: CpData) -> CpModelVars:
    """``x[v, d]`` (shared inside colocation groups), ``S[v]``, ``E[v]`` and the makespan."""
    problem, allowed, n, k = data.problem, data.problem.allowed, data.problem.n_nodes, data.problem.n_devices
    head, tail, min_dur, horizon, leader = data.head, data.tail, data.min_dur, data.horizon, data.leader
    x: dict[tuple[int, int], object] = {}
    for v in range(n):
        for d in range(k):
            if allowed[v, d] and not data.pooled:
                x[v, d] = x[leader[v], d] if leader[v] != v else model.new_bool_var(f"x_{v}_{d}")
    S, E = [], []
    for v in range(n):
        hi_s = max(horizon - tail[v] - min_dur[v], head[v])
        S.append(model.new_int_var(head[v], hi_s, f"S_{v}"))
        E.append(model.new_int_var(head[v] + min_dur[v], max(horizon - tail[v], head[v] + min_dur[v]), f"E_{v}"))
    makespan = model.new_int_var(0, horizon, "makespan")
    if data.pooled:
        # Identical devices, free transfers, no binding memory: a schedule with at most k
        # nodes running at once is a placement (interval colouring). Zero-time sources start at 0.
        for v in range(n):
            if min_dur[v] == 0 and problem.in_ptr[v] == problem.in_ptr[v + 1]:
                model.add(S[v] == 0)
    return CpModelVars(model, x, S, E, makespan)


def _add_assignment(model, data: CpData, mv: CpModelVars) -> None:
    allowed, k = data.problem.allowed, data.problem.n_devices
    if data.pooled:
        return
    for v in range(data.problem.n_nodes):
        if data.leader[v] == v:
            model.add_exactly_one([mv.x[v, d] for d in range(k) if allowed[v, d]])


def _add_intervals(model, data: CpData, mv: CpModelVars) -> None:
    allowed, dur = data.problem.allowed, data.dur
    n, k = data.problem.n_nodes, data.problem.n_devices
    S, E, x = mv.S, mv.E, mv.x
    per_device: list[list] = [[] for _ in range(k)]
    for v in range(n):
        devs = [d for d in range(k) if allowed[v, d]]
        if data.pooled:
            model.add(E[v] == S[v] + int(dur[v, 0]))
            continue
        if len(devs) == 1 or len({int(dur[v, d]) for d in devs}) == 1:
            model.add(E[v] == S[v] + int(dur[v, devs[0]]))
            for d in devs:
                per_device[d].append(model.new_optional_fixed_size_interval_var(
                    S[v], int(dur[v, d]), x[v, d], f"I_{v}_{d}"))
        else:
            for d in devs:
                per_device[d].append(model.new_optional_interval_var(
                    S[v], int(dur[v, d]), E[v], x[v, d], f"I_{v}_{d}"))
    for d in range(k):
        if len(per_device[d]) > 1:
            model.add_no_overlap(per_device[d])
    # Redundant: at most k nodes run at any time (energetic reasoning across devices).
    if k > 1 and n > k:
        whole = []
        for v in range(n):
            sizes = sorted({int(dur[v, d]) for d in range(k) if allowed[v, d]})
            size = sizes[0] if len(sizes) == 1 else model.new_int_var(sizes[0], sizes[-1], f"len_{v}")
            whole.append(model.new_interval_var(S[v], size, E[v], f"I_{v}"))
        model.add_cumulative(whole, [1] * n, k)


def _add_zero_time_order(model, data: CpData, mv: CpModelVars) -> None:
    """NoOverlap ignores zero-size intervals and peak schedules are not re-sequenced after
    solving: a zero-time node on a device runs before or after each run there, not inside."""
    problem, allowed, dur = data.problem, data.problem.allowed, data.dur
    n, k = problem.n_nodes, problem.n_devices
    S, E, x = mv.S, mv.E, mv.x
    for w in range(n):
        if data.min_dur[w] > 0 or problem.time[w] > 0:
            continue
        for u in range(n):
            common = [d for d in range(k) if allowed[w, d] and allowed[u, d]]
            if u == w or not common or int(dur[u][allowed[u]].max()) == 0:
                continue
            before = model.new_bool_var(f"zb_{w}_{u}")
            for d in common:
                model.add(S[w] <= S[u]).only_enforce_if([before, x[w, d], x[u, d]])
                model.add(S[w] >= E[u]).only_enforce_if([~before, x[w, d], x[u, d]])


def _add_precedence(model, data: CpData, mv: CpModelVars) -> None:
    """``S[w] >= E[u]``, plus the transfer when the two ends are on different devices.

    Uniform transfer ``c``: ``apart[e]`` is forced true when the devices differ and
    ``S[w] >= E[u] + c apart``. Per-pair links: ``x[u, a] -> S[w] >= E[u] + sum_b c(a, b) x[w, b]``.
    """
    problem, allowed, comm = data.problem, data.problem.allowed, data.comm
    k = problem.n_devices
    S, E, x, leader = mv.S, mv.E, mv.x, data.leader
    uniform = xc.uniform_transfers(comm) if comm.size else np.ones(0, dtype=bool)
    src, dst = problem.edge_src.tolist(), problem.edge_dst.tolist()
    for e in range(problem.n_edges):
        u, w = src[e], dst[e]
        model.add(S[w] >= E[u])
        if leader[u] == leader[w] or k == 1 or data.pooled:
            continue  # always on one device
        du = [d for d in range(k) if allowed[u, d]]
        dw = [d for d in range(k) if allowed[w, d]]
        pairs = [(a, b) for a in du for b in dw if a != b]
        if not pairs or max(int(comm[e, a, b]) for a, b in pairs) == 0:
            continue
        if uniform[e]:
            c = int(comm[e, pairs[0][0], pairs[0][1]])
            apart = model.new_bool_var(f"apart_{e}")
            for d in du:
                if allowed[w, d]:
                    model.add_bool_or([~x[u, d], apart, x[w, d]])
                else:
                    model.add_implication(x[u, d], apart)
            model.add(S[w] >= E[u] + c * apart)
        else:
            for a in du:
                terms = [int(comm[e, a, b]) * x[w, b] for b in dw if b != a and comm[e, a, b] > 0]
                if terms:
                    model.add(S[w] >= E[u] + sum(terms)).only_enforce_if(x[u, a])


def _add_static_memory(model, data: CpData, mv: CpModelVars) -> None:
    """``sum_v memory(v) x[v, d] <= memory(d)`` where the row can bind."""
    allowed, n, k = data.problem.allowed, data.problem.n_nodes, data.problem.n_devices
    if data.pooled:
        return
    for d in range(k):
        if data.cap[d] < 0:
            continue
        nodes = [v for v in range(n) if allowed[v, d] and data.mem[v] > 0]
        if sum(int(data.mem[v]) for v in nodes) > data.cap[d]:
            model.add(sum(int(data.mem[v]) * mv.x[v, d] for v in nodes) <= int(data.cap[d]))


def _add_objective(model, data: CpData, mv: CpModelVars) -> None:
    """Minimise the makespan; redundant rows: ends plus tails, device loads, total load, generic bound,
    energetic windows."""
    allowed, dur, n, k = data.problem.allowed, data.dur, data.problem.n_nodes, data.problem.n_devices
    makespan = mv.makespan
    for v in range(n):
        model.add(makespan >= mv.E[v] + data.tail[v])
    loads = []
    for d in range(k):
        if data.pooled:
            break
        terms = [int(dur[v, d]) * mv.x[v, d] for v in range(n) if allowed[v, d] and dur[v, d] > 0]
        if terms:
            load = sum(terms)
            model.add(load <= makespan)
            loads.append(load)
    if len(loads) > 1:
        model.add(sum(loads) <= k * makespan)
    if data.pooled:
        model.add(int(dur[:, 0].sum()) <= k * makespan)
    model.add(makespan >= data.lb_units)
    _add_windows(model, data, mv)
    model.minimize(makespan)


def _add_windows(model, data: CpData, mv: CpModelVars, max_cuts: int = 16) -> None:
    """Energetic window rows (:func:`~optpart.solvers.exact._exact_common.window_cuts`, in grid
    units of the rounded-up model, whose heads, tails and lower bound they use): per window
    ``(h, t, a)`` and device ``d``, ``sum_v max(0, dur(v, d) - a_v) x[v, d] <= makespan - h - t``;
    with pooled devices (no per-device literals, identical durations) the constant
    ``makespan >= h + t + sum_v max(0, dur_v - a_v) / k``. They lift the LP relaxation
    CP-SAT keeps above the work bound when work waits behind long heads or before long tails.
    Only windows whose constant bound beats the other bounds are added: on layered graphs
    the rest only slowed the search (docs/exact.md)."""
    allowed, dur, n, k = data.problem.allowed, data.dur, data.problem.n_nodes, data.problem.n_devices
    lb = max(data.lb_units, max((h + d + t for h, d, t in zip(data.head, data.min_dur, data.tail)), default=0))
    for h, t, a in xc.window_cuts(data.head, data.tail, data.min_dur, k, lb, max_cuts=max_cuts, above=lb):
        h, t = int(h), int(t)
        a = [int(np.ceil(x)) for x in a]  # integers already: thresholds are sums of integers
        if data.pooled:
            work = sum(max(0, int(dur[v, 0]) - a[v]) for v in range(n))
            model.add(k * mv.makespan >= k * (h + t) + work)
            continue
        for d in range(k):
            terms = [(int(dur[v, d]) - a[v]) * mv.x[v, d] for v in range(n)
                     if allowed[v, d] and int(dur[v, d]) > a[v]]
            if terms:
                model.add(sum(terms) <= mv.makespan - (h + t))


def add_hint(model, data: CpData, mv: CpModelVars, place: np.ndarray, start_units: np.ndarray) -> None:
    """A full solution hint: placement literals, starts, ends and the makespan.

    Only the colocation leaders' literals are hinted (the other members share them).

    Parameters
    ----------
    model : ortools.sat.python.cp_model.CpModel
        The model to hint (changed in place).
    data : CpData
        The model's integer data.
    mv : CpModelVars
        The model's variables.
    place : numpy.ndarray
        Device per node of the hinted solution.
    start_units : numpy.ndarray
        Start per node in grid units.
    """
    n = data.problem.n_nodes
    for (v, d), lit in mv.x.items():
        if data.leader[v] == v:
            model.add_hint(lit, int(place[v] == d))
    ends = start_units + data.dur[np.arange(n), place]
    for v in range(n):
        model.add_hint(mv.S[v], int(start_units[v]))
        model.add_hint(mv.E[v], int(ends[v]))
    model.add_hint(mv.makespan, int(ends.max(initial=0)))


def _pooled(problem: Problem, classes: list[list[int]], comm: np.ndarray, mem: np.ndarray,
            cap: np.ndarray, min_dur: list) -> bool:
    """May the devices be modelled as one pool of capacity k (P|prec|Cmax)?

    True when all devices are interchangeable, every transfer is free, no memory row can
    bind, there is no colocation group, and every zero-time node is a source or a sink
    (a zero-time node must sit between the runs of its device, which a pool cannot see).
    """
    k, n = problem.n_devices, problem.n_nodes
    if k < 2 or len(classes) != 1 or len(classes[0]) != k or problem.groups:
        return False
    if comm.size and int(comm.max()) > 0:
        return False
    total = int(mem.sum())
    if any(c >= 0 and total > c for c in cap.tolist()):
        return False
    indeg = np.diff(problem.in_ptr).tolist()
    outdeg = np.diff(problem.out_ptr).tolist()
    return all(min_dur[v] > 0 or indeg[v] == 0 or outdeg[v] == 0 for v in range(n))


