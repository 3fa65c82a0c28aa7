"""What :mod:`optpart.fit` needs to fit a pipelined step (``optpart fit FILE --micro-batches M``).

The capacity and device-count searches of :mod:`optpart.fit` solve at every probe with
:func:`optpart.solve` (``micro_batches=M``); their proven bounds are taken on the unrolled
step (:func:`bound_problem`, tied parameters' groups split and no replica: every plan's
unrolled step holds at least that), so they count the micro-batches in flight as the evaluator does.
"""

from __future__ import annotations

import inspect

from ..model.problem import Problem
from .schedules import ORDER_NAMES
from .step import PipelineStep, check_micro_batches

__all__ = ["bound_problem", "solver_parameters"]


def bound_problem(problem: Problem, micro_batches: int | None) -> Problem:
    """The problem whose proven bounds hold for a step of ``micro_batches`` micro-batches.

    Parameters
    ----------
    problem
        One step of the whole batch.
    micro_batches
        ``M`` (``None``: the count the problem records, else 1).

    Returns
    -------
    Problem
        ``problem`` itself for ``M = 1``, else its unrolled step.
    """
    m = check_micro_batches(micro_batches, problem)
    return problem if m == 1 else PipelineStep(problem, m).unrolled()


def solver_parameters(solver: str) -> dict[str, inspect.Parameter]:
    """The keyword parameters a solver name takes through :func:`optpart.solve`.

    Parameters
    ----------
    solver
        A registered solver, or a pipelined order (:data:`~optpart.pipeline.schedules.ORDER_NAMES`).

    Returns
    -------
    dict
        Parameter name -> :class:`inspect.Parameter` (the baseline orders take none besides
        ``memory_model``).
    """
    if solver in ORDER_NAMES:
        return {"memory_model": inspect.Parameter("memory_model", inspect.Parameter.KEYWORD_ONLY)}
    from ..solvers.registry import get_solver

    return dict(inspect.signature(get_solver(solver)).parameters)
