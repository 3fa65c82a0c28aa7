"""Phase 4, the *memory step*, and the constraint projection before it.

* :func:`memory_units`: colocation groups and single nodes as the units that move together.
* :func:`project_constraints`: pins go to their device, a colocation group to the device
  holding most of its run time among those it may use, a node on a forbidden device to
  the allowed device holding most of its neighbours' bytes.
* :func:`repair_memory`: ParDNN's memory step (Qararyah et al. 2021, section 4.4): while
  a device is over capacity, move units off it, best *memory freed per communication
  added* first, each to the allowed device with the most free room that holds it.
* :func:`greedy_fill`: the fallback that makes the guarantee provable: pinned units
  first, then the others in decreasing memory, each to its current device if it has
  room, else to the allowed device with the most free room.

**Guarantee** (static model). Let ``M`` be the total memory, ``k`` the devices and
``s`` the largest unit (node or colocation group). If every device ``d`` has capacity
``C_d >= M / k + s``, there are no forbidden devices, and the pinned units fit their
devices on their own, then :func:`greedy_fill` always succeeds, in *any* order of the
free units: when a free unit of size ``x <= s`` finds no device with room, every device
holds more than ``C_d - x >= M / k`` bytes, so more than ``M`` bytes are placed while
the unit itself is not, a contradiction. Forbidden devices break this argument (a
node allowed on one device only is a pin in disguise and counts as one); then the
fill may fail and the solver answers ``unknown``.
"""

from __future__ import annotations

import numpy as np

from ..._docstrings import fill_doc
from ...model.memory import fits
from ...model.problem import Problem
from .schedule import Graph

__all__ = ["memory_units", "project_constraints", "repair_memory", "greedy_fill"]


def _fits(used: float, need: float, cap: float) -> bool:
    """Room for ``need`` more bytes on a device holding ``used`` of ``cap``: the one fit rule."""
    return fits(used + need, cap)


def memory_units(problem: Problem) -> tuple[list[int], list[list[int]], list[float]]:
    """``(unit_of, members, unit_memory)``: groups are units ``0..G-1``, then one unit per free node.

    Parameters
    ----------
    problem : Problem

    Returns
    -------
    tuple
        ``(unit_of, members, unit_memory)``: unit of each node, nodes of each unit, static
        bytes of each unit.
    """
    n = problem.n_nodes
    groups = problem.groups
    unit_of = problem.group_of.copy()
    free = np.flatnonzero(unit_of < 0)
    unit_of[free] = len(groups) + np.arange(free.size)
    members = [g.tolist() for g in groups] + free[:, None].tolist()
    mem = np.bincount(unit_of, weights=problem.memory, minlength=len(members)) if n else np.zeros(0)
    return unit_of.tolist(), members, mem.tolist()


@fill_doc
def project_constraints(problem: Problem, g: Graph, place: list[int]) -> list[int]:
    """The nearest placement that respects pins, forbids and colocation.

    Parameters
    ----------
    %(problem_g)s
    place : list of int
        Device of every node (not modified).

    Returns
    -------
    list of int
    """
    if not problem.has_constraints:
        return place
    place = list(place)
    allowed = problem.allowed
    pin = problem.pin.tolist()
    for members in problem.groups:
        ok = allowed[members[0]]
        share = np.bincount(np.asarray([place[v] for v in members.tolist()]),
                            weights=problem.time[members], minlength=g.k)
        share = share + 1e-12 * np.bincount(np.asarray([place[v] for v in members.tolist()]), minlength=g.k)
        share[~ok] = -1.0
        d = int(np.argmax(share))
        for v in members.tolist():
            place[v] = d
    bad = np.flatnonzero(~allowed[np.arange(g.n), np.asarray(place)]).tolist()
    for v in bad:
        if pin[v] >= 0:
            place[v] = pin[v]
            continue
        talk = [0.0] * g.k
        for i in range(g.out_ptr[v], g.out_ptr[v + 1]):
            talk[place[g.succ[i]]] += g.out_bytes[i] + 1e-9
        for i in range(g.in_ptr[v], g.in_ptr[v + 1]):
            talk[place[g.pred[i]]] += g.in_bytes[i] + 1e-9
        ok = allowed[v].tolist()
        place[v] = max((d for d in range(g.k) if ok[d]), key=lambda d: (talk[d], -d))
    return place


