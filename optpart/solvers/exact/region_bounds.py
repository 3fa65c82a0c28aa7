"""The critical path with its fork-join regions solved exactly (a lower bound, both memory models).

The communication-free critical path ``p_0 -> ... -> p_L`` counts only its own nodes. Work
that branches off the path and joins it again (a residual block's projection shortcut,
the second gradient of a fork in the backward pass) either shares a device with the path
and runs before or after path nodes, or runs elsewhere and pays a transfer out and back:
whichever is cheaper, it lengthens the path, and no per-node bound sees it (the
communication-aware heads of :func:`~optpart.solvers.exact.exact_bounds.heads_tails_comm` look
at one predecessor at a time).

A **region** ``R(i, j)`` is every node that descends from ``p_i`` and leads to ``p_j``
(both included). In every schedule ``E(p_j) - S(p_i)`` is at least the optimal makespan of
the sub-problem on ``R(i, j)`` alone: the same devices, durations and transfers, the
region's edges only, no memory (dropping constraints only shortens it), ``p_i`` starting at
0. CP-SAT gives a proven lower bound of that small problem within a deterministic budget
(durations and transfers rounded *down* onto an integer grid, presolve off so that no
presolve reduction can over-tighten it: google/or-tools#5293). Non-overlapping regions
along the path then add up: a longest-path pass over the path positions with one extra
edge ``i -> j`` per region of weight its bound gives

``M >= max over segmentations of the path of sum(region bound or path length of each segment)``.

Regions are searched from every path position ``i``: the nearest ``j`` whose region holds
work off the path (at most ``max_region`` nodes), and of the forks that reach one join only
the latest.
Regions of equal shape (same durations, transfers and edges, as in repeated blocks) are
solved once. Valid for every placement under both memory models (memory is not used);
tests compare it with brute-force optima, planted optima and STG optima.
"""

from __future__ import annotations

import math

import numpy as np

from ..._docstrings import fill_doc
from ...model.problem import Problem
from .exact_times import durations, transfer_table
from ...model.paths import critical_path_nodes

__all__ = ["region_path_bound", "path_regions", "region_span_bound"]

#: Nodes of a region at most (CP-SAT solves these in milliseconds).
MAX_REGION = 40
#: Path positions a region may span at most.
MAX_SPAN = 64
#: Regions solved at most (a deterministic work limit: each solve costs ~10 ms of model building).
MAX_REGIONS = 256
#: CP-SAT deterministic seconds per region.
REGION_DTIME = 0.2
#: Integer units a region's total work and transfers are scaled to.
GRID_UNITS = 10**6


@fill_doc
def path_regions(problem: Problem, path: list, max_region: int = MAX_REGION,
                 max_span: int = MAX_SPAN, max_regions: int | None = None) -> list[tuple[int, int, list]]:
    """Regions ``(i, j, nodes)`` along ``path`` that hold positive work off the path.

    Parameters
    ----------
    %(problem_dag)s
    path : list of int
        A path of the DAG (consecutive nodes joined by edges).
    max_region, max_span : int
        Nodes per region and path positions per region at most.
    max_regions : int, optional
        Stop after this many regions (along the path from its start).

    Returns
    -------
    list of tuple
        ``(i, j, nodes)`` with ``i < j`` path positions and ``nodes`` the region's node ids
        (topological order): for each fork ``i`` the nearest join ``j`` whose region holds work
        off the path, and of the forks that reach the same join only the latest (its region
        is the smallest; the path before it adds up the same).
    """
    n = problem.n_nodes
    pos = np.empty(n, dtype=np.int64)
    pos[problem.topo] = np.arange(n)
    pos_l = pos.tolist()
    on_path = np.zeros(n, dtype=bool)
    on_path[path] = True
    work = (problem.time > 0).tolist()
    out_ptr, out_e = problem.out_ptr.tolist(), problem.out_edges.tolist()
    in_ptr, in_e = problem.in_ptr.tolist(), problem.in_edges.tolist()
    src, dst = problem.edge_src.tolist(), problem.edge_dst.tolist()
    found: dict = {}
    length = len(path)
    nxt = {path[a]: path[a + 1] for a in range(length - 1)}
    prv = {path[a + 1]: path[a] for a in range(length - 1)}
    # Forks: path nodes with a successor off the next path node; joins likewise with predecessors.
    forks = [a for a in range(length - 2)
             if any(dst[out_e[k]] != nxt[path[a]] for k in range(out_ptr[path[a]], out_ptr[path[a] + 1]))]
    is_join = [a > 0 and any(src[in_e[k]] != prv[path[a]] for k in range(in_ptr[path[a]], in_ptr[path[a] + 1]))
               for a in range(length)]
    for i in forks:
        if max_regions is not None and len(found) >= max_regions:
            break
        f = path[i]
        last = path[min(length - 1, i + max_span)]
        # Descendants of f up to the topological position of the farthest candidate join.
        desc = {f}
        stack = [f]
        while stack and len(desc) <= 8 * max_region:
            v = stack.pop()
            for k in range(out_ptr[v], out_ptr[v + 1]):
                w = dst[out_e[k]]
                if w not in desc and pos_l[w] <= pos_l[last]:
                    desc.add(w)
                    stack.append(w)
        for j in range(i + 2, min(length, i + max_span + 1)):
            if not is_join[j]:
                continue
            region = _ancestors_within(path[j], desc, in_ptr, in_e, src, max_region)
            if region is None:
                break
            if any(work[v] and not on_path[v] for v in region):
                # The tightest fork for this join: a later fork reaching the same join replaces it.
                found[j] = (i, j, sorted(region, key=pos_l.__getitem__))
                break
    return [found[j] for j in sorted(found)]


