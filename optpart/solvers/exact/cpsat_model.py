"""The CP-SAT model of ``cpsat``: integer data (:func:`prepare`), then one function per family.

* ``x[v, d]`` per allowed pair (shared inside colocation groups), exactly one per node;
  ``S[v]``, ``E[v]`` and one optional interval per allowed device, no overlap per device, and a
  redundant cumulative of capacity ``k`` over all nodes;
* edge ``(u, w)``: ``S[w] >= E[u]`` plus the transfer when the ends are apart (an ``apart``
  literal with uniform links, per-pair terms otherwise);
* memory: static rows, or under peak one cumulative per device over tensor lifetimes;
* the makespan above every end plus its tail, device loads, the total load, the generic bound;
* symmetry: interchangeable devices used in order of first use along a fixed node order;
  the search: placements first, then starts at their earliest.

With identical devices, free transfers, no binding memory and no colocation the devices are
one pool of capacity ``k`` (P|prec|Cmax) and placements come from interval colouring.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...evaluate import problem_lower_bound
from ...model.problem import Problem
from .bounds import heads_tails_comm, memory_path_bound, min_transfer
from .call import Budget, OutOfTime
from .grid import (TimeGrid, device_classes, durations, integral_memory, peak_bytes, time_grid, transfer_table,
                   uniform_transfers)


@dataclass
class CpData:
    """The model's data on the integer grid (units of ``1 / grid.scale`` s)."""

    problem: Problem
    peak: bool
    grid: TimeGrid
    dur: np.ndarray            # n x k (0 where forbidden)
    comm: np.ndarray           # m x k x k
    mem: np.ndarray            # static memories
    cap: np.ndarray            # capacities (-1: unlimited)
    mem_exact: bool
    classes: list
    leader: list
    min_dur: list
    head: list
    tail: list
    horizon: int
    lb_units: int
    pooled: bool
    peak_bytes: tuple = ()     # (param, out, temp) under peak
    lb_s: float = 0.0
    relaxed: bool = False      # times rounded down: the optimum bounds the real one from below
    sym_order: np.ndarray | None = None


@dataclass
class CpModelVars:
    """The built model and the variables decoding reads."""

    model: object
    x: dict
    S: list
    E: list
    makespan: object


def prepare(problem: Problem, peak: bool, upper_s: float | None, relax: bool = False,
            grid: TimeGrid | None = None) -> CpData:
    """The integer data: grid, rounded times and memories, classes, heads and tails, horizon.

    ``relax=True`` rounds times down: every real schedule rounded down is then a schedule of the
    model, whose optimum over the scale bounds the real optimum (no slack to take off).

    Parameters
    ----------
    problem : Problem
    peak : bool
        Model liveness memory.
    upper_s : float or None
        A known makespan (the incumbent's): caps the grid's range.
    relax : bool
        Round times down.
    grid : TimeGrid, optional
        The grid to use.

    Returns
    -------
    CpData
    """
    n, k, allowed = problem.n_nodes, problem.n_devices, problem.allowed
    dur_s, comm_s = durations(problem), transfer_table(problem)
    lb_s = max(problem_lower_bound(problem), memory_path_bound(problem, "peak" if peak else "static"))
    mem, cap, mem_exact = integral_memory(problem)
    pk: tuple = ()
    if peak:
        p_param, p_out, p_temp, cap, mem_exact = peak_bytes(problem)
        pk = (p_param, p_out, p_temp)
    classes = device_classes(problem)
    if grid is None:
        grid = time_grid(dur_s, comm_s, horizon_s=max(lb_s, 1e-9), upper_s=None if upper_s is None else 1.01 * upper_s)
    rnd = grid.down if relax else grid.up
    dur = np.where(allowed, rnd(np.where(allowed, dur_s, 0.0)), 0)
    comm = rnd(comm_s) if comm_s.size else np.zeros((0, k, k), dtype=np.int64)
    top_d, top_c = (grid.up(np.where(allowed, dur_s, 0.0)), grid.up(comm_s)) if relax else (dur, comm)
    horizon = max(int(top_d.max(axis=1).sum() + (top_c.reshape(top_c.shape[0], -1).max(axis=1).sum()
                                                 if top_c.size else 0)), 1)
    min_dur = [int(dur[v][allowed[v]].min()) for v in range(n)]
    head, tail = heads_tails_comm(problem, min_dur, min_transfer(problem, comm))
    group_of = problem.group_of.tolist()
    leader = [v if group_of[v] < 0 else int(problem.groups[group_of[v]][0]) for v in range(n)]
    pooled = not peak and _pooled(problem, classes, comm, mem, cap, min_dur)
    if relax:
        lb_units = int(np.floor(lb_s * grid.scale * (1 - 1e-9)))
    else:
        lb_units = (int(np.ceil(lb_s * grid.scale * (1 - 1e-9))) - int(np.ceil(grid.slack_units))) if lb_s > 0 else 0
    # Hubs first (highest degree, then topological order): the order of first device use.
    sym_order = np.lexsort((problem.topo_rank, -(np.diff(problem.in_ptr) + np.diff(problem.out_ptr))))
    return CpData(problem, peak, grid, dur, comm, mem, cap, mem_exact, classes, leader, min_dur, head, tail,
                  horizon, max(lb_units, 0), pooled, pk, lb_s, relax, sym_order.astype(np.int64))


