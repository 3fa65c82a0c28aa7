"""``pardnn``: the ParDNN seed method, the faithful port, used alone and by the heuristic.

ParDNN (Qararyah, Wahib, Dikbayir, Belviranli, Unat, "A computational-graph partitioning
method for training memory-constrained DNNs", Parallel Computing 105, 2021), after the
authors' code (ParCoreLab/pardnn: the C++ port and the Python research code), in four phases:

1. slicing (:mod:`.slicing`): linear clusters by bottom level, the first ``k`` with the
   K-path recomputation (the primaries), the rest by weighted level;
2. merging and mapping (:mod:`.mapping`): a cluster that talks to one primary merges into it
   when its span's work potential allows, the rest go to the primary of least load in their
   span minus communication; primary ``i`` runs on the ``i``-th fastest device;
3. constraints projected (:func:`optpart.schedule.units.project_constraints`), then
   refinement against the simulated schedule (:mod:`.refine`);
4. the memory step (:mod:`.memory`) under the static or the peak model; when it gets stuck
   it runs again after the C++ port's variable balancing, then with the research code's
   target (the device of most room); the first placement that fits wins.

The answer is the placement with the schedule the memory step checked (insertion in
bottom-level order, no justification). It always respects the memory model it runs under,
or answers ``unknown`` with the reason. Deterministic: ties go to the lower topological
position, cluster and device index. Where the port and the paper differ, and where this
port departs from both: docs/heuristic.md, "The seed method".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...model.memory import fits
from ...model.problem import Problem
from ...result import Status
from ...schedule import Graph, schedule_placement
from ...schedule.units import greedy_fill, memory_units, project_constraints
from ..base import Solution
from ..spec import SolverSpec
from .mapping import map_clusters
from .memory import balance_variables, peak_memory_step, static_memory_step
from .refine import refine, refinement_rounds
from .slicing import linear_clusters

__all__ = ["SPEC", "SeedPlacement", "seed_placement", "solve"]

SPEC = SolverSpec(options=(), memory_models=("static", "peak"), uses_hint=False, uses_time_limit=False)


@dataclass
class SeedPlacement:
    """What :func:`seed_placement` returns.

    Attributes
    ----------
    place : list of int
        Device of every node.
    start, finish : list of float
        The schedule the memory step checked (under ``peak``: the one whose liveness fits).
    makespan : float
        ``max(finish)``.
    stats : dict
        Phase counts: paths, primaries, refinement rounds kept, the memory step used.
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
        Static model only: the bytes each device may hold (default: the devices' memory).
    units : tuple, optional
        :func:`optpart.schedule.units.memory_units` of the problem (built when not given).

    Returns
    -------
    SeedPlacement or None
        A placement within memory under ``memory_model`` and its schedule, or None when the
        memory step finds none (under ``static`` the last resort is
        :func:`optpart.schedule.units.greedy_fill`, whose guarantee then holds).
    """
    if memory_model not in ("static", "peak"):
        raise ValueError(f"memory_model={memory_model!r}; use 'static' or 'peak'")
    g = Graph(problem) if g is None else g
    units = memory_units(problem) if units is None else units
    paths, n_primary = linear_clusters(g)
    primary = map_clusters(g, paths, n_primary)
    device = _primary_devices(problem, primary, n_primary,
                              problem.device_memory.astype(float).tolist() if capacity is None else capacity)
    place = project_constraints(problem, [device[c] for c in primary])
    place, kept = refine(g, place, units[0], units[1], problem.allowed, refinement_rounds(g, paths))
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
    fixed = None
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


def _primary_devices(problem: Problem, primary: list[int], n_primary: int, capacity: list[float]) -> list[int]:
    """Device of each primary cluster: the ``i``-th fastest device for primary ``i`` (the port's
    rule), except that among devices of equal speed a primary takes the smallest that holds its
    static bytes (the port reads no capacity; with unequal capacities a primary would otherwise
    land where the memory step must split it)."""
    k = problem.n_devices
    mem = np.bincount(np.asarray(primary, dtype=np.int64), weights=problem.memory, minlength=max(1, n_primary))
    speed = problem.device_speed
    free = list(range(k))
    out = []
    for c in range(max(1, n_primary)):
        fastest = max(speed[d] for d in free) if free else 0.0
        tier = [d for d in free if speed[d] == fastest] or list(range(k))
        fit = [d for d in tier if fits(float(mem[c]), capacity[d])]
        d = min(fit, key=lambda e: (capacity[e], e)) if fit else min(tier)
        out.append(d)
        if d in free:
            free.remove(d)
    return out


@SPEC.checked("pardnn")
def solve(problem: Problem, *, time_limit: float | None = None, seed: int = 0, hint=None,
          memory_model: str = "static") -> Solution:
    """Place ``problem`` with ParDNN's four phases (see the module docstring).

    Parameters
    ----------
    problem : Problem
        The problem, with devices.
    time_limit, seed, hint
        Not used (the seed method is deterministic and runs to completion).
    memory_model : {"static", "peak"}
        The memory model the placement and its schedule respect.

    Returns
    -------
    Solution
        ``feasible`` with the placement and start times, or ``unknown`` with the reason.
    """
    if problem.n_nodes == 0:
        return Solution(Status.FEASIBLE, placement=np.zeros(0, dtype=np.int64), start=np.zeros(0),
                        memory_model=memory_model)
    res = seed_placement(problem, Graph(problem), memory_model=memory_model)
    if res is None:
        why = ("the peak-model memory step got stuck in its four attempts (from the refined and the "
               "variable-balanced placement, toward least communication and toward most room): no unit on an "
               "overflowing device could move to a device with room on its liveness timeline"
               if memory_model == "peak" else
               "the memory step found no placement within memory (its guarantee needs every device to hold "
               "total/k plus the largest colocation group, and no forbidden devices)")
        return Solution(Status.UNKNOWN, message=f"pardnn: {why}", memory_model=memory_model)
    return Solution(Status.FEASIBLE, placement=np.asarray(res.place, dtype=np.int64), start=np.asarray(res.start),
                    memory_model=memory_model, stats={"phases": "slicing, mapping, refinement, memory", **res.stats})
