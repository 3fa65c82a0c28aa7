"""The heuristic's own seed-method construction: ParDNN's phases 1-4 on the static model.

Slicing (:mod:`.slicing`), merging and mapping (:mod:`.mapping`), refinement against the
simulated schedule (:mod:`.refine`) and the memory step (:mod:`.memory`), as the heuristic
runs them for its candidate ``pardnn`` (the faithful port of the published method alone is
:mod:`.pardnn_seed`, the ``pardnn`` solver).

Reference: Qararyah, Wahib, Dikbayir, Belviranli, Unat, "A computational-graph partitioning
method for training memory-constrained DNNs", Parallel Computing 105, 2021.
"""

from __future__ import annotations

from ...model.problem import Problem
from .mapping import map_clusters
from .memory import greedy_fill, memory_units, project_constraints, repair_memory
from .refine import refine
from .schedule import Graph
from .slicing import levels, slice_paths

__all__ = ["pardnn_placement"]


def pardnn_placement(problem: Problem, g: Graph, capacity: list[float], refine_evals: int = 20,
                     deadline: float | None = None, units=None) -> list[int] | None:
    """Phases 1-4: slicing, merging and mapping, refinement, memory step. None if stuck.

    Parameters
    ----------
    problem : Problem
    g : Graph
        The problem as plain lists (:class:`optpart.schedule.graph.Graph`).
    capacity : list of float
        Bytes usable per device (static model).
    refine_evals : int
        Schedule evaluations for phase 3 (0: no refinement).
    deadline : float, optional
        ``time.perf_counter()`` value after which refinement stops.
    units : tuple or callable, optional
        ``(unit_of, members, unit_memory)`` from :func:`memory_units`, or a function that
        returns it (asked only when the memory step needs the units); built when None.

    Returns
    -------
    list of int or None
        Device of every node within ``capacity``, or None when the memory step is stuck.
    """
    top, bottom = levels(g)
    cluster_of, paths = slice_paths(g, bottom)
    place = map_clusters(g, top, paths, problem.allowed, problem.memory.tolist(), capacity, cluster_of=cluster_of)
    place = project_constraints(problem, g, place)
    built: list = []

    def get_units():
        """The memory units, on first use (a mapping within memory needs none: 90 MiB at 10^6 nodes)."""
        if not built:
            built.append(units() if callable(units) else units if units is not None else memory_units(problem))
        return built[0]

    fixed = repair_memory(problem, g, place, capacity, get_units)
    if fixed is None:
        fixed = greedy_fill(problem, place, capacity, get_units())
        if fixed is None:
            return None
    if refine_evals <= 0:  # no evaluations to spend: refinement would only score the start twice
        return fixed
    unit_of, members, unit_mem = get_units()
    place, _ = refine(g, fixed, problem.allowed, unit_of, members, unit_mem, capacity, refine_evals, deadline)
    return place
