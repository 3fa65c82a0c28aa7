"""What :mod:`optpart.fit` needs to fit a pipelined step (``optpart fit FILE --micro-batches M``).

The capacity and device-count searches of :mod:`optpart.fit` solve at every probe with
:func:`optpart.solve` (``micro_batches=M``); their proven bounds are taken on the unrolled
step (:func:`bound_problem`), the problem a pipelined result is judged on, so they count the
micro-batches in flight exactly as the evaluator does.
"""

from __future__ import annotations

import inspect

from ..model.problem import Problem
from .step import PipelineStep, check_micro_batches

__all__ = ["bound_problem", "solver_parameters", "ORDERS"]

#: The pipelined baseline orders: solvers of :func:`optpart.solve` outside the registry.
ORDERS = ("gpipe", "1f1b")


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
        A registered solver, or ``gpipe`` / ``1f1b``.

    Returns
    -------
    dict
        Parameter name -> :class:`inspect.Parameter` (the baseline orders take none besides
        ``memory_model``).
    """
    if solver in ORDERS:
        return {"memory_model": inspect.Parameter("memory_model", inspect.Parameter.KEYWORD_ONLY)}
    from ..solvers.registry import get_solver

    return dict(inspect.signature(get_solver(solver)).parameters)
