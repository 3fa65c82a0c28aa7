"""The heuristic's search: moves the critical chain points at, re-timed incrementally.

A placement is improved by moves of memory units (colocation groups as one), scored by
re-timing only the nodes a move reaches (:class:`.incremental.SequenceSchedule`). A move is
kept when it lowers (makespan, sum of finish times) lexicographically (the second key walks
plateaus of equal makespan and never cycles) and the placement still fits memory: static
bytes per device and, under ``peak``, an ``admit`` check on the exact schedule.

The moves come from the critical chain (last node first; each step is an input that arrives
exactly at the start, a *transfer* when it crosses devices, or the device predecessor the node
waited for), in four tiers: (0) across a transfer ``u -> v``, ``v`` to ``u``'s device or ``u``
to ``v``'s, alone or swapped with the unit that runs there at that time (the devices keep
their load); (1) gathers: the chain's run of nodes on ``u``'s device ending at ``u`` to ``v``'s
device, the run on ``v``'s device starting at ``v`` to ``u``'s, ``v``'s producers to ``v``'s
device; (2) for a device wait, the node or its device predecessor to the device where its
inputs arrive first, alone or swapped; (3) to the other devices. A pass tries them tier by
tier, the tiers that paid most in this search first; after a pass that kept moves the
schedule is double-justified (Valls et al., EJOR 2005) and the chain traced again. A group
that does not fit its target device makes room by ejecting the units there that exchange
least with it (an ejection chain of depth one; Glover, Discrete Applied Math. 65, 1996), or by
reassigning the devices' contents so that each fits (unequal capacities).

At a local optimum (a pass keeps nothing) the placement is rescheduled from scratch; then, on
small graphs, a few seeded random moves perturb the best placement and the climb starts again
(iterated local search; Lourenco, Martin, Stuetzle, 2003). The budget counts node and edge
visits (a re-timed node counts :data:`RETIME_COST`), so the search is deterministic; a
deadline only stops it earlier.
"""

from __future__ import annotations

import math
import time as _time
from bisect import bisect_left, bisect_right
from typing import Callable

import numpy as np

from ...evaluate import time_tolerance
from ...model.memory import fits
from ...schedule import Graph, justify, schedule_placement
from .incremental import SequenceSchedule

__all__ = ["RETIME_COST", "improve"]

#: Work units per re-timed node (a replay visits a node or an edge for one unit; a re-timing
#: visits the node and its edges, about four units).
RETIME_COST = 4
_TIERS = 4
_PERTURB = 3        # random unit moves of a perturbation
_MAX_EJECT = 4      # units ejected at most to make room for one move
_NEAR = 32          # nodes on each side of a move's time on the full device looked at for ejection


