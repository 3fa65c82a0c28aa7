"""The contract between solvers and the rest of optpart.

A solver is a module with one function::

    def solve(problem: Problem, *, time_limit: float | None, seed: int,
              hint: np.ndarray | None, **options) -> Solution

It reads the shared :class:`~optpart.model.problem.Problem` (always with devices, and
already screened for the obvious infeasibilities of :meth:`Problem.infeasibility`)
and returns a :class:`Solution`: a status, a placement, optionally its own
schedule (start times) and a proven lower bound. :func:`finalize` turns that into
the public :class:`~optpart.result.Result`: the makespan and memory are recomputed
by the evaluator, the schedule is checked against every rule of the model, and a
claim of optimality is kept only when the recomputed makespan meets the proven bound.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..errors import SolverError
from ..bounds import problem_lower_bound
from ..evaluate import evaluate, violations
from ..model.memory import overflow_message
from ..model.problem import Problem
from ..result import Result, Status
from ..schedule import EftSchedule, MemoryPolicy, NoRoom, StaticPolicy
from .incumbent import offer

__all__ = ["Solution", "finalize", "engine_solution", "as_solution"]


@dataclass
class Solution:
    """A solver's raw answer. ``start`` is the solver's own schedule (None: canonical).

    ``lower_bound`` is a bound the solver proved (0 when it proved none).
    ``memory_model`` names the memory model the placement respects.
    """

    status: Status
    placement: np.ndarray | None = None
    start: np.ndarray | None = None
    lower_bound: float = 0.0
    message: str = ""
    memory_model: str = "static"
    stats: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if Status(self.status).has_solution:  # kept in case the solve is interrupted (incumbent.py)
            offer(self.placement, self.start)


def finalize(problem: Problem, solution: Solution, solver: str, wall_seconds: float,
             options: dict[str, Any], memory_model: str | None = None) -> Result:
    """Score and check a :class:`Solution` into a :class:`Result` under ``memory_model``.

    ``memory_model`` is the model the caller asked for (default: the one the solution
    names). The schedule must obey every rule under the solution's own model, else
    :class:`SolverError` (a solver bug). When the two models differ on a graph with the
    param/output/temp split, the solver's claims are about the other model, so: a
    placement is kept only when it fits the requested model (otherwise ``unknown`` with
    the overflowing device named), ``optimal`` becomes ``feasible``, ``infeasible``
    becomes ``unknown``, and the solver's bound is dropped (it may depend on the model).

    Parameters
    ----------
    problem : Problem
        The problem solved.
    solution : Solution
        What the solver returned (placement, optional schedule, status, bound).
    solver : str
        The solver's name, for messages and the result.
    wall_seconds : float
        Time the solver took.
    options : dict
        The options it ran with (recorded in the result).
    memory_model : {"static", "peak"}, optional
        The model the caller asked for.

    Returns
    -------
    Result
        Scored by the evaluator (the one scorer of every solver).

    Raises
    ------
    SolverError
        When the solver's schedule breaks a rule of the model (a solver bug).
    """
    status = Status(solution.status)
    own = solution.memory_model
    wanted = memory_model or own
    other = wanted != own and problem.has_split
    claimed_bound = 0.0 if other else float(solution.lower_bound or 0.0)
    notes = [solution.message] if solution.message else []
    if other and status in (Status.OPTIMAL, Status.INFEASIBLE):
        notes.append(f"{solver} reasoned under the {own} memory model; its '{status.value}' says nothing "
                     f"about {wanted}")
        status = Status.FEASIBLE if status is Status.OPTIMAL else Status.UNKNOWN
    if not status.has_solution:
        bound = max(problem_lower_bound(problem), claimed_bound)
        return Result(problem=problem.name, solver=solver, status=status, lower_bound=bound,
                      memory_model=wanted, wall_seconds=wall_seconds,
                      message="; ".join(notes), options=options, stats=dict(solution.stats))
    if solution.placement is None:
        raise SolverError(f"solver '{solver}' reported '{status.value}' without a placement")
    result = evaluate(problem, solution.placement, solution.start, solver=solver, status=status,
                      lower_bound=claimed_bound, memory_model=own,
                      wall_seconds=wall_seconds, message="; ".join(notes), options=options,
                      stats=solution.stats)
    if status is Status.OPTIMAL:
        slack = 1e-6 * max(result.makespan, 1e-12)
        if result.makespan > result.lower_bound + slack:
            result.status = Status.FEASIBLE
            result.message = (result.message + "; " if result.message else "") + (
                f"optimality claimed for the solver's own model, but the exact makespan "
                f"{result.makespan:.9g} is above its proven bound {result.lower_bound:.9g}")
        else:
            result.lower_bound = min(result.lower_bound, result.makespan)
    found = violations(problem, result)
    if found:
        raise SolverError(f"solver '{solver}' returned an invalid schedule for '{problem.name}': "
                          + "; ".join(found))
    result.memory_model = wanted
    if wanted != own:
        overflow = overflow_message(problem, result.placement, result.start, result.finish, wanted, solver)
        if overflow is not None:
            notes.append(f"its placement, made under the {own} model, breaks the requested one: {overflow}")
            return Result(problem=problem.name, solver=solver, status=Status.UNKNOWN,
                          lower_bound=max(problem_lower_bound(problem), claimed_bound), memory_model=wanted,
                          wall_seconds=wall_seconds, message="; ".join(notes), options=options,
                          stats=dict(solution.stats))
    return result


def engine_solution(problem: Problem, memory_model: str, solver: str,
                    schedule: Callable[[MemoryPolicy], EftSchedule], stats: dict[str, Any],
                    memory_aware: bool = True) -> Solution:
    """Run one of the engine's list schedulers under the memory policy ``memory_model`` asks for.

    ``peak`` on a problem with the param/output/temp split: the liveness policy checks every
    slot while scheduling (optpart/schedule/liveness.py) and the placement is re-checked
    against the evaluator's peak; else the static policy keeps the static budget (with
    ``memory_aware=False`` it ignores capacities, and an overflowing placement is answered
    ``unknown``, never returned). HEFT and m-ETF differ only in the ``schedule`` they run.

    Parameters
    ----------
    problem : Problem
        The problem, with devices.
    memory_model : {"static", "peak"}
        The model the placement must respect.
    solver : str
        The solver's name in messages (``"heft"``, ``"m-ETF"``).
    schedule : callable
        ``schedule(policy) -> EftSchedule``: the engine run (it may raise ``NoRoom``).
    stats : dict
        The solution's ``stats``.
    memory_aware : bool
        False: the static policy ignores capacities (the classic memory-blind baselines).

    Returns
    -------
    Solution
        ``feasible`` with the engine's placement and schedule, or ``unknown`` with the
        one-line reason (no device with room, or a memory-blind placement that overflows).
    """
    peak = memory_model == "peak" and problem.has_split and memory_aware
    if peak:  # liveness tracked while scheduling
        from ..schedule.liveness import LivenessPolicy
        policy: MemoryPolicy = LivenessPolicy(problem)
    else:
        policy = StaticPolicy(problem, memory_aware=memory_aware, solver=solver)
    try:
        res = schedule(policy)
    except NoRoom as stuck:
        return Solution(Status.UNKNOWN, message=stuck.message, memory_model=memory_model)
    placement = np.asarray(res.place, dtype=np.int64)
    start = np.asarray(res.start)
    if peak:
        reason = overflow_message(problem, placement, start, np.asarray(res.finish), "peak", solver)
        if reason is not None:
            return Solution(Status.UNKNOWN, message=reason, memory_model="peak")
        return Solution(Status.FEASIBLE, placement=placement, start=start, memory_model="peak", stats=stats)
    if not memory_aware:
        reason = overflow_message(problem, placement, solver=solver)
        if reason is not None:
            return Solution(Status.UNKNOWN, message=reason)
    return Solution(Status.FEASIBLE, placement=placement, start=start, stats=stats)


def as_solution(problem: Problem, answer: Any, solver: str, memory_model: str) -> Solution:
    """What a plugin solver returned, as a :class:`Solution` that :func:`finalize` scores.

    A plugin (:func:`optpart.solvers.registry.register_solver`) may return a
    :class:`Solution` (kept as it is), a placement (a device index per node, or a mapping of
    node id to device id), a pair ``(placement, start)`` (its own schedule), or None (no
    placement: ``unknown``). A placement that does not fit ``memory_model`` on the canonical
    schedule (or on its own) is answered ``unknown`` with the device that overflows named: a
    placement over capacity is never ``feasible``.

    Parameters
    ----------
    problem : Problem
        The problem solved.
    answer : Solution, placement, (placement, start) or None
        The plugin's return value.
    solver : str
        Its name, for messages.
    memory_model : {"static", "peak"}
        The model it ran under.

    Returns
    -------
    Solution
        ``feasible`` with the placement (and start times), or ``unknown`` with the reason.

    Raises
    ------
    SolverError
        When the answer is none of the above, or a placement of the wrong length or with a
        device out of range.
    """
    if isinstance(answer, Solution):
        return answer
    if answer is None:
        return Solution(Status.UNKNOWN, message=f"{solver} returned no placement", memory_model=memory_model)
    start = None
    if isinstance(answer, tuple) and len(answer) == 2:
        answer, start = answer
    try:
        placement = (problem.placement_from_ids(answer) if isinstance(answer, dict)
                     else np.asarray(answer, dtype=np.int64))
    except (TypeError, ValueError) as exc:
        raise SolverError(f"solver '{solver}' returned {type(answer).__name__}, not a placement "
                          f"(a device index per node, a {{node id: device id}} mapping, or (placement, start)): "
                          f"{exc}") from None
    if placement.shape != (problem.n_nodes,) or (placement.size and (placement.min() < 0
                                                                    or placement.max() >= problem.n_devices)):
        raise SolverError(f"solver '{solver}' returned a placement of shape {placement.shape}; it needs a device "
                          f"index 0..{problem.n_devices - 1} for each of {problem.n_nodes} nodes")
    start = None if start is None else np.asarray(start, dtype=np.float64)
    scored = evaluate(problem, placement, start, solver=solver, memory_model=memory_model)
    broken = [scored.message] if scored.status is Status.INVALID else violations(problem, scored)
    if broken:  # over capacity, a constraint broken, or its own schedule breaking a rule
        return Solution(Status.UNKNOWN, message=f"{solver}: " + "; ".join(broken), memory_model=memory_model)
    return Solution(Status.FEASIBLE, placement=placement, start=start, memory_model=memory_model)
