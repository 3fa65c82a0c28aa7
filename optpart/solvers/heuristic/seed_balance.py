"""The C++ port's memory step: balance the *variables* (parameters) over the devices.

ParDNN's C++ port (ParCoreLab/pardnn, ``Graph::handle_memory``) never reads a capacity:
it rates each device by ``r(d) = k (I(d) / I + V(d) / V) / 2`` (``I``: intermediate
memory, here output and temporary bytes; ``V``: variable memory, here parameter bytes;
``I(d)``, ``V(d)``: the device's share), takes the devices in increasing ``r``, and fills
each device below the mean (``r < 1``) with the largest variables of the most loaded
device until it reaches the mean or the most loaded device drops to it; a device whose
``r`` falls to 1 or whose variables run out stops giving.

:func:`balance_variables` is that rule on our units (a colocation group moves whole,
only to devices all its members may use, pinned units stay). The seed method runs it
before its capacity-checked memory step (:mod:`.seed_memory`) as its last attempt,
when the memory step from the refined placement itself got stuck.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ...model.problem import Problem

__all__ = ["balance_variables"]


def balance_variables(problem: Problem, place: Sequence[int], units) -> list[int]:
    """Move parameter-holding units from the most to the least loaded devices (module docstring).

    Parameters
    ----------
    problem : Problem
        The problem.
    place : sequence of int
        Device of every node (constraints projected).
    units : tuple
        :func:`.memory.memory_units` of the problem.

    Returns
    -------
    list of int
        The balanced placement (a new list); ``place`` unchanged when no node has
        parameters.
    """
    unit_of, members, _ = units
    k = problem.n_devices
    pl = np.asarray(place, dtype=np.int64).copy()
    par = problem.param_bytes.astype(np.float64)
    inter = (problem.output_bytes + problem.temp_bytes).astype(np.float64)
    v_tot, i_tot = float(par.sum()), float(inter.sum())
    if v_tot <= 0 or k < 2:
        return pl.tolist()
    var = np.bincount(pl, weights=par, minlength=k) / v_tot
    imm = np.bincount(pl, weights=inter, minlength=k) / i_tot if i_tot > 0 else np.full(k, 1.0 / k)
    ratio = k * (imm + var) / 2.0
    uvar = np.asarray([float(par[m].sum()) for m in members])
    first = np.asarray([m[0] for m in members], dtype=np.int64)
    movable = problem.pin[first] < 0
    ok = np.asarray([problem.allowed[m].all(axis=0) for m in members])
    # each device's variable units, largest first (ties: lower unit index)
    stacks = {d: [] for d in range(k)}
    for u in np.lexsort((np.arange(len(members)), -uvar)).tolist():
        if uvar[u] > 0 and movable[u]:
            stacks[int(pl[first[u]])].append(u)
    order = sorted(range(k), key=lambda d: (ratio[d], d))
    most = k - 1
    for i in range(k - 1):
        d = order[i]
        while most > i and ratio[d] < 1.0 and ratio[d] < ratio[order[most]]:
            src = order[most]
            stack = stacks[src]
            j = next((j for j, u in enumerate(stack) if ok[u, d]), -1)
            if j < 0:
                break                             # nothing on src may run on d
            u = stack.pop(j)
            pl[members[u]] = d
            share = uvar[u] / v_tot
            ratio[d] += k * share / 2.0
            ratio[src] -= k * share / 2.0
            while most > i and (ratio[order[most]] <= 1.0 or not stacks[order[most]]):
                most -= 1
    return pl.tolist()
