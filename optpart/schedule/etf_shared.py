"""m-ETF under uniform links with one shared ready structure: the same schedule in O((V + E) log V).

The rule is :mod:`optpart.schedule.etf`'s (Hwang, Chow, Anger, Lee, SIAM J. Comput. 18(2),
1989; memory-constrained as m-ETF in Baechi, Jeon et al., ACM SoCC 2020): at every step the
(node, device) pair that can start earliest, ties to the higher priority, the lower node
index, the lower device index. This engine makes exactly that schedule, faster, when every
pair of devices shares one link (latency and bandwidth) and memory is the static policy.

**Why one structure suffices.** Under uniform links a ready node ``v`` has only two input
arrivals: ``R(v)`` (the latest input sent over the link, or produced) on every device but
its *home* ``h(v)`` (the device its latest remote input comes from), and ``a(v) <= R(v)`` on
``h(v)`` itself. So ``v`` needs one entry in a shared heap keyed by ``R`` and at most one in
its home device's heap keyed by ``a``, not one per device (the general engine pushes and
pops every node ``k`` times).

**Time-driven.** The chosen start times never decrease (placing a node only delays its own
device; released nodes arrive after it finishes), so the engine keeps a clock ``t``: the
pairs that start at ``t`` are exactly those whose inputs are there by ``t`` on a device
free by ``t``; among them the best is the highest-priority node of the shared ready heap on
the lowest free device, or a home-ready node on its free home device. When no pair starts
at ``t`` the clock moves to the next event (a device frees, an input arrives).

**Memory.** A node allowed everywhere and in no colocation group is optimistically taken to
fit every device; the winner's fit is checked (``policy.fits``) before it is placed, and a
node that fails is *demoted* once: from then on it has one entry per device it still fits,
as in the general engine, as have pinned, restricted and grouped nodes from the start.
Static fits only ever turn false (room shrinks; a group's device is one it fitted), so a
pair dropped once never returns, and the first valid winner is the true minimum.

Nodes enter the heaps as their *rank* in (-priority, index) order, an int, so the ready heaps
compare ints instead of tuples. Cost: O((V + E) log V) heap work plus a pass over the free
devices per step (O(V k) cheap tests), against the general engine's O(V k log V) heap
operations.
"""

from __future__ import annotations

from bisect import insort
from heapq import heappop, heappush, heappushpop
from time import perf_counter
from typing import Sequence

import numpy as np

from .eft import Beaten, EftSchedule, NoRoom, TimeUp, stop_line
from .graph import Graph, uniform_arrival
from .policy import StaticPolicy

__all__ = ["etf_shared"]


