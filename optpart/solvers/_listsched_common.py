"""Pieces shared by the baseline solvers (``heft``, ``etf``, ``topo``, ``metis``).

* :func:`mean_costs` and :func:`upward_rank`: the "average cost" priority of HEFT
  (Topcuoglu, Hariri, Wu, IEEE TPDS 13(3), 2002, section 4.1), also used as the
  bottom-level priority of m-ETF (Jeon et al., Baechi, ACM SoCC 2020).
* :class:`MemoryBook`: group-aware static-memory bookkeeping. A colocation group
  reserves the memory of *all* its members on the device where its first member is
  placed, so later members never find their device full and no device overflows.
* :class:`GapLine`: one device's idle gaps for insertion scheduling, O(log n) when
  a node starts at the end of the device and a scan over *idle gaps* (not busy
  intervals) otherwise, so densely packed devices stay cheap.
* :func:`overflow_message`: the reason a memory-blind placement is not returned.
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np

from ..paths import bottom_levels_by_edge
from ..problem import Problem
from ..units import format_bytes

__all__ = ["mean_costs", "upward_rank", "MemoryBook", "GapLine", "overflow_message", "pair_costs"]


def pair_costs(problem: Problem) -> tuple[list[list[float]], list[list[float]]]:
    """Latency and inverse bandwidth as ``k x k`` nested lists (0 on the diagonal), for hot loops."""
    lat = problem.latency.copy()
    with np.errstate(divide="ignore"):
        inv = 1.0 / problem.bandwidth
    np.fill_diagonal(lat, 0.0)
    np.fill_diagonal(inv, 0.0)
    return lat.tolist(), inv.tolist()


def mean_costs(problem: Problem) -> tuple[np.ndarray, np.ndarray]:
    """Mean computation time per node and mean communication time per edge.

    The node's mean is over the devices it may use of ``time / speed``; the edge's mean
    is over ordered pairs of distinct devices of ``latency + bytes / bandwidth``
    (HEFT's average cost, where the paper averages latency and transfer rate).
    With one device communication is free.
    """
    k = problem.n_devices
    allowed = problem.allowed
    inv_speed = 1.0 / problem.device_speed
    counts = allowed.sum(axis=1)
    wbar = problem.time * (allowed @ inv_speed) / np.maximum(counts, 1)
    if k < 2:
        return wbar, np.zeros(problem.n_edges)
    off = ~np.eye(k, dtype=bool)
    with np.errstate(divide="ignore"):
        inv_bw = 1.0 / problem.bandwidth
    mean_lat = float(problem.latency[off].mean())
    mean_inv_bw = float(inv_bw[off].mean())
    cbar = mean_lat + problem.edge_bytes * mean_inv_bw
    return wbar, cbar


def upward_rank(problem: Problem, wbar: np.ndarray, cbar: np.ndarray) -> np.ndarray:
    """HEFT's upward rank: ``rank(v) = wbar(v) + max over successors w of (cbar(v, w) + rank(w))``.

    It is the length of the longest path from ``v`` to an exit node under mean costs,
    i.e. the node's bottom level; O(V + E).
    """
    return bottom_levels_by_edge(problem, wbar, cbar)


class MemoryBook:
    """Static memory left on each device, with pins, forbids and colocation groups applied.

    ``devices_for(v)`` lists the devices ``v`` may go to now; ``place(v, d)`` records
    it. The first member of a colocation group to be placed reserves the whole
    group's memory on its device and fixes the device for the others, whose memory
    is then already counted. With ``memory_aware=False`` capacities are ignored
    (the classic memory-blind baselines) but constraints still hold.
    """

    def __init__(self, problem: Problem, memory_aware: bool = True) -> None:
        self.memory_aware = memory_aware
        self.capacity = problem.device_memory.tolist()
        self.used = [0.0] * problem.n_devices
        self.mem = problem.memory.tolist()
        self.group_of = problem.group_of.tolist()
        self.group_need = [float(problem.memory[m].sum()) for m in problem.groups]
        self.group_device = [-1] * len(problem.groups)
        allowed = problem.allowed
        k = problem.n_devices
        all_devices = list(range(k))
        constrained = ~allowed.all(axis=1)
        self.allowed_list: list[list[int]] = [all_devices] * problem.n_nodes
        for v in np.flatnonzero(constrained).tolist():
            self.allowed_list[v] = np.flatnonzero(allowed[v]).tolist()

    def need(self, v: int) -> float:
        """Bytes that placing ``v`` now adds: the whole group for a group's first member, else its own."""
        g = self.group_of[v]
        if g < 0:
            return self.mem[v]
        return 0.0 if self.group_device[g] >= 0 else self.group_need[g]

    def fixed_device(self, v: int) -> int:
        """The device ``v``'s group already sits on, or -1."""
        g = self.group_of[v]
        return self.group_device[g] if g >= 0 else -1

    def fits(self, v: int, d: int) -> bool:
        """May ``v`` go to device ``d`` now (constraints, group, memory)?"""
        g = self.group_of[v]
        if g >= 0 and self.group_device[g] >= 0:
            return d == self.group_device[g]
        if not self.memory_aware:
            return True
        return self.used[d] + self.need(v) <= self.capacity[d]

    def devices_for(self, v: int) -> list[int]:
        """Devices ``v`` may go to now, in index order."""
        g = self.group_of[v]
        if g >= 0 and self.group_device[g] >= 0:
            return [self.group_device[g]]
        if not self.memory_aware:
            return self.allowed_list[v]
        need = self.need(v)
        used, cap = self.used, self.capacity
        return [d for d in self.allowed_list[v] if used[d] + need <= cap[d]]

    def place(self, v: int, d: int) -> None:
        g = self.group_of[v]
        if g >= 0:
            if self.group_device[g] < 0:
                self.group_device[g] = d
                self.used[d] += self.group_need[g]
        else:
            self.used[d] += self.mem[v]

    def no_room_message(self, problem: Problem, v: int, solver: str) -> str:
        """Why ``v`` cannot be placed: every device it may use is too full."""
        need = self.need(v)
        room = max((self.capacity[d] - self.used[d] for d in self.allowed_list[v]), default=0.0)
        what = f"node '{problem.node_ids[v]}'"
        if self.group_of[v] >= 0:
            what += " (with its colocation group)"
        return (f"{solver} found no device with room for {what}: it needs {format_bytes(need)}, "
                f"the most free memory on a device it may use is {format_bytes(max(room, 0.0))}")


def overflow_message(problem: Problem, placement: np.ndarray, solver: str) -> str | None:
    """``"<solver> overflows device 'dev2': 19.1 GiB of 16 GiB"`` for the first full device, or None."""
    used = np.bincount(placement, weights=problem.memory, minlength=problem.n_devices)
    cap = problem.device_memory
    over = np.flatnonzero(used > cap)
    if over.size == 0:
        return None
    d = int(over[0])
    return f"{solver} overflows device '{problem.device_ids[d]}': {format_bytes(used[d])} of {format_bytes(cap[d])}"


class GapLine:
    """Busy time of one device as its idle gaps plus the end of its last busy interval.

    Insertion scheduling asks for the earliest ``t >= ready`` with ``[t, t + duration]``
    idle. When ``ready`` is at or after the end this is O(1). Otherwise the idle gaps
    after ``ready`` are searched in time order; they are kept in blocks of about
    ``_BLOCK`` gaps that remember their longest gap, so blocks too short for the node
    are skipped whole (a square-root decomposition). Gaps shorter than ``min_gap`` (the
    shortest positive run time on the device) are not kept: no such node fits them.
    Same answers as :class:`optpart.timeline.Timeline` for nodes with positive run
    time, much cheaper on long schedules with many small holes.
    """

    __slots__ = ("starts", "ends", "bmax", "bend", "end", "min_gap")
    _BLOCK = 32

    def __init__(self, min_gap: float = 0.0) -> None:
        self.starts: list[list[float]] = []   # per block: gap starts, in time order
        self.ends: list[list[float]] = []     # per block: gap ends
        self.bmax: list[float] = []           # per block: longest gap
        self.bend: list[float] = []           # per block: end of its last gap
        self.end = 0.0
        self.min_gap = min_gap

    def earliest_start(self, ready: float, duration: float) -> float:
        """The earliest ``t >= ready`` such that ``[t, t + duration]`` is idle."""
        if ready >= self.end:
            return ready
        bmax = self.bmax
        j = bisect_right(self.bend, ready)
        nb = len(bmax)
        while j < nb:
            if bmax[j] >= duration:
                gs, ge = self.starts[j], self.ends[j]
                for i in range(bisect_right(ge, ready), len(gs)):
                    t = gs[i] if gs[i] > ready else ready
                    if t + duration <= ge[i]:
                        return t
            j += 1
        return self.end

    def reserve(self, start: float, finish: float) -> None:
        """Mark ``[start, finish]`` busy; it must come from :meth:`earliest_start`."""
        if start >= self.end:
            if start > self.end and start - self.end >= self.min_gap:
                self._append(self.end, start)
            if finish > self.end:
                self.end = finish
            return
        j = bisect_right(self.bend, start)
        if j >= len(self.bend):
            return
        gs, ge = self.starts[j], self.ends[j]
        i = bisect_right(ge, start)
        if not (i < len(gs) and start >= gs[i] and finish <= ge[i]):
            return  # a zero-length node at a gap's end takes no time: nothing to mark
        # The gap loses [start, finish]; a zero-length node strictly inside splits it,
        # so no later node spans that instant.
        a, b, low = gs[i], ge[i], self.min_gap
        pieces = [(x, y) for x, y in ((a, start), (finish, b)) if y > x and y - x >= low]
        gs[i:i + 1] = [x for x, _ in pieces]
        ge[i:i + 1] = [y for _, y in pieces]
        self._refresh(j)

    def _append(self, a: float, b: float) -> None:
        if not self.starts or len(self.starts[-1]) >= self._BLOCK:
            self.starts.append([])
            self.ends.append([])
            self.bmax.append(0.0)
            self.bend.append(0.0)
        self.starts[-1].append(a)
        self.ends[-1].append(b)
        if b - a > self.bmax[-1]:
            self.bmax[-1] = b - a
        self.bend[-1] = b

    def _refresh(self, j: int) -> None:
        gs, ge = self.starts[j], self.ends[j]
        if not gs:
            del self.starts[j], self.ends[j], self.bmax[j], self.bend[j]
            return
        if len(gs) > 2 * self._BLOCK:  # keep blocks short: split in two
            h = len(gs) // 2
            self.starts[j:j + 1] = [gs[:h], gs[h:]]
            self.ends[j:j + 1] = [ge[:h], ge[h:]]
            self.bmax[j:j + 1] = [0.0, 0.0]
            self.bend[j:j + 1] = [0.0, 0.0]
            self._refresh(j + 1)
            gs, ge = self.starts[j], self.ends[j]
        self.bmax[j] = max(y - x for x, y in zip(gs, ge))
        self.bend[j] = ge[-1]
