"""The evaluator and the checker: one score for every placement (``../shared/MODEL.md`` sections 2-4).

* :func:`canonical_schedule` turns a bare placement into the canonical non-delay
  list schedule of MODEL.md section 2: priorities are bottom levels under the
  placement, a device that falls idle starts its highest-priority ready node
  (ties: lower node index), and otherwise waits for the earliest ready node.
  Event-driven simulation in O((V + E) log V) with one ready heap and one
  pending heap per device. Events at equal times are handled in device-index order.
* :func:`static_memory` and :func:`peak_memory` give bytes per device under the two
  memory models of section 3.
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

from .bounds import lower_bound as _generic_lower_bound
from .errors import ProblemError, ScheduleError
from .paths import bottom_levels_by_edge
from .problem import Problem
from .result import Result, Status

__all__ = [
    "bottom_levels",
    "canonical_schedule",
    "static_memory",
    "peak_memory",
    "memory_timeline",
    "problem_lower_bound",
    "evaluate",
    "violations",
    "check",
]


def _as_placement(problem: Problem, placement) -> np.ndarray:
    if isinstance(placement, dict):
        return problem.placement_from_ids(placement)
    arr = np.asarray(placement, dtype=np.int64)
    if arr.shape != (problem.n_nodes,):
        raise ProblemError(f"placement has {arr.size} entries for {problem.n_nodes} nodes")
    if problem.n_nodes and (arr.min() < 0 or arr.max() >= problem.n_devices):
        v = int(np.flatnonzero((arr < 0) | (arr >= problem.n_devices))[0])
        raise ProblemError(f"placement puts node '{problem.node_ids[v]}' on device index {int(arr[v])}, "
                           f"outside 0..{problem.n_devices - 1}")
    return arr


def bottom_levels(problem: Problem, placement: np.ndarray, duration: np.ndarray | None = None,
                  transfer: np.ndarray | None = None) -> np.ndarray:
    """Bottom level of every node under a placement: its run time plus the heaviest
    (transfer + bottom level) over its successors. The canonical schedule's priority."""
    dur = problem.duration(placement) if duration is None else duration
    comm = problem.transfer_times(placement) if transfer is None else transfer
    return bottom_levels_by_edge(problem, dur, comm)


