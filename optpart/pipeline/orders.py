"""Schedules of a pipelined step on a shared placement: GPipe, 1F1B and list-scheduled orders.

Every function here takes a :class:`~optpart.pipeline.step.PipelineStep`, a placement of its
*base* nodes, and returns ``(start, finish)`` over the unrolled step's tasks (the node order of
:meth:`PipelineStep.task_index`), or ``None`` when the order cannot run on this placement.

* :func:`sequence_schedule` runs fixed per-device sequences as early as precedence allows
  (each device in its sequence's order, no reordering). It detects a deadlock (an order that
  waits on itself across devices) and answers ``None``.
* :func:`gpipe_schedule`: every device runs all forward work of micro-batch 0, 1, ..., M-1,
  then all backward work in the same micro-batch order, then the optimizer updates (Huang
  et al., *GPipe*, NeurIPS 2019). It cannot deadlock: the order is one global total order
  consistent with every edge.
* :func:`one_f_one_b_schedule`: the 1F1B order (Narayanan et al., *PipeDream*, SOSP 2019;
  the non-interleaved schedule of Megatron-LM): the device that holds stage ``s`` of ``S``
  runs ``S - s`` forward units, then alternates one backward and one forward unit. A unit
  is the device's work of one micro-batch in one pass, in topological order. The stage of a
  device is the rank of its first forward node; on a placement that is not stage-contiguous
  the order can deadlock (answer ``None``).
* :func:`list_schedule`: the canonical non-delay list schedule of the unrolled step with a
  given priority, the same simulation the evaluator uses (``docs/model.md`` section 2).
"""

from __future__ import annotations

import numpy as np

from .._docstrings import fill_doc
from ..evaluate import bottom_levels, canonical_schedule
from ..schedule.replay import replay
from .stages import anchors, forward_order
from .step import PipelineStep

__all__ = ["sequence_schedule", "gpipe_schedule", "one_f_one_b_schedule", "list_schedule",
           "priorities", "phase_of_tasks", "segments"]

Schedule = tuple[np.ndarray, np.ndarray]


