"""Lower bounds of the makespan the exact solvers add to their models and report.

* :func:`heads_tails`: longest paths before/after every node at the fastest allowed speed;
* :func:`heads_tails_comm`, :func:`comm_lower_bound`: the same counting the communication a
  predecessor on another device must pay (a one-machine bound for those kept local);
* :func:`window_cuts`, :func:`window_bound`: energetic windows (work that must fit between a
  common head and tail);
* :func:`reachability`: which node pairs the DAG orders (bitsets as Python ints);
* :func:`min_transfer`: the cheapest transfer of every edge between two devices.

Every bound here holds for every placement under both memory models (memory only removes
placements); tests/test_exact_bounds.py checks them against brute force.
"""

from __future__ import annotations

import numpy as np

from ..._docstrings import fill_doc
from ...model.paths import bottom_levels_csr, top_levels_csr
from ...model.problem import Problem
from .exact_times import durations, transfer_table

__all__ = ["heads_tails", "min_transfer", "heads_tails_comm", "comm_lower_bound", "window_cuts",
           "window_bound", "reachability"]


@fill_doc
def heads_tails(problem: Problem, min_dur: list) -> tuple[list, list]:
    """Longest path ending just before each node (head) and starting just after it (tail).

    ``min_dur`` is each node's smallest possible duration (any unit); communication is 0.

    Parameters
    ----------
    %(problem_dag)s
    min_dur : list
        Each node's smallest duration, in the unit of the result.

    Returns
    -------
    tuple of (list, list)
        Heads (no schedule starts the node earlier) and tails (the least time after it ends).
    """
    topo = problem.topo.tolist()
    out_ptr = problem.out_ptr.tolist()
    succ = problem.edge_dst[problem.out_edges].tolist()
    head = top_levels_csr(topo, out_ptr, succ, min_dur)
    bottom = bottom_levels_csr(topo, out_ptr, succ, min_dur, [0] * len(succ))
    tail = [max((bottom[succ[i]] for i in range(out_ptr[v], out_ptr[v + 1])), default=0)
            for v in range(problem.n_nodes)]
    return head, tail


def min_transfer(problem: Problem, comm: np.ndarray) -> list:
    """Per edge, the cheapest transfer between two *different* devices (0 with one device).

    Parameters
    ----------
    problem : Problem
        The problem.
    comm : ndarray
        Its transfer table (``m x k x k``, any unit).

    Returns
    -------
    list
        One value per edge: what the edge costs at least when its ends are apart.
    """
    k = problem.n_devices
    if k < 2 or comm.size == 0:
        return [0] * problem.n_edges
    off = ~np.eye(k, dtype=bool)
    return comm[:, off].min(axis=1).tolist()


def _one_machine(items: list) -> float:
    """Earliest end of jobs ``(release, length)`` run one after another (Jackson's rule,
    exact for 1|r_j|C_max: take them by release)."""
    t = 0
    for r, p in sorted(items):
        t = max(t, r) + p
    return t


def _comm_level(ready: list) -> float:
    """Lower bound on when a node can start, from its predecessors ``(finish bound, length,
    release, transfer)``: a predecessor on another device delivers at ``finish + transfer``;
    those on the node's device run one after another. The best split keeps the latest
    deliveries local, so only prefixes of the order by remote delivery need checking."""
    if not ready:
        return 0
    if len(ready) > 64:  # keep it linear on wide joins: the communication-free bound
        return max(f for f, _, _, _ in ready)
    order = sorted(ready, key=lambda x: -(x[0] + x[3]))
    best = order[0][0] + order[0][3]  # everything remote
    local: list = []
    for j, (fin, p, rel, c) in enumerate(order):
        local.append((rel, p))
        serial = max(_one_machine(local), max(f for f, _, _, _ in order[: j + 1]))
        remote = order[j + 1][0] + order[j + 1][3] if j + 1 < len(order) else 0
        best = min(best, max(serial, remote))
    return best


