"""The heuristic's work budget: deterministic units of work, never wall time.

One *pass* is ``size = nodes + edges`` units: one visit of every node and edge, about the work
of one insertion replay of the graph. At effort ``e`` the heuristic may spend
``e * WORK_PER_EFFORT`` units after HEFT's construction. The other two constructions (m-ETF and
the ParDNN seed method) run at every size whatever the budget, and are charged their nominal
cost, :data:`CONSTRUCTION_PASSES` passes together, before anything else. What is left pays, in
this order, for double justification of candidates (:data:`JUSTIFY_PASSES` each, as they come),
EFT priority variants (one pass each on top of their justification), the seed method's
refinement and the search (one pass per schedule evaluation), each stage also keeping its own
cap in evaluations.

So the split between construction and improvement follows the graph: a 200-node graph has
about 550,000 units left for improvement (hundreds of evaluations), a 2,000-node graph about
500,000 (a few dozen), while from about 60,000 nodes + edges on (20,000 planted nodes) the
constructions' own charge uses the budget up and the heuristic returns the best construction
as built. The numbers were chosen so that the small graphs keep the work the earlier per-stage
rules gave them and so that, on planted graphs of 2 x 10^4 nodes, the heuristic stays near
twice HEFT's time (docs/heuristic.md, "Planted graphs 200 to 10^6 nodes"); justification of the
best construction measured no gain there nor on the 10^4 / 10^5 training graphs.
"""

from __future__ import annotations

__all__ = ["WORK_PER_EFFORT", "CONSTRUCTION_PASSES", "JUSTIFY_PASSES", "WorkBudget"]

WORK_PER_EFFORT = 700_000  # units (node or edge visits) per unit of effort after HEFT's construction
CONSTRUCTION_PASSES = 12   # m-ETF (5-6 passes) and the seed method with its levels (5-6): charged first
JUSTIFY_PASSES = 2         # a double justification: two insertion replays


class WorkBudget:
    """Units of work left for the heuristic's stages after its first construction.

    Parameters
    ----------
    effort : float
        The ``effort`` option (>= 0).
    size : int
        Nodes + edges of the graph (>= 1): the units of one pass.
    """

    def __init__(self, effort: float, size: int) -> None:
        self.size = max(1, int(size))
        self.total = float(effort) * WORK_PER_EFFORT
        self.used = 0.0

    @property
    def left(self) -> float:
        """Units not yet spent (negative once the constructions' charge exceeds the budget)."""
        return self.total - self.used

    def charge(self, passes: float) -> None:
        """Spend ``passes`` passes whether or not they fit (work that always runs).

        Parameters
        ----------
        passes : float
            Passes over the graph the work costs.

        Returns
        -------
        None
        """
        self.used += passes * self.size

    def take(self, passes: float) -> bool:
        """:meth:`charge` ``passes`` only when they fit in :attr:`left`.

        Parameters
        ----------
        passes : float
            The optional stage's cost.

        Returns
        -------
        bool
            Whether the stage may run (it is charged then).
        """
        fits = passes * self.size <= self.left
        if fits:
            self.charge(passes)
        return fits

    def passes_left(self) -> int:
        """Whole passes that still fit (0 when none).

        Returns
        -------
        int
        """
        return max(0, int(self.left // self.size))