class _Search:
    """One search's state: the sequence schedule, memory per device, the budget, the move scan.

    Parameters
    ----------
    g : Graph
        The problem as plain lists.
    place, start : list
        The starting placement (within memory) and a valid schedule of it.
    units : tuple
        :func:`optpart.schedule.units.memory_units` of the problem.
    capacity : list of float
        Static bytes per device (``inf`` where only ``admit`` decides).
    admit : callable or None
        ``admit(place, start, finish) -> bool``: memory beyond the static bytes (peak).
    budget : int
        Work units (module docstring).
    deadline : float or None
        ``time.perf_counter()`` value.
    justify_rounds : int
        Double-justification rounds of the reschedules.
    """

    def __init__(self, g: Graph, place, start, units, capacity, admit: Callable | None, budget: int, deadline,
                 justify_rounds: int) -> None:
        self.g, self.capacity, self.admit, self.deadline, self.jr = g, capacity, admit, deadline, justify_rounds
        self.unit_of, self.members, self.unit_mem = units
        self.members = [sorted(m, key=g.canon.__getitem__) for m in self.members]   # moved in the canonical order
        allowed = g.problem.allowed
        self.ok_rows = [allowed[m[0]] for m in self.members]
        self.pinned = [int(row.sum()) <= 1 for row in self.ok_rows]
        canon = g.canon
        self.ukey = [canon[m[0]] for m in self.members].__getitem__   # units in the canonical order
        self.size = g.n + len(g.succ)
        self.work, self.budget, self.moves, self.stopped = 0, budget, 0, False
        self.reserve = RETIME_COST * 3 * g.n + 9 * self.size   # the most one step (and its checks) may take
        self.tier_yield = [[0, 0] for _ in range(_TIERS)]
        self.ss: SequenceSchedule | None = None
        self.reset(place, start)

    # ------------------------------------------------------------------ state and budget
    def used(self) -> int:
        return self.work + RETIME_COST * self.ss.work

    def spent(self) -> bool:
        """The budget is used up but for :attr:`reserve`, or the deadline has passed."""
        if self.used() + self.reserve > self.budget:
            return True
        if self.deadline is not None and _time.perf_counter() > self.deadline:
            self.stopped = True
        return self.stopped

    def reset(self, place, start) -> None:
        """Go on from ``place`` scheduled by ``start`` (a full pass, counted)."""
        if self.ss is not None:
            self.work += RETIME_COST * self.ss.work
        self.ss = SequenceSchedule(self.g, list(place), list(start))
        self.load = [0.0] * self.g.k
        for u, m in enumerate(self.members):
            self.load[self.ss.place[m[0]]] += self.unit_mem[u]
        self.chain = None         # the pass's critical chain (None: a new pass is due)
        self.scan: list = []      # the moves of the current pass, built tier by tier
        self.scan_at, self.tiers_built, self.kept = 0, _TIERS, False

    def dev(self, u: int) -> int:
        return self.ss.place[self.members[u][0]]

    def score(self) -> tuple[float, float]:
        return self.ss.makespan, self.ss.total

    def admitted(self) -> bool:
        if self.admit is None:
            return True
        self.work += self.size
        ss = self.ss
        return bool(self.admit(ss.place, ss.start, ss.finish))

    # ------------------------------------------------------------------ one move
    def attempt(self, moves: list[tuple[int, int]]) -> bool:
        """Apply unit ``moves``; keep them when (makespan, total) drops and memory admits."""
        ss = self.ss
        ms, tot = ss.makespan, ss.total
        src = [self.dev(u) for u, _ in moves]
        if not ss.apply([(v, d) for u, d in moves for v in self.members[u]]):
            return False
        eps_ms, eps_tot = 1e-12 * max(1.0, ms), 1e-12 * max(1.0, abs(tot))
        better = ss.makespan < ms - eps_ms or (ss.makespan <= ms + eps_ms and ss.total < tot - eps_tot)
        if better and self.admitted():
            ss.commit()
            for (u, d), a in zip(moves, src):
                self.load[a] -= self.unit_mem[u]
                self.load[d] += self.unit_mem[u]
            self.moves += 1
            return True
        ss.undo()
        return False

    def plan(self, group: list[int], d: int) -> list[tuple[int, int]] | None:
        """Moves that send ``group`` to ``d`` within static memory, ejecting units that exchange
        least with ``d`` (of those running around the group's time there) when it is full."""
        group = [u for u in group if self.dev(u) != d]
        if not group or not all(self.ok_rows[u][d] for u in group):
            return None
        load, cap, mem = list(self.load), self.capacity, self.unit_mem
        for u in group:
            load[self.dev(u)] -= mem[u]
            load[d] += mem[u]
        moves = [(u, d) for u in group]
        if fits(load[d], cap[d]):
            return moves
        inside = set(group)
        cands = []
        for w in self._around(group[0], d):
            if w in inside or self.pinned[w]:
                continue
            aff = self.affinity(w)
            cands.append((aff[d] - max(a for e, a in enumerate(aff) if e != d), self.g.canon[self.members[w][0]], w,
                          aff))
        for _, _, w, aff in sorted(cands)[:4 * _MAX_EJECT]:
            targets = [e for e in range(self.g.k) if e != d and self.ok_rows[w][e] and fits(load[e] + mem[w], cap[e])]
            if targets:
                e = min(targets, key=lambda e: (-aff[e], e))
                load[d] -= mem[w]
                load[e] += mem[w]
                moves.append((w, e))
                if fits(load[d], cap[d]):
                    return moves
                if len(moves) - len(group) >= _MAX_EJECT:
                    break
        return None

    def reassign(self, group: list[int], d: int) -> list[tuple[int, int]] | None:
        """``group`` joins what runs on the full device ``d`` and the devices' contents are
        reassigned so that each fits (a bipartite matching of contents to devices by Kuhn's
        augmenting paths, contents kept where they fit): with unequal capacities a cluster may
        only be completed on a device large enough for it. None when no assignment fits."""
        k, unit_of, mem, cap = self.g.k, self.unit_of, self.unit_mem, self.capacity
        inside = set(group)
        on = [[u for u in dict.fromkeys(unit_of[v] for v in self.ss.seq_nodes[e]) if u not in inside] for e in range(k)]
        on[d] += group
        self.work += self.g.n
        load = [sum(mem[u] for u in x) for x in on]
        ok = [[all(self.ok_rows[u][a] for u in on[e]) and fits(load[e], cap[a]) for a in range(k)] for e in range(k)]
        holder, where = [-1] * k, [-1] * k   # device -> content, content -> device
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
        return [(u, where[e]) for e in range(k) for u in on[e] if self.dev(u) != where[e]] or None

    def swap(self, u: int, d: int) -> list[tuple[int, int]] | None:
        """Unit ``u`` to ``d`` and the unit of ``d`` that runs at ``u``'s ready time there to
        ``u``'s device: the two devices keep their load, which a single move on a schedule
        without idle time cannot."""
        a, ss = self.dev(u), self.ss
        nodes = ss.seq_nodes[d]
        i = bisect_right(nodes, ss._ready(self.members[u][0], d), key=ss.finish.__getitem__)
        if i >= len(nodes):
            return None
        w = self.unit_of[nodes[i]]
        if w == u or self.pinned[w] or not self.ok_rows[w][a] or not self.ok_rows[u][d]:
            return None
        load, mem = self.load, self.unit_mem
        if not (fits(load[d] - mem[w] + mem[u], self.capacity[d]) and fits(load[a] - mem[u] + mem[w],
                                                                            self.capacity[a])):
            return None
        return [(u, d), (w, a)]

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
        self.work += len(self.members[u])
        return out

    def _around(self, u: int, d: int) -> list[int]:
        """The units of device ``d`` running around unit ``u``'s time there."""
        ss = self.ss
        keys, nodes = ss.seq_keys[d], ss.seq_nodes[d]
        i = bisect_left(keys, ss.key[self.members[u][0]])
        out = list(dict.fromkeys(self.unit_of[w] for w in nodes[max(0, i - _NEAR):i + _NEAR]))
        self.work += len(out)
        return out

    # ------------------------------------------------------------------ the scan of the chain's moves
    def _tier(self, chain: list[int], tier: int, seen: set) -> list:
        """The moves of one tier, in chain order: ``(units, device, may swap)``."""
        g, ss, unit_of = self.g, self.ss, self.unit_of
        place, out = ss.place, []

        def add(group, d, swap=False):
            key = (tuple(sorted(group)), d)
            if key not in seen:
                seen.add(key)
                out.append((group, d, swap))

        runs = _runs(g, place, unit_of, chain) if tier == 1 else None
        for i in range(len(chain) - 1):
            v, u = chain[i], chain[i + 1]
            pv, pu = place[v], place[u]
            preds = g.pred[g.in_ptr[v]:g.in_ptr[v + 1]]
            data = u in preds
            if tier == 0 and data and pu != pv:
                add([unit_of[v]], pu, True)
                add([unit_of[u]], pv, True)
            elif tier == 1 and data and pu != pv:
                for group, d in ((runs(i + 1, 1), pv), (runs(i, -1), pu),
                                 (sorted({unit_of[w] for w in preds if place[w] != pv}, key=self.ukey), pv)):
                    if len(group) > 1:
                        add(group, d)
            elif tier >= 2 and not data:
                for w in (v, u):
                    ready = sorted((ss._ready(w, d), d) for d in range(g.k) if d != place[w])
                    for _, d in (ready[:1] if tier == 2 else ready[1:]):
                        add([unit_of[w]], d, tier == 2)
        self.work += len(chain)
        return out

    def _next(self):
        """The next move of the pass; a new pass, on the chain traced again, after one that kept
        a move; None at a local optimum (a pass that kept nothing)."""
        if self.chain is None or (self.scan_at >= len(self.scan) and self.kept):
            ty = self.tier_yield
            self.order = sorted(range(_TIERS), key=lambda t: (-(ty[t][0] + 1) / (ty[t][1] + 2), t))
            self.chain = self.ss.critical_chain()
            self.work += len(self.chain)
            self.scan, self.tiers, self.seen, self.scan_at, self.tiers_built, self.kept = [], [], set(), 0, 0, False
        while self.scan_at >= len(self.scan) and self.tiers_built < _TIERS and not self.kept:
            tier = self.order[self.tiers_built]
            new = self._tier(self.chain, tier, self.seen)
            self.scan += new
            self.tiers += [tier] * len(new)
            self.tiers_built += 1
        if self.scan_at >= len(self.scan):
            return None
        self.scan_at += 1
        return self.scan[self.scan_at - 1] + (self.tiers[self.scan_at - 1],)

    def climb(self) -> bool:
        """First-improvement hill climbing over the chain's moves until a pass keeps nothing or
        the budget ends; True when a move was kept."""
        improved = False
        while not self.spent():
            if self.scan_at >= len(self.scan) and self.kept:
                self.rescheduled(from_scratch=False)   # justified before the next pass
            move = self._next()
            if move is None:
                break
            group, d, may_swap, tier = move
            self.tier_yield[tier][1] += 1
            moves = self.plan(group, d)
            plans = [moves] + ([self.swap(group[0], d)] if may_swap and len(group) == 1 else [])
            if moves is None or len(moves) > len(group):   # room was made, or none could be: the contents reassigned
                plans.append(self.reassign([u for u in group if self.dev(u) != d], d))
            if any(m is not None and self.attempt(m) for m in plans):
                improved = self.kept = True
                self.tier_yield[tier][0] += 1
        return improved

    def rescheduled(self, from_scratch: bool = True) -> bool:
        """The schedule double-justified and (``from_scratch``) the placement rescheduled in
        bottom-level order, justified; go on from the shortest when it is shorter."""
        if self.jr <= 0:
            return False
        ss, g = self.ss, self.g
        tries = [justify(g, ss.place, ss.start, ss.finish, self.jr)]
        self.work += 2 * self.jr * self.size
        if from_scratch:
            tries.append(schedule_placement(g, ss.place, self.jr))
            self.work += (2 + 2 * self.jr) * self.size
        s, f, ms = min(tries, key=lambda t: (t[2], math.fsum(t[1])))
        if ms < ss.makespan - 1e-12 * max(1.0, ms) or (ms <= ss.makespan and math.fsum(f) < ss.total):
            if self.admit is None or self.admit(ss.place, s, f):
                self.reset(ss.place, s)
                return True
        return False

    def perturb(self, place, start, rng: np.random.Generator) -> None:
        """From ``place``, a few seeded random unit moves within memory (units in canonical order)."""
        self.reset(place, start)
        order = sorted(range(len(self.members)), key=lambda u: self.g.canon[self.members[u][0]])
        for j in rng.choice(len(order), size=min(_PERTURB, len(order)), replace=False).tolist():
            u = order[j]
            ok = np.flatnonzero(self.ok_rows[u]).tolist()
            moves = self.plan([u], ok[int(rng.integers(len(ok)))])
            src = [self.dev(w) for w, _ in moves or ()]
            if moves is not None and self.ss.apply([(v, d) for w, d in moves for v in self.members[w]]):
                self.ss.commit()
                for (w, d), a in zip(moves, src):
                    self.load[a] -= self.unit_mem[w]
                    self.load[d] += self.unit_mem[w]