def etf_shared(g: Graph, priority: Sequence[float], policy: StaticPolicy, deadline: float | None = None,
               bound: float | None = None) -> EftSchedule:
    """m-ETF's schedule on uniform finite links under the static policy (see the module docstring).

    Parameters
    ----------
    g : Graph
        The problem as plain lists; ``g.uniform`` with finite links and ``g.k > 1``.
    priority : sequence of float
        Priority of every node (higher first among equal start times).
    policy : StaticPolicy
        The static memory policy (constraints, groups, room).
    deadline : float, optional
        ``time.perf_counter()`` value; checked every 1,024 placements.
    bound : float, optional
        Stop once the makespan provably exceeds it (as :func:`optpart.schedule.etf.etf_schedule`).

    Returns
    -------
    EftSchedule
        Placement, start and finish of every node: the general engine's schedule.

    Raises
    ------
    NoRoom
        A ready node fits no device, at the step the general engine would find it.
    TimeUp
        Past ``deadline`` at a check (every 1,024 placements).
    Beaten
        When the schedule cannot end within ``bound``.
    """
    n, k = g.n, g.k
    time, speed = g.time, g.speed
    in_ptr, pred, link = g.in_ptr, g.pred, g.in_link  # link[i]: lat + bytes / bw of in-edge i
    out_ptr, succ = g.out_ptr, g.succ
    indeg = np.diff(np.asarray(in_ptr, dtype=np.int64)).tolist() if n else []
    # the tie order (-priority, node) as one int per node: heaps of ints, not of tuples
    node_at = np.lexsort((np.arange(n), -np.asarray(priority, dtype=np.float64))) if n else np.zeros(0, int)
    rank_of = np.empty(n, dtype=np.int64)
    rank_of[node_at] = np.arange(n)
    node_at, rank_of = node_at.tolist(), rank_of.tolist()
    fits, devices_for = policy.fits, policy.devices_for
    # a shared node (no group, every device allowed) fits d when its bytes fit the room left
    # there (``policy.room`` is updated in place); memory-blind: every device always fits
    aware = policy.memory_aware
    mem, room = (policy.mem, policy.room) if aware else ([0.0] * n, [float("inf")] * k)
    used = policy.used
    everywhere, group_of, allowed = policy.all_devices, policy.group_of, policy.allowed_list
    push, pop, pushpop = heappush, heappop, heappushpop

    place = [-1] * n
    start = [0.0] * n
    finish = [0.0] * n
    state = [0] * n              # per rank: 0 shared entries (unplaced), 1 per-device entries only, 2 placed
    spend: list[tuple] = []      # shared: (R, rank), inputs arrive after t
    sready: list[int] = []       # shared: rank, inputs there by t on every device
    pend: list[list] = [[] for _ in range(k)]   # per device: (arrival there, rank)
    rdy: list[list] = [[] for _ in range(k)]    # per device: rank, arrived by t
    idle = list(range(k))        # devices free by t, ascending
    busy: list[tuple] = []       # (free time, device) of the others
    released: list[int] = []
    t = 0.0
    limit, tail = stop_line(g, bound)
    left = float(sum(time))
    check = limit < float("inf")

    def per_device(v: int, r_all: float, home: int, a: float) -> None:
        """One entry per device ``v`` fits now (the general engine's bookkeeping)."""
        rv = rank_of[v]
        for d in devices_for(v):
            r = a if d == home else r_all
            if r <= t:
                push(rdy[d], rv)
            else:
                push(pend[d], (r, rv))

    def release(v: int) -> None:
        """``v``'s inputs are all placed: its entries (the placing loop below inlines this)."""
        r_all, home, a = uniform_arrival(v, in_ptr, pred, link, place, finish)
        if group_of[v] < 0 and allowed[v] is everywhere:  # optimistic: every device fits
            rv = rank_of[v]
            if r_all <= t:
                push(sready, rv)
            else:
                push(spend, (r_all, rv))
            if home >= 0 and a < r_all:
                if a <= t:
                    push(rdy[home], rv)
                else:
                    push(pend[home], (a, rv))
        else:
            state[rank_of[v]] = 1
            per_device(v, r_all, home, a)
        released.append(v)

    for v in range(n):
        if indeg[v] == 0:
            release(v)

    placed = 0
    while placed < n:
        while spend and spend[0][0] <= t:
            rv = pop(spend)[1]
            if not state[rv]:
                push(sready, rv)
        while sready and state[sready[0]]:
            pop(sready)
        # the best pair starting at t: (rank, device) smallest; src: the device whose ready
        # heap holds it, -1 when it is the shared heap's top on the lowest free device
        br = src = -1
        if sready and idle:
            br = sready[0]
            bd = idle[0]
        for d in idle:
            pd, rd = pend[d], rdy[d]
            while pd and pd[0][0] <= t:
                rv = pop(pd)[1]
                if state[rv] < 2:
                    push(rd, rv)
            while rd and state[rd[0]] == 2:
                pop(rd)
            if rd and (br < 0 or rd[0] < br or (rd[0] == br and d <= bd)):
                br, bd, src = rd[0], d, d
        if br < 0:  # nothing starts at t: the clock moves to the next event
            nxt = busy[0][0] if busy else None
            if idle:  # (with every device busy, the next event is the first to free up)
                if spend and (nxt is None or spend[0][0] < nxt):
                    nxt = spend[0][0]
                for d in idle:
                    pd = pend[d]
                    if pd and (nxt is None or pd[0][0] < nxt):
                        nxt = pd[0][0]
            if nxt is None:
                waiting = [v for v in released if place[v] < 0]
                raise NoRoom(waiting[0], policy.no_room_message(waiting[0]))
            t = nxt
            while busy and busy[0][0] <= t:
                insort(idle, pop(busy)[1])
            continue
        v, d = node_at[br], bd
        shared = not state[br]
        if not (mem[v] <= room[d] if shared else fits(v, d)):
            # an optimistic pair: dropped for good (static fits never return); v has per-device
            # entries from now on
            if shared:
                state[br] = 1
                per_device(v, *uniform_arrival(v, in_ptr, pred, link, place, finish))
            if src >= 0:
                pop(rdy[d])
            continue
        if src >= 0:
            pop(rdy[d])
        placed += 1
        if deadline is not None and not placed & 1023 and perf_counter() > deadline:
            raise TimeUp(f"deadline passed after {placed} of {n} nodes")
        f = t + time[v] / speed[d]
        place[v], start[v], finish[v] = d, t, f
        if check:
            left -= time[v]
            if f + tail[v] > limit or (not placed & 255 and _bound_now(g, t, busy, f, d, left) > limit):
                raise Beaten(f"after {placed} of {n} nodes the makespan exceeds {limit:g}")
        if not shared or not aware:
            policy.place(v, d, t, f)
        else:  # policy.place inlined for a node outside any group (the common case)
            b = mem[v]
            used[d] += b
            room[d] -= b
            if room[d] < policy.min_room:
                policy.min_room = room[d]
        state[br] = 2
        for i in range(out_ptr[v], out_ptr[v + 1]):
            w = succ[i]
            c = indeg[w] - 1
            indeg[w] = c
            if c:
                continue
            # release(w), inlined for a node that may use every device (the common case)
            if group_of[w] >= 0 or allowed[w] is not everywhere:
                release(w)
                continue
            t1, d1, a = uniform_arrival(w, in_ptr, pred, link, place, finish)
            rw = rank_of[w]
            if t1 <= t:
                push(sready, rw)
            else:
                push(spend, (t1, rw))
            if d1 >= 0 and a < t1:
                if a <= t:
                    push(rdy[d1], rw)
                else:
                    push(pend[d1], (a, rw))
            released.append(w)
        if f > t:
            if len(idle) == 1:  # idle == [d]: every device busy, nothing starts before the first
                t, d = pushpop(busy, (f, d))  # frees up (push, then pop the first: one heap call)
                idle = [d]
                while busy and busy[0][0] <= t:
                    insort(idle, pop(busy)[1])
            else:
                idle.remove(d)
                push(busy, (f, d))
    return EftSchedule(place, start, finish)


def _bound_now(g: Graph, t: float, busy: list[tuple], f: float, d: int, left: float) -> float:
    """The work bound of :func:`optpart.schedule.etf.etf_schedule` from the engine's clock, its
    heap of busy devices and the node just placed on ``d`` until ``f``."""
    free = [t] * g.k
    for end, e in busy:
        free[e] = end
    free[d] = f
    return (sum(s * x for s, x in zip(g.speed, free)) + left) / sum(g.speed)