def _pooled(problem: Problem, classes: list, comm: np.ndarray, mem: np.ndarray, cap: np.ndarray,
            min_dur: list) -> bool:
    """One pool of capacity ``k``: all devices interchangeable, free transfers, no binding memory
    row, no colocation, and every zero-time node a source or a sink."""
    k = problem.n_devices
    if k < 2 or len(classes) != 1 or len(classes[0]) != k or problem.groups:
        return False
    if (comm.size and int(comm.max()) > 0) or any(c >= 0 and int(mem.sum()) > c for c in cap.tolist()):
        return False
    indeg, outdeg = np.diff(problem.in_ptr).tolist(), np.diff(problem.out_ptr).tolist()
    return all(min_dur[v] > 0 or indeg[v] == 0 or outdeg[v] == 0 for v in range(problem.n_nodes))


def estimate_size(problem: Problem, peak: bool) -> int:
    """Variables plus constraint terms the model will hold (linear time), before building it.

    Parameters
    ----------
    problem : Problem
    peak : bool
        Peak memory (tensor intervals, zero-time ordering).

    Returns
    -------
    int
    """
    n, k, m = problem.n_nodes, problem.n_devices, problem.n_edges
    pairs = int(problem.allowed.sum())
    size = 6 * n + 4 * pairs + m * (3 + 2 * k)
    if peak:
        size += 6 * pairs + m * k * (k + 3) + 3 * int((problem.time <= 0).sum()) * n * k
    return size


def build(data: CpData, budget: Budget | None = None, reserve: float = 0.0) -> CpModelVars:
    """The model of ``data``, the budget checked between families.

    Parameters
    ----------
    data : CpData
    budget : Budget, optional
    reserve : float

    Returns
    -------
    CpModelVars

    Raises
    ------
    OutOfTime
        When the budget runs below ``reserve``.
    """
    from ortools.sat.python import cp_model
    model = cp_model.CpModel()
    mv = _variables(model, data)
    families = [_intervals]
    if data.peak and not data.relaxed:
        families.append(_zero_time_order)
    families += [_precedence, _peak_memory if data.peak else _static_memory, _objective, _symmetry,
                 _strategy]
    for family in families:
        if budget is not None and budget.left() < reserve:
            raise OutOfTime(f"the time limit ran out while building the model (before {family.__name__[1:]})")
        family(model, data, mv)
    return mv


def _variables(model, data: CpData) -> CpModelVars:
    problem, n, k = data.problem, data.problem.n_nodes, data.problem.n_devices
    head, tail, min_dur, horizon, leader = data.head, data.tail, data.min_dur, data.horizon, data.leader
    x: dict = {}
    for v in range(n):
        for d in range(k):
            if problem.allowed[v, d] and not data.pooled:
                x[v, d] = x[leader[v], d] if leader[v] != v else model.new_bool_var(f"x_{v}_{d}")
    S, E = [], []
    for v in range(n):
        S.append(model.new_int_var(head[v], max(horizon - tail[v] - min_dur[v], head[v]), f"S_{v}"))
        E.append(model.new_int_var(head[v] + min_dur[v], max(horizon - tail[v], head[v] + min_dur[v]), f"E_{v}"))
    makespan = model.new_int_var(0, horizon, "makespan")
    if data.pooled:  # zero-time sources start at 0 in a pool
        for v in range(n):
            if min_dur[v] == 0 and problem.in_ptr[v] == problem.in_ptr[v + 1]:
                model.add(S[v] == 0)
    for v in range(n):
        if leader[v] == v and not data.pooled:
            model.add_exactly_one([x[v, d] for d in range(k) if (v, d) in x])
    return CpModelVars(model, x, S, E, makespan)


