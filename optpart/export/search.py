"""Search for a module-level plan that fits when the closest one to a placement does not.

An operator placement may fit memory only because it spreads a module's operators, or the
operators outside every module (a language model's loss), over several devices; a device map
or a pipeline cannot do that. The plans tried here are all module-consistent:

* contiguous stages in the order modules run (:func:`optpart.export.stages.stage_candidates`),
  each repaired against memory by :func:`repair_stages`: while a device overflows, one boundary
  module of its stage moves to the neighbouring stage with more room, kept only when the fullest
  device's share of its capacity falls (a bounded number of evaluations);
* the same majority rule at every coarser depth.

Every candidate is scored by the evaluator; the fastest that fits wins, else the one that
overflows least, and :func:`memory_advice` says how much memory that one needs.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..model.problem import Problem

__all__ = ["fullness", "repair_stages", "memory_advice"]


def fullness(problem: Problem, used: np.ndarray) -> np.ndarray:
    """Per device: memory in use over capacity (0 for an unused device of zero capacity).

    Parameters
    ----------
    problem : Problem
        The problem whose ``device_memory`` (bytes) is the capacity.
    used : numpy.ndarray
        Bytes in use per device under the plan's memory model.

    Returns
    -------
    numpy.ndarray
        ``used / capacity`` per device.
    """
    cap = np.asarray(problem.device_memory, dtype=float)
    return np.where(cap > 0, used / np.maximum(cap, 1e-300), np.where(used > 0, np.inf, 0.0))


def repair_stages(order: list[int], dev: np.ndarray, score: Callable[[np.ndarray], tuple[np.ndarray, float]],
                  *, budget: int = 48) -> np.ndarray:
    """Move stage boundaries until no device overflows, or no move helps, or ``budget`` runs out.

    Stage ``s`` is device ``s`` and holds a run of units in ``order``. A move hands the first
    unit of the fullest device's stage to the previous stage, or its last unit to the next one
    (the emptier neighbour first); it is kept when the fullest share of capacity falls.

    Parameters
    ----------
    order : list of int
        Units in the order their modules first run.
    dev : numpy.ndarray
        Device (= stage) per unit, non-decreasing along ``order``.
    score : callable
        ``score(dev) -> (fullness per device, makespan in seconds)`` from the evaluator.
    budget : int
        Most evaluations spent.

    Returns
    -------
    numpy.ndarray
        The repaired device per unit (``dev`` itself when nothing helped).
    """
    dev = dev.copy()
    full, _ = score(dev)
    spent = 1
    while spent < budget and float(full.max()) > 1.0:
        d = int(np.argmax(full))
        run = [i for i, u in enumerate(order) if dev[u] == d]
        if not run:
            break
        moves = []
        if run[0] > 0:  # first unit to the previous stage's device
            moves.append((full[dev[order[run[0] - 1]]], order[run[0]], int(dev[order[run[0] - 1]])))
        if run[-1] + 1 < len(order):
            moves.append((full[dev[order[run[-1] + 1]]], order[run[-1]], int(dev[order[run[-1] + 1]])))
        improved = False
        for _, u, target in sorted(moves, key=lambda m: m[0]):
            trial = dev.copy()
            trial[u] = target
            f2, _ = score(trial)
            spent += 1
            if float(f2.max()) < float(full.max()) - 1e-12:
                dev, full, improved = trial, f2, True
                break
            if spent >= budget:
                break
        if not improved:
            break
    return dev


def memory_advice(problem: Problem, used: np.ndarray, model: str) -> str:
    """One line: the memory the plan needs, as a flag value when the devices are equal.

    A placement's memory use does not depend on the capacities (the canonical schedule ignores
    them), so the plan fits any devices at least this large.

    Parameters
    ----------
    problem : Problem
        The problem whose devices the plan overflows.
    used : numpy.ndarray
        Bytes per device under ``model``.
    model : str
        The memory model, ``"peak"`` or ``"static"``.

    Returns
    -------
    str
        For example ``"it fits devices of 2.33GiB (peak): solve and export with --memory 2.33GiB"``.
    """
    cap = np.asarray(problem.device_memory, dtype=float)
    if np.allclose(cap, cap[0]):
        flag = _round_up(float(np.max(used)))
        return f"it fits devices of {flag} ({model}): solve and export with --memory {flag}"
    scale = float(np.max(fullness(problem, used)))
    return f"it fits when every device has {scale:.2f}x its memory ({model}); solve with more memory and export again"


def _round_up(nbytes: float) -> str:
    """A size a user can type, never below ``nbytes``: GiB to 2 decimals, else whole MiB or KiB."""
    for unit, size, scale in (("GiB", 2**30, 100), ("MiB", 2**20, 1), ("KiB", 2**10, 1)):
        if nbytes >= size:
            return f"{np.ceil(nbytes / size * scale - 1e-9) / scale:g}{unit}"
    return f"{int(np.ceil(nbytes))}B"
