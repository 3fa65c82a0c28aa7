"""Lower bounds of a pipelined step: over every plan, and over every action order on given stages.

:func:`pipeline_bound` holds for **every** pipelined plan of the step (any stages cut from the
forward chain, on any devices, in any order), with ``h`` the time one micro-batch's forward
pass takes through the whole chain on the fastest device:

* one micro-batch's generic bounds (critical path, largest node:
  :func:`optpart.bounds.problem_lower_bound`) and the step's work over the devices' total speed,
  plus the runtime's cost of ``2 x M`` actions (every device holding a stage runs at least a
  forward and a backward per micro-batch, so its work ``w_d`` fits in ``T - 2 M x overhead``
  at its speed);
* ``h + (M x backward + updates) / total speed``: no backward of any micro-batch starts before
  its own forward has passed the whole chain, so all backward and optimizer work fits after
  ``h``;
* per block of positions that no cut may split (a colocation group such as a language model
  head with its tied weight): one device runs ``M`` times its forward and backward and its
  updates, not before one micro-batch's forward reaches the block (and its backwards not
  before the forward has passed the whole chain).

:func:`stage_bound` holds for every action order on **given** stages and devices
(:class:`~optpart.pipeline.costs.StageCosts`), per device ``d`` holding stages ``S_d``, with
``eF(s)``/``eX(s)`` the earliest start of stage ``s``'s forward / backward (the longest path of
one micro-batch through the action dependencies, transfers included) and ``tail(s)`` the
input-gradient chain that must follow stage ``s``'s last backward down to stage 0:

* fill: ``min eF(s) + M x (F + B) of S_d + updates of d``;
* backward: ``min eX(s) + M x B of S_d + updates of d``;
* drain: the last input-gradient work of stage ``s`` ends no earlier than ``max(eF(s) + M x
  (F_s + I_s), eX(s) + M x I_s)`` (its forwards and its backwards run in micro-batch order, a
  backward at least its input-gradient part ``I``), and ``tail(s)`` follows: its ``W`` and its
  device's updates (or a tied parameter's replica waiting for the summed gradient), or the
  gradient chain through the earlier stages;
* memory: when device ``d`` can hold the activations of at most ``q`` micro-batches of stage
  ``s`` between forward and backward (``params + q x act <= capacity``, ``act`` the forward
  tensors the stage's own backward reads), micro-batch ``m + q`` cannot finish its forward
  before ``m``'s backward has started, so ``eF(s) + F_s + (floor((M-1)/q) + 1) x L_s + I_s +
  tail(s)``, ``L_s = eX(s) - eF(s) - F_s`` the least round trip.
"""

from __future__ import annotations

import numpy as np

from ..bounds import problem_lower_bound
from .costs import StageCosts
from .liveness import PART_F, PART_I, PART_W
from .stages import ForwardChain, forward_chain
from .step import PipelineStep

__all__ = ["pipeline_bound", "stage_bound"]