def _intervals(model, data: CpData, mv: CpModelVars) -> None:
    allowed, dur, n, k = data.problem.allowed, data.dur, data.problem.n_nodes, data.problem.n_devices
    S, E, x = mv.S, mv.E, mv.x
    per_device: list[list] = [[] for _ in range(k)]
    whole = []
    for v in range(n):
        devs = np.flatnonzero(allowed[v]).tolist()
        sizes = sorted({int(dur[v, d]) for d in devs})
        if data.pooled or len(sizes) == 1:
            model.add(E[v] == S[v] + sizes[0])
            for d in ([] if data.pooled else devs):
                per_device[d].append(model.new_optional_fixed_size_interval_var(S[v], int(dur[v, d]), x[v, d], ""))
        else:
            for d in devs:
                per_device[d].append(model.new_optional_interval_var(S[v], int(dur[v, d]), E[v], x[v, d], ""))
    for d in range(k):
        if len(per_device[d]) > 1:
            model.add_no_overlap(per_device[d])
    if k > 1 and n > k:  # redundant: at most k nodes at once
        for v in range(n):
            sizes = sorted({int(dur[v, d]) for d in range(k) if allowed[v, d]})
            size = sizes[0] if len(sizes) == 1 else model.new_int_var(sizes[0], sizes[-1], "")
            whole.append(model.new_interval_var(S[v], size, E[v], ""))
        model.add_cumulative(whole, [1] * n, k)


def _zero_time_order(model, data: CpData, mv: CpModelVars) -> None:
    """Under peak starts are kept after solving: a zero-time node runs before or after each run
    of its device, never inside (a no-overlap ignores zero-size intervals)."""
    problem, allowed, dur = data.problem, data.problem.allowed, data.dur
    S, E, x = mv.S, mv.E, mv.x
    for w in range(problem.n_nodes):
        if data.min_dur[w] > 0 or problem.time[w] > 0:
            continue
        for u in range(problem.n_nodes):
            common = np.flatnonzero(allowed[w] & allowed[u]).tolist()
            if u == w or not common or int(dur[u][allowed[u]].max()) == 0:
                continue
            before = model.new_bool_var("")
            for d in common:
                model.add(S[w] <= S[u]).only_enforce_if([before, x[w, d], x[u, d]])
                model.add(S[w] >= E[u]).only_enforce_if([~before, x[w, d], x[u, d]])


def _precedence(model, data: CpData, mv: CpModelVars) -> None:
    problem, allowed, comm = data.problem, data.problem.allowed, data.comm
    k = problem.n_devices
    S, E, x, leader = mv.S, mv.E, mv.x, data.leader
    uniform = uniform_transfers(comm) if comm.size else np.ones(0, dtype=bool)
    src, dst = problem.edge_src.tolist(), problem.edge_dst.tolist()
    for e in range(problem.n_edges):
        u, w = src[e], dst[e]
        model.add(S[w] >= E[u])
        if leader[u] == leader[w] or k == 1 or data.pooled:
            continue
        du, dw = np.flatnonzero(allowed[u]).tolist(), np.flatnonzero(allowed[w]).tolist()
        pairs = [(a, b) for a in du for b in dw if a != b]
        if not pairs or max(int(comm[e, a, b]) for a, b in pairs) == 0:
            continue
        if uniform[e]:
            apart = model.new_bool_var("")
            for d in du:
                model.add_bool_or([~x[u, d], apart, x[w, d]] if allowed[w, d] else [~x[u, d], apart])
            model.add(S[w] >= E[u] + int(comm[e, pairs[0][0], pairs[0][1]]) * apart)
        else:
            for a in du:
                terms = [int(comm[e, a, b]) * x[w, b] for b in dw if b != a and comm[e, a, b] > 0]
                if terms:
                    model.add(S[w] >= E[u] + sum(terms)).only_enforce_if(x[u, a])


