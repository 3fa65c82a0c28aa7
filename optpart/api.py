"""The public :func:`optpart.solve`: one placement, or one step of ``M`` micro-batches.

It sits above both :func:`optpart.solvers.registry.solve` (one placement by a named solver)
and :func:`optpart.pipeline.solve.solve_pipelined` (``M`` micro-batches through pipeline stages,
docs/model.md section 7, which calls the registry per candidate), so neither imports the other
back.
"""

from __future__ import annotations

from typing import Any

from .model.problem import Problem
from .pipeline.schedules import ORDER_NAMES
from .result import Result
from .solvers.registry import DEFAULT_MEMORY_MODEL, DEFAULT_SOLVER, solve as solve_placement


def solve(problem: Problem, solver: str = DEFAULT_SOLVER, *, memory_model: str = DEFAULT_MEMORY_MODEL,
          time_limit: float | None = None, seed: int = 0, hint: Any = None, micro_batches: int | None = None,
          **options: Any) -> Result:
    """Place ``problem`` with the named solver and return a checked, evaluated :class:`Result`.

    Parameters
    ----------
    problem : Problem
        The problem; it must have devices (see :meth:`Problem.with_devices`).
    solver : str
        A name from :func:`optpart.solver_names` (default ``heuristic``); for a pipelined step
        ``heuristic``, ``cpsat`` or a named schedule of :data:`optpart.pipeline.schedules.ORDER_NAMES`.
    memory_model : {"peak", "static"}
        The memory model the placement must respect (docs/model.md section 3).
    time_limit : float, optional
        Seconds the solver may use; each solver has its own default.
    seed : int
        Seed for any randomness; equal inputs and seed give equal results.
    hint : placement, Result or dict, optional
        A starting placement for solvers that take one.
    micro_batches : int, optional
        ``M``: one step of ``M`` micro-batches through a chain of pipeline stages
        (:func:`optpart.pipeline.solve.solve_pipelined`); ``1`` is one placement
        (:func:`optpart.solvers.registry.solve`, which documents every argument in full).
        Default: the count the problem records (a model imported at the micro-batch size,
        ``meta.pipeline``), else 1.
    **options
        Solver-specific options, validated against the solver's spec.

    Returns
    -------
    Result
        The evaluated result; for ``M > 1`` over the unrolled step.
    """
    if micro_batches is None and "pipeline" in (problem.meta or {}):  # imported at the micro-batch size
        from .pipeline import check_micro_batches

        micro_batches = check_micro_batches(None, problem)
    if micro_batches not in (None, 1) or solver in ORDER_NAMES:
        micro_batches = 1 if micro_batches is None else micro_batches
        from .pipeline.solve import solve_pipelined  # the pipeline imports the evaluator and numpy

        return solve_pipelined(problem, micro_batches, solver, memory_model=memory_model, time_limit=time_limit,
                               seed=seed, hint=hint, **options)
    return solve_placement(problem, solver, memory_model=memory_model, time_limit=time_limit, seed=seed,
                           hint=hint, **options)
