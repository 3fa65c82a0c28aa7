"""A plan as the unrolled step's schedule, judged by the one evaluator.

:func:`expand` places every copy ``v@mb<i>`` of a base node on its stage's device and starts
it at its action's start plus its offset inside the action (the action's nodes one after
another in topological order), every once-per-step node at its time in the update phase
(:func:`~optpart.pipeline.simulate.simulate`); :func:`score` hands that to
:func:`optpart.evaluate.evaluate`, so the makespan, precedence (with transfers) and memory
(``peak`` or ``static``) of a pipelined plan are the ordinary rules applied to the unrolled
step (``docs/model.md`` sections 2, 3 and 7), and ``optpart evaluate`` re-checks a result file
the same way.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..evaluate import evaluate
from ..model.problem import Problem
from ..result import Result
from .costs import StageCosts
from .liveness import PART_F, PART_I, PART_W
from .plan import PipelinePlan
from .simulate import Timeline

__all__ = ["expand", "score", "plan_claims"]


def expand(costs: StageCosts, tl: Timeline) -> tuple[Problem, np.ndarray, np.ndarray]:
    """The unrolled step of a timed plan: ``(problem, placement, start)``.

    Parameters
    ----------
    costs : StageCosts
        The plan's stage costs.
    tl : Timeline
        Its simulated times.

    Returns
    -------
    tuple
        The unrolled problem (:meth:`PipelineStep.unrolled` with the plan's replicas), the
        device and the start time (seconds) of each of its nodes.
    """
    step = costs.step
    unrolled = step.unrolled(costs.replicas)
    node, mb, _ = step.task_index()
    dev = costs.device_of()
    n_rep = len(costs.replicas)
    placement = np.concatenate([dev[node], np.array([d for _, d in costs.replicas], dtype=np.int64)])
    start = np.zeros(node.size + n_rep)
    per = ~step.once[node]
    row_of = np.full((step.micro_batches, step.base.n_nodes), -1, dtype=np.int64)
    row_of[mb[per], node[per]] = np.flatnonzero(per)
    for kind, nodes, t0 in _action_instances(costs, tl):
        # one node after the other from the action's start: each starts exactly where the one
        # before it ends (sequential float sums, so no two overlap by a rounding)
        seq = np.cumsum(np.concatenate([[t0], costs.dur[nodes[1]][:-1]]))
        start[row_of[nodes[0], nodes[1]]] = seq
    slot = {int(v): j for j, v in enumerate(costs.once_order.tolist())}
    once_rows = np.flatnonzero(~per)
    rows = np.concatenate([once_rows, node.size + np.arange(n_rep)]).astype(np.int64)
    slots = [slot[int(v)] for v in node[once_rows].tolist()] + [slot[-1 - j] for j in range(n_rep)]
    start[rows] = tl.once_start[slots]
    _sequential_updates(rows, slots, start, placement, unrolled, tl.last_end)
    return unrolled, placement, start


def _action_instances(costs: StageCosts, tl: Timeline):
    """``(kind, (micro-batch array, node array), first node's start)`` of every action that holds
    nodes (the action's start plus the runtime's cost per action)."""
    order = costs.step.base.topo
    lists = {}
    for key, mask in (("F", costs.part == PART_F), ("I", costs.part == PART_I), ("W", costs.part == PART_W),
                      ("B", costs.step.backward)):
        nodes = order[mask[order]]
        st = costs.stage_of[nodes]
        for s in range(costs.n_stages):
            lists[(key, s)] = nodes[st == s]
    m = costs.step.micro_batches
    for s in range(costs.n_stages):
        for i in range(m):
            full = bool(tl.full[s, i])
            for key, t0 in (("F", tl.start_f[s, i]), ("B" if full else "I", tl.start_x[s, i]),
                            (None if full else "W", tl.start_w[s, i])):
                if key is None or lists[(key, s)].size == 0:
                    continue
                nodes = lists[(key, s)]
                yield key, (np.full(nodes.size, i), nodes), float(t0) + costs.overhead


def _sequential_updates(rows, slots, start, placement, unrolled, last_end) -> None:
    """Once nodes one after another per device, each not before its simulated start nor before
    the end of the device's last action or of the once node before it (removes float-rounding
    overlaps; moves nothing by more)."""
    dur = unrolled.duration(placement)
    by_dev: dict[int, list[tuple[int, int]]] = {}
    for r, sl in zip(rows.tolist(), slots):
        by_dev.setdefault(int(placement[r]), []).append((sl, r))
    for d, items in by_dev.items():
        prev = float(last_end[d])
        for _, r in sorted(items):
            start[r] = max(start[r], prev)
            prev = start[r] + dur[r]


def score(costs: StageCosts, plan: PipelinePlan, tl: Timeline, *, solver: str, memory_model: str = "peak",
          lower_bound: float | None = None, message: str = "") -> Result:
    """The plan scored by :func:`optpart.evaluate.evaluate` on the unrolled step.

    Parameters
    ----------
    costs : StageCosts
        The plan's stage costs.
    plan : PipelinePlan
        The plan (written into ``options["pipeline"]``).
    tl : Timeline
        Its simulated times.
    solver : str
        The name the result carries.
    memory_model : {"peak", "static"}
        The model it is judged under.
    lower_bound : float, optional
        A proven bound on the pipelined step.
    message : str
        Carried into the result.

    Returns
    -------
    Result
        Over the unrolled step; status ``invalid`` when the evaluator finds memory or a
        constraint broken.
    """
    unrolled, placement, start = expand(costs, tl)
    step = costs.step
    doc = replace(plan, action_overhead=costs.overhead).to_dict(step.base)
    doc["action_overhead_from"] = step.overhead_source  # printed beside every pipelined time
    options = {"micro_batches": plan.micro_batches, "schedule": plan.schedule, "pipeline": doc}
    return evaluate(unrolled, placement, start, solver=solver, memory_model=memory_model,
                    lower_bound=lower_bound, message=message, options=options)


def plan_claims(costs: StageCosts, plan: PipelinePlan, result: Result, limit: int = 5) -> list[str]:
    """Where a pipelined result's schedule is not its plan: a copy on another device than its
    stage's, or an action of a device starting before the one listed before it has ended.

    Parameters
    ----------
    costs : StageCosts
        The plan's stage costs.
    plan : PipelinePlan
        The plan the result carries.
    result : Result
        The result over the unrolled step (placement and start times read from the file).
    limit : int
        Stop after this many findings.

    Returns
    -------
    list of str
        One line per finding (empty: the schedule runs the plan).
    """
    from ..evaluate import time_tolerance

    step = costs.step
    node, mb, _ = step.task_index()
    n = node.size
    want = costs.device_of()[node]
    got = np.asarray(result.placement)[:n]
    out = []
    unrolled = result.source_problem
    for v in np.flatnonzero(want != got)[:limit].tolist():
        out.append(f"pipeline: node '{unrolled.node_ids[v]}' is on '{unrolled.device_ids[got[v]]}', but its stage "
                   f"{int(costs.stage_of[node[v]])} runs on '{unrolled.device_ids[want[v]]}'")
    if out:
        return out
    per = ~step.once[node]
    row_of = np.full((step.micro_batches, step.base.n_nodes), -1, dtype=np.int64)
    row_of[mb[per], node[per]] = np.flatnonzero(per)
    start, finish = np.asarray(result.start), np.asarray(result.finish)
    kinds = {"F": costs.part == PART_F, "I": costs.part == PART_I, "W": costs.part == PART_W,
             "B": step.backward}
    tol = time_tolerance(float(finish.max()) if finish.size else 0.0)
    for d, acts in enumerate(plan.actions):
        prev_end, prev = -np.inf, None
        for a in acts:
            nodes = np.flatnonzero(kinds[a.kind] & (costs.stage_of == a.stage))
            if not nodes.size:
                continue
            rows = row_of[a.micro_batch, nodes]
            if start[rows].min() < prev_end - tol:
                out.append(f"pipeline: action '{a}' on '{unrolled.device_ids[d]}' starts at "
                           f"{start[rows].min():.9g}, before '{prev}' listed before it ends at {prev_end:.9g}")
                if len(out) >= limit:
                    return out
            prev_end, prev = float(finish[rows].max()), a
    return out
