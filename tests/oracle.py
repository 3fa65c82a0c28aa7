"""Independent referees for the tests: a brute-force optimum and an interval-sweep peak memory.

``brute_force``: the optimum for tiny problems (<= ~7 nodes, 3 devices), the exact solvers' referee.

Every placement that respects the allowed devices, colocation groups and static memory
is enumerated. For a placement, an optimal schedule exists among the *semi-active*
schedules (each node starts as early as its predecessors, transfers and the previous
node of its device allow), which are fixed by the order of nodes on each device. A
depth-first search builds them node by node; each node's start follows from the order,
and a node may only be appended when its ``(start, topological position)`` is not
smaller than the previous one's in ``(start, finish, topological position)``, so every
semi-active schedule is built once (sorted that way, any semi-active schedule is such a
sequence: a zero-time node sharing its start with a longer node of its device runs first). Branches that cannot beat the
best makespan found are cut. Times are computed in floats exactly as the evaluator does.

``oracle_run``: a device map's step as accelerate runs it, one node at a time.

``sweep_peak``: the peak (liveness) memory per device, written from ``docs/model.md``
section 3 and 6 alone, apart from ``optpart.model.memory``: every held byte is an interval
``[begin, end)`` on a device, and the use at instant ``t`` is counted directly as the sum of
the intervals that cover ``t`` (a zero-length interval covers only its own instant).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

import optpart

__all__ = ["brute_force", "brute_force_makespan", "liveness_intervals", "sweep_peak"]


def brute_force(problem: optpart.Problem) -> tuple[float, np.ndarray | None, np.ndarray | None]:
    """The optimum of a tiny problem by enumeration: the exact solvers' referee.

    Parameters
    ----------
    problem : optpart.Problem
        At most about 7 nodes and 3 devices (the search is exponential in both). Pins,
        forbids and colocation groups are honoured through ``problem.allowed`` and
        ``problem.groups``; memory is checked under the static model.

    Returns
    -------
    tuple
        ``(makespan, placement, start)``: the optimal makespan in seconds, one optimal
        placement (device index per node) and its semi-active start times; ``(inf, None,
        None)`` when no placement fits memory and constraints.
    """
    n, k = problem.n_nodes, problem.n_devices
    allowed = problem.allowed
    rank = np.empty(n, dtype=np.int64)
    rank[problem.topo] = np.arange(n)
    rank_l = rank.tolist()
    preds = [[] for _ in range(n)]
    for e, (u, w) in enumerate(zip(problem.edge_src.tolist(), problem.edge_dst.tolist())):
        preds[w].append((u, e))
    best = [float("inf"), None, None]
    choices = [[d for d in range(k) if allowed[v, d]] for v in range(n)]
    for combo in itertools.product(*choices):
        place = np.asarray(combo, dtype=np.int64)
        if any(np.unique(place[g]).size > 1 for g in problem.groups):
            continue
        used = optpart.static_memory(problem, place)
        if (used > problem.device_memory * (1 + 1e-9) + 1e-9).any():
            continue
        dur = problem.duration(place).tolist()
        comm = problem.transfer_times(place).tolist()
        # A cheap bound: the busiest device's load.
        load = np.bincount(place, weights=np.asarray(dur), minlength=k)
        if load.max() >= best[0] - 1e-12 * max(1.0, best[0]):
            continue
        _search(n, k, combo, dur, comm, preds, rank_l, best)
    return best[0], best[1], best[2]


def brute_force_makespan(problem: optpart.Problem) -> float | None:
    """The optimal makespan of a tiny problem, by :func:`brute_force`.

    Parameters
    ----------
    problem : optpart.Problem
        As for :func:`brute_force` (tiny; static memory).

    Returns
    -------
    float or None
        The optimal makespan in seconds, or None when no placement fits memory and constraints.
    """
    best, _, _ = brute_force(problem)
    return None if best == float("inf") else best


def _search(n, k, place, dur, comm, preds, rank, best) -> None:
    start = [0.0] * n
    finish = [0.0] * n
    done = [False] * n
    free = [0.0] * k

    def rec(count: int, last: tuple, ms: float) -> None:
        if ms >= best[0] - 1e-12 * max(1.0, best[0]):
            return
        if count == n:
            best[0] = ms
            best[1] = np.asarray(place, dtype=np.int64)
            best[2] = np.asarray(start)
            return
        for v in range(n):
            if done[v] or not all(done[u] for u, _ in preds[v]):
                continue
            d = place[v]
            s = free[d]
            for u, e in preds[v]:
                r = finish[u] + comm[e]
                if r > s:
                    s = r
            f = s + dur[v]
            if (s, f, rank[v]) < last:
                continue
            old = free[d]
            done[v] = True
            start[v], finish[v] = s, f
            free[d] = f
            rec(count + 1, (s, f, rank[v]), max(ms, f))
            free[d] = old
            done[v] = False

    rec(0, (-1.0, -1.0, -1), 0.0)


# ---------------------------------------------------------------- peak memory, from the model text
def liveness_intervals(problem: optpart.Problem, placement, start, finish) -> list[tuple[int, float, float, float]]:
    """Every byte the liveness model holds, as ``(device, begin, end, bytes)``.

    Parameters
    ----------
    problem : optpart.Problem
        The problem; its per-node ``param_bytes``/``output_bytes``/``temp_bytes`` and its
        delay model (``transfer_times``) are read, nothing of ``optpart.model.memory``.
    placement, start, finish : array_like
        Device index, start and finish time of every node.

    Returns
    -------
    list of tuple
        ``param_bytes`` over the whole step ``[-inf, inf)``; ``temp_bytes`` while the node
        runs; each output on its producer's device from its start until its last local
        consumer finishes or its last transfer out lands (the end of the step without
        consumers); one received copy per (producer, device) from its first arrival to
        its last consumer's finish there.
    """
    place = [int(d) for d in placement]
    start = [float(x) for x in start]
    finish = [float(x) for x in finish]
    n = problem.n_nodes
    end_of_step = max(finish, default=0.0)
    comm = problem.transfer_times(np.asarray(place, dtype=np.int64)).tolist()
    params, outs, temps = (problem.param_bytes.tolist(), problem.output_bytes.tolist(),
                           problem.temp_bytes.tolist())
    out_end: list[float | None] = [None] * n
    copies: dict[tuple[int, int], list[float]] = {}  # (producer, device) -> [arrival, last use]
    for e, (u, w) in enumerate(zip(problem.edge_src.tolist(), problem.edge_dst.tolist())):
        if place[u] == place[w]:
            held_until = finish[w]
        else:
            held_until = finish[u] + comm[e]
            arrival_use = copies.setdefault((u, place[w]), [held_until, finish[w]])
            arrival_use[0] = min(arrival_use[0], held_until)
            arrival_use[1] = max(arrival_use[1], finish[w])
        out_end[u] = held_until if out_end[u] is None else max(out_end[u], held_until)
    spans = []
    for v in range(n):
        spans.append((place[v], -math.inf, math.inf, params[v]))
        spans.append((place[v], start[v], finish[v], temps[v]))
        spans.append((place[v], start[v], end_of_step if out_end[v] is None else out_end[v], outs[v]))
    for (u, d), (arrival, last_use) in sorted(copies.items()):
        spans.append((d, arrival, last_use, outs[u]))
    return [s for s in spans if s[3] > 0]


def sweep_peak(problem: optpart.Problem, placement, start, finish) -> np.ndarray:
    """Peak bytes per device under the liveness model, by direct counting at every instant.

    Parameters
    ----------
    problem : optpart.Problem
        The problem.
    placement, start, finish : array_like
        Device index, start and finish time of every node.

    Returns
    -------
    numpy.ndarray
        Per device, the largest total over instants ``t`` of the intervals with
        ``begin <= t < end`` plus the zero-length ones at ``t``. The maximum of such a sum
        is reached at some interval's begin, so only those instants are counted: with the
        begins and ends of the proper intervals sorted, the bytes that started by ``t`` minus
        those that ended by ``t`` (``searchsorted``, right side), plus the instants at ``t``.
    """
    k = problem.n_devices
    peak = np.zeros(k)
    by_device: list[list[tuple[float, float, float]]] = [[] for _ in range(k)]
    for d, b, e, size in liveness_intervals(problem, placement, start, finish):
        by_device[d].append((b, e, size))
    for d, spans in enumerate(by_device):
        if not spans:
            continue
        begin, end, size = (np.asarray(x, dtype=np.float64) for x in zip(*spans))
        proper = end > begin
        b_order, e_order = np.argsort(begin[proper], kind="stable"), np.argsort(end[proper], kind="stable")
        b_sorted, e_sorted = begin[proper][b_order], end[proper][e_order]
        b_cum = np.concatenate([[0.0], np.cumsum(size[proper][b_order])])
        e_cum = np.concatenate([[0.0], np.cumsum(size[proper][e_order])])
        instants = np.unique(begin)
        use = b_cum[np.searchsorted(b_sorted, instants, side="right")] \
            - e_cum[np.searchsorted(e_sorted, instants, side="right")]
        point_t, point_size = begin[~proper], size[~proper]
        if point_t.size:
            at = np.searchsorted(instants, point_t)
            use = use + np.bincount(at, weights=point_size, minlength=instants.size)
        peak[d] = float(use.max())
    return peak


def _peak_ok(problem, placement, start) -> bool:
    finish = start + problem.duration(placement)
    used = sweep_peak(problem, placement, start, finish)  # written apart from optpart.model.memory
    return bool((used <= problem.device_memory * (1 + 1e-9) + 1e-9).all())


def _may_fit(problem, p, preds) -> bool:
    """Necessary peak conditions: what is surely live together when a node starts."""
    cap = problem.device_memory
    par = np.bincount(p, weights=problem.param_bytes, minlength=problem.n_devices)
    out, tmp = problem.output_bytes, problem.temp_bytes
    for w in range(problem.n_nodes):
        need = par[p[w]] + tmp[w] + out[w]  # at S(w): w's temp and output, and each input
        need += sum(out[u] for u in {u for _, u in preds[w]})  # (local tensor or received copy)
        if need > cap[p[w]]:
            return False
    return True


def brute_force_peak(problem: optpart.Problem) -> float:
    """Least makespan under peak memory over all placements and integer starts (inf if none)."""
    n, k = problem.n_nodes, problem.n_devices
    allowed = problem.allowed
    topo = problem.topo.tolist()
    preds = [[] for _ in range(n)]
    for e, (u, w) in enumerate(zip(problem.edge_src.tolist(), problem.edge_dst.tolist())):
        preds[w].append((e, u))
    placements = []
    for p in itertools.product(range(k), repeat=n):
        p = np.array(p, dtype=np.int64)
        if not allowed[np.arange(n), p].all():
            continue
        if any(np.unique(p[m]).size > 1 for m in problem.groups):
            continue
        if not _may_fit(problem, p, preds):
            continue
        placements.append(p)
    dur_all = [problem.duration(p) for p in placements]
    assert all(float(d.min()) >= 1 and np.all(d == np.rint(d)) for d in dur_all), "integer times >= 1 only"
    worst_comm = max((float(problem.transfer_times(p).max(initial=0)) for p in placements), default=0.0)
    upper = int(problem.time.sum() + problem.n_edges * worst_comm) + 1

    def feasible_within(T: int) -> bool:
        for p, dur in zip(placements, dur_all):
            comm = problem.transfer_times(p)
            d = [int(x) for x in dur]
            start = np.zeros(n)
            tail = [0] * n
            for v in reversed(topo):
                for e in range(problem.n_edges):
                    if problem.edge_src[e] == v:
                        w = int(problem.edge_dst[e])
                        tail[v] = max(tail[v], d[w] + tail[w])

            def dfs(i: int) -> bool:
                if i == n:
                    return _peak_ok(problem, p, start)
                v = topo[i]
                ready = 0
                for e, u in preds[v]:
                    ready = max(ready, int(round(start[u] + d[u] + comm[e])))
                for s in range(ready, T - d[v] - tail[v] + 1):
                    clash = any(p[u] == p[v] and s < start[u] + d[u] and start[u] < s + d[v]
                                for u in topo[:i])
                    if clash:
                        continue
                    start[v] = s
                    if dfs(i + 1):
                        return True
                return False

            if dfs(0):
                return True
        return False

    if not feasible_within(upper):
        return float("inf")
    lo, hi = 0, upper  # feasible_within is monotone in T: bisect for the least feasible T
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if feasible_within(mid):
            hi = mid
        else:
            lo = mid
    return float(hi)


def oracle_run(problem, placement):
    """A device map's step as accelerate runs it, simulated with plain loops.

    The nodes run one at a time in the lowest-index-first topological order; each tensor moves
    once to every other device that reads bytes of it, right after its producer, and the
    clock sums it all (the referee of ``optpart.export.sequential``).

    Returns
    -------
    (start per node, total time, number of moves)
    """
    n = problem.n_nodes
    preds = {v: [] for v in range(n)}
    succs = {v: [] for v in range(n)}
    for e in range(problem.n_edges):
        u, v = int(problem.edge_src[e]), int(problem.edge_dst[e])
        preds[v].append(u)
        succs[u].append(e)
    done, order = set(), []
    while len(order) < n:
        v = min(w for w in range(n) if w not in done and all(u in done for u in preds[w]))
        done.add(v)
        order.append(v)
    clock, moves, start = 0.0, 0, [0.0] * n
    for u in order:
        a = int(placement[u])
        start[u] = clock
        clock += float(problem.time[u]) / float(problem.device_speed[a])
        slowest: dict[int, float] = {}
        for e in succs[u]:
            b = int(placement[int(problem.edge_dst[e])])
            nbytes = float(problem.edge_bytes[e])
            if b != a and nbytes > 0:
                cost = float(problem.latency[a, b]) + nbytes / float(problem.bandwidth[a, b])
                slowest[b] = max(slowest.get(b, 0.0), cost)
        for cost in slowest.values():
            clock += cost
            moves += 1
    return np.array(start), clock, moves
