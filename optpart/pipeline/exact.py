"""The action order of given stages by CP-SAT: proven optimal on small steps, a bound on larger ones.

The model (OR-Tools CP-SAT), on the stages and devices of the best plan found so far:

* one interval per ``F``, ``I`` and ``W`` of every (stage, micro-batch) (a backward split in
  two: a full ``B`` is the special case of ``W`` right after ``I``), of its simulated length
  (``W`` without the runtime's cost per action, which a ``B`` pays once);
* per device, no two intervals overlap;
* precedences of the stage chain with their transfers (:mod:`optpart.pipeline.costs`), ``W``
  after ``I``, and each stage's forwards, backwards and weight gradients in micro-batch order;
* memory as a reservoir per device: the activations its own backward reads
  (:func:`optpart.pipeline.bound.stage_bound`'s ``act``) are held from a forward's end to its
  backward's start, within the capacity less the parameters;
* the objective: the latest end over devices of the last action plus that device's updates.

Times are integers (``SCALE_TICKS`` ticks per step, rounded down), and the memory and update
terms are lower bounds of the simulator's, so the model relaxes the plan's rules: its proven
objective bound is a lower bound of every action order on these stages (with ``I``/``W``
split anywhere), and its orders are re-timed and memory-checked by the simulator before use.
"""

from __future__ import annotations

import numpy as np

from .costs import StageCosts
from .plan import Action

__all__ = ["exact_orders", "SCALE_TICKS"]

#: Integer ticks per second of the model's ``horizon`` (about 10^6 ticks per step).
SCALE_TICKS = 1_000_000


def _model(costs: StageCosts, act: np.ndarray, scale: float, hint: dict | None):
    from ortools.sat.python import cp_model

    step = costs.step
    p = step.base
    m, n_st = step.micro_batches, costs.n_stages
    lengths = costs.action_time[:, :3].copy()
    lengths[:, 2] = np.maximum(lengths[:, 2] - costs.overhead, 0.0)  # a B runs its W part without a second gap
    t = np.floor(lengths * scale).astype(np.int64)
    horizon = int(np.ceil(
        (m * (costs.action_time[:, 0].sum() + costs.action_time[:, 3].sum())
         + sum(c for d in costs.f_deps + costs.b_deps for _, c in d) * m
         + step.time[step.once].sum()) * scale)) + 10 * (m * n_st + 1)
    model = cp_model.CpModel()
    start, end = {}, {}
    per_device: dict[int, list] = {}
    for s in range(n_st):
        d = int(costs.stage_device[s])
        for i in range(m):
            for k, kind in enumerate("FIW"):
                st = model.NewIntVar(0, horizon, f"s{s}{kind}{i}")
                en = model.NewIntVar(0, horizon, f"e{s}{kind}{i}")
                iv = model.NewIntervalVar(st, int(t[s, k]), en, f"i{s}{kind}{i}")
                start[(s, kind, i)], end[(s, kind, i)] = st, en
                per_device.setdefault(d, []).append(iv)
                if hint is not None and (s, kind, i) in hint:
                    model.AddHint(st, int(hint[(s, kind, i)]))
    for ivs in per_device.values():
        model.AddNoOverlap(ivs)
    for s in range(n_st):
        for i in range(m):
            for u, c in costs.f_deps[s]:
                model.Add(start[(s, "F", i)] >= end[(u, "F", i)] + int(np.floor(c * scale)))
            model.Add(start[(s, "I", i)] >= end[(s, "F", i)])
            for u, c in costs.b_deps[s]:
                model.Add(start[(s, "I", i)] >= end[(u, "I", i)] + int(np.floor(c * scale)))
            model.Add(start[(s, "W", i)] >= end[(s, "I", i)])
            if i:
                for kind in "FIW":
                    model.Add(start[(s, kind, i)] >= end[(s, kind, i - 1)])
    free = p.device_memory - costs.params
    for d in per_device:
        mine = [s for s in range(n_st) if costs.stage_device[s] == d and act[s] > 0]
        if mine and np.isfinite(free[d]):
            times, deltas = [], []
            for s in mine:
                for i in range(m):
                    times += [end[(s, "F", i)], start[(s, "I", i)]]
                    deltas += [int(act[s]), -int(act[s])]
            model.AddReservoirConstraint(times, deltas, 0, max(0, int(np.floor(free[d]))))
    updates = np.zeros(p.n_devices)
    dev_of = costs.device_of()
    for v in costs.once_order.tolist():
        owner = v if v >= 0 else costs.replicas[-1 - v][0]
        d = int(dev_of[owner]) if v >= 0 else costs.replicas[-1 - v][1]
        updates[d] += float(step.time[owner] / p.device_speed[d])
    makespan = model.NewIntVar(0, horizon, "makespan")
    for (s, kind, i), e in end.items():
        d = int(costs.stage_device[s])
        if costs.action_nodes[s, {"F": 0, "I": 1, "W": 2}[kind]] > 0 or updates[d] > 0:
            model.Add(makespan >= e + int(np.floor(updates[d] * scale)))
    model.Minimize(makespan)
    return model, start, makespan


