"""Run times and transfer times of every (node, device) and (edge, device pair), in seconds.

The exact solvers' tables, computed with the model's own arithmetic (``time / speed``,
``latency + bytes / bandwidth``: :meth:`Problem.duration`, :meth:`Problem.transfer_times`),
so that a schedule the solvers replay and the evaluator's score agree to the last bit.
"""

from __future__ import annotations

import numpy as np

from ...model.problem import Problem

__all__ = ["durations", "transfer_table", "uniform_transfers"]


def durations(problem: Problem) -> np.ndarray:
    """``n x k`` run times in seconds; ``inf`` where the node may not run on the device.

    Parameters
    ----------
    problem : Problem
        The problem (times at speed 1, device speeds, allowed pairs).

    Returns
    -------
    ndarray
        ``time / speed`` per (node, device), the evaluator's arithmetic.
    """
    dur = problem.time[:, None] / problem.device_speed[None, :]
    return np.where(problem.allowed, dur, np.inf)


def transfer_table(problem: Problem) -> np.ndarray:
    """``m x k x k`` transfer times in seconds of every edge between every device pair (0 on one device).

    Parameters
    ----------
    problem : Problem
        The problem (edge bytes, per-pair latency and bandwidth).

    Returns
    -------
    ndarray
        ``latency + bytes / bandwidth`` per (edge, source device, destination device).
    """
    k = problem.n_devices
    # The model's arithmetic (``latency + bytes / bandwidth``, as :meth:`Problem.transfer_times`),
    # so a replayed schedule and the evaluator agree to the last bit.
    with np.errstate(divide="ignore", invalid="ignore"):
        c = problem.latency[None, :, :] + problem.edge_bytes[:, None, None] / problem.bandwidth[None, :, :]
    c[:, np.arange(k), np.arange(k)] = 0.0
    return c


def uniform_transfers(comm: np.ndarray) -> np.ndarray:
    """Per edge, True when its transfer time is the same between every pair of distinct devices.

    Parameters
    ----------
    comm : ndarray
        A :func:`transfer_table` (``m x k x k``).

    Returns
    -------
    ndarray
        Booleans, one per edge (all True with fewer than two devices): the models then use
        one "apart" literal per edge instead of one term per device pair.
    """
    k = comm.shape[1] if comm.ndim == 3 else 0
    if comm.shape[0] == 0 or k < 2:
        return np.ones(comm.shape[0], dtype=bool)
    off = ~np.eye(k, dtype=bool)
    vals = comm[:, off]
    return (vals == vals[:, :1]).all(axis=1)
