"""Stage-contiguous placements of a pipelined step.

A pipeline stage is a contiguous run of the forward pass (in :func:`forward_order`) together with
the backward and optimizer work that belongs to it. Every node gets an **anchor**: a position
in the forward sequence. A forward node is its own anchor (a forward source, such as an
input or a weight view, takes the earliest anchor of its forward readers); a backward or
once-per-step node takes the latest anchor among its forward predecessors (the activations
it reads), else the earliest among its predecessors (gradients flow to earlier layers), else
(no predecessor) the latest among its successors; a colocation group takes
the anchor of its longest-running member. The forward sequence, weighted by the time anchored
at each position, is then cut into ``S`` contiguous stages of least bottleneck weight
(binary search over the bottleneck with a greedy sweep, the classic linear-partition
argument), and stage ``s`` goes to device ``s``.
"""

from __future__ import annotations

import numpy as np

from .._docstrings import fill_doc
from .step import PipelineStep

__all__ = ["anchors", "forward_order", "stage_placement", "balanced_cuts", "position_weights", "cut_placement"]


@fill_doc
def forward_order(step: PipelineStep) -> np.ndarray:
    """The forward nodes as late as possible: by decreasing bottom level within the forward
    pass (run times, no communication), ties in topological order (so still a topological
    order). A reshape of the targets sits next to the loss, a weight view next to its matmul.

    Parameters
    ----------
    %(step)s

    Returns
    -------
    numpy.ndarray
        Base node indices of the forward pass, a topological order.
    """
    p = step.base
    fwd = step.forward
    bl = np.zeros(p.n_nodes)
    t = p.time
    for v in p.topo[::-1].tolist():
        if fwd[v]:
            succ = _forward_successors(step, v)
            bl[v] = t[v] + (bl[succ].max() if succ.size else 0.0)
    nodes = np.flatnonzero(fwd)
    return nodes[np.lexsort((p.topo_rank[nodes], -bl[nodes]))]


def _forward_successors(step: PipelineStep, v: int) -> np.ndarray:
    """The successors of base node ``v`` that are forward nodes."""
    p = step.base
    succ = p.edge_dst[p.out_edges[p.out_ptr[v]:p.out_ptr[v + 1]]]
    return succ[step.forward[succ]]


@fill_doc
def anchors(step: PipelineStep) -> np.ndarray:
    """Position in the forward sequence that every base node belongs to (see module docstring).

    Parameters
    ----------
    %(step)s

    Returns
    -------
    numpy.ndarray
        Forward position (int) per base node, ``0..n_forward-1``.
    """
    p = step.base
    n = p.n_nodes
    fwd = step.forward
    order = forward_order(step)
    anchor = np.full(n, -1, dtype=np.int64)
    anchor[order] = np.arange(order.size)
    src, dst = p.edge_src, p.edge_dst
    in_edges, in_ptr = p.in_edges, p.in_ptr
    out_edges, out_ptr = p.out_edges, p.out_ptr
    for v in p.topo[::-1].tolist():  # forward sources (inputs, weight views) go with their readers
        if fwd[v] and in_ptr[v] == in_ptr[v + 1]:
            succ = _forward_successors(step, v)
            if succ.size:
                anchor[v] = int(anchor[succ].min())
    for v in p.topo.tolist():
        if fwd[v]:
            continue
        preds = src[in_edges[in_ptr[v]:in_ptr[v + 1]]]
        if preds.size:
            f = preds[fwd[preds]]
            # the activations it reads; else the earliest layer its gradients come from
            anchor[v] = int(anchor[f].max()) if f.size else int(anchor[preds].min())
    for v in p.topo[::-1].tolist():
        if anchor[v] < 0:
            succ = dst[out_edges[out_ptr[v]:out_ptr[v + 1]]]
            anchor[v] = int(anchor[succ].max()) if succ.size else 0
    anchor = np.maximum(anchor, 0)
    time = step.time
    for grp in p.groups:
        anchor[grp] = anchor[grp[int(np.argmax(time[grp]))]]
    return anchor


