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

__all__ = ["SplitPlan", "split_points", "TorchPipeline", "torch_pipeline"]


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


@dataclass
class TorchPipeline:
    """A pipelined plan as ``torch.distributed.pipelining`` runs it (``optpart export -f pipeline``).

    Attributes
    ----------
    doc : dict
        The ``optpart-pipeline`` JSON document (:func:`torch_pipeline`).
    rows : list of list of str
        The action lists, one row per rank: torch's schedule CSV (``_dump_csv`` / ``_load_csv``).
    custom : bool
        Whether the order is the plan's own (run by ``_PipelineScheduleRuntime`` from the CSV)
        rather than a built-in schedule's.
    notes : list of str
        One line per parameter several stages hold (the runner sums its gradients).
    """

    doc: dict[str, Any]
    rows: list[list[str]]
    custom: bool
    notes: list[str]

    def summary(self) -> str:
        """One line: stages, schedule, the predicted step time and the way the plan runs.

        Returns
        -------
        str
        """
        from ..units import format_bandwidth, format_bytes, format_time

        d, p = self.doc, self.doc["predicted"]
        a = p["assumes"]
        peaks = ", ".join(f"stage {s} {format_bytes(b)}" for s, b in p["peak_memory"].items())
        return (f"pipeline: {len(d['stages'])} stages on {', '.join(d['devices'])}, {d['schedule']} "
                f"({d['schedule_class']}), {d['micro_batches']} micro-batches: predicted step "
                f"{format_time(p['step_time'])} ({a['operator_times']}; links {format_time(a['latency'])} + "
                f"{format_bandwidth(a['bandwidth'])}; runtime {format_time(a['action_overhead'])} per action: "
                f"{a['action_overhead_from']}); predicted peak {peaks}")


def _times_assumed(problem: Problem) -> str:
    cm = (problem.meta or {}).get("cost_model") or {}
    prof = cm.get("profile") if isinstance(cm, Mapping) else None
    if isinstance(prof, Mapping):
        return (f"operator times measured on {prof.get('device')}, {prof.get('threads')} thread(s), "
                f"{prof.get('statistic', 'median')} of {prof.get('repeats')}")
    return "operator times estimated by the cost model"


#: torch's class per schedule name (``get_schedule_class``).
_CLASS = {"GPipe": "ScheduleGPipe", "1F1B": "Schedule1F1B"}


def torch_pipeline(problem: Problem, result: Result) -> TorchPipeline:
    """The stages, ranks, action lists and predicted step time of a pipelined result.

    Parameters
    ----------
    problem : Problem
        The one-step problem the result's plan is for (its nodes' ``module`` metadata names each
        stage's first and last module; ``meta`` its batch).
    result : Result
        A pipelined result carrying ``options["pipeline"]``, scored on its unrolled step (its
        makespan is the predicted step time).

    Returns
    -------
    TorchPipeline
        The document, the CSV rows and notes.

    Raises
    ------
    OptpartError
        Not a pipelined result, or a plan naming nodes the problem does not have (one line).
    """
    from ..pipeline.plan import PipelinePlan
    from ..pipeline.schedules import torch_schedule
    from ..pipeline.step import PipelineStep

    record = dict((getattr(result, "options", None) or {}).get("pipeline") or {})
    plan = PipelinePlan.from_result(result, problem)
    schedule = torch_schedule(plan)
    custom = schedule == "custom"
    ranks = plan.ranks()
    devices = [problem.device_ids[d] for d in ranks]
    stage_ranks = plan.stage_ranks()
    step = PipelineStep(problem, plan.micro_batches, plan.action_overhead)
    fwd_mask = step.forward
    meta = problem.node_meta
    order = problem.topo
    stages = []
    for s, d in enumerate(plan.stage_device):
        nodes = order[(plan.stage_of[order] == s) & fwd_mask[order]]
        fwd = [problem.node_ids[v] for v in nodes.tolist()]
        mods = [m for m in ((meta[v].get("module", "") if meta else "") for v in nodes.tolist()) if m]
        stages.append({"stage": s, "device": problem.device_ids[d], "rank": stage_ranks[s],
                       "first_module": mods[0] if mods else "", "last_module": mods[-1] if mods else "",
                       "forward_nodes": fwd})
    judged = result.source_problem
    peaks = result.memory_peak if result.memory_peak is not None else np.zeros(judged.n_devices)
    dev_index = judged.device_index
    links = judged.links
    batch = (problem.meta or {}).get("pipeline") or {}
    doc = {"format": "optpart-pipeline", "version": 1, "problem": problem.name, "micro_batches": plan.micro_batches,
           "batch_size": batch.get("batch_size", (problem.meta or {}).get("batch_size")),
           "schedule": schedule,
           "schedule_class": "_PipelineScheduleRuntime" if custom else _CLASS.get(schedule, f"Schedule{schedule}"),
           "schedule_csv": None, "devices": devices,
           "stage_to_rank": {str(s): r for s, r in stage_ranks.items()}, "actions": plan.csv_rows(), "stages": stages,
           "action_overhead": plan.action_overhead,
           "predicted": {"step_time": float(result.makespan),
                         "peak_memory": {str(s): float(peaks[dev_index[problem.device_ids[d]]])
                                         for s, d in enumerate(plan.stage_device)},
                         "assumes": {"operator_times": _times_assumed(problem), "latency": float(links.latency),
                                     "bandwidth": float(links.bandwidth),
                                     "action_overhead": plan.action_overhead,
                                     "action_overhead_from": str(record.get("action_overhead_from", "given")),
                                     "memory_model": result.memory_model}}}
    notes = []
    for tie in step.tied():
        held = sorted({int(plan.stage_of[part[0]]) for part in tie.parts if part.size})
        if len(held) > 1:
            name = (meta[tie.owner].get("param") if meta else None) or problem.node_ids[tie.owner].removeprefix("update.")
            notes.append(f"stages {', '.join(map(str, held))} hold '{name}': each keeps a replica; optpart run sums "
                         "its gradients across them before the optimizer step")
    return TorchPipeline(doc=doc, rows=plan.csv_rows(), custom=custom, notes=notes)
