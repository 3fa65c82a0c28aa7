"""Incremental liveness memory (docs/model.md section 3) for schedulers that place one node at a time.

A list scheduler places a node ``v`` on a device ``d`` at ``[S, F)`` without knowing
its consumers yet, so the end of ``v``'s output tensor is unknown. :class:`LivenessTracker`
keeps every tensor whose consumers are not all placed *open* (live to +inf) and closes it
to its true end when its last consumer is placed. Closing only removes bytes, so every
admission decided earlier stays valid: the tracker is conservative while it runs and exact
once every node is placed (then :meth:`LivenessTracker.peaks` equals
:func:`optpart.model.memory.peak_memory`; ``tests/test_peak_heuristic.py`` checks it on random cases).

What a device holds, as in :mod:`optpart.model.memory`: the ``param_bytes`` of its nodes all step
(a scalar per device), ``temp_bytes`` while a node runs, the output of ``u`` from ``S(u)``
until its last local consumer finishes or its last transfer out lands (to the end of the
step without consumers), and one received copy per (producer, device) from its first
arrival until its last consumer there finishes. Intervals are half-open; a zero-length one
counts at its instant ("spike"), stacked on the level of the segment starting there.

Each device's level is a step function on sorted breakpoints (numpy arrays): an admission
check is one vectorised pass over the breakpoints from the earliest affected instant on,
plus a running prefix maximum, so a node costs O(breakpoints) in C rather than in Python.

:class:`LivenessPolicy` wraps the tracker in the scheduling engine's memory-policy protocol
(``devices_for``, ``admits``, ``place``, ``no_room_message``); colocation groups reserve the
parameters of the whole group when their first member is placed, like the static policy.
The fit test is :func:`optpart.model.memory.fits`, the one memory-fit rule.
"""

from __future__ import annotations

import math

import numpy as np

from .._docstrings import fill_doc
from ..model.memory import fits
from ..model.problem import Problem
from ..units import format_bytes
from .policy import MemoryPolicy

__all__ = ["LivenessPolicy", "LivenessTracker"]

_INF = math.inf


class _Level:
    """One device's time-varying bytes: ``level[i]`` holds on ``[times[i], times[i+1])``."""

    __slots__ = ("level", "spike_b", "spike_t", "times")

    def __init__(self) -> None:
        self.times = np.zeros(1)
        self.level = np.zeros(1)
        self.spike_t: list[float] = []
        self.spike_b: list[float] = []

    def _cut(self, t: float) -> int:
        """Index of the segment starting at ``t`` (a breakpoint is inserted when needed)."""
        i = int(np.searchsorted(self.times, t, side="left"))
        if i < self.times.size and self.times[i] == t:
            return i
        self.times = np.insert(self.times, i, t)
        self.level = np.insert(self.level, i, self.level[i - 1] if i > 0 else 0.0)
        return i

    def add(self, lo: float, hi: float, nbytes: float) -> None:
        """Add ``nbytes`` on ``[lo, hi)`` (``hi`` may be +inf); a zero-length interval is a spike."""
        if nbytes == 0.0:
            return
        if hi <= lo:
            self.spike_t.append(lo)
            self.spike_b.append(nbytes)
            return
        i = self._cut(lo)
        j = self.times.size if hi == _INF else self._cut(hi)
        self.level[i:j] += nbytes

    def at(self, t: np.ndarray) -> np.ndarray:
        """The level at each instant of ``t`` (segment starting at or before it)."""
        return self.level[np.searchsorted(self.times, t, side="right") - 1]

    def peak_with(self, intervals: list[tuple[float, float, float]]) -> float:
        """Highest level (spikes included) if ``intervals`` ``(lo, hi, bytes)`` were added too."""
        proper = [(a, b, x) for a, b, x in intervals if b > a and x != 0.0]
        points = [a for a, b, x in intervals if x != 0.0] + [b for a, b, x in proper if b < _INF]
        lo = min(points) if points else _INF
        i0 = int(np.searchsorted(self.times, lo, side="right")) - 1 if points else self.times.size
        best = float(self.level[:max(i0, 0)].max()) if i0 > 0 else -_INF
        if points:
            pts = np.union1d(self.times[max(i0, 0):], np.asarray(points, dtype=np.float64))
            val = self.at(pts)
            for a, b, x in proper:
                val = val + x * ((pts >= a) & (pts < b))
            best = max(best, float(val.max()))
        else:
            best = max(best, float(self.level.max()))
        if self.spike_t or len(proper) < len(intervals):
            spikes: dict[float, float] = {}
            for t, x in zip(self.spike_t, self.spike_b):
                spikes[t] = spikes.get(t, 0.0) + x
            for a, b, x in intervals:
                if b <= a and x != 0.0:
                    spikes[a] = spikes.get(a, 0.0) + x
            for t in sorted(spikes):
                val = float(self.at(np.asarray([t]))[0]) + spikes[t]
                val += sum(x for a, b, x in proper if a <= t < b)
                best = max(best, val)
        return best


