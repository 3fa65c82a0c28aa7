"""Pipeline stages of a module-consistent plan: where each stage begins (torch pipelining).

See :mod:`optpart.export`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ..model.problem import Problem
from ..result import Result
from .plan import ExportError, ModulePlan, closest_plan, pipeline_plan

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
        """The plan as the ``optpart-split-points`` JSON document.

        Returns
        -------
        dict
            Split points, stages with their devices, shared parameters, makespans and fit.
        """
        return {"format": "optpart-split-points", "version": 1,
                "split_points": self.split_points,
                "stages": [{"stage": i, "begins": name, "device": dev} for i, (name, dev) in enumerate(self.stages)],
                "shared_parameters": [{"parameter": owner.removeprefix("update."), "modules": mods}
                                      for owner, mods in self.plan.shared],
                "makespan": self.plan.makespan, "original_makespan": self.plan.original_makespan,
                "fits": self.plan.fits}

    def notes(self) -> list[str]:
        """One line per parameter the stages share: what torch pipelining does and what the user must do.

        Returns
        -------
        list of str
            Empty when no parameter is shared.
        """
        return [f"stages share '{owner.removeprefix('update.')}' (modules {', '.join(mods)}): "
                "torch.distributed.pipelining replicates it on each stage; sum its gradients across those stages "
                "before the optimizer step (or untie it)" for owner, mods in self.plan.shared]

def split_points(problem: Problem, result: Result | Mapping[str, str] | np.ndarray, *,
                 depth: int | str | None = None) -> SplitPlan:
    """Pipeline stages for ``result``, in the order modules first run, scored with the devices working at once.

    The closest module-level plan (every module on the device holding most of its time and
    memory) when it is a pipeline that fits; otherwise contiguous stages built from the order
    modules run (:func:`optpart.export.plan.pipeline_plan`) when they fit, or when the closest
    plan is no pipeline at all (then ``fits`` says whether they fit, and ``plan.method`` why they
    were built). No stage boundary falls inside a module the import kept whole (``--no-split``).

    Parameters
    ----------
    problem : Problem
        The problem; its nodes need ``module`` metadata.
    result : Result, {node id: device id} or array of device indices
        The operator placement.
    depth : int, optional
        Keep modules whole down to this many path components (``"auto"`` is taken as none).

    Returns
    -------
    SplitPlan
        The stages; ``plan.shared`` names parameters that stages share (replicated by
        ``torch.distributed.pipelining``: sum their gradients before the optimizer step).
    """
    depth = depth if isinstance(depth, int) else None
    plan = closest_plan(problem, result, depth=depth, rule="concurrent")
    try:
        stages = _stages(problem, plan)
        if plan.fits:
            return SplitPlan(stages=stages, plan=plan)
        why = "the closest module plan does not fit"
    except ExportError as exc:
        stages, why = None, f"the placement is not a pipeline ({exc})"
    alt = pipeline_plan(problem, result, depth=depth)
    if alt.fits or stages is None:
        alt.method = f"pipeline: contiguous stages in module order, since {why}"
        return SplitPlan(stages=_stages(problem, alt), plan=alt)
    return SplitPlan(stages=stages, plan=plan)


def _stages(problem: Problem, plan: ModulePlan) -> list[tuple[str, str]]:
    """``(first module, device id)`` per stage, or ExportError naming the module that comes back to a device."""
    stages: list[tuple[str, str]] = []
    used: dict[int, str] = {}
    prev = -1
    last_name = ""
    for name, d in plan.device_map.items():
        if name in plan.tensor_keys or name not in plan.entry_modules:
            continue  # a pipeline splits at modules that run; a parent's own tensors follow it
        if d != prev:
            if d in used:
                raise ExportError(
                    f"module '{name}' runs on '{problem.device_ids[d]}' after module '{last_name}' "
                    f"on '{problem.device_ids[prev]}', but '{problem.device_ids[d]}' already holds the stage "
                    f"beginning at '{used[d]}'")
            begin = plan.entry_modules.get(name, name)
            used[d] = begin
            stages.append((begin, problem.device_ids[d]))
            prev = d
        last_name = name
    return stages
