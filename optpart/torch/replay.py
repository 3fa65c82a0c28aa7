"""A pipelined plan scored as torch's pipeline runtime runs it: the action lists replayed on the model.

:func:`replay_actions` turns stages and per-rank action lists into start times of the
unrolled step (:meth:`optpart.pipeline.PipelineStep.unrolled`, node ids ``v@mb<i>``) and
scores them with :func:`optpart.evaluate.evaluate`, the one evaluator, so the makespan and
the per-device peak memory are the model's (docs/model.md sections 2, 3 and 7). It follows
the runtime:

* each rank runs its actions one after another, and the operators of one action (``F``: the
  stage's forward operators of that micro-batch; ``B``: its backward operators; ``I``: the
  backward operators that lead to the gradients sent to the previous stage; ``W``: the rest)
  back to back in topological order; torch's first stage computes nothing in ``I`` and
  everything in ``W``;
* a stage sends what the next stage receives only when its action ends, one tensor after the
  other: ``F`` of stage ``s`` waits for ``F`` of stage ``s - 1`` plus, across devices, the sum of
  ``latency + bytes / bandwidth`` over the values crossing that boundary (relayed values
  included); ``B``/``I`` wait likewise for the next stage's gradients;
* the runtime's own cost per action (Python dispatch, send/receive set-up: ``overhead``
  seconds) is an idle gap before every action: this is where the cost model holds it;
* the optimizer nodes run after a rank's last action, as an optimizer step after
  ``schedule.step()``.

:func:`pipelined_result` builds a plan to replay (stages cut from the forward order by
:func:`optpart.pipeline.stage_placement`, action lists of a named schedule) and returns a
pipelined :class:`~optpart.result.Result` carrying ``options["pipeline"]``.
"""

from __future__ import annotations

import re
from typing import Mapping, Sequence

import numpy as np

from ..errors import OptpartError
from ..evaluate import evaluate
from ..model.constraints import Constraints
from ..model.problem import Problem
from ..pipeline import PipelineStep, stage_placement
from ..result import Result
from .pipeplan import PipelinePlan, named_actions

__all__ = ["replay_actions", "pipelined_result"]

_ACTION = re.compile(r"^(\d+)([FBIW])(\d+)$")


def _input_grad_nodes(p: Problem, step: PipelineStep, stage: np.ndarray, s: int) -> np.ndarray:
    """Backward nodes of stage ``s`` from which a gradient sent to an earlier stage is computed."""
    mine = step.backward & (stage == s)
    if s == 0:
        return np.zeros(p.n_nodes, dtype=bool)
    es, ed = p.edge_src, p.edge_dst
    hit = np.zeros(p.n_nodes, dtype=bool)
    hit[es[mine[es] & step.backward[ed] & (stage[ed] < s)]] = True
    for v in p.topo[::-1].tolist():  # ancestors within the stage's backward nodes
        if hit[v]:
            for e in p.in_edges[p.in_ptr[v]:p.in_ptr[v + 1]].tolist():
                u = int(es[e])
                if mine[u]:
                    hit[u] = True
    return hit


def _boundary(p: Problem, step: PipelineStep, stage: np.ndarray, lo: np.ndarray, hi: np.ndarray,
              latency: float, bandwidth: float) -> float:
    """Seconds to send, one after the other, every distinct value of nodes ``lo`` that nodes ``hi`` read."""
    es, ed = p.edge_src, p.edge_dst
    sel = lo[es] & hi[ed]
    if not sel.any():
        return 0.0
    size: dict[int, float] = {}
    for u, b in zip(es[sel].tolist(), step.edge_bytes[sel].tolist()):
        size[u] = max(size.get(u, 0.0), b)
    return float(sum(latency + b / bandwidth for b in size.values()))


