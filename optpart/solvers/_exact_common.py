"""Helpers shared by the exact solvers ``cpsat`` and ``milp``.

* :func:`durations` / :func:`transfer_table`: run time of every (node, device) pair and
  transfer time of every (edge, device pair), in seconds, computed exactly as the
  evaluator does (``time / speed``, ``latency + bytes / bandwidth``).
* :class:`TimeGrid`: the integer time grid CP-SAT needs. When every duration and
  transfer is an integer multiple of ``1 / scale`` for a small ``scale`` (STG: integer
  times and free links, scale 1) the grid is exact. Otherwise quantities are rounded
  *up* (so an integer schedule stays valid in seconds) and the grid records the most
  rounding a chain of the schedule can accumulate, which is subtracted from the solver's
  bound to keep it a valid lower bound of the real problem.
* :func:`device_classes`: devices that are interchangeable (same memory, speed, allowed
  nodes, and links unchanged by swapping them), for symmetry breaking.
* :func:`relabel`: a placement with devices of each class renumbered in order of first
  use, the form symmetry breaking keeps.
* :func:`tighten_schedule`: earliest start times in seconds for a placement and a
  per-device order, which never start a node later than the order's own schedule.
* :func:`heads_tails`: longest paths before/after every node at the fastest allowed speed.
* :func:`reachability`: which node pairs the DAG orders (bitsets as Python ints).
* :func:`window_cuts`: node sets whose work must fit between a common head and tail
  (energetic lower-bound rows for the exact models' relaxations).
* :class:`Budget`, :func:`heuristic_start`, :func:`fallback`: the wall-clock budget of a
  call, the heuristic's answer every exact solver starts from (and never does worse
  than), and that answer returned when the exact model does not fit the budget.
"""

from __future__ import annotations

import math
import time as _time
from dataclasses import dataclass

import numpy as np

from ..evaluate import canonical_schedule, problem_lower_bound
from ..paths import bottom_levels_csr, top_levels_csr
from ..problem import Problem
from ..result import Status
from .base import Solution, SolverError

__all__ = [
    "durations",
    "transfer_table",
    "uniform_transfers",
    "TimeGrid",
    "time_grid",
    "integral_memory",
    "device_classes",
    "relabel",
    "tighten_schedule",
    "heads_tails",
    "reachability",
    "min_transfer",
    "heads_tails_comm",
    "comm_lower_bound",
    "window_cuts",
    "window_bound",
    "Budget",
    "solve_within",
    "unlimited",
    "OutOfTime",
    "heuristic_start",
    "solution_makespan",
    "fallback",
]


def durations(problem: Problem) -> np.ndarray:
    """``n x k`` run times in seconds; ``inf`` where the node may not run on the device."""
    dur = problem.time[:, None] / problem.device_speed[None, :]
    return np.where(problem.allowed, dur, np.inf)


def transfer_table(problem: Problem) -> np.ndarray:
    """``m x k x k`` transfer times in seconds of every edge between every device pair (0 on one device)."""
    k = problem.n_devices
    lat = problem.latency
    with np.errstate(divide="ignore", invalid="ignore"):
        per_byte = np.where(np.isinf(problem.bandwidth), 0.0, 1.0 / problem.bandwidth)
    c = lat[None, :, :] + problem.edge_bytes[:, None, None] * per_byte[None, :, :]
    c[:, np.arange(k), np.arange(k)] = 0.0
    return c


def uniform_transfers(comm: np.ndarray) -> np.ndarray:
    """Per edge, True when its transfer time is the same between every pair of distinct devices."""
    k = comm.shape[1] if comm.ndim == 3 else 0
    if comm.shape[0] == 0 or k < 2:
        return np.ones(comm.shape[0], dtype=bool)
    off = ~np.eye(k, dtype=bool)
    vals = comm[:, off]
    return (vals == vals[:, :1]).all(axis=1)


@dataclass(frozen=True)
class TimeGrid:
    """Integer time units of ``1 / scale`` seconds.

    ``exact`` is True when every duration and transfer is a whole number of units, so
    the integer model is the real problem. Otherwise ``slack_units`` bounds how many
    units a chain of nodes and transfers can gain by rounding up: any real schedule
    rounded onto the grid (same placement and order) ends at most that much later.
    """

    scale: float
    exact: bool
    slack_units: float

    def up(self, seconds: np.ndarray) -> np.ndarray:
        """Seconds to units, rounded up (exact quantities are kept as they are)."""
        x = np.asarray(seconds, dtype=np.float64) * self.scale
        r = np.rint(x)
        close = np.abs(x - r) <= 1e-9 * np.maximum(1.0, np.abs(x))
        return np.where(close, r, np.ceil(x)).astype(np.int64)

    def bound_seconds(self, bound_units: float) -> float:
        """A valid lower bound in seconds from a lower bound in units of the rounded-up model."""
        b = (float(bound_units) - self.slack_units) / self.scale
        return max(0.0, b * (1 - 1e-12))


