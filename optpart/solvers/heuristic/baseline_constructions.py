"""The heuristic's first constructions: HEFT's, its ``near`` variant and m-ETF's.

``heft`` and ``etf`` return exactly these schedules, so with them as candidates the heuristic
is never worse than either baseline. They run unless one already meets the proven lower
bound (the others could only tie).

**Two processes.** On large graphs (from :data:`FORK_SIZE` nodes + edges, the workers option
above 1, Linux with two CPUs or more) m-ETF's construction runs in a forked process while this
one builds HEFT's (:class:`optpart.schedule.forked.Forked`): the same schedule, in about the
wall time of the longer of the two instead of their sum (at 10^6 nodes each is seconds of
pure-Python loop). Meanwhile both read the graph as arrays (:meth:`Graph.compact`): reading a
list's items writes their reference counts, so every page of list items either process
touched would be copied, hundreds of MiB at 10^6 nodes; pages of arrays are only read and stay
shared. The CPU time of both is somewhat above one process's (page faults after the fork); the
memory both hold is measured by ``benchmarks/heuristic_planted_scale.py --million-only``
(summed PSS; docs/heuristic.md, stop 38).
"""

from __future__ import annotations

import time
from array import array
from typing import Callable

from ...model.problem import Problem
from ...schedule import EftSchedule, NoRoom, StaticPolicy, TimeUp, etf_schedule
from ...schedule.forked import Forked
from .eft import eft_schedule, upward_rank
from .schedule import Graph

__all__ = ["FORK_SIZE", "first_constructions"]

#: Nodes + edges from which m-ETF's construction runs in a second process (below, a construction
#: takes well under a second and the fork, the arrays and the transfer are a visible share).
FORK_SIZE = 200_000


def first_constructions(problem: Problem, g: Graph, capacity: list[float], order: list[int], full: bool,
                        near_variant: bool, deadline: float | None, workers: int,
                        add: Callable[..., None], met: Callable[[], bool], late: Callable[[str, float], bool],
                        stats: dict) -> float:
    """Build HEFT's, optionally HEFT-near's and m-ETF's schedules and ``add`` each (tags 1, 9, 5).

    Parameters
    ----------
    problem : Problem
    g : Graph
        ``problem`` as plain lists.
    capacity : list of float
        Bytes usable per device (static model).
    order : list of int
        HEFT's node order.
    full : bool
        HEFT tries every device (else the ``near`` candidates).
    near_variant : bool
        Also build HEFT with the ``near`` candidates.
    deadline : float, optional
        ``time.perf_counter()`` value: m-ETF stops past it (HEFT's always finishes).
    workers : int
        Processes that may be used (2: m-ETF's in a second one on large graphs).
    add : callable
        ``add(tag, place, start, finish)``: keeps a candidate.
    met : callable
        True once a kept candidate meets the proven lower bound (the rest are skipped).
    late : callable
        ``late(stage, cost)``: True when a stage costing ``cost`` HEFT constructions would pass
        the deadline (says so in ``stats``).
    stats : dict
        Gets ``"processes"`` and, when m-ETF stopped at the deadline, ``"stopped"``.

    Returns
    -------
    float
        Seconds HEFT's construction took (the yardstick of the later stages).
    """
    def etf_construction(graph: Graph, priority) -> EftSchedule:
        return etf_schedule(graph, priority, StaticPolicy(problem, capacity=capacity, solver="heuristic"),
                            deadline=deadline)

    side, hg = None, g
    if workers > 1 and len(g.pred) + g.n >= FORK_SIZE:
        priority, hg = array("d", upward_rank(g)), g.compact()
        side = Forked(lambda: etf_construction(hg, priority))
        if not side.forked:
            side, hg = None, g
    stats["processes"] = 1 if side is None else 2
    try:
        t0 = time.perf_counter()
        res = eft_schedule(hg, capacity, order, candidates="all" if full else "near")
        if res is not None:
            add(1, *res)
        res = None  # the caller's candidate list holds what is kept
        heft_seconds = time.perf_counter() - t0
        # HEFT's near variant and m-ETF run unless HEFT meets the bound: the heuristic is never
        # worse than heft or etf, whatever the gap
        if near_variant and not (met() or late("HEFT's near construction", 1.0)):
            res = eft_schedule(hg, capacity, order, candidates="near")
            if res is not None:
                add(9, *res)
            res = None
        if not (met() or (side is None and late("the ETF construction", 1.0))):
            try:
                r = side.result() if side is not None else etf_construction(g, upward_rank(g))
                add(5, r.place, r.start, r.finish)
                r = None
            except NoRoom:
                pass
            except TimeUp:  # stopped part-way: nothing kept, and the later stages are past the deadline too
                stats.setdefault("stopped", "time limit reached during the ETF construction")
    finally:
        if side is not None:
            side.close()
    return heft_seconds
