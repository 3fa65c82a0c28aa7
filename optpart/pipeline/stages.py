"""Stages of a pipelined step: the forward pass as a chain of cut points, every node anchored on it.

A stage is a contiguous part of the forward pass with the backward and optimizer nodes that
belong to it (``docs/model.md`` section 7). :func:`forward_chain` lays the step out once:

* **positions**: the forward nodes in topological (program) order, a node without forward
  predecessors (an input, a weight view) moved to just before its first forward consumer;
  cutting before position ``b`` puts positions ``< b`` in earlier stages, so every forward
  edge goes to the same or a later stage for any set of cuts;
* **anchors** of the other nodes: a backward node takes the latest position among its forward
  predecessors (the activations it reads), the anchors of its backward successors (its
  gradient flows to earlier stages, never later) and of the optimizer nodes it feeds (so a
  layer's weight gradient sits with the layer, whose update is colocated with it), and, in
  the module of a tied parameter's other part, at least that part's position (the head's
  weight gradient with the head, whose replica it feeds); an optimizer node the position of
  its parameter's colocation group (else its predecessors').
  So for every set of cuts the stage of a node (the number of cuts at or before its anchor)
  sends forward tensors only to later stages and gradients only to earlier ones;
* **forbidden cuts**: inside a colocation group (``--no-split`` modules, a parameter with its
  users), where a group's anchors span several positions. A parameter tied across modules
  (:func:`~optpart.pipeline.step.tied_parameters`) is split into its parts, each kept whole;
* **per-position costs** (per micro-batch, at speed 1): forward and backward time, parameter
  bytes (a tied parameter's bytes also at each other part: it is replicated), activation
  bytes held from forward to backward, and the bytes crossing each cut forward (tensors read
  by later stages) and backward (gradients read by earlier stages).

:func:`stage_of_cuts` turns cut positions into a stage per node.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .step import PipelineStep

__all__ = ["ForwardChain", "forward_chain", "forward_order", "stage_of_cuts"]


@dataclass(frozen=True)
class ForwardChain:
    """The forward pass as a chain (module docstring); arrays over positions ``0..P-1``.

    Attributes
    ----------
    order : numpy.ndarray
        Forward node per position.
    anchor : numpy.ndarray
        Position per base node.
    allowed : numpy.ndarray
        Bool per boundary ``0..P``: a cut before position ``b`` is allowed (never at 0 or P).
    fwd_time, bwd_time, once_time : numpy.ndarray
        Seconds (speed 1, one micro-batch; once-per-step nodes once) anchored per position.
    param_bytes, act_bytes : numpy.ndarray
        Bytes held all step, and per micro-batch from its forward to its backward, per position.
    cut_fwd, cut_bwd : numpy.ndarray
        Bytes per micro-batch crossing boundary ``b`` (``0..P``) forward and backward.
    """

    order: np.ndarray
    anchor: np.ndarray
    allowed: np.ndarray
    fwd_time: np.ndarray
    bwd_time: np.ndarray
    once_time: np.ndarray
    param_bytes: np.ndarray
    act_bytes: np.ndarray
    cut_fwd: np.ndarray
    cut_bwd: np.ndarray

    @property
    def n_positions(self) -> int:
        """Number of forward positions ``P``."""
        return int(self.order.size)


def forward_order(step: PipelineStep) -> np.ndarray:
    """The forward nodes in chain order: topological (program) order, a node without forward
    predecessors moved to just before its first forward consumer.

    Parameters
    ----------
    step : PipelineStep
        The pipelined step.

    Returns
    -------
    numpy.ndarray
        Base node indices of the forward pass.
    """
    p = step.base
    fwd = step.forward
    nodes = p.topo[fwd[p.topo]]
    key = p.topo_rank[nodes].astype(np.float64)
    src, dst = p.edge_src, p.edge_dst
    ff = fwd[src] & fwd[dst]
    has_fwd_pred = np.zeros(p.n_nodes, dtype=bool)
    has_fwd_pred[dst[ff]] = True
    first_use = np.full(p.n_nodes, np.inf)
    np.minimum.at(first_use, src[ff], p.topo_rank[dst[ff]].astype(np.float64))
    move = ~has_fwd_pred[nodes] & np.isfinite(first_use[nodes])
    key[move] = first_use[nodes[move]] - 0.5
    return nodes[np.lexsort((p.topo_rank[nodes], key))]


def _parts(step: PipelineStep) -> list[np.ndarray]:
    """Colocation groups with tied parameters split into their parts."""
    tied = {t.group: t.parts for t in step.tied()}
    out = []
    for g, grp in enumerate(step.base.groups):
        out += list(tied.get(g, (grp,)))
    return out


def forward_chain(step: PipelineStep) -> ForwardChain:
    """Lay the step out as a chain of forward positions (module docstring).

    Parameters
    ----------
    step : PipelineStep
        The pipelined step.

    Returns
    -------
    ForwardChain
    """
    p = step.base
    n = p.n_nodes
    order = forward_order(step)
    n_pos = int(order.size)
    anchor = np.full(n, -1, dtype=np.int64)
    anchor[order] = np.arange(n_pos)
    forbid = np.zeros(n_pos + 2, dtype=np.int64)  # difference array over boundaries

    def forbid_span(lo: int, hi: int) -> None:  # boundaries lo+1..hi may not be cut
        if hi > lo:
            forbid[lo + 1] += 1
            forbid[hi + 1] -= 1

    parts = _parts(step)
    part_of = np.full(n, -1, dtype=np.int64)
    part_hi = np.full(len(parts), -1, dtype=np.int64)
    for j, members in enumerate(parts):
        part_of[members] = j
        f = anchor[members][step.forward[members]]
        if f.size:
            forbid_span(int(f.min()), int(f.max()))
            part_hi[j] = int(f.max())
    once, fwd = step.once, step.forward
    tied_module_part = _tied_modules(step, parts, part_hi)
    fixed = once & (part_of >= 0)
    fixed_idx = np.flatnonzero(fixed)
    anchor[fixed_idx] = part_hi[part_of[fixed_idx]]  # -1 (decided below) for a group without forward nodes
    src, dst = p.edge_src, p.edge_dst
    in_ptr, in_edges, out_ptr, out_edges = p.in_ptr, p.in_edges, p.out_ptr, p.out_edges
    bwd = step.backward
    for v in p.topo[::-1].tolist():
        if not bwd[v]:
            continue
        lo = 0
        preds = src[in_edges[in_ptr[v]:in_ptr[v + 1]]]
        fp = preds[fwd[preds]]
        if fp.size:
            lo = int(anchor[fp].max())
        succ = dst[out_edges[out_ptr[v]:out_ptr[v + 1]]]
        succ = succ[(bwd[succ] | fixed[succ]) & (anchor[succ] >= 0)]
        if succ.size:
            lo = max(lo, int(anchor[succ].max()))
        if v in tied_module_part:  # the backward of a tied parameter's other part stays with it
            lo = max(lo, int(part_hi[tied_module_part[v]]))
        j = part_of[v]
        if j >= 0 and part_hi[j] >= 0:
            if lo > part_hi[j]:
                forbid_span(int(part_hi[j]), lo)
            lo = max(lo, int(part_hi[j]))
        anchor[v] = lo
    for v in p.topo.tolist():  # optimizer nodes outside groups: with what feeds them
        if anchor[v] < 0:
            preds = src[in_edges[in_ptr[v]:in_ptr[v + 1]]]
            anchor[v] = int(anchor[preds].max()) if preds.size and (anchor[preds] >= 0).all() else 0
    anchor = np.maximum(anchor, 0)
    for j, members in enumerate(parts):  # groups without forward members: their anchors' span stays whole
        if part_hi[j] < 0 and members.size > 1:
            forbid_span(int(anchor[members].min()), int(anchor[members].max()))
    allowed = np.cumsum(forbid)[:n_pos + 1] == 0
    allowed[0] = False
    if n_pos:
        allowed[n_pos] = False
    return _costs(step, order, anchor, allowed, parts)


def _tied_modules(step: PipelineStep, parts: list[np.ndarray], part_hi: np.ndarray) -> dict[int, int]:
    """Backward node -> part index, for the backward nodes in the module of a tied parameter's
    other part (not the update's): they belong to that part's stage."""
    p = step.base
    if p.node_meta is None:
        return {}
    index = {}
    j = 0
    roots: dict[str, int] = {}
    tied = {t.group: t for t in step.tied()}
    for g, grp in enumerate(p.groups):
        got = tied.get(g)
        if got is None:
            j += 1
            continue
        for k, part in enumerate(got.parts):
            if k > 0 and part_hi[j + k] >= 0:
                mods = {p.node_meta[v].get("module") for v in part.tolist()}
                for mod in mods:
                    if isinstance(mod, str) and mod:
                        roots[mod] = j + k
        j += len(got.parts)
    if not roots:
        return index
    for v in np.flatnonzero(step.backward).tolist():
        mod = p.node_meta[v].get("module")
        if isinstance(mod, str) and mod:
            for root, k in roots.items():
                if mod == root or mod.startswith(root + "."):
                    index[v] = k
                    break
    return index


def _costs(step: PipelineStep, order: np.ndarray, anchor: np.ndarray, allowed: np.ndarray,
           parts: list[np.ndarray]) -> ForwardChain:
    p = step.base
    n_pos = int(order.size)
    fwd, bwd, once = step.forward, step.backward, step.once
    t = step.time
    size = max(n_pos, 1)
    fwd_time = np.bincount(anchor[fwd], weights=t[fwd], minlength=size)
    bwd_time = np.bincount(anchor[bwd], weights=t[bwd], minlength=size)
    once_time = np.bincount(anchor[once], weights=t[once], minlength=size)
    param = np.bincount(anchor, weights=p.param_bytes, minlength=size)
    for tie in step.tied():  # a tied parameter is held again by every stage of another part
        for part in tie.parts[1:]:
            param[int(anchor[part].max())] += float(p.param_bytes[tie.owner])
    src, dst, eb = p.edge_src, p.edge_dst, step.edge_bytes
    per = ~once
    # activations: forward outputs read by backward nodes, held from forward to backward
    fb = fwd[src] & bwd[dst]
    saved = np.zeros(p.n_nodes, dtype=bool)
    saved[src[fb]] = True
    act = np.bincount(anchor[saved], weights=step.output_bytes[saved], minlength=size)
    # bytes crossing each boundary: a tensor once per producer, its farthest consumer
    cut_fwd = np.zeros(n_pos + 2)
    cut_bwd = np.zeros(n_pos + 2)
    e = np.flatnonzero(per[src] & per[dst])
    a_src, a_dst = anchor[src[e]], anchor[dst[e]]
    fe = e[fwd[src[e]] & (a_dst > a_src)]
    _spans(cut_fwd, src[fe], anchor[src[fe]] + 1, anchor[dst[fe]] + 1, eb[fe], p.n_nodes, farthest=True)
    be = e[bwd[src[e]] & (a_dst < a_src)]
    _spans(cut_bwd, src[be], anchor[dst[be]] + 1, anchor[src[be]] + 1, eb[be], p.n_nodes, farthest=False)
    return ForwardChain(order, anchor, allowed, fwd_time[:size], bwd_time[:size], once_time[:size],
                        param[:size], act[:size], np.cumsum(cut_fwd)[:n_pos + 1], np.cumsum(cut_bwd)[:n_pos + 1])


def _spans(diff: np.ndarray, producer: np.ndarray, lo: np.ndarray, hi: np.ndarray, nbytes: np.ndarray,
           n: int, farthest: bool) -> None:
    """Add each producer's tensor (its largest edge) over boundaries ``[lo, hi)``: one span per
    producer, from its own side to its farthest consumer."""
    if producer.size == 0:
        return
    size = np.zeros(n)
    np.maximum.at(size, producer, nbytes)
    if farthest:  # forward: lo is fixed per producer, hi the farthest consumer
        start = np.full(n, -1, dtype=np.int64)
        stop = np.full(n, -1, dtype=np.int64)
        np.maximum.at(start, producer, lo)
        np.maximum.at(stop, producer, hi)
    else:  # backward: hi is fixed per producer, lo the farthest (earliest) consumer
        start = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        stop = np.full(n, -1, dtype=np.int64)
        np.minimum.at(start, producer, lo)
        np.maximum.at(stop, producer, hi)
    u = np.unique(producer)
    np.add.at(diff, start[u], size[u])
    np.add.at(diff, stop[u], -size[u])


def stage_of_cuts(chain: ForwardChain, cuts) -> np.ndarray:
    """Stage per base node for cuts before positions ``cuts`` (sorted, allowed boundaries).

    Parameters
    ----------
    chain : ForwardChain
        The step's chain.
    cuts : sequence of int
        Boundaries ``1..P-1``, increasing.

    Returns
    -------
    numpy.ndarray
        Stage index per base node (``len(cuts) + 1`` stages).
    """
    return np.searchsorted(np.asarray(cuts, dtype=np.int64), chain.anchor, side="right").astype(np.int64)
