"""What every solver answers (``docs/model.md`` section 4): :class:`Status` and :class:`Result`."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Status", "Result"]


class Status(str, enum.Enum):
    """Outcome of a solve.

    ``optimal``: proven, the makespan equals the best bound. ``feasible``: valid and
    within memory, optimality not proven. ``infeasible``: proven that no placement
    fits (the result's ``message`` says why). ``unknown``: nothing found within the limits.
    """

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"
    INFEASIBLE = "infeasible"
    UNKNOWN = "unknown"

    def __str__(self) -> str:  # prints as the plain word
        return self.value

    @property
    def has_solution(self) -> bool:
        return self in (Status.OPTIMAL, Status.FEASIBLE)


@dataclass
class Result:
    """A solver's answer for one problem, scored by the evaluator.

    ``placement`` holds a device index per node, ``start``/``finish`` the schedule
    (seconds); all three are None unless the status has a solution. ``memory_static``
    and ``memory_peak`` hold bytes per device. ``memory_model`` names the memory
    model the placement respects (``static`` or ``peak``; the one the caller asked for); the
    checker verifies that one.
    """

    problem: str
    solver: str
    status: Status
    makespan: float = float("nan")
    lower_bound: float = 0.0
    placement: np.ndarray | None = None
    start: np.ndarray | None = None
    finish: np.ndarray | None = None
    memory_static: np.ndarray | None = None
    memory_peak: np.ndarray | None = None
    memory_model: str = "peak"
    wall_seconds: float = 0.0
    message: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def gap(self) -> float:
        """``(makespan - lower_bound) / makespan``; 0 for a zero makespan, nan without a solution."""
        if not self.status.has_solution:
            return float("nan")
        if self.makespan <= 0:
            return 0.0
        return max(0.0, (self.makespan - self.lower_bound) / self.makespan)

    @property
    def ok(self) -> bool:
        """True when the result holds a valid placement (status optimal or feasible)."""
        return self.status.has_solution

    def placement_ids(self, problem) -> dict[str, str]:
        """The placement as ``{node id: device id}``."""
        if self.placement is None:
            return {}
        dev = problem.device_ids
        return {nid: dev[d] for nid, d in zip(problem.node_ids, self.placement.tolist())}

    def __repr__(self) -> str:
        return (f"Result(problem={self.problem!r}, solver={self.solver!r}, status={self.status.value}, "
                f"makespan={self.makespan:.6g}, lower_bound={self.lower_bound:.6g}, gap={self.gap:.3%})")
