"""The critical path with the communication that memory forces (a lower bound, both memory models).

Along any path ``p_1 -> ... -> p_L`` of the DAG the makespan is at least the sum of the
nodes' fastest durations plus the transfers of the path edges whose ends sit on different
devices. A *run* of consecutive path nodes on one device must fit that device, so every
stretch of the path that fits no device alone contains at least one device change. The
cheapest set of path edges that cuts every such stretch (a dynamic programme over the
path, exact for this relaxation) is a lower bound on the communication the path pays.

What a run surely holds on its device, whatever the schedule (docs/model.md section 3):

* ``static``: the ``memory`` of every node of the run (held all step);
* ``peak``: the ``param_bytes`` of every node of the run (held all step) and, when a
  node ``x`` of the run with a positive time starts, its temporaries, its output, its
  inputs (one tensor per producer) and the output of every earlier run node with a
  consumer later in the run: such a tensor is live on the run's device from its
  producer's start until that consumer finishes, an interval that contains ``S(x)``.
  A zero-time node holds its parameters, temporaries and output only.

Both lists shrink with the run, so "fits" is monotone and each path end has one earliest
feasible start (two pointers). The path is the communication-free critical path at the
fastest speeds. Valid for every placement (memory only removes placements); tests compare
it with brute-force and planted optima (tests/test_exact_bounds.py).
"""

from __future__ import annotations

from collections import deque

import numpy as np

from ...model.paths import critical_path_nodes
from ...model.problem import Problem
from .exact_bounds import min_transfer
from .exact_times import durations, transfer_table

__all__ = ["memory_path_bound"]


def _run_fits(problem: Problem, nodes: list, memory_model: str, cap: float):
    """A test ``fits(i, j)``: whether path positions ``i..j`` surely fit one device of ``cap`` bytes."""
    nodes_a = np.asarray(nodes, dtype=np.int64)
    if memory_model == "static":
        held = np.concatenate([[0.0], np.cumsum(problem.memory[nodes_a].astype(np.float64))])
        return lambda i, j: held[j + 1] - held[i] <= cap
    n, length = problem.n_nodes, len(nodes)
    pos = np.full(n, -1, dtype=np.int64)
    pos[nodes_a] = np.arange(length)
    out = problem.output_bytes.astype(np.float64)
    positive = problem.time[nodes_a] > 0
    # Own need: temporaries, output and, for a positive time, one input tensor per producer.
    own = problem.temp_bytes[nodes_a].astype(np.float64) + out[nodes_a]
    if problem.n_edges:
        pairs = np.unique(np.stack([problem.edge_src, problem.edge_dst], axis=1), axis=0)
        on = pos[pairs[:, 1]] >= 0
        inputs = np.zeros(length)
        np.add.at(inputs, pos[pairs[on, 1]], out[pairs[on, 0]])
        own += np.where(positive, inputs, 0.0)
        inner = pairs[(pos[pairs[:, 0]] >= 0) & (pos[pairs[:, 1]] >= 0)]
    else:
        inner = np.zeros((0, 2), dtype=np.int64)
    pu, pw = pos[inner[:, 0]], pos[inner[:, 1]]
    params = np.concatenate([[0.0], np.cumsum(problem.param_bytes[nodes_a].astype(np.float64))])
    # At most every producer with a consumer on the path is held at once: a cheap upper
    # bound of the live term that settles most runs without the exact sweep below.
    spanning = np.zeros(length)
    spanning[np.unique(pu)] = out[nodes_a[np.unique(pu)]]
    most = np.concatenate([[0.0], np.cumsum(spanning)])

    def fits(i: int, j: int) -> bool:
        surely = params[j + 1] - params[i] + float(own[i:j + 1].max())
        if surely > cap:
            return False
        if surely + most[j + 1] - most[i] <= cap:
            return True
        width = j - i + 1
        live = np.zeros(width)
        sel = (pu >= i) & (pw <= j)
        if sel.any():
            u, w = pu[sel] - i, pw[sel] - i
            cover = np.full(width, -1, dtype=np.int64)
            np.maximum.at(cover, u, w)  # each producer's last consumer in the run
            prod = np.flatnonzero(cover > np.arange(width) + 1)  # someone strictly between
            diff = np.zeros(width + 1)
            size = out[nodes_a[i + prod]]
            np.add.at(diff, prod + 1, size)
            np.add.at(diff, cover[prod], -size)
            live = np.cumsum(diff)[:width]
            direct = w < cover[u]  # direct consumers already count the tensor as an input
            np.add.at(live, w[direct], -out[nodes_a[i + u[direct]]])
            live = np.where(positive[i:j + 1], live, 0.0)
        return params[j + 1] - params[i] + float((own[i:j + 1] + live).max()) <= cap

    return fits


def memory_path_bound(problem: Problem, memory_model: str) -> float:
    """Lower bound (seconds): the critical path plus the transfers memory forces along it.

    Parameters
    ----------
    problem : Problem
        The problem, with devices.
    memory_model : {"static", "peak"}
        The model whose capacities every placement keeps (what a run surely holds differs).

    Returns
    -------
    float
        The sum of the path's fastest durations plus the cheapest cut of its stretches
        that fit no device; the communication-free critical path when no stretch is forced
        (or with one device, or when a single node fits nowhere: the screening's case).
    """
    if problem.n_nodes == 0:
        return 0.0
    dur = durations(problem) if problem.n_devices else problem.time[:, None].astype(np.float64)
    min_dur = np.where(problem.allowed, dur, np.inf).min(axis=1) if problem.n_devices else dur[:, 0]
    nodes, edges = critical_path_nodes(problem, min_dur)
    base = float(min_dur[nodes].sum())
    if problem.n_devices < 2 or len(nodes) < 2:
        return base
    cost = np.asarray(min_transfer(problem, transfer_table(problem)), dtype=np.float64)[edges]
    fits = _run_fits(problem, nodes, memory_model, float(problem.device_memory.max()))
    # f[j]: cheapest cuts of positions 0..j with a run ending at j; a run i..j costs the cut
    # before i (none for i = 0). Window minimum over start candidates with a monotone deque.
    length = len(nodes)
    f = [0.0] * length
    entry = deque()  # (start i, f[i-1] + cost of the edge into i), increasing values
    lo = 0
    for j in range(length):
        g = 0.0 if j == 0 else f[j - 1] + float(cost[j - 1])
        while entry and entry[-1][1] >= g:
            entry.pop()
        entry.append((j, g))
        while lo <= j and not fits(lo, j):
            lo += 1
        if lo > j:
            return base  # one node fits no device: infeasible, reported by the screening
        while entry[0][0] < lo:
            entry.popleft()
        f[j] = entry[0][1]
    return base + f[-1]
