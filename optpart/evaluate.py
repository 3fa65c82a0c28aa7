"""The evaluator and the checker: one score for every placement (``docs/model.md`` sections 2-4).

* :func:`canonical_schedule` turns a bare placement into the canonical non-delay
  list schedule of docs/model.md section 2: priorities are bottom levels under the
  placement, a device that falls idle starts its highest-priority ready node
  (ties: lower node index), and otherwise waits for the earliest ready node.
  Event-driven simulation in O((V + E) log V) with one ready heap and one
  pending heap per device. Events at equal times are handled in device-index order.
* :func:`static_memory` and :func:`peak_memory` (from :mod:`optpart.model.memory`, re-exported
  here) give bytes per device under the two memory models of section 3.
* :func:`evaluate` scores a placement (and optionally a solver's own schedule) into a
  :class:`~optpart.result.Result`: makespan, memory, lower bound, gap.
* :func:`violations` / :func:`check` verify any result against rules 1-4 (durations,
  precedence with communication, no overlap, memory, constraints) and its reported
  makespan and status. Every solver's tests go through them.
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from .bounds import problem_lower_bound
from .errors import ProblemError, ScheduleError
from .model.memory import as_placement as _as_placement
from .model.memory import fits, memory_timeline, peak_memory, static_memory
from .model.paths import bottom_levels_by_edge
from .model.problem import Problem
from .result import Result, Status

__all__ = [
    "bottom_levels",
    "canonical_schedule",
    "static_memory",
    "peak_memory",
    "memory_timeline",
    "problem_lower_bound",
    "time_tolerance",
    "evaluate",
    "violations",
    "check",
]


def bottom_levels(problem: Problem, placement: np.ndarray, duration: np.ndarray | None = None,
                  transfer: np.ndarray | None = None) -> np.ndarray:
    """Bottom level of every node under a placement: its run time plus the heaviest
    (transfer + bottom level) over its successors. The canonical schedule's priority.

    Parameters
    ----------
    problem : Problem
        The problem.
    placement : numpy.ndarray
        A device index per node.
    duration : numpy.ndarray, optional
        Run time of every node on its device, seconds (default: time / speed under ``placement``).
    transfer : numpy.ndarray, optional
        Delay of every edge under ``placement``, seconds (default: latency + bytes / bandwidth
        across devices, 0 within one).

    Returns
    -------
    numpy.ndarray
        Seconds per node.
    """
    dur = problem.duration(placement) if duration is None else duration
    comm = problem.transfer_times(placement) if transfer is None else transfer
    return bottom_levels_by_edge(problem, dur, comm)


def canonical_schedule(problem: Problem, placement, priority: np.ndarray | None = None
                       ) -> tuple[np.ndarray, np.ndarray]:
    """The canonical list schedule of a placement: ``(start, finish)`` arrays in seconds.

    ``priority`` replaces the bottom levels when given (higher runs first); solvers
    use it to replay their own order through the same simulation.

    Parameters
    ----------
    problem : Problem
        The problem.
    placement : array-like of int
        A device index per node.
    priority : numpy.ndarray, optional
        A priority per node (higher first among ready nodes); default the bottom levels.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        Start and finish time of every node, seconds.
    """
    placement = _as_placement(problem, placement)
    n, k = problem.n_nodes, problem.n_devices
    if n == 0:
        return np.zeros(0), np.zeros(0)
    dur_arr = problem.duration(placement)
    comm_arr = problem.transfer_times(placement)
    prio = bottom_levels(problem, placement, dur_arr, comm_arr) if priority is None else np.asarray(priority)
    neg_prio = (-prio).tolist()
    dur = dur_arr.tolist()
    place = placement.tolist()
    out_ptr = problem.out_ptr.tolist()
    succ = problem.edge_dst[problem.out_edges].tolist()
    ecomm = comm_arr[problem.out_edges].tolist()
    indeg = np.diff(problem.in_ptr).tolist()

    start = [0.0] * n
    finish = [0.0] * n
    ready_at = [0.0] * n
    pending: list[list] = [[] for _ in range(k)]   # (ready time, node): predecessors all done
    ready: list[list] = [[] for _ in range(k)]     # (-priority, node): ready by the device's clock
    free_at = [0.0] * k
    cand = [math.inf] * k                           # next start time of each device
    events: list[tuple[float, int]] = []            # (time, device), lazily invalidated via cand
    push, pop = heapq.heappush, heapq.heappop

    for v in range(n):
        if indeg[v] == 0:
            pending[place[v]].append((0.0, v))
    for d in range(k):
        if pending[d]:
            heapq.heapify(pending[d])
            cand[d] = max(free_at[d], pending[d][0][0])
            push(events, (cand[d], d))

    done = 0
    touched: list[int] = []
    while done < n:
        t, d = pop(events)
        if t != cand[d]:
            continue  # stale event
        cand[d] = math.inf  # this event is consumed; the device's next one is pushed below
        pend, rdy = pending[d], ready[d]
        while pend and pend[0][0] <= t:
            _, v = pop(pend)
            push(rdy, (neg_prio[v], v))
        _, v = pop(rdy)
        f = t + dur[v]
        start[v] = t
        finish[v] = f
        free_at[d] = f
        done += 1
        touched.clear()
        touched.append(d)
        for i in range(out_ptr[v], out_ptr[v + 1]):
            w = succ[i]
            r = f + ecomm[i]
            if r > ready_at[w]:
                ready_at[w] = r
            indeg[w] -= 1
            if indeg[w] == 0:
                e = place[w]
                push(pending[e], (ready_at[w], w))
                touched.append(e)
        for e in touched:
            if ready[e]:
                c = free_at[e]
            elif pending[e]:
                c = max(free_at[e], pending[e][0][0])
            else:
                c = math.inf
            if c != cand[e]:
                cand[e] = c
                if c < math.inf:
                    push(events, (c, e))
    return np.asarray(start), np.asarray(finish)


def evaluate(problem: Problem, placement, start: np.ndarray | None = None, *, solver: str = "evaluate",
             status: Status = Status.FEASIBLE, lower_bound: float | None = None, memory_model: str = "peak",
             wall_seconds: float = 0.0, message: str = "", options: dict | None = None,
             stats: dict | None = None) -> Result:
    """Score a placement into a :class:`Result`.

    Without ``start`` the canonical schedule is used; with it, the given start times
    (a solver's own schedule) and finish = start + run time. The makespan is always
    recomputed here, never taken from a solver. ``lower_bound`` (a solver's proven
    bound) is combined with the generic bounds.

    Parameters
    ----------
    problem : Problem
        The problem with its devices.
    placement : array of device indices, or {node id: device id}
        The placement to score.
    start : numpy.ndarray, optional
        A solver's own start times (default: the canonical schedule).
    solver, status, lower_bound, wall_seconds, message, options, stats
        Carried into the result (``status`` is what the caller claims, ``feasible`` by default).
    memory_model : {"peak", "static"}
        The memory model the placement is judged under; ``peak`` (liveness), the default
        everywhere (CLI, :func:`optpart.solve`), equal to ``static`` on graphs without the
        param/output/temp split.

    Returns
    -------
    Result
        Status ``invalid`` (never ``feasible`` or ``optimal``) when the placement breaks memory
        under ``memory_model`` or a constraint; its ``message`` says what it breaks.
    """
    placement = _as_placement(problem, placement)
    if start is None:
        start, finish = canonical_schedule(problem, placement)
    else:
        start = np.asarray(start, dtype=np.float64)
        if start.shape != (problem.n_nodes,):
            raise ProblemError(f"schedule has {start.size} start times for {problem.n_nodes} nodes")
        finish = start + problem.duration(placement)
    makespan = float(finish.max()) if problem.n_nodes else 0.0
    bound = problem_lower_bound(problem)
    if lower_bound is not None and lower_bound > bound:
        bound = float(lower_bound)
    if memory_model not in ("static", "peak"):
        raise ProblemError(f"memory_model={memory_model!r}; use 'static' or 'peak'")
    result = Result(
        problem=problem.name, solver=solver, status=Status(status), makespan=makespan,
        lower_bound=bound, placement=placement, start=start, finish=finish,
        memory_static=static_memory(problem, placement),
        memory_peak=peak_memory(problem, placement, start, finish),
        memory_model=memory_model, wall_seconds=wall_seconds, message=message,
        options=dict(options or {}), stats=dict(stats or {}), source_problem=problem,
    )
    if result.status.has_solution:
        broken = _broken(problem, result)
        if broken:
            result.status = Status.INVALID
            result.message = "; ".join([message] * bool(message) + broken)
    return result


def _broken(problem: Problem, result: Result) -> list[str]:
    """What a scored placement breaks: memory under its model, pins/forbidden devices, colocation (first of each)."""
    from .units import format_bytes

    p = result.placement
    out = []
    used = result.memory_peak if result.memory_model == "peak" else result.memory_static
    over = np.flatnonzero(~fits(used, problem.device_memory))
    if over.size:
        d = int(over[0])
        more = f" (and {over.size - 1} more devices)" if over.size > 1 else ""
        out.append(f"device '{problem.device_ids[d]}' holds {format_bytes(used[d])} ({result.memory_model}) "
                   f"but has {format_bytes(problem.device_memory[d])}{more}")
    if problem.n_nodes:
        bad = np.flatnonzero(~problem.allowed[np.arange(problem.n_nodes), p])
        if bad.size:
            v = int(bad[0])
            out.append(f"node '{problem.node_ids[v]}' is on device '{problem.device_ids[p[v]]}', "
                       "which its constraints forbid")
        split = _split_groups(problem, p)
        if split.size:
            out.append(f"colocation group of node '{problem.node_ids[problem.groups[int(split[0])][0]]}' "
                       "is split over devices")
    return out


#: Relative tolerance on times: the one rule the checker and the schedulers share.
TIME_RTOL = 1e-9


def time_tolerance(scale: float) -> float:
    """Slack allowed when comparing two times near ``scale`` seconds (float noise only).

    Relative to ``scale`` with no absolute floor: operator times may be nanoseconds, and
    an absolute slack of 1e-9 s would let two such nodes overlap (or a bound below the
    makespan pass for a proof of optimality).

    Parameters
    ----------
    scale : float
        The magnitude of the times compared, seconds (a makespan, a start time).

    Returns
    -------
    float
        The slack, seconds: a few ulps of ``scale``.
    """
    return TIME_RTOL * abs(scale)


def _split_groups(problem: Problem, p: np.ndarray) -> np.ndarray:
    """Indices (ascending) of the colocation groups whose members sit on more than one device.

    One pass over ``group_of`` with ufunc reductions, not a ``np.unique`` per group."""
    if not problem.groups:
        return np.zeros(0, dtype=np.int64)
    g = problem.group_of
    member = g >= 0
    gid, dev = g[member], p[member]
    lo = np.full(len(problem.groups), np.iinfo(np.int64).max)
    hi = np.full(len(problem.groups), -1)
    np.minimum.at(lo, gid, dev)
    np.maximum.at(hi, gid, dev)
    return np.flatnonzero(lo != hi)


def violations(problem: Problem, result: Result, limit: int = 10) -> list[str]:
    """Every way (up to ``limit``) in which ``result`` breaks the model; empty when valid.

    Checks rules 1-4 of docs/model.md section 2 (durations, precedence with communication,
    one node at a time per device, constraints, memory under the model the result
    claims), the reported makespan and memory, and that the status is honest.

    Parameters
    ----------
    problem : Problem
        The problem the result claims to solve.
    result : Result
        The result, with its placement and schedule.
    limit : int
        Stop after this many findings.

    Returns
    -------
    list of str
        One line per broken rule, naming the node, edge, device or field.
    """
    out: list[str] = []
    names = problem.node_ids

    def add(msg: str) -> bool:
        out.append(msg)
        return len(out) >= limit

    if not result.status.has_solution and result.status is not Status.INVALID:
        if result.placement is not None:
            add(f"status '{result.status.value}' but a placement is attached")
        return out
    p = result.placement
    if p is None or result.start is None or result.finish is None:
        return [f"status '{result.status.value}' needs a placement and a schedule"]
    p = np.asarray(p)
    n, k = problem.n_nodes, problem.n_devices
    if p.shape != (n,) or np.asarray(result.start).shape != (n,) or np.asarray(result.finish).shape != (n,):
        return [f"placement/schedule sizes {p.shape}/{np.shape(result.start)}/{np.shape(result.finish)} "
                f"do not match {n} nodes"]
    if n == 0:
        return out
    if p.min() < 0 or p.max() >= k:
        v = int(np.flatnonzero((p < 0) | (p >= k))[0])
        return [f"node '{names[v]}' is on device index {int(p[v])}, outside 0..{k - 1}"]
    start = np.asarray(result.start, dtype=np.float64)
    finish = np.asarray(result.finish, dtype=np.float64)
    makespan = float(finish.max())
    tol = time_tolerance(makespan)

    # Constraints: pins, forbidden devices, colocation.
    bad = ~problem.allowed[np.arange(n), p]
    for v in np.flatnonzero(bad)[:limit].tolist():
        if add(f"node '{names[v]}' is on device '{problem.device_ids[p[v]]}', which its constraints forbid"):
            return out
    for gi in _split_groups(problem, p)[:limit].tolist():
        members = problem.groups[gi]
        if add(f"colocation group of node '{names[members[0]]}' is split over devices "
               f"{sorted(problem.device_ids[d] for d in np.unique(p[members]))}"):
            return out
    # Rule: finite times, start >= 0, finish = start + time / speed.
    if not (np.isfinite(start).all() and np.isfinite(finish).all()):
        v = int(np.flatnonzero(~(np.isfinite(start) & np.isfinite(finish)))[0])
        return out + [f"node '{names[v]}' has a non-finite start or finish"]
    for v in np.flatnonzero(start < -tol)[:limit].tolist():
        if add(f"node '{names[v]}' starts at {start[v]:.9g} < 0"):
            return out
    dur = problem.duration(p)
    for v in np.flatnonzero(np.abs(finish - start - dur) > tol)[:limit].tolist():
        if add(f"node '{names[v]}' runs {finish[v] - start[v]:.9g} s but needs {dur[v]:.9g} s "
               f"on device '{problem.device_ids[p[v]]}'"):
            return out
    # Rule 2: precedence with communication.
    comm = problem.transfer_times(p)
    late = start[problem.edge_dst] < finish[problem.edge_src] + comm - tol
    for e in np.flatnonzero(late)[:limit].tolist():
        u, w = int(problem.edge_src[e]), int(problem.edge_dst[e])
        if add(f"edge '{names[u]}' -> '{names[w]}': '{names[w]}' starts at {start[w]:.9g} before "
               f"'{names[u]}' finishes at {finish[u]:.9g} plus transfer {comm[e]:.9g}"):
            return out
    # Rule 1: one node at a time per device.
    order = np.lexsort((finish, start, p))
    same = p[order][1:] == p[order][:-1]
    overlap = same & (start[order][1:] < finish[order][:-1] - tol)
    for i in np.flatnonzero(overlap)[:limit].tolist():
        u, w = int(order[i]), int(order[i + 1])
        if add(f"nodes '{names[u]}' and '{names[w]}' overlap on device '{problem.device_ids[p[u]]}' "
               f"({start[u]:.9g}-{finish[u]:.9g} and {start[w]:.9g}-{finish[w]:.9g})"):
            return out
    # Rule 4: memory under the model the result claims.
    if result.memory_model not in ("static", "peak"):
        return out + [f"unknown memory model '{result.memory_model}'"]
    used = static_memory(problem, p) if result.memory_model == "static" else peak_memory(problem, p, start, finish)
    cap = problem.device_memory
    for d in np.flatnonzero(~fits(used, cap)).tolist():
        from .units import format_bytes
        if add(f"device '{problem.device_ids[d]}' holds {format_bytes(used[d])} ({result.memory_model}) "
               f"but has {format_bytes(cap[d])}"):
            return out
    # Reported figures.
    if not abs(result.makespan - makespan) <= tol:
        add(f"reported makespan {result.makespan:.9g} differs from the schedule's {makespan:.9g}")
    if result.lower_bound > makespan + tol:
        add(f"lower bound {result.lower_bound:.9g} exceeds the makespan {makespan:.9g}")
    if result.status is Status.INVALID and not out:
        add("status 'invalid' but the placement breaks no memory limit or constraint")
    if result.status is Status.OPTIMAL and makespan > result.lower_bound + max(tol, 1e-6 * makespan):
        add(f"status 'optimal' but makespan {makespan:.9g} is above the proven bound {result.lower_bound:.9g}")
    return out[:limit]


def check(problem: Problem, result: Result) -> None:
    """Raise :class:`ScheduleError` listing what ``result`` breaks; return None when it is valid.

    Parameters
    ----------
    problem : Problem
        The problem the result claims to solve.
    result : Result
        The result to check.

    Raises
    ------
    ScheduleError
        With every finding of :func:`violations`.
    """
    found = violations(problem, result)
    if found:
        more = "" if len(found) < 10 else " (first 10 shown)"
        raise ScheduleError(f"{result.solver} result for '{problem.name}' is invalid{more}: " + "; ".join(found))
