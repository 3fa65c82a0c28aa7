"""The heuristic's schedule-aware search: critical-path moves, three ways of scoring them.

A placement is improved by moves of memory units (colocation groups as one). A move is
kept when it lowers (makespan, sum of finish times) lexicographically -- the second key
walks plateaus of equal makespan and never cycles -- and the placement still fits memory:
static bytes per device (``capacity``) and, when given, an ``admit`` check on the exact
schedule (the peak model). Three *levels* score moves differently; each pays on other
graphs, so the budget goes to the one that paid most per unit of work:

* ``incremental``: the critical chain's links, scored by re-simulating only the nodes a
  move reaches (:class:`.incremental.SequenceSchedule`; device sequences kept). A chain
  step is an input that arrives exactly at the start (across devices: a transfer on the
  critical path) or the device predecessor the node waited for. For a transfer
  ``u -> v``: ``v`` to ``u``'s device and ``u`` to ``v``'s; the chain's run of nodes on
  ``u``'s device joined by data edges that ends at ``u`` to ``v``'s device and the run on
  ``v``'s device that starts at ``v`` to ``u``'s (a path gathered); ``v``'s producers to ``v``'s device (a join
  gathered). For a device wait: ``v`` and its device predecessor to each other device,
  the earliest input arrival first. A group that does not fit its target device makes
  room by *ejection*: the units there that exchange least with that device (bytes to
  their neighbours there, less their best other device) go to the device they exchange
  most with that has room, in the same move (an ejection chain of depth one; Glover,
  "Ejection chains, reference structures and alternating path methods", Discrete Applied
  Mathematics 65, 1996); failing that, the group joins the contents of its target device
  and the devices' contents are reassigned so that each fits (a matching of contents to
  devices). Gathering a path whose device is full is what single moves cannot do
  on memory-tight graphs.
* ``keep-order`` and ``bottom-level``: :func:`.improve.local_search` (every chain unit to
  every device, gathers, then every unit, swaps), each placement rescheduled from scratch
  by replaying the incumbent's start order, or in bottom-level order under the new
  placement (double-justified on small graphs). Dearer per move, but a reschedule reorders
  what the device sequences keep.

A level runs for a slice of the budget; the next slice goes to the level with the best
gain per work in its last slice (each level once first, in the order above), skipping
levels that found no move at the current placement. When none is left the placement is
rescheduled from scratch (bottom-level order, double justification) and the search goes on
from that schedule when it is shorter; then, with ``perturb``, an iterated local search
(Lourenco, Martin, Stuetzle, 2003) moves a few seeded random units and starts again from
there, keeping the best. The budget ``work`` counts node and edge visits of replays (an
incremental re-simulation of a node counts :data:`INCREMENTAL_COST`), so it is deterministic
and roughly proportional to time; ``deadline`` (a time limit) stops it earlier.
"""

from __future__ import annotations

import time as _time
from bisect import bisect_left
from typing import Callable

import numpy as np

from ...evaluate import time_tolerance
from ...memory import fits as fits_memory
from .improve import local_search
from .incremental import SequenceSchedule
from .schedule import Graph, schedule_placement

__all__ = ["improve_schedule", "INCREMENTAL_COST"]

#: Work units per incremental node re-simulation (a replay visits a node or an edge for one
#: unit; measured on the bundled graphs and planted DAGs: an incremental step, edges
#: included, costs 3.3-4.1 of them).
INCREMENTAL_COST = 4
_MAX_EJECT = 4          # units ejected at most to make room for one move
_EJECT_WINDOW = 32      # nodes on each side of the group's time on the full device looked at
_SLICES = 12            # a level's slice: this share of the whole budget,
_SLICE_EVALS = 10       # and at least this many of its reschedules
_LEVELS = ("incremental", "keep-order", "bottom-level")
_STRENGTH = 3           # random unit moves of a perturbation (more wrecks what the climbs built)


