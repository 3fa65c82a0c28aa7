"""How much a growing set of intervals overlaps a query interval, in O(log n) per step.

The seed method's memory step (:mod:`.seed_memory`) weighs a move by how busy the target
device is over the moved node's slot, and every accepted move adds the node's slot to the
target. Summing the overlaps interval by interval made each query cost the number of moves
so far (quadratic: 60% of the ``pardnn`` solver's time on a 2*10^4-node fork-join graph).

For intervals ``[a_i, z_i]`` the total overlap with ``(-inf, x]`` is
``F(x) = sum_{a_i <= x} (x - a_i) - sum_{z_i <= x} (x - z_i)``, so the overlap with
``[lo, hi]`` is ``F(hi) - F(lo)``: counts and sums of the starts and ends at or below ``x``,
kept in Fenwick trees (P. M. Fenwick, "A new data structure for cumulative frequency
tables", Software: Practice and Experience 24(3), 1994) over the coordinates every interval
and query uses, known in advance.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

import numpy as np

__all__ = ["OverlapSums"]


class OverlapSums:
    """A set of intervals with endpoints among ``coords``; :meth:`add` and :meth:`overlap`.

    Parameters
    ----------
    coords : sequence of float
        Every value an interval end or a query end may take.
    """

    def __init__(self, coords: Sequence[float]) -> None:
        self._start(np.unique(np.asarray(coords, dtype=np.float64)).tolist())  # a list: bisect per query

    @classmethod
    def empty_like(cls, other: "OverlapSums") -> "OverlapSums":
        """An empty set over ``other``'s coordinates (shared, not sorted again).

        Parameters
        ----------
        other : OverlapSums

        Returns
        -------
        OverlapSums
        """
        new = cls.__new__(cls)
        new._start(other.coords)
        return new

    def _start(self, coords: list) -> None:
        self.coords = coords
        m = len(coords) + 1
        self._cnt = [0.0] * m   # starts minus ends at or below a coordinate (a Fenwick tree)
        self._sum = [0.0] * m   # sum of the ends minus sum of the starts there
        self.empty = True

    def index(self, x: float) -> int:
        """The 1-based tree position of coordinate ``x``.

        Parameters
        ----------
        x : float
            One of ``coords``.

        Returns
        -------
        int
        """
        return bisect_left(self.coords, x) + 1

    def _update(self, i: int, dc: float, ds: float) -> None:
        cnt, sm, m = self._cnt, self._sum, len(self._cnt)
        while i < m:
            cnt[i] += dc
            sm[i] += ds
            i += i & -i

    def add(self, a: float, z: float) -> None:
        """Add the interval ``[a, z]``.

        Parameters
        ----------
        a, z : float
            Its ends, ``a <= z``, both among ``coords``.
        """
        self._update(self.index(a), 1.0, -a)
        self._update(self.index(z), -1.0, z)
        self.empty = False

    def below(self, x: float) -> float:
        """``F(x)``: the intervals' total overlap with ``(-inf, x]``.

        Parameters
        ----------
        x : float
            One of ``coords``.

        Returns
        -------
        float
        """
        i = self.index(x)
        c = s = 0.0
        cnt, sm = self._cnt, self._sum
        while i > 0:
            c += cnt[i]
            s += sm[i]
            i -= i & -i
        return x * c + s

    def overlap(self, lo: float, hi: float) -> float:
        """The intervals' total overlap with ``[lo, hi]`` (each interval counted on its own).

        Parameters
        ----------
        lo, hi : float
            The query interval, both among ``coords``.

        Returns
        -------
        float
        """
        if self.empty:
            return 0.0
        return self.below(hi) - self.below(lo)
