"""The moves of the heuristic's incremental search level (:mod:`.search`): which groups of
units the critical chain points at, and how a group is given room on a full device.

A chain step (last node first) is an input that arrives exactly at the start (across
devices: a transfer on the critical path) or the device predecessor the node waited for.
The groups, in four tiers: (0) for a transfer ``u -> v``, ``v`` to ``u``'s device and ``u``
to ``v``'s; (1) the chain's run of nodes on ``u``'s device joined by data edges that ends
at ``u`` to ``v``'s device, the run on ``v``'s device that starts at ``v`` to ``u``'s (a path
gathered), and ``v``'s producers to ``v``'s device (a join gathered); (2) for a device wait,
``v`` and its device predecessor to the device where their inputs arrive first; (3) to the
other devices. :class:`Scan` goes through them tier by tier, the tiers whose moves paid
most in this search first.

A group that does not fit its target device makes room by *ejection*: the units there (of
those that run around the same time) that exchange least with that device (bytes to their
neighbours there, less their best other device) go to the device they exchange most with
that has room, in the same move (an ejection chain of depth one; Glover, "Ejection chains,
reference structures and alternating path methods", Discrete Applied Mathematics 65,
1996); or the group joins the contents of its target device and the devices' contents are
reassigned so that each fits (a matching of contents to devices by augmenting paths,
contents kept where they fit). Gathering a path whose device is full is what single moves
cannot do on memory-tight graphs, and with unequal capacities a cluster may only be
completed on another device large enough for it.
"""

from __future__ import annotations

from bisect import bisect_left

from ..._docstrings import fill_doc
from ...model.memory import fits as fits_memory

__all__ = ["ChainMoves", "Scan"]

_MAX_EJECT = 4          # units ejected at most to make room for one move
_EJECT_WINDOW = 32      # nodes on each side of the group's time on the full device looked at
_TIERS = 4


@fill_doc
class ChainMoves:
    """The moves and the room-making of the incremental level, mixed into the search's state
    (which provides ``g``, ``ss``, ``unit_of``, ``members``, ``unit_mem``, ``capacity``,
    ``load``, ``pinned``, ``work``, ``dev`` and ``ok``)."""

    def affinity(self, u: int) -> list[float]:
        """Bytes ``u`` exchanges with each device (edges to nodes outside the unit).

        Parameters
        ----------
        u : int
            A memory unit.

        Returns
        -------
        list of float
            Bytes per device.
        """
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
        """The ways to send ``group`` to ``d`` within static memory: directly when it fits, else
        by ejection, then by reassigning the devices' contents (module docstring).

        Parameters
        ----------
        %(unit_group_move)s

        Yields
        ------
        list of tuple of int
            ``(unit, device)`` moves, applied together.
        """
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
        """Moves that send ``group`` to ``d`` within static memory, ejecting units from ``d``
        when it is full (module docstring).

        Parameters
        ----------
        %(unit_group_move)s

        Returns
        -------
        list of tuple of int or None
            ``(unit, device)`` moves; None when no room is made.
        """
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

    def chain_tier(self, chain: list[int], tier: int, seen: set) -> list[tuple[list[int], int]]:
        """One tier of the moves the links of ``chain`` point at (module docstring), in chain
        order: 0, single moves across a transfer; 1, gathers; 2, a node and its device
        predecessor to the device where its inputs arrive first, for each device wait; 3,
        to the other devices. Built tier by tier (most passes end in the first ones).

        Parameters
        ----------
        chain : list of int
            The critical chain, last node first.
        tier : int
            Which tier (0-3).
        seen : set
            Moves already offered in this pass (updated; a move is offered once).

        Returns
        -------
        list of tuple
            ``(units, device)`` groups.
        """
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


class Scan:
    """The climb's pass over the moves of a critical chain. The tiers of
    :meth:`_Search.chain_tier` are built lazily, in the order of the share of their moves kept
    so far in this search (tier order first): which links pay differs between graphs (a
    transfer on one, a device wait on another). After a tier in which a move was kept the
    chain is traced again and a new pass starts (not after every move: on graphs where most
    moves pay, tracing the chain is what a move costs); a pass that keeps nothing ends the
    climb."""

    def __init__(self, search: ChainMoves) -> None:
        self.search, self.ss = search, search.ss
        self.restart()

    def restart(self) -> None:
        """A new pass, over the moves of the current critical chain."""
        yield_ = self.search.tier_yield
        self.order = sorted(range(_TIERS), key=lambda t: (-(yield_[t][0] + 1) / (yield_[t][1] + 2), t))
        self.chain = self.search.ss.critical_chain()
        self.moves: list = []
        self.tiers: list[int] = []   # the tier of each move
        self.seen: set = set()
        self.built = 0
        self.at = 0
        self.kept = False

    def _fill(self, i: int) -> None:
        while len(self.moves) <= i and self.built < _TIERS and not self.kept:
            tier = self.order[self.built]
            new = self.search.chain_tier(self.chain, tier, self.seen)
            self.moves.extend(new)
            self.tiers.extend([tier] * len(new))
            self.built += 1

    def next(self) -> tuple[list[int], int, int] | None:
        """The next move of the pass.

        Returns
        -------
        tuple or None
            ``(units, device, tier)``; None when a pass kept nothing (a local optimum).
        """
        if self.at >= len(self.moves) and self.kept:
            self.restart()
        self._fill(self.at)
        if self.at >= len(self.moves):
            return None
        m = self.moves[self.at]
        self.at += 1
        return m[0], m[1], self.tiers[self.at - 1]
