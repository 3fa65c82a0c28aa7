"""Solving a pipelined step: placements shared by every micro-batch, schedules found per placement.

:func:`solve_pipelined` is what ``optpart.solve(problem, ..., micro_batches=M)`` and
``optpart solve FILE --micro-batches M`` run:

* ``heuristic`` (the default): candidate placements are the stage-contiguous placements of
  :mod:`optpart.pipeline.stages` (over every device and over half of them), plus the ordinary
  heuristic's placement of the one-step problem (or the hint, when one is given), and the
  stage-contiguous placement whose cuts :func:`~optpart.pipeline.search.refine_cuts` moved
  against the schedule (``12 x effort`` schedule evaluations). Every candidate
  is scheduled by :func:`schedule_placement`, and the fastest schedule that fits memory wins.
* ``gpipe`` / ``1f1b``: the baseline orders, on the hint placement when one is given,
  else on the stage-contiguous placement over every device.
* any other registered solver: its placement of the one-step problem, then scheduled by
  :func:`schedule_placement`.

:func:`schedule_placement` tries the GPipe and 1F1B orders and three list-scheduling
priorities over the shared placement, then replays the best schedule as fixed per-device
sequences (a left shift: never later), and keeps the fastest one that fits the memory
model. It contains GPipe and 1F1B among its candidates, so on the same placement it is
never worse than either.

Every answer is a :class:`~optpart.result.Result` over the unrolled step
(:meth:`PipelineStep.unrolled`), scored by :func:`optpart.evaluate.evaluate`, so memory
counts the micro-batches in flight and nothing is ``feasible`` over capacity.
"""

from __future__ import annotations

import time as _time
from typing import Any

import numpy as np

from .._docstrings import fill_doc
from ..errors import SolverError
from ..evaluate import evaluate, time_tolerance
from ..model.memory import fits
from ..model.problem import Problem
from ..result import Result, Status
from .orders import gpipe_schedule, list_schedule, one_f_one_b_schedule, priorities, sequence_schedule
from .search import refine_cuts
from .stages import stage_placement
from .step import PipelineStep

__all__ = ["solve_pipelined", "schedule_placement", "BASELINES"]

#: Baseline orders of the pipelined step.
BASELINES = ("gpipe", "1f1b")

#: Exact solvers: they solve the unrolled step itself (its colocation of copies keeps one
#: placement for all micro-batches), seeded with the pipelined heuristic's answer.
EXACT = ("cpsat", "milp")


def _memory_of(result: Result) -> np.ndarray:
    return result.memory_peak if result.memory_model == "peak" else result.memory_static


def _fits(step: PipelineStep, result: Result) -> bool:
    cap = step.base.device_memory
    return all(fits(float(u), float(c)) for u, c in zip(_memory_of(result).tolist(), cap.tolist()))


def _score(step: PipelineStep, placement: np.ndarray, start: np.ndarray, name: str, memory_model: str) -> Result:
    return evaluate(step.unrolled(), step.tile(placement), start, solver=name, memory_model=memory_model,
                    options={"micro_batches": step.micro_batches, "schedule": name})


@fill_doc
def baseline_schedule(step: PipelineStep, placement: np.ndarray, order: str,
                      memory_model: str = "peak") -> Result | None:
    """The GPipe or 1F1B order on ``placement`` as a scored result (``None``: 1F1B deadlocks).

    Parameters
    ----------
    %(step_placement)s
    order
        ``gpipe`` or ``1f1b``.
    memory_model
        Model the result names (its memory figures are both computed either way).

    Returns
    -------
    Result or None
        Status ``feasible`` when it fits the memory model, else ``unknown``.
    """
    fn = {"gpipe": gpipe_schedule, "1f1b": one_f_one_b_schedule}[order]
    sched = fn(step, np.asarray(placement, dtype=np.int64))
    if sched is None:
        return None
    result = _score(step, placement, sched[0], order, memory_model)
    if not _fits(step, result):
        result.status = Status.UNKNOWN
    return result