def replay_actions(problem: Problem, plan: PipelinePlan, *, overhead: float = 0.0, memory_model: str = "peak",
                   solver: str | None = None) -> Result:
    """Score a pipelined plan by replaying its action lists (module docstring).

    Parameters
    ----------
    problem : Problem
        The one-step problem with its devices (colocation groups are not kept: a parameter
        read by several stages is replicated on them).
    plan : PipelinePlan
        Stages, devices and action lists.
    overhead : float
        The runtime's seconds per action, an idle gap before each.
    memory_model : {'peak', 'static'}
        As :func:`optpart.evaluate.evaluate` takes it.
    solver : str, optional
        The result's solver name (default ``pipeline:<schedule>``).

    Returns
    -------
    Result
        Over the unrolled step; ``options["pipeline"]`` is the plan's record (with
        ``action_overhead``), ``options["micro_batches"]`` and ``options["schedule"]`` are set.

    Raises
    ------
    OptpartError
        A node without a stage, or action lists that deadlock (one line naming a waiting action).
    """
    p = problem.with_devices(problem.devices, links=problem.links, constraints=Constraints())
    m = plan.micro_batches
    step = PipelineStep(p, m)
    u = step.unrolled()
    stage_of = plan.stage_of()
    missing = [n for n in p.node_ids if n not in stage_of]
    if missing:
        raise OptpartError(f"the plan gives node '{missing[0]}' no stage ({len(missing)} nodes without one)")
    stage = np.array([stage_of[n] for n in p.node_ids], dtype=np.int64)
    dev_of_stage = np.array([p.device_index[d] for d in plan.stage_devices], dtype=np.int64)
    base_place = dev_of_stage[stage]
    _, _, task_of = step.task_index()
    place = step.tile(base_place)
    dur = u.duration(place)
    trans = u.transfer_times(place)
    topo_pos = p.topo_rank
    s_count = plan.n_stages
    igrad = [_input_grad_nodes(p, step, stage, s) for s in range(s_count)]
    members: dict[tuple[int, str], np.ndarray] = {}
    for s in range(s_count):
        here = stage == s
        sets = {"F": step.forward & here, "B": step.backward & here, "I": igrad[s],
                "W": step.backward & here & ~igrad[s]}
        for kind, mask in sets.items():
            nodes = np.flatnonzero(mask)
            members[(s, kind)] = nodes[np.argsort(topo_pos[nodes], kind="stable")]
    fwd_wait, bwd_wait = np.zeros(s_count), np.zeros(s_count)
    for s in range(1, s_count):
        a, b = dev_of_stage[s - 1], dev_of_stage[s]
        if a != b:
            lat, bw = float(p.latency[a, b]), float(p.bandwidth[a, b])
            fwd_wait[s] = _boundary(p, step, stage, step.forward & (stage < s), step.forward & (stage >= s), lat, bw)
            bwd_wait[s - 1] = _boundary(p, step, stage, step.backward & (stage >= s), step.backward & (stage < s),
                                        lat, bw)
    start = np.full(u.n_nodes, np.nan)
    finish = np.full(u.n_nodes, np.nan)
    done: dict[tuple[int, str, int], float] = {}
    ranks = plan.rank_actions()
    parsed = {r: [(int(h.group(1)), h.group(2), int(h.group(3))) for h in map(_ACTION.match, acts)]
              for r, acts in ranks.items()}
    free = {r: 0.0 for r in ranks}
    pos = {r: 0 for r in ranks}

    def waits(s: int, kind: str, i: int) -> tuple[tuple[int, str, int] | None, float]:
        if kind == "F" and s > 0 and dev_of_stage[s - 1] != dev_of_stage[s]:
            return (s - 1, "F", i), fwd_wait[s]
        if kind in "BI" and s + 1 < s_count and dev_of_stage[s + 1] != dev_of_stage[s]:
            nxt = (s + 1, "B", i) if (s + 1, "B", i) in done else (s + 1, "I", i)
            return nxt, bwd_wait[s]
        return None, 0.0

    def ready(tasks: np.ndarray) -> float | None:
        t = 0.0
        for v in tasks.tolist():
            for e in u.in_edges[u.in_ptr[v]:u.in_ptr[v + 1]].tolist():
                src = int(u.edge_src[e])
                if src in own:
                    continue
                if np.isnan(finish[src]):
                    return None
                t = max(t, finish[src] + trans[e])
        return t

    while any(pos[r] < len(parsed[r]) for r in ranks):
        moved = False
        for r in ranks:
            if pos[r] >= len(parsed[r]):
                continue
            s, kind, i = parsed[r][pos[r]]
            tasks = task_of[i, members[(s, kind)]]
            own = set(tasks.tolist())
            dep, delay = waits(s, kind, i)
            if dep is not None and dep not in done:
                continue
            t0 = ready(tasks)
            if t0 is None:
                continue
            cursor = max(free[r] + overhead, (done[dep] + delay) if dep is not None else 0.0)
            for v in tasks.tolist():
                lo = cursor
                for e in u.in_edges[u.in_ptr[v]:u.in_ptr[v + 1]].tolist():
                    lo = max(lo, finish[int(u.edge_src[e])] + trans[e])
                start[v], finish[v] = lo, lo + dur[v]
                cursor = finish[v]
            free[r] = cursor
            done[(s, kind, i)] = cursor
            pos[r] += 1
            moved = True
        if not moved:
            stuck = [f"{ranks[r][pos[r]]} on '{plan.devices[r]}'" for r in ranks if pos[r] < len(parsed[r])]
            raise OptpartError(f"the action lists deadlock: {', '.join(stuck)} wait for each other")
    once = np.flatnonzero(step.once)
    for v in once[np.argsort(topo_pos[once], kind="stable")].tolist():
        t = int(task_of[m - 1, v])
        r = plan.devices.index(p.device_ids[base_place[v]])
        lo = free[r]
        for e in u.in_edges[u.in_ptr[t]:u.in_ptr[t + 1]].tolist():
            lo = max(lo, finish[int(u.edge_src[e])] + trans[e])
        start[t], finish[t] = lo, lo + dur[t]
        free[r] = finish[t]
    record = dict(plan.to_options(), action_overhead=float(overhead))
    return evaluate(u, place, start, solver=solver or f"pipeline:{plan.schedule}", memory_model=memory_model,
                    options={"micro_batches": m, "schedule": plan.schedule, "pipeline": record})