def _restart(s: _Search, restarts, cost: int, best: float) -> bool:
    """Take restarts until one starts below ``best`` and go on from it (True), or the budget or
    the restarts run out (False)."""
    g = s.g
    while not s.spent():
        nxt = next(restarts, None)
        s.work += cost
        if nxt is None:
            return False
        place, start = nxt
        if max(start[v] + g.time[v] / g.speed[place[v]] for v in range(g.n)) < best:
            s.reset(place, start)
            return True
    return False


def _runs(g: Graph, place: list[int], unit_of: list[int], chain: list[int]):
    """``run(i, step)``: the units of the chain's nodes on ``chain[i]``'s device joined to it by
    data edges, from ``i`` back in time (``step`` 1; the chain is last node first) or forward (-1)."""
    n = len(chain)
    link = [place[chain[i + 1]] == place[chain[i]] and chain[i + 1] in g.pred[g.in_ptr[chain[i]]:g.in_ptr[chain[i] + 1]]
            for i in range(n - 1)] + [False]
    last, first = [0] * n, [0] * n
    for i in range(n - 1, -1, -1):
        last[i] = last[i + 1] if link[i] else i
    for i in range(n):
        first[i] = first[i - 1] if i > 0 and link[i - 1] else i

    def run(i: int, step: int) -> list[int]:
        end = last[i] if step > 0 else first[i]
        return list(dict.fromkeys(unit_of[chain[j]] for j in range(i, end + step, step)))
    return run