_EXACT_SCALES = (1, 2, 4, 5, 8, 10, 16, 20, 25, 32, 50, 64, 100, 128, 200, 250, 256, 500, 1000,
                 10**4, 10**5, 10**6)


def _integral(x: np.ndarray) -> bool:
    r = np.rint(x)
    return bool((np.abs(x - r) <= 1e-9 * np.maximum(1.0, np.abs(x))).all())


def time_grid(dur: np.ndarray, comm: np.ndarray, horizon_s: float, resolution: float = 2e-7,
              max_units: float = 2e9, upper_s: float | None = None) -> TimeGrid:
    """Choose the time grid for durations ``dur`` (n x k) and transfers ``comm`` (m x k x k).

    An exact scale is used when one of a few round scales makes every finite quantity an
    integer and keeps the makespan's upper end ``upper_s`` (default: every node and
    transfer in sequence) below ``max_units``. Otherwise the scale makes the largest
    possible rounding loss (one unit per node and per edge of a chain, at most ``2 n - 1``)
    about ``resolution`` of ``horizon_s`` (a lower bound of the makespan), within the same cap.
    """
    n = dur.shape[0]
    qd = dur[np.isfinite(dur)]
    qc = comm.reshape(-1)
    q = np.concatenate([qd, qc])
    q = q[q > 0]
    horizon_s = max(float(horizon_s), 1e-12)
    if upper_s is None:
        upper_s = float(np.where(np.isfinite(dur), dur, 0.0).max(axis=1).sum()) if n else 0.0
        if comm.size:
            upper_s += float(comm.reshape(comm.shape[0], -1).max(axis=1).sum())
    upper_s = max(float(upper_s), horizon_s)
    for s in _EXACT_SCALES:
        if upper_s * s > max_units:
            break
        if q.size == 0 or _integral(q * s):
            return TimeGrid(float(s), True, 0.0)
    # Inexact: a power of ten (so integral quantities stay integral) fine enough that the
    # worst rounding loss of a chain (below one unit per rounded node and edge) is about
    # `resolution` of the horizon's lower end.
    want = (2 * n) / (resolution * horizon_s)
    scale = 10.0 ** math.ceil(math.log10(want))
    while scale > 1e-6 and upper_s * scale > max_units:
        scale /= 10.0
    return TimeGrid(scale, False, _slack(dur, comm, scale))


def _slack(dur: np.ndarray, comm: np.ndarray, scale: float) -> float:
    """Most units a chain of distinct nodes and edges gains by rounding up on ``scale``."""
    n = dur.shape[0]
    x = np.where(np.isfinite(dur), dur, 0.0) * scale
    err_nodes = np.where(np.isfinite(dur), np.ceil(x) - x, 0.0)
    err_nodes[np.abs(np.rint(x) - x) <= 1e-9 * np.maximum(1.0, np.abs(x))] = 0.0
    total = float(err_nodes.max(axis=1).sum()) if n else 0.0
    if comm.size:
        y = comm * scale
        err = np.ceil(y) - y
        err[np.abs(np.rint(y) - y) <= 1e-9 * np.maximum(1.0, np.abs(y))] = 0.0
        per_edge = np.sort(err.reshape(comm.shape[0], -1).max(axis=1))[::-1]
        total += float(per_edge[: max(n - 1, 0)].sum())
    # Any path through the schedule (precedence and device order) visits each node once
    # and uses at most n - 1 transfers; one unit of margin covers float error.
    return total + 1.0


