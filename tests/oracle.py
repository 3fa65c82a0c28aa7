"""Brute-force optimum for tiny problems (<= ~7 nodes, 3 devices): the exact solvers' referee.

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
"""

from __future__ import annotations

import itertools

import numpy as np

import optpart

__all__ = ["brute_force", "brute_force_makespan"]


def brute_force(problem: optpart.Problem) -> tuple[float, np.ndarray | None, np.ndarray | None]:
    """``(optimal makespan, placement, start)``; ``(inf, None, None)`` when nothing fits."""
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
    """The optimal makespan, or None when no placement fits memory and constraints."""
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
