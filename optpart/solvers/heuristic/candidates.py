"""The heuristic's candidate list and the bound that spares scheduling a candidate that cannot win.

At 10^6 nodes a candidate's placement, start and finish lists are tens of MiB each, so only
the best candidate keeps them (:class:`Candidates`). A device runs its nodes one after
another, so no schedule of a placement is shorter than its busiest device's run time
(:func:`busiest_device_time`); a candidate whose bound is clearly above the best makespan
found is not scheduled at all (:func:`may_win`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...model.problem import Problem

__all__ = ["Candidates", "busiest_device_time", "may_win"]


class Candidates(list):
    """The candidates as ``(makespan, tag, place, start, finish)``; only the best, by
    (makespan, tag) as the final choice ranks them, keeps its placement and schedule: the others
    keep their makespan only (three lists of 10^6 entries are about 70 MiB each)."""

    def append(self, item: tuple) -> None:
        """Add a candidate and drop the lists of whichever of it and the best so far loses.

        Parameters
        ----------
        item : tuple
            ``(makespan, tag, place, start, finish)``.
        """
        if self:
            best = min(range(len(self)), key=lambda i: self[i][:2])
            if item[:2] < self[best][:2]:
                self[best] = self[best][:2] + (None, None, None)
            else:
                item = item[:2] + (None, None, None)
        super().append(item)


def busiest_device_time(problem: Problem, place: Sequence[int], speed: Sequence[float]) -> float:
    """The busiest device's summed run time under ``place``: a lower bound on any schedule's makespan.

    Parameters
    ----------
    problem : Problem
        The instance (its node times).
    place : sequence of int
        Device of every node.
    speed : sequence of float
        Speed of every device.

    Returns
    -------
    float
        Seconds.
    """
    speed = np.asarray(speed, dtype=np.float64)
    busy = np.bincount(np.asarray(place, dtype=np.int64), weights=problem.time, minlength=len(speed))
    return float(np.max(busy / speed))


def may_win(bound: float, found: Sequence[tuple]) -> bool:
    """Whether a candidate whose makespan is at least ``bound`` may beat or tie the best found.

    Rounding of the sums stays far below the 1e-6 margin, so a candidate clearly above the
    best is one that cannot win.

    Parameters
    ----------
    bound : float
        A lower bound on the candidate's makespan.
    found : sequence of tuple
        The candidates so far, makespan first.

    Returns
    -------
    bool
        True when nothing is found yet or ``bound`` is within 1e-6 (relative) of the best.
    """
    return not found or bound <= min(x[0] for x in found) * (1.0 + 1e-6)
