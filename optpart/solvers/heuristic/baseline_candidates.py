"""The other baselines' answers as the heuristic's candidates: never worse than them.

``heft`` and ``etf`` are the heuristic's own first constructions (the same engine, order
and policy). The others -- ``topo`` (m-TOPO), ``metis`` (METIS partitioning, when pymetis
is installed) and ``pardnn`` (the seed method alone, :mod:`.pardnn_seed`) -- build their
placements differently, so their answers are taken as they are: each baseline is run on
the problem, with the seed and the memory model the registry would give it (``topo`` and
``metis`` guarantee only the static model; under peak the caller keeps their answer only
when its schedule fits, as the registry does), and its placement and own schedule become
a candidate.
"""

from __future__ import annotations

import numpy as np

from ...errors import SolverError
from ...evaluate import canonical_schedule
from ...model.problem import Problem

__all__ = ["baseline_candidates", "pays_for_baselines"]

#: The heuristic's work budget per unit of effort, in replay visits of nodes and edges: its
#: search's (``optpart.solvers.heuristic._SEARCH_WORK`` is this) and the baselines'.
WORK_PER_EFFORT = 1_200_000
#: What the three baselines are charged per node and edge, in the same units: at the default
#: effort they run up to 4*10^5 nodes + edges, the training steps of 10^5 operators where the
#: seed method alone was up to 23% shorter than every other construction (the seed method costs
#: about ten schedules' worth there; the heuristic's search does not run at that size).
BASELINE_COST = 3


def pays_for_baselines(effort: float, size: int) -> bool:
    """Whether the work budget of ``effort`` pays for the baselines on a graph of ``size``
    nodes + edges (at the default effort up to 4*10^5).

    Parameters
    ----------
    effort : float
        The heuristic's effort (0: constructions only, never the baselines).
    size : int
        Nodes plus edges.

    Returns
    -------
    bool
    """
    return effort > 0 and effort * WORK_PER_EFFORT >= BASELINE_COST * max(1, size)


def baseline_candidates(problem: Problem, memory_model: str, seed: int = 0
                        ) -> list[tuple[str, list[int], list[float]]]:
    """Placements and schedules of the ``topo``, ``metis`` and ``pardnn`` baselines.

    Parameters
    ----------
    problem : Problem
        The problem, with devices.
    memory_model : {"static", "peak"}
        The model asked for: ``pardnn`` runs under it, ``topo`` and ``metis`` under
        ``static`` (the only one they guarantee).
    seed : int
        The seed the baselines get.

    Returns
    -------
    list of tuple
        ``(name, placement, start)`` of each baseline that found a placement (``start``:
        its own schedule, else the canonical one the evaluator gives it), in the order
        topo, metis, pardnn; ``metis`` is left out when pymetis is not installed.
    """
    from ..baselines import metis, topo
    from . import pardnn_seed

    out = []
    for name, solve, model in (("topo", topo.solve, "static"), ("metis", metis.solve, "static"),
                               ("pardnn", pardnn_seed.solve, memory_model)):
        try:
            sol = solve(problem, seed=seed, memory_model=model)
        except (ImportError, SolverError):   # metis without pymetis
            continue
        if not sol.status.has_solution or sol.placement is None:
            continue
        start = sol.start
        if start is None:   # the solver's schedule is the canonical one (as the evaluator scores it)
            start, _ = canonical_schedule(problem, sol.placement)
        out.append((name, np.asarray(sol.placement).tolist(), np.asarray(start, dtype=np.float64).tolist()))
    return out
