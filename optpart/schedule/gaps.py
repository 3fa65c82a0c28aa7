"""One device's idle gaps, with a true earliest fit: the insertion policy's data structure.

Insertion list scheduling (HEFT's "insertion-based policy", Topcuoglu, Hariri, Wu,
IEEE TPDS 13(3), 2002) puts a node into the *earliest* idle interval of a device that
starts no earlier than the node's ready time and is long enough for it. :class:`GapLine`
keeps a device's idle gaps in time order plus the end of its last busy interval:

* gaps are stored in blocks of at most ``2 * BLOCK`` gaps; a max-segment tree over the
  blocks' longest gaps finds the first block at or after a position that holds a gap of
  length ``>= d`` in O(log blocks), so the first fitting gap is found in
  O(log gaps + BLOCK) with no scan cap (the heuristic used to append at the end after
  64 gaps, which cost several percent of makespan at 20,000 nodes);
* a node that starts at or after the end costs O(1) (plus the tree update when it opens
  a gap).

Zero-duration nodes (views, ``t``, ``expand``) are *instants*. The checker
(:func:`optpart.evaluate.violations`) flags an instant that lies strictly inside
another node's run on the same device, so an instant placed inside an idle gap
**splits** the gap in two: a later positive-length node may use either piece but
never spans the instant. A zero-duration node goes to ``ready`` when ``ready`` is in an
idle gap (ends included) or at/after the end, else to the end of the busy stretch that
contains ``ready`` (the start of the next gap): both are instants not strictly inside
any run.

Times are compared exactly: a slot is accepted when ``t + d <= gap_end`` evaluated in
floating point the same way :meth:`GapLine.reserve` recomputes it, so the schedules
built here never overlap, not even by an ulp. (The checker's tolerance,
:func:`optpart.evaluate.time_tolerance`, only absorbs noise from elsewhere.)

>>> line = GapLine()
>>> line.reserve(0.0, 2.0); line.reserve(5.0, 6.0)   # busy [0,2] and [5,6]: gap [2,5]
>>> line.earliest_start(1.0, 3.0), line.earliest_start(1.0, 3.5)
(2.0, 6.0)
>>> line.reserve(3.0, 3.0)                          # an instant at 3 splits the gap
>>> line.earliest_start(2.0, 1.5), line.earliest_start(2.0, 1.0)
(3.0, 2.0)
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from operator import sub

__all__ = ["GapLine", "BLOCK"]

#: Gaps per block (a block splits in two when it passes twice this).
BLOCK = 32


class GapLine:
    """Idle gaps and end of one device's busy time (see the module docstring).

    Attributes
    ----------
    end : float
        When the device's last busy interval ends (0 when nothing is placed).
    """

    __slots__ = ("gs", "ge", "bmax", "bend", "end", "_tree", "_cap")

    def __init__(self) -> None:
        self.gs: list[list[float]] = []   # per block: gap starts, in time order
        self.ge: list[list[float]] = []   # per block: gap ends
        self.bmax: list[float] = []       # per block: longest gap
        self.bend: list[float] = []       # per block: end of its last gap
        self.end = 0.0
        self._cap = 1
        self._tree = [-1.0, -1.0]

    # ----------------------------------------------------------------- queries
    def earliest_start(self, ready: float, duration: float) -> float:
        """The earliest ``t >= ready`` at which a node of ``duration`` may run here.

        Parameters
        ----------
        ready : float
            When the node's inputs are on this device (seconds).
        duration : float
            Its run time here (seconds; zero fits in any gap).

        Returns
        -------
        float
            The start of the first idle gap at or after ``ready`` long enough, else the line's end.
        """
        if ready >= self.end:
            return ready
        bend = self.bend
        if duration <= 0.0:
            j = bisect_left(bend, ready)
            if j == len(bend):
                return self.end
            gs, ge = self.gs[j], self.ge[j]
            i = bisect_left(ge, ready)
            a = gs[i]
            return ready if a <= ready else a
        if self._tree[1] < duration - 1e-15 * (self.end + duration):
            # no gap anywhere is that long (the margin covers the rounding of gap lengths
            # against the sums the slot test adds): the end, as the search below would find
            return self.end
        j = bisect_right(bend, ready)
        nb = len(bend)
        if j == nb:
            return self.end
        gs, ge = self.gs[j], self.ge[j]
        i = bisect_right(ge, ready)
        a = gs[i]
        t = a if a > ready else ready
        if t + duration <= ge[i]:
            return t
        if self.bmax[j] >= duration:
            for x in range(i + 1, len(gs)):
                if gs[x] + duration <= ge[x]:
                    return gs[x]
        j += 1
        while True:
            j = self._first_block(j, duration)
            if j < 0:
                return self.end
            gs, ge = self.gs[j], self.ge[j]
            for x in range(len(gs)):
                if gs[x] + duration <= ge[x]:
                    return gs[x]
            j += 1  # lengths pass, sums do not (rounding): look further

    def gaps(self) -> list[tuple[float, float]]:
        """Every idle gap ``(start, end)`` in time order (for tests and plots).

        Returns
        -------
        list of tuple of float
        """
        return [(a, b) for gs, ge in zip(self.gs, self.ge) for a, b in zip(gs, ge)]

    # ----------------------------------------------------------------- updates
    def reserve(self, start: float, finish: float) -> None:
        """Mark ``[start, finish]`` busy; the slot must come from :meth:`earliest_start`.

        Raises ValueError when a positive-length slot is not idle (a caller's bug).

        Parameters
        ----------
        start, finish : float
            The slot (seconds), as found by :meth:`earliest_start`.

        Returns
        -------
        None
        """
        end = self.end
        if start >= end:
            if start > end:
                self.add_gap(end, start)
            self.end = finish if finish > start else start
            return
        bend = self.bend
        if finish <= start:  # an instant: split the gap that contains it
            j = bisect_left(bend, start)
            if j == len(bend):
                return
            gs, ge = self.gs[j], self.ge[j]
            i = bisect_left(ge, start)
            a, b = gs[i], ge[i]
            if a < start < b:
                gs.insert(i + 1, start)
                ge.insert(i + 1, b)
                ge[i] = start
                self._refresh(j, b - a)
            return
        j = bisect_right(bend, start)
        if j < len(bend):
            gs, ge = self.gs[j], self.ge[j]
            i = bisect_right(ge, start)
            a, b = gs[i], ge[i]
            if a <= start and finish <= b:
                if a < start:
                    ge[i] = start
                    if finish < b:
                        gs.insert(i + 1, finish)
                        ge.insert(i + 1, b)
                elif finish < b:
                    gs[i] = finish
                else:
                    del gs[i], ge[i]
                self._refresh(j, b - a)
                return
        raise ValueError(f"slot [{start!r}, {finish!r}] is not idle on this device")

    def add_gap(self, a: float, b: float) -> None:
        """Record the idle gap ``[a, b]`` after the last busy interval (``a`` is :attr:`end`,
        ``a < b``); the caller then sets :attr:`end` to the new interval's finish. Together
        that is :meth:`reserve` of a slot starting after the end, for loops that inline it.

        Parameters
        ----------
        a, b : float
            The gap (seconds): the old end and the start of the new busy interval.
        """
        gs = self.gs
        if not gs or len(gs[-1]) >= BLOCK:
            gs.append([a])
            self.ge.append([b])
            self.bmax.append(b - a)
            self.bend.append(b)
            j = len(gs) - 1
            if j >= self._cap:
                self._rebuild()
            else:
                self._raise_leaf(j, b - a)
            return
        gs[-1].append(a)
        self.ge[-1].append(b)
        j = len(gs) - 1
        self.bend[j] = b
        if b - a > self.bmax[j]:
            self.bmax[j] = b - a
            self._raise_leaf(j, b - a)

    def _refresh(self, j: int, old: float) -> None:
        """A gap of length ``old`` in block ``j`` lost time: update the block's summary
        (delete or split the block when needed). Pieces are never longer than ``old``,
        so the longest gap changes only when ``old`` was it."""
        gs, ge = self.gs[j], self.ge[j]
        if not gs:
            del self.gs[j], self.ge[j], self.bmax[j], self.bend[j]
            self._rebuild()
            return
        if len(gs) > 2 * BLOCK:
            h = len(gs) // 2
            self.gs[j:j + 1] = [gs[:h], gs[h:]]
            self.ge[j:j + 1] = [ge[:h], ge[h:]]
            self.bmax[j:j + 1] = [_longest(gs[:h], ge[:h]), _longest(gs[h:], ge[h:])]
            self.bend[j:j + 1] = [ge[h - 1], ge[-1]]
            self._rebuild()
            return
        self.bend[j] = ge[-1]
        if old < self.bmax[j]:
            return
        m = _longest(gs, ge)
        if m != self.bmax[j]:
            self.bmax[j] = m
            self._set_leaf(j, m)

    def _rebuild(self) -> None:
        nb = len(self.bmax)
        cap = 1
        while cap < nb:
            cap *= 2
        tree = [-1.0] * (2 * cap)
        tree[cap:cap + nb] = self.bmax
        for i in range(cap - 1, 0, -1):
            x, y = tree[2 * i], tree[2 * i + 1]
            tree[i] = x if x > y else y
        self._cap, self._tree = cap, tree

    def _raise_leaf(self, j: int, value: float) -> None:
        tree = self._tree
        i = j + self._cap
        tree[i] = value
        i >>= 1
        while i and tree[i] < value:
            tree[i] = value
            i >>= 1

    def _set_leaf(self, j: int, value: float) -> None:
        tree = self._tree
        i = j + self._cap
        tree[i] = value
        i >>= 1
        while i:
            x, y = tree[2 * i], tree[2 * i + 1]
            tree[i] = x if x > y else y
            i >>= 1

    def _first_block(self, lo: int, length: float) -> int:
        """The first block index ``>= lo`` whose longest gap is ``>= length``, or -1."""
        cap, tree = self._cap, self._tree
        if lo >= len(self.bmax):
            return -1
        i = lo + cap
        while True:
            if tree[i] >= length:
                while i < cap:
                    i = 2 * i if tree[2 * i] >= length else 2 * i + 1
                return i - cap
            while i & 1:
                i >>= 1
            if i == 0:
                return -1
            i += 1


def _longest(gs: list[float], ge: list[float]) -> float:
    return max(map(sub, ge, gs))