def improve(g: Graph, place, start, units, capacity, budget: int, deadline=None, *, admit=None, seed: int = 0,
            perturb: bool = False, justify_rounds: int = 1, lower: float = 0.0, restarts=None,
            restart_cost: int = 0) -> dict:
    """Improve ``place`` (scheduled by ``start``) by the search of the module docstring.

    Parameters
    ----------
    g : Graph
        The problem as plain lists.
    place : list of int
        The starting placement (within memory; not modified).
    start : list of float
        A valid schedule of ``place`` that respects memory.
    units : tuple
        :func:`optpart.schedule.units.memory_units` of the problem.
    capacity : list of float
        Static bytes usable per device (``inf`` where only ``admit`` decides).
    budget : int
        Work units (module docstring); deterministic.
    deadline : float, optional
        ``time.perf_counter()`` value after which the search stops.
    admit : callable, optional
        ``admit(place, start, finish) -> bool``: memory beyond the static bytes (the peak model).
    seed : int
        Seed of the perturbations.
    perturb : bool
        Iterated local search at local optima (small graphs).
    justify_rounds : int
        Double-justification rounds of the reschedules (0: none).
    lower : float
        A proven lower bound: the search stops once it is met.
    restarts : iterator, optional
        Other starts ``(place, start)`` within memory (further constructions): at a local
        optimum without ``perturb``, the first that starts below the best is climbed from.
    restart_cost : int
        Work units one restart costs.

    Returns
    -------
    dict
        ``place``, ``start``, ``finish``, ``makespan`` of the best schedule found (the given one
        when nothing better fits), ``work`` used, ``moves`` kept, ``stopped`` (the deadline
        ended it).
    """
    finish = [start[v] + g.time[v] / g.speed[place[v]] for v in range(g.n)]
    best = (max(finish, default=0.0), math.fsum(finish), list(place), list(start), finish)
    out = {"place": list(place), "start": list(start), "finish": finish, "makespan": best[0], "work": 0, "moves": 0,
           "stopped": False}
    if g.k < 2 or not g.n or budget < RETIME_COST * 4 * g.n + 6 * (g.n + len(g.succ)):
        return out   # not even one step and its set-up fit the budget
    s = _Search(g, place, start, units, capacity, admit, budget, deadline, justify_rounds)
    rng = np.random.default_rng(seed)
    while not s.spent() and best[0] > lower + time_tolerance(lower):
        if s.climb():
            s.rescheduled(from_scratch=False)
        if s.score() < best[:2] and (admit is None or s.admitted()):
            ss = s.ss
            best = (ss.makespan, ss.total, list(ss.place), list(ss.start), list(ss.finish))
        if s.spent() or s.rescheduled():
            continue
        if perturb:
            s.perturb(best[2], best[3], rng)
        elif restarts is None or not _restart(s, restarts, restart_cost, best[0]):
            break
    ms, _, pl, st, fi = best
    out.update(place=pl, start=st, finish=fi, makespan=ms, work=s.used(), moves=s.moves, stopped=s.stopped)
    return out