@fill_doc
def heads_tails_comm(problem: Problem, min_dur: list, min_comm: list) -> tuple[list, list]:
    """Heads and tails that count communication (any unit; valid lower bounds).

    ``head(w)``: no schedule starts ``w`` earlier. Each predecessor ``u`` either sits on
    another device, and its data arrives no sooner than ``head(u) + dur(u) + c(u, w)``
    (``c`` the cheapest transfer between two devices), or on ``w``'s device, where such
    predecessors run one after another (a one-machine bound with release dates). The
    minimum over all splits is the bound (see :func:`_comm_level`); tails are the mirror
    image. This is the standard duplication-free reasoning of scheduling with
    communication delays (e.g. Kruatrachue and Lewis 1988; Sinnen, "Task Scheduling for
    Parallel Systems", Wiley 2007, ch. 4), never above the optimum; tested against brute
    force in tests/test_exact_bounds.py.

    Parameters
    ----------
    %(problem_dag)s
    min_dur : list
        Each node's smallest duration (any unit).
    min_comm : list
        Each edge's cheapest transfer between two devices (:func:`min_transfer`, same unit).

    Returns
    -------
    tuple of (list, list)
        Heads and tails counting communication.
    """
    topo = problem.topo.tolist()
    src, dst = problem.edge_src.tolist(), problem.edge_dst.tolist()
    head = _comm_levels(topo, problem.in_ptr.tolist(), problem.in_edges.tolist(), src, min_dur, min_comm)
    tail = _comm_levels(topo[::-1], problem.out_ptr.tolist(), problem.out_edges.tolist(), dst, min_dur, min_comm)
    return head, tail


def _comm_levels(order: list, ptr: list, edges: list, other: list, min_dur: list, min_comm: list) -> list:
    """One sweep of :func:`heads_tails_comm` along ``order``: each node's level from the nodes
    at the ``other`` end of its ``edges[ptr[v]:ptr[v + 1]]`` (predecessors for heads,
    successors for tails)."""
    level = [0] * len(min_dur)
    for v in order:
        ready = []
        for i in range(ptr[v], ptr[v + 1]):
            e = edges[i]
            u = other[e]
            ready.append((level[u] + min_dur[u], min_dur[u], level[u], min_comm[e]))
        level[v] = _comm_level(ready)
    return level


def comm_lower_bound(problem: Problem) -> float:
    """A lower bound on the makespan in seconds from :func:`heads_tails_comm`.

    Parameters
    ----------
    problem : Problem
        The problem, with devices.

    Returns
    -------
    float
        ``max_v head(v) + min_dur(v) + tail(v)`` in seconds (0 without nodes).
    """
    if problem.n_nodes == 0:
        return 0.0
    dur = durations(problem)
    min_dur = np.where(problem.allowed, dur, np.inf).min(axis=1).tolist()
    head, tail = heads_tails_comm(problem, min_dur, min_transfer(problem, transfer_table(problem)))
    return max(h + d + t for h, d, t in zip(head, min_dur, tail))