def pipelined_result(problem: Problem, micro_batches: int, schedule: str = "1F1B", *,
                     n_stages: int | None = None, stage: Mapping[str, int] | None = None,
                     actions: Mapping[str, Sequence[str]] | None = None, overhead: float = 0.0,
                     memory_model: str = "peak") -> Result:
    """A pipelined plan of ``problem``, scored by :func:`replay_actions`.

    Parameters
    ----------
    problem : Problem
        The one-step problem with its devices; stage ``s`` runs on device ``s``.
    micro_batches : int
        ``M``.
    schedule : str
        ``GPipe`` or ``1F1B`` (their action lists come from
        :func:`~optpart.torch.pipeplan.named_actions`), or ``custom`` with ``actions``.
    n_stages : int, optional
        Stages cut from the forward order (default: one per device).
    stage : {node id: stage}, optional
        The stages themselves, instead of the cut.
    actions : {device id: [action, ...]}, optional
        The action lists (required for ``custom``).
    overhead : float
        The runtime's seconds per action (:func:`replay_actions`).
    memory_model : {'peak', 'static'}
        As :func:`optpart.evaluate.evaluate` takes it.

    Returns
    -------
    Result
        Over the unrolled step, with ``options["pipeline"]``.
    """
    step = PipelineStep(problem.with_devices(problem.devices, links=problem.links, constraints=Constraints()),
                        micro_batches)
    if stage is None:
        cut = stage_placement(step, n_stages)
        stage = dict(zip(problem.node_ids, cut.tolist()))
    n = max(stage.values()) + 1
    if n > problem.n_devices:
        raise OptpartError(f"{n} stages need {n} devices; the problem has {problem.n_devices}")
    if actions is None:
        by_rank = named_actions(schedule, n, micro_batches)
        actions = {problem.device_ids[r]: acts for r, acts in by_rank.items()}
    nodes = [[nid for nid in problem.node_ids if stage[nid] == s] for s in range(n)]
    plan = PipelinePlan.of({"micro_batches": micro_batches, "schedule": schedule,
                            "stages": [{"stage": s, "device": problem.device_ids[s], "nodes": nodes[s]}
                                       for s in range(n)],
                            "actions": dict(actions)})
    return replay_actions(problem, plan, overhead=overhead, memory_model=memory_model)
