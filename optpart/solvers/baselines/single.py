"""``single``: no model parallelism, the reference every placement is compared with.

The whole graph goes on the fastest device that holds all of it and that every
constraint allows (ties: the lower device index). On one device any order without
idle time is optimal for that device, and the canonical schedule is such an order,
so the makespan is the total work over that device's speed.

When no single device holds the graph the answer is ``unknown`` with the reason:
a placement over several devices may still exist, so that is not proof of
infeasibility. (When no placement at all can fit, :func:`optpart.solve` answers
``infeasible`` before any solver runs.)
"""

from __future__ import annotations

import numpy as np

from ..._docstrings import fill_doc
from ...model.memory import fits as fits_memory
from ...model.problem import Problem
from ...result import Status
from ...units import format_bytes
from ..base import Solution
from ..spec import SolverSpec

__all__ = ["solve", "SPEC"]

#: Static only: a node's static ``memory`` may be given apart from its split (importers do), so
#: peak on one device can exceed the static total; the registry checks peak with the evaluator.
SPEC = SolverSpec(options=(), memory_models=("static",), uses_hint=False, uses_time_limit=False)


@SPEC.checked("single")
@fill_doc
def solve(problem: Problem, *, time_limit: float | None = None, seed: int = 0,
          hint: np.ndarray | None = None, memory_model: str = "static") -> Solution:
    """Everything on the fastest device that holds the whole graph (static sum); ties to the lower index.

    Parameters
    ----------
    %(construction_args)s
    memory_model : str
        The model the answer is labelled with (only ``"static"`` is declared: under peak one
        device may exceed the static total, which the registry checks with the evaluator).

    Returns
    -------
    %(solution)s
    """
    need = float(problem.memory.sum())
    usable = problem.allowed.all(axis=0) if problem.n_nodes else np.ones(problem.n_devices, dtype=bool)
    fits = usable & fits_memory(need, problem.device_memory)
    if not fits.any():
        if not usable.any():
            reason = "constraints put nodes on different devices, so no single device can run the graph"
        else:
            best = float(problem.device_memory[usable].max())
            reason = f"no single device holds the graph: it needs {format_bytes(need)}, the largest has {format_bytes(best)}"
        return Solution(Status.UNKNOWN, message=reason)
    speed = np.where(fits, problem.device_speed, -np.inf)
    device = int(np.argmax(speed))  # first maximum: the lowest index among the fastest
    return Solution(Status.FEASIBLE, placement=np.full(problem.n_nodes, device, dtype=np.int64),
                    memory_model=memory_model)
