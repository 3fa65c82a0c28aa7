"""Pipeline stages of a module-consistent plan: where each stage begins (torch pipelining).

See :mod:`optpart.export`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ..problem import Problem
from ..result import Result
from .plan import ExportError, ModulePlan, module_plan

__all__ = ["SplitPlan", "split_points"]


@dataclass
class SplitPlan:
    """Pipeline stages of a module-consistent plan: ``stages[i] = (first module, device id)``.

    ``split_points`` are the modules where stages 1.. begin, the keys of
    ``split_spec={name: SplitPoint.BEGINNING}`` for ``torch.distributed.pipelining.pipeline``.
    """

    stages: list[tuple[str, str]]
    plan: ModulePlan

    @property
    def split_points(self) -> list[str]:
        return [name for name, _ in self.stages[1:]]

    def to_dict(self) -> dict[str, Any]:
        return {"format": "optpart-split-points", "version": 1,
                "split_points": self.split_points,
                "stages": [{"stage": i, "begins": name, "device": dev} for i, (name, dev) in enumerate(self.stages)],
                "makespan": self.plan.makespan, "original_makespan": self.plan.original_makespan,
                "fits": self.plan.fits}

def split_points(problem: Problem, result: Result | Mapping[str, str] | np.ndarray, *,
                 plan: ModulePlan | None = None) -> SplitPlan:
    """Pipeline stages of the module-consistent plan, in the order modules first run.

    Raises
    ------
    ExportError
        When a device's modules are not contiguous: names the module that comes back
        to a device after another device's stage.
    """
    plan = plan or module_plan(problem, result)
    stages: list[tuple[str, str]] = []
    used: dict[int, str] = {}
    prev = -1
    last_name = ""
    for name, d in plan.device_map.items():
        if name in plan.tensor_keys:  # a pipeline splits at modules; a parent's own tensors follow it
            continue
        if d != prev:
            if d in used:
                raise ExportError(
                    f"not a pipeline: module '{name}' runs on '{problem.device_ids[d]}' after module '{last_name}' "
                    f"on '{problem.device_ids[prev]}', but '{problem.device_ids[d]}' already holds the stage "
                    f"beginning at '{used[d]}'")
            begin = plan.entry_modules.get(name, name)
            used[d] = begin
            stages.append((begin, problem.device_ids[d]))
            prev = d
        last_name = name
    return SplitPlan(stages=stages, plan=plan)
