"""The heuristic's schedule-aware search: critical-path moves, three ways of scoring them.

A placement is improved by moves of memory units (colocation groups as one). A move is
kept when it lowers (makespan, sum of finish times) lexicographically -- the second key
walks plateaus of equal makespan and never cycles -- and the placement still fits memory:
static bytes per device (``capacity``) and, when given, an ``admit`` check on the exact
schedule (the peak model). Three *levels* score moves differently; each pays on other
graphs, so the budget goes to the one that paid most per unit of work:

* ``incremental``: the moves the critical chain points at (:mod:`.search_moves`: a
  transfer or a device wait on it, paths and joins gathered, room made on a full device by
  ejection or by reassigning the devices' contents), scored by re-simulating only the
  nodes a move reaches (:class:`.incremental.SequenceSchedule`; device sequences kept).
* ``keep-order`` and ``bottom-level``: :func:`.improve.local_search` (every chain unit to
  every device, gathers, then every unit, swaps), each placement rescheduled from scratch
  by replaying the incumbent's start order, or in bottom-level order under the new
  placement (double-justified on small graphs). Dearer per move, but a reschedule reorders
  what the device sequences keep.

A level runs for a slice of work proportional to the graph (not to the budget, so more
budget continues the same search; after a slice that paid, the schedule is
double-justified, which often shortens what the device sequences keep); the next slice
goes to the level with the best
gain per work in its last slice (each level once first, in the order above), skipping
levels that found no move at the current placement, and those whose last slice gained
nothing while something else remains to be tried. When none is left the placement is
rescheduled from scratch (bottom-level order, double justification) and the search goes on
from that schedule when it is shorter; then, with ``perturb``, an iterated local search
(Lourenco, Martin, Stuetzle, 2003) moves a few seeded random units and starts again from
there, keeping the best; or, given ``restarts`` (other constructions), it scans them for
one that starts below the best and climbs from it. The budget ``work`` counts node and edge visits of replays (an
incremental re-simulation of a node counts :data:`INCREMENTAL_COST`), so it is deterministic
and roughly proportional to time; ``deadline`` (a time limit) stops it earlier.
"""

from __future__ import annotations

import time as _time
from typing import Callable, Iterator

import numpy as np

from ...evaluate import time_tolerance
from .improve import local_search
from .incremental import SequenceSchedule
from .schedule import Graph, justify, schedule_placement
from .search_moves import _TIERS, ChainMoves, Scan

__all__ = ["improve_schedule", "INCREMENTAL_COST"]

#: Work units per incremental node re-simulation (a replay visits a node or an edge for one
#: unit; measured on the bundled graphs and planted DAGs: an incremental step, edges
#: included, costs 3.3-4.1 of them).
INCREMENTAL_COST = 4
_SLICE_SIZE = 25        # a level's slice: this many visits per node and edge,
_SLICE_EVALS = 10       # and at least this many of its reschedules
_LEVELS = ("incremental", "keep-order", "bottom-level")
_STRENGTH = 3           # random unit moves of a perturbation (more wrecks what the climbs built)
_RESTART_SLACK = 0.0    # a restart is climbed from when it starts below the best by more than this