@fill_doc
def repair_memory(problem: Problem, g: Graph, place: list[int], capacity: list[float], units=None
                  ) -> list[int] | None:
    """Move units off over-full devices (memory freed per communication added); None if stuck.
    ``units`` is :func:`memory_units` of the problem (computed when not given).

    Parameters
    ----------
    %(problem_g)s
    place : list of int
        Device of every node (not modified).
    capacity : list of float
        Bytes usable per device (static model).
    units : tuple or callable, optional
        ``(unit_of, members, unit_memory)`` from :func:`memory_units`, or a function returning
        it (called only when a device is over full); built when None.

    Returns
    -------
    list of int or None
        A placement within ``capacity``, or None.
    """
    k = g.k
    place = list(place)
    used = np.bincount(np.asarray(place, dtype=np.int64), weights=problem.memory, minlength=k).tolist()
    over = [d for d in range(k) if not _fits(used[d], 0.0, capacity[d])]
    if not over:
        return place
    units = units() if callable(units) else units
    unit_of, members, unit_mem = units if units is not None else memory_units(problem)
    allowed = problem.allowed
    pinned = problem.pin >= 0
    # Communication a unit adds when it leaves its device: transfers of its edges that are now local.
    src, dst = problem.edge_src, problem.edge_dst
    pl = np.asarray(place, dtype=np.int64)
    cost_e = g.mean_lat + problem.edge_bytes * g.mean_inv_bw
    local = pl[src] == pl[dst]
    ua, ub = np.asarray(unit_of)[src], np.asarray(unit_of)[dst]
    internal = ua == ub
    w = np.where(local & ~internal, cost_e, 0.0)
    added = np.bincount(ua, weights=w, minlength=len(members)) + np.bincount(ub, weights=w, minlength=len(members))
    first = np.asarray([m[0] for m in members], dtype=np.int64)
    unit_dev_np = pl[first]
    umem = np.asarray(unit_mem)
    movable = (umem > 0) & ~pinned[first]
    ratio = umem / (added + 1e-12)
    unit_dev = unit_dev_np.tolist()
    for d in over:
        sel = np.flatnonzero((unit_dev_np == d) & movable)
        cand = sel[np.lexsort((sel, -ratio[sel]))].tolist()
        for u in cand:
            if _fits(used[d], 0.0, capacity[d]):
                break
            ok = allowed[members[u][0]].tolist()
            best, best_room = -1, None
            for e in range(k):
                if e != d and ok[e] and _fits(used[e], unit_mem[u], capacity[e]):
                    room = capacity[e] - used[e]
                    if best_room is None or room > best_room:
                        best, best_room = e, room
            if best < 0:
                continue
            for v in members[u]:
                place[v] = best
            used[d] -= unit_mem[u]
            used[best] += unit_mem[u]
            unit_dev[u] = best
        if not _fits(used[d], 0.0, capacity[d]):
            return None
    return place


