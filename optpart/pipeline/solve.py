"""Solving a pipelined step: stages from the step's costs, action orders found, judged on the unrolled step.

:func:`solve_pipelined` is what ``optpart.solve(problem, micro_batches=M)`` and ``optpart solve
FILE --micro-batches M`` run. It lays the forward pass out as a chain
(:func:`~optpart.pipeline.stages.forward_chain`) and, for each family of stage layouts (one
stage per device over every device and over half of them, two per device looped as
interleaved schedules use them, two per device in a V), cuts it with the dynamic programs of
:mod:`optpart.pipeline.partition`. On every candidate it times the applicable named schedules
(:mod:`optpart.pipeline.schedules`), 1F1B orders that keep fewer micro-batches in flight, and
the micro-batches one after another (one in flight: the least memory) with the stage-level
simulator; ``heuristic`` (the default) then searches the device orders from the best ones
(:mod:`optpart.pipeline.search`). The fastest plan whose memory fits wins; it is scored on the
unrolled step by :func:`optpart.evaluate.evaluate` (:mod:`optpart.pipeline.expand`), and its
lower bound is :func:`optpart.pipeline.bound.pipeline_bound`.

``--solver gpipe|1f1b|zbh1|interleaved1f1b|zbv|dualpipev|sequential`` gives that order alone
on the found stages of its layout (the fastest candidate on which it fits).
"""

from __future__ import annotations

import time as _time
from typing import Any

import numpy as np

from ..errors import SolverError
from ..model.problem import Problem
from ..result import Result, Status
from .candidates import Candidate, stage_candidates, time_orders
from .expand import score
from .plan import PipelinePlan
from .schedules import NAMED, TORCH_NAME, torch_schedule
from .stages import forward_chain
from .step import PipelineStep

__all__ = ["solve_pipelined", "plan_on_stages", "score_plan", "PIPELINE_SOLVERS"]

#: Solver names of a pipelined solve: the search, the named orders, one micro-batch at a time,
#: and the exact order search of small steps.
PIPELINE_SOLVERS = ("heuristic",) + tuple(NAMED) + ("sequential", "cpsat")


def _named(plan: PipelinePlan) -> PipelinePlan:
    """``plan`` with ``schedule`` set to the torch schedule its actions equal (else ``custom``)."""
    return plan.with_actions(plan.actions, torch_schedule(plan))


#: What a named schedule needs of the layout, for the message when none applies.
_NEEDS = {"1f1b": "at least as many micro-batches as stages", "dualpipev": "at least twice as many micro-batches "
          "as devices", "zbh1": "a micro-batch count divisible by its rounds",
          "interleaved1f1b": "a micro-batch count divisible by its rounds"}


def _names_for(solver: str) -> tuple[str, ...]:
    if solver in ("heuristic", "cpsat"):
        return tuple(NAMED) + ("sequential",) + tuple(f"1f1b-cap{q}" for q in (1, 2, 4))
    return (solver,)


