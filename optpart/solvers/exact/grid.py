"""The exact solvers' data: time tables in seconds, the integer time grid, integer memories,
and the classes of interchangeable devices.

CP-SAT works on integers. When every run time and transfer is a whole number of ``1 / scale``
seconds for a round ``scale`` the grid is exact and the integer model is the real problem;
otherwise every time is rounded *up* (an integer schedule stays valid in seconds) and the grid
records the most rounding a chain can gain, which is taken off every bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...model.problem import Problem


def durations(problem: Problem) -> np.ndarray:
    """``n x k`` run times in seconds (``time / speed``, the evaluator's arithmetic); ``inf`` where forbidden.

    Parameters
    ----------
    problem : Problem

    Returns
    -------
    numpy.ndarray
    """
    dur = problem.time[:, None] / problem.device_speed[None, :]
    return np.where(problem.allowed, dur, np.inf)


def transfer_table(problem: Problem) -> np.ndarray:
    """``m x k x k`` transfer times in seconds (``latency + bytes / bandwidth``; 0 on one device).

    Parameters
    ----------
    problem : Problem

    Returns
    -------
    numpy.ndarray
    """
    k = problem.n_devices
    with np.errstate(divide="ignore", invalid="ignore"):
        c = problem.latency[None, :, :] + problem.edge_bytes[:, None, None] / problem.bandwidth[None, :, :]
    c[:, np.arange(k), np.arange(k)] = 0.0
    return c


def uniform_transfers(comm: np.ndarray) -> np.ndarray:
    """Per edge, whether its transfer is the same between every pair of distinct devices
    (then the models use one "apart" literal per edge).

    Parameters
    ----------
    comm : numpy.ndarray
        A :func:`transfer_table` (any unit).

    Returns
    -------
    numpy.ndarray
        One boolean per edge.
    """
    k = comm.shape[1] if comm.ndim == 3 else 0
    if comm.shape[0] == 0 or k < 2:
        return np.ones(comm.shape[0], dtype=bool)
    vals = comm[:, ~np.eye(k, dtype=bool)]
    return (vals == vals[:, :1]).all(axis=1)


@dataclass(frozen=True)
class TimeGrid:
    """Integer units of ``1 / scale`` s; ``exact`` when every time is whole, else ``slack_units``
    bounds how much later than the real schedule a chain ends once rounded up."""

    scale: float
    exact: bool
    slack_units: float

    def up(self, seconds: np.ndarray) -> np.ndarray:
        """Seconds to int64 units, rounded up (whole quantities kept).

        Parameters
        ----------
        seconds : numpy.ndarray
            Times in seconds.

        Returns
        -------
        numpy.ndarray
        """
        return self._units(seconds, np.ceil)

    def down(self, seconds: np.ndarray) -> np.ndarray:
        """Seconds to int64 units, rounded down (the relaxation's rounding).

        Parameters
        ----------
        seconds : numpy.ndarray
            Times in seconds.

        Returns
        -------
        numpy.ndarray
        """
        return self._units(seconds, np.floor)

    def _units(self, seconds, rounding) -> np.ndarray:
        x = np.asarray(seconds, dtype=np.float64) * self.scale
        r = np.rint(x)
        return np.where(_close(x, r), r, rounding(x)).astype(np.int64)

    def bound_seconds(self, bound_units: float) -> float:
        """A lower bound of the real makespan (seconds) from one of the rounded-up model (units):
        the rounding slack is taken off, and a relative 1e-12 for float noise.

        Parameters
        ----------
        bound_units : float
            A lower bound of the integer model's makespan.

        Returns
        -------
        float
        """
        return max(0.0, (float(bound_units) - self.slack_units) / self.scale * (1 - 1e-12))


#: Exact scales tried, ascending: round decimal ones and every power of two (binary fractions
#: such as 2**-30 s of traced graphs are exact on a power-of-two grid).
_EXACT_SCALES = tuple(sorted({1, 2, 4, 5, 8, 10, 16, 20, 25, 32, 50, 64, 100, 128, 200, 250, 256, 500,
                              1000, 10**4, 10**5, 10**6} | {2**j for j in range(63)}))


def _close(x: np.ndarray, r: np.ndarray) -> np.ndarray:
    """``x`` equals the integer ``r`` up to float noise relative to ``x`` (no absolute floor)."""
    return np.abs(x - r) <= 1e-9 * np.abs(x)


def _integral(x: np.ndarray) -> bool:
    return bool(_close(x, np.rint(x)).all())


def time_grid(dur: np.ndarray, comm: np.ndarray, horizon_s: float, resolution: float = 2e-7,
              max_units: float = 2e9, upper_s: float | None = None) -> TimeGrid:
    """The grid for run times ``dur`` (``n x k``) and transfers ``comm`` (``m x k x k``), seconds.

    An exact scale when one makes every time whole and keeps ``upper_s`` (default: everything in
    sequence) below ``max_units``; otherwise a power of ten whose worst rounding along a chain
    (one unit per node and edge) is about ``resolution`` of ``horizon_s``.

    Parameters
    ----------
    dur, comm : numpy.ndarray
    horizon_s : float
        A lower bound of the makespan.
    resolution : float
        The largest rounding loss of a chain over ``horizon_s`` (inexact grids).
    max_units : float
        Cap on the makespan's upper end in units.
    upper_s : float, optional
        The largest makespan of interest.

    Returns
    -------
    TimeGrid
    """
    n = dur.shape[0]
    q = np.concatenate([dur[np.isfinite(dur)], comm.reshape(-1)])
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
    scale = 10.0 ** math.ceil(math.log10((2 * n) / (resolution * horizon_s)))
    while scale > 1e-6 and upper_s * scale > max_units:
        scale /= 10.0
    return TimeGrid(scale, False, _slack(dur, comm, scale))


def _slack(dur: np.ndarray, comm: np.ndarray, scale: float) -> float:
    """Most units a chain (each node once, at most ``n - 1`` transfers) gains by rounding up."""
    n = dur.shape[0]
    x = np.where(np.isfinite(dur), dur, 0.0) * scale
    err = np.where(np.isfinite(dur), np.ceil(x) - x, 0.0)
    err[_close(x, np.rint(x))] = 0.0
    total = float(err.max(axis=1).sum()) if n else 0.0
    if comm.size:
        y = comm * scale
        err_c = np.ceil(y) - y
        err_c[_close(y, np.rint(y))] = 0.0
        total += float(np.sort(err_c.reshape(comm.shape[0], -1).max(axis=1))[::-1][: max(n - 1, 0)].sum())
    return total + 1.0  # one unit of margin for float error


def _integer_bytes(arrays: list, capacity: np.ndarray, worst: float) -> tuple[list, np.ndarray, bool]:
    """Byte arrays and capacities as integers: exact when every figure is a whole number of
    ``1/s`` bytes (``s`` in 1, 10, ..., 1e6) and ``worst``, the largest row sum, stays below 2**53
    (capacities rounded down: integers sum to at most ``c`` iff to at most ``floor(c)``); else
    scaled near 1e12 and rounded up, conservatively. Infinite capacities become -1 (no row)."""
    finite = np.isfinite(capacity)
    cap0 = np.where(finite, capacity, 0.0)
    allb = np.concatenate([np.asarray(a, dtype=np.float64) for a in arrays])
    for s in (1, 10, 100, 1000, 10**4, 10**5, 10**6):
        if worst * s >= 2**53:
            break
        if _integral(allb * s):
            return ([np.rint(np.asarray(a, dtype=np.float64) * s).astype(np.int64) for a in arrays],
                    np.where(finite, np.floor(cap0 * s), -1).astype(np.int64), True)
    s = 1e12 / max(worst, 1e-300)
    return ([np.ceil(np.asarray(a, dtype=np.float64) * s - 1e-9).astype(np.int64) for a in arrays],
            np.where(finite, np.floor(cap0 * s), -1).astype(np.int64), False)


def integral_memory(problem: Problem) -> tuple[np.ndarray, np.ndarray, bool]:
    """Static memories and capacities as integers (exact for whole bytes).

    Parameters
    ----------
    problem : Problem

    Returns
    -------
    tuple
        ``(memories, capacities, exact)``.
    """
    cap = problem.device_memory
    top = float(max(problem.memory.max(initial=0.0), np.where(np.isfinite(cap), cap, 0.0).max(initial=0.0),
                    1e-300))
    (mem,), c, exact = _integer_bytes([problem.memory], cap, float(problem.memory.sum()) + top)
    return mem, c, exact


def peak_bytes(problem: Problem) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]:
    """Parameter, output and temporary bytes and capacities as integers for the peak model.

    Parameters
    ----------
    problem : Problem

    Returns
    -------
    tuple
        ``(param, output, temp, capacities, exact)``.
    """
    arrs = [problem.param_bytes, problem.output_bytes, problem.temp_bytes]
    cap = problem.device_memory
    worst = float(np.sum(arrs[0]) + 2 * np.sum(arrs[1]) + np.sum(arrs[2])) + \
        float(np.where(np.isfinite(cap), cap, 0.0).max(initial=0.0)) + 1.0
    (param, out, temp), c, exact = _integer_bytes(arrs, cap, worst)
    return param, out, temp, c, exact


def device_classes(problem: Problem) -> list[list[int]]:
    """Classes (two or more devices, ascending) of interchangeable devices: same memory, speed
    and allowed nodes, and latency and bandwidth unchanged by swapping them. Swapping two such
    devices in a schedule keeps its makespan, so the models search one labelling only.

    Parameters
    ----------
    problem : Problem

    Returns
    -------
    list of list of int
    """
    k = problem.n_devices
    lat, bw, allowed = problem.latency, problem.bandwidth, problem.allowed
    mem, speed = problem.device_memory, problem.device_speed

    def swappable(a: int, b: int) -> bool:
        if mem[a] != mem[b] or speed[a] != speed[b] or not np.array_equal(allowed[:, a], allowed[:, b]):
            return False
        others = np.ones(k, dtype=bool)
        others[[a, b]] = False
        return all(np.array_equal(m[a, others], m[b, others]) and np.array_equal(m[others, a], m[others, b])
                   and m[a, b] == m[b, a] and m[a, a] == m[b, b] for m in (lat, bw))

    classes, assigned = [], [False] * k
    for a in range(k):
        if assigned[a]:
            continue
        cls = [a] + [b for b in range(a + 1, k) if not assigned[b] and swappable(a, b)]
        for b in cls:  # transpositions with a common member generate the whole symmetric group
            assigned[b] = True
        if len(cls) > 1:
            classes.append(cls)
    return classes


def relabel(placement: np.ndarray, classes: list[list[int]], order: np.ndarray) -> np.ndarray:
    """The placement with the devices of each class renumbered in order of first use along
    ``order``: the one labelling the symmetry breaking keeps (unused devices take the rest).

    Parameters
    ----------
    placement : numpy.ndarray
    classes : list of list of int
        From :func:`device_classes`.
    order : numpy.ndarray
        Node ids defining "first use".

    Returns
    -------
    numpy.ndarray
        A new int64 placement.
    """
    placement = np.asarray(placement, dtype=np.int64)
    mapping = np.arange(max(int(placement.max(initial=0)) + 1, max((max(c) for c in classes), default=0) + 1))
    for cls in classes:
        members, seen = set(cls), []
        for v in np.asarray(order).tolist():
            d = int(placement[v])
            if d in members and d not in seen:
                seen.append(d)
        seen += [d for d in cls if d not in seen]
        for new, old in zip(cls, seen):
            mapping[old] = new
    return mapping[placement]
