"""``heuristic`` (alias ``pardnn``): the deterministic critical-path partitioner.

After ParDNN (Qararyah, Wahib, Dikbayir, Belviranli, Unat, "A computational-graph
partitioning method for training memory-constrained DNNs", Parallel Computing 2021),
with our own schedule and schedule-aware improvement on top. Phases, one module each:

1. :mod:`.slicing`: heaviest paths by bottom level; the first ``k`` are the primaries.
2. :mod:`.mapping`: merge communication-bound clusters, map the rest by windowed load
   plus cut communication.
3. :mod:`.refine`: critical-chain moves against the simulated schedule.
4. :mod:`.memory`: constraint projection, memory repair (memory freed per
   communication added) and the greedy fill that makes the memory guarantee provable.
5. :mod:`.eft`: a second construction, memory-aware earliest-finish-time insertion
   list scheduling (HEFT-like), on small graphs also with the priority rank_u + rank_d
   and with seeded noisy ranks (a multi-start in priority space).
6. :mod:`.improve`: iterated local search (unit moves, swaps, seeded perturbation)
   scored by justified schedules on small graphs; on larger ones hill climbing whose
   moves are scored by replaying the incumbent schedule's order.

Every construction that fits memory is scheduled and the shortest schedule is kept
(also "everything on the fastest device" when one device holds it, so the result is
never worse than ``single``). Measured alternative replacing a phase: on our training
graphs the EFT construction (1.7% above the lower bound at 10^5 nodes) beats phases
1-4 (16%), so above ``_BOTH_SIZE`` nodes + edges only EFT runs, with phases 1-4 as its
fallback when memory-aware EFT gets stuck.

The returned schedule is :mod:`.schedule`'s insertion schedule (double-justified up
to ``_JUSTIFY_SIZE``). Options: ``effort`` (0: constructions only; 1: default; higher:
more improvement), ``memory_model`` (``"static"``, ``"peak"``); ``time_limit`` caps
the improvement. Deterministic: randomness only from ``seed``, no wall time unless a
``time_limit`` is given; ties go to the lower node or device index.

Statuses: ``feasible``; ``optimal`` only when the makespan meets the generic lower
bound; ``infeasible`` when the pinned nodes alone overflow a device; ``unknown``
when no placement within memory was found (never under the condition of
:mod:`.memory`'s guarantee with the static model). See ``docs/heuristic.md``.
"""

from __future__ import annotations

import time as _time

import numpy as np

from ...evaluate import peak_memory, problem_lower_bound
from ...errors import SolverError
from ...problem import Problem
from ...result import Status
from ...units import format_bytes
from ..base import Solution
from .eft import eft_schedule
from .improve import iterated_search, local_search
from .mapping import map_clusters
from .memory import greedy_fill, memory_units, project_constraints, repair_memory
from .refine import refine
from .schedule import Graph, justify, schedule_placement
from .slicing import levels, slice_paths

__all__ = ["solve", "pardnn_placement"]

_WORK_PER_EFFORT = 300_000  # (nodes + edges) x evaluations per unit of effort
_MAX_EVALS_PER_EFFORT = 1_500
_BOTH_SIZE = 150_000       # nodes + edges up to which both constructions run at effort 1
_JUSTIFY_SIZE = 250_000    # ... up to which schedules are double-justified at effort 1
_JUSTIFIED_SCORE_NODES = 300
_VARIANT_SIZE = 80_000     # nodes + edges up to which extra EFT priority orders are tried
_NOISY_ORDERS = 24         # noisy orders per unit of effort (fewer on larger graphs)


def pardnn_placement(problem: Problem, g: Graph, capacity: list[float], refine_evals: int = 20,
                     deadline: float | None = None, units=None) -> list[int] | None:
    """Phases 1-4: slicing, merging and mapping, refinement, memory step. None if stuck."""
    top, bottom = levels(g)
    _, paths = slice_paths(g, bottom)
    place = map_clusters(g, top, paths, problem.allowed, problem.memory.tolist(), capacity)
    place = project_constraints(problem, g, place)
    units = units if units is not None else memory_units(problem)
    unit_of, members, unit_mem = units
    fixed = repair_memory(problem, g, place, capacity, units)
    if fixed is None:
        fixed = greedy_fill(problem, place, capacity, units)
        if fixed is None:
            return None
    place, _ = refine(g, fixed, problem.allowed, unit_of, members, unit_mem, capacity, refine_evals, deadline)
    return place