def greedy_fill(problem: Problem, place: list[int] | None, capacity: list[float], units=None,
                best_fit: bool = False) -> list[int] | None:
    """Pinned units first, then the rest by decreasing memory, each to its current device when
    it has room, else to the allowed device with the most free room (with ``best_fit``: the
    least room that still holds it, which packs tight instances better). None if a unit finds none.

    Parameters
    ----------
    problem : Problem
    place : list of int, optional
        Preferred device of every node (None: no preference).
    capacity : list of float
        Bytes usable per device (static model).
    units : tuple, optional
        ``(unit_of, members, unit_memory)`` from :func:`memory_units` (built when None).
    best_fit : bool
        Best fit instead of most free room.

    Returns
    -------
    list of int or None
    """
    k = problem.n_devices
    unit_of, members, unit_mem = units if units is not None else memory_units(problem)
    allowed = problem.allowed
    pin = problem.pin.tolist()
    used = [0.0] * k
    out = [-1] * problem.n_nodes
    n_units = len(members)
    key_pinned = [0 if pin[members[u][0]] >= 0 else 1 for u in range(n_units)]
    order = sorted(range(n_units), key=lambda u: (key_pinned[u], -unit_mem[u], u))
    for u in order:
        first = members[u][0]
        ok = allowed[first].tolist()
        need = unit_mem[u]
        d = -1
        if place is not None and ok[place[first]] and _fits(used[place[first]], need, capacity[place[first]]):
            d = place[first]
        else:
            best_room = None
            for e in range(k):
                if ok[e] and _fits(used[e], need, capacity[e]):
                    room = capacity[e] - used[e]
                    if best_fit:
                        room = -room
                    if best_room is None or room > best_room:
                        d, best_room = e, room
        if d < 0:
            return None
        used[d] += need
        for v in members[u]:
            out[v] = d
    return out


# ---------------------------------------------------------------- the memory step under peak

@fill_doc
def peak_schedule(problem: Problem, g: Graph, place: list[int], justify_rounds: int = 1):
    """The heuristic's schedule of ``place`` and its liveness peaks: ``(start, finish, makespan, peak)``.

    The justified schedule is tried first; when it breaks the peak model and the plain
    insertion schedule does not, the plain one is returned (justification moves nodes and
    so stretches or shrinks tensor lifetimes).

    Parameters
    ----------
    %(problem_g)s
    place : list of int
        Device of every node.
    justify_rounds : int
        Rounds of justification tried (0: the plain insertion schedule).

    Returns
    -------
    tuple
        ``(start, finish, makespan, peak)``; ``peak`` in bytes per device.
    """
    from ...model.memory import fits, peak_memory
    from .schedule import schedule_placement

    cap = problem.device_memory
    pl = np.asarray(place, dtype=np.int64)
    tried = [justify_rounds, 0] if justify_rounds > 0 else [0]
    first = None
    for jr in tried:
        s, f, ms = schedule_placement(g, place, jr)
        peak = peak_memory(problem, pl, np.asarray(s), np.asarray(f))
        if first is None:
            first = (s, f, ms, peak)
        if fits(peak, cap).all():
            return s, f, ms, peak
    return first


def _live_bytes_at(problem: Problem, pl: np.ndarray, start: np.ndarray, finish: np.ndarray, d: int,
                   t: float) -> np.ndarray:
    """Bytes each node holds on device ``d`` at instant ``t`` under the liveness model: its
    parameters (when on ``d``), its temporaries while running, its output while live, and
    an equal share of every received copy live at ``t`` that it consumes on ``d``."""
    n = problem.n_nodes
    src, dst = problem.edge_src, problem.edge_dst
    comm = problem.transfer_times(pl)
    local = pl[src] == pl[dst]
    makespan = float(finish.max()) if n else 0.0
    end = np.full(n, -np.inf)
    np.maximum.at(end, src[local], finish[dst[local]])
    np.maximum.at(end, src[~local], finish[src[~local]] + comm[~local])
    end[np.isinf(end)] = makespan
    on = pl == d
    out = np.where(on & (start <= t) & ((t < end) | (end <= start) & (start == t)), problem.output_bytes, 0.0)
    out += np.where(on & (start <= t) & ((t < finish) | (finish == start) & (start == t)), problem.temp_bytes, 0.0)
    out += np.where(on, problem.param_bytes, 0.0)
    # received copies on d: consumers on d of a remote producer, arrived by t, some consumer still running after t
    rem = np.flatnonzero(~local & (pl[dst] == d))
    if rem.size:
        arrive = finish[src[rem]] + comm[rem]
        live = (arrive <= t) & (finish[dst[rem]] > t)
        for e in rem[live].tolist():
            u, w = int(src[e]), int(dst[e])
            share = np.count_nonzero(src[rem] == u)
            out[w] += problem.output_bytes[u] / share
    return out


