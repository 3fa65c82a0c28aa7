"""Earliest task first (the ready-list rule), memory-aware: m-ETF's engine.

ETF (Hwang, Chow, Anger, Lee, "Scheduling precedence graphs in systems with
interprocessor communication times", SIAM J. Comput. 18(2), 1989), memory-constrained
as m-ETF in Baechi (Jeon, Cho et al., ACM SoCC 2020): at every step, among the ready
nodes (all predecessors scheduled) and the devices the memory policy allows, take the
(node, device) pair that can *start* earliest, ``max(device free time, arrival of the
node's inputs there)``; ties go to the higher priority, then the lower node index, then
the lower device index. Nodes run back to back on a device (no insertion), so
zero-duration nodes never fall inside another run.

Each released node enters a pending heap (keyed by input arrival) and then a ready heap
(keyed by priority) of each device it may use; stale entries are dropped lazily:
O(E k + V k log V) in all, not the textbook O(V^2 k).
"""

from __future__ import annotations

import heapq
import math
from time import perf_counter
from typing import Sequence

from .eft import Beaten, EftSchedule, NoRoom, TimeUp, stop_line
from .etf_shared import etf_shared
from .graph import Graph, arrivals, no_gc, uniform_arrival
from .policy import MemoryPolicy, StaticPolicy

__all__ = ["etf_schedule"]


def etf_schedule(g: Graph, priority: Sequence[float], policy: MemoryPolicy, deadline: float | None = None,
                 bound: float | None = None) -> EftSchedule:
    """Place and schedule ``g`` by earliest start time; higher ``priority`` wins ties.

    Raises :class:`~optpart.schedule.eft.NoRoom` when a ready node has no device left.

    Parameters
    ----------
    g : Graph
        The problem as plain lists (:class:`optpart.schedule.graph.Graph`).
    priority : sequence of float
        Priority of every node (higher first among equal start times), e.g. the upward rank.
    policy : MemoryPolicy
        Which devices each node may use, and the memory bookkeeping.
    deadline : float, optional
        ``time.perf_counter()`` value; checked every 1,024 placements.
    bound : float, optional
        Stop (:class:`~optpart.schedule.eft.Beaten`) once the makespan provably exceeds it: a
        node's finish plus its tail (:func:`~optpart.schedule.eft.stop_line`), or, every 256
        placements, the work left spread over the devices from the clock on (starts never
        decrease).

    Returns
    -------
    EftSchedule
        Placement, start and finish of every node.

    Raises
    ------
    NoRoom
        When a ready node has no device left.
    TimeUp
        When the deadline passes before every node is placed.
    Beaten
        When the schedule cannot end within ``bound``.
    """
    with no_gc():
        if _shared_applies(g, policy):  # the same schedule from one shared ready structure
            return etf_shared(g, priority, policy, deadline, bound)
        return _etf(g, priority, policy, deadline, bound)


def work_bound(g: Graph, t: float, free: Sequence[float], left: float) -> float:
    """The least makespan once no node may start before ``t``: the devices busy until ``free``
    (or ``t``), then the work ``left`` (seconds at speed 1) spread over all of them.

    Parameters
    ----------
    g : Graph
        The problem as plain lists (its device speeds).
    t : float
        The clock.
    free : sequence of float
        When each device finishes what it runs.
    left : float
        Work not yet placed.

    Returns
    -------
    float
        Seconds.
    """
    speed = g.speed
    return (sum(s * (f if f > t else t) for s, f in zip(speed, free)) + left) / sum(speed)


def _shared_applies(g: Graph, policy: MemoryPolicy) -> bool:
    """Uniform finite links and the static policy: :mod:`.etf_shared` makes the same schedule."""
    return g.k > 1 and g.uniform and type(policy) is StaticPolicy and math.isfinite(g.lat[0][1])