def _topological_priority(g: Graph, priority: np.ndarray) -> list[int]:
    """Nodes by decreasing ``priority`` but never before a predecessor (Kahn's algorithm
    with a heap keyed by (-priority, node index))."""
    import heapq
    pr = (-np.asarray(priority, dtype=np.float64)).tolist()
    indeg = [g.in_ptr[v + 1] - g.in_ptr[v] for v in range(g.n)]
    heap = [(pr[v], v) for v in range(g.n) if indeg[v] == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        _, v = heapq.heappop(heap)
        out.append(v)
        for i in range(g.out_ptr[v], g.out_ptr[v + 1]):
            w = g.succ[i]
            indeg[w] -= 1
            if indeg[w] == 0:
                heapq.heappush(heap, (pr[w], w))
    return out


def _pinned_overflow(problem: Problem, capacity: list[float]) -> str | None:
    pinned = problem.pin >= 0
    if not pinned.any():
        return None
    load = np.bincount(problem.pin[pinned], weights=problem.memory[pinned], minlength=problem.n_devices)
    for d in range(problem.n_devices):
        if load[d] > capacity[d] * (1 + 1e-9) + 1e-9:
            return (f"the nodes pinned to device '{problem.device_ids[d]}' need {format_bytes(load[d])} "
                    f"but it has {format_bytes(capacity[d])}")
    return None


def _construct(problem: Problem, g: Graph, capacity: list[float], effort: float, hint, deadline, seed: int = 0):
    """Every construction within ``capacity`` (static), improved; (makespan, place, start, finish) or None."""
    n, m = g.n, problem.n_edges
    size = max(1, n + m)
    evals = int(min(effort * _MAX_EVALS_PER_EFFORT, effort * _WORK_PER_EFFORT / size))
    units = memory_units(problem)
    unit_of, members, unit_mem = units
    found = []  # (makespan, tag, place, start, finish)
    jr = 1 if effort * _JUSTIFY_SIZE >= size else 0
    both = effort * _BOTH_SIZE >= size
    res = eft_schedule(g, problem.allowed, unit_of, unit_mem, capacity)
    if res is not None:
        p2, s2, f2 = res
        s2, f2, ms2 = justify(g, p2, s2, f2, jr) if jr else (s2, f2, max(f2) if f2 else 0.0)
        found.append((ms2, 1, p2, s2, f2))
    if effort * _VARIANT_SIZE >= size:
        # more EFT orders on small graphs: rank_u + rank_d (the path length through a node),
        # then rank_u with seeded noise (a cheap multi-start in priority space)
        top, bottom = levels(g)
        rng = np.random.default_rng(seed)
        prios = [np.asarray(top) + np.asarray(bottom)]
        base = np.asarray(bottom)
        for _ in range(int(min(_NOISY_ORDERS, 300_000 / size) * max(1.0, effort))):
            prios.append(base * rng.uniform(0.9, 1.1, size=g.n))
        for tag, pr in enumerate(prios):
            order = _topological_priority(g, pr)
            rv = eft_schedule(g, problem.allowed, unit_of, unit_mem, capacity, order=order)
            if rv is not None:
                pv, sv, fv = rv
                sv, fv, msv = justify(g, pv, sv, fv, jr) if jr else (sv, fv, max(fv))
                found.append((msv, 10 + tag, pv, sv, fv))
    if both or res is None:
        place = pardnn_placement(problem, g, capacity, refine_evals=min(20, evals // 4), deadline=deadline,
                                 units=units)
        if place is not None:
            s, f, ms = schedule_placement(g, place, jr)
            found.append((ms, 0, place, s, f))
    if hint is not None:
        ph = project_constraints(problem, g, np.asarray(hint).tolist())
        ph = repair_memory(problem, g, ph, capacity, units) or greedy_fill(problem, ph, capacity, units)
        if ph is not None:
            s3, f3, ms3 = schedule_placement(g, ph, jr)
            found.append((ms3, 2, ph, s3, f3))
    # no model parallelism, when one device holds everything: never worse than `single`
    usable = problem.allowed.all(axis=0) & (np.asarray(capacity) >= float(problem.memory.sum()))
    if usable.any():
        d = int(np.argmax(np.where(usable, problem.device_speed, -np.inf)))
        p1 = [d] * g.n
        s1, f1, ms1 = schedule_placement(g, p1, 0)
        found.append((ms1, 4, p1, s1, f1))
    if not found:
        place = greedy_fill(problem, None, capacity, units)
        if place is None:
            place = greedy_fill(problem, None, capacity, units, best_fit=True)
        if place is None:
            return None
        s, f, ms = schedule_placement(g, place, jr)
        found.append((ms, 3, place, s, f))
    found.sort(key=lambda x: (x[0], x[1]))
    ms, _, place, s, f = found[0]
    if evals >= 5 and g.k > 1:
        if g.n <= _JUSTIFIED_SCORE_NODES:
            new, used = iterated_search(g, place, problem.allowed, unit_of, members, unit_mem, capacity,
                                        evals, deadline, seed=seed, justified=True)
            if new != place:
                s2, f2, ms2 = schedule_placement(g, new, 2)
                if ms2 < ms:
                    ms, place, s, f = ms2, new, s2, f2
        else:
            # larger graphs: moves scored by replaying the incumbent's order (see improve.py)
            out: dict = {}
            new, used = local_search(g, place, problem.allowed, unit_of, members, unit_mem, capacity,
                                     evals, deadline, keep_order=True, start=s, out=out)
            if new != place and out["makespan"] < ms:
                s2, f2, ms2 = justify(g, new, out["start"], out["finish"], jr)
                ms, place, s, f = ms2, new, s2, f2
    return ms, place, s, f


def _single_device(problem: Problem, g: Graph):
    """Everything on one device: peak memory there is at most the static total (no copies)."""
    usable = problem.allowed.all(axis=0)
    best = None
    for d in sorted(range(g.k), key=lambda d: (-g.speed[d], d)):
        if not usable[d]:
            continue
        place = [d] * g.n
        s, f, ms = schedule_placement(g, place, 0)
        peak = peak_memory(problem, np.asarray(place), np.asarray(s), np.asarray(f))
        if peak[d] <= problem.device_memory[d] * (1 + 1e-9):
            best = (ms, place, s, f)
            break
    return best


def solve(problem: Problem, *, time_limit: float | None = None, seed: int = 0, hint=None,
          memory_model: str = "static", effort: float = 1.0) -> Solution:
    """Place and schedule ``problem`` (see the module docstring).

    Parameters
    ----------
    memory_model : {"static", "peak"}
        The memory model every returned placement respects.
    effort : float
        0: constructions only; 1 (default): bounded improvement sized for the speed
        targets; higher: proportionally more schedule evaluations.
    time_limit : float, optional
        Wall-clock cap on the improvement phases (makes the result depend on timing).
    """
    if memory_model not in ("static", "peak"):
        raise SolverError(f"heuristic: memory_model={memory_model!r}; use 'static' or 'peak'")
    try:
        effort = float(effort)
    except (TypeError, ValueError):
        raise SolverError(f"heuristic: effort={effort!r} must be a number >= 0") from None
    if not effort >= 0:
        raise SolverError(f"heuristic: effort={effort!r} must be a number >= 0")
    t0 = _time.perf_counter()
    deadline = None if time_limit is None else t0 + 0.8 * float(time_limit)
    if problem.n_nodes == 0:
        return Solution(Status.OPTIMAL, placement=np.zeros(0, dtype=np.int64), start=np.zeros(0))
    if memory_model == "peak" and problem.has_split:
        from .peak import solve_peak
        return solve_peak(problem, Graph(problem), time_limit=time_limit, seed=seed, hint=hint, effort=effort,
                          deadline=deadline)
    capacity = problem.device_memory.astype(float).tolist()
    reason = _pinned_overflow(problem, capacity)
    if reason is not None:
        return Solution(Status.INFEASIBLE, message=reason, memory_model=memory_model)
    g = Graph(problem)
    best = None
    rounds = 6 if memory_model == "peak" else 1
    for _ in range(rounds):
        best = _construct(problem, g, capacity, effort, hint, deadline, seed)
        if best is None or memory_model == "static":
            break
        _, place, s, f = best
        peak = peak_memory(problem, np.asarray(place), np.asarray(s), np.asarray(f))
        over = peak > problem.device_memory * (1 + 1e-9) + 1e-9
        if not over.any():
            break
        # Leave the excess free under the static model and try again.
        for d in np.flatnonzero(over).tolist():
            capacity[d] = max(0.0, capacity[d] - float(peak[d] - problem.device_memory[d]) * 1.05)
        best = None
    if best is None and memory_model == "peak":
        best = _single_device(problem, g)
    if best is None:
        msg = ("no placement within memory was found"
               + (" under the peak model" if memory_model == "peak" else "")
               + " (the heuristic's guarantee needs every device to hold total/k plus the largest "
                 "colocation group, and no forbidden devices)")
        return Solution(Status.UNKNOWN, message=msg, memory_model=memory_model)
    ms, place, s, f = best
    lb = problem_lower_bound(problem)
    status = Status.OPTIMAL if ms <= lb + 1e-9 * max(1.0, ms) else Status.FEASIBLE
    return Solution(status, placement=np.asarray(place, dtype=np.int64), start=np.asarray(s),
                    memory_model=memory_model)
