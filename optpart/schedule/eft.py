"""The one earliest-finish-time list-scheduling engine (insertion policy).

HEFT's second phase (Topcuoglu, Hariri, Wu, "Performance-effective and low-complexity
task scheduling for heterogeneous computing", IEEE TPDS 13(3), 2002): take the nodes in
a given order (topological; HEFT uses decreasing upward rank) and put each on the device
where it *finishes* earliest, inserted into the earliest idle gap there that starts once
its inputs have arrived (:class:`~optpart.schedule.gaps.GapLine`). Ties go to the lower
device index. ``heft``, the heuristic's constructions and ETF-style variants all run
this one loop; they differ in the order, the candidate devices and the memory policy.

Memory is the policy's business (:mod:`optpart.schedule.policy`): the engine offers
only devices from ``policy.devices_for(v)``, asks ``policy.admits`` at the chosen slot
(falling back to the next best device; a policy whose ``admits_everything`` attribute
is True is not asked), and reports ``policy.place``. When a node has no
device, :class:`NoRoom` carries the policy's one-line reason.

``candidates="near"`` tries only the devices of a node's predecessors plus the device
whose timeline ends first (the usual candidate restriction of fast list schedulers):
O(V + E) device evaluations instead of O(V k).

Complexity: O(E k) arrival times, O(V k log gaps) gap searches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from heapq import heapify, heappop, heappush
from typing import Sequence

from .gaps import GapLine
from .graph import Graph, arrivals, no_gc
from .policy import MemoryPolicy, StaticPolicy

__all__ = ["NoRoom", "TimeUp", "Beaten", "EftSchedule", "eft_schedule", "stop_line"]

_NEG_INF = -math.inf


class NoRoom(Exception):
    """A node found no device (memory policy or constraints); ``message`` says why."""

    def __init__(self, node: int, message: str) -> None:
        super().__init__(message)
        self.node = node
        self.message = message


class TimeUp(Exception):
    """A construction passed its deadline (``time.perf_counter()`` value) and stopped unfinished."""


class Beaten(Exception):
    """A construction stopped because its finished makespan would exceed the bound it was given."""


def stop_line(g: Graph, bound: float | None) -> tuple[float, list[float]]:
    """``(limit, tail)``: a construction given ``bound`` stops once a node's finish plus its tail
    (:attr:`Graph.tail`, the successors it still has to wait for) exceeds ``limit``, since its
    makespan can then no longer come within ``bound``.

    Parameters
    ----------
    g : Graph
        The problem as plain lists.
    bound : float or None
        The makespan to beat (an incumbent's); None: never stop.

    Returns
    -------
    tuple
        The limit (``inf`` without a bound, else ``bound`` plus a relative 1e-9 for rounding)
        and the per-node tails (zeros without a bound).
    """
    if bound is None or not math.isfinite(bound):
        return math.inf, [0.0] * g.n
    return bound + 1e-9 * max(1.0, abs(bound)), g.tail


@dataclass
class EftSchedule:
    """Placement and schedule as plain lists (device index, start, finish per node)."""

    place: list[int]
    start: list[float]
    finish: list[float]

    @property
    def makespan(self) -> float:
        return max(self.finish) if self.finish else 0.0


def eft_schedule(g: Graph, order: Sequence[int], policy: MemoryPolicy, candidates: str = "all",
                 bound: float | None = None) -> EftSchedule:
    """Place and schedule every node of ``g`` in ``order`` by earliest finish time.

    Parameters
    ----------
    g : Graph
    order : sequence of int
        A topological order of the nodes (e.g. decreasing upward rank).
    policy : MemoryPolicy
        Which devices each node may use, and the memory bookkeeping.
    candidates : {"all", "near"}
        All devices the policy allows, or only predecessors' devices plus the one that
        frees up first.
    bound : float, optional
        Stop (:class:`Beaten`) once the makespan provably exceeds it (:func:`stop_line`).

    Returns
    -------
    EftSchedule
        Placement, start and finish times of every node.

    Raises
    ------
    NoRoom
        When some node has no device left.
    Beaten
        When the schedule cannot end within ``bound``.
    """
    with no_gc():
        return _eft(g, order, policy, candidates, *stop_line(g, bound))


def _eft(g: Graph, order: Sequence[int], policy: MemoryPolicy, candidates: str, limit: float,
         tail: list[float]) -> EftSchedule:
    """The loop of :func:`eft_schedule`."""
    n, k = g.n, g.k
    near = candidates == "near" and k > 2
    lines = [GapLine() for _ in range(k)]
    place = [-1] * n
    start = [0.0] * n
    finish = [0.0] * n
    time, speed = g.time, g.speed
    in_ptr, pred = g.in_ptr, g.pred
    admits, record, devices_for = policy.admits, policy.place, policy.devices_for
    check_slots = not getattr(policy, "admits_everything", False)  # optional: skip a no-op call
    free_heap = [(0.0, d) for d in range(k)]   # (end, device), stale entries skipped lazily
    ends = [0.0] * k                           # lines[d].end, as a list (read without an attribute lookup)
    # uniform links: one transfer formula for every device pair, so a node's arrival on
    # each device comes from its inputs' local maxima and the two best remote arrivals
    uniform = g.uniform and k > 1
    link = g.in_link if uniform else None      # per in-edge: lat + bytes / bw, the model's sum
    max_speed = max(speed) if k else 1.0
    one_speed = speed[0] if k and speed.count(speed[0]) == k else 0.0  # equal speeds: one division per node
    # near mode asks a policy that has one for its filter rather than the full device list
    memory_filter = getattr(policy, "memory_filter", None) if near else None
    any_room = [0.0] * k  # a room list for the plain path's filter (need -inf: all qualify)
    # The static policy's common case inlined (as :mod:`.etf_shared` does): a node outside any
    # colocation group whose bytes fit the device with the least room may use its allowed list
    # (what ``devices_for`` returns then), and placing it charges its bytes to the device.
    static = type(policy) is StaticPolicy
    static_devs = static and memory_filter is None
    if static:
        group_of, mem, room, used, allowed = policy.group_of, policy.mem, policy.room, policy.used, policy.allowed_list
        aware = policy.memory_aware
    for v in order:
        lo, hi = in_ptr[v], in_ptr[v + 1]
        if static_devs and group_of[v] < 0 and (not aware or mem[v] <= policy.min_room) and allowed[v]:
            devs = allowed[v]
        elif memory_filter is not None:
            devs = _near_devices(v, memory_filter(v), k, lo, hi, pred, place, free_heap, ends)
            if devs is None:
                raise NoRoom(v, policy.no_room_message(v))
        else:
            devs = devices_for(v)
            if not devs:
                raise NoRoom(v, policy.no_room_message(v))
            if near:  # the same selection, with every device of the list qualifying
                devs = _near_devices(v, (devs, _NEG_INF, any_room), k, lo, hi, pred, place, free_heap, ends)
        tv = time[v]
        best_f = best_s = 0.0
        best_d = -1
        split = uniform and len(devs) > 3
        if split:
            r1 = r2 = 0.0   # best remote arrival (from device d1) and best from another device
            d1 = -1
            for i in range(lo, hi):
                u = pred[i]
                x = finish[u] + link[i]
                if x > r1:
                    pu = place[u]
                    if pu != d1:
                        r2 = r1
                    r1, d1 = x, pu
                elif x > r2 and place[u] != d1:
                    r2 = x
            # On every device but d1 the inputs are there at r1 (an input made there finishes
            # before it could have arrived from elsewhere, and r1 is the latest such arrival);
            # on d1, at r2 or when its own inputs finish.
            a1 = r2
            if d1 >= 0:
                for i in range(lo, hi):
                    u = pred[i]
                    if place[u] == d1 and finish[u] > a1:
                        a1 = finish[u]
            # Early exit (same answer, fewer devices scanned): every device but d1 has
            # ready >= r1, so finishes no earlier than `floor`; once the best so far reaches
            # it and d1 has been seen, no later device can win (ties go to the earlier one).
            floor = r1 + tv / max_speed
            d1_left = d1 >= 0 and d1 in devs
        general = None if uniform else arrivals(g, v, devs, place, finish)  # per-pair links: the one rule
        dur = tv / one_speed if one_speed else 0.0
        for j, d in enumerate(devs):
            if split:
                if d == d1:
                    ready = a1
                    d1_left = False
                elif best_f <= floor and best_d >= 0:
                    continue  # finishes at floor or later: cannot beat the best (ties go to the earlier)
                else:
                    ready = r1
            elif uniform:  # arrivals()'s sums: lat[pu][d] is lat0 off the diagonal, 0 on it
                ready = 0.0
                for i in range(lo, hi):
                    u = pred[i]
                    r = finish[u] if place[u] == d else finish[u] + link[i]
                    if r > ready:
                        ready = r
            else:
                ready = general[j]
            if not one_speed:
                dur = tv / speed[d]
            end = ends[d]
            if ready >= end:
                s = ready
            else:
                line = lines[d]
                if dur > 0.0 and (not line.bend or ready >= line.bend[-1]):
                    s = end  # inside the last busy stretch: no gap ahead (earliest_start's answer)
                else:
                    s = line.earliest_start(ready, dur)
            f = s + dur
            if best_d < 0 or f < best_f:
                best_f, best_s, best_d = f, s, d
            if split and best_f <= floor and not d1_left:
                break
        if check_slots and not admits(v, best_d, best_s, best_f):
            slots = []
            for d in devs:
                ready = arrivals(g, v, (d,), place, finish)[0]
                dur = tv / speed[d]
                s = lines[d].earliest_start(ready, dur)
                slots.append((s + dur, d, s))
            slots.sort()
            for f, d, s in slots:
                if admits(v, d, s, f):
                    best_f, best_s, best_d = f, s, d
                    break
            else:
                raise NoRoom(v, policy.no_room_message(v))
        end = ends[best_d]
        if best_s == end:  # the common case, inlined: appended at the end, no new gap
            lines[best_d].end = ends[best_d] = best_f
        else:
            line = lines[best_d]
            line.reserve(best_s, best_f)
            ends[best_d] = line.end
        if near and ends[best_d] != end:
            if len(free_heap) > 8 * k:  # drop the stale entries: memory O(k), not O(n)
                free_heap = [(e, d) for d, e in enumerate(ends)]
                heapify(free_heap)
            else:
                heappush(free_heap, (ends[best_d], best_d))
        if static and group_of[v] < 0:  # policy.place inlined for a node outside any group
            b = mem[v]
            used[best_d] += b
            r = room[best_d] - b
            room[best_d] = r
            if r < policy.min_room:
                policy.min_room = r
        else:
            record(v, best_d, best_s, best_f)
        place[v], start[v], finish[v] = best_d, best_s, best_f
        if best_f + tail[v] > limit:
            raise Beaten(f"node {v} ends at {best_f:g}, its successors after {best_f + tail[v]:g} > {limit:g}")
    return EftSchedule(place, start, finish)


def _near_devices(v: int, filt: tuple[list[int], float, list[float]], k: int, lo: int, hi: int,
                  pred: list[int], place: list[int], free_heap: list[tuple[float, int]],
                  ends: list[float]) -> list[int] | None:
    """The ``candidates="near"`` devices of ``v`` (None: no device at all).

    The allowed devices are ``[d for d in base if need <= room[d]]`` (a policy's
    ``memory_filter``; ``(policy.devices_for(v), -inf, any)`` for a policy without one).
    With at most two of them, all; else the predecessors' devices that are allowed plus the
    allowed device that frees up first (ties: lowest index: the top of the lazy heap of
    ``(end, device)`` over all devices, or a scan when that one is not allowed), sorted.
    Only the few devices in question are tested: building the allowed list costs a pass
    over all ``k`` devices per node, which was half the engine's time at 10^6 nodes on 64
    devices when most nodes had a full device.
    """
    base, need, room = filt
    everywhere = len(base) == k  # base holds every device: only memory can rule one out
    cand = []
    if need == _NEG_INF:  # every device of base qualifies
        if len(base) < 3:
            return base or None
        for i in range(lo, hi):
            d = place[pred[i]]
            if d not in cand and (everywhere or d in base):
                cand.append(d)
    else:
        n_found = 0
        for d in base:  # up to three allowed devices: fewer means no restriction applies
            if need <= room[d]:
                n_found += 1
                if n_found == 3:
                    break
        if n_found < 3:
            return [d for d in base if need <= room[d]] or None
        for i in range(lo, hi):
            d = place[pred[i]]
            if d not in cand and need <= room[d] and (everywhere or d in base):
                cand.append(d)
    while free_heap[0][0] != ends[free_heap[0][1]]:
        heappop(free_heap)
    first = free_heap[0][1]
    if not (need <= room[first] and (everywhere or first in base)):
        first = min([d for d in base if need <= room[d]], key=ends.__getitem__)  # ties: lowest index
    if first not in cand:
        cand.append(first)
    if len(cand) > 1:
        cand.sort()
    return cand

