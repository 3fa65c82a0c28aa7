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

from ..._docstrings import fill_doc
from . import _exact_common as xc
from . import cpsat_model as cm
from . import cpsat_segments as sg

__all__ = ["CLAIM_TOL", "TARGET_TOL", "SEGMENT_SHARE", "meets", "fork_join_bound", "closed_form_bound",
           "target_units", "segment_step"]

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


@fill_doc
def fork_join_bound(problem) -> float:
    """A lower bound for a fork-join graph: one source ``f``, one sink ``t``, every other node
    fed by ``f`` alone and feeding ``t`` alone (0 for any other graph).

    Every branch runs inside the window ``[F(f), S(t)]`` of length ``C``. Say ``u`` devices
    run branches. Each of them that does not hold ``f`` (at least ``u - 1``) starts its
    first branch no sooner than ``F(f)`` plus that branch's transfer in, and each that does
    not hold ``t`` (at least ``u - 1``) ends its last branch no later than ``S(t)`` minus its
    transfer out; the branches realising these are distinct per device. So ``u C`` is at
    least the branches' work plus the ``u - 1`` smallest transfers in plus the ``u - 1``
    smallest transfers out, and ``C`` at least the least of these over ``u = 1 .. K``
    (the boundary losses the fork-join analyses of Wang and Sinnen, ICPP 2022, and of Dutot,
    Fu, Prasad and Sinnen reason about: a remote branch pays both transfers). Run times are
    the fastest allowed, transfers the cheapest between two devices, so pins, speeds,
    links and memory only make the optimum longer.

    Parameters
    ----------
    %(problem)s

    Returns
    -------
    float
        Seconds: the source's and sink's fastest runs plus the window's bound; 0 when the
        graph is not a fork-join.
    """
    n, k = problem.n_nodes, problem.n_devices
    indeg, outdeg = np.diff(problem.in_ptr), np.diff(problem.out_ptr)
    sources, sinks = np.flatnonzero(indeg == 0), np.flatnonzero(outdeg == 0)
    if n < 3 or k < 1 or sources.size != 1 or sinks.size != 1:
        return 0.0
    f, t = int(sources[0]), int(sinks[0])
    src, dst = problem.edge_src, problem.edge_dst
    branch = np.ones(n, dtype=bool)
    branch[[f, t]] = False
    ins, outs = (src == f) & branch[dst], branch[src] & (dst == t)
    # every edge feeds a branch from f, or a branch feeds t (or f feeds t); one of each per branch
    if not ((ins | outs | ((src == f) & (dst == t))).all() and (indeg[branch] == 1).all()
            and (outdeg[branch] == 1).all()):
        return 0.0
    dur = np.where(problem.allowed, xc.durations(problem), np.inf).min(axis=1)
    comm = xc.transfer_table(problem)
    off = ~np.eye(k, dtype=bool)
    cheapest = comm[:, off].min(axis=1) if k > 1 and comm.size else np.zeros(problem.n_edges)
    c_in, c_out = np.sort(cheapest[ins]), np.sort(cheapest[outs])
    work = float(dur[branch].sum())
    window = min((work + float(c_in[:u - 1].sum()) + float(c_out[:u - 1].sum())) / u
                 for u in range(1, min(k, int(branch.sum())) + 1))
    return float(dur[f] + window + dur[t])


def closed_form_bound(data: cm.CpData, extra: float = 0.0) -> float:
    """The best lower bound in seconds that needs no proof of CP-SAT on the whole model.

    ``data.lb_s`` (the generic bound, the memory-forced path of
    :func:`~optpart.solvers.exact.path_bounds.memory_path_bound`), the communication-aware
    critical path (:func:`~optpart.solvers.exact.exact_bounds.comm_lower_bound`), the
    fork-join bound (:func:`fork_join_bound`) and ``extra``
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
    lb = max(float(data.lb_s), xc.comm_lower_bound(data.problem), fork_join_bound(data.problem), float(extra))
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
