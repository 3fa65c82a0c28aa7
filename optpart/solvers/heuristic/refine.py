"""Phase 3, *refinement* against the simulated schedule (ParDNN, Qararyah et al. 2021, 4.3).

The mapping of phase 2 is judged by levels, not by a schedule. Refinement simulates
the schedule of the placement (bottom-level order, insertion), finds its critical
chain and moves chain nodes (colocation groups as one unit) to the device of a chain
neighbour they exchange data with, when that lowers the makespan (or, at equal
makespan, the sum of finish times). At most ``max_evals`` schedule evaluations.
"""

from __future__ import annotations

import numpy as np

from ..._docstrings import fill_doc
from .improve import local_search
from .schedule import Graph

__all__ = ["refine"]


@fill_doc
def refine(g: Graph, place: list[int], allowed: np.ndarray, unit_of: list[int], members: list[list[int]],
           unit_mem: list[float], capacity: list[float], max_evals: int = 20,
           deadline: float | None = None) -> tuple[list[int], int]:
    """Critical-chain moves to neighbours' devices; returns ``(place, evaluations used)``.

    Parameters
    ----------
    %(g)s
    place : list of int
        Device of every node, within ``capacity`` (the memory step's output).
    allowed : numpy.ndarray
        ``(n, k)`` bool: which devices each node may use.
    unit_of : list of int
        Memory unit of every node (a colocation group is one unit, see :mod:`.memory`).
    members : list of list of int
        Nodes of every unit.
    unit_mem : list of float
        Bytes of every unit (static model).
    capacity : list of float
        Bytes usable per device; no move leaves a device over it.
    max_evals : int
        Schedule evaluations at most (each one an insertion replay of the whole graph).
    deadline : float, optional
        ``time.perf_counter()`` value after which no further move is tried.

    Returns
    -------
    tuple
        ``(place, evaluations)``: the best placement found (``place`` when no move helps)
        and the evaluations spent.
    """
    return local_search(g, place, allowed, unit_of, members, unit_mem, capacity, max_evals,
                        deadline, mode="neighbors", swaps=False)
