"""The MILP backends of ``milp``: HiGHS (through PuLP, with a warm start) and CBC.

:func:`run_highs` and :func:`run_cbc` solve a built PuLP model and report the same
:class:`BackendRun`: the backend's own model status (never PuLP's ``LpStatus``, which calls a
time-limited run "Optimal"), whether a solution exists, whether optimality or
infeasibility is proven, and the best bound.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
import warnings
from dataclasses import dataclass, field

__all__ = ["BackendRun", "run_highs", "run_cbc", "silence_highs_banner"]


@dataclass
class BackendRun:
    """What one backend run established (``bound``: -inf when the backend gives none)."""

    model_status: str
    has_solution: bool
    proven: bool
    infeasible: bool
    bound: float
    stats: dict = field(default_factory=dict)
    node_limit: bool = False  # stopped by ``max_nodes`` (a deterministic work limit), not by time


def run_highs(prob, warm_values: dict | None, time_limit: float | None, threads: int, seed: int,
              log: bool, max_nodes: int | None = None) -> BackendRun:
    """Solve ``prob`` with HiGHS, warm-started from ``warm_values`` (PuLP variable -> value).

    Parameters
    ----------
    prob : pulp.LpProblem
        The built model.
    warm_values : dict, optional
        Values of a feasible solution (``Highs.setSolution``).
    time_limit : float, optional
        Seconds; None: no limit.
    threads : int
        HiGHS threads.
    seed : int
        HiGHS ``random_seed``.
    log : bool
        Print HiGHS's log.
    max_nodes : int, optional
        HiGHS ``mip_max_nodes``: a work limit independent of the machine's speed.

    Returns
    -------
    BackendRun
    """
    if not log:
        silence_highs_banner()
    # HiGHS keeps one thread pool per process, sized by the first run; a later run
    # asking for another thread count fails unless the pool is reset first.
    import highspy
    if hasattr(highspy.Highs, "resetGlobalScheduler"):
        highspy.Highs.resetGlobalScheduler(True)
    extra = {} if max_nodes is None else {"mip_max_nodes": int(max_nodes)}
    solver = _WarmHiGHS(warm_values, msg=bool(log), timeLimit=time_limit, threads=threads, gapRel=0.0,
                        gapAbs=0.0, random_seed=int(seed) % 2**31, mip_feasibility_tolerance=1e-9, **extra)
    prob.solve(solver)
    h = prob.solverModel
    info = h.getInfo()
    model_status = h.modelStatusToString(h.getModelStatus())
    stats = {"model_status": model_status, "nodes": int(info.mip_node_count), "warm_start": solver.warm_used}
    if math.isfinite(info.mip_gap):
        stats["mip_gap"] = float(info.mip_gap)
    # Every variable is bounded, so "infeasible or unbounded" means infeasible.
    proven = model_status == "Optimal"
    return BackendRun(model_status, info.primal_solution_status == 2,  # kSolutionStatusFeasible
                      proven, model_status in ("Infeasible", "Primal infeasible or unbounded"),
                      float(info.mip_dual_bound), stats,
                      node_limit=not proven and max_nodes is not None and stats["nodes"] >= max_nodes)


def run_cbc(prob, warm_values: dict | None, time_limit: float | None, threads: int, seed: int,
            log: bool, max_nodes: int | None = None) -> BackendRun:
    """Solve ``prob`` with PuLP's bundled CBC; the bound is read from its log.

    Parameters
    ----------
    prob, time_limit, threads, log
        As for :func:`run_highs` (CBC's own threads and log).
    warm_values : dict, optional
        Initial values, passed through CBC's ``warmStart``.
    seed : int
        CBC's ``randomSeed`` is ``seed + 1`` (CBC reads 0 as "from the clock").
    max_nodes : int, optional
        CBC ``maxNodes``: a work limit independent of the machine's speed.

    Returns
    -------
    BackendRun
    """
    import pulp
    if warm_values is not None:
        for var, val in warm_values.items():
            var.setInitialValue(val)
    fd, log_path = tempfile.mkstemp(suffix=".log", prefix="optpart_cbc_")
    os.close(fd)
    try:
        with warnings.catch_warnings():  # PuLP 3.3 deprecates the bundled CBC it still ships
            warnings.simplefilter("ignore", DeprecationWarning)
            solver = pulp.PULP_CBC_CMD(msg=bool(log), timeLimit=time_limit, threads=threads, gapRel=0.0,
                                       gapAbs=0.0, logPath=log_path, warmStart=warm_values is not None,
                                       options=[f"randomSeed {int(seed) % 2**31 + 1}"]
                                       + ([] if max_nodes is None else [f"maxNodes {int(max_nodes)}"]))
        prob.solve(solver)
        with open(log_path) as fh:
            text = fh.read()
    finally:
        os.unlink(log_path)
    has_solution = prob.sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible)
    infeasible = (prob.sol_status == pulp.LpSolutionInfeasible
                  or (prob.status == pulp.LpStatusInfeasible and not has_solution))
    model_status = pulp.LpStatus[prob.status]
    proven = prob.sol_status == pulp.LpSolutionOptimal
    nodes = _cbc_nodes(text)
    stats = {"model_status": model_status, "sol_status": prob.sol_status}
    if nodes is not None:
        stats["nodes"] = nodes
    return BackendRun(model_status, has_solution, proven, infeasible, _cbc_bound(text), stats,
                      node_limit=not proven and max_nodes is not None and "node limit" in text.lower())


def _make_warm_highs():
    import pulp

    class WarmHiGHS(pulp.HiGHS):
        """PuLP's HiGHS interface plus a warm start through ``Highs.setSolution``."""

        def __init__(self, warm: dict | None, **kwargs):
            super().__init__(**kwargs)
            self.warm = warm
            self.warm_used = False

        def callSolver(self, lp):  # noqa: N802 - PuLP's name
            if self.warm:
                import highspy
                values = [0.0] * lp.solverModel.getNumCol()
                for var, val in self.warm.items():
                    # A variable that appears in no row or objective (e.g. a fixed colocated
                    # choice) is not a column of the built model: PuLP gives it no index.
                    index = getattr(var, "index", None)
                    if index is not None and 0 <= index < len(values):
                        values[index] = float(val)
                sol = highspy.HighsSolution()
                sol.col_value = values
                sol.value_valid = True
                status = lp.solverModel.setSolution(sol)
                self.warm_used = status == highspy.HighsStatus.kOk
            lp.solverModel.run()

        def findSolutionValues(self, lp):  # noqa: N802 - PuLP's name
            # PuLP maps no status for HiGHS's node limit (kSolutionLimit) and raises KeyError
            # after reading the values; the status is read from HiGHS itself (run_highs).
            try:
                return super().findSolutionValues(lp)
            except KeyError:
                return pulp.LpStatusNotSolved, pulp.LpSolutionIntegerFeasible

    return WarmHiGHS


def _WarmHiGHS(warm, **kwargs):  # noqa: N802 - reads as the class it builds
    return _make_warm_highs()(warm, **kwargs)


_BANNER_DONE = False


def silence_highs_banner() -> None:
    """HiGHS prints a banner on stdout when the process creates its first solver object;
    create that first object with stdout pointed at /dev/null."""
    global _BANNER_DONE
    if _BANNER_DONE:
        return
    _BANNER_DONE = True
    import sys
    import highspy
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError):
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _cbc_nodes(log_text: str) -> int | None:
    """Branch-and-bound nodes CBC reports in its log ("Enumerated nodes"), else None."""
    found = re.findall(r"Enumerated nodes:\s+([0-9]+)", log_text)
    return int(found[-1]) if found else None


def _cbc_bound(log_text: str) -> float:
    """CBC's best bound from its log ("best possible" or an optimal objective), else -inf."""
    found = re.findall(r"best possible\s+(-?[0-9.eE+-]+)", log_text)
    if found:
        return float(found[-1])
    found = re.findall(r"Objective value:\s+(-?[0-9.eE+-]+)", log_text)
    if found and "Optimal solution found" in log_text:
        return float(found[-1])
    return float("-inf")