def _static_memory(model, data: CpData, mv: CpModelVars) -> None:
    if data.pooled:
        return
    for d in range(data.problem.n_devices):
        nodes = [v for v in np.flatnonzero(data.problem.allowed[:, d]).tolist() if data.mem[v] > 0]
        if data.cap[d] >= 0 and sum(int(data.mem[v]) for v in nodes) > data.cap[d]:
            model.add(sum(int(data.mem[v]) * mv.x[v, d] for v in nodes) <= int(data.cap[d]))


def _peak_memory(model, data: CpData, mv: CpModelVars) -> None:
    """Liveness memory (docs/model.md section 3): per device a cumulative of capacity ``cap(d) -
    parameters placed there`` over optional intervals on integer time: temporaries while a node
    runs; its output from its start until its last local consumer ends and its transfers out
    arrive (to the makespan without consumers); a copy received on another device from its first
    arrival to its last consumer there. Ends are bounded below and copy starts above, so the
    model may take the true values: exact on an exact grid (an empty interval counts one unit,
    its instant). On a rounded grid copies start with their producer (conservative). Relaxed
    (times rounded down): intervals may be empty and copies start up to two units late."""
    problem, x, S, E, makespan = data.problem, mv.x, mv.S, mv.E, mv.makespan
    dur, comm, horizon, cap, relaxed = data.dur, data.comm, data.horizon, data.cap, data.relaxed
    param, out, temp = data.peak_bytes
    exact_time = data.grid.exact
    n, k, allowed = problem.n_nodes, problem.n_devices, problem.allowed
    h1, least, late = horizon + 1, 0 if relaxed else 1, 2 if relaxed else 0
    items: list[list[tuple]] = [[] for _ in range(k)]
    cons: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for e, (u, w) in enumerate(zip(problem.edge_src.tolist(), problem.edge_dst.tolist())):
        cons[u].append((e, w))
    for v in range(n):
        devs = np.flatnonzero(allowed[v]).tolist()
        for d in devs if temp[v] > 0 else ():
            if cap[d] >= 0:
                items[d].append((model.new_optional_fixed_size_interval_var(S[v], max(int(dur[v, d]), least),
                                                                            x[v, d], ""), int(temp[v])))
        if out[v] <= 0:
            continue
        if any(cap[d] >= 0 for d in devs):
            o_end = model.new_int_var(0, h1, "")
            model.add(o_end >= E[v])
            model.add(o_end >= S[v] + least)
            if not cons[v]:
                model.add(o_end >= makespan)
            for e, w in cons[v]:
                for a in devs:
                    if allowed[w, a]:
                        model.add(o_end >= E[w]).only_enforce_if([x[v, a], x[w, a]])
                    terms = [int(comm[e, a, b]) * x[w, b] for b in range(k) if b != a and allowed[w, b]
                             and comm[e, a, b] > 0]
                    if terms:
                        model.add(o_end >= E[v] + sum(terms)).only_enforce_if(x[v, a])
            size = model.new_int_var(least, h1, "")
            for d in devs:
                if cap[d] >= 0:
                    items[d].append((model.new_optional_interval_var(S[v], size, o_end, x[v, d], ""), int(out[v])))
        for d in range(k):  # copies received on d
            ws = [(e, w) for e, w in cons[v] if allowed[w, d]]
            others = [a for a in devs if a != d]
            if cap[d] < 0 or not ws or not others:
                continue
            r = model.new_bool_var("")
            here = [x[v, d]] if allowed[v, d] else []
            if here:
                model.add_implication(r, x[v, d].negated())
            model.add_bool_or([x[w, d] for _, w in ws] + [r.negated()])
            for _, w in ws:
                model.add_bool_or([x[w, d].negated(), r] + here)
            a_beg, a_end = model.new_int_var(0, horizon, ""), model.new_int_var(0, h1, "")
            if exact_time or relaxed:
                model.add(a_beg >= E[v])
                for e, w in ws:
                    for a in others:
                        model.add(a_beg <= E[v] + int(comm[e, a, d]) + late).only_enforce_if([x[v, a], x[w, d]])
            else:
                model.add(a_beg == S[v])
            for _, w in ws:  # a zero-time consumer may be an instant at the first arrival: cover it
                model.add(a_end >= E[w] + (0 if relaxed or (exact_time and dur[w, d] > 0) else 1)
                          ).only_enforce_if(x[w, d])
            model.add(a_end >= a_beg + least)
            size = model.new_int_var(least, h1, "")
            items[d].append((model.new_optional_interval_var(a_beg, size, a_end, r, ""), int(out[v])))
    for d in range(k):
        if cap[d] < 0:
            continue
        room = model.new_int_var(0, int(cap[d]), "")
        model.add(room == int(cap[d]) - sum(int(param[v]) * x[v, d] for v in range(n) if allowed[v, d] and param[v] > 0))
        if items[d]:
            model.add_cumulative([iv for iv, _ in items[d]], [q for _, q in items[d]], room)