def solve_pipelined(problem: Problem, micro_batches: int, solver: str = "heuristic", *,
                    memory_model: str = "peak", time_limit: float | None = None, seed: int = 0,
                    hint: Any = None, action_overhead: float | None = None, **options: Any) -> Result:
    """Stages and action orders for one step of ``micro_batches`` micro-batches (module docstring).

    Parameters
    ----------
    problem : Problem
        One step of the whole batch, with devices.
    micro_batches : int
        ``M`` (:func:`~optpart.pipeline.step.check_micro_batches`).
    solver : str
        One of :data:`PIPELINE_SOLVERS`.
    memory_model : {"peak", "static"}
        Judged on the unrolled step.
    time_limit : float, optional
        Seconds for ``cpsat``'s order search (the others are budgeted by counts).
    seed : int
        Accepted for the common signature (every search here is deterministic).
    hint : optional
        Not used by pipelined solves (a placement is not a pipeline); refused when given.
    action_overhead : float, optional
        Seconds torch's runtime spends of its own on every action (default:
        :func:`~optpart.pipeline.step.default_action_overhead`); recorded in
        ``options["pipeline"]["action_overhead"]``.
    **options
        ``effort`` (float, default 1) for ``heuristic`` and ``cpsat``: scales the order
        search's budget; the named orders take none.

    Returns
    -------
    Result
        Over the unrolled step (``v@mb<i>``): ``options["pipeline"]`` is the plan
        (:meth:`PipelinePlan.to_dict`), ``options["micro_batches"]`` ``M`` and
        ``options["schedule"]`` the named schedule it equals, else ``custom``;
        ``stats["bound"]`` says what the lower bound covers.
    """
    t0 = _time.perf_counter()
    if solver not in PIPELINE_SOLVERS:
        raise SolverError(f"solver '{solver}' does not make pipelined plans; with --micro-batches use one of "
                          f"{', '.join(PIPELINE_SOLVERS)}")
    allowed = {"effort"} if solver in ("heuristic", "cpsat") else set()
    bad = sorted(set(options) - allowed)
    if bad:
        raise SolverError(f"solver '{solver}' (pipelined) takes no option '{bad[0]}'"
                          + (f"; its options: {', '.join(sorted(allowed))}" if allowed else ""))
    if hint is not None:
        raise SolverError("a pipelined solve takes no hint (a placement is not a pipeline)")
    effort = float(options.get("effort", 1.0))
    step = PipelineStep(problem, micro_batches, action_overhead)
    record = {"micro_batches": step.micro_batches}
    from .bound import pipeline_bound, stage_bound

    reason = step.micro_problem().infeasibility(memory_model)  # holds for every micro-batch's copy
    if reason is not None:
        return Result(problem=problem.name, solver=solver, status=Status.INFEASIBLE, memory_model=memory_model,
                      wall_seconds=_time.perf_counter() - t0, message=reason, options=record)
    chain = forward_chain(step)
    cands = stage_candidates(step, chain)
    names = _names_for(solver)
    timed = [s for c in cands for s in time_orders(step, c, names, memory_model)]
    if not any(s.fits for s in timed):  # fewer devices, down to one: the step may fit one at a time
        more = stage_candidates(step, chain, tuple((1, "loop", k) for k in range(problem.n_devices - 1, 0, -1)))
        timed += [s for c in more for s in time_orders(step, c, names, memory_model)]
    timed.sort(key=lambda s: (not s.fits, s.makespan))
    best = None
    if solver in ("heuristic", "cpsat") and timed and timed[0].fits:
        from .search import improve

        best = improve(step, timed, memory_model, effort=effort, time_limit=time_limit,
                       exact=solver == "cpsat")
    bound, covers = pipeline_bound(step, chain)
    result = None
    for s in ([best] if best is not None else []) + timed:
        s.plan = _named(s.plan)
        r = score(s.cand.costs, s.plan, s.tl, solver=solver, memory_model=memory_model, lower_bound=bound)
        if r.ok:
            result = r
            break
        if s.fits:
            raise SolverError(f"pipelined plan '{s.plan.schedule}' fits the simulator but not the evaluator: "
                              f"{r.message}")
    wall = _time.perf_counter() - t0
    if result is None:
        if not timed:
            why = (f"'{solver}' applies to none of the stage layouts tried with {step.micro_batches} micro-batches "
                   f"(torch's {TORCH_NAME.get(solver, solver)} needs " + _NEEDS.get(solver, "another layout") + ")")
        elif solver in NAMED:
            why = (f"no '{solver}' plan of {step.micro_batches} micro-batches fits the devices' memory "
                   f"({memory_model}); the default solver also tries fewer micro-batches in flight")
        else:
            why = (f"no pipelined plan of {step.micro_batches} micro-batches fits the devices' memory "
                   f"({memory_model}), not even one micro-batch at a time on {len(cands)} stage layouts")
        return Result(problem=problem.name, solver=solver, status=Status.UNKNOWN, lower_bound=bound,
                      memory_model=memory_model, wall_seconds=wall, options=record, message=why)
    result.wall_seconds = wall
    on_stages = stage_bound(s.cand.costs)
    if s.exact_bound is not None:  # CP-SAT's bound holds for every order on these stages too
        on_stages = max(on_stages, min(s.exact_bound, result.makespan))
        result.stats["exact"] = "proven optimal order" if s.exact_proven else "bound only"
    result.stats.update(work=step.work(), speedup=step.work() / result.makespan if result.makespan > 0 else 0.0,
                        bound=covers, candidates=len(timed), stage_bound=on_stages,
                        stage_gap=max(0.0, (result.makespan - on_stages) / result.makespan) if result.makespan else 0.0)
    if result.makespan <= result.lower_bound * (1 + 1e-9):
        result.status = Status.OPTIMAL
    return result