class _Search(ChainMoves):
    """State of one search: the incremental schedule, memory use and the budget."""

    def __init__(self, g: Graph, place, start, allowed: np.ndarray, units, capacity: list[float],
                 admit: Callable | None, work: int, deadline: float | None, justified: bool,
                 justify_rounds: int = 1) -> None:
        self.g = g
        self.unit_of, self.members, self.unit_mem = units
        self.allowed, self.capacity, self.admit = allowed, capacity, admit
        self.deadline, self.justified = deadline, justified
        self.justify_rounds = justify_rounds
        self.size = g.n + len(g.succ)
        self.work, self.budget = 0, work
        # the most one step costs: a move re-simulating and placing every node, a reschedule and
        # its restart, a memory check
        self.reserve = INCREMENTAL_COST * 3 * g.n + 6 * self.size
        self.pinned = [int(allowed[m[0]].sum()) <= 1 for m in self.members]
        self.moves = 0
        self.stopped = False
        self._last: list = []
        self._scan: Scan | None = None   # where the climb is in the chain's moves
        self.tier_yield = [[0, 0] for _ in range(_TIERS)]   # moves kept and tried per tier
        self.reset(place, start)

    # ---------------------------------------------------------------- budget, state
    def spent(self, limit: int | None = None) -> bool:
        """True when the budget (or ``limit``) is used up, but for the most one step may take
        (:attr:`reserve`, so the budget is never passed), or the deadline has passed."""
        used = self.work + INCREMENTAL_COST * self.ss.work
        if used + self.reserve > self.budget or (limit is not None and used >= limit):
            return True
        if self.deadline is not None and _time.perf_counter() > self.deadline:
            self.stopped = True
            return True
        return False

    def used(self) -> int:
        return self.work + INCREMENTAL_COST * self.ss.work

    def reset(self, place: list[int], start: list[float]) -> None:
        """Go on from ``place`` scheduled by ``start`` (a full pass, counted)."""
        if hasattr(self, "ss"):
            self.work += INCREMENTAL_COST * self.ss.work
        self.ss = SequenceSchedule(self.g, list(place), list(start))
        self.load = [0.0] * self.g.k
        for u, m in enumerate(self.members):
            self.load[self.ss.place[m[0]]] += self.unit_mem[u]

    def score(self) -> tuple[float, float]:
        return self.ss.makespan, self.ss.total

    def dev(self, u: int) -> int:
        return self.ss.place[self.members[u][0]]

    def ok(self, u: int, d: int) -> bool:
        return bool(self.allowed[self.members[u][0], d])

    def admitted(self, place, start, finish) -> bool:
        """The ``admit`` check (counted as a pass over the graph), True without one."""
        if self.admit is None:
            return True
        self.work += self.size
        return bool(self.admit(place, start, finish))

    # ---------------------------------------------------------------- one move
    def apply(self, moves: list[tuple[int, int]]) -> bool:
        """Apply unit ``moves`` to the schedule and the memory use (False: nothing applied)."""
        src = [self.dev(u) for u, _ in moves]
        if not self.ss.apply([(v, d) for u, d in moves for v in self.members[u]]):
            return False
        for (u, d), a in zip(moves, src):
            self.load[a] -= self.unit_mem[u]
            self.load[d] += self.unit_mem[u]
        self._last = list(zip(moves, src))
        return True

    def attempt(self, moves: list[tuple[int, int]]) -> bool:
        """Apply ``moves``; keep them when (makespan, total) drops and memory admits."""
        ss = self.ss
        ms, tot = ss.makespan, ss.total
        if not self.apply(moves):
            return False
        eps_ms, eps_tot = 1e-12 * max(1.0, ms), 1e-12 * max(1.0, abs(tot))
        better = ss.makespan < ms - eps_ms or (ss.makespan <= ms + eps_ms and ss.total < tot - eps_tot)
        if better and self.admitted(ss.place, ss.start, ss.finish):
            ss.commit()
            self.moves += 1
            return True
        ss.undo()
        for (u, d), a in reversed(self._last):
            self.load[d] -= self.unit_mem[u]
            self.load[a] += self.unit_mem[u]
        return False

    # ---------------------------------------------------------------- the incremental level
    def climb(self, limit: int) -> tuple[bool, bool]:
        """First-improvement hill climbing over the chain's moves (:meth:`chain_tier`) until
        ``limit`` work; ``(improved, exhausted)``: exhausted when a pass over the moves of the
        critical chain kept none (:class:`_Scan`); a slice goes on where the last one stopped."""
        improved = False
        if self._scan is None or self._scan.ss is not self.ss:  # a new schedule: a new scan
            self._scan = Scan(self)
        scan = self._scan
        while not self.spent(limit):
            if scan.at >= len(scan.moves) and scan.kept and self.rescheduled(self.justify_rounds, False):
                scan = self._scan = Scan(self)   # a pass kept moves: justified, the next pass
            move = scan.next()
            if move is None:
                return improved, True
            group, d, tier = move
            self.tier_yield[tier][1] += 1
            if any(self.attempt(moves) for moves in self.plans(group, d)):
                improved = scan.kept = True
                self.tier_yield[tier][0] += 1
        return improved, False

    # ---------------------------------------------------------------- the rescheduling levels
    def replay_moves(self, keep: bool, limit: int) -> tuple[bool, bool]:
        """:func:`.improve.local_search` on up to ``limit`` work, scored by replaying the
        incumbent's order (``keep``) or in bottom-level order; ``(improved, exhausted)``:
        exhausted when it kept nothing (it starts its scan afresh each time)."""
        ss, g = self.ss, self.g
        justified = self.justified and not keep
        per_eval = self.eval_cost("keep-order" if keep else "bottom-level")
        evals = (min(limit, self.budget - self.reserve) - self.used()) // per_eval - 2
        if evals < 1:  # the slice cannot pay for one reschedule: it is over
            self.work = max(self.work, min(limit, self.budget) - INCREMENTAL_COST * ss.work)
            return False, False
        out: dict = {}
        new, used = local_search(g, ss.place, self.allowed, self.unit_of, self.members, self.unit_mem,
                                 self.capacity, evals, self.deadline, mode="chain", keep_order=keep, justified=justified,
                                 start=ss.start, finish=ss.finish, out=out, admit=self.admit)
        self.work += (used + 2) * per_eval
        if self.deadline is not None and _time.perf_counter() > self.deadline:
            self.stopped = True
        if not out["accepts"]:  # another slice from the same placement would try the same moves
            return False, True
        self.reset(new, out["start"])
        self.moves += out["accepts"]
        return True, used < evals

    def rescheduled(self, justify_rounds: int, from_scratch: bool = True) -> bool:
        """Reschedule the placement: the current schedule double-justified (Valls et al.,
        EJOR 2005), and (``from_scratch``) the placement in bottom-level order, justified; go
        on from the best when it is shorter (justification reorders what the device
        sequences keep, and often shortens the schedule by a few percent)."""
        ss, g = self.ss, self.g
        if justify_rounds <= 0:
            return False
        tries = [justify(g, ss.place, ss.start, ss.finish, justify_rounds)]
        self.work += 2 * justify_rounds * self.size
        if from_scratch:
            tries.append(schedule_placement(g, ss.place, justify_rounds))
            self.work += (2 + 2 * justify_rounds) * self.size
        for s, f, ms in sorted(tries, key=lambda t: (t[2], sum(t[1]))):
            tot = float(sum(f))
            if not (ms < ss.makespan - 1e-12 * max(1.0, ms) or (ms <= ss.makespan and tot < ss.total)):
                break
            if self.admitted(ss.place, s, f):
                self.reset(ss.place, s)
                return True
        return False

    def eval_cost(self, level: str) -> int:
        """Work of one reschedule of ``level`` (0 for the incremental level)."""
        if level == "incremental":
            return 0
        return (1 if level == "keep-order" else 2 + 4 * self.justified) * self.size

    def run(self, level: str, limit: int) -> tuple[bool, bool]:
        """One slice of ``level`` up to ``limit`` work: ``(improved, exhausted)``."""
        if level == "incremental":
            return self.climb(limit)
        return self.replay_moves(level == "keep-order", limit)