def balanced_cuts(weight: np.ndarray, n_stages: int) -> np.ndarray:
    """Stage index per position: ``n_stages`` contiguous runs minimising the heaviest run.

    Parameters
    ----------
    weight
        Non-negative weight per position.
    n_stages
        Number of runs (>= 1).

    Returns
    -------
    numpy.ndarray
        Stage per position, non-decreasing, in ``0..n_stages-1``.
    """
    w = np.asarray(weight, dtype=np.float64)
    if w.size == 0:
        return np.zeros(0, dtype=np.int64)
    prefix = np.concatenate([[0.0], np.cumsum(w)])

    def sweep(cap: float) -> np.ndarray | None:
        stage = np.empty(w.size, dtype=np.int64)
        lo, s = 0, 0
        while lo < w.size:
            hi = int(np.searchsorted(prefix, prefix[lo] + cap * (1 + 1e-12), side="right")) - 1
            hi = max(hi, lo + 1)
            stage[lo:hi] = s
            lo, s = hi, s + 1
        return stage if s <= n_stages else None

    lo, hi = float(w.max()), float(prefix[-1])
    best = sweep(hi)
    for _ in range(60):
        if hi - lo <= 1e-9 * max(1.0, hi):
            break
        mid = 0.5 * (lo + hi)
        got = sweep(mid)
        if got is None:
            lo = mid
        else:
            hi, best = mid, got
    return best


@fill_doc
def stage_placement(step: PipelineStep, n_stages: int | None = None,
                    extra_weight: np.ndarray | None = None) -> np.ndarray:
    """A stage-contiguous placement: forward sequence cut into balanced stages, stage s on device s.

    Parameters
    ----------
    %(step)s
    n_stages
        Number of stages (default: every device).
    extra_weight
        Optional weight per base node added to its time when balancing (e.g. a memory term).

    Returns
    -------
    numpy.ndarray
        Device index per base node; pinned nodes (and their groups) keep their pin.
    """
    p = step.base
    s = p.n_devices if n_stages is None else max(1, min(int(n_stages), p.n_devices))
    anchor = anchors(step)
    weight = position_weights(step, anchor, extra_weight)
    return cut_placement(step, anchor, balanced_cuts(weight, s))


@fill_doc
def position_weights(step: PipelineStep, anchor: np.ndarray, extra_weight: np.ndarray | None = None) -> np.ndarray:
    """Work anchored at every forward position: a node's time over the step (``M`` copies of a
    per-micro-batch node, one of a once node), plus ``extra_weight``.

    Parameters
    ----------
    %(step)s
    anchor
        :func:`anchors` of the step.
    extra_weight
        Optional extra weight per base node (e.g. a memory term), added to its time.

    Returns
    -------
    numpy.ndarray
        Weight (seconds at mean device speed, plus ``extra_weight``) per forward position.
    """
    p = step.base
    n_fwd = int(anchor.max()) + 1 if anchor.size else 0
    per = np.where(step.once, 1.0, float(step.micro_batches))
    w = step.time * per / p.device_speed.mean()
    if extra_weight is not None:
        w = w + np.asarray(extra_weight, dtype=np.float64)
    return np.bincount(anchor, weights=w, minlength=n_fwd)


@fill_doc
def cut_placement(step: PipelineStep, anchor: np.ndarray, stage: np.ndarray) -> np.ndarray:
    """Device per base node from a stage per forward position (stage ``s`` on device ``s``).

    Parameters
    ----------
    %(step)s
    anchor
        :func:`anchors` of the step.
    stage
        Stage (device index) per forward position.

    Returns
    -------
    numpy.ndarray
        Device index per base node; pinned nodes (and their groups) keep their pin.
    """
    p = step.base
    placement = np.asarray(stage, dtype=np.int64)[anchor]
    pinned = np.flatnonzero(p.pin >= 0)
    placement[pinned] = p.pin[pinned]
    for grp in p.groups:
        pins = p.pin[grp]
        if (pins >= 0).any():
            placement[grp] = pins[pins >= 0][0]
    return placement