def _ancestors_within(w: int, inside: set, in_ptr, in_e, src, cap: int) -> set | None:
    """Ancestors of ``w`` (inclusive) among ``inside``; None once more than ``cap``."""
    seen = {w}
    stack = [w]
    while stack:
        v = stack.pop()
        for k in range(in_ptr[v], in_ptr[v + 1]):
            u = src[in_e[k]]
            if u in inside and u not in seen:
                seen.add(u)
                if len(seen) > cap:
                    return None
                stack.append(u)
    return seen


def region_span_bound(problem: Problem, nodes: list, dur: np.ndarray, comm: np.ndarray, *,
                      fork_devices: list | None = None, dtime: float = REGION_DTIME,
                      seed: int = 0) -> tuple[float, float]:
    """A proven lower bound (seconds) on ``E(last) - S(first)`` over the region ``nodes``.

    Parameters
    ----------
    problem : Problem
        The problem (edges, allowed devices).
    nodes : list of int
        The region in topological order: ``nodes[0]`` its fork ``p_i``, and the join
        ``p_j`` among them (the one every other node leads to: the last).
    dur : ndarray
        Durations per node and device (seconds, :func:`~optpart.solvers.exact.exact_times.durations`).
    comm : ndarray
        Transfer table per edge and device pair (seconds).
    fork_devices : list of int, optional
        Devices the fork may use (default: all it is allowed on). Interchangeable devices
        (:func:`~optpart.solvers.exact._exact_common.device_classes`) give the same optimum, so
        one per class suffices.
    dtime : float
        CP-SAT deterministic seconds.
    seed : int
        CP-SAT's seed.

    Returns
    -------
    tuple of (float, float)
        CP-SAT's proven bound of the region's makespan on the rounded-down grid, in
        seconds, and the deterministic seconds CP-SAT used.
    """
    from ortools.sat.python import cp_model

    k = problem.n_devices
    allowed = problem.allowed
    idx = {v: a for a, v in enumerate(nodes)}
    edges = [e for v in nodes for e in problem.in_edges[problem.in_ptr[v]:problem.in_ptr[v + 1]].tolist()
             if int(problem.edge_src[e]) in idx]
    total = float(sum(dur[v][allowed[v]].max() for v in nodes)) + float(sum(comm[e].max() for e in edges))
    if total <= 0:
        return 0.0, 0.0
    scale = GRID_UNITS / total
    horizon = int(math.floor(total * scale)) + 1
    m = cp_model.CpModel()
    start, end, x = {}, {}, {}
    ivs = [[] for _ in range(k)]
    for v in nodes:
        start[v] = m.new_int_var(0, horizon, "")
        end[v] = m.new_int_var(0, horizon, "")
        lits = []
        for d in range(k):
            if not allowed[v, d]:
                continue
            lit = x[v, d] = m.new_bool_var("")
            lits.append(lit)
            p = int(math.floor(float(dur[v, d]) * scale))
            m.add(end[v] == start[v] + p).only_enforce_if(lit)
            ivs[d].append(m.new_optional_interval_var(start[v], p, end[v], lit, ""))
        m.add_exactly_one(lits)
    first, last = nodes[0], nodes[-1]
    m.add(start[first] == 0)
    if fork_devices is not None:
        m.add_bool_or([x[first, d] for d in fork_devices if (first, d) in x])
    for ivl in ivs:
        if len(ivl) > 1:
            m.add_no_overlap(ivl)
    for e in edges:
        u, w = int(problem.edge_src[e]), int(problem.edge_dst[e])
        m.add(start[w] >= end[u])
        for a in range(k):
            for b in range(k):
                if a != b and (u, a) in x and (w, b) in x:
                    c = int(math.floor(float(comm[e, a, b]) * scale))
                    if c > 0:
                        m.add(start[w] >= end[u] + c).only_enforce_if([x[u, a], x[w, b]])
    m.minimize(end[last])
    solver = cp_model.CpSolver()
    prm = solver.parameters
    prm.num_workers = 1
    prm.random_seed = int(seed)
    prm.max_deterministic_time = float(dtime)
    prm.cp_model_presolve = False  # a proven bound must not rest on presolve (google/or-tools#5293)
    code = solver.solve(m)
    used = float(solver.deterministic_time)
    if solver.status_name(code) not in ("OPTIMAL", "FEASIBLE"):
        return 0.0, used
    return max(0.0, float(solver.best_objective_bound)) / scale, used


