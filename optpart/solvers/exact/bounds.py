"""Lower bounds of the makespan: what the exact models add as rows, and what the exact solvers
report and rest an ``optimal`` on besides a search's proof.

Every bound here holds for every placement under the memory model it names (memory only
removes placements); the tests compare each with brute-force, planted and published optima.

* heads and tails counting communication (:func:`heads_tails_comm`) and their critical path
  (:func:`comm_lower_bound`);
* energetic windows (:func:`window_cuts`, rows of the MILP);
* the critical path with the transfers memory forces (:func:`memory_path_bound`);
* the critical path with its fork-join regions solved by CP-SAT (:func:`region_path_bound`);
* the fork-join bound (:func:`fork_join_bound`); all of them by name (:func:`bound_parts`).
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from ...bounds import problem_lower_bound, window_energy
from ...model.paths import critical_path_nodes
from ...model.problem import Problem
from .grid import TimeGrid, device_classes, durations, transfer_table

#: Relative tolerance of an ``optimal`` claim: the makespan recomputed in seconds meets a
#: proven bound within it.
CLAIM_TOL = 9e-7


def meets(makespan: float, bound: float) -> bool:
    """Whether ``makespan`` meets the lower ``bound`` within :data:`CLAIM_TOL`.

    Parameters
    ----------
    makespan, bound : float
        Seconds.

    Returns
    -------
    bool
    """
    return makespan <= bound + CLAIM_TOL * max(makespan, 1e-12)


def min_transfer(problem: Problem, comm: np.ndarray) -> list:
    """Per edge, its cheapest transfer between two different devices (0 with one device).

    Parameters
    ----------
    problem : Problem
    comm : numpy.ndarray
        Its transfer table (any unit).

    Returns
    -------
    list
    """
    k = problem.n_devices
    if k < 2 or comm.size == 0:
        return [0] * problem.n_edges
    return comm[:, ~np.eye(k, dtype=bool)].min(axis=1).tolist()


def _comm_level(ready: list) -> float:
    """When a node can start at the earliest, from its predecessors ``(finish, length, release,
    transfer)``: one on another device delivers at ``finish + transfer``; those on the node's
    device run one after another (Jackson's rule, exact for 1|r_j|C_max). Keeping the latest
    deliveries local is best, so only prefixes of the order by delivery are tried."""
    if not ready:
        return 0
    if len(ready) > 64:  # wide joins: the communication-free bound keeps it linear
        return max(f for f, _, _, _ in ready)
    order = sorted(ready, key=lambda x: -(x[0] + x[3]))
    best = order[0][0] + order[0][3]
    local, t, latest = [], 0, 0
    for j, (fin, p, rel, c) in enumerate(order):
        local.append((rel, p))
        latest = max(latest, fin)
        t = 0
        for r, q in sorted(local):
            t = max(t, r) + q
        remote = order[j + 1][0] + order[j + 1][3] if j + 1 < len(order) else 0
        best = min(best, max(t, latest, remote))
    return best


def heads_tails_comm(problem: Problem, min_dur: list, min_comm: list) -> tuple[list, list]:
    """Heads (no schedule starts a node earlier) and tails (the least time after it ends) that
    count communication: the duplication-free reasoning of scheduling with communication
    delays (Sinnen, "Task Scheduling for Parallel Systems", 2007, ch. 4).

    Parameters
    ----------
    problem : Problem
    min_dur : list
        Each node's smallest run time (any unit).
    min_comm : list
        Each edge's cheapest transfer between two devices (:func:`min_transfer`, same unit).

    Returns
    -------
    tuple of (list, list)
    """
    topo = problem.topo.tolist()
    src, dst = problem.edge_src.tolist(), problem.edge_dst.tolist()

    def sweep(order, ptr, edges, other):
        level = [0] * len(min_dur)
        for v in order:
            level[v] = _comm_level([(level[u] + min_dur[u], min_dur[u], level[u], min_comm[e])
                                    for e in edges[ptr[v]:ptr[v + 1]] for u in (other[e],)])
        return level
    return (sweep(topo, problem.in_ptr.tolist(), problem.in_edges.tolist(), src),
            sweep(topo[::-1], problem.out_ptr.tolist(), problem.out_edges.tolist(), dst))


def _fastest(problem: Problem) -> np.ndarray:
    """Each node's fastest allowed run time in seconds."""
    if not problem.n_devices:
        return problem.time.astype(np.float64)
    return np.where(problem.allowed, durations(problem), np.inf).min(axis=1)


def comm_lower_bound(problem: Problem) -> float:
    """The critical path of :func:`heads_tails_comm` in seconds.

    Parameters
    ----------
    problem : Problem

    Returns
    -------
    float
    """
    if problem.n_nodes == 0:
        return 0.0
    min_dur = _fastest(problem).tolist()
    head, tail = heads_tails_comm(problem, min_dur, min_transfer(problem, transfer_table(problem)))
    return max(h + d + t for h, d, t in zip(head, min_dur, tail))


def window_cuts(head: list, tail: list, min_dur: list, k: int, lb: float, max_cuts: int = 32,
                max_thresholds: int = 48, rounds: int = 3) -> list[tuple[float, float, list]]:
    """Energetic windows ``(h, t, a)`` with ``h + t <= lb`` (a valid bound of the makespan ``M``).

    A node runs after its head and ends ``tail`` before ``M``, so at most ``a_v = max(0, h -
    head_v) + max(0, t - tail_v)`` of it lies outside ``[h, M - t]``; on every device ``sum_v
    max(0, dur(v, d) - a_v) x[v, d] <= M - h - t`` (Fernandez and Bussell 1973; energetic
    reasoning, Baptiste, Le Pape and Nuijten 2001). Thresholds are the heads (tails) and their
    ends, at most ``max_thresholds`` per side; the ``max_cuts`` windows whose constant bound
    beats the work bound most are returned, best first; a window above ``lb`` becomes the
    next round's ``lb``.

    Parameters
    ----------
    head, tail, min_dur : list
        Valid heads, tails and smallest run times (one unit).
    k : int
        Devices.
    lb : float
        A valid lower bound of the makespan.
    max_cuts, max_thresholds, rounds : int
        Windows returned, thresholds per side, passes.

    Returns
    -------
    list of tuple
        ``(h, t, a)`` per window.
    """
    n = len(min_dur)
    if n == 0 or k < 1:
        return []
    hd, tl, md = (np.asarray(x, dtype=np.float64) for x in (head, tail, min_dur))
    base = float(md.sum()) / k

    def thresholds(vals: np.ndarray) -> list:
        u = np.unique(np.concatenate([[0.0], vals, vals + md]))
        if u.size > max_thresholds:
            u = u[np.unique(np.linspace(0, u.size - 1, max_thresholds).round().astype(np.int64))]
        return u.tolist()

    th_h, th_t = thresholds(hd), thresholds(tl)
    seen: dict = {}
    for _ in range(max(1, rounds)):
        for h in th_h:
            if h > lb:
                break
            ah = np.maximum(0.0, h - hd)
            for t in th_t:
                if h + t > lb:
                    break
                if (h, t) not in seen:
                    a = ah + np.maximum(0.0, t - tl)
                    val = h + t + float(np.maximum(0.0, md - a).sum()) / k
                    if val > base * (1 + 1e-12) + 1e-12:
                        seen[h, t] = (val, a)
        best = max((v for v, _ in seen.values()), default=0.0)
        if best <= lb * (1 + 1e-12):
            break
        lb = best * (1 - 1e-12)
    top = sorted(seen.items(), key=lambda kv: (-kv[1][0], kv[0]))[:max_cuts]
    return [(h, t, a.tolist()) for (h, t), (_, a) in top]


def reachability(problem: Problem) -> list[int]:
    """Descendants of every node as a Python-int bitset (bit ``w`` set when ``v`` reaches ``w``).

    Parameters
    ----------
    problem : Problem

    Returns
    -------
    list of int
    """
    out_ptr = problem.out_ptr.tolist()
    succ = problem.edge_dst[problem.out_edges].tolist()
    desc = [0] * problem.n_nodes
    for v in problem.topo[::-1].tolist():
        bits = 0
        for w in succ[out_ptr[v]:out_ptr[v + 1]]:
            bits |= desc[w] | (1 << w)
        desc[v] = bits
    return desc


def _run_fits(problem: Problem, nodes: list, memory_model: str, cap: float):
    """``fits(i, j)``: whether path positions ``i..j`` surely fit one device of ``cap`` bytes.

    What a run surely holds: under ``static`` its nodes' ``memory``; under ``peak`` their
    parameters and, when a node of positive time starts, its temporaries, output and inputs
    (one tensor per producer), and every earlier run node's output consumed later in the run."""
    nodes_a = np.asarray(nodes, dtype=np.int64)
    if memory_model == "static":
        held = np.concatenate([[0.0], np.cumsum(problem.memory[nodes_a].astype(np.float64))])
        return lambda i, j: held[j + 1] - held[i] <= cap
    length = len(nodes)
    pos = np.full(problem.n_nodes, -1, dtype=np.int64)
    pos[nodes_a] = np.arange(length)
    out = problem.output_bytes.astype(np.float64)
    positive = problem.time[nodes_a] > 0
    own = problem.temp_bytes[nodes_a].astype(np.float64) + out[nodes_a]
    inner = np.zeros((0, 2), dtype=np.int64)
    if problem.n_edges:
        pairs = np.unique(np.stack([problem.edge_src, problem.edge_dst], axis=1), axis=0)
        on = pos[pairs[:, 1]] >= 0
        inputs = np.zeros(length)
        np.add.at(inputs, pos[pairs[on, 1]], out[pairs[on, 0]])
        own += np.where(positive, inputs, 0.0)
        inner = pairs[(pos[pairs[:, 0]] >= 0) & on]
    pu, pw = pos[inner[:, 0]], pos[inner[:, 1]]
    params = np.concatenate([[0.0], np.cumsum(problem.param_bytes[nodes_a].astype(np.float64))])
    spanning = np.zeros(length)
    spanning[np.unique(pu)] = out[nodes_a[np.unique(pu)]]
    most = np.concatenate([[0.0], np.cumsum(spanning)])  # every producer held at once: an upper end

    def fits(i: int, j: int) -> bool:
        surely = params[j + 1] - params[i] + float(own[i:j + 1].max())
        if surely > cap:
            return False
        if surely + most[j + 1] - most[i] <= cap:
            return True
        width = j - i + 1
        live = np.zeros(width)
        sel = (pu >= i) & (pw <= j)
        if sel.any():
            u, w = pu[sel] - i, pw[sel] - i
            cover = np.full(width, -1, dtype=np.int64)
            np.maximum.at(cover, u, w)  # each producer's last consumer in the run
            prod = np.flatnonzero(cover > np.arange(width) + 1)
            diff = np.zeros(width + 1)
            size = out[nodes_a[i + prod]]
            np.add.at(diff, prod + 1, size)
            np.add.at(diff, cover[prod], -size)
            live = np.cumsum(diff)[:width]
            direct = w < cover[u]  # direct consumers already count the tensor as an input
            np.add.at(live, w[direct], -out[nodes_a[i + u[direct]]])
            live = np.where(positive[i:j + 1], live, 0.0)
        return params[j + 1] - params[i] + float((own[i:j + 1] + live).max()) <= cap

    return fits


def memory_path_bound(problem: Problem, memory_model: str) -> float:
    """The communication-free critical path plus the transfers memory forces along it.

    A run of consecutive path nodes on one device must fit it, so every stretch that fits no
    device holds a device change; the cheapest set of path edges cutting every such stretch (a
    dynamic programme with two pointers and a monotone deque) is added to the path.

    Parameters
    ----------
    problem : Problem
    memory_model : {"static", "peak"}

    Returns
    -------
    float
        Seconds.
    """
    if problem.n_nodes == 0:
        return 0.0
    min_dur = _fastest(problem)
    nodes, edges = critical_path_nodes(problem, min_dur)
    base = float(min_dur[nodes].sum())
    if problem.n_devices < 2 or len(nodes) < 2:
        return base
    cost = np.asarray(min_transfer(problem, transfer_table(problem)), dtype=np.float64)[edges]
    fits = _run_fits(problem, nodes, memory_model, float(problem.device_memory.max()))
    f = [0.0] * len(nodes)  # cheapest cuts of positions 0..j with a run ending at j
    entry: deque = deque()
    lo = 0
    for j in range(len(nodes)):
        g = 0.0 if j == 0 else f[j - 1] + float(cost[j - 1])
        while entry and entry[-1][1] >= g:
            entry.pop()
        entry.append((j, g))
        while lo <= j and not fits(lo, j):
            lo += 1
        if lo > j:
            return base  # one node fits no device: the screening reports it
        while entry[0][0] < lo:
            entry.popleft()
        f[j] = entry[0][1]
    return base + f[-1]


#: Region bound limits: nodes per region, path positions spanned, regions solved, CP-SAT
#: deterministic seconds per region, and the integer units a region's times are scaled to.
MAX_REGION, MAX_SPAN, MAX_REGIONS, REGION_DTIME, GRID_UNITS = 40, 64, 256, 0.2, 10**6


def path_regions(problem: Problem, path: list, max_region: int = MAX_REGION, max_span: int = MAX_SPAN,
                 max_regions: int | None = None) -> list[tuple[int, int, list]]:
    """Fork-join regions ``(i, j, nodes)`` along ``path``: for each fork ``p_i`` the nearest join
    ``p_j`` whose region (descendants of ``p_i`` that lead to ``p_j``) holds work off the path;
    of the forks reaching one join, the latest.

    Parameters
    ----------
    problem : Problem
    path : list of int
        A path of the DAG.
    max_region, max_span : int
        Nodes and path positions per region at most.
    max_regions : int, optional
        Stop after this many.

    Returns
    -------
    list of tuple
        Regions by join position, nodes in topological order.
    """
    pos_l = problem.topo_rank.tolist()
    on_path = np.zeros(problem.n_nodes, dtype=bool)
    on_path[path] = True
    work = (problem.time > 0).tolist()
    out_ptr, out_e = problem.out_ptr.tolist(), problem.out_edges.tolist()
    in_ptr, in_e = problem.in_ptr.tolist(), problem.in_edges.tolist()
    src, dst = problem.edge_src.tolist(), problem.edge_dst.tolist()
    length, found = len(path), {}
    nxt = {path[a]: path[a + 1] for a in range(length - 1)}
    prv = {path[a + 1]: path[a] for a in range(length - 1)}
    forks = [a for a in range(length - 2) if any(dst[e] != nxt[path[a]] for e in out_e[out_ptr[path[a]]:
                                                                                     out_ptr[path[a] + 1]])]
    is_join = [a > 0 and any(src[e] != prv[path[a]] for e in in_e[in_ptr[path[a]]:in_ptr[path[a] + 1]])
               for a in range(length)]
    for i in forks:
        if max_regions is not None and len(found) >= max_regions:
            break
        last = pos_l[path[min(length - 1, i + max_span)]]
        desc, stack = {path[i]}, [path[i]]
        while stack and len(desc) <= 8 * max_region:
            for w in (dst[e] for e in out_e[out_ptr[stack[-1]]:out_ptr[stack.pop() + 1]]):
                if w not in desc and pos_l[w] <= last:
                    desc.add(w)
                    stack.append(w)
        for j in range(i + 2, min(length, i + max_span + 1)):
            if not is_join[j]:
                continue
            region, stack = {path[j]}, [path[j]]
            while stack and len(region) <= max_region:
                for u in (src[e] for e in in_e[in_ptr[stack[-1]]:in_ptr[stack.pop() + 1]]):
                    if u in desc and u not in region:
                        region.add(u)
                        stack.append(u)
            if len(region) > max_region:
                break
            if any(work[v] and not on_path[v] for v in region):
                found[j] = (i, j, sorted(region, key=pos_l.__getitem__))
                break
    return [found[j] for j in sorted(found)]


def _region_bound(problem: Problem, nodes: list, dur: np.ndarray, comm: np.ndarray, fork_devices: list,
                  dtime: float, seed: int) -> tuple[float, float]:
    """CP-SAT's proven bound (seconds) of the region alone, no memory, times rounded down, the
    fork at 0 on one device per class; presolve off (google/or-tools#5293). ``(bound, dtime used)``."""
    from ortools.sat.python import cp_model
    k, allowed = problem.n_devices, problem.allowed
    idx = set(nodes)
    edges = [e for v in nodes for e in problem.in_edges[problem.in_ptr[v]:problem.in_ptr[v + 1]].tolist()
             if int(problem.edge_src[e]) in idx]
    total = float(sum(dur[v][allowed[v]].max() for v in nodes)) + float(sum(comm[e].max() for e in edges))
    if total <= 0:
        return 0.0, 0.0
    scale = GRID_UNITS / total
    horizon = int(math.floor(total * scale)) + 1
    m = cp_model.CpModel()
    start = {v: m.new_int_var(0, horizon, "") for v in nodes}
    end = {v: m.new_int_var(0, horizon, "") for v in nodes}
    x, ivs = {}, [[] for _ in range(k)]
    for v in nodes:
        for d in np.flatnonzero(allowed[v]).tolist():
            x[v, d] = lit = m.new_bool_var("")
            p = int(math.floor(float(dur[v, d]) * scale))
            m.add(end[v] == start[v] + p).only_enforce_if(lit)
            ivs[d].append(m.new_optional_interval_var(start[v], p, end[v], lit, ""))
        m.add_exactly_one([x[v, d] for d in range(k) if (v, d) in x])
    m.add(start[nodes[0]] == 0)
    m.add_bool_or([x[nodes[0], d] for d in fork_devices if (nodes[0], d) in x])
    for ivl in ivs:
        if len(ivl) > 1:
            m.add_no_overlap(ivl)
    for e in edges:
        u, w = int(problem.edge_src[e]), int(problem.edge_dst[e])
        m.add(start[w] >= end[u])
        for a in range(k):
            for b in range(k):
                c = int(math.floor(float(comm[e, a, b]) * scale))
                if a != b and c > 0 and (u, a) in x and (w, b) in x:
                    m.add(start[w] >= end[u] + c).only_enforce_if([x[u, a], x[w, b]])
    m.minimize(end[nodes[-1]])
    solver = cp_model.CpSolver()
    prm = solver.parameters
    prm.num_workers, prm.random_seed, prm.max_deterministic_time = 1, int(seed), float(dtime)
    prm.cp_model_presolve = False
    code = solver.solve(m)
    if solver.status_name(code) not in ("OPTIMAL", "FEASIBLE"):
        return 0.0, float(solver.deterministic_time)
    return max(0.0, float(solver.best_objective_bound)) / scale, float(solver.deterministic_time)


def region_path_bound(problem: Problem, *, budget_dtime: float = 20.0, seed: int = 0) -> float:
    """The communication-free critical path with its fork-join regions (:func:`path_regions`)
    solved by CP-SAT: ``E(p_j) - S(p_i)`` is at least the region's own optimum, and regions that
    do not overlap add up along the path (a longest-path pass). Regions with the most work off
    the path first, equal shapes solved once, ``budget_dtime`` deterministic seconds in all.

    Parameters
    ----------
    problem : Problem
    budget_dtime : float
        CP-SAT deterministic seconds for all regions (same input, same bound).
    seed : int

    Returns
    -------
    float
        Seconds; at least the communication-free critical path.
    """
    n, k = problem.n_nodes, problem.n_devices
    if n == 0:
        return 0.0
    min_dur = _fastest(problem)
    path, _ = critical_path_nodes(problem, min_dur)
    seg = np.concatenate([[0.0], np.cumsum(min_dur[path])])
    if k == 0 or len(path) < 3:
        return float(seg[-1])
    dur, comm = durations(problem), transfer_table(problem)
    others = {d for c in device_classes(problem) for d in c[1:]}
    fork_devices = [d for d in range(k) if d not in others]
    regions = path_regions(problem, path, max_regions=MAX_REGIONS)
    on_path = np.zeros(n, dtype=bool)
    on_path[path] = True
    off = [float(min_dur[nodes][~on_path[nodes]].sum()) for _, _, nodes in regions]
    solved, extra, spent = {}, {}, 0.0
    for r in sorted(range(len(regions)), key=lambda r: (-off[r], r)):
        i, j, nodes = regions[r]
        idx = {v: a for a, v in enumerate(nodes)}
        key = (dur[nodes].tobytes(), problem.allowed[nodes].tobytes(), tuple(sorted(
            (idx[int(problem.edge_src[e])], idx[v], comm[e].tobytes()) for v in nodes
            for e in problem.in_edges[problem.in_ptr[v]:problem.in_ptr[v + 1]].tolist()
            if int(problem.edge_src[e]) in idx)))
        if key not in solved:
            if spent >= budget_dtime:
                continue
            solved[key], used = _region_bound(problem, nodes, dur, comm, fork_devices,
                                              min(REGION_DTIME, budget_dtime - spent), seed)
            spent += used
        if solved[key] > seg[j + 1] - seg[i]:
            extra.setdefault(j + 1, []).append((i, solved[key]))
    best = np.zeros(len(path) + 1)
    for j in range(1, len(path) + 1):
        best[j] = max([best[j - 1] + min_dur[path[j - 1]]] + [best[i] + b for i, b in extra.get(j, ())])
    return float(best[-1])


def _fork_join_shape(problem: Problem) -> tuple[int, int, np.ndarray, np.ndarray] | None:
    """``(source, sink, edges into branches, edges out of branches)`` (edge masks) of a fork-join
    graph: one source, one sink, every other node fed by the source alone and feeding the sink
    alone; None for any other graph."""
    n = problem.n_nodes
    indeg, outdeg = np.diff(problem.in_ptr), np.diff(problem.out_ptr)
    sources, sinks = np.flatnonzero(indeg == 0), np.flatnonzero(outdeg == 0)
    if n < 3 or sources.size != 1 or sinks.size != 1:
        return None
    f, t = int(sources[0]), int(sinks[0])
    src, dst = problem.edge_src, problem.edge_dst
    branch = np.ones(n, dtype=bool)
    branch[[f, t]] = False
    ins, outs = (src == f) & branch[dst], branch[src] & (dst == t)
    if not ((ins | outs | ((src == f) & (dst == t))).all() and (indeg[branch] == 1).all()
            and (outdeg[branch] == 1).all()):
        return None
    return f, t, ins, outs


def fork_join_bound(problem: Problem) -> float:
    """A bound for a fork-join graph (one source ``f``, one sink ``t``, every other node fed by
    ``f`` alone and feeding ``t`` alone; 0 for any other graph).

    With ``u`` devices running branches inside ``[F(f), S(t)]``, at least ``u - 1`` of them pay
    a transfer in and ``u - 1`` a transfer out, so ``u C`` is at least the branches' work plus
    the ``u - 1`` smallest transfers each way (after Wang and Sinnen, ICPP 2022); ``C`` is at
    least the least of these over ``u``. Fastest run times, cheapest transfers.

    Parameters
    ----------
    problem : Problem

    Returns
    -------
    float
        Seconds.
    """
    shape = _fork_join_shape(problem)
    if shape is None or problem.n_devices < 1:
        return 0.0
    f, t, ins, outs = shape
    k, branch = problem.n_devices, np.ones(problem.n_nodes, dtype=bool)
    branch[[f, t]] = False
    dur = _fastest(problem)
    cheapest = np.asarray(min_transfer(problem, transfer_table(problem)), dtype=np.float64)
    c_in, c_out = np.sort(cheapest[ins]), np.sort(cheapest[outs])
    work = float(dur[branch].sum())
    window = min((work + float(c_in[:u - 1].sum()) + float(c_out[:u - 1].sum())) / u
                 for u in range(1, min(k, int(branch.sum())) + 1))
    return float(dur[f] + window + dur[t])


def closed_form_bound(problem: Problem, lb_s: float, grid: TimeGrid | None = None, extra: float = 0.0) -> float:
    """The best bound that needs no search of the whole model: ``lb_s`` (generic and memory
    path), the communication-aware critical path, the fork-join bound and ``extra``; on an
    exact grid every semi-active schedule ends on it, so the bound is rounded up to it.

    Parameters
    ----------
    problem : Problem
    lb_s : float
        A valid bound in seconds.
    grid : TimeGrid, optional
        The model's grid.
    extra : float
        Another valid bound in seconds.

    Returns
    -------
    float
    """
    lb = max(float(lb_s), comm_lower_bound(problem), fork_join_bound(problem), float(extra))
    if grid is not None and grid.exact and lb > 0:
        units = lb * grid.scale
        near = round(units)
        lb = (near if abs(units - near) <= 1e-9 * max(1.0, units) else math.ceil(units)) / grid.scale
    return float(lb)


def bound_parts(problem: Problem, memory_model: str, *, region_dtime: float = 20.0) -> dict[str, float]:
    """Every bound reported on large graphs, by name, in seconds: ``generic``
    (:func:`optpart.lower_bound`), ``comm_path``, ``energetic`` (:func:`optpart.bounds.window_energy`
    on the communication-aware heads), ``memory_path`` and ``regions`` (0 when ``region_dtime``
    is 0).

    Parameters
    ----------
    problem : Problem
    memory_model : {"static", "peak"}
    region_dtime : float
        CP-SAT deterministic seconds for the region bound.

    Returns
    -------
    dict of str to float
    """
    parts = {"generic": problem_lower_bound(problem)}
    if problem.n_nodes == 0 or problem.n_devices == 0:
        return dict.fromkeys(("generic", "comm_path", "energetic", "memory_path", "regions"), parts["generic"])
    min_dur = _fastest(problem)
    head, tail = (np.asarray(x, dtype=np.float64) for x in heads_tails_comm(
        problem, min_dur.tolist(), min_transfer(problem, transfer_table(problem))))
    parts["comm_path"] = float((head + min_dur + tail).max())
    parts["energetic"] = window_energy(head, tail, min_dur, float(problem.n_devices))
    parts["memory_path"] = memory_path_bound(problem, memory_model)
    parts["regions"] = region_path_bound(problem, budget_dtime=region_dtime) if region_dtime > 0 else 0.0
    return parts