def _objective(model, data: CpData, mv: CpModelVars) -> None:
    allowed, dur, n, k = data.problem.allowed, data.dur, data.problem.n_nodes, data.problem.n_devices
    makespan = mv.makespan
    for v in range(n):
        model.add(makespan >= mv.E[v] + data.tail[v])
    loads = []
    for d in range(0 if data.pooled else k):
        terms = [int(dur[v, d]) * mv.x[v, d] for v in range(n) if allowed[v, d] and dur[v, d] > 0]
        if terms:
            loads.append(sum(terms))
            model.add(loads[-1] <= makespan)
    if len(loads) > 1:
        model.add(sum(loads) <= k * makespan)
    if data.pooled:
        model.add(int(dur[:, 0].sum()) <= k * makespan)
    model.add(makespan >= data.lb_units)
    model.minimize(makespan)


def _symmetry(model, data: CpData, mv: CpModelVars) -> None:
    """Within a class of interchangeable devices, device ``j`` takes a node only when ``j - 1``
    took an earlier one along ``data.sym_order`` (every placement has exactly one such labelling:
    :func:`~optpart.solvers.exact.grid.relabel`)."""
    if data.pooled:
        return
    allowed, leader, x = data.problem.allowed, data.leader, mv.x
    for cls in data.classes:
        used: list = [None] * len(cls)  # "device cls[j] used by an earlier node"
        done: set[int] = set()
        for v in data.sym_order.tolist():
            lv = leader[v]
            if lv in done or not allowed[lv, cls[0]]:
                continue
            done.add(lv)
            for j in range(1, len(cls)):
                if used[j - 1] is None:
                    model.add(x[lv, cls[j]] == 0)
                else:
                    model.add_implication(x[lv, cls[j]], used[j - 1])
            for j in range(len(cls) - 1):
                now = model.new_bool_var("")
                model.add_implication(x[lv, cls[j]], now)
                if used[j] is None:
                    model.add_implication(now, x[lv, cls[j]])
                else:
                    model.add_implication(used[j], now)
                    model.add_bool_or([~now, used[j], x[lv, cls[j]]])
                used[j] = now


def _strategy(model, data: CpData, mv: CpModelVars) -> None:
    """Placements first, then starts at their earliest ("set times"); under peak on a rounded grid
    starts are split in halves (the liveness rows do not push a failed start further)."""
    from ortools.sat.python import cp_model
    lits = [mv.x[v, d] for (v, d) in sorted(mv.x) if data.leader[v] == v]
    if lits:
        model.add_decision_strategy(lits, cp_model.CHOOSE_FIRST, cp_model.SELECT_MAX_VALUE)
    halves = data.peak and not data.grid.exact
    model.add_decision_strategy(mv.S, cp_model.CHOOSE_LOWEST_MIN,
                                cp_model.SELECT_LOWER_HALF if halves else cp_model.SELECT_MIN_VALUE)
    model.add_decision_strategy(mv.E + [mv.makespan], cp_model.CHOOSE_FIRST, cp_model.SELECT_MIN_VALUE)


def add_hint(model, data: CpData, mv: CpModelVars, place: np.ndarray, start_units: np.ndarray) -> None:
    """A full hint: the leaders' placement literals, starts, ends and the makespan.

    Parameters
    ----------
    model : ortools.sat.python.cp_model.CpModel
    data : CpData
    mv : CpModelVars
    place, start_units : numpy.ndarray
        Device and start (units) per node.
    """
    for (v, d), lit in mv.x.items():
        if data.leader[v] == v:
            model.add_hint(lit, int(place[v] == d))
    ends = start_units + data.dur[np.arange(data.problem.n_nodes), place]
    for v in range(data.problem.n_nodes):
        model.add_hint(mv.S[v], int(start_units[v]))
        model.add_hint(mv.E[v], int(ends[v]))
    model.add_hint(mv.makespan, int(ends.max(initial=0)))