@fill_doc
def repair_peak(problem: Problem, g: Graph, place: list[int], units=None, rounds: int = 40,
                justify_rounds: int = 0):
    """ParDNN's memory step on the schedule's memory timeline (peak model).

    Repeatedly: schedule the placement, find the device ``d`` most over capacity and the
    instant ``t`` of its peak (:func:`optpart.model.memory.memory_timeline`), rank the units
    holding bytes on ``d`` at ``t`` by *bytes freed at t per communication added*
    (ParDNN's criterion, Qararyah et al. 2021, section 4.4, applied at the overflow
    instant instead of the whole step), and move the best ones to the allowed device with
    the most free room (capacity minus its own peak) until the excess at ``t`` is covered.
    A unit never returns to a device it left (no cycling). ``rounds`` bounds the
    reschedules. Returns ``(place, start, finish, makespan)`` within capacity, or None.

    Parameters
    ----------
    %(problem_g)s
    place : list of int
        Device of every node (not modified).
    units : tuple, optional
        ``(unit_of, members, unit_memory)`` from :func:`memory_units` (built when None).
    rounds : int
        Reschedules at most.
    justify_rounds : int
        Justification rounds of each reschedule.

    Returns
    -------
    tuple or None
    """
    from ...model.memory import fits, memory_timeline

    k = g.k
    cap = problem.device_memory
    unit_of, members, _ = units if units is not None else memory_units(problem)
    unit_arr = np.asarray(unit_of, dtype=np.int64)
    first = np.asarray([m[0] for m in members], dtype=np.int64)
    pinned = (problem.pin >= 0)[first]
    allowed = problem.allowed
    unit_ok = allowed[first].copy()
    for gi, grp in enumerate(problem.groups):
        unit_ok[gi] = allowed[grp].all(axis=0)
    left = np.zeros((len(members), k), dtype=bool)
    place = list(place)
    src, dst = problem.edge_src, problem.edge_dst
    cost_e = g.mean_lat + problem.edge_bytes * g.mean_inv_bw
    for _ in range(rounds):
        s, f, ms, peak = peak_schedule(problem, g, place, justify_rounds)
        ok = fits(peak, cap)
        if ok.all():
            return place, s, f, ms
        excess = np.where(ok, -np.inf, (peak - cap) / np.maximum(cap, 1.0))
        d = int(np.argmax(excess))
        pl = np.asarray(place, dtype=np.int64)
        st, fi = np.asarray(s), np.asarray(f)
        times, level = memory_timeline(problem, pl, st, fi)[d]
        t = float(times[int(np.argmax(level))])
        held = np.bincount(unit_arr, weights=_live_bytes_at(problem, pl, st, fi, d, t), minlength=len(members))
        udev = pl[first]
        # communication a unit adds when it leaves d: its edges local to d, not internal to it
        ua, ub = unit_arr[src], unit_arr[dst]
        w = np.where((pl[src] == d) & (pl[dst] == d) & (ua != ub), cost_e, 0.0)
        added = np.bincount(ua, weights=w, minlength=len(members)) + np.bincount(ub, weights=w,
                                                                                  minlength=len(members))
        cand = np.flatnonzero((udev == d) & (held > 0) & ~pinned)
        if cand.size == 0:
            return None
        ratio = held[cand] / (added[cand] + 1e-12)
        cand = cand[np.lexsort((cand, -ratio))].tolist()
        room = (cap - peak).astype(np.float64)
        need = float(peak[d] - cap[d]) * 1.02 + 1e-9 * max(1.0, float(cap[d]))
        moved = 0.0
        for u in cand:
            if moved >= need:
                break
            best, best_room = -1, None
            for e in range(k):
                if e == d or not unit_ok[u, e] or left[u, e]:
                    continue
                if room[e] >= held[u] and (best_room is None or room[e] > best_room):
                    best, best_room = e, room[e]
            if best < 0:
                continue
            for v in members[u]:
                place[v] = best
            left[u, d] = True
            room[best] -= held[u]
            moved += held[u]
        if moved == 0.0:
            return None
    return None