def pipeline_bound(step: PipelineStep, chain: ForwardChain | None = None) -> tuple[float, str]:
    """A lower bound on the step time of every pipelined plan (module docstring).

    Parameters
    ----------
    step : PipelineStep
        The pipelined step.
    chain : ForwardChain, optional
        Its forward chain (computed when not given).

    Returns
    -------
    tuple
        ``(seconds, which bound binds)``.
    """
    p = step.base
    m = step.micro_batches
    chain = forward_chain(step) if chain is None else chain
    fastest = float(p.device_speed.max()) if p.n_devices else 1.0
    total_speed = float(p.device_speed.sum()) if p.n_devices else 1.0
    h = float(step.time[step.forward].sum()) / fastest
    bounds = [(problem_lower_bound(step.micro_problem()), "one micro-batch's critical path and largest node"),
              (step.work() / total_speed + 2 * m * step.action_overhead,
               "the step's work over the devices' total speed, and the runtime's cost of each device's "
               "2 x M actions at least")]
    after = (m * float(step.time[step.backward].sum()) + float(step.time[step.once].sum())) / total_speed
    bounds.append((h + after, "one micro-batch's forward, then all backward and update work on every device"))
    # blocks of positions no cut may split: one device runs all their work, after the forward reaches them
    n = chain.n_positions
    if n:
        cut = np.flatnonzero(chain.allowed[1:n]) + 1
        starts = np.concatenate([[0], cut])
        ends = np.concatenate([cut, [n]])
        head = np.concatenate([[0.0], np.cumsum(chain.fwd_time)])[starts] / fastest
        fb = np.add.reduceat(chain.fwd_time + chain.bwd_time, starts)
        bw = np.add.reduceat(chain.bwd_time, starts)
        upd = np.add.reduceat(chain.once_time, starts)
        block = np.maximum(head + m * fb / fastest, h + m * bw / fastest) + upd / fastest
        j = int(np.argmax(block))
        del ends
        bounds.append((float(block[j]), f"the block of positions {int(starts[j])}.. that no cut may split "
                                        "runs on one device after the forward reaches it"))
    value, why = max(bounds, key=lambda b: b[0])
    return value, "every plan: " + why


def _earliest(costs: StageCosts) -> tuple[np.ndarray, np.ndarray]:
    """Earliest start of each stage's forward and backward for one micro-batch."""
    n = costs.n_stages
    t = costs.action_time
    ef = np.zeros(n)
    for s in range(n):  # forward dependencies point to earlier stages
        for u, c in costs.f_deps[s]:
            ef[s] = max(ef[s], ef[u] + t[u, 0] + c)
    ex = ef + t[:, 0]
    for s in reversed(range(n)):  # backward dependencies point to later stages
        for u, c in costs.b_deps[s]:
            ex[s] = max(ex[s], ex[u] + t[u, 1] + c)
    return ef, ex


def _tails(costs: StageCosts, updates: np.ndarray, n_once: np.ndarray) -> np.ndarray:
    """Least time from the end of stage ``s``'s last input-gradient work (``I``, or the ``I``
    share of ``B``) to the last node finish that must follow it: its own ``W`` and its device's
    updates (or a replica of a tied parameter waiting for the summed gradient), or the gradient
    chain through the earlier stages that read it, each with its ``I`` and then its own tail.
    ``-inf`` when no node must follow (empty actions end nothing)."""
    step = costs.step
    p = step.base
    n = costs.n_stages
    t = costs.action_time
    nodes = costs.action_nodes
    dev = costs.stage_device
    w = np.where(nodes[:, 2] > 0, t[:, 2] - costs.overhead, 0.0)  # W's nodes (a B runs them without a gap)
    own = np.where((nodes[:, 2] > 0) | (n_once[dev] > 0), w + updates[dev], -np.inf)
    dev_of = costs.device_of()
    for owner, d in costs.replicas:  # the replica's update waits for the owner's summed gradient
        s = int(costs.stage_of[owner])
        ins = p.in_edges[p.in_ptr[owner]:p.in_ptr[owner + 1]]
        # each input arrives after its producer finishes: in W after the I, in I (or in a B) before its end
        arrive = [float(_finish_after_i(costs, int(p.edge_src[e]), s) + p.latency[dev_of[owner], d]
                        + step.edge_bytes[e] / p.bandwidth[dev_of[owner], d])
                  for e in ins.tolist() if int(costs.stage_of[p.edge_src[e]]) == s]
        if arrive:
            own[s] = max(own[s], max(arrive) + float(step.time[owner] / p.device_speed[d]))
    tail = own.copy()
    users: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    for s in range(n):
        for u, c in costs.b_deps[s]:
            users[u].append((s, c))
    for s in range(n):  # users of stage s are earlier stages: already final
        for v, c in users[s]:
            after = max(0.0 if nodes[v, 1] > 0 else -np.inf, tail[v])
            tail[s] = max(tail[s], c + t[v, 1] + after)
    return tail