@fill_doc
def phase_of_tasks(step: PipelineStep) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(node, micro_batch, phase)`` per unrolled task; phase 0 forward, 1 backward, 2 once.

    Parameters
    ----------
    %(step)s

    Returns
    -------
    tuple
        ``(node, micro_batch, phase)``: integer arrays over the unrolled tasks.
    """
    node, mb, _ = step.task_index()
    phase = np.where(step.once[node], 2, np.where(step.backward[node], 1, 0)).astype(np.int64)
    return node, mb, phase


@fill_doc
def sequence_schedule(step: PipelineStep, placement: np.ndarray, key: np.ndarray,
                      tie: np.ndarray | None = None) -> Schedule | None:
    """Run every device's tasks in increasing ``key`` order, each as early as possible.

    Parameters
    ----------
    %(step_placement)s
    key
        One number per unrolled task; a device runs its tasks by increasing key (ties: task
        index, or ``tie`` first when given: replaying a schedule passes start times as ``key``
        and finish times as ``tie``, so a zero-length task keeps its place).
    tie : numpy.ndarray, optional
        The first tie-break per task (default: none, task index only).

    Returns
    -------
    tuple of numpy.ndarray or None
        ``(start, finish)`` per task, or ``None`` when the sequences deadlock.
    """
    prob = step.unrolled()
    place = step.tile(placement)
    n, k = prob.n_nodes, prob.n_devices
    tie = np.zeros(n) if tie is None else np.asarray(tie, dtype=np.float64)
    order = np.lexsort((np.arange(n), tie, np.asarray(key, dtype=np.float64), place))
    counts = np.bincount(place, minlength=k)
    bounds = np.concatenate([[0], np.cumsum(counts)]).tolist()
    merged = _merge_sequences(prob, place.tolist(), order.tolist(), bounds)
    if merged is None:
        return None
    dur = prob.duration(place)
    start = np.asarray(replay(prob, place.tolist(), merged, dur.tolist(), prob.transfer_times(place).tolist()))
    return start, start + dur


def _merge_sequences(prob, place: list[int], seq: list[int], bounds: list[int]) -> list[int] | None:
    """The device sequences (device ``d`` runs ``seq[bounds[d]:bounds[d + 1]]`` in order) as one
    topological order that keeps each of them, or None when they wait on each other (deadlock).

    A device's next task is taken once all its predecessors are; a device is looked at again
    when a task it waits for becomes free, so each task and edge is seen once."""
    k = len(bounds) - 1
    head = bounds[:-1].copy()
    missing = np.diff(prob.in_ptr).tolist()
    out_ptr = prob.out_ptr.tolist()
    succ = prob.edge_dst[prob.out_edges].tolist()
    merged: list[int] = []
    work = list(range(k))
    while work:
        d = work.pop()
        while head[d] < bounds[d + 1]:
            v = seq[head[d]]
            if missing[v]:
                break
            merged.append(v)
            head[d] += 1
            for i in range(out_ptr[v], out_ptr[v + 1]):
                w = succ[i]
                missing[w] -= 1
                if missing[w] == 0:
                    e = place[w]
                    if e != d and head[e] < bounds[e + 1] and seq[head[e]] == w:
                        work.append(e)
    return merged if len(merged) == prob.n_nodes else None


def _topo_key(step: PipelineStep) -> np.ndarray:
    node, _, _ = step.task_index()
    return step.base.topo_rank[node].astype(np.float64)


def _order_key(step: PipelineStep, pos: np.ndarray) -> np.ndarray:
    """A :func:`sequence_schedule` key: by ``pos`` (integer per task), ties in topological order."""
    return pos * (step.base.n_nodes + 1) + _topo_key(step)


def _task_stages(step: PipelineStep, placement: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """``(micro_batch, phase, virtual stage, stage count)`` per unrolled task (:func:`segments`)."""
    node, mb, phase = phase_of_tasks(step)
    seg, n_seg = segments(step, np.asarray(placement))
    return mb, phase, seg[node], n_seg


@fill_doc
def segments(step: PipelineStep, placement: np.ndarray) -> tuple[np.ndarray, int]:
    """Virtual stage of every base node and the number of virtual stages.

    The forward sequence (:func:`~optpart.pipeline.stages.forward_order`) splits into maximal
    runs on one device; run ``j`` is virtual stage ``j`` of its forward nodes. A backward or
    once-per-step node takes the stage of its anchor (:func:`~optpart.pipeline.stages.anchors`),
    the forward work whose activations it reads. On a stage-contiguous placement the virtual
    stages are the devices in pipeline order; a device may hold several (a tied embedding and
    head, or a placement that is not stage-contiguous).

    Parameters
    ----------
    %(step_placement)s

    Returns
    -------
    tuple
        ``(stage, count)``: virtual stage per base node and the number of virtual stages.
    """
    p = step.base
    order = forward_order(step)
    if order.size == 0:
        return np.zeros(p.n_nodes, dtype=np.int64), 1
    dev = np.asarray(placement)[order]
    run = np.concatenate([[0], np.cumsum(dev[1:] != dev[:-1])])
    stage = run[anchors(step)]
    stage[order] = run
    return stage.astype(np.int64), int(run[-1]) + 1


@fill_doc
def gpipe_schedule(step: PipelineStep, placement: np.ndarray) -> Schedule:
    """GPipe: forwards before backwards on every device, micro-batches in order.

    Within the forward pass a device runs its work of micro-batch ``i`` in virtual stage ``j``
    in wavefront slot ``i + j`` (backward: ``i + J - 1 - j``), so that a device holding two
    stages (a tied embedding and head) keeps the pipeline going. When that order waits on
    itself (anchors of backward nodes are a heuristic), the plain order (micro-batch, then
    topological) is used, which never deadlocks: it is one global order consistent with
    every edge.

    Parameters
    ----------
    %(step_placement)s

    Returns
    -------
    %(unrolled_schedule)s
    """
    mb, phase, j, n_seg = _task_stages(step, placement)
    slot = np.where(phase == 0, mb + j, np.where(phase == 1, mb + n_seg - 1 - j, 0))
    width = step.micro_batches + n_seg
    out = sequence_schedule(step, placement, _order_key(step, phase * width + slot))
    if out is None:
        out = sequence_schedule(step, placement, _order_key(step, phase * step.micro_batches + mb))
    assert out is not None
    return out


@fill_doc
def one_f_one_b_schedule(step: PipelineStep, placement: np.ndarray) -> Schedule | None:
    """1F1B over the virtual stages; ``None`` when the order deadlocks on this placement.

    The work of virtual stage ``j`` of ``J`` runs ``min(M, J - j)`` forward units, then
    alternates one backward and one forward unit; a device orders the units of all its
    stages by that position (ties: topological order).

    Parameters
    ----------
    %(step_placement)s

    Returns
    -------
    tuple or None
        ``(start, finish)``: seconds per unrolled task, in the unrolled problem's node order.
        ``None`` when the order deadlocks on this placement.
    """
    m = step.micro_batches
    mb, phase, s, n_seg = _task_stages(step, placement)
    warm = np.minimum(m, n_seg - s)
    pos_f = np.where(mb < warm, mb, warm + 2 * (mb - warm) + 1)
    pos_b = warm + 2 * mb
    pos = np.where(phase == 0, pos_f, np.where(phase == 1, pos_b, 3 * m + n_seg + 1))
    return sequence_schedule(step, placement, _order_key(step, pos))


@fill_doc
def priorities(step: PipelineStep, placement: np.ndarray) -> dict[str, np.ndarray]:
    """Named priority vectors (higher runs first) for :func:`list_schedule`.

    ``bottom-level``: the unrolled step's bottom levels (ties: earlier micro-batch, as task
    index); ``micro-batch``: earlier micro-batches first, then bottom level;
    ``backward-first``: backward work before forward work (frees activations early, like
    1F1B), then earlier micro-batches, then bottom level.

    Parameters
    ----------
    %(step_placement)s

    Returns
    -------
    dict
        Name -> priority per unrolled task (float array; higher runs first).
    """
    prob = step.unrolled()
    place = step.tile(placement)
    bl = bottom_levels(prob, place)
    _, mb, phase = phase_of_tasks(step)
    span = float(bl.max()) + 1.0 if bl.size else 1.0
    m = step.micro_batches
    return {
        "bottom-level": bl,
        "micro-batch": (m - mb) * span + bl,
        "backward-first": ((phase >= 1) * (m + 1) + (m - mb)) * span + bl,
    }


@fill_doc
def list_schedule(step: PipelineStep, placement: np.ndarray, priority: np.ndarray) -> Schedule:
    """The non-delay list schedule of the unrolled step under ``priority`` (higher first).

    Parameters
    ----------
    %(step_placement)s
    priority
        One number per unrolled task; among ready tasks a device starts the highest first.

    Returns
    -------
    %(unrolled_schedule)s
    """
    return canonical_schedule(step.unrolled(), step.tile(placement), priority)
