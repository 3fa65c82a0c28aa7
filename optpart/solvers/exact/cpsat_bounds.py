"""The lower bounds an ``optimal`` of ``cpsat`` may rest on besides CP-SAT's own proof.

* :func:`closed_form_bound`: the generic bound, the memory-forced path and the
  communication-aware critical path, and (static memory) the segment bound of
  :mod:`optpart.solvers.exact.cpsat_segments`; a schedule that :func:`meets` it is optimal.
* :func:`target_units`: the makespan the target phase of
  :func:`optpart.solvers.exact.cpsat_search.search` looks for, a schedule at that bound.
* :func:`segment_step`: the segments' sub-solves within a share of the budget, and their
  span rows in the model.
"""

from __future__ import annotations

import numpy as np

from . import _exact_common as xc
from . import cpsat_model as cm
from . import cpsat_segments as sg

__all__ = ["CLAIM_TOL", "TARGET_TOL", "SEGMENT_SHARE", "meets", "closed_form_bound", "target_units",
           "segment_step"]

#: Relative tolerance of an ``optimal`` claim: the makespan recomputed in seconds meets the
#: proven bound within it (docs/exact.md, "Statuses").
CLAIM_TOL = 9e-7
#: The target phase asks for a makespan within this (smaller) share above the bound.
TARGET_TOL = 5e-7
#: Share of the search budget (wall and deterministic) for the segments' sub-solves.
SEGMENT_SHARE = 0.1


def meets(makespan: float, bound: float) -> bool:
    """Whether ``makespan`` meets the lower ``bound`` within the claim's tolerance.

    Parameters
    ----------
    makespan : float
        A schedule's makespan in seconds.
    bound : float
        A valid lower bound in seconds.

    Returns
    -------
    bool
    """
    return makespan <= bound + CLAIM_TOL * max(makespan, 1e-12)


def closed_form_bound(data: cm.CpData, extra: float = 0.0) -> float:
    """The best lower bound in seconds that needs no proof of CP-SAT on the whole model.

    ``data.lb_s`` (the generic bound, the memory-forced path of
    :func:`~optpart.solvers.exact.path_bounds.memory_path_bound`), the communication-aware
    critical path (:func:`~optpart.solvers.exact.exact_bounds.comm_lower_bound`) and ``extra``
    (the segment bound, whose sub-proofs were confirmed); on an exact grid every
    semi-active schedule ends on the grid, so the bound is rounded up to it.

    Parameters
    ----------
    data : CpData
        The model's data (problem, grid, bounds).
    extra : float
        Another valid bound in seconds.

    Returns
    -------
    float
        Seconds.
    """
    lb = max(float(data.lb_s), xc.comm_lower_bound(data.problem), float(extra))
    if data.grid.exact and lb > 0:
        units = lb * data.grid.scale
        near = round(units)
        lb = (near if abs(units - near) <= 1e-9 * max(1.0, units) else np.ceil(units)) / data.grid.scale
    return float(lb)


def target_units(data: cm.CpData, bound: float, hint_p: np.ndarray | None, hint_units: np.ndarray | None
                 ) -> int | None:
    """The target phase's makespan in grid units (None: no target phase).

    A schedule at or below it meets ``bound`` within :data:`TARGET_TOL` (rounding up keeps
    the real makespan at most the integer one), so it is optimal by :func:`meets`. Only
    asked when the hint is longer: without a hint there is nothing to beat yet.

    Parameters
    ----------
    data : CpData
        The model's data.
    bound : float
        A valid lower bound in seconds (:func:`closed_form_bound`).
    hint_p, hint_units : numpy.ndarray or None
        The hint's placement and integer starts.

    Returns
    -------
    int or None
    """
    if hint_p is None or bound <= 0:
        return None
    x = bound * data.grid.scale
    target = max(int(np.floor(x * (1 + TARGET_TOL))), int(np.ceil(x * (1 - 1e-12))))
    hint_ms = int((hint_units + data.dur[np.arange(data.problem.n_nodes), hint_p]).max())
    return target if target < hint_ms else None


def segment_step(data: cm.CpData, mv: cm.CpModelVars, budget: xc.Budget, seconds: float,
                 deterministic_time: float | None, seed: int, stats: dict, solve) -> float:
    """Solve the segments between cut nodes and put their spans in the model (static memory).

    Parameters
    ----------
    data : CpData
        The model's data.
    mv : CpModelVars
        The built model (span rows are added).
    budget : Budget
        The call's wall budget.
    seconds : float
        Wall seconds for the sub-solves.
    deterministic_time : float or None
        Their deterministic budget (None: one second each).
    seed : int
        Seed of the sub-solves.
    stats : dict
        The call's statistics (``segments``, ``segments_proven``, ``segment_bound`` are set).
    solve : callable
        :func:`optpart.solvers.exact.cpsat.solve`, which solves each segment.

    Returns
    -------
    float
        The segment bound in seconds (0 when the graph has no segments, or under peak).
    """
    if data.peak or data.relaxed:
        return 0.0
    segs = sg.segments(data.problem)
    if not segs.nodes:
        return 0.0
    sg.segment_bounds(data.problem, segs, budget, seconds, deterministic_time, seed, solve)
    sg.add_span_rows(mv.model, mv, segs, data.grid.scale)
    stats.update(segments=len(segs.nodes), segments_proven=int(sum(segs.proven)),
                 segment_bound=segs.lower_bound)
    return segs.lower_bound