def window_cuts(head: list, tail: list, min_dur: list, k: int, lb: float, max_cuts: int = 32,
                max_thresholds: int = 48, rounds: int = 3,
                above: float | None = None) -> list[tuple[float, float, list]]:
    """Energetic windows ``(h, t, a)`` with ``h + t <= lb``, a valid lower bound of the makespan ``M``.

    A node ``v`` starts at or after ``head_v`` and ends by ``M - tail_v``, so at most
    ``a_v = max(0, h - head_v) + max(0, t - tail_v)`` of its run lies outside the window
    ``[h, M - t]`` (non-empty since ``M >= lb >= h + t``). Hence on every device ``d``
    ``sum_{v on d} max(0, dur(v, d) - a_v) <= M - h - t``, and summed over the devices
    ``sum_v max(0, p(v) - a_v) <= k (M - h - t)``: rows valid for every placement that
    lift a relaxation above the plain work bound ``sum p / k`` when work waits behind a
    long head or before a long tail. Sets with ``a_v = 0`` (all nodes with head >= ``h``
    and tail >= ``t``) give the bound of Fernandez and Bussell ("Bounds on the number of
    processors and time for multiprocessor optimal schedules", IEEE TC 22(8), 1973); the
    partial overlaps are the energetic reasoning of Baptiste, Le Pape and Nuijten
    ("Constraint-Based Scheduling", Kluwer 2001, ch. 3) with ``M`` in the deadlines.
    Heads and tails may count communication (:func:`heads_tails_comm`): any valid heads
    and tails keep the rows valid.

    Candidates ``h`` (``t``) are the breakpoints ``head_v`` and ``head_v + min_dur_v``
    (tails alike), at most ``max_thresholds`` each, evenly spaced. The ``max_cuts``
    windows with the largest constant bound ``h + t + sum max(0, min_dur_v - a_v) / k``
    that beats ``above`` (default ``sum min_dur / k``; pass ``lb`` to keep only windows
    whose constant bound lifts it) are returned, best first. A window's bound, once above
    ``lb``, is itself a valid ``lb``; ``rounds`` passes use it to admit wider windows.

    Parameters
    ----------
    head, tail, min_dur : list
        Valid heads, tails and smallest durations (one unit).
    k : int
        Number of devices.
    lb : float
        A valid lower bound of the makespan (same unit).
    max_cuts, max_thresholds, rounds : int
        At most this many windows returned, candidate thresholds per side, and passes.
    above : float, optional
        Keep only windows whose constant bound beats it (default: the work bound).

    Returns
    -------
    list of tuple
        ``(h, t, a)`` per window, best first: ``a`` the most of each node's run outside it.
    """
    n = len(min_dur)
    if n == 0 or k < 1:
        return []
    hd = np.asarray(head, dtype=np.float64)
    tl = np.asarray(tail, dtype=np.float64)
    md = np.asarray(min_dur, dtype=np.float64)
    base = float(md.sum()) / k if above is None else float(above)

    def thresholds(vals: np.ndarray) -> list:
        u = np.unique(np.concatenate([[0.0], vals, vals + md]))
        if u.size > max_thresholds:
            u = u[np.unique(np.linspace(0, u.size - 1, max_thresholds).round().astype(np.int64))]
        return u.tolist()

    th_h, th_t = thresholds(hd), thresholds(tl)
    seen: dict = {}
    for _ in range(max(1, rounds)):
        top = float(lb)
        for h in th_h:
            if h > top:
                break
            ah = np.maximum(0.0, h - hd)
            for t in th_t:
                if h + t > top:
                    break
                if (h, t) in seen:
                    continue
                a = ah + np.maximum(0.0, t - tl)
                val = h + t + float(np.maximum(0.0, md - a).sum()) / k
                if val > base * (1 + 1e-12) + 1e-12:
                    seen[h, t] = (val, a)
        best_val = max((v for v, _ in seen.values()), default=0.0)
        if best_val <= lb * (1 + 1e-12):
            break
        lb = best_val * (1 - 1e-12)  # a valid bound, a hair lower against rounding
    best = sorted(seen.items(), key=lambda kv: (-kv[1][0], kv[0]))[:max_cuts]
    return [(h, t, a.tolist()) for (h, t), (_, a) in best]


def window_bound(head: list, tail: list, min_dur: list, k: int, lb: float) -> float:
    """The best constant bound of :func:`window_cuts` (``lb`` when no window beats it).

    Parameters
    ----------
    head, tail, min_dur, k, lb
        As for :func:`window_cuts`.

    Returns
    -------
    float
        The larger of ``lb`` and the best window's bound.
    """
    cuts = window_cuts(head, tail, min_dur, k, lb, max_cuts=1)
    if not cuts:
        return float(lb)
    h, t, a = cuts[0]
    return max(float(lb), h + t + sum(max(0.0, d - x) for d, x in zip(min_dur, a)) / k)


@fill_doc
def reachability(problem: Problem) -> list[int]:
    """Descendants of every node as a Python-int bitset (bit ``w`` set when a path ``v -> w`` exists).

    Parameters
    ----------
    %(problem_dag)s

    Returns
    -------
    list of int
        One bitset per node; pairs with neither bit set are the unordered pairs the
        models must keep apart on one device.
    """
    n = problem.n_nodes
    out_ptr = problem.out_ptr.tolist()
    succ = problem.edge_dst[problem.out_edges].tolist()
    desc = [0] * n
    for v in problem.topo[::-1].tolist():
        bits = 0
        for i in range(out_ptr[v], out_ptr[v + 1]):
            w = succ[i]
            bits |= desc[w] | (1 << w)
        desc[v] = bits
    return desc