@fill_doc
def schedule_placement(step: PipelineStep, placement: np.ndarray, memory_model: str = "peak"
                       ) -> tuple[Result | None, dict[str, float]]:
    """The fastest schedule found for one shared placement that fits ``memory_model``.

    Parameters
    ----------
    %(step_placement)s
    memory_model
        ``peak`` or ``static``.

    Returns
    -------
    tuple
        ``(result, makespans)``: the best fitting result (``None`` when no order fits) and the
        makespan of every order tried (``inf`` for one that deadlocks or overflows).
    """
    placement = np.asarray(placement, dtype=np.int64)
    tried: list[tuple[str, Result]] = []
    for order in BASELINES:
        r = baseline_schedule(step, placement, order, memory_model)
        if r is not None:
            tried.append((order, r))
    for name, prio in priorities(step, placement).items():
        start, _ = list_schedule(step, placement, prio)
        tried.append((f"list:{name}", _score(step, placement, start, f"list:{name}", memory_model)))
    makespans = {name: (r.makespan if _fits(step, r) else float("inf")) for name, r in tried}
    fitting = [(r.makespan, i) for i, (name, r) in enumerate(tried) if _fits(step, r)]
    if not fitting:
        return None, makespans
    best_name, best = tried[min(fitting)[1]]
    replay = sequence_schedule(step, placement, best.start, best.finish)
    if replay is not None:  # the same per-device order, every task as early as it can start
        again = _score(step, placement, replay[0], f"{best_name}+replay", memory_model)
        makespans[f"{best_name}+replay"] = again.makespan if _fits(step, again) else float("inf")
        if _fits(step, again) and again.makespan < best.makespan - time_tolerance(best.makespan):
            best_name, best = f"{best_name}+replay", again
    best.options["schedule"] = best_name
    return best, makespans


