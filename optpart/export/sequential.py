"""A device map's training step as accelerate runs it: one operator at a time, in program order.

``accelerate.dispatch_model`` runs a ``device_map`` one module after another: a hook moves each
module's inputs to its device, so the devices take turns and no two compute at once for one
batch (the backward pass follows the same order in reverse, autograd moving gradients back).
:func:`sequential_run` scores a placement that way:

* the step's nodes run one after another in program order (the problem's node order, which the
  PyTorch importer writes as the forward, backward and optimizer ran; a stable topological
  order when the node order is not one), each for ``time / speed`` of its device;
* a tensor that a node on another device reads is moved once to that device, right after its
  producer runs, taking ``latency + bytes / bandwidth`` of that link (the largest read of it
  there); edges of 0 bytes (ordering, shape-only reads) move nothing;
* the time is the sum of both, and memory per device is the project's one liveness rule
  (:func:`optpart.model.memory.peak_memory`, docs/model.md section 3) applied to that
  schedule: parameters, buffers, gradients and optimizer state of the device's modules all
  step, activations while they are alive.

Every read of bytes on another device arrives before its reader starts;
:func:`optpart.evaluate.evaluate` with these start times scores the schedule (memory and
constraints).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from ..model.problem import Problem

__all__ = ["SequentialRun", "sequential_run", "program_order"]


@dataclass(frozen=True)
class SequentialRun:
    """One step run one node at a time: ``start`` per node (seconds), the total ``time``, and its parts.

    ``compute``: seconds of node run time; ``transfer``: seconds of moves between devices;
    ``transfers``: how many tensors were moved (one per tensor and receiving device).
    """

    start: np.ndarray
    time: float
    compute: float
    transfer: float
    transfers: int


def program_order(problem: Problem) -> np.ndarray:
    """The node order when it is topological, else the topological order closest to it.

    Parameters
    ----------
    problem : Problem
        The problem.

    Returns
    -------
    numpy.ndarray of int
        Node indices, each after all its predecessors; ties go to the lower index.
    """
    n = problem.n_nodes
    if not problem.n_edges or bool(np.all(problem.edge_src < problem.edge_dst)):
        return np.arange(n, dtype=np.int64)
    indeg = np.bincount(problem.edge_dst, minlength=n)
    heap = np.flatnonzero(indeg == 0).tolist()
    heapq.heapify(heap)
    out = []
    while heap:
        u = heapq.heappop(heap)
        out.append(u)
        for e in problem.out_edges[problem.out_ptr[u]:problem.out_ptr[u + 1]].tolist():
            w = int(problem.edge_dst[e])
            indeg[w] -= 1
            if indeg[w] == 0:
                heapq.heappush(heap, w)
    return np.asarray(out, dtype=np.int64)


def sequential_run(problem: Problem, placement: np.ndarray) -> SequentialRun:
    """The placement's step run one node at a time, with every cross-device read moved once.

    Parameters
    ----------
    problem : Problem
        The problem with its devices and links.
    placement : numpy.ndarray of int, shape (n_nodes,)
        Device index per node.

    Returns
    -------
    SequentialRun
        The schedule and its time (see the module docstring).
    """
    placement = np.asarray(placement, dtype=np.int64)
    n, k = problem.n_nodes, max(problem.n_devices, 1)
    duration = problem.duration(placement)
    src, dst = problem.edge_src, problem.edge_dst
    comm = problem.transfer_times(placement)
    moved = (placement[src] != placement[dst]) & (problem.edge_bytes > 0)
    # One move per (tensor, receiving device): the slowest read of it there.
    after = np.zeros(n)
    transfers = 0
    if moved.any():
        key = src[moved] * k + placement[dst[moved]]
        uniq, inv = np.unique(key, return_inverse=True)
        cost = np.zeros(uniq.size)
        np.maximum.at(cost, inv, comm[moved])
        np.add.at(after, uniq // k, cost)
        transfers = int(uniq.size)
    order = program_order(problem)
    step = duration[order] + after[order]
    clock = np.cumsum(step)
    start = np.empty(n)
    start[order] = np.concatenate([[0.0], clock[:-1]]) if n else np.zeros(0)
    return SequentialRun(start=start, time=float(clock[-1]) if n else 0.0, compute=float(duration.sum()),
                         transfer=float(after.sum()), transfers=transfers)
