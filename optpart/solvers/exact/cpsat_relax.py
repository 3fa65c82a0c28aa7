"""A proven lower bound under peak memory where the peak model itself is conservative.

The peak model of :mod:`optpart.solvers.exact.cpsat_peak` is exact only on an exact time grid
and without zero-time nodes that hold memory; otherwise it is a *restriction* (times
rounded up, instants held for a whole unit), whose optimum bounds nothing. Here the same
model is built as a *relaxation* (:func:`optpart.solvers.exact.cpsat_model.prepare` with
``relax=True``): times rounded down, empty intervals allowed (an instant holds nothing),
copies free to start two units late, zero-time nodes free to sit inside other runs. A
real schedule with every time rounded down is a schedule of the relaxation, so its
optimum over the scale is a lower bound of the real optimum, with no rounding slack.
Solved to optimality and confirmed without presolve like every proof, that bound can
meet the restriction's schedule: the instrumented 76-node MLP training step
(``instances/small/mlp4-torch-training.json``) had a 28% gap with the generic bound
although CP-SAT proved the restriction optimal in 0.06 deterministic s.
"""

from __future__ import annotations

import numpy as np

from ...model.problem import Problem
from . import _exact_common as xc
from . import cpsat_model as cm
from . import cpsat_search as cs

__all__ = ["relaxed_bound"]


def relaxed_bound(problem: Problem, data: cm.CpData, place: np.ndarray, start: np.ndarray, budget: xc.Budget,
                  reserve: float, deterministic_time: float | None, seed: int, log: bool,
                  stats: dict) -> float:
    """The relaxation's proven optimum in seconds, or 0 when not proven (or not confirmed).

    Parameters
    ----------
    problem : Problem
        The problem.
    data : CpData
        The restriction's data (its grid is reused; memories must be exact integers).
    place, start : numpy.ndarray
        A peak-feasible schedule in seconds (the hint: rounded down, it is a solution).
    budget : Budget
        The call's wall budget (the search takes three quarters of what is left).
    reserve : float
        Seconds kept for the rest of the call.
    deterministic_time : float or None
        Deterministic budget of the search (the confirmation gets its default).
    seed : int
        CP-SAT's seed.
    log : bool
        Print CP-SAT's log.
    stats : dict
        The call's statistics (``relaxation`` says what happened).

    Returns
    -------
    float
        A lower bound of the real optimum in seconds (0: none).
    """
    if not data.mem_exact:
        stats["relaxation"] = "not tried (memory rounded)"
        return 0.0
    n = problem.n_nodes
    ms = float((np.asarray(start) + problem.duration(place)).max())
    rel = cm.prepare(problem, True, ms, relax=True, grid=data.grid)
    try:
        mv = cm.build(rel, budget, reserve + 0.5)
    except xc.OutOfTime:
        stats["relaxation"] = "not built (time limit)"
        return 0.0
    units = data.grid.down(np.asarray(start, dtype=np.float64))
    hint_p = xc.relabel(np.asarray(place, dtype=np.int64), rel.classes, rel.sym_order)
    cm.add_hint(mv.model, rel, mv, hint_p, units)
    # The schedule rounded down is a solution whose makespan variable may take floor(ms * scale)
    # (not less: the lower bound rows are floors of real bounds): the optimum is no later.
    cap = int(data.grid.down(np.array([ms]))[0])
    mv.model.add(mv.makespan <= max(cap, int((units + rel.dur[np.arange(n), hint_p]).max())))
    sub: dict = {}
    left = budget.left() - reserve
    if left <= 0.1:
        stats["relaxation"] = "no time left"
        return 0.0
    found = cs.search(problem, rel, mv, 0.75 * left, seed, True, 1, log, deterministic_time, sub)
    if found.name != "OPTIMAL":
        stats["relaxation"] = f"not proven ({found.name})"
        return 0.0
    confirmed, _ = cs.confirm(problem, rel, mv, found.solver, found.name, budget, reserve, found.dtime, None,
                              seed, log, sub)
    stats["relaxation"] = f"optimal {int(round(found.solver.objective_value))} units, " + \
        ("confirmed" if confirmed else "not confirmed") + f" ({sub.get('confirmation', '')})"
    if not confirmed:
        return 0.0
    return float(found.solver.objective_value) / data.grid.scale * (1 - 1e-12)
