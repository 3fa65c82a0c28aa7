"""Memory accounting: the one home of "how many bytes does a device hold" and "does it fit".

Two models (docs/model.md section 3):

* **static**: a device holds the sum of ``memory`` of its nodes (:func:`static_memory`);
* **peak** (liveness): parameters all step, each output from its producer's start until
  its last consumer (or transfer out) ends, temporaries while running, received copies
  from arrival to last use (:func:`peak_memory`, :func:`memory_timeline`).

:func:`fits` is the one memory-fit rule with the one tolerance (float noise only), used
by the checker, the registry and every solver. :func:`overflow_message` words the
answer when a placement does not fit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import ProblemError
from ..units import format_bytes

if TYPE_CHECKING:
    from .problem import Problem

__all__ = ["MEMORY_RTOL", "as_placement", "fits", "static_memory", "peak_memory", "memory_timeline", "output_ends",
           "device_memory", "overflow_message"]

#: Relative slack on a capacity: absorbs float noise in sums of bytes, nothing more.
MEMORY_RTOL = 1e-9


#: Below this, float64 holds every integer exactly, so sums of integer byte counts are exact.
EXACT_INTEGERS = 2.0 ** 53

_PLAIN = (float, int)  # Python scalars :func:`fits` compares without building arrays (hot loops)


def fits(used, capacity):
    """``used <= capacity``, with float noise allowed only where floats make noise: the one memory-fit rule.

    Integer byte counts up to ``2**53`` add up exactly in float64, so where ``used`` and
    ``capacity`` are both such integers the comparison is exact (one byte over a GiB device
    does not fit). Elsewhere (fractional sizes, or beyond ``2**53``) a relative slack of
    :data:`MEMORY_RTOL` of the capacity absorbs rounding in the sums. Infinite capacity holds
    anything.

    Parameters
    ----------
    used : float or array_like
        Bytes a device holds (static sum or peak).
    capacity : float or array_like
        The device's memory, broadcast against ``used``.

    Returns
    -------
    bool or numpy.ndarray
        A bool for two scalars, else an elementwise bool array.

    >>> fits(100.0, 100.0), fits(101.0, 100.0), fits(2.0 ** 31, 2.0 ** 31 - 1)
    (True, False, False)
    """
    if type(used) in _PLAIN and type(capacity) in _PLAIN:  # two Python numbers: the same rule without numpy
        u, c = float(used), float(capacity)
        exact = abs(u) <= EXACT_INTEGERS and abs(c) <= EXACT_INTEGERS and u.is_integer() and c.is_integer()
        return u <= c + (0.0 if exact else MEMORY_RTOL * max(1.0, abs(c)))
    scalar = np.ndim(used) == 0 and np.ndim(capacity) == 0
    used = np.asarray(used, dtype=np.float64)
    capacity = np.asarray(capacity, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        exact = ((np.abs(used) <= EXACT_INTEGERS) & (np.abs(capacity) <= EXACT_INTEGERS)
                 & (used == np.floor(used)) & (capacity == np.floor(capacity)))
        slack = np.where(exact, 0.0, MEMORY_RTOL * np.maximum(1.0, np.abs(capacity)))
        ok = used <= capacity + slack
    return bool(ok) if scalar else ok


def as_placement(problem: Problem, placement) -> np.ndarray:
    """A placement (array of device indices, or ``{node id: device id}``) as a checked int array.

    Parameters
    ----------
    problem : Problem
        The problem the placement is for.
    placement : array_like of int or mapping of str to str
        Device index per node (length ``n_nodes``), or ``{node id: device id}`` naming every node.

    Returns
    -------
    numpy.ndarray of int64, shape (n_nodes,)
        Device index of every node.

    Raises
    ------
    ProblemError
        Naming the wrong length, the node placed outside ``0..K-1``, or an unknown id.
    """
    if isinstance(placement, dict):
        return problem.placement_from_ids(placement)
    arr = np.asarray(placement, dtype=np.int64)
    if arr.shape != (problem.n_nodes,):
        raise ProblemError(f"placement has {arr.size} entries for {problem.n_nodes} nodes")
    if problem.n_nodes and (arr.min() < 0 or arr.max() >= problem.n_devices):
        v = int(np.flatnonzero((arr < 0) | (arr >= problem.n_devices))[0])
        raise ProblemError(f"placement puts node '{problem.node_ids[v]}' on device index {int(arr[v])}, "
                           f"outside 0..{problem.n_devices - 1}")
    return arr


def static_memory(problem: Problem, placement) -> np.ndarray:
    """Bytes per device under the static model: the sum of ``memory`` of its nodes.

    Parameters
    ----------
    problem : Problem
        The problem (``memory`` per node, bytes).
    placement : array_like of int or mapping
        Device per node (see :func:`as_placement`).

    Returns
    -------
    numpy.ndarray of float64, shape (n_devices,)
        Bytes each device holds under the static model; no schedule is needed.
    """
    placement = as_placement(problem, placement)
    return np.bincount(placement, weights=problem.memory, minlength=problem.n_devices).astype(np.float64)


def output_ends(problem: Problem, placement: np.ndarray, finish: np.ndarray, comm: np.ndarray | None = None
                ) -> np.ndarray:
    """When each node's output stops being live on its own device (docs/model.md section 3):
    its last local consumer's finish, or its last transfer out's arrival, whichever is later.

    Parameters
    ----------
    problem : Problem
        The problem (its edges).
    placement : numpy.ndarray of int
        Device per node.
    finish : numpy.ndarray
        Finish time per node, seconds.
    comm : numpy.ndarray, optional
        :meth:`Problem.transfer_times` of ``placement`` (computed when not given).

    Returns
    -------
    numpy.ndarray of float64
        Seconds per node; ``-inf`` for a node without consumers (its output lives to the end of
        the step).
    """
    src, dst = problem.edge_src, problem.edge_dst
    comm = problem.transfer_times(placement) if comm is None else comm
    end = np.full(problem.n_nodes, -np.inf)
    local = placement[src] == placement[dst]
    np.maximum.at(end, src[local], finish[dst[local]])
    np.maximum.at(end, src[~local], finish[src[~local]] + comm[~local])
    return end


def _liveness_events(problem: Problem, placement: np.ndarray, start, finish):
    """Memory events of the liveness model: ``(base, makespan, ev_dev, ev_time, ev_delta, bounds)``.

    ``base`` holds each device's ``param_bytes`` (held all step). The events change the
    rest, sorted by device, then time, then kind: at equal times removals of proper
    intervals come first, then additions, then removals of zero-length intervals;
    ``bounds[d]:bounds[d+1]`` are device ``d``'s events.
    """
    n, k = problem.n_nodes, problem.n_devices
    base = np.bincount(placement, weights=problem.param_bytes, minlength=k).astype(np.float64)
    start = np.asarray(start, dtype=np.float64)
    finish = np.asarray(finish, dtype=np.float64)
    makespan = float(finish.max()) if n else 0.0
    empty = np.zeros(0)
    if n == 0 or not problem.has_split:
        return base, makespan, empty, empty, empty, np.zeros(k + 1, dtype=np.int64)
    out_b, tmp_b = problem.output_bytes, problem.temp_bytes
    src, dst = problem.edge_src, problem.edge_dst
    a, b = placement[src], placement[dst]
    comm = problem.transfer_times(placement)
    end = output_ends(problem, placement, finish, comm)
    end[np.isinf(end)] = makespan
    local = a == b
    devs, begs, ends, sizes = [placement, placement], [start, start], [end, finish], [out_b, tmp_b]
    # A received copy lives on the consumer's device from its first arrival to its last use there.
    remote = ~local
    if remote.any():
        key = src[remote] * k + b[remote]
        uniq, inv = np.unique(key, return_inverse=True)
        arrive = np.full(uniq.size, np.inf)
        np.minimum.at(arrive, inv, finish[src[remote]] + comm[remote])
        last = np.full(uniq.size, -np.inf)
        np.maximum.at(last, inv, finish[dst[remote]])
        devs.append(uniq % k)
        begs.append(arrive)
        ends.append(np.maximum(last, arrive))
        sizes.append(out_b[uniq // k])
    dev, beg, fin, size = (np.concatenate(x) for x in (devs, begs, ends, sizes))
    keep = size > 0
    dev, beg, fin, size = dev[keep], beg[keep], fin[keep], size[keep]
    instant = fin <= beg
    ev_dev = np.concatenate([dev, dev])
    ev_time = np.concatenate([beg, fin])
    ev_order = np.concatenate([np.ones(size.size), np.where(instant, 2, 0)])
    ev_delta = np.concatenate([size, -size])
    order = np.lexsort((ev_order, ev_time, ev_dev))
    ev_dev, ev_time, ev_delta = ev_dev[order], ev_time[order], ev_delta[order]
    return base, makespan, ev_dev, ev_time, ev_delta, np.searchsorted(ev_dev, np.arange(k + 1))


def peak_memory(problem: Problem, placement, start: np.ndarray, finish: np.ndarray) -> np.ndarray:
    """Peak bytes per device under the liveness model of docs/model.md section 3.

    Held all step: ``param_bytes`` of the device's nodes. Held while running: ``temp_bytes``.
    The output of ``u`` (``output_bytes``) is live on ``d(u)`` from ``S(u)`` until its last
    local consumer finishes or its last transfer out arrives (to the end of the step when
    it has no consumer); a copy received on another device is live from its first arrival
    until the last consumer there finishes. Intervals are half-open, so a tensor freed at
    ``t`` and one allocated at ``t`` do not add up; a zero-length interval counts at its instant.

    Parameters
    ----------
    problem : Problem
        The problem (``param_bytes``, ``output_bytes``, ``temp_bytes`` per node, bytes).
    placement : array_like of int or mapping
        Device per node (see :func:`as_placement`).
    start, finish : numpy.ndarray, shape (n_nodes,)
        The schedule: each node's start and finish time in seconds (an evaluated result's).

    Returns
    -------
    numpy.ndarray of float64, shape (n_devices,)
        The largest number of bytes each device holds at any instant of the step.
    """
    placement = as_placement(problem, placement)
    base, _, _, _, ev_delta, bounds = _liveness_events(problem, placement, start, finish)
    peak = np.zeros(problem.n_devices)
    for d in range(problem.n_devices):
        lo, hi = bounds[d], bounds[d + 1]
        if hi > lo:
            peak[d] = max(0.0, float(np.cumsum(ev_delta[lo:hi]).max()))
    return base + peak


def memory_timeline(problem: Problem, placement, start, finish) -> list[tuple[np.ndarray, np.ndarray]]:
    """Bytes in use over time on each device under the liveness model: ``[(times, bytes), ...]``.

    ``bytes[i]`` is the level from ``times[i]`` on (draw with ``drawstyle="steps-post"``).
    The first point is ``(0, params)``, the ``param_bytes`` held all step; the last is at
    the makespan. A zero-length interval appears as a spike (two points at one time).
    ``max(bytes)`` of a device equals its :func:`peak_memory`.

    Parameters
    ----------
    problem : Problem
        The problem, with its split memory fields.
    placement : array_like of int or mapping
        Device per node, as :func:`as_placement` reads it.
    start, finish : array_like of float, shape (n_nodes,)
        The schedule (seconds).

    Returns
    -------
    list of tuple of numpy.ndarray
        Per device ``(times, bytes)``: step-function breakpoints in seconds and the bytes
        in use from each breakpoint on.
    """
    placement = as_placement(problem, placement)
    base, makespan, _, ev_time, ev_delta, bounds = _liveness_events(problem, placement, start, finish)
    out = []
    for d in range(problem.n_devices):
        lo, hi = int(bounds[d]), int(bounds[d + 1])
        level = np.cumsum(ev_delta[lo:hi])
        times = np.concatenate([[0.0], ev_time[lo:hi], [makespan]])
        values = base[d] + np.concatenate([[0.0], level, [level[-1] if level.size else 0.0]])
        out.append((times, np.maximum(values, base[d])))
    return out


def device_memory(problem: Problem, placement, start=None, finish=None, model: str = "static") -> np.ndarray:
    """Bytes per device under ``model`` ("static" or "peak"; peak needs the schedule).

    Parameters
    ----------
    problem : Problem
        The problem.
    placement : array_like of int or mapping
        Device per node (see :func:`as_placement`).
    start, finish : array_like of float, optional
        The schedule (seconds); required for ``"peak"``, unused for ``"static"``.
    model : {"static", "peak"}
        The memory model of docs/model.md section 3.

    Returns
    -------
    numpy.ndarray of float64, shape (n_devices,)
        Bytes per device under ``model``.
    """
    if model == "static":
        return static_memory(problem, placement)
    if model == "peak":
        if start is None or finish is None:
            raise ValueError("the peak memory model needs the schedule (start and finish)")
        return peak_memory(problem, placement, start, finish)
    raise ProblemError(f"memory_model={model!r}; use 'static' or 'peak'")


def overflow_message(problem: Problem, placement, start=None, finish=None, model: str = "static",
                     solver: str = "") -> str | None:
    """One line naming the first device over capacity under ``model``, or None when all fit.

    ``"heft: device 'gpu0' holds 2.90 GiB (peak) but has 2.00 GiB"``.

    Parameters
    ----------
    problem : Problem
        The problem (its devices' capacities).
    placement : array_like of int or mapping
        Device per node.
    start, finish : array_like of float, optional
        The schedule (seconds); needed for ``"peak"``.
    model : {"static", "peak"}
        The memory model to check.
    solver : str, optional
        A solver name to start the line with.

    Returns
    -------
    str or None
        The message, with sizes in binary units; None when every device fits
        (:func:`optpart.model.memory.fits`, exact on integer byte counts).
    """
    used = device_memory(problem, placement, start, finish, model)
    over = np.flatnonzero(~fits(used, problem.device_memory))
    if over.size == 0:
        return None
    d = int(over[0])
    prefix = f"{solver}: " if solver else ""
    return (f"{prefix}device '{problem.device_ids[d]}' holds {format_bytes(used[d])} ({model}) "
            f"but has {format_bytes(problem.device_memory[d])}")