def exact_orders(step, best, memory_model: str, time_limit: float | None = None, effort: float = 1.0):
    """CP-SAT's order on ``best``'s stages (module docstring).

    Parameters
    ----------
    step : PipelineStep
        The step.
    best : Scored
        The best plan so far (its stages; its times seed the search).
    memory_model : {"peak", "static"}
        The model the order's memory must fit (checked by the simulator).
    time_limit : float, optional
        Wall-clock seconds at most (a safety net; the budget is deterministic).
    effort : float
        Deterministic seconds of CP-SAT work are ``10 x effort``.

    Returns
    -------
    tuple
        ``(Scored or None, bound seconds or None, proven optimal)``: the order found when it
        fits and is faster than ``best``, CP-SAT's bound on every order on these stages, and
        whether it proved its order optimal for the model.
    """
    try:
        from ortools.sat.python import cp_model
    except ImportError:  # pragma: no cover -- ortools is a dependency
        return None, None, False
    from .bound import _held
    from .candidates import Scored, memory_fits
    from .simulate import simulate

    costs = best.cand.costs
    scale = SCALE_TICKS / max(best.makespan, 1e-12)
    tl0 = best.tl
    hint = {}
    for s in range(costs.n_stages):
        for i in range(step.micro_batches):
            hint[(s, "F", i)] = tl0.start_f[s, i] * scale
            hint[(s, "I", i)] = tl0.start_x[s, i] * scale
            w = tl0.start_w[s, i] if not tl0.full[s, i] else tl0.start_x[s, i] + costs.action_time[s, 1]
            hint[(s, "W", i)] = w * scale
    model, start, makespan = _model(costs, _held(costs), scale, {k: int(np.floor(v)) for k, v in hint.items()})
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    solver.parameters.max_deterministic_time = 10.0 * max(effort, 0.05)
    if time_limit is not None:
        solver.parameters.max_time_in_seconds = float(time_limit)
    status = solver.Solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, None, False
    bound = solver.BestObjectiveBound() / scale
    proven = status == cp_model.OPTIMAL
    rank = {"F": 0, "I": 1, "W": 2}
    keys = sorted(start, key=lambda k: (solver.Value(start[k]), rank[k[1]], k[0] if k[1] == "F" else -k[0], k[2]))
    actions: list[list[Action]] = [[] for _ in range(step.base.n_devices)]
    for s, kind, i in keys:
        actions[int(costs.stage_device[s])].append(Action(s, kind, i))
    tl = simulate(costs, actions)
    if tl is None:
        return None, bound, proven
    got = Scored(best.cand, best.plan.with_actions(actions), tl, memory_fits(costs, tl, memory_model))
    return (got if got.fits else None), bound, proven
