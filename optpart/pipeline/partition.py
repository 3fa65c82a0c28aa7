"""Where to cut the forward chain into stages: dynamic programming over the cut points.

A candidate cut is an allowed boundary of the :class:`~optpart.pipeline.stages.ForwardChain`
(not inside a colocation group). When there are more than :data:`MAX_CUTS`, each of
:data:`MAX_CUTS` equal windows of positions keeps its boundary with the fewest bytes crossing
(a transformer's residual stream between layers, not the wide tensors inside one). Over those,
:func:`partitions` solves exactly, for ``S`` stages with given devices:

* **min-max**: the heaviest stage as small as possible, a stage's weight being its forward and
  backward time on its device plus, with ``comm`` weight, the transfers at its two cuts; once
  refusing a stage whose parameters plus the activations of the micro-batches a 1F1B order
  keeps in flight there (``min(M, S - s)``) exceed its share of the device's memory, once
  without that guess (the simulator judges memory);
* **least transfer**: among the cuts whose heaviest stage stays within 5% of the min-max
  optimum, the ones with the fewest seconds of transfer in total.

Every distinct answer is a candidate; the schedules decide between them
(:mod:`optpart.pipeline.candidates`).
"""

from __future__ import annotations

import numpy as np

from .stages import ForwardChain

__all__ = ["candidate_cuts", "partitions", "MAX_CUTS"]

#: Most cut points the dynamic programs look at.
MAX_CUTS = 400


def candidate_cuts(chain: ForwardChain, limit: int = MAX_CUTS) -> np.ndarray:
    """Allowed boundaries, thinned to ``limit`` (the fewest bytes crossing per window).

    Parameters
    ----------
    chain : ForwardChain
        The step's chain.
    limit : int
        Most boundaries kept.

    Returns
    -------
    numpy.ndarray
        Boundaries in ``1..P-1``, increasing.
    """
    cuts = np.flatnonzero(chain.allowed)
    if cuts.size <= limit:
        return cuts
    crossing = (chain.cut_fwd + chain.cut_bwd)[cuts]
    window = np.floor(cuts * limit / chain.n_positions).astype(np.int64)
    order = np.lexsort((cuts, crossing, window))
    first = np.concatenate([[True], window[order][1:] != window[order][:-1]])
    return np.sort(cuts[order[first]])


def partitions(chain: ForwardChain, step, stage_device, *, cuts: np.ndarray | None = None,
               memory: bool = True) -> list[list[int]]:
    """Candidate cut lists for ``len(stage_device)`` stages (module docstring).

    Parameters
    ----------
    chain : ForwardChain
        The step's chain.
    step : PipelineStep
        The step (devices, micro-batches).
    stage_device : sequence of int
        Device per stage.
    cuts : numpy.ndarray, optional
        Boundaries to choose from (default :func:`candidate_cuts`).
    memory : bool
        Also run the programs refusing stages over their share of memory.

    Returns
    -------
    list of list of int
        Distinct cut lists (each ``S - 1`` increasing boundaries); empty when the chain has
        fewer allowed boundaries than ``S - 1``.
    """
    p = step.base
    sdev = np.asarray(stage_device, dtype=np.int64)
    n_st = int(sdev.size)
    cuts = candidate_cuts(chain) if cuts is None else cuts
    if n_st == 1:
        return [[]]
    if cuts.size < n_st - 1:
        return []
    ends = np.concatenate([[0], cuts, [chain.n_positions]]).astype(np.int64)
    work = np.concatenate([[0.0], np.cumsum(chain.fwd_time + chain.bwd_time)])[ends]
    param = np.concatenate([[0.0], np.cumsum(chain.param_bytes)])[ends]
    act = np.concatenate([[0.0], np.cumsum(chain.act_bytes)])[ends]
    crossing = (chain.cut_fwd + chain.cut_bwd)[ends]
    crossing[0] = crossing[-1] = 0.0
    share = p.device_memory[sdev] / np.bincount(sdev, minlength=p.n_devices)[sdev]
    m = step.micro_batches
    out: list[list[int]] = []
    for check in ((True, False) if memory else (False,)):  # the memory rule is a guess: both
        for comm in (0.0, 1.0):
            weight = _weights(p, sdev, work, param, act, crossing, share, m, comm, check)
            got = _min_max(weight)
            if got is None:
                continue
            value, path = got
            out.append(path)
            cheap = _least_transfer(weight, _transfers(p, sdev, crossing), value * 1.05 + 1e-15)
            if cheap is not None:
                out.append(cheap)
    seen, unique = set(), []
    for path in out:
        key = tuple(int(ends[i]) for i in path[1:-1])
        if key not in seen:
            seen.add(key)
            unique.append(list(key))
    return unique


def _weights(p, sdev, work, param, act, crossing, share, m, comm, check) -> list[np.ndarray]:
    """Per stage the ``(E, E)`` weight of stage ``[ends[i], ends[j])`` (inf: not allowed)."""
    n_st = sdev.size
    e = work.size
    i, j = np.meshgrid(np.arange(e), np.arange(e), indexing="ij")
    out = []
    for s in range(n_st):
        d = int(sdev[s])
        w = (work[j] - work[i]) / p.device_speed[d]
        if comm:
            lat = float(p.latency[d][np.arange(p.n_devices) != d].min()) if p.n_devices > 1 else 0.0
            bw = float(p.bandwidth[d][np.arange(p.n_devices) != d].max()) if p.n_devices > 1 else np.inf
            w = w + comm * ((crossing[i] + crossing[j]) / bw + 2 * lat)
        bad = j <= i
        if check:
            flight = min(m, n_st - s)
            bad |= (param[j] - param[i]) + flight * (act[j] - act[i]) > share[s]
        out.append(np.where(bad, np.inf, w))
    return out


def _transfers(p, sdev, crossing) -> np.ndarray:
    """Seconds to send the bytes crossing each boundary once, on the slowest stage link."""
    lat = float(p.latency.max()) if p.n_devices > 1 else 0.0
    bw = float(p.bandwidth[p.bandwidth > 0].min()) if p.n_devices > 1 else np.inf
    return crossing / bw + lat


def _min_max(weight: list[np.ndarray]) -> tuple[float, list[int]] | None:
    """Exact min-max partition: ``(value, path of end indices)`` or None."""
    e = weight[0].shape[0]
    f = np.full(e, np.inf)
    f[0] = 0.0
    back = []
    for w in weight:
        cand = np.maximum(f[:, None], w)
        arg = np.argmin(cand, axis=0)
        f = cand[arg, np.arange(e)]
        back.append(arg)
    if not np.isfinite(f[-1]):
        return None
    return float(f[-1]), _path(back, e - 1)


def _least_transfer(weight: list[np.ndarray], transfer: np.ndarray, cap: float) -> list[int] | None:
    """Fewest transfer seconds over the cuts with every stage at most ``cap``."""
    e = weight[0].shape[0]
    g = np.full(e, np.inf)
    g[0] = 0.0
    back = []
    for w in weight:
        cand = np.where(w <= cap, g[:, None] + transfer[None, :], np.inf)
        arg = np.argmin(cand, axis=0)
        g = cand[arg, np.arange(e)]
        back.append(arg)
    return _path(back, e - 1) if np.isfinite(g[-1]) else None


def _path(back: list[np.ndarray], last: int) -> list[int]:
    path = [last]
    for arg in reversed(back):
        path.append(int(arg[path[-1]]))
    return path[::-1]
