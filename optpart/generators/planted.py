"""Planted-optimum DAGs: random graphs whose optimal makespan is known by construction."""

from __future__ import annotations

import numpy as np

from ..model.devices import Device, Links
from ..model.problem import Problem

__all__ = ["planted_dag"]


def planted_dag(n: int, k: int = 4, *, ccr: float = 1.0, preds: int = 2, window: int = 64,
                chains: bool = True, seed: int = 0, name: str | None = None) -> Problem:
    """A random DAG whose optimal makespan is known: a planted schedule with no idle time.

    Each of ``k`` identical devices runs ``n / k`` nodes back to back from 0 to ``L``
    (node times uniform in [1, 10], then scaled per device so that each device's sum is
    ``L``). Every node gets up to ``preds`` predecessors, drawn among the ``window``
    nodes (on any device) that finished last before its data would have to leave:
    a transfer (``bytes / bandwidth``, the bandwidth set so that the mean transfer is
    ``ccr`` times the mean node time) always arrives by its planted start. The planted schedule is thus valid, and since every
    device is busy for all of ``[0, L]`` the work bound ``L`` is met: the optimum is
    exactly ``L`` (stored in ``meta["optimum"]``). Capacities are the planted loads
    plus 5%, so the planted placement fits. Nodes are numbered by planted start time.

    With ``chains`` (the default) every node also reads a tensor from the node just
    before it on its planted device, which finishes exactly at its start: the planted
    schedule has no slack anywhere, which is what makes these instances hard for list
    schedulers (HEFT lands several percent above ``L`` at 200-2,000 nodes).

    Parameters
    ----------
    n : int
        Node count.
    k : int, optional
        Device count of the planted schedule (and of the problem).
    ccr : float, optional
        Sets the bandwidth: mean transfer time = ``ccr`` x mean node time.
    preds : int, optional
        The most predecessors per node.
    window : int, optional
        How many recently finished nodes a predecessor is drawn from.
    chains : bool, optional
        Add the tight edge from each node's planted device predecessor.
    seed : int, optional
        Seed of the numpy generator.
    name : str, optional
        Default ``planted-{n}-k{k}-c{ccr}-s{seed}``.

    Returns
    -------
    Problem
        With ``meta["optimum"]`` (seconds) and ``meta["planted_placement"]`` (device per node).
    """
    rng = np.random.default_rng(seed)
    per = np.full(k, n // k)
    per[: n % k] += 1
    dev = np.repeat(np.arange(k), per)
    t = rng.uniform(1.0, 10.0, size=n)
    sums = np.bincount(dev, weights=t, minlength=k)
    length = float(sums.max())
    t = t * (length / sums)[dev]
    start = np.zeros(n)
    offs = np.concatenate([[0], np.cumsum(per)])
    prev = np.full(n, -1)                      # the node before each one on its device
    for d in range(k):
        seg = t[offs[d]:offs[d + 1]]
        start[offs[d]:offs[d + 1]] = np.concatenate([[0.0], np.cumsum(seg)[:-1]])
        prev[offs[d] + 1:offs[d + 1]] = np.arange(offs[d], offs[d + 1] - 1)
    order = np.lexsort((dev, start))           # renumber nodes by planted start
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    t, dev, start, prev = t[order], dev[order], start[order], prev[order]
    prev = np.where(prev >= 0, rank[np.maximum(prev, 0)], -1)
    fin = start + t
    memory = rng.uniform(1e6, 1e8, size=n)
    mean_t = float(t.mean())
    mean_b = 5e7
    bw = mean_b / (ccr * mean_t) if ccr > 0 else float("inf")
    # predecessors whose data would arrive in time even from another device
    by_finish = np.argsort(fin, kind="stable")
    fin_sorted = fin[by_finish]
    xs, xd, xb = [], [], []
    if chains:
        has = np.flatnonzero(prev >= 0)
        xs.append(prev[has])
        xd.append(has)
        xb.append(rng.uniform(1e6, 1e8, size=has.size))
    for _ in range(max(1, preds)):
        b = rng.uniform(1e6, 1e8, size=n)
        c = b / bw
        cnt = np.searchsorted(fin_sorted, start - c, side="right")   # nodes finished by S - c
        pick = cnt - 1 - rng.integers(0, window, size=n)
        ok = pick >= 0
        u = by_finish[np.maximum(pick, 0)]
        xs.append(u[ok])
        xd.append(np.flatnonzero(ok))
        xb.append(b[ok])
    s = np.concatenate(xs)
    dd = np.concatenate(xd)
    nb = np.concatenate(xb)
    key, first = np.unique(s * n + dd, return_index=True)
    s, dd, nb = key // n, key % n, nb[first]
    load = np.bincount(dev, weights=memory, minlength=k)
    devices = [Device(f"dev{i}", float(load[i] * 1.05)) for i in range(k)]
    return Problem.from_arrays([f"p{i}" for i in range(n)], t, memory, s, dd, nb, devices=devices,
                               links=Links(0.0, bw), name=name or f"planted-{n}-k{k}-c{ccr:g}-s{seed}",
                               meta={"generator": "planted_dag", "seed": seed, "ccr": ccr,
                                     "optimum": length, "planted_placement": dev.tolist()})