def canonical_schedule(problem: Problem, placement, priority: np.ndarray | None = None
                       ) -> tuple[np.ndarray, np.ndarray]:
    """The canonical list schedule of a placement: ``(start, finish)`` arrays in seconds.

    ``priority`` replaces the bottom levels when given (higher runs first); solvers
    use it to replay their own order through the same simulation.
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


def static_memory(problem: Problem, placement) -> np.ndarray:
    """Bytes per device under the static model: the sum of ``memory`` of its nodes."""
    placement = _as_placement(problem, placement)
    return np.bincount(placement, weights=problem.memory, minlength=problem.n_devices).astype(np.float64)


def _liveness_events(problem: Problem, placement: np.ndarray, start, finish):
    """Memory events of the liveness model: ``(base, makespan, ev_dev, ev_time, ev_delta, bounds)``.

    ``base`` holds each device's ``param_bytes`` (held all step). The events change the
    rest, sorted by device, then time, then kind: at equal times removals of proper
    intervals come first, then additions, then removals of zero-length intervals;
    ``bounds[d]:bounds[d+1]`` are device ``d``'s events.
    """
    n, k = problem.n_nodes, problem.n_devices
    base = np.bincount(placement, weights=problem.param_bytes, minlength=k).astype(np.float64)
    start = np.asarray(start, dtype=np.float64)
    finish = np.asarray(finish, dtype=np.float64)
    makespan = float(finish.max()) if n else 0.0
    empty = np.zeros(0)
    if n == 0 or not problem.has_split:
        return base, makespan, empty, empty, empty, np.zeros(k + 1, dtype=np.int64)
    out_b, tmp_b = problem.output_bytes, problem.temp_bytes
    src, dst = problem.edge_src, problem.edge_dst
    a, b = placement[src], placement[dst]
    comm = problem.transfer_times(placement)
    # The output of u lives on d(u) until its last local consumer ends or its last transfer out lands.
    end = np.full(n, -np.inf)
    local = a == b
    np.maximum.at(end, src[local], finish[dst[local]])
    np.maximum.at(end, src[~local], finish[src[~local]] + comm[~local])
    end[np.isinf(end)] = makespan
    devs, begs, ends, sizes = [placement, placement], [start, start], [end, finish], [out_b, tmp_b]
    # A received copy lives on the consumer's device from its first arrival to its last use there.
    remote = ~local
    if remote.any():
        key = src[remote] * k + b[remote]
        uniq, inv = np.unique(key, return_inverse=True)
        arrive = np.full(uniq.size, np.inf)
        np.minimum.at(arrive, inv, finish[src[remote]] + comm[remote])
        last = np.full(uniq.size, -np.inf)
        np.maximum.at(last, inv, finish[dst[remote]])
        devs.append(uniq % k)
        begs.append(arrive)
        ends.append(np.maximum(last, arrive))
        sizes.append(out_b[uniq // k])
    dev, beg, fin, size = (np.concatenate(x) for x in (devs, begs, ends, sizes))
    keep = size > 0
    dev, beg, fin, size = dev[keep], beg[keep], fin[keep], size[keep]
    instant = fin <= beg
    ev_dev = np.concatenate([dev, dev])
    ev_time = np.concatenate([beg, fin])
    ev_order = np.concatenate([np.ones(size.size), np.where(instant, 2, 0)])
    ev_delta = np.concatenate([size, -size])
    order = np.lexsort((ev_order, ev_time, ev_dev))
    ev_dev, ev_time, ev_delta = ev_dev[order], ev_time[order], ev_delta[order]
    return base, makespan, ev_dev, ev_time, ev_delta, np.searchsorted(ev_dev, np.arange(k + 1))


def peak_memory(problem: Problem, placement, start: np.ndarray, finish: np.ndarray) -> np.ndarray:
    """Peak bytes per device under the liveness model of MODEL.md section 3.

    Held all step: ``param_bytes`` of the device's nodes. Held while running: ``temp_bytes``.
    The output of ``u`` (``output_bytes``) is live on ``d(u)`` from ``S(u)`` until its last
    local consumer finishes or its last transfer out arrives (to the end of the step when
    it has no consumer); a copy received on another device is live from its first arrival
    until the last consumer there finishes. Intervals are half-open, so a tensor freed at
    ``t`` and one allocated at ``t`` do not add up; a zero-length interval counts at its instant.
    """
    placement = _as_placement(problem, placement)
    base, _, _, _, ev_delta, bounds = _liveness_events(problem, placement, start, finish)
    peak = np.zeros(problem.n_devices)
    for d in range(problem.n_devices):
        lo, hi = bounds[d], bounds[d + 1]
        if hi > lo:
            peak[d] = max(0.0, float(np.cumsum(ev_delta[lo:hi]).max()))
    return base + peak


def memory_timeline(problem: Problem, placement, start, finish) -> list[tuple[np.ndarray, np.ndarray]]:
    """Bytes in use over time on each device under the liveness model: ``[(times, bytes), ...]``.

    ``bytes[i]`` is the level from ``times[i]`` on (draw with ``drawstyle="steps-post"``).
    The first point is ``(0, params)``, the ``param_bytes`` held all step; the last is at
    the makespan. A zero-length interval appears as a spike (two points at one time).
    ``max(bytes)`` of a device equals its :func:`peak_memory`.
    """
    placement = _as_placement(problem, placement)
    base, makespan, _, ev_time, ev_delta, bounds = _liveness_events(problem, placement, start, finish)
    out = []
    for d in range(problem.n_devices):
        lo, hi = int(bounds[d]), int(bounds[d + 1])
        level = np.cumsum(ev_delta[lo:hi])
        times = np.concatenate([[0.0], ev_time[lo:hi], [makespan]])
        values = base[d] + np.concatenate([[0.0], level, [level[-1] if level.size else 0.0]])
        out.append((times, np.maximum(values, base[d])))
    return out


def problem_lower_bound(problem: Problem) -> float:
    """The generic lower bound of a problem, computed once and cached on it."""
    cached = getattr(problem, "_lower_bound_cache", None)
    if cached is None:
        cached = _generic_lower_bound(problem)
        problem._lower_bound_cache = cached
    return cached


def evaluate(problem: Problem, placement, start: np.ndarray | None = None, *, solver: str = "evaluate",
             status: Status = Status.FEASIBLE, lower_bound: float | None = None, memory_model: str = "static",
             wall_seconds: float = 0.0, message: str = "", options: dict | None = None,
             stats: dict | None = None) -> Result:
    """Score a placement into a :class:`Result`.

    Without ``start`` the canonical schedule is used; with it, the given start times
    (a solver's own schedule) and finish = start + run time. The makespan is always
    recomputed here, never taken from a solver. ``lower_bound`` (a solver's proven
    bound) is combined with the generic bounds.
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
    return Result(
        problem=problem.name, solver=solver, status=Status(status), makespan=makespan,
        lower_bound=bound, placement=placement, start=start, finish=finish,
        memory_static=static_memory(problem, placement),
        memory_peak=peak_memory(problem, placement, start, finish),
        memory_model=memory_model, wall_seconds=wall_seconds, message=message,
        options=dict(options or {}), stats=dict(stats or {}),
    )


def _tolerance(scale: float) -> float:
    return 1e-9 * max(1.0, abs(scale)) + 1e-12


def violations(problem: Problem, result: Result, limit: int = 10) -> list[str]:
    """Every way (up to ``limit``) in which ``result`` breaks the model; empty when valid.

    Checks rules 1-4 of MODEL.md section 2 (durations, precedence with communication,
    one node at a time per device, constraints, memory under the model the result
    claims), the reported makespan and memory, and that the status is honest.
    """
    out: list[str] = []
    names = problem.node_ids

    def add(msg: str) -> bool:
        out.append(msg)
        return len(out) >= limit

    if not result.status.has_solution:
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
    tol = _tolerance(makespan)

    # Constraints: pins, forbidden devices, colocation.
    bad = ~problem.allowed[np.arange(n), p]
    for v in np.flatnonzero(bad)[:limit].tolist():
        if add(f"node '{names[v]}' is on device '{problem.device_ids[p[v]]}', which its constraints forbid"):
            return out
    for members in problem.groups:
        if np.unique(p[members]).size > 1:
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
    for d in np.flatnonzero(used > cap * (1 + 1e-9) + 1e-9).tolist():
        from .units import format_bytes
        if add(f"device '{problem.device_ids[d]}' holds {format_bytes(used[d])} ({result.memory_model}) "
               f"but has {format_bytes(cap[d])}"):
            return out
    # Reported figures.
    if not abs(result.makespan - makespan) <= tol:
        add(f"reported makespan {result.makespan:.9g} differs from the schedule's {makespan:.9g}")
    if result.lower_bound > makespan + tol:
        add(f"lower bound {result.lower_bound:.9g} exceeds the makespan {makespan:.9g}")
    if result.status is Status.OPTIMAL and makespan > result.lower_bound + max(tol, 1e-6 * makespan):
        add(f"status 'optimal' but makespan {makespan:.9g} is above the proven bound {result.lower_bound:.9g}")
    return out[:limit]


def check(problem: Problem, result: Result) -> None:
    """Raise :class:`ScheduleError` listing what ``result`` breaks; return None when it is valid."""
    found = violations(problem, result)
    if found:
        more = "" if len(found) < 10 else " (first 10 shown)"
        raise ScheduleError(f"{result.solver} result for '{problem.name}' is invalid{more}: " + "; ".join(found))
