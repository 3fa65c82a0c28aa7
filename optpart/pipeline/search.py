"""Searching the per-device action orders of given stages, under the memory of the micro-batches in flight.

Two searches, both judged by the stage-level simulator (:func:`~optpart.pipeline.simulate.simulate`)
and both deterministic (budgets count simulations, never seconds):

* :func:`greedy_orders`: an event-driven list scheduler over the actions (the greedy of the
  zero-bubble paper, Qi et al., ICLR 2024): whenever a device is free it runs a ready backward
  first (it frees memory and feeds the earlier stages; or, in the forward-first variant, a
  forward first, which feeds a slower later stage), else a ready forward of its deepest
  stage if that stage holds fewer than its cap of micro-batches in flight, else, with split
  backwards, a pending weight-gradient ``W`` (it fills the bubble), else it waits for the
  first of them. Variants: full ``B`` or split ``I``/``W`` backwards, and in-flight caps from
  "no cap" down to one micro-batch, so the orders adapt to unequal stages, transfers and
  memory where the named schedules assume equal ones.
* :func:`polish`: first-improvement local search on one device's list: move an action one
  place earlier or later (keeping the plan valid), keep the move when the simulated step is
  shorter and memory still fits.

:func:`improve` runs both from the best timed plans (named schedules included, so it never
returns anything slower than them) and returns the fastest plan that fits.
"""

from __future__ import annotations

import math

from .costs import StageCosts
from .plan import Action, PipelinePlan
from .simulate import simulate

__all__ = ["greedy_orders", "polish", "improve"]


def greedy_orders(costs: StageCosts, n_devices: int, caps: list[int], split: bool,
                  forward_first: bool = False) -> list[list[Action]] | None:
    """One list-scheduled order (module docstring) with per-stage in-flight ``caps``.

    Parameters
    ----------
    costs : StageCosts
        The stages' costs.
    n_devices : int
        Devices of the problem (lists for the ones without stages stay empty).
    caps : list of int
        Most micro-batches in flight per stage (>= 1).
    split : bool
        Split every backward into ``I`` and a deferred ``W``.
    forward_first : bool
        Prefer a ready forward to a ready backward (feeds a slower later stage; the caps
        still bound memory).

    Returns
    -------
    list of list of Action or None
        Per device index; None when the lists would deadlock (they do not with caps >= 1).
    """
    n_st, m = costs.n_stages, costs.step.micro_batches
    t = costs.action_time
    sdev = costs.stage_device.tolist()
    mine = [[s for s in range(n_st) if sdev[s] == d] for d in range(n_devices)]
    nf, nx = [0] * n_st, [0] * n_st
    f_end: dict[tuple[int, int], float] = {}
    x_end: dict[tuple[int, int], float] = {}
    pending: list[list[tuple[int, float]]] = [[] for _ in range(n_st)]  # (micro-batch, I end)
    free = [0.0] * n_devices
    out: list[list[Action]] = [[] for _ in range(n_devices)]
    left = sum(len(x) for x in mine) * m * (3 if split else 2)
    while left:
        best = None
        for d in range(n_devices):
            choice = _choose(d, mine[d], free[d], costs, caps, split, nf, nx, f_end, x_end, pending, m,
                             forward_first)
            if choice is not None and (best is None or choice[0] < best[0]):
                best = choice + (d,)
        if best is None:
            return None
        start, s, kind, i, d = best
        end = start + float(t[s, {"F": 0, "I": 1, "W": 2, "B": 3}[kind]])
        free[d] = end
        out[d].append(Action(s, kind, i))
        left -= 1
        if kind == "F":
            f_end[(s, i)] = end
            nf[s] += 1
        elif kind == "W":
            pending[s].pop(0)
        else:
            x_end[(s, i)] = end
            nx[s] += 1
            if kind == "I":
                pending[s].append((i, end))
    return out


def _choose(d, stages, t0, costs, caps, split, nf, nx, f_end, x_end, pending, m, forward_first):
    """The action device ``d`` runs next and its start, or None when nothing of it is ready."""
    xs, fs, ws = [], [], []
    for s in stages:
        i = nx[s]
        if i < m and (s, i) in f_end:
            ready = max(t0, f_end[(s, i)])
            ok = True
            for u, c in costs.b_deps[s]:
                e = x_end.get((u, i))
                if e is None:
                    ok = False
                    break
                ready = max(ready, e + c)
            if ok:
                xs.append((ready, -s, s, "I" if split else "B", i))
        i = nf[s]
        if i < m and nf[s] - nx[s] < caps[s]:
            ready, ok = t0, True
            for u, c in costs.f_deps[s]:
                e = f_end.get((u, i))
                if e is None:
                    ok = False
                    break
                ready = max(ready, e + c)
            if ok:
                fs.append((ready, -s, s, "F", i))
        if pending[s]:
            i, e = pending[s][0]
            ws.append((max(t0, e), s, s, "W", i))
    options = sorted(xs) + sorted(fs)
    first = min((o[0] for o in options), default=math.inf)
    for group in ((sorted(fs), sorted(xs)) if forward_first else (sorted(xs), sorted(fs))):
        if group and group[0][0] <= t0:
            return group[0][0], group[0][2], group[0][3], group[0][4]
    if ws:
        w = min(ws)
        if w[0] < first or not options:
            return w[0], w[2], w[3], w[4]
    if not options:
        return None
    o = min(options)
    return o[0], o[2], o[3], o[4]