def _finish_after_i(costs: StageCosts, v: int, s: int) -> float:
    """Least time from the end of stage ``s``'s input-gradient work (its ``I``, or a ``B``'s end)
    to the finish of its backward node ``v`` (negative when ``v`` may finish before it)."""
    t = costs.action_time
    end_b = float(costs.off_b[v] + costs.dur[v] - t[s, 3])  # in a B: before the B's end
    if costs.part[v] == PART_W:
        return min(float(costs.off[v] + costs.dur[v]), end_b)
    if costs.part[v] == PART_I:
        return min(float(costs.off[v] + costs.dur[v] - t[s, 1]), end_b)
    return -np.inf


def stage_bound(costs: StageCosts) -> float:
    """A lower bound on every action order of the stages and devices of ``costs`` (module docstring).

    Parameters
    ----------
    costs : StageCosts
        The stages' costs.

    Returns
    -------
    float
        Seconds.
    """
    step = costs.step
    p = step.base
    m = step.micro_batches
    t = costs.action_time
    ef, ex = _earliest(costs)
    updates = np.zeros(p.n_devices)
    n_once = np.zeros(p.n_devices, dtype=np.int64)
    dev_of = costs.device_of()
    for v in costs.once_order.tolist():
        owner = v if v >= 0 else costs.replicas[-1 - v][0]
        d = int(dev_of[owner]) if v >= 0 else costs.replicas[-1 - v][1]
        updates[d] += float(step.time[owner] / p.device_speed[d])
        n_once[d] += 1
    tail = _tails(costs, updates, n_once)
    act = _held(costs)
    nodes = costs.action_nodes
    best = 0.0
    for d in sorted(set(costs.stage_device.tolist())):
        mine = np.flatnonzero(costs.stage_device == d)
        if nodes[mine].sum() + n_once[d] == 0:
            continue  # a device without nodes finishes nothing
        work = m * float(t[mine, 0].sum() + t[mine, 3].sum())
        best = max(best, float(ef[mine].min()) + work + updates[d])
        if nodes[mine, 1:3].sum() + n_once[d] > 0:
            best = max(best, float(ex[mine].min()) + m * float(t[mine, 3].sum()) + updates[d])
        free = float(p.device_memory[d] - costs.params[d])
        for s in mine.tolist():
            by_f = float(ef[s]) + m * float(t[s, 0] + t[s, 1])  # its forwards, then its backwards' I
            by_x = float(ex[s]) + m * float(t[s, 1])  # its backwards' I after the earliest backward
            if nodes[s, 0] + nodes[s, 1] > 0:
                best = max(best, by_f)  # a node of its F or I ends there
            if nodes[s, 1] > 0:
                best = max(best, by_x)
            best = max(best, max(by_f, by_x) + float(tail[s]))  # -inf when no node follows
            if act[s] > 0 and np.isfinite(free):
                q = max(1, int(free // act[s]))
                loop = float(ex[s] - ef[s] - t[s, 0])
                after = max(0.0 if nodes[s, 1] > 0 else -np.inf, float(tail[s]))
                best = max(best, float(ef[s] + t[s, 0]) + ((m - 1) // q + 1) * loop + float(t[s, 1]) + after)
    return best


def _held(costs: StageCosts) -> np.ndarray:
    """Bytes per stage of forward tensors its own backward reads (live from forward to backward)."""
    act = np.zeros(costs.n_stages)
    for g in costs.groups:
        if g.part != PART_F or g.last_only:
            continue
        if g.device != int(costs.stage_device[g.stage]):
            continue
        if any(k[0] == g.stage and k[1] in (PART_I, PART_W) and k[2] == 0 for k in g.ends):
            act[g.stage] += g.nbytes
    return act