def _candidate_placements(step: PipelineStep, solver: str, hint, memory_model: str, time_limit, seed: int,
                          options: dict[str, Any]) -> list[tuple[str, np.ndarray]]:
    """Placements to schedule: the hint; stage-contiguous ones (heuristic: over every device
    and over half of them; baselines without a hint: every device); the one-step solver's
    placement (any solver but the baselines, unless a hint replaces it)."""
    from ..solvers.registry import solve as solve_one

    p = step.base
    out: list[tuple[str, np.ndarray]] = []
    if hint is not None:
        out.append(("hint", np.asarray(hint, dtype=np.int64)))
    counts = [p.n_devices] if solver in BASELINES else \
        sorted({p.n_devices, max(1, p.n_devices // 2)}, reverse=True) if solver == "heuristic" else []
    if not (solver in BASELINES and hint is not None):
        for s in counts:
            pl = stage_placement(step, s)
            if p.respects_constraints(pl) and not any(np.array_equal(pl, q) for _, q in out):
                out.append((f"stages:{s}", pl))
    if solver == "heuristic":
        budget = max(4, int(round(12 * float(options.get("effort", 1.0)))))
        refined, _ = refine_cuts(step, p.n_devices, memory_model, budget=budget)
        if p.respects_constraints(refined) and not any(np.array_equal(refined, q) for _, q in out):
            out.append((f"stages:{p.n_devices}+refined", refined))
    if solver not in BASELINES and hint is None:
        one = solve_one(p, solver, memory_model=memory_model, time_limit=time_limit, seed=seed, **options)
        if one.placement is not None:
            out.append((f"{solver}:one-step", np.asarray(one.placement, dtype=np.int64)))
    return out


def solve_pipelined(problem: Problem, micro_batches: int, solver: str = "heuristic", *,
                    memory_model: str = "peak", time_limit: float | None = None, seed: int = 0,
                    hint: Any = None, **options: Any) -> Result:
    """Place and schedule one step of ``micro_batches`` micro-batches (module docstring).

    Parameters
    ----------
    problem
        One step of the whole batch, with devices.
    micro_batches
        ``M`` (validated by :func:`~optpart.pipeline.step.check_micro_batches`).
    solver
        ``heuristic``, ``gpipe``, ``1f1b`` or any registered solver (its one-step placement).
    memory_model
        ``peak`` (default) or ``static``, judged on the unrolled step.
    time_limit, seed, options
        Passed to the one-step solver that proposes a placement.
    hint
        A base placement (device index per node): scheduled as a candidate, in place of the
        one-step solver's placement (baselines: in place of the stage-contiguous one).

    Returns
    -------
    Result
        Over the unrolled step's nodes (``v@mb<i>``); ``options["micro_batches"]`` is ``M`` and
        ``options["schedule"]`` names the order; ``stats["placement"]`` names the candidate
        placement and ``stats["orders"]`` the makespan of every order tried on it.
    """
    t0 = _time.perf_counter()
    step = PipelineStep(problem, micro_batches)
    unrolled = step.unrolled()
    name = f"{solver}"
    record = {"micro_batches": step.micro_batches, "memory_model": memory_model, "seed": seed}
    reason = unrolled.infeasibility(memory_model)
    if reason is not None:
        return Result(problem=problem.name, solver=name, status=Status.INFEASIBLE,
                      lower_bound=evaluate_bound(unrolled), memory_model=memory_model,
                      wall_seconds=_time.perf_counter() - t0, message=reason, options=record)
    if hint is not None:
        from ..solvers.registry import _normalize_hint

        hint = _normalize_hint(problem, hint)
    if solver in BASELINES and options:
        raise SolverError(f"solver '{solver}' takes no options, got {', '.join(sorted(options))}")
    if solver in EXACT:
        return _solve_exact(step, solver, memory_model, time_limit, seed, options, hint, t0)
    best: Result | None = None
    best_from, best_orders = "", {}
    for label, placement in _candidate_placements(step, solver, hint, memory_model, time_limit, seed, options):
        if solver in BASELINES:
            r, orders = baseline_schedule(step, placement, solver, memory_model), {}
            if r is not None and r.status is not Status.FEASIBLE:
                r = None
        else:
            r, orders = schedule_placement(step, placement, memory_model)
        if r is not None and (best is None or r.makespan < best.makespan - time_tolerance(best.makespan)):
            best, best_from, best_orders = r, label, orders
    wall = _time.perf_counter() - t0
    if best is None:
        return Result(problem=problem.name, solver=name, status=Status.UNKNOWN,
                      lower_bound=evaluate_bound(unrolled), memory_model=memory_model, wall_seconds=wall,
                      message=f"no schedule of {step.micro_batches} micro-batches fits the devices' memory "
                              f"({memory_model}) on the placements tried", options=record)
    best.solver = name
    best.options = {**record, **best.options, "micro_batches": step.micro_batches}
    best.wall_seconds = wall
    if best.makespan <= best.lower_bound + time_tolerance(best.makespan):
        best.status = Status.OPTIMAL
    best.stats.update(placement=best_from, orders=best_orders, work=step.work(),
                      speedup=step.work() / best.makespan if best.makespan > 0 else float("inf"))
    return best


def _solve_exact(step: PipelineStep, solver: str, memory_model: str, time_limit, seed: int,
                 options: dict[str, Any], hint, t0: float) -> Result:
    """An exact solver on the unrolled step, hinted with the pipelined heuristic's result.

    Its ``optimal`` is a proof for the pipelined step (the unrolled step is that step). When it
    finds nothing better than the heuristic, the heuristic's result is returned, saying so."""
    from ..solvers.registry import solve as solve_one

    seed_result = solve_pipelined(step.base, step.micro_batches, "heuristic", memory_model=memory_model,
                                  seed=seed, hint=hint)
    start_hint = seed_result.placement if seed_result.ok else None
    r = solve_one(step.unrolled(), solver, memory_model=memory_model, time_limit=time_limit, seed=seed,
                  hint=start_hint, **options)
    record = {"micro_batches": step.micro_batches}
    if not r.ok or (seed_result.ok and r.makespan > seed_result.makespan + time_tolerance(r.makespan)):
        if seed_result.ok:
            seed_result.message = (f"{solver} found no better schedule ({r.status.value}); "
                                   "the pipelined heuristic's answer")
            seed_result.lower_bound = max(seed_result.lower_bound, r.lower_bound if r.status.value != "infeasible"
                                          else seed_result.lower_bound)
            seed_result.wall_seconds = _time.perf_counter() - t0
            return seed_result
        r.options.update(record)
        return r
    r.options.update(record, schedule=solver)
    r.wall_seconds = _time.perf_counter() - t0
    r.stats.update(work=step.work(), speedup=step.work() / r.makespan if r.makespan > 0 else float("inf"))
    return r


def evaluate_bound(problem: Problem) -> float:
    """The generic lower bound of a (unrolled) problem.

    Parameters
    ----------
    problem
        Any problem with devices (for a pipelined step: the unrolled one).

    Returns
    -------
    float
        Seconds no schedule can beat (:func:`optpart.bounds.problem_lower_bound`).
    """
    from ..bounds import problem_lower_bound

    return problem_lower_bound(problem)