class _Search:
    """State of one search: the incremental schedule, memory use and the budget."""

    def __init__(self, g: Graph, place, start, allowed: np.ndarray, units, capacity: list[float],
                 admit: Callable | None, work: int, deadline: float | None, justified: bool) -> None:
        self.g = g
        self.unit_of, self.members, self.unit_mem = units
        self.allowed, self.capacity, self.admit = allowed, capacity, admit
        self.deadline, self.justified = deadline, justified
        self.size = g.n + len(g.succ)
        self.work, self.budget = 0, work
        # the most one step costs: a move re-simulating and placing every node, a reschedule and
        # its restart, a memory check
        self.reserve = INCREMENTAL_COST * 3 * g.n + 6 * self.size
        self.pinned = [int(allowed[m[0]].sum()) <= 1 for m in self.members]
        self.moves = 0
        self.stopped = False
        self._last: list = []
        self._scan: _Scan | None = None   # where the climb is in the chain's moves
        self.tier_yield = [[0, 0] for _ in range(4)]   # moves kept and tried per tier
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

    # ---------------------------------------------------------------- memory
    def affinity(self, u: int) -> list[float]:
        """Bytes ``u`` exchanges with each device (edges to nodes outside the unit)."""
        g, place, unit_of = self.g, self.ss.place, self.unit_of
        out = [0.0] * g.k
        for v in self.members[u]:
            for i in range(g.in_ptr[v], g.in_ptr[v + 1]):
                if unit_of[g.pred[i]] != u:
                    out[place[g.pred[i]]] += g.in_bytes[i]
            for i in range(g.out_ptr[v], g.out_ptr[v + 1]):
                if unit_of[g.succ[i]] != u:
                    out[place[g.succ[i]]] += g.out_bytes[i]
        return out

    def _near(self, group: list[int], d: int) -> list[int]:
        """Units of device ``d`` that run around the time of ``group``'s first node: the
        ejection candidates (at most ``2 * _EJECT_WINDOW``; they free time there too)."""
        ss = self.ss
        v = self.members[group[0]][0]
        keys, nodes = ss.seq_keys[d], ss.seq_nodes[d]
        i = bisect_left(keys, ss.key[v])
        out = []
        for w in nodes[max(0, i - _EJECT_WINDOW):i + _EJECT_WINDOW]:
            u = self.unit_of[w]
            if u not in out:
                out.append(u)
        self.work += sum(len(self.members[u]) for u in out)
        return out

    def plans(self, group: list[int], d: int):
        """The ways to send ``group`` to ``d`` within static memory, as lists of ``(unit,
        device)`` moves: directly when it fits, else by ejection, then by reassigning the
        devices' contents (module docstring)."""
        group = [u for u in group if self.dev(u) != d]
        if not group or not all(self.ok(u, d) for u in group):
            return
        moves = self.plan(group, d)
        if moves is not None:
            yield moves
        if moves is None or len(moves) > len(group):
            moves = self._swap_devices(group, d)
            if moves is not None:
                yield moves

    def plan(self, group: list[int], d: int) -> list[tuple[int, int]] | None:
        """``(unit, device)`` moves that send ``group`` to ``d`` within static memory, ejecting
        units from ``d`` when it is full (module docstring); None when no room is made."""
        group = [u for u in group if self.dev(u) != d]
        if not group or not all(self.ok(u, d) for u in group):
            return None
        load, cap, mem = list(self.load), self.capacity, self.unit_mem
        for u in group:
            load[self.dev(u)] -= mem[u]
            load[d] += mem[u]
        moves = [(u, d) for u in group]
        if fits_memory(load[d], cap[d]):
            return moves
        inside = set(group)
        cands = []
        for w in self._near(group, d):
            if w in inside or self.pinned[w]:
                continue
            aff = self.affinity(w)
            cands.append((aff[d] - max(a for e, a in enumerate(aff) if e != d), w, aff))
        cands.sort()
        for _, w, aff in cands[:4 * _MAX_EJECT]:
            targets = [e for e in range(self.g.k) if e != d and self.ok(w, e) and fits_memory(load[e] + mem[w], cap[e])]
            if not targets:
                continue
            e = min(targets, key=lambda e: (-aff[e], e))
            load[d] -= mem[w]
            load[e] += mem[w]
            moves.append((w, e))
            if fits_memory(load[d], cap[d]):
                return moves
            if len(moves) - len(group) >= _MAX_EJECT:
                break
        return None

    def _swap_devices(self, group: list[int], d: int) -> list[tuple[int, int]] | None:
        """``group`` joins what runs on the full device ``d``, and the devices' contents are
        reassigned to devices so that every one fits (a bipartite matching of contents to
        devices by Kuhn's augmenting paths, each content kept where it is when it fits
        there): on memory-tight graphs with unequal capacities a cluster can only be
        completed on a device large enough for it. None when no assignment fits."""
        k, unit_of, mem, cap = self.g.k, self.unit_of, self.unit_mem, self.capacity
        inside = set(group)
        on = [[u for u in dict.fromkeys(unit_of[v] for v in self.ss.seq_nodes[e]) if u not in inside]
              for e in range(k)]
        on[d] += group
        self.work += self.g.n
        load = [sum(mem[u] for u in x) for x in on]
        ok = [[all(self.ok(u, a) for u in on[e]) and fits_memory(load[e], cap[a]) for a in range(k)]
              for e in range(k)]
        holder = [-1] * k   # device -> content on it
        where = [-1] * k    # content -> device
        for e in range(k):
            if ok[e][e]:
                holder[e] = where[e] = e

        def augment(e: int, seen: set) -> bool:
            for a in sorted(range(k), key=lambda a: (-cap[a], a)):
                if ok[e][a] and a not in seen:
                    seen.add(a)
                    if holder[a] < 0 or augment(holder[a], seen):
                        holder[a], where[e] = e, a
                        return True
            return False

        for e in sorted((e for e in range(k) if where[e] < 0), key=lambda e: (-load[e], e)):
            if not augment(e, set()):
                return None
        return [(u, where[e]) for e in range(k) for u in on[e] if self.dev(u) != where[e]]

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
    def chain_tier(self, chain: list[int], tier: int, seen: set) -> list[tuple[list[int], int]]:
        """Groups ``(units, device)`` from the links of ``chain`` (module docstring), one tier
        of them, in chain order and new to ``seen``: 0, single moves across a transfer;
        1, gathers; 2, a node and its device predecessor to the device where its inputs
        arrive first, for each device wait; 3, to the other devices. Built tier by tier
        (most scans end in the first ones)."""
        g, ss, unit_of = self.g, self.ss, self.unit_of
        place = ss.place
        out: list = []

        def add(group, d):
            key = (tuple(sorted(group)), d)
            if key not in seen:
                seen.add(key)
                out.append((group, d))

        runs = self._runs(chain) if tier == 1 else None
        for i in range(len(chain) - 1):
            v, u = chain[i], chain[i + 1]
            pv, pu = place[v], place[u]
            preds = g.pred[g.in_ptr[v]:g.in_ptr[v + 1]]
            data = u in preds
            if tier == 0 and data and pu != pv:
                add([unit_of[v]], pu)
                add([unit_of[u]], pv)
            elif tier == 1 and data and pu != pv:
                for group, d in ((runs(i + 1, 1), pv), (runs(i, -1), pu),
                                 (sorted({unit_of[w] for w in preds if place[w] != pv}), pv)):
                    if len(group) > 1:
                        add(group, d)
            elif tier >= 2 and not data:
                for w in (v, u):
                    ready = sorted((ss._ready(w, d), d) for d in range(g.k) if d != place[w])
                    for _, d in (ready[:1] if tier == 2 else ready[1:]):
                        add([unit_of[w]], d)
        return out

    def _runs(self, chain: list[int]):
        """``run(i, step)``: the units of the chain's nodes on ``chain[i]``'s device joined to
        it by data edges (a path, not device waits), from ``i`` on, backward in time
        (``step`` 1; chain order is last node first) or forward (-1), in that order; run ends
        found in one pass, so each run costs its length."""
        g, place, unit_of, n = self.g, self.ss.place, self.unit_of, len(chain)

        def linked(i: int) -> bool:  # chain[i + 1] feeds chain[i] on the same device
            v, u = chain[i], chain[i + 1]
            return place[u] == place[v] and u in g.pred[g.in_ptr[v]:g.in_ptr[v + 1]]

        link = [linked(i) for i in range(n - 1)] + [False]
        last = [0] * n    # the run's index farthest back in time (largest)
        for i in range(n - 1, -1, -1):
            last[i] = last[i + 1] if link[i] else i
        first = [0] * n   # ... and farthest forward (smallest)
        for i in range(n):
            first[i] = first[i - 1] if i > 0 and link[i - 1] else i

        def run(i: int, step: int) -> list[int]:
            end = last[i] if step > 0 else first[i]
            return list(dict.fromkeys(unit_of[chain[j]] for j in range(i, end + step, step)))
        return run

    def climb(self, limit: int) -> tuple[bool, bool]:
        """First-improvement hill climbing over the chain's moves (:meth:`chain_tier`) until
        ``limit`` work; ``(improved, exhausted)``: exhausted when a pass over the moves of the
        critical chain kept none (:class:`_Scan`); a slice goes on where the last one stopped."""
        improved = False
        if self._scan is None or self._scan.ss is not self.ss:  # a new schedule: a new scan
            self._scan = _Scan(self)
        scan = self._scan
        while not self.spent(limit):
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

    def rescheduled(self, justify_rounds: int) -> bool:
        """Reschedule the placement from scratch; go on from it when it is better."""
        ss = self.ss
        s, f, ms = schedule_placement(self.g, ss.place, justify_rounds)
        self.work += (2 + 2 * justify_rounds) * self.size
        tot = float(sum(f))
        if ms < ss.makespan - 1e-12 * max(1.0, ms) or (ms <= ss.makespan and tot < ss.total):
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