def _caps(costs: StageCosts) -> list[list[int]]:
    """In-flight caps to try: none, 1F1B's (stages after it, at least one), twice, half, 2 and 1."""
    n, m = costs.n_stages, costs.step.micro_batches
    out = []
    for scale in (math.inf, 2.0, 1.0, 0.5):
        out.append([max(1, min(m, int(math.ceil(scale * (n - s))) if math.isfinite(scale) else m)) for s in range(n)])
    out += [[2] * n, [1] * n]
    seen, unique = set(), []
    for c in out:
        if tuple(c) not in seen:
            seen.add(tuple(c))
            unique.append(c)
    return unique


def _valid_move(acts: list[Action], i: int) -> bool:
    """Whether swapping ``acts[i]`` and ``acts[i + 1]`` keeps the plan's per-stage rules."""
    a, b = acts[i], acts[i + 1]
    if a.stage != b.stage:
        return True
    if a.micro_batch == b.micro_batch:
        return False  # F before B/I before W of one micro-batch
    streams = {"F": {"f"}, "B": {"b", "w"}, "I": {"b"}, "W": {"w"}}
    return not (streams[a.kind] & streams[b.kind])


def polish(costs: StageCosts, plan: PipelinePlan, fits, budget: int) -> tuple[PipelinePlan, object, int]:
    """First-improvement adjacent moves on every device's list (module docstring).

    Parameters
    ----------
    costs : StageCosts
        The stages' costs.
    plan : PipelinePlan
        The starting plan (it must fit).
    fits : callable
        ``fits(timeline) -> bool``, the memory check.
    budget : int
        Most simulations.

    Returns
    -------
    tuple
        ``(plan, timeline, simulations used)``.
    """
    acts = [list(a) for a in plan.actions]
    best = simulate(costs, acts)
    used = 1
    improved = True
    while improved and used < budget:
        improved = False
        for d in range(len(acts)):
            for i in range(len(acts[d]) - 1):
                if used >= budget:
                    break
                if not _valid_move(acts[d], i):
                    continue
                acts[d][i], acts[d][i + 1] = acts[d][i + 1], acts[d][i]
                tl = simulate(costs, acts)
                used += 1
                if tl is not None and tl.makespan < best.makespan * (1 - 1e-9) and fits(tl):
                    best, improved = tl, True
                else:
                    acts[d][i], acts[d][i + 1] = acts[d][i + 1], acts[d][i]
    return plan.with_actions(acts), best, used


def improve(step, timed, memory_model: str, effort: float = 1.0, time_limit=None, exact: bool = False):
    """The fastest fitting plan found from ``timed`` (module docstring).

    Parameters
    ----------
    step : PipelineStep
        The step.
    timed : list of Scored
        Timed plans, fitting ones first and fastest first (:func:`~optpart.pipeline.candidates.time_orders`).
    memory_model : {"peak", "static"}
        The model memory must fit.
    effort : float
        Scales the polish budget (0: the greedy orders only).
    time_limit : float, optional
        Seconds for the exact order search (``exact``).
    exact : bool
        Also run the CP-SAT order search (:mod:`optpart.pipeline.exact`) on the best stages.

    Returns
    -------
    Scored
        The best plan (one of ``timed`` when nothing is faster).
    """
    from .candidates import Scored, memory_fits

    best = timed[0]
    seen: set[int] = set()
    n_dev = step.base.n_devices
    for s in [x for x in timed if x.fits]:
        if id(s.cand) in seen:
            continue
        seen.add(id(s.cand))
        costs = s.cand.costs
        for split, ahead in ((False, False), (True, False), (False, True), (True, True)):
            for caps in _caps(costs):
                acts = greedy_orders(costs, n_dev, caps, split, ahead)
                tl = simulate(costs, acts) if acts is not None else None
                if tl is None:
                    continue
                plan = s.plan.with_actions(acts)
                got = Scored(s.cand, plan, tl, memory_fits(costs, tl, memory_model))
                if got.fits and got.makespan < best.makespan * (1 - 1e-12):
                    best = got
    budget = int(round(300 * effort))
    if budget > 0:
        fits = lambda tl: memory_fits(best.cand.costs, tl, memory_model)  # noqa: E731
        plan, tl, _ = polish(best.cand.costs, best.plan, fits, budget)
        if tl.makespan < best.makespan * (1 - 1e-12):
            best = Scored(best.cand, plan, tl, True)
    if exact:
        from .exact import exact_orders

        got, bound, proven = exact_orders(step, best, memory_model, time_limit=time_limit, effort=effort)
        if got is not None and got.makespan < best.makespan * (1 - 1e-12):
            best = got
        best.exact_bound, best.exact_proven = bound, proven
    return best