@fill_doc
class LivenessTracker:
    """Liveness memory of a partial schedule built in a topological order (see module doc).

    ``place(v, d, start, finish)`` records a node; ``peak_if(v, d, start, finish)`` is the
    peak device ``d`` would reach. Every predecessor of ``v`` must already be placed.
    """

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        n, k = problem.n_nodes, problem.n_devices
        self.k = k
        self.split = bool(problem.has_split)
        self.param = problem.param_bytes.tolist()
        self.out = problem.output_bytes.tolist() if self.split else [0.0] * n
        self.temp = problem.temp_bytes.tolist() if self.split else [0.0] * n
        order = problem.in_edges
        self.in_ptr = problem.in_ptr.tolist()
        self.pred = problem.edge_src[order].tolist()
        self.in_bytes = problem.edge_bytes[order].tolist()
        self.lat = problem.latency.tolist()
        self.bw = problem.bandwidth.tolist()
        self.pending = np.diff(problem.out_ptr).tolist()  # consumers not yet placed
        self.base = [0.0] * k
        self.lines = [_Level() for _ in range(k)]
        self.place_of = [-1] * n
        self.start = [0.0] * n
        self.finish = [0.0] * n
        self.local_end = [-_INF] * n      # latest local consumer finish or transfer-out arrival
        self.copies: list[dict[int, list[float]]] = [{} for _ in range(n)]  # e -> [arrive, last]

    def _arrival(self, i: int, u: int, d: int) -> float:
        pu = self.place_of[u]
        return self.finish[u] + (self.lat[pu][d] + self.in_bytes[i] / self.bw[pu][d])

    def _delta(self, v: int, d: int, start: float, finish: float) -> list[tuple[float, float, float]]:
        """Intervals placing ``v`` on ``d`` adds to ``d``'s level (tensors still open end at +inf)."""
        out = [(start, finish, self.temp[v]), (start, _INF, self.out[v])]
        for i in range(self.in_ptr[v], self.in_ptr[v + 1]):
            u = self.pred[i]
            if self.place_of[u] == d or self.out[u] == 0.0:
                continue
            a = self._arrival(i, u, d)
            c = self.copies[u].get(d)
            if c is None:
                out.append((a, _INF, self.out[u]))
            elif a < c[0]:
                out.append((a, c[0], self.out[u]))
        return out

    def _closing(self, v: int, d: int, finish: float) -> list[tuple[float, float, float]]:
        """Intervals that closing ``v``'s inputs changes on ``d``, were ``v`` placed there now.

        An input whose last consumer is ``v`` stops being open when ``v`` is placed: its output
        on ``d`` (or its copy received on ``d``) then ends where :meth:`_close` will end it.
        Counting that before admission matters at ``v``'s own instants: a zero-time ``v`` frees
        its inputs at the instant its output appears, so they never add up (half-open intervals,
        docs/model.md section 6), which an open input would wrongly stack.
        """
        last: dict[int, int] = {}
        for i in range(self.in_ptr[v], self.in_ptr[v + 1]):
            u = self.pred[i]
            last[u] = last.get(u, 0) + 1
        out: list[tuple[float, float, float]] = []
        for i in range(self.in_ptr[v], self.in_ptr[v + 1]):
            u = self.pred[i]
            x = self.out[u]
            if x == 0.0 or last.get(u, 0) != self.pending[u]:
                continue
            del last[u]
            if self.place_of[u] == d:
                lo = self.start[u]
                end = max(self.local_end[u], finish, lo)
            else:
                c = self.copies[u].get(d)
                a = min(self._arrival(j, u, d) for j in range(self.in_ptr[v], self.in_ptr[v + 1])
                        if self.pred[j] == u)
                lo = a if c is None else min(c[0], a)
                end = max(finish if c is None else max(c[1], finish), lo)
            if end > lo:
                out.append((end, _INF, -x))
            else:
                out += [(lo, _INF, -x), (lo, lo, x)]
        return out

    def peak_if(self, v: int, d: int, start: float, finish: float, extra_param: float | None = None) -> float:
        """Peak bytes of device ``d`` after placing ``v`` there at ``[start, finish)``.

        Parameters
        ----------
        %(node_slot)s
        %(extra_param)s

        Returns
        -------
        float
            The device's peak live bytes with ``v`` added.
        """
        par = self.param[v] if extra_param is None else extra_param
        delta = self._delta(v, d, start, finish) + self._closing(v, d, finish)
        return self.base[d] + par + max(0.0, self.lines[d].peak_with(delta))

    def place(self, v: int, d: int, start: float, finish: float, extra_param: float | None = None) -> None:
        """Record ``v`` on ``d`` at ``[start, finish)``; close the tensors whose last consumer it is.

        Parameters
        ----------
        %(node_slot)s
        %(extra_param)s
        """
        line = self.lines[d]
        self.base[d] += self.param[v] if extra_param is None else extra_param
        for a, b, x in self._delta(v, d, start, finish):
            line.add(a, b, x)
        self.place_of[v], self.start[v], self.finish[v] = d, float(start), float(finish)
        for i in range(self.in_ptr[v], self.in_ptr[v + 1]):
            u = self.pred[i]
            pu = self.place_of[u]
            if pu == d:
                self.local_end[u] = max(self.local_end[u], finish)
            else:
                a = self._arrival(i, u, d)
                self.local_end[u] = max(self.local_end[u], a)
                c = self.copies[u].get(d)
                if c is None:
                    self.copies[u][d] = [a, finish]
                else:
                    c[0] = min(c[0], a)
                    c[1] = max(c[1], finish)
            self.pending[u] -= 1
            if self.pending[u] == 0:
                self._close(u)

    def _close(self, u: int) -> None:
        """All consumers of ``u`` are placed: end its output and copies where the model says."""
        x = self.out[u]
        if x == 0.0:
            return
        pu, s = self.place_of[u], self.start[u]
        end = max(self.local_end[u], s)
        self._shorten(self.lines[pu], s, end, x)
        for e in sorted(self.copies[u]):
            a, last = self.copies[u][e]
            self._shorten(self.lines[e], a, max(last, a), x)

    @staticmethod
    def _shorten(line: _Level, lo: float, end: float, x: float) -> None:
        """An open interval ``[lo, inf)`` of ``x`` bytes becomes ``[lo, end)`` (a spike if empty)."""
        if end > lo:
            line.add(end, _INF, -x)
        else:
            line.add(lo, _INF, -x)
            line.add(lo, lo, x)

    def close_sinks(self) -> None:
        """End the outputs of nodes without consumers at the makespan (call once, after the
        last node is placed): open, they also cover the makespan instant, where the model
        has already freed them (this matters only for zero-length tensors at that instant)."""
        placed = [v for v in range(len(self.place_of)) if self.place_of[v] >= 0]
        makespan = max((self.finish[v] for v in placed), default=0.0)
        for v in placed:
            if self.in_sink(v) and self.out[v] != 0.0:
                self._shorten(self.lines[self.place_of[v]], self.start[v], makespan, self.out[v])
                self.out[v] = 0.0  # closed: a second call changes nothing

    def in_sink(self, v: int) -> bool:
        """True when ``v`` has no consumer (its output lives to the end of the step).

        Parameters
        ----------
        %(v)s

        Returns
        -------
        bool
        """
        return self.problem.out_ptr[v + 1] == self.problem.out_ptr[v]

    def peaks(self) -> np.ndarray:
        """Peak bytes per device of what is placed so far.

        Returns
        -------
        numpy.ndarray of float64
            One peak per device; equal to :func:`optpart.model.memory.peak_memory` once every node
            is placed and :meth:`close_sinks` ran.
        """
        out = np.zeros(self.k)
        for d, line in enumerate(self.lines):
            out[d] = self.base[d] + max(0.0, line.peak_with([]))
        return out


