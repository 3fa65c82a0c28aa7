"""Large-neighbourhood search around an incumbent schedule, on the CP-SAT model of ``cpsat``.

Each round copies the model, freezes most of the incumbent and lets CP-SAT re-solve the
rest with a small deterministic budget, asking for a strictly shorter makespan:

* the neighbourhood is a window of the topological order (every node in it may move to
  any device), or, every other round, the nodes of two devices within a wider window;
* nodes outside the neighbourhood keep their device; nodes well before the window also
  keep their start time (the past is frozen, so each round is a small problem);
* an improvement becomes the new incumbent; windows advance round by round and double
  after a full pass without improvement.

Domains are fixed directly in the model copy (no new constraints), so CP-SAT's presolve
removes the frozen part. Rounds are deterministic given the seed; the number of rounds
depends on the wall-clock budget unless ``max_rounds`` caps it.

Reference: Pisinger, Ropke, "Large neighborhood search", Handbook of Metaheuristics
(2010); Godard, Laborie, Nuijten, "Randomized large neighborhood search for cumulative
scheduling", ICAPS 2005.
"""

from __future__ import annotations

import numpy as np

from . import _exact_common as xc
from .cpsat_model import CpData, CpModelVars

__all__ = ["improve"]


def improve(data: CpData, mv: CpModelVars, place: np.ndarray, start_units: np.ndarray, budget: xc.Budget,
            *, reserve: float, seed: int, round_dtime: float = 0.5, window: int = 24,
            max_rounds: int | None = None, workers: int = 1) -> tuple[np.ndarray, np.ndarray, dict]:
    """Improve ``(place, start_units)`` (a valid schedule of the model) until the budget ends.

    Returns the best placement, its integer starts and statistics (rounds, improvements).
    ``workers`` > 1 runs each round's CP-SAT in parallel (not reproducible).

    Parameters
    ----------
    data : CpData
        The integer data of the full model (:func:`~optpart.solvers.exact.cpsat_model.prepare`).
    mv : CpModelVars
        The built model's variables; each round fixes those outside its neighbourhood.
    place : ndarray
        The starting placement (device per node).
    start_units : ndarray
        Its start times in grid units, a valid schedule of the model.
    budget : Budget
        Wall-clock budget of the call; the search stops ``reserve`` seconds before its end.
    reserve : float
        Seconds kept for decoding and confirmation.
    seed : int
        Neighbourhood choice and CP-SAT seed.
    round_dtime : float
        CP-SAT deterministic time of one round (machine-independent).
    window : int
        Nodes freed per round.
    max_rounds : int, optional
        Cap on rounds (default: until the budget ends).
    workers : int
        CP-SAT workers per round.

    Returns
    -------
    tuple of (ndarray, ndarray, dict)
        The best placement, its integer starts, and ``lns_rounds``/``lns_improvements`` stats.
    """
    from ortools.sat.python import cp_model

    problem = data.problem
    n, k = problem.n_nodes, problem.n_devices
    rng = np.random.default_rng(seed)
    pos = np.empty(n, dtype=np.int64)
    pos[problem.topo] = np.arange(n)
    dur = data.dur
    place = np.asarray(place, dtype=np.int64).copy()
    start = np.asarray(start_units, dtype=np.int64).copy()
    best = int((start + dur[np.arange(n), place]).max())
    stats = {"lns_rounds": 0, "lns_improvements": 0, "lns_start_units": best}
    w = max(4, min(window, n))
    cursor = 0
    rounds_since = 0
    while (max_rounds is None or stats["lns_rounds"] < max_rounds) and budget.left() > reserve + 0.05:
        lo = cursor
        hi = min(n, lo + w)
        pair = None
        if k >= 2 and stats["lns_rounds"] % 2 == 1:
            pair = tuple(int(d) for d in rng.choice(k, size=2, replace=False))
            hi = min(n, lo + 2 * w)
        free = np.zeros(n, dtype=bool)
        win = problem.topo[lo:hi]
        if pair is None:
            free[win] = True
        else:
            free[win[np.isin(place[win], pair)]] = True
        frozen_time = pos < max(0, lo - w)
        check = mv.model.clone()
        check.clear_hints()
        var = check.proto.variables
        for (v, d), lit in mv.x.items():
            if data.leader[v] == v and not free[v]:
                val = int(place[v] == d)
                dom = var[lit.index].domain
                if dom[0] <= val <= dom[-1]:
                    dom[0], dom[-1] = val, val
        ends = start + dur[np.arange(n), place]
        for v in np.flatnonzero(frozen_time & ~free).tolist():
            for iv, val in ((mv.S[v].index, int(start[v])), (mv.E[v].index, int(ends[v]))):
                dom = var[iv].domain
                if len(dom) == 2 and dom[0] <= val <= dom[1]:
                    dom[0], dom[1] = val, val
        dom = var[mv.makespan.index].domain
        if best - 1 < dom[0]:
            break  # the incumbent meets the makespan's lower end: nothing to gain
        dom[len(dom) - 1] = min(int(dom[len(dom) - 1]), best - 1)
        for (v, d), lit in mv.x.items():
            if data.leader[v] == v:
                check.add_hint(check.get_bool_var_from_proto_index(lit.index), int(place[v] == d))
        solver = cp_model.CpSolver()
        params = solver.parameters
        params.num_workers = int(workers)  # 1 in deterministic mode
        params.random_seed = int(seed) + stats["lns_rounds"]
        params.max_deterministic_time = float(round_dtime)
        params.presolve_inclusion_work_limit = 0  # google/or-tools#5293
        code = xc.solve_within(solver, check, budget.left() - reserve)
        stats["lns_rounds"] += 1
        if solver.status_name(code) in ("OPTIMAL", "FEASIBLE"):
            new_start = np.array([solver.value(mv.S[v]) for v in range(n)], dtype=np.int64)
            new_place = np.array([next(d for d in range(k) if (data.leader[v], d) in mv.x
                                       and solver.boolean_value(mv.x[data.leader[v], d])) for v in range(n)],
                                 dtype=np.int64)
            ms = int((new_start + dur[np.arange(n), new_place]).max())
            if ms < best:
                place, start, best = new_place, new_start, ms
                stats["lns_improvements"] += 1
                rounds_since = 0
        rounds_since += 1
        cursor = hi if hi < n else 0
        if cursor == 0 and rounds_since > max(1, n // w):
            w = min(n, 2 * w)  # a full pass without improvement: widen the window
            rounds_since = 0
    stats["lns_end_units"] = best
    return place, start, stats
