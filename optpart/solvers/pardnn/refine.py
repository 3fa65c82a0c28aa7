"""Phase 3, *refinement* against the simulated schedule (ParDNN, Qararyah et al. 2021, 4.3).

The mapping of phase 2 is judged by levels, not by a schedule. Refinement simulates
the schedule of the placement (bottom-level order, insertion), finds its critical
chain and moves chain nodes (colocation groups as one unit) to the device of a chain
neighbour they exchange data with, when that lowers the makespan (or, at equal
makespan, the sum of finish times). At most ``max_evals`` schedule evaluations.
"""

from __future__ import annotations

import numpy as np

from .improve import local_search
from .schedule import Graph

__all__ = ["refine"]


def refine(g: Graph, place: list[int], allowed: np.ndarray, unit_of: list[int], members: list[list[int]],
           unit_mem: list[float], capacity: list[float], max_evals: int = 20,
           deadline: float | None = None) -> tuple[list[int], int]:
    """Critical-chain moves to neighbours' devices; returns ``(place, evaluations used)``."""
    return local_search(g, place, allowed, unit_of, members, unit_mem, capacity, max_evals,
                        deadline, mode="neighbors", swaps=False)
