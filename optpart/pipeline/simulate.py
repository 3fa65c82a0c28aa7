"""The stage-level simulator: a plan's actions timed as the runtime runs them.

:func:`simulate` runs every device's actions one after another in its list; an action starts
when its device is free and its inputs have arrived (:mod:`optpart.pipeline.costs`: ``F``
after the forwards it reads plus their transfers, a backward after its own ``F`` and the
backwards it receives gradients from, ``W`` after its ``I``); each device's once-per-step
nodes (optimizer updates, replicas of tied parameters) run after its last action, in
topological order, each when its inputs have arrived. The result is what
:mod:`optpart.pipeline.expand` turns into the unrolled step's schedule, so its makespan is
the evaluator's (``tests/pipeline/test_simulator.py``).

Memory under ``peak``: parameters, plus per device every liveness group
(:class:`~optpart.pipeline.costs.Group`) as an interval from its earliest possible start to
its latest possible end, plus the internal peak of the action running. Each part is an upper
bound of what the evaluator counts, so the simulated peak is never below the evaluator's.
Cost: ``O(actions + dependencies)`` for the times, ``O(M x groups)`` for memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .costs import StageCosts
from .liveness import PART_F, PART_I, PART_W, VAR_B
from .plan import Action

__all__ = ["Timeline", "simulate", "stuck_actions", "KIND_INDEX"]

#: Relative float rounding of one addition (bounds the drift of adding an action's nodes one by one).
ROUNDING = 2.3e-16
#: Action kind -> column of :attr:`StageCosts.action_time` and :attr:`StageCosts.internal`.
KIND_INDEX = {"F": 0, "I": 1, "W": 2, "B": 3}


@dataclass
class Timeline:
    """When every action runs (seconds), and what the plan takes.

    Attributes
    ----------
    start_f, start_x, start_w : numpy.ndarray
        ``(S, M)``: start of ``F``, of the backward (``B`` or ``I``) and of ``W`` (nan under ``B``).
    full : numpy.ndarray
        ``(S, M)`` bool: the backward is a full ``B``.
    once_start : numpy.ndarray
        Start of every once node, in :attr:`StageCosts.once_order`.
    makespan : float
        The last node's finish (actions without nodes do not count).
    memory : numpy.ndarray or None
        Peak bytes per device (an upper bound of the evaluator's), when computed.
    last_end : numpy.ndarray
        End of each device's last action.
    """

    start_f: np.ndarray
    start_x: np.ndarray
    start_w: np.ndarray
    full: np.ndarray
    once_start: np.ndarray
    makespan: float
    memory: np.ndarray | None
    last_end: np.ndarray


def simulate(costs: StageCosts, actions, memory: bool = True) -> Timeline | None:
    """Time ``actions`` (per device, :class:`~optpart.pipeline.plan.Action` lists) on ``costs``.

    Parameters
    ----------
    costs : StageCosts
        The stage costs of the plan's stages.
    actions : sequence of sequence of Action
        Per device index, in the order it runs them (a valid plan, :meth:`PipelinePlan.check`).
    memory : bool
        Also compute the peak memory bound per device.

    Returns
    -------
    Timeline or None
        ``None`` when the lists wait on each other (a deadlock).
    """
    n_st, m = costs.n_stages, costs.step.micro_batches
    flat: list[Action] = []
    device: list[int] = []
    index: dict[tuple[int, str, int], int] = {}
    for d, acts in enumerate(actions):
        for a in acts:
            index[(a.stage, a.kind, a.micro_batch)] = len(flat)
            flat.append(a)
            device.append(d)
    n = len(flat)
    full = np.zeros((n_st, m), dtype=bool)
    for (s, kind, i) in index:
        if kind == "B":
            full[s, i] = True
    deps: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    for j, a in enumerate(flat):
        s, i = a.stage, a.micro_batch
        if a.kind == "F":
            deps[j] = [(index[(u, "F", i)], c) for u, c in costs.f_deps[s]]
        elif a.kind == "W":
            deps[j] = [(index[(s, "I", i)], 0.0)]
        else:
            deps[j] = [(index[(s, "F", i)], 0.0)] + [(index[(u, "B" if full[u, i] else "I", i)], c)
                                                      for u, c in costs.b_deps[s]]
    times = costs.action_time
    dur = [float(times[a.stage, KIND_INDEX[a.kind]]) for a in flat]
    count = [int(costs.action_nodes[a.stage, KIND_INDEX[a.kind]]) for a in flat]
    start, end = _times(actions, deps, dur, count, n)
    if start is None:
        return None
    start_f = np.full((n_st, m), np.nan)
    start_x = np.full((n_st, m), np.nan)
    start_w = np.full((n_st, m), np.nan)
    for j, a in enumerate(flat):
        {"F": start_f, "B": start_x, "I": start_x, "W": start_w}[a.kind][a.stage, a.micro_batch] = start[j]
    k = costs.step.base.n_devices
    last_end = np.zeros(k)
    for j in range(n):
        last_end[device[j]] = max(last_end[device[j]], end[j])
    once_start, once_end = _update_phase(costs, start_f, start_x, start_w, full, last_end)
    real = np.array([costs.action_nodes[a.stage, KIND_INDEX[a.kind]] > 0 for a in flat], dtype=bool)
    ends = end[real] if n else end  # the step ends with its last node; an empty action holds none
    makespan = float(max(ends.max() if ends.size else 0.0, once_end.max() if once_end.size else 0.0))
    tl = Timeline(start_f, start_x, start_w, full, once_start, makespan, None, last_end)
    if memory:
        tl.memory = _memory(costs, tl, flat, device, start, end, once_start)
    return tl


def stuck_actions(costs: StageCosts, actions) -> list[Action]:
    """The first action of each device that never runs when the lists deadlock (empty when they run).

    Parameters
    ----------
    costs : StageCosts
        The stage costs.
    actions : sequence of sequence of Action
        Per device index.

    Returns
    -------
    list of Action
        One per device whose list does not finish, in device order.
    """
    done: set[tuple[int, str, int]] = set()
    pos = [0] * len(actions)
    full = {(a.stage, a.micro_batch) for acts in actions for a in acts if a.kind == "B"}

    def ready(a: Action) -> bool:
        if a.kind == "F":
            return all((u, "F", a.micro_batch) in done for u, _ in costs.f_deps[a.stage])
        if a.kind == "W":
            return (a.stage, "I", a.micro_batch) in done
        return (a.stage, "F", a.micro_batch) in done and all(
            (u, "B" if (u, a.micro_batch) in full else "I", a.micro_batch) in done for u, _ in costs.b_deps[a.stage])

    moved = True
    while moved:
        moved = False
        for d, acts in enumerate(actions):
            while pos[d] < len(acts) and ready(acts[pos[d]]):
                a = acts[pos[d]]
                done.add((a.stage, a.kind, a.micro_batch))
                pos[d] += 1
                moved = True
    return [acts[pos[d]] for d, acts in enumerate(actions) if pos[d] < len(acts)]


def _times(actions, deps, dur, count, n):
    """Start and end of every action, or ``(None, None)`` on a deadlock (Kahn's algorithm over
    the device orders and the dependencies). An action's end is its start plus its duration
    and a margin of the float rounding of adding its nodes one by one (:mod:`.expand` starts
    each node where the one before it ends), so what follows never overlaps its last node."""
    succ: list[list[int]] = [[] for _ in range(n)]
    missing = [0] * n
    j = 0
    prev = [-1] * n
    for acts in actions:
        for pos in range(len(acts)):
            if pos:
                prev[j] = j - 1
                succ[j - 1].append(j)
                missing[j] += 1
            j += 1
    for j in range(n):
        for q, _ in deps[j]:
            succ[q].append(j)
            missing[j] += 1
    ready = [j for j in range(n) if missing[j] == 0]
    start = np.zeros(n)
    end = np.zeros(n)
    done = 0
    while ready:
        j = ready.pop()
        t = end[prev[j]] if prev[j] >= 0 else 0.0
        for q, c in deps[j]:
            t = max(t, end[q] + c)
        start[j] = t
        end[j] = t + dur[j] + (abs(t) + dur[j]) * (count[j] + 1) * ROUNDING if dur[j] > 0 else t
        done += 1
        for q in succ[j]:
            missing[q] -= 1
            if missing[q] == 0:
                ready.append(q)
    if done < n:
        return None, None
    return start, end


def node_finish(costs: StageCosts, nodes: np.ndarray, i: int, start_f, start_x, start_w, full) -> np.ndarray:
    """Finish time of copy ``i`` of per-micro-batch ``nodes`` (offsets inside their actions).

    Parameters
    ----------
    costs : StageCosts
        The stage costs.
    nodes : numpy.ndarray
        Base node indices (per-micro-batch nodes).
    i : int
        The micro-batch.
    start_f, start_x, start_w, full : numpy.ndarray
        The timeline's action starts and full-backward flags.

    Returns
    -------
    numpy.ndarray
        Seconds.
    """
    return node_start(costs, nodes, i, start_f, start_x, start_w, full) + costs.dur[nodes]


def node_start(costs: StageCosts, nodes: np.ndarray, i: int, start_f, start_x, start_w, full) -> np.ndarray:
    """Start time of copy ``i`` of per-micro-batch ``nodes`` (:func:`node_finish`'s arguments).

    Parameters
    ----------
    costs : StageCosts
        The stage costs.
    nodes : numpy.ndarray
        Base node indices (per-micro-batch nodes).
    i : int
        The micro-batch.
    start_f, start_x, start_w, full : numpy.ndarray
        The timeline's action starts and full-backward flags.

    Returns
    -------
    numpy.ndarray
        Seconds.
    """
    s = costs.stage_of[nodes]
    part = costs.part[nodes]
    f = full[s, i]
    base = np.where(part == PART_F, start_f[s, i],
                    np.where(f | (part == PART_I), start_x[s, i], start_w[s, i]))
    return base + np.where((part != PART_F) & f, costs.off_b[nodes], costs.off[nodes])


def _update_phase(costs: StageCosts, start_f, start_x, start_w, full, last_end):
    """Start and end of every once node (per device in topological order after its last action)."""
    order = costs.once_order
    if order.size == 0:
        return np.zeros(0), np.zeros(0)
    m = costs.step.micro_batches
    slot, prod, is_once, delay, _ = costs.once_inputs
    dev, dur = costs.once_device, costs.once_dur
    ready = np.zeros(order.size)
    per = ~is_once
    if per.any():
        fin = node_finish(costs, prod[per], m - 1, start_f, start_x, start_w, full)
        np.maximum.at(ready, slot[per], fin + delay[per])
    start = np.zeros(order.size)
    end = np.zeros(order.size)
    if costs.cross_once:
        return _update_loop(costs, order, dev, dur, ready, slot, prod, is_once, delay, last_end)
    lo = 0
    for d, nodes in enumerate(costs.once_nodes):
        hi = lo + nodes.size
        if hi > lo:
            r = ready[lo:hi].copy()
            r[0] = max(r[0], last_end[d])
            c = np.cumsum(dur[lo:hi])
            before = np.concatenate([[0.0], c[:-1]])
            fin = c + np.maximum.accumulate(r - before)
            end[lo:hi] = fin
            start[lo:hi] = fin - dur[lo:hi]
        lo = hi
    return start, end


def _update_loop(costs, order, dev, dur, ready, slot, prod, is_once, delay, last_end):
    """The update phase node by node (once nodes reading once nodes: rare)."""
    slot_of = {int(v): i for i, v in enumerate(order.tolist()) if v >= 0}
    extra: dict[int, list[tuple[int, float]]] = {}
    for s_, u, c in zip(slot[is_once].tolist(), prod[is_once].tolist(), delay[is_once].tolist()):
        extra.setdefault(s_, []).append((slot_of[u], c))
    start = np.zeros(order.size)
    end = np.zeros(order.size)
    free = last_end.copy()
    done = np.zeros(order.size, dtype=bool)
    heads = []
    lo = 0
    for nodes in costs.once_nodes:
        heads.append([lo, lo + nodes.size])
        lo += nodes.size
    progress = True
    while progress:
        progress = False
        for d, (i, hi) in enumerate(heads):
            while i < hi and all(done[q] for q, _ in extra.get(i, [])):
                t = max(free[d], ready[i], *[end[q] + c for q, c in extra.get(i, [])])
                start[i], end[i] = t, t + dur[i]
                free[d], done[i] = end[i], True
                i += 1
                progress = True
            heads[d][0] = i
    return start, end


def _memory(costs: StageCosts, tl: Timeline, flat, device, start, end, once_start) -> np.ndarray:
    """Peak bytes per device: parameters + liveness groups + the running action's internal peak."""
    step = costs.step
    k = step.base.n_devices
    m = step.micro_batches
    makespan = tl.makespan
    iv_dev, iv_lo, iv_hi, iv_b = [], [], [], []
    sf, sx, sw, full = tl.start_f, tl.start_x, tl.start_w, tl.full
    mb = np.arange(m)
    for g in costs.groups:
        s = g.stage
        use = full[s] if g.variant == VAR_B else ~full[s]
        if g.part == PART_F:
            use = np.ones(m, dtype=bool)
        if g.last_only:
            use = use & (mb == m - 1)
        if not use.any():
            continue
        a0 = sf[s] if g.part == PART_F else (sw[s] if (g.part == PART_W and g.variant != VAR_B) else sx[s])
        lo = a0 + g.start
        hi = np.full(m, -np.inf)
        if g.to_end:
            hi[:] = makespan
        hi = np.maximum(hi, a0 + g.send)
        for (s2, part2, delta), (off_b, off_iw) in g.ends.items():
            j = mb + delta
            ok = j < m
            jj = np.minimum(j, m - 1)
            f2 = full[s2, jj]
            if part2 == PART_F:
                at = sf[s2, jj] + off_iw
            else:
                at = np.where(f2, sx[s2, jj] + off_b,
                              np.where(part2 == PART_I, sx[s2, jj], sw[s2, jj]) + off_iw)
            hi = np.maximum(hi, np.where(ok, at, makespan))
        iv_dev.append(np.full(int(use.sum()), g.device))
        iv_lo.append(lo[use])
        iv_hi.append(hi[use])
        iv_b.append(np.full(int(use.sum()), g.nbytes))
    win_dev = np.array(device + list(range(k)), dtype=np.int64)
    win_lo = np.concatenate([start, tl.last_end])
    win_hi = np.concatenate([end, np.full(k, makespan)])
    internal = [float(costs.internal[a.stage, KIND_INDEX[a.kind]]) for a in flat]
    at_end = [float(costs.internal_at_end[a.stage, KIND_INDEX[a.kind]]) for a in flat]
    win_in = np.concatenate([np.array(internal), costs.once_internal])
    win_end = np.concatenate([np.array(at_end), costs.once_internal])
    if iv_dev:
        dev = np.concatenate(iv_dev)
        lo, hi, b = np.concatenate(iv_lo), np.concatenate(iv_hi), np.concatenate(iv_b)
    else:
        dev, lo, hi, b = (np.zeros(0, dtype=np.int64),) + (np.zeros(0),) * 3
    pad = 1e-9 * (makespan + 1e-9)  # times a float ulp apart are "at the same time" to the evaluator
    lo, hi, win_lo, win_hi = lo - pad, hi + pad, win_lo - pad, win_hi + pad
    peak = np.zeros(k)
    for d in range(k):
        w = win_dev == d
        peak[d] = _device_peak(lo[dev == d], hi[dev == d], b[dev == d], win_lo[w], win_hi[w],
                               _touching(win_lo[w], win_hi[w], win_in[w], win_end[w]))
    return costs.params + peak


def _touching(wlo, whi, win, wend) -> np.ndarray:
    """Each window's internal peak plus what other windows hold at their last instant inside it
    (zero-length actions and zero-length tensors at an action's end share that instant)."""
    if not wend.any():
        return win
    out = win.copy()
    for j in np.flatnonzero(wend > 0).tolist():
        inside = (wlo <= whi[j]) & (whi >= whi[j])
        inside[j] = False
        out[inside] += wend[j]
    return out


def _device_peak(lo, hi, b, wlo, whi, win) -> float:
    """Largest (sum of closed intervals alive + internal peak of the window running) over time."""
    t = np.concatenate([lo, hi])
    delta = np.concatenate([b, -b])
    kind = np.concatenate([np.zeros(lo.size), np.ones(hi.size)])  # starts before ends at one time
    order = np.lexsort((kind, t))
    t, level = t[order], np.cumsum(delta[order])
    best = float(level.max()) if level.size else 0.0
    best = max(best, 0.0)
    if wlo.size == 0:
        return best
    before = np.searchsorted(t, wlo, side="left") - 1
    inside_hi = np.searchsorted(t, whi, side="right")
    for a, z, w in zip(before.tolist(), inside_hi.tolist(), win.tolist()):
        at_start = level[a] if a >= 0 else 0.0
        span = level[a + 1:z]
        top = max(at_start, float(span.max()) if span.size else at_start)
        best = max(best, top + w)
    return best