def region_path_bound(problem: Problem, *, dtime: float = REGION_DTIME, budget_dtime: float = 20.0,
                      max_regions: int = MAX_REGIONS, max_region: int = MAX_REGION, max_span: int = MAX_SPAN,
                      seed: int = 0) -> float:
    """Lower bound (seconds): the critical path with its fork-join regions solved exactly.

    Parameters
    ----------
    problem : Problem
        The problem, with devices.
    dtime : float
        CP-SAT deterministic seconds per distinct region.
    budget_dtime : float
        Deterministic seconds for all regions (regions past it are not solved: a weaker,
        still valid bound; same input, same output).
    max_regions : int
        Regions searched and solved at most, from the start of the path (a work limit).
    max_region, max_span : int
        Region size and path span at most (:func:`path_regions`).
    seed : int
        CP-SAT's seed.

    Returns
    -------
    float
        At least the communication-free critical path (fastest durations); 0 without nodes.
    """
    n, k = problem.n_nodes, problem.n_devices
    if n == 0:
        return 0.0
    dur = durations(problem) if k else problem.time[:, None].astype(np.float64)
    min_dur = np.where(problem.allowed, dur, np.inf).min(axis=1) if k else dur[:, 0]
    path, _ = critical_path_nodes(problem, min_dur)
    seg = np.concatenate([[0.0], np.cumsum(min_dur[path])])  # seg[j] - seg[i]: positions i..j-1
    if k == 0 or len(path) < 3:
        return float(seg[-1])
    comm = transfer_table(problem)
    from ._exact_common import device_classes
    # One device per class of interchangeable ones for the fork (a relabelling of any schedule).
    others = {d for c in device_classes(problem) for d in c[1:]}
    fork_devices = [d for d in range(k) if d not in others]
    solved: dict = {}
    extra: dict = {}
    spent = 0.0
    regions = path_regions(problem, path, max_region, max_span, max_regions)
    on_path = np.zeros(n, dtype=bool)
    on_path[path] = True
    # The most work off the path first: when the budget ends, the likeliest lifts are in.
    off = [float(min_dur[nodes][~on_path[nodes]].sum()) for _, _, nodes in regions]
    for r in sorted(range(len(regions)), key=lambda r: (-off[r], r)):
        i, j, nodes = regions[r]
        key = _shape_key(problem, nodes, dur, comm)
        if key not in solved:
            if spent >= budget_dtime:
                continue
            solved[key], used = region_span_bound(problem, nodes, dur, comm, fork_devices=fork_devices,
                                                  dtime=min(dtime, budget_dtime - spent), seed=seed)
            spent += used
        bound = solved[key]
        if bound > seg[j + 1] - seg[i]:
            extra.setdefault(j + 1, []).append((i, bound))
    best = np.zeros(len(path) + 1)
    for j in range(1, len(path) + 1):
        best[j] = best[j - 1] + min_dur[path[j - 1]]
        for i, bound in extra.get(j, ()):
            best[j] = max(best[j], best[i] + bound)
    return float(best[-1])


def _shape_key(problem: Problem, nodes: list, dur: np.ndarray, comm: np.ndarray) -> tuple:
    """What the region's sub-problem depends on: durations, allowed devices, edges and transfers."""
    idx = {v: a for a, v in enumerate(nodes)}
    edges = [(idx[int(problem.edge_src[e])], idx[v], comm[e].tobytes())
             for v in nodes for e in problem.in_edges[problem.in_ptr[v]:problem.in_ptr[v + 1]].tolist()
             if int(problem.edge_src[e]) in idx]
    return (dur[nodes].tobytes(), problem.allowed[nodes].tobytes(), tuple(sorted(edges)))
