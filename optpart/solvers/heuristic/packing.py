"""Packing memory units onto devices when the greedy fill finds no room: tabu search.

Under the static model (and under peak on graphs without the memory split, where the two
agree) "does a placement fit?" is bin packing with per-device capacities: NP-hard, and
the greedy fills of :mod:`.memory` (worst fit, best fit) fail on tight instances that
have a packing. :func:`pack_units` then minimises the total overflow
``sum_d max(0, load_d - C_d)`` by tabu search (Glover, "Tabu search - Part I", ORSA J.
Computing 1989): each step takes the best *move* (a unit off an overflowing device) or
*swap* (a unit off an overflowing device for a smaller one elsewhere), even when it
raises the overflow, and forbids the reverse for a few steps unless it reaches a new
best. Colocation groups move as one unit; pins and forbidden devices are kept.
Every evaluation is O(1) on the device loads, so the budget is a count of evaluations,
and the result is deterministic (ties break on unit and device ids).
"""

from __future__ import annotations

import numpy as np

from ...model.memory import fits
from ...model.problem import Problem

__all__ = ["pack_units"]

_TENURE = 7
_STEPS_PER_UNIT = 20  # steps at most per memory unit (and per unit of effort): small instances stop early


def pack_units(problem: Problem, capacity: list[float], units, max_evals: int,
               deadline_check=None, effort: float = 1.0) -> list[int] | None:
    """A placement whose static load fits ``capacity`` on every device, or None.

    Parameters
    ----------
    problem : Problem
        The problem (its pins, forbids and device count).
    capacity : list of float
        Bytes usable per device (static model).
    units : tuple
        ``(unit_of, members, unit_memory)`` from :func:`.memory.memory_units`.
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
