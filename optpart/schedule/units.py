"""Memory units, and the placements every placer builds from them.

A *memory unit* is what moves as one: a colocation group, or a node outside groups
(:func:`memory_units`). :func:`project_constraints` gives the nearest placement that keeps
pins, forbidden devices and colocation; :func:`greedy_fill` places units by decreasing
memory, which under the static model always succeeds when every device holds
``total / k`` plus the largest unit, no node has forbidden devices and the pinned units
fit (the heuristic's memory guarantee, docs/heuristic.md). When no greedy fill fits,
:func:`pack_units` searches for a packing: bin packing with per-device capacities is NP-hard,
and tight instances that have a packing defeat the greedy fills.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..model.memory import fits
from ..model.problem import Problem

__all__ = ["memory_units", "project_constraints", "greedy_fill", "pack_units"]


def memory_units(problem: Problem) -> tuple[list[int], list[list[int]], list[float]]:
    """``(unit_of, members, unit_memory)``: groups are units ``0..G-1``, then one unit per free node.

    Parameters
    ----------
    problem : Problem
        The problem (its colocation groups and static memories).

    Returns
    -------
    tuple
        The unit of each node, the nodes of each unit, the static bytes of each unit.
    """
    n = problem.n_nodes
    unit_of = problem.group_of.copy()
    free = np.flatnonzero(unit_of < 0)
    unit_of[free] = len(problem.groups) + np.arange(free.size)
    members = [g.tolist() for g in problem.groups] + free[:, None].tolist()
    mem = np.bincount(unit_of, weights=problem.memory, minlength=len(members)) if n else np.zeros(0)
    return unit_of.tolist(), members, mem.tolist()


def project_constraints(problem: Problem, place: Sequence[int]) -> list[int]:
    """The nearest placement that keeps pins, forbidden devices and colocation groups.

    A group goes to the allowed device that runs most of its members' time; a node on a
    device it may not use goes to its pin, else to the allowed device it exchanges most
    bytes with (ties: the lower index).

    Parameters
    ----------
    problem : Problem
        The problem.
    place : sequence of int
        Device of every node (not modified).

    Returns
    -------
    list of int
        The projected placement (``place`` itself when the problem has no constraints).
    """
    if not problem.has_constraints:
        return list(place)
    k = problem.n_devices
    place = np.asarray(place, dtype=np.int64).copy()
    allowed = problem.allowed
    for members in problem.groups:
        share = np.bincount(place[members], weights=problem.time[members], minlength=k)
        share += 1e-12 * np.bincount(place[members], minlength=k)
        share[~allowed[members[0]]] = -1.0
        place[members] = int(np.argmax(share))
    src, dst, nbytes = problem.edge_src, problem.edge_dst, problem.edge_bytes + 1e-9
    for v in np.flatnonzero(~allowed[np.arange(problem.n_nodes), place]).tolist():
        if problem.pin[v] >= 0:
            place[v] = problem.pin[v]
            continue
        out, inn = problem.out_edges[problem.out_ptr[v]:problem.out_ptr[v + 1]], \
            problem.in_edges[problem.in_ptr[v]:problem.in_ptr[v + 1]]
        talk = np.bincount(place[dst[out]], weights=nbytes[out], minlength=k) + \
            np.bincount(place[src[inn]], weights=nbytes[inn], minlength=k)
        ok = np.flatnonzero(allowed[v])
        place[v] = int(ok[np.argmax(talk[ok])])
    return place.tolist()


def greedy_fill(problem: Problem, place: Sequence[int] | None, capacity: Sequence[float], units=None,
                best_fit: bool = False) -> list[int] | None:
    """Pinned units first, then the rest by decreasing memory, each on its preferred device when it
    has room, else on the allowed device with the most free room (``best_fit``: the least room that
    still holds it, which packs tight instances better).

    Parameters
    ----------
    problem : Problem
        The problem.
    place : sequence of int, optional
        Preferred device of every node (None: no preference).
    capacity : sequence of float
        Bytes usable per device (static model).
    units : tuple, optional
        :func:`memory_units` of the problem (built when None).
    best_fit : bool
        Best fit instead of most free room.

    Returns
    -------
    list of int or None
        A placement within ``capacity``, or None when some unit finds no room.
    """
    k = problem.n_devices
    unit_of, members, unit_mem = units if units is not None else memory_units(problem)
    allowed, pin = problem.allowed, problem.pin
    used = [0.0] * k
    out = [-1] * problem.n_nodes
    order = sorted(range(len(members)), key=lambda u: (pin[members[u][0]] < 0, -unit_mem[u], u))
    for u in order:
        first, need = members[u][0], unit_mem[u]
        ok = allowed[first].tolist()
        want = -1 if place is None else place[first]
        if want >= 0 and ok[want] and fits(used[want] + need, capacity[want]):
            d = want
        else:
            rooms = [(capacity[e] - used[e]) * (-1 if best_fit else 1) for e in range(k)]
            free = [e for e in range(k) if ok[e] and fits(used[e] + need, capacity[e])]
            if not free:
                return None
            d = max(free, key=lambda e: (rooms[e], -e))
        used[d] += need
        for v in members[u]:
            out[v] = d
    return out

#: Tabu tenure of the packing search, and its steps per memory unit (and unit of effort).
_TENURE, _STEPS_PER_UNIT = 7, 20


def pack_units(problem: Problem, capacity: list[float], units, max_evals: int,
               deadline_check=None, effort: float = 1.0) -> list[int] | None:
    """A placement whose static load fits ``capacity`` on every device, or None: tabu search on the
    total overflow ``sum_d max(0, load_d - C_d)`` (Glover, "Tabu search - Part I", ORSA J. Computing
    1989). Each step takes the best move of a unit off an overflowing device, or swap with a smaller
    unit elsewhere, even when it raises the overflow, and forbids the reverse for a few steps
    unless it reaches a new best; evaluations are O(1) on the device loads, ties go to the lower
    unit and device.

    Parameters
    ----------
    problem : Problem
        The problem (its pins, forbids and device count).
    capacity : list of float
        Bytes usable per device (static model).
    units : tuple
        :func:`memory_units` of the problem.
    max_evals : int
        Candidate moves and swaps to evaluate at most.
    deadline_check : callable, optional
        Called once per step; the search stops when it returns True.
    effort : float
        Steps at most: ``effort * (200 + 20 * units)``.

    Returns
    -------
    list of int or None
        A device per node, or None when no packing was found within the budget.
    """
    _, members, unit_mem = units
    k = problem.n_devices
    cap = [float(c) for c in capacity]
    allowed = problem.allowed
    pin = problem.pin
    n_units = len(members)
    ok = [allowed[m].all(axis=0).tolist() for m in members]
    fixed = [int(pin[m[0]]) if pin[m[0]] >= 0 else -1 for m in members]
    if any(not any(row) for row in ok):
        return None
    # start: pinned units, then the others by decreasing memory to the least-overflowing device
    dev = [-1] * n_units
    load = [0.0] * k
    for u in sorted(range(n_units), key=lambda u: (fixed[u] < 0, -unit_mem[u], u)):
        if fixed[u] >= 0:
            d = fixed[u]
        else:
            d = min((e for e in range(k) if ok[u][e]),
                    key=lambda e: (max(0.0, load[e] + unit_mem[u] - cap[e]), load[e] - cap[e], e))
        dev[u] = d
        load[d] += unit_mem[u]

    def over(d: int, x: float) -> float:
        return max(0.0, x - cap[d])

    def all_fit() -> bool:
        return all(fits(load[d], cap[d]) for d in range(k))

    total = sum(over(d, load[d]) for d in range(k))
    best_total = total
    tabu: dict[tuple[int, int], int] = {}
    evals, step = 0, 0
    on = [[] for _ in range(k)]
    for u in range(n_units):
        on[dev[u]].append(u)
    max_steps = int(max(1.0, effort) * (200 + _STEPS_PER_UNIT * n_units))
    while not all_fit() and evals < max_evals and step < max_steps:
        if deadline_check is not None and deadline_check():
            return None
        step += 1
        chosen = None  # (tabu, new_total, kind, u, e, w): tabu moves rank last, so a step is always taken
        for d in range(k):
            if fits(load[d], cap[d]):
                continue
            for u in on[d]:
                if fixed[u] >= 0:
                    continue
                x = unit_mem[u]
                for e in range(k):
                    if e == d or not ok[u][e]:
                        continue
                    evals += 1
                    base = total - over(d, load[d]) - over(e, load[e])
                    new = base + over(d, load[d] - x) + over(e, load[e] + x)
                    cand = (tabu.get((u, e), 0) >= step and not new < best_total, new, 0, u, e, -1)
                    if chosen is None or cand < chosen:
                        chosen = cand
                    for w in on[e]:
                        y = unit_mem[w]
                        if fixed[w] >= 0 or y >= x or not ok[w][d]:
                            continue
                        evals += 1
                        new = base + over(d, load[d] - x + y) + over(e, load[e] + x - y)
                        cand = (tabu.get((u, e), 0) >= step and not new < best_total, new, 1, u, e, w)
                        if chosen is None or cand < chosen:
                            chosen = cand
        if chosen is None:
            return None
        _, _, kind, u, e, w = chosen
        d = dev[u]
        moved = [(u, d, e)] + ([(w, e, d)] if kind == 1 else [])
        for a, src, dst in moved:
            on[src].remove(a)
            on[dst].append(a)
            load[src] -= unit_mem[a]
            load[dst] += unit_mem[a]
            dev[a] = dst
            tabu[(a, src)] = step + _TENURE
        total = sum(over(c, load[c]) for c in range(k))  # recomputed: no drift from += and -=
        best_total = min(best_total, total)
    if not all_fit():
        return None
    out = np.empty(problem.n_nodes, dtype=np.int64)
    for u, m in enumerate(members):
        out[m] = dev[u]
    return out.tolist()
