"""Command-line side of pipelined steps: the ``--micro-batches`` flag, the problem a pipelined
result file is read against (``evaluate``, ``show``, ``export``, ``plot``) and the lines
``optpart solve`` prints for a pipelined plan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


from ..errors import ProblemError
from ..model.problem import Problem
from ..pipeline.plan import PipelinePlan
from ..pipeline.step import PipelineStep, check_micro_batches
from ..result import Result
from ..text import safe
from ..units import format_bytes, format_time

__all__ = ["add_micro_batch_argument", "pipelined_for_result", "result_pipeline", "pipeline_lines", "plan_false_claims"]


def add_micro_batch_argument(parser, default_help: str = "default 1: one step of the whole batch") -> None:
    """Add ``--micro-batches M`` to a command (validated later by :func:`check_micro_batches`).

    Parameters
    ----------
    parser
        An argparse (sub)parser.
    default_help
        What happens without the flag.
    """
    parser.add_argument("--micro-batches", "-M", metavar="M", default=None,
                        help="run one step as M micro-batches through a pipeline of stages, the plan found "
                             f"(docs/model.md section 7; {default_help})")


def result_pipeline(doc: dict | str | Path | None) -> tuple[Any, Any]:
    """``(options.micro_batches, options.pipeline)`` of a result (``(1, None)`` when absent).

    A file is parsed only when its text mentions ``micro_batches``, so an ordinary result of
    10^6 nodes is not read twice; an unreadable file gives ``(1, None)`` (its own reader
    reports what is wrong with it).

    Parameters
    ----------
    doc : dict, str or Path
        The result document, or its file.

    Returns
    -------
    tuple
        The recorded count as the file gives it and the plan document (or None).
    """
    if isinstance(doc, (str, Path)):
        from ..formats import read_bytes

        try:
            raw = read_bytes(Path(doc))
        except Exception:  # noqa: BLE001 -- the result's reader names the problem
            return 1, None
        if b'"micro_batches"' not in raw:
            return 1, None
        try:
            doc = json.loads(raw)
        except ValueError:
            return 1, None
    opts = doc.get("options") if isinstance(doc, dict) else None
    if not isinstance(opts, dict):
        return 1, None
    return opts.get("micro_batches", 1), opts.get("pipeline")


def pipelined_for_result(problem: Problem, micro_batches, doc: dict | str | Path | None = None) -> Problem:
    """The problem a result is judged on: the unrolled step of its plan for ``M > 1``, else ``problem``.

    Parameters
    ----------
    problem : Problem
        One step of the whole batch.
    micro_batches
        The command line's ``--micro-batches`` (``None``: not given, the result's own).
    doc
        The result file's JSON, or its path.

    Returns
    -------
    Problem
        ``problem`` itself for an ordinary result; for a pipelined one the unrolled step with
        the replicas of tied parameters its plan has (:meth:`PipelineStep.unrolled`).
    """
    recorded, plan_doc = result_pipeline(doc)
    m = check_micro_batches(recorded if micro_batches is None else micro_batches, problem)
    if plan_doc is not None:
        plan = PipelinePlan.from_dict(plan_doc, problem)
        if plan.micro_batches != m:
            raise ProblemError(f"--micro-batches {m}: the result's plan runs {plan.micro_batches} micro-batches")
        from ..pipeline.costs import replicas_of

        step = PipelineStep(problem, m)
        return step.unrolled(replicas_of(step, plan.stage_of, plan.stage_device))
    return problem if m == 1 else PipelineStep(problem, m).unrolled()


def _first_modules(problem: Problem, plan: PipelinePlan) -> list[str]:
    """The first module (else node) of every stage's forward pass, in chain order."""
    from ..pipeline.stages import forward_order

    order = forward_order(PipelineStep(problem, plan.micro_batches))
    out = []
    for s in range(plan.n_stages):
        nodes = order[plan.stage_of[order] == s]
        name = problem.node_ids[int(nodes[0])] if nodes.size else "-"
        for v in nodes.tolist():
            mod = (problem.node_meta[v].get("module") if problem.node_meta else None)
            if isinstance(mod, str) and mod:
                name = mod
                break
        out.append(name)
    return out


def _hardware(problem: Problem) -> str:
    cm = (problem.meta or {}).get("cost_model")
    if not isinstance(cm, dict) or "peak_flops" not in cm:
        return "costs as given in the file"
    parts = [f"{cm['peak_flops'] / 1e12:g} TFLOP/s"]
    if "efficiency" in cm:
        parts[0] += f" x {cm['efficiency']:.0%}"
    if "memory_bandwidth" in cm:
        parts.append(f"{cm['memory_bandwidth'] / 1e9:g} GB/s memory")
    return "the file's cost model: " + ", ".join(parts) + " per device"


def pipeline_lines(problem: Problem, result: Result) -> list[str]:
    """What ``optpart solve`` adds for a pipelined plan: schedule, stages, ``M``, step time, bound, peaks.

    Parameters
    ----------
    problem : Problem
        The base problem (one step of the whole batch).
    result : Result
        A pipelined result (``options["pipeline"]``).

    Returns
    -------
    list of str
        Empty when the result carries no plan.
    """
    doc = (result.options or {}).get("pipeline")
    if not isinstance(doc, dict) or not result.ok:
        return []
    plan = PipelinePlan.from_dict(doc, problem)
    devices = problem.device_ids
    firsts = _first_modules(problem, plan)
    stages = ", ".join(f"{s}: {safe(firsts[s], 40)} ({safe(devices[d], 20)})" for s, d in enumerate(plan.stage_device))
    used = result.memory_peak if result.memory_model == "peak" else result.memory_static
    peaks = ", ".join(f"{safe(devices[d], 20)} {format_bytes(used[d])}/{format_bytes(problem.device_memory[d])}"
                      for d in plan.ranks())
    stats = result.stats or {}
    covers = stats.get("bound", "")
    on = stats.get("stage_bound")
    stage_line = ([f"          on these stages, any order: {format_time(on)}, gap {stats.get('stage_gap', 0.0):.2%}"]
                  if isinstance(on, (int, float)) else [])
    head = [f"pipeline  {plan.schedule}, {plan.micro_batches} micro-batches, {plan.n_stages} stages on "
            f"{len(plan.ranks())} devices",
            f"stages    {stages}",
            f"step      {format_time(result.makespan)} predicted ({_hardware(problem)}; runtime "
            f"{format_time(plan.action_overhead)} per action: {doc.get('action_overhead_from', 'given')})",
            f"bound     {format_time(result.lower_bound)}, gap {result.gap:.2%}" + (f" ({covers})" if covers else "")]
    return head + stage_line + [f"peak      {peaks} ({result.memory_model})"]


def plan_false_claims(base: Problem, judged: Problem, doc: dict, result: Result) -> list[str]:
    """The ways a pipelined result file's schedule is not the plan it carries (``evaluate``).

    Parameters
    ----------
    base : Problem
        The problem file's step (devices as judged).
    judged : Problem
        The unrolled step the result was judged on.
    doc : dict
        The result document.
    result : Result
        The recomputed result.

    Returns
    -------
    list of str
        Empty for an ordinary result or a schedule that runs its plan.
    """
    _, plan_doc = result_pipeline(doc)
    if plan_doc is None:
        return []
    from ..pipeline.costs import stage_costs
    from ..pipeline.expand import plan_claims

    plan = PipelinePlan.from_dict(plan_doc, base)
    costs = stage_costs(PipelineStep(base, plan.micro_batches), plan.stage_of, plan.stage_device)
    result.source_problem = judged
    return plan_claims(costs, plan, result)
