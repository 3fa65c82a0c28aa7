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
    ``invalid``: a placement scored by :func:`optpart.evaluate.evaluate` that breaks memory
    (under the result's memory model) or a constraint; the ``message`` names what it breaks,
    the placement and schedule stay attached for inspection. No solver answers ``invalid``.
    """

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"
    INFEASIBLE = "infeasible"
    UNKNOWN = "unknown"
    INVALID = "invalid"

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
    #: The :class:`~optpart.model.problem.Problem` the result was scored on (set by the evaluator, so
    #: every result with a placement knows it); None for a bare Result built by hand.
    source_problem: Any = field(default=None, repr=False, compare=False)

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

    def placement_ids(self, problem=None) -> dict[str, str]:
        """The placement as ``{node id: device id}``.

        Parameters
        ----------
        problem : Problem, optional
            The problem the result is for (default: :attr:`source_problem`).

        Returns
        -------
        dict
            Empty without a placement.
        """
        if self.placement is None:
            return {}
        problem = self._problem(problem)
        dev = problem.device_ids
        return {nid: dev[d] for nid, d in zip(problem.node_ids, self.placement.tolist())}

    def _problem(self, problem=None):
        problem = problem if problem is not None else self.source_problem
        if problem is None:
            raise ValueError(f"this Result of '{self.solver}' does not know its problem: pass problem=")
        if problem.n_nodes != (self.placement.size if self.placement is not None else problem.n_nodes):
            raise ValueError(f"problem '{problem.name}' has {problem.n_nodes} nodes, the result's placement "
                             f"{self.placement.size}")
        return problem

    def to_dict(self, problem=None) -> dict[str, Any]:
        """The result as the optpart-result document (docs/formats.md): placement and schedule by node id.

        Parameters
        ----------
        problem : Problem, optional
            The problem the result is for (default: :attr:`source_problem`, which every result
            from :func:`optpart.solve` or :func:`optpart.evaluate` with a placement carries). A
            result without a placement and without a known problem gives the document without
            its ``devices`` and ``links``.

        Returns
        -------
        dict
            JSON-ready: ``{"format": "optpart-result", "status": ..., "placement": {node: device}, ...}``.
        """
        import json

        if problem is None and self.source_problem is None and self.placement is None:
            doc: dict[str, Any] = {"format": "optpart-result", "version": 1, "problem": self.problem,
                                   "solver": self.solver, "status": self.status.value, "makespan": None,
                                   "lower_bound": self.lower_bound, "gap": None, "memory_model": self.memory_model}
            if self.message:
                doc["message"] = self.message
            return doc
        return json.loads(self.to_json(problem))

    def to_json(self, problem=None, path=None) -> str:
        """The result as optpart-result JSON text (what ``optpart solve -o`` writes).

        Parameters
        ----------
        problem : Problem, optional
            As in :meth:`to_dict`.
        path : str or Path, optional
            Also write the text to this file.

        Returns
        -------
        str
            The JSON text.
        """
        from .documents import result_to_json

        if problem is None and self.source_problem is None and self.placement is None:
            import json

            text = json.dumps(self.to_dict(), indent=1) + "\n"
        else:
            text = result_to_json(self, self._problem(problem))
        if path is not None:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
        return text

    def __repr__(self) -> str:
        return (f"Result(problem={self.problem!r}, solver={self.solver!r}, status={self.status.value}, "
                f"makespan={self.makespan:.6g}, lower_bound={self.lower_bound:.6g}, gap={self.gap:.3%})")