class _Scan:
    """The climb's pass over the moves of a critical chain. The tiers of
    :meth:`_Search.chain_tier` are built lazily, in the order of the share of their moves kept
    so far in this search (tier order first): which links pay differs between graphs (a
    transfer on one, a device wait on another). After a tier in which a move was kept the
    chain is traced again and a new pass starts (not after every move: on graphs where most
    moves pay, tracing the chain is what a move costs); a pass that keeps nothing ends the
    climb."""

    def __init__(self, search: _Search) -> None:
        self.search, self.ss = search, search.ss
        self.restart()

    def restart(self) -> None:
        """A new pass, over the moves of the current critical chain."""
        yield_ = self.search.tier_yield
        self.order = sorted(range(4), key=lambda t: (-(yield_[t][0] + 1) / (yield_[t][1] + 2), t))
        self.chain = self.search.ss.critical_chain()
        self.moves: list = []
        self.tiers: list[int] = []   # the tier of each move
        self.seen: set = set()
        self.built = 0
        self.at = 0
        self.kept = False

    def _fill(self, i: int) -> None:
        while len(self.moves) <= i and self.built < 4 and not self.kept:
            tier = self.order[self.built]
            new = self.search.chain_tier(self.chain, tier, self.seen)
            self.moves.extend(new)
            self.tiers.extend([tier] * len(new))
            self.built += 1

    def next(self) -> tuple[list[int], int, int] | None:
        """The next move of the pass and its tier; None when a pass kept nothing (a local
        optimum)."""
        if self.at >= len(self.moves) and self.kept:
            self.restart()
        self._fill(self.at)
        if self.at >= len(self.moves):
            return None
        m = self.moves[self.at]
        self.at += 1
        return m[0], m[1], self.tiers[self.at - 1]


