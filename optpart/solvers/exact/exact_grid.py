"""The integer time grid of the CP-SAT model, and integer memories (helpers of :mod:`._exact_common`).

* :class:`TimeGrid` / :func:`time_grid`: when every duration and transfer is an integer
  multiple of ``1 / scale`` for a small ``scale`` the grid is exact; otherwise quantities
  are rounded *up* and the grid records the most rounding a chain can accumulate.
* :func:`integral_memory`: memories and capacities as integers for the memory rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...model.problem import Problem

__all__ = ["TimeGrid", "time_grid", "integral_memory"]

@dataclass(frozen=True)
class TimeGrid:
    """Integer time units of ``1 / scale`` seconds.

    ``exact`` is True when every duration and transfer is a whole number of units, so
    the integer model is the real problem. Otherwise ``slack_units`` bounds how many
    units a chain of nodes and transfers can gain by rounding up: any real schedule
    rounded onto the grid (same placement and order) ends at most that much later.
    """

    scale: float
    exact: bool
    slack_units: float

    def up(self, seconds: np.ndarray) -> np.ndarray:
        """Seconds to units, rounded up (exact quantities are kept as they are).

        Rounding up keeps every rounded schedule at least as long as the real one, so a
        makespan found on the grid never undercuts a real schedule's.

        Parameters
        ----------
        seconds : numpy.ndarray
            Durations or transfer times in seconds (any shape).

        Returns
        -------
        numpy.ndarray
            The same shape, int64 units of ``1 / scale`` seconds, none below the real time.
        """
        return self._units(seconds, np.ceil)

    def down(self, seconds: np.ndarray) -> np.ndarray:
        """Seconds to units, rounded down (exact quantities are kept as they are).

        The relaxation of :func:`optpart.solvers.exact.cpsat_model.prepare` (``relax=True``)
        uses it: rounding every time of a real schedule down gives a schedule of the
        rounded-down model, so that model's optimum is a lower bound in units.

        Parameters
        ----------
        seconds : numpy.ndarray
            Durations, transfer or start times in seconds (any shape).

        Returns
        -------
        numpy.ndarray
            The same shape, int64 units of ``1 / scale`` seconds, none above the real time.
        """
        return self._units(seconds, np.floor)

    def _units(self, seconds: np.ndarray, rounding) -> np.ndarray:
        """Seconds to int64 units: a whole number of units (to float noise) as it is, any
        other quantity by ``rounding`` (``np.ceil`` or ``np.floor``)."""
        x = np.asarray(seconds, dtype=np.float64) * self.scale
        r = np.rint(x)
        return np.where(_close(x, r), r, rounding(x)).astype(np.int64)

    def bound_seconds(self, bound_units: float) -> float:
        """A valid lower bound in seconds from a lower bound in units of the rounded-up model.

        The rounding gain ``slack_units`` is taken off first (and a relative 1e-12 for float
        noise), so the bound holds for the real problem, not only the rounded one.

        Parameters
        ----------
        bound_units : float
            A lower bound of the makespan of the rounded-up integer model, in units.

        Returns
        -------
        float
            A lower bound of the real makespan in seconds, never negative.
        """
        b = (float(bound_units) - self.slack_units) / self.scale
        return max(0.0, b * (1 - 1e-12))


#: Candidate exact scales, ascending: round decimal ones, and every power of two up to
#: 2**62 (binary fractions such as 2**-30 s, the nanosecond-scale times of traced graphs).
_EXACT_SCALES = tuple(sorted({1, 2, 4, 5, 8, 10, 16, 20, 25, 32, 50, 64, 100, 128, 200, 250, 256, 500,
                              1000, 10**4, 10**5, 10**6} | {2**j for j in range(63)}))


def _close(x: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Where ``x`` equals the integer ``r`` up to float noise, *relative* to ``x``: no
    absolute floor, so a half unit (or 1e-10 of one) is never taken for zero."""
    return np.abs(x - r) <= 1e-9 * np.abs(x)


def _integral(x: np.ndarray) -> bool:
    return bool(_close(x, np.rint(x)).all())


