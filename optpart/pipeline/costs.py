"""Stage costs of a pipelined plan, read off the operator graph (``docs/model.md`` section 7).

:func:`stage_costs` takes a step, a stage per base node and a device per stage and derives
what the stage-level simulator (:mod:`optpart.pipeline.simulate`) and the expansion into the
unrolled step (:mod:`optpart.pipeline.expand`) need:

* the **parts** of every per-micro-batch node: ``F`` (forward), ``I`` (the backward nodes of
  its stage from which a gradient sent to an earlier stage is computed: the path from the
  stage's output gradient to its input gradient) and ``W`` (the other backward nodes, which
  only feed parameter gradients); a full backward ``B`` runs ``I`` and ``W`` nodes together;
* every node's duration on its stage's device and its offset inside each action it can be
  part of: the runtime's own cost per action first (``step.action_overhead``), then the
  action's nodes one after another in topological order;
* the dependencies between actions of one micro-batch with their transfer times: ``F`` of a
  stage after ``F`` of every stage it reads from (and of the previous stage: torch's stages
  form a chain), a backward (``B`` or ``I``) after the stage's own ``F`` and the backwards of
  every stage it receives gradients from (and of the next stage); the transfer of a
  dependency is ``latency + bytes / bandwidth`` of everything that stage pair sends per
  micro-batch (0 on one device), so it covers each of its tensors;
* parameters (held all step, a tied parameter once more per other device using it),
  liveness groups of the tensors that outlive their action, and each action's internal peak.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .liveness import PART_F, PART_I, PART_ONCE, PART_W, liveness, transfer
from .step import PipelineStep

__all__ = ["StageCosts", "stage_costs", "replicas_of", "once_inputs"]



@dataclass
class StageCosts:
    """Everything the simulator needs about one assignment of nodes to stages and devices.

    Attributes
    ----------
    step : PipelineStep
    stage_of : numpy.ndarray
        Stage per base node.
    stage_device : numpy.ndarray
        Device per stage.
    part : numpy.ndarray
        ``PART_F``, ``PART_I``, ``PART_W`` or ``PART_ONCE`` per base node.
    dur : numpy.ndarray
        Seconds per base node on its stage's device.
    off, off_b : numpy.ndarray
        Start offset of each node in its ``F``/``I``/``W`` action, and (backward nodes) in the ``B``
        action (after the runtime's cost per action).
    action_time : numpy.ndarray
        ``(S, 4)``: seconds of ``F``, ``I``, ``W`` and ``B`` per stage, the runtime's cost per
        action included (an action without nodes takes that cost alone).
    action_nodes : numpy.ndarray
        ``(S, 4)``: how many nodes each of those actions runs (an empty action holds no node).
    f_deps, b_deps : list of list of (int, float)
        Per stage ``(producer stage, transfer seconds)`` for its forward / backward.
    params : numpy.ndarray
        Bytes held all step per device (parameters, gradients, optimizer state, inputs).
    replicas : tuple of (int, int)
        ``(update node, device)`` of every replicated tied parameter.
    groups : list of Group
        :func:`~optpart.pipeline.liveness.liveness`'s groups.
    internal : numpy.ndarray
        ``(S, 4)``: internal peak bytes (temporaries and tensors born and dead inside) of
        ``F``, ``I``, ``W``, ``B``.
    internal_at_end : numpy.ndarray
        ``(S, 4)``: of those, the bytes live at the action's last instant.
    once_nodes : list of numpy.ndarray
        Per device, its once-per-step nodes in topological order (replica ``j`` as ``-1 - j``).
    once_internal : numpy.ndarray
        Per device, a bound on the bytes its update phase adds (largest temporary, every output).
    static : numpy.ndarray
        Static memory per device of the unrolled step.
    cross_once : bool
        Some once node reads another once node on another device.
    once_order : numpy.ndarray
        The once nodes of every device, device after device (:attr:`once_nodes` joined).
    once_inputs : tuple
        :func:`once_inputs`.
    once_device, once_dur : numpy.ndarray
        Device and seconds of each once node of :attr:`once_order`.
    overhead : float
        The runtime's seconds per action (``step.action_overhead``), in every action's time.
    """

    step: PipelineStep
    stage_of: np.ndarray
    stage_device: np.ndarray
    part: np.ndarray
    dur: np.ndarray
    off: np.ndarray
    off_b: np.ndarray
    action_time: np.ndarray
    f_deps: list
    b_deps: list
    params: np.ndarray
    replicas: tuple
    groups: list
    internal: np.ndarray
    once_nodes: list
    once_internal: np.ndarray
    static: np.ndarray
    cross_once: bool = False
    once_order: np.ndarray = field(default=None, repr=False)
    internal_at_end: np.ndarray = field(default=None, repr=False)
    action_nodes: np.ndarray = field(default=None, repr=False)
    once_inputs: tuple = field(default=(), repr=False)
    once_device: np.ndarray = field(default=None, repr=False)
    once_dur: np.ndarray = field(default=None, repr=False)
    overhead: float = 0.0

    @property
    def n_stages(self) -> int:
        """Number of stages."""
        return int(self.stage_device.size)

    def device_of(self) -> np.ndarray:
        """Device index per base node.

        Returns
        -------
        numpy.ndarray
        """
        return self.stage_device[self.stage_of]


def _parts(step: PipelineStep, stage: np.ndarray) -> np.ndarray:
    """``PART_*`` per node: backward nodes are ``I`` when a gradient sent to an earlier stage
    depends on them, else ``W``; a later stage that sends no gradient back (it received nothing
    differentiable, token ids say) runs its whole backward in ``I``, as torch's runtime does
    (``optpart run``; the first stage runs it in ``W``, as torch does)."""
    p = step.base
    part = np.full(p.n_nodes, PART_W, dtype=np.int64)
    part[step.forward] = PART_F
    part[step.once] = PART_ONCE
    bwd = step.backward
    src, dst = p.edge_src, p.edge_dst
    sends = bwd[src] & bwd[dst] & (stage[dst] < stage[src])
    need = np.zeros(p.n_nodes, dtype=bool)
    need[src[sends]] = True
    in_ptr, in_edges = p.in_ptr, p.in_edges
    for v in p.topo[::-1].tolist():
        if need[v]:
            preds = src[in_edges[in_ptr[v]:in_ptr[v + 1]]]
            preds = preds[bwd[preds] & (stage[preds] == stage[v])]
            need[preds] = True
    part[bwd & need] = PART_I
    sending = np.zeros(int(stage.max()) + 1 if stage.size else 0, dtype=bool)
    sending[stage[src[sends]]] = True
    part[bwd & (stage > 0) & ~sending[stage]] = PART_I
    return part


def stage_costs(step: PipelineStep, stage_of: np.ndarray, stage_device) -> StageCosts:
    """Derive the stage costs of one assignment (module docstring).

    Parameters
    ----------
    step : PipelineStep
        The pipelined step.
    stage_of : numpy.ndarray
        Stage per base node (a valid chain: forward tensors go to the same or later stages,
        gradients to the same or earlier ones).
    stage_device : sequence of int
        Device per stage.

    Returns
    -------
    StageCosts
    """
    p = step.base
    stage = np.asarray(stage_of, dtype=np.int64)
    sdev = np.asarray(stage_device, dtype=np.int64)
    n_st = int(sdev.size)
    dev = sdev[stage]
    part = _parts(step, stage)
    dur = step.time / p.device_speed[dev]
    off = np.zeros(p.n_nodes)
    off_b = np.zeros(p.n_nodes)
    action_time = np.zeros((n_st, 4))
    action_nodes = np.zeros((n_st, 4), dtype=np.int64)
    topo = p.topo
    for key, mask in ((0, part == PART_F), (1, part == PART_I), (2, part == PART_W), (3, step.backward)):
        nodes = topo[mask[topo]]
        order = nodes[np.argsort(stage[nodes], kind="stable")]  # per stage, in topological order
        st = stage[order]
        cum = np.cumsum(dur[order])  # offsets from one running sum, so that a node starts exactly
        excl = np.concatenate([[0.0], cum[:-1]])  # where the one before it ends (zero-length nodes)
        first = np.searchsorted(st, np.arange(n_st), side="left")
        last = np.searchsorted(st, np.arange(n_st), side="right") - 1
        base = excl[np.minimum(first, max(order.size - 1, 0))] if order.size else np.zeros(n_st)
        (off_b if key == 3 else off)[order] = excl - base[st]
        has = last >= first
        action_time[has, key] = cum[last[has]] - base[has]
        action_nodes[:, key] = np.maximum(last - first + 1, 0)
    overhead = float(step.action_overhead)  # the runtime's own cost, before an action's nodes
    off[~step.once] += overhead
    off_b[step.backward] += overhead
    action_time += overhead
    f_deps, b_deps = _dependencies(step, stage, sdev, part)
    replicas = replicas_of(step, stage, sdev)
    params = np.bincount(dev, weights=p.param_bytes, minlength=p.n_devices)
    for owner, d in replicas:
        params[d] += float(p.param_bytes[owner])
    groups, internal, at_end = liveness(step, stage, sdev, part, dur, off, off_b, action_time, replicas)
    once_nodes, once_internal, extra, cross_once = _once(step, stage, sdev, replicas)
    params = params + extra
    per = ~step.once
    m = step.micro_batches
    mem = p.param_bytes + m * (step.output_bytes + step.temp_bytes)
    mem = np.where(per, mem, p.param_bytes + step.output_bytes + step.temp_bytes)
    static = np.bincount(dev, weights=mem, minlength=p.n_devices)
    for owner, d in replicas:
        static[d] += float(p.param_bytes[owner] + step.output_bytes[owner] + step.temp_bytes[owner])
    costs = StageCosts(step, stage, sdev, part, dur, off, off_b, action_time, f_deps, b_deps, params, replicas,
                       groups, internal, once_nodes, once_internal, static, cross_once)
    costs.internal_at_end = at_end
    costs.action_nodes = action_nodes
    costs.overhead = overhead
    costs.once_order = np.concatenate(once_nodes) if once_nodes else np.zeros(0, dtype=np.int64)
    order = costs.once_order
    owner = np.array([v if v >= 0 else replicas[-1 - v][0] for v in order.tolist()], dtype=np.int64)
    costs.once_device = np.array([int(dev[v]) if v >= 0 else replicas[-1 - v][1] for v in order.tolist()],
                                 dtype=np.int64)
    costs.once_dur = step.time[owner] / p.device_speed[costs.once_device] if order.size else np.zeros(0)
    costs.once_inputs = once_inputs(costs)
    return costs


def _dependencies(step, stage, sdev, part):
    p = step.base
    n_st = sdev.size
    per = ~step.once
    src, dst, eb = p.edge_src, p.edge_dst, step.edge_bytes
    e = np.flatnonzero(per[src] & per[dst] & (stage[src] != stage[dst]))
    fwd_bytes = np.zeros((n_st, n_st))
    bwd_bytes = np.zeros((n_st, n_st))
    # one tensor per (producer, consumer stage): its largest edge
    key = src[e] * n_st + stage[dst[e]]
    uniq, inv = np.unique(key, return_inverse=True)
    size = np.zeros(uniq.size)
    np.maximum.at(size, inv, eb[e])
    prod, cons = uniq // n_st, uniq % n_st
    is_f = part[prod] == PART_F
    np.add.at(fwd_bytes, (stage[prod[is_f]], cons[is_f]), size[is_f])
    np.add.at(bwd_bytes, (stage[prod[~is_f]], cons[~is_f]), size[~is_f])
    fwd_edge = np.zeros((n_st, n_st), dtype=bool)  # an edge pays the link's latency even at 0 bytes
    bwd_edge = np.zeros((n_st, n_st), dtype=bool)
    fwd_edge[stage[prod[is_f]], cons[is_f]] = True
    bwd_edge[stage[prod[~is_f]], cons[~is_f]] = True
    f_deps, b_deps = [], []
    for s in range(n_st):
        fs = set(np.flatnonzero(fwd_edge[:, s]).tolist()) | ({s - 1} if s > 0 else set())
        bs = set(np.flatnonzero(bwd_edge[:, s]).tolist()) | ({s + 1} if s + 1 < n_st else set())
        f_deps.append([(u, transfer(p, int(sdev[u]), int(sdev[s]), fwd_bytes[u, s])) for u in sorted(fs)])
        b_deps.append([(u, transfer(p, int(sdev[u]), int(sdev[s]), bwd_bytes[u, s])) for u in sorted(bs)])
    return f_deps, b_deps


def replicas_of(step: PipelineStep, stage, sdev) -> tuple[tuple[int, int], ...]:
    """``(update node, device)`` for every tied parameter part on another device than its owner.

    Parameters
    ----------
    step : PipelineStep
        The step.
    stage : numpy.ndarray
        Stage per base node.
    sdev : sequence of int
        Device per stage.

    Returns
    -------
    tuple of (int, int)
        Sorted; a device holding several parts of one parameter holds one replica.
    """
    sdev = np.asarray(sdev, dtype=np.int64)
    out = set()
    for tie in step.tied():
        home = int(sdev[stage[tie.parts[0]][0]])
        for part in tie.parts[1:]:
            d = int(sdev[stage[part[0]]])
            if d != home:
                out.add((int(tie.owner), d))
    return tuple(sorted(out))


def _once(step, stage, sdev, replicas):
    """Per device its once nodes in topological order, their internal peak, and bytes held all
    step for once-to-once tensors between devices (rare; counted conservatively)."""
    p = step.base
    k = p.n_devices
    dev = sdev[stage]
    lists: list[list[int]] = [[] for _ in range(k)]
    for v in p.topo[step.once[p.topo]].tolist():
        lists[int(dev[v])].append(v)
    for j, (_, d) in enumerate(replicas):
        lists[d].append(-1 - j)
    internal = np.zeros(k)
    extra = np.zeros(k)
    for d in range(k):
        nodes = np.array([v if v >= 0 else replicas[-1 - v][0] for v in lists[d]], dtype=np.int64)
        if nodes.size:
            internal[d] = float(step.temp_bytes[nodes].max() + step.output_bytes[nodes].sum())
    src, dst = p.edge_src, p.edge_dst
    oo = step.once[src] & step.once[dst] & (dev[src] != dev[dst])
    np.add.at(extra, dev[dst[oo]], step.edge_bytes[oo])
    return [np.array(x, dtype=np.int64) for x in lists], internal, extra, bool(oo.any())


def once_inputs(costs: "StageCosts") -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The inputs of the once-per-step nodes (replicas included) as flat arrays.

    Parameters
    ----------
    costs : StageCosts
        The stage costs.

    Returns
    -------
    tuple of numpy.ndarray
        ``(consumer slot, producer node, producer is once, transfer seconds, consumer device)``
        where the slot numbers once nodes ``0..`` in :attr:`StageCosts.once_order`.
    """
    step, p = costs.step, costs.step.base
    dev = costs.device_of()
    slot_of = {int(v): i for i, v in enumerate(costs.once_order.tolist())}
    rows = []
    for i, v in enumerate(costs.once_order.tolist()):
        owner = v if v >= 0 else costs.replicas[-1 - v][0]
        d = int(dev[owner]) if v >= 0 else costs.replicas[-1 - v][1]
        for e in p.in_edges[p.in_ptr[owner]:p.in_ptr[owner + 1]].tolist():
            u = int(p.edge_src[e])
            rows.append((i, u, bool(step.once[u]), transfer(p, int(dev[u]), d, float(step.edge_bytes[e])), d))
    if not rows:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z.astype(bool), np.zeros(0), z
    a = list(zip(*rows))
    return (np.array(a[0], dtype=np.int64), np.array(a[1], dtype=np.int64), np.array(a[2], dtype=bool),
            np.array(a[3], dtype=np.float64), np.array(a[4], dtype=np.int64))
