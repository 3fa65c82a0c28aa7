"""The contract between solvers and the rest of optpart.

A solver is a module with one function::

    def solve(problem: Problem, *, time_limit: float | None, seed: int,
              hint: np.ndarray | None, **options) -> Solution

It reads the shared :class:`~optpart.problem.Problem` (always with devices, and
already screened for the obvious infeasibilities of :meth:`Problem.infeasibility`)
and returns a :class:`Solution`: a status, a placement, optionally its own
schedule (start times) and a proven lower bound. :func:`finalize` turns that into
the public :class:`~optpart.result.Result`: the makespan and memory are recomputed
by the evaluator, the schedule is checked against every rule of the model, and a
claim of optimality is kept only when the recomputed makespan meets the proven bound.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import SolverError
from ..evaluate import evaluate, problem_lower_bound, violations
from ..problem import Problem
from ..result import Result, Status

__all__ = ["Solution", "finalize"]


@dataclass
class Solution:
    """A solver's raw answer. ``start`` is the solver's own schedule (None: canonical).

    ``lower_bound`` is a bound the solver proved (0 when it proved none).
    ``memory_model`` names the memory model the placement respects.
    """

    status: Status
    placement: np.ndarray | None = None
    start: np.ndarray | None = None
    lower_bound: float = 0.0
    message: str = ""
    memory_model: str = "static"
    stats: dict[str, Any] = field(default_factory=dict)


def finalize(problem: Problem, solution: Solution, solver: str, wall_seconds: float,
             options: dict[str, Any]) -> Result:
    """Score and check a :class:`Solution`; raise :class:`SolverError` if it breaks the model."""
    status = Status(solution.status)
    if not status.has_solution:
        bound = max(problem_lower_bound(problem), float(solution.lower_bound or 0.0))
        return Result(problem=problem.name, solver=solver, status=status, lower_bound=bound,
                      memory_model=solution.memory_model, wall_seconds=wall_seconds,
                      message=solution.message, options=options, stats=dict(solution.stats))
    if solution.placement is None:
        raise SolverError(f"solver '{solver}' reported '{status.value}' without a placement")
    result = evaluate(problem, solution.placement, solution.start, solver=solver, status=status,
                      lower_bound=solution.lower_bound, memory_model=solution.memory_model,
                      wall_seconds=wall_seconds, message=solution.message, options=options,
                      stats=solution.stats)
    if status is Status.OPTIMAL:
        slack = 1e-6 * max(result.makespan, 1e-12)
        if result.makespan > result.lower_bound + slack:
            result.status = Status.FEASIBLE
            result.message = (result.message + "; " if result.message else "") + (
                f"optimality claimed for the solver's own model, but the exact makespan "
                f"{result.makespan:.9g} is above its proven bound {result.lower_bound:.9g}")
        else:
            result.lower_bound = min(result.lower_bound, result.makespan)
    found = violations(problem, result)
    if found:
        raise SolverError(f"solver '{solver}' returned an invalid schedule for '{problem.name}': "
                          + "; ".join(found))
    return result
