"""The ParDNN seed method, phases 1-4 in order: the one public entry point :func:`seed_placement`.

ParDNN (Qararyah, Wahib, Dikbayir, Belviranli, Unat, "A computational-graph
partitioning method for training memory-constrained DNNs", Parallel Computing 105,
2021), after the authors' code (ParCoreLab/pardnn):

1. slicing (:mod:`.seed_slicing`): linear clusters by bottom level, the first ``k`` with the
   K-path recomputation (primaries), the rest by weighted level (secondaries);
2. merging and mapping (:mod:`.seed_mapping`): clusters that talk only to one primary merge
   into it when the span's work potential allows, the rest go to the primary of least
   load in their span minus communication; primary ``i`` runs on the ``i``-th fastest
   device;
3. constraints (pins, forbidden devices, colocation groups) are projected
   (:func:`.memory.project_constraints`), then refinement against the simulated
   schedule (:mod:`.seed_refine`);
4. the memory step (:mod:`.seed_memory`) under the static or the peak model: units move,
   checked against capacities, to the device they add least communication to; when that
   gets stuck, it runs again after the C++ port's variable balancing
   (:mod:`.seed_balance`), then with the research code's target (the device of most
   room) from either start; the first placement that fits wins.

``pardnn`` (the solver, :mod:`optpart.solvers.heuristic.pardnn_seed`) calls :func:`seed_placement`;
the ``heuristic`` keeps its own phases (:mod:`.slicing`, :mod:`.mapping`, :mod:`.refine`).
Deterministic: ties go to lower node, cluster and device indices.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...model.problem import Problem
from .memory import greedy_fill, memory_units, project_constraints
from .schedule import Graph, schedule_placement
from .seed_balance import balance_variables
from .seed_mapping import map_clusters
from .seed_memory import peak_memory_step, static_memory_step
from .seed_refine import refine, refinement_rounds
from .seed_slicing import linear_clusters

__all__ = ["SeedPlacement", "seed_placement"]


@dataclass
class SeedPlacement:
    """What :func:`seed_placement` returns.

    Attributes
    ----------
    place : list of int
        Device of every node.
    start, finish : list of float
        The schedule the memory step checked (:func:`.schedule.schedule_placement`
        without justification): under ``peak`` the one whose liveness fits.
    makespan : float
        ``max(finish)``.
    stats : dict
        Phase counts: paths, primaries, refinement rounds kept, memory step used.
    """

    place: list[int]
    start: list[float]
    finish: list[float]
    makespan: float
    stats: dict = field(default_factory=dict)


def seed_placement(problem: Problem, g: Graph | None = None, *, memory_model: str = "static",
                   capacity: list[float] | None = None, units=None) -> SeedPlacement | None:
    """Place ``problem`` with ParDNN's phases 1-4 (see the module docstring).

    Parameters
    ----------
    problem : Problem
        The problem, with devices.
    g : Graph, optional
        ``problem`` as plain lists (built when not given).
    memory_model : {"static", "peak"}
        The model the memory step enforces (docs/model.md section 3).
    capacity : list of float, optional
        Static model only: the bytes each device may hold (default the devices' memory;
        the heuristic passes shrunk capacities).
    units : tuple, optional
        :func:`.memory.memory_units` of the problem (computed when not given).

    Returns
    -------
    SeedPlacement or None
        A placement within memory under ``memory_model`` and its schedule, or None when
        the memory step finds none. Under ``static`` the memory step falls back on
        :func:`.memory.greedy_fill`, whose guarantee (docs/heuristic.md) then holds.
    """
    if memory_model not in ("static", "peak"):
        raise ValueError(f"memory_model={memory_model!r}; use 'static' or 'peak'")
    g = Graph(problem) if g is None else g
    k = g.k
    units = memory_units(problem) if units is None else units
    unit_of, members, _ = units
    paths, n_primary = linear_clusters(g)
    primary = map_clusters(g, paths, n_primary)
    dev_order = sorted(range(k), key=lambda d: (-g.speed[d], d))
    place = [dev_order[c] for c in primary]
    place = project_constraints(problem, g, place)
    place, kept = refine(g, place, unit_of, members, problem.allowed, refinement_rounds(g, paths))
    stats = {"paths": len(paths), "primaries": n_primary, "refinement_rounds": kept}
    balanced = balance_variables(problem, place, units)
    attempts = [("comm", place, ""), ("comm", balanced, "balanced, "), ("room", place, ""),
                ("room", balanced, "balanced, ")]
    if memory_model == "peak":
        for target, start, how in attempts:
            res = peak_memory_step(problem, g, start, units, target=target)
            if res is not None:
                stats["memory_step"] = f"peak ({how}{target})"
                return SeedPlacement(*res, stats)
        return None
    cap = problem.device_memory.astype(float).tolist() if capacity is None else list(capacity)
    for target, start, how in attempts:
        fixed = static_memory_step(problem, g, start, units, cap, target=target)
        stats["memory_step"] = f"static ({how}{target})"
        if fixed is not None:
            break
    if fixed is None:
        fixed = greedy_fill(problem, place, cap, units)
        stats["memory_step"] = "greedy-fill"
        if fixed is None:
            return None
    s, f, ms = schedule_placement(g, fixed, 0)
    return SeedPlacement(fixed, s, f, ms, stats)