def time_grid(dur: np.ndarray, comm: np.ndarray, horizon_s: float, resolution: float = 2e-7,
              max_units: float = 2e9, upper_s: float | None = None) -> TimeGrid:
    """Choose the time grid for durations ``dur`` (n x k) and transfers ``comm`` (m x k x k).

    An exact scale is used when one of a few round scales makes every finite quantity an
    integer and keeps the makespan's upper end ``upper_s`` (default: every node and
    transfer in sequence) below ``max_units``. Otherwise the scale makes the largest
    possible rounding loss (one unit per node and per edge of a chain, at most ``2 n - 1``)
    about ``resolution`` of ``horizon_s`` (a lower bound of the makespan), within the same cap.

    Parameters
    ----------
    dur : numpy.ndarray
        Node durations in seconds, n x k (``inf`` where a node may not run on a device).
    comm : numpy.ndarray
        Transfer times in seconds, m x k x k (edge, source device, target device).
    horizon_s : float
        A lower bound of the makespan in seconds; the inexact scale's resolution is relative to it.
    resolution : float
        The largest rounding loss of a chain, as a fraction of ``horizon_s`` (inexact grids only).
    max_units : float
        Cap on the makespan's upper end in units, so the integer model stays within CP-SAT's range.
    upper_s : float or None
        The largest makespan of interest in seconds; ``None`` means every node (slowest device)
        and every transfer (slowest pair) in sequence.

    Returns
    -------
    TimeGrid
        The scale, whether it is exact, and the rounding slack in units.
    """
    n = dur.shape[0]
    qd = dur[np.isfinite(dur)]
    qc = comm.reshape(-1)
    q = np.concatenate([qd, qc])
    q = q[q > 0]
    horizon_s = max(float(horizon_s), 1e-12)
    if upper_s is None:
        upper_s = float(np.where(np.isfinite(dur), dur, 0.0).max(axis=1).sum()) if n else 0.0
        if comm.size:
            upper_s += float(comm.reshape(comm.shape[0], -1).max(axis=1).sum())
    upper_s = max(float(upper_s), horizon_s)
    for s in _EXACT_SCALES:
        if upper_s * s > max_units:
            break
        if q.size == 0 or _integral(q * s):
            return TimeGrid(float(s), True, 0.0)
    # Inexact: a power of ten (so integral quantities stay integral) fine enough that the
    # worst rounding loss of a chain (below one unit per rounded node and edge) is about
    # `resolution` of the horizon's lower end.
    want = (2 * n) / (resolution * horizon_s)
    scale = 10.0 ** math.ceil(math.log10(want))
    while scale > 1e-6 and upper_s * scale > max_units:
        scale /= 10.0
    return TimeGrid(scale, False, _slack(dur, comm, scale))


def _slack(dur: np.ndarray, comm: np.ndarray, scale: float) -> float:
    """Most units a chain of distinct nodes and edges gains by rounding up on ``scale``."""
    n = dur.shape[0]
    x = np.where(np.isfinite(dur), dur, 0.0) * scale
    err_nodes = np.where(np.isfinite(dur), np.ceil(x) - x, 0.0)
    err_nodes[_close(x, np.rint(x))] = 0.0
    total = float(err_nodes.max(axis=1).sum()) if n else 0.0
    if comm.size:
        y = comm * scale
        err = np.ceil(y) - y
        err[_close(y, np.rint(y))] = 0.0
        per_edge = np.sort(err.reshape(comm.shape[0], -1).max(axis=1))[::-1]
        total += float(per_edge[: max(n - 1, 0)].sum())
    # Any path through the schedule (precedence and device order) visits each node once
    # and uses at most n - 1 transfers; one unit of margin covers float error.
    return total + 1.0


def integral_memory(problem: Problem) -> tuple[np.ndarray, np.ndarray, bool]:
    """Integer node memories and device capacities for an integer model.

    When every node memory is a whole number of ``1/s`` bytes for ``s`` in 1, 10, ..., 1e6
    (whole bytes: the usual case), memories become those integers and capacities are
    rounded down, which is exact: a sum of integers is at most ``c`` iff it is at most
    ``floor(c)`` (``exact=True``; sums stay below 2**53). Otherwise memories are scaled so that the total
    reaches ~1e12 and rounded up: a placement that fits the integer rows fits the real
    ones, but the rows may exclude a placement that fits exactly at the limit, so the
    solver may then claim neither optimality nor infeasibility. Infinite capacities map
    to -1 (no row).

    Parameters
    ----------
    problem : Problem
        The problem (static ``memory`` per node, capacities).

    Returns
    -------
    tuple
        ``(memories, capacities, exact)``: int64 arrays and whether the rows are exact.
    """
    mem = problem.memory
    cap = problem.device_memory
    finite = np.isfinite(cap)
    cap0 = np.where(finite, cap, 0.0)
    top = float(max(mem.max(initial=0.0), cap0.max(initial=0.0), 1e-300))
    total = float(mem.sum()) + top
    for s in (1, 10, 100, 1000, 10**4, 10**5, 10**6):
        if total * s >= 2**53:  # keep every sum of a memory row exact and far from overflow
            break
        if _integral(mem * s):
            m_int = np.rint(mem * s).astype(np.int64)
            c_int = np.where(finite, np.floor(cap0 * s), -1).astype(np.int64)
            return m_int, c_int, True
    s = 1e12 / max(total, 1e-300)
    m_int = np.ceil(mem * s - 1e-9).astype(np.int64)
    c_int = np.where(finite, np.floor(cap0 * s), -1).astype(np.int64)
    return m_int, c_int, False