def improve_schedule(g: Graph, place: list[int], start: list[float], allowed: np.ndarray, units,
                     capacity: list[float], work: int, deadline: float | None = None, *,
                     admit: Callable | None = None, perturb: bool = False, seed: int = 0,
                     justify_rounds: int = 1, justified: bool = False, lower: float = 0.0) -> dict:
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
    s = _Search(g, place, start, allowed, units, capacity, admit, work, deadline, justified)

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
        slice_ = max(1, work // _SLICES)
        rate = {lv: float("inf") for lv in _LEVELS}   # gain per work of each level's last slice
        exhausted: set[str] = set()
        while not s.spent() and not best[0] <= lower + time_tolerance(lower):
            keep_if_best()
            live = [lv for lv in _LEVELS if lv not in exhausted]
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
                    exhausted = set()
                if done:
                    exhausted.add(level)
                continue
            if s.rescheduled(justify_rounds):
                exhausted = set()
                continue
            keep_if_best()
            if not perturb or s.spent():
                break
            # iterated local search: from the best, a few seeded random moves within memory
            s.reset(best[2], best[3])
            for u in rng.choice(n_units, size=strength, replace=False).tolist():
                ok = np.flatnonzero(allowed[s.members[u][0]]).tolist()
                moves = s.plan([u], ok[int(rng.integers(len(ok)))])
                if moves is not None and s.apply(moves):
                    s.ss.commit()
            exhausted = set()
        keep_if_best()
    ms, _, pl, st, fi = best
    return {"place": pl, "start": st, "finish": fi, "makespan": ms, "work": s.used(), "moves": s.moves,
            "stopped": s.stopped, "levels": paid}