@fill_doc
class LivenessPolicy(MemoryPolicy):
    """The liveness model as a memory policy for list schedulers (HEFT, m-ETF, the heuristic).

    ``devices_for(v)``: the devices ``v`` may use (its group's device once one member is
    placed) whose parameters so far leave room for ``v``'s; ``admits(v, d, start, finish)``:
    the device's peak stays within capacity (:func:`optpart.model.memory.fits`); ``place(...)``
    records it in the :class:`LivenessTracker` (a group's first member reserves the whole
    group's parameters); ``no_room_message(v)`` names the device with most room, its peak
    and what the node adds.

    Parameters
    ----------
    %(problem)s
    capacity : sequence of float, optional
        Bytes usable per device (default: the devices' memory).
    """

    def __init__(self, problem: Problem, capacity=None) -> None:
        super().__init__(problem, capacity)
        self.tracker = LivenessTracker(problem)
        self.group_param = [float(problem.param_bytes[g].sum()) for g in problem.groups]

    def _param(self, v: int) -> float:
        g = self.group_of[v]
        if g < 0:
            return self.tracker.param[v]
        return self.group_param[g] if self.group_device[g] < 0 else 0.0

    def devices_for(self, v: int) -> list[int]:
        g = self.group_of[v]
        if g >= 0 and self.group_device[g] >= 0:
            return [self.group_device[g]]
        par, base, cap = self._param(v), self.tracker.base, self.capacity
        return [d for d in self.allowed_list[v] if fits(base[d] + par, cap[d])]

    def peak_if(self, v: int, d: int, start: float, finish: float) -> float:
        """The peak of ``d`` with ``v`` run at ``[start, finish)`` (a group's first member reserves the group's parameters).

        Parameters
        ----------
        %(node_slot)s

        Returns
        -------
        float
            Bytes.
        """
        return self.tracker.peak_if(v, d, start, finish, self._param(v))

    def admits(self, v: int, d: int, start: float, finish: float) -> bool:
        return bool(fits(self.peak_if(v, d, start, finish), self.capacity[d]))

    def place(self, v: int, d: int, start: float, finish: float) -> None:
        par = self._param(v)
        g = self.group_of[v]
        if g >= 0:
            self.group_device[g] = d
        self.tracker.place(v, d, start, finish, par)

    def no_room_message(self, v: int) -> str:
        p = self.problem
        fixed = self.fixed_device(v)
        devs = self.allowed_list[v] if fixed < 0 else [fixed]
        if not devs:
            return f"node '{p.node_ids[v]}' may use no device"
        peaks = self.tracker.peaks()
        d = min(devs, key=lambda e: (peaks[e] - self.capacity[e], e))
        return (f"node '{p.node_ids[v]}' fits on no device under the peak model: the one with most room, "
                f"'{p.device_ids[d]}', already peaks at {format_bytes(peaks[d])} of {format_bytes(self.capacity[d])} "
                f"and the node adds {format_bytes(self._param(v) + self.tracker.temp[v] + self.tracker.out[v])} "
                f"plus its inputs")