def _etf(g: Graph, priority: Sequence[float], policy: MemoryPolicy, deadline: float | None = None,
         bound: float | None = None) -> EftSchedule:
    n, k = g.n, g.k
    neg_prio = [-float(x) for x in priority]
    time, speed = g.time, g.speed
    lat, bw = g.lat, g.bw
    # uniform finite links: arrival on d = the best remote arrival unless it comes from d itself
    uniform = k > 1 and g.uniform and math.isfinite(lat[0][1])
    link = g.in_link if uniform else None  # per in-edge: lat + bytes / bw over the one link
    in_ptr, pred = g.in_ptr, g.pred
    out_ptr, succ = g.out_ptr, g.succ
    indeg = [in_ptr[v + 1] - in_ptr[v] for v in range(n)]
    fits = getattr(policy, "fits", None)
    if fits is None:
        def fits(v: int, d: int) -> bool:
            return d in policy.devices_for(v)

    place = [-1] * n
    start = [0.0] * n
    finish = [0.0] * n
    avail = [0.0] * k
    limit, tail = stop_line(g, bound)
    left = float(sum(time))
    pending: list[list] = [[] for _ in range(k)]  # (input arrival on d, -priority, node)
    ready: list[list] = [[] for _ in range(k)]    # (-priority, node): inputs there by avail[d]
    push, pop = heapq.heappush, heapq.heappop
    released: list[int] = []

    def release(v: int) -> None:
        npv = neg_prio[v]
        devs = policy.devices_for(v)
        if uniform:  # one link everywhere: one arrival on every device but d1, another on d1
            t1, d1, a1 = uniform_arrival(v, in_ptr, pred, link, place, finish)
        else:  # per-pair links: the one rule
            general = arrivals(g, v, devs, place, finish)
        for j, d in enumerate(devs):
            r = (a1 if d == d1 else t1) if uniform else general[j]
            a = avail[d]
            if r <= a:  # its inputs are there already: straight into the ready heap (candidate()
                push(ready[d], (npv, v))  # would move it there first thing, avail never decreases)
            else:
                push(pending[d], (r, npv, v))
            if not dirty[d]:
                key = cache_key[d]
                t = r if r > a else a
                if key is None or t < cache_t[d] or (t == cache_t[d] and (npv, v) < key):
                    dirty[d] = True
        released.append(v)

    dirty = [True] * k  # the release hook below reads these; reset before the main loop
    cache_t = [0.0] * k
    cache_key: list = [None] * k
    for v in range(n):
        if indeg[v] == 0:
            release(v)

    def candidate(d: int):
        rdy, pend, a = ready[d], pending[d], avail[d]
        while pend and pend[0][0] <= a:
            _, np_, v = pop(pend)
            if place[v] < 0:
                push(rdy, (np_, v))
        while rdy:
            top = rdy[0]
            v = top[1]
            if place[v] < 0 and fits(v, d):
                return a, top
            pop(rdy)
        while pend:
            top = pend[0]
            v = top[2]
            if place[v] < 0 and fits(v, d):  # the device waits for data: the best node arriving first
                return top[0], (top[1], v)
            pop(pend)
        return math.inf, None

    check_slots = not getattr(policy, "admits_everything", False)  # as the EFT engine: skip a no-op call
    # A device's candidate is the lexicographic minimum of (max(arrival, avail), -priority, node)
    # over its valid entries, so it only changes when its own clock moves, an entry smaller than
    # it arrives, or its node is placed (or, static model, a colocation group settles). Cached
    # per device; other policies (fits may change anywhere) recompute every step.
    static = isinstance(policy, StaticPolicy)
    group_of = policy.group_of if static else None
    all_dirty = [True] * k
    placed = 0
    while placed < n:
        best_t, best_key, best_d = math.inf, None, -1
        for d in range(k):
            if dirty[d]:
                t, key = candidate(d)
                cache_t[d], cache_key[d] = t, key
                dirty[d] = not static
            else:
                t, key = cache_t[d], cache_key[d]
            if key is None or t > best_t:
                continue
            if t < best_t or key < best_key:
                best_t, best_key, best_d = t, key, d
        if best_d < 0:
            waiting = [v for v in released if place[v] < 0]
            raise NoRoom(waiting[0], policy.no_room_message(waiting[0]))
        d = best_d
        if ready[d] and ready[d][0] == best_key:
            pop(ready[d])
        else:
            pop(pending[d])
        dirty[d] = True
        v = best_key[1]
        f = best_t + time[v] / speed[d]
        if check_slots and not policy.admits(v, d, best_t, f):
            continue  # no room at that start (e.g. the liveness policy): d is dropped for v
        placed += 1
        if deadline is not None and not placed & 1023 and perf_counter() > deadline:
            raise TimeUp(f"deadline passed after {placed} of {n} nodes")
        place[v], start[v], finish[v] = d, best_t, f
        avail[d] = f
        left -= time[v]
        if f + tail[v] > limit or (not placed & 255 and work_bound(g, best_t, avail, left) > limit):
            raise Beaten(f"after {placed} of {n} nodes the makespan exceeds {limit:g}")
        policy.place(v, d, best_t, f)
        if static:
            if group_of[v] >= 0:
                dirty[:] = all_dirty
            else:
                for e in range(k):
                    key = cache_key[e]
                    if key is not None and key[1] == v:
                        dirty[e] = True
        for i in range(out_ptr[v], out_ptr[v + 1]):
            w = succ[i]
            indeg[w] -= 1
            if indeg[w] == 0:
                release(w)
    return EftSchedule(place, start, finish)