def _restart(s: _Search, restarts: Iterator, cost: int, best: float) -> bool:
    """Take restarts until one starts below ``best`` (by more than :data:`_RESTART_SLACK`)
    and go on from it (True), or the budget or the restarts run out (False): a cheap scan
    of other constructions once the climbs are stuck."""
    g = s.g
    while not s.spent():
        nxt = next(restarts, None)
        s.work += cost
        if nxt is None:
            return False
        place, start = nxt
        if max(start[v] + g.time[v] / g.speed[place[v]] for v in range(g.n)) < best * (1 - _RESTART_SLACK):
            s.reset(place, start)
            return True
    return False


def improve_schedule(g: Graph, place: list[int], start: list[float], allowed: np.ndarray, units,
                     capacity: list[float], work: int, deadline: float | None = None, *,
                     admit: Callable | None = None, perturb: bool = False, seed: int = 0,
                     justify_rounds: int = 1, justified: bool = False, lower: float = 0.0,
                     restarts: Iterator | None = None, restart_cost: int = 0) -> dict:
    """Improve ``place`` (scheduled by ``start``) by the search of the module docstring.

    Parameters
    ----------
    g : Graph
        The problem as plain lists (:class:`optpart.schedule.graph.Graph`).
    place : list of int
        The starting placement (within memory; not modified).
    start : list of float
        A valid schedule of ``place`` that respects memory (the answer to beat).
    allowed : numpy.ndarray
        ``(n, k)`` bool: may node ``v`` use device ``d``.
    units : tuple
        ``(unit_of, members, unit_mem)`` from :func:`.memory.memory_units`.
    capacity : list of float
        Static bytes usable per device (``inf`` where only ``admit`` decides).
    work : int
        Budget in node and edge visits of replays (module docstring); deterministic.
    deadline : float, optional
        ``time.perf_counter()`` value after which the search stops.
    admit : callable, optional
        ``admit(place, start, finish) -> bool``: whether a schedule respects memory beyond
        the static bytes (the peak model); asked only for moves that pay.
    perturb : bool
        Iterated local search once no level pays (small graphs).
    seed : int
        Seed of the perturbations.
    justify_rounds : int
        Double-justification rounds of the from-scratch reschedules.
    justified : bool
        Score the bottom-level level's reschedules double-justified (small graphs).
    lower : float
        A proven lower bound on the makespan: the search stops once it is met.
    restarts : iterator, optional
        Other starting placements ``(place, start)`` (within memory), taken when no level
        pays: one that starts below the best is climbed from.
    restart_cost : int
        Work of producing one restart.

    Returns
    -------
    dict
        ``place``, ``start``, ``finish``, ``makespan`` of the best schedule found (the given
        one when nothing better fits), ``work`` used, ``moves`` kept, ``stopped`` (True when
        the deadline ended it) and ``levels`` (moves kept per level).
    """
    finish = [start[v] + g.time[v] / g.speed[place[v]] for v in range(g.n)]
    best = (max(finish, default=0.0), float(sum(finish)), list(place), list(start), finish)
    paid = {lv: 0 for lv in _LEVELS}
    if work < INCREMENTAL_COST * 4 * g.n + 6 * (g.n + len(g.succ)) or g.k < 2 or not g.n:
        # not even one step and its set-up fit the budget
        return {"place": list(place), "start": list(start), "finish": finish, "makespan": best[0], "work": 0,
                "moves": 0, "stopped": False, "levels": paid}
    s = _Search(g, place, start, allowed, units, capacity, admit, work, deadline, justified, justify_rounds)

    def keep_if_best() -> None:
        nonlocal best
        ss = s.ss
        cur = (ss.makespan, ss.total)
        if cur < best[:2] and (admit is None or admit(ss.place, ss.start, ss.finish)):
            best = (cur[0], cur[1], list(ss.place), list(ss.start), list(ss.finish))

    if not s.spent():
        rng = np.random.default_rng(seed)
        n_units = len(s.members)
        strength = min(_STRENGTH, n_units)
        slice_ = _SLICE_SIZE * s.size   # not a share of the budget: more budget continues the same search
        rate = {lv: float("inf") for lv in _LEVELS}   # gain per work of each level's last slice
        exhausted: set[str] = set()   # levels at a local optimum of theirs
        resting: set[str] = set()     # levels whose last slice gained nothing
        while not s.spent() and not best[0] <= lower + time_tolerance(lower):
            keep_if_best()
            live = [lv for lv in _LEVELS if lv not in exhausted and lv not in resting]
            if live:
                level = max(live, key=lambda lv: (rate[lv], -_LEVELS.index(lv)))
                before, w0 = s.score(), s.used()
                improved, done = s.run(level, s.used() + max(slice_, _SLICE_EVALS * s.eval_cost(level)))
                after = s.score()
                gain = (before[0] - after[0]) / max(before[0], 1e-300) + 1e-3 * (before[1] - after[1]) / max(
                    abs(before[1]), 1e-300)
                rate[level] = max(0.0, gain) / max(1, s.used() - w0)
                if improved:
                    paid[level] += 1
                    exhausted, resting = set(), set()
                    s.rescheduled(justify_rounds)
                if done:
                    exhausted.add(level)
                elif gain <= 0.0:
                    resting.add(level)
                continue
            if s.rescheduled(justify_rounds):
                exhausted, resting = set(), set()
                continue
            keep_if_best()
            if restarts is not None and _restart(s, restarts, restart_cost, best[0]):
                exhausted, resting = set(), set()
                continue
            if not perturb and resting:  # nothing else to do with the budget: the resting levels go on
                resting = set()
                continue
            if not perturb or s.spent():
                break
            # iterated local search: from the best, a few seeded random moves within memory
            s.reset(best[2], best[3])
            for u in rng.choice(n_units, size=strength, replace=False).tolist():
                ok = np.flatnonzero(allowed[s.members[u][0]]).tolist()
                moves = s.plan([u], ok[int(rng.integers(len(ok)))])
                if moves is not None and s.apply(moves):
                    s.ss.commit()
            exhausted, resting = set(), set()
        keep_if_best()
    ms, _, pl, st, fi = best
    return {"place": pl, "start": st, "finish": fi, "makespan": ms, "work": s.used(), "moves": s.moves,
            "stopped": s.stopped, "levels": paid}