def integral_memory(problem: Problem) -> tuple[np.ndarray, np.ndarray, bool]:
    """Integer node memories and device capacities for an integer model.

    When every node memory is a whole number of ``1/s`` bytes for ``s`` in 1, 10, ..., 1e6
    (whole bytes: the usual case), memories become those integers and capacities are
    rounded down, which is exact: a sum of integers is at most ``c`` iff it is at most
    ``floor(c)`` (``exact=True``; sums stay below 2**53). Otherwise memories are scaled so that the total
    reaches ~1e12 and rounded up: a placement that fits the integer rows fits the real
    ones, but the rows may exclude a placement that fits exactly at the limit, so the
    solver may then claim neither optimality nor infeasibility. Infinite capacities map
    to -1 (no row).
    """
    mem = problem.memory
    cap = problem.device_memory
    finite = np.isfinite(cap)
    cap0 = np.where(finite, cap, 0.0)
    top = float(max(mem.max(initial=0.0), cap0.max(initial=0.0), 1e-300))
    total = float(mem.sum()) + top
    for s in (1, 10, 100, 1000, 10**4, 10**5, 10**6):
        if total * s >= 2**53:  # keep every sum of a memory row exact and far from overflow
            break
        if _integral(mem * s):
            m_int = np.rint(mem * s).astype(np.int64)
            c_int = np.where(finite, np.floor(cap0 * s), -1).astype(np.int64)
            return m_int, c_int, True
    s = 1e12 / max(total, 1e-300)
    m_int = np.ceil(mem * s - 1e-9).astype(np.int64)
    c_int = np.where(finite, np.floor(cap0 * s), -1).astype(np.int64)
    return m_int, c_int, False


def device_classes(problem: Problem) -> list[list[int]]:
    """Groups (of size >= 2) of interchangeable devices, each sorted by index.

    Two devices are interchangeable when they have the same memory and speed, the same
    allowed nodes (no pin or forbid tells them apart), and swapping them leaves the
    latency and bandwidth matrices unchanged. Swapping two such devices in any placement
    and schedule gives a placement and schedule of the same makespan.
    """
    k = problem.n_devices
    lat, bw, allowed = problem.latency, problem.bandwidth, problem.allowed
    mem, speed = problem.device_memory, problem.device_speed

    def swappable(a: int, b: int) -> bool:
        if mem[a] != mem[b] or speed[a] != speed[b]:
            return False
        if not np.array_equal(allowed[:, a], allowed[:, b]):
            return False
        # Swapping a and b leaves a matrix unchanged iff rows a and b agree off {a, b},
        # columns a and b agree off {a, b}, and the 2 x 2 block is symmetric in the swap:
        # O(k) per pair instead of permuting the whole k x k matrix.
        others = np.ones(k, dtype=bool)
        others[[a, b]] = False
        for mat in (lat, bw):
            if not (np.array_equal(mat[a, others], mat[b, others])
                    and np.array_equal(mat[others, a], mat[others, b])
                    and mat[a, b] == mat[b, a] and mat[a, a] == mat[b, b]):
                return False
        return True

    classes: list[list[int]] = []
    assigned = [False] * k
    for a in range(k):
        if assigned[a]:
            continue
        cls = [a]
        for b in range(a + 1, k):
            if not assigned[b] and swappable(a, b):
                cls.append(b)
        # swappable is checked against the class head; transpositions with one common
        # member generate the whole symmetric group, so the class is interchangeable.
        for b in cls:
            assigned[b] = True
        if len(cls) > 1:
            classes.append(cls)
    return classes


def relabel(placement: np.ndarray, classes: list[list[int]], order: np.ndarray) -> np.ndarray:
    """Renumber the devices of each class in order of first use along ``order`` (node ids)."""
    out = np.asarray(placement, dtype=np.int64).copy()
    for cls in classes:
        members = set(cls)
        mapping: dict[int, int] = {}
        for v in np.asarray(order).tolist():
            d = int(placement[v])
            if d in members and d not in mapping:
                mapping[d] = cls[len(mapping)]
        for d in cls:  # unused devices take the remaining labels
            if d not in mapping:
                mapping[d] = cls[len(mapping)]
        for v in range(out.size):
            d = int(placement[v])
            if d in mapping:
                out[v] = mapping[d]
    return out