def plan_on_stages(step: PipelineStep, stage_of, stage_device, *, memory_model: str = "peak",
                   effort: float = 1.0, names=None) -> Result | None:
    """The best plan the default solver finds on given stages (a baseline's split, say).

    Parameters
    ----------
    step : PipelineStep
        The step.
    stage_of : numpy.ndarray
        Stage per base node (a valid chain, e.g. :func:`~optpart.pipeline.stages.stage_of_cuts`).
    stage_device : sequence of int
        Device per stage.
    memory_model : {"peak", "static"}
        The model memory must fit.
    effort : float
        As for ``heuristic``.
    names : iterable of str, optional
        Orders to start from (default: every named one, fewer in flight, one at a time); only
        those when ``effort`` is 0.

    Returns
    -------
    Result or None
        Scored on the unrolled step; None when no order fits memory.
    """
    from .search import improve

    sdev = tuple(int(d) for d in stage_device)
    ranks = list(dict.fromkeys(sdev))
    local = max(1, len(sdev) // len(ranks))
    style = "v" if local == 2 and sdev[0] == sdev[-1] else "loop"
    cand = Candidate(np.asarray(stage_of), sdev, local, style, "given")
    timed = time_orders(step, cand, names or _names_for("heuristic"), memory_model)
    timed.sort(key=lambda s: (not s.fits, s.makespan))
    if not timed or not timed[0].fits:
        return None
    best = improve(step, timed, memory_model, effort=effort) if effort > 0 or names is None else timed[0]
    best.plan = _named(best.plan)
    return score(cand.costs, best.plan, best.tl, solver="heuristic", memory_model=memory_model)


def score_plan(problem: Problem, plan: PipelinePlan, *, memory_model: str = "peak",
               action_overhead: float | None = None, solver: str = "given") -> Result:
    """A given plan (stages and action lists) timed and scored on its unrolled step.

    Parameters
    ----------
    problem : Problem
        One step of the whole batch, with devices.
    plan : PipelinePlan
        The plan (checked: :meth:`PipelinePlan.check`).
    memory_model : {"peak", "static"}
        The model it is judged under.
    action_overhead : float, optional
        The runtime's seconds per action (default:
        :func:`~optpart.pipeline.step.default_action_overhead`).
    solver : str
        The name the result carries.

    Returns
    -------
    Result
        Over the unrolled step, ``options["pipeline"]`` the plan (its ``schedule`` the torch
        class its lists equal, else ``custom``).

    Raises
    ------
    ProblemError
        An invalid plan, or lists that wait on each other (one line naming the stuck actions).
    """
    from ..errors import ProblemError
    from .costs import stage_costs
    from .simulate import simulate, stuck_actions

    plan.check(problem)
    step = PipelineStep(problem, plan.micro_batches, action_overhead)
    costs = stage_costs(step, plan.stage_of, plan.stage_device)
    tl = simulate(costs, plan.actions)
    if tl is None:
        stuck = ", ".join(f"'{a}' on '{problem.device_ids[plan.stage_device[a.stage]]}'"
                          for a in stuck_actions(costs, plan.actions))
        raise ProblemError(f"pipeline.actions deadlock: {stuck} wait for each other")
    plan = _named(plan.with_actions(plan.actions))
    return score(costs, plan, tl, solver=solver, memory_model=memory_model)