def tighten_schedule(problem: Problem, placement: np.ndarray, key: np.ndarray,
                     key_end: np.ndarray) -> np.ndarray:
    """Earliest start times (seconds) keeping, on every device, the order of a given schedule.

    ``key``/``key_end`` are any valid schedule's starts and finishes (in any unit); nodes
    are taken by ``(start, finish, topological position)``, so predecessors and earlier
    nodes of the same device come first (a zero-time node sharing its start with a longer
    one on its device runs before it). Every start is as early as the precedence,
    transfers and the device order allow; if ``key`` (scaled) was itself a valid
    schedule with durations and transfers at least the real ones, no start increases.
    """
    n = problem.n_nodes
    rank = problem.topo_rank
    # Take nodes by (start, finish, rank) among those whose predecessors are done: the
    # sorted order itself when the key is a valid schedule, and still topological when a
    # solver's tolerance puts a successor a hair before its predecessor.
    import heapq
    ks = np.asarray(key, dtype=np.float64).tolist()
    ke = np.asarray(key_end, dtype=np.float64).tolist()
    rk = rank.tolist()
    out_ptr = problem.out_ptr.tolist()
    succ = problem.edge_dst[problem.out_edges].tolist()
    indeg = np.diff(problem.in_ptr).tolist()
    heap = [(ks[v], ke[v], rk[v], v) for v in range(n) if indeg[v] == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        v = heapq.heappop(heap)[3]
        order.append(v)
        for i in range(out_ptr[v], out_ptr[v + 1]):
            w = succ[i]
            indeg[w] -= 1
            if indeg[w] == 0:
                heapq.heappush(heap, (ks[w], ke[w], rk[w], w))
    placement = np.asarray(placement, dtype=np.int64)
    dur = problem.duration(placement).tolist()
    comm = problem.transfer_times(placement)
    in_ptr = problem.in_ptr.tolist()
    pred = problem.edge_src[problem.in_edges].tolist()
    pcomm = comm[problem.in_edges].tolist()
    place = placement.tolist()
    free = [0.0] * problem.n_devices
    start = [0.0] * n
    finish = [0.0] * n
    for v in order:
        s = free[place[v]]
        for i in range(in_ptr[v], in_ptr[v + 1]):
            r = finish[pred[i]] + pcomm[i]
            if r > s:
                s = r
        start[v] = s
        finish[v] = s + dur[v]
        free[place[v]] = finish[v]
    return np.asarray(start, dtype=np.float64)


def heads_tails(problem: Problem, min_dur: list) -> tuple[list, list]:
    """Longest path ending just before each node (head) and starting just after it (tail).

    ``min_dur`` is each node's smallest possible duration (any unit); communication is 0.
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
    """Per edge, the cheapest transfer between two *different* devices (0 with one device)."""
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
    """
    n = problem.n_nodes
    topo = problem.topo.tolist()
    in_ptr, out_ptr = problem.in_ptr.tolist(), problem.out_ptr.tolist()
    in_edges, out_edges = problem.in_edges.tolist(), problem.out_edges.tolist()
    src, dst = problem.edge_src.tolist(), problem.edge_dst.tolist()
    head = [0] * n
    for w in topo:
        ready = []
        for i in range(in_ptr[w], in_ptr[w + 1]):
            e = in_edges[i]
            u = src[e]
            ready.append((head[u] + min_dur[u], min_dur[u], head[u], min_comm[e]))
        head[w] = _comm_level(ready)
    tail = [0] * n
    for u in reversed(topo):
        ready = []
        for i in range(out_ptr[u], out_ptr[u + 1]):
            e = out_edges[i]
            w = dst[e]
            ready.append((tail[w] + min_dur[w], min_dur[w], tail[w], min_comm[e]))
        tail[u] = _comm_level(ready)
    return head, tail


def comm_lower_bound(problem: Problem) -> float:
    """A lower bound on the makespan in seconds from :func:`heads_tails_comm`."""
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
    """The best constant bound of :func:`window_cuts` (``lb`` when no window beats it)."""
    cuts = window_cuts(head, tail, min_dur, k, lb, max_cuts=1)
    if not cuts:
        return float(lb)
    h, t, a = cuts[0]
    return max(float(lb), h + t + sum(max(0.0, d - x) for d, x in zip(min_dur, a)) / k)


def reachability(problem: Problem) -> list[int]:
    """Descendants of every node as a Python-int bitset (bit ``w`` set when a path ``v -> w`` exists)."""
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


class Budget:
    """The wall-clock budget of one solver call: every phase asks what is left.

    The deadline is ``start + limit``; phases that cannot be interrupted (the heuristic,
    model building, decoding) check :meth:`left` between steps and are sized from
    estimates, so the whole call ends within the limit plus a small margin.
    """

    def __init__(self, limit_s: float) -> None:
        self.limit_s = float(limit_s)
        self.t0 = _time.perf_counter()

    def elapsed(self) -> float:
        """Seconds since the call started."""
        return _time.perf_counter() - self.t0

    def left(self) -> float:
        """Seconds left before the deadline (negative once past it)."""
        return self.limit_s - self.elapsed()


def solve_within(solver, model, seconds: float) -> int:
    """Run a CP-SAT ``solver`` on ``model`` for at most ``seconds`` of wall time.

    A timer calls ``stop_search`` at the budget, and CP-SAT's own ``max_time_in_seconds``
    is set a little above it (a safety net): with only its own limit, CP-SAT's interleaved
    search stops once it expects the next batch not to fit, measured at 60-85% of the
    limit on 50-node models, which left a fifth of every budget unused.

    CP-SAT's presolve can raise from C++ on some models (or-tools 9.15 throws
    ``IndexError: raw_hash_map<>::at`` on small peak-memory models; upstream reports of
    the same class: google/or-tools#5091, #5288). The search then runs once more with
    presolve off, in the time left; a second failure is a :class:`SolverError`.
    """
    import threading
    t0 = _time.perf_counter()

    def run(budget_s: float) -> int:
        if unlimited(budget_s):  # no wall limit: CP-SAT's own limits (deterministic time) only
            return solver.solve(model)
        budget_s = max(0.05, float(budget_s))
        solver.parameters.max_time_in_seconds = 1.2 * budget_s + 0.5
        timer = threading.Timer(budget_s, solver.stop_search)
        timer.daemon = True
        timer.start()
        try:
            return solver.solve(model)
        finally:
            timer.cancel()

    try:
        return run(seconds)
    except Exception as exc:  # an exception out of the C++ solver, never our own code
        if not solver.parameters.cp_model_presolve:
            raise SolverError(f"CP-SAT failed ({type(exc).__name__}: {exc})") from None
        first = f"{type(exc).__name__}: {exc}"
    solver.parameters.cp_model_presolve = False
    try:
        return run(seconds - (_time.perf_counter() - t0))
    except Exception as exc:
        raise SolverError(f"CP-SAT failed with presolve ({first}) and without it "
                          f"({type(exc).__name__}: {exc})") from None


#: Wall budgets from this many seconds on (about 31 years) count as no limit: a thread timer
#: cannot wait that long (``threading.TIMEOUT_MAX``), and no run does.
UNLIMITED_S = 1e9


def unlimited(seconds: float) -> bool:
    """True when ``seconds`` is no wall limit at all (``inf`` or a huge value).

    Parameters
    ----------
    seconds : float
        A time budget in seconds.

    Returns
    -------
    bool
    """
    return not math.isfinite(float(seconds)) or float(seconds) >= UNLIMITED_S


class OutOfTime(Exception):
    """Raised inside model building when the budget runs out; the caller falls back."""


def heuristic_start(problem: Problem, *, time_limit: float, seed: int, memory_model: str) -> Solution:
    """The ``heuristic`` solver's answer (placement and schedule), the exact solvers' incumbent.

    Called directly, not through the registry: a bug in the heuristic surfaces here.
    ``time_limit`` caps its improvement phases (its constructions always run).
    """
    from . import pardnn
    return pardnn.solve(problem, time_limit=max(float(time_limit), 1e-3), seed=seed, memory_model=memory_model)


def solution_makespan(problem: Problem, sol: Solution) -> float:
    """Makespan of a solution's own schedule (canonical when it has none); inf without placement."""
    if sol.placement is None:
        return float("inf")
    place = np.asarray(sol.placement, dtype=np.int64)
    if problem.n_nodes == 0:
        return 0.0
    if sol.start is None:
        return float(canonical_schedule(problem, place)[1].max())
    return float((np.asarray(sol.start, dtype=np.float64) + problem.duration(place)).max())


def fallback(problem: Problem, incumbent: Solution | None, memory_model: str, reason: str,
             stats: dict, lower_bound: float = 0.0) -> Solution:
    """The incumbent (the heuristic's answer) as the result, with ``reason`` in the message.

    Status ``feasible`` (``optimal`` only when the heuristic itself proved it), the best
    of the generic bound and ``lower_bound``; ``unknown`` when there is no incumbent.
    """
    stats = dict(stats)
    stats["stop_reason"] = stats.get("stop_reason", reason)
    stats["from_heuristic"] = True
    bound = max(problem_lower_bound(problem), float(lower_bound))
    if incumbent is None or incumbent.placement is None:
        status = incumbent.status if incumbent is not None and incumbent.status is Status.INFEASIBLE \
            else Status.UNKNOWN
        msg = reason if incumbent is None or not incumbent.message else f"{reason}; heuristic: {incumbent.message}"
        return Solution(status, lower_bound=bound, message=msg, memory_model=memory_model, stats=stats)
    status = Status.OPTIMAL if incumbent.status is Status.OPTIMAL else Status.FEASIBLE
    bound = max(bound, float(incumbent.lower_bound or 0.0))
    return Solution(status, placement=np.asarray(incumbent.placement, dtype=np.int64), start=incumbent.start,
                    lower_bound=bound, message=f"{reason}; this is the heuristic's schedule",
                    memory_model=memory_model, stats=stats)
