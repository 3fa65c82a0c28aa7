"""Phase 4 of the seed method, the *memory step*, under the static and the peak model.

ParDNN (Qararyah et al., Parallel Computing 2021, section 4.4) moves nodes off a device that
overflows. We follow the authors' Python research code (``memory_handling``), which honours
capacities: on the simulated schedule, units (colocation groups or nodes) leave the overflowing
device best *bytes freed per communication added* first, to a device where they fit, and the
schedule is simulated again. :func:`static_memory_step` applies it on a flat timeline (a node's
static memory is held all step); :func:`peak_memory_step` on the liveness timeline of
docs/model.md section 3, at the peak instant of the most overflowing device, crediting each unit
the bytes that leave with it there (parameters, running temporaries, tensors and copies only it
keeps alive). A unit never returns to a device it left, so the step ends; it answers None when
no unit can move. The C++ port's variable balancing (:func:`balance_variables`) gives a second
start. The paper, the two codes and this port compared: docs/heuristic.md, "The seed method".
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from typing import Sequence

import numpy as np

from ..._docstrings import fill_doc
from ...model.memory import fits, memory_timeline, output_ends, peak_memory
from ...model.problem import Problem
from ...schedule import Graph, schedule_placement
from .mapping import _Fenwick

__all__ = ["static_memory_step", "peak_memory_step", "balance_variables"]


class _Overlaps:
    """Intervals added one by one and their total overlap with a query interval, O(log n) each:
    ``F(x) = sum_{a_i <= x} (x - a_i) - sum_{z_i <= x} (x - z_i)`` from counts and sums of the ends
    at or below ``x``, in Fenwick trees over ``coords`` (every value an end or a query may take;
    summing interval by interval made the step quadratic in its moves)."""

    def __init__(self, coords: list[float]) -> None:
        self.coords, self.empty = coords, True
        self.cnt, self.sum = _Fenwick(np.zeros(len(coords))), _Fenwick(np.zeros(len(coords)))

    def add(self, a: float, z: float) -> None:
        i, j = bisect_left(self.coords, a), bisect_left(self.coords, z)
        self.cnt.add(i, 1.0), self.sum.add(i, -a), self.cnt.add(j, -1.0), self.sum.add(j, z)
        self.empty = False

    def _below(self, x: float) -> float:
        i = bisect_left(self.coords, x)
        return x * self.cnt.prefix(i) + self.sum.prefix(i)

    def overlap(self, lo: float, hi: float) -> float:
        return 0.0 if self.empty else self._below(hi) - self._below(lo)


class _Units:
    """Units as arrays: the unit of each node, its first node, its allowed devices."""

    def __init__(self, problem: Problem, units) -> None:
        unit_of, members, unit_mem = units
        self.members = members
        self.of = np.asarray(unit_of, dtype=np.int64)
        self.first = np.asarray([m[0] for m in members], dtype=np.int64)
        self.mem = np.asarray(unit_mem, dtype=np.float64)
        self.movable = (problem.pin < 0)[self.first] if self.first.size else np.zeros(0, dtype=bool)
        ok = problem.allowed[self.first].copy()
        for grp in problem.groups:
            ok[self.of[grp[0]]] = problem.allowed[grp].all(axis=0)
        self.ok = ok
        self.size = len(members)


def _edge_costs(problem: Problem, g: Graph) -> np.ndarray:
    """Mean transfer time of every edge (ParDNN's homogeneous edge weight)."""
    return g.mean_lat + problem.edge_bytes * g.mean_inv_bw


class _Adjacency:
    """Every edge between two units, listed under both units: ``(other node, mean cost)``."""

    def __init__(self, problem: Problem, un: _Units, cost: np.ndarray) -> None:
        src, dst = problem.edge_src, problem.edge_dst
        cross = un.of[src] != un.of[dst]
        owner = np.concatenate([un.of[src[cross]], un.of[dst[cross]]])
        other = np.concatenate([dst[cross], src[cross]])
        c = np.concatenate([cost[cross], cost[cross]])
        order = np.argsort(owner, kind="stable")
        self.other, self.cost = other[order], c[order]
        self.ptr = np.searchsorted(owner[order], np.arange(un.size + 1))

    def added(self, u: int, pl: np.ndarray, d: int, k: int) -> np.ndarray:
        """Communication unit ``u`` adds by moving from ``d`` to each device (negative: it
        joins the nodes it talks to): its edges to ``d`` become transfers, those to the
        target become local. Mean costs, every edge counted."""
        a, b = self.ptr[u], self.ptr[u + 1]
        if a == b:
            return np.zeros(k)
        per = np.bincount(pl[self.other[a:b]], weights=self.cost[a:b], minlength=k)
        return per[d] - per

    def neighbours(self, u: int, un: _Units) -> np.ndarray:
        return np.unique(un.of[self.other[self.ptr[u]:self.ptr[u + 1]]])


class _Busy:
    """How busy each device is in the simulated schedule: the work a moved unit adds to a
    target costs its run time times the target's busy share over the unit's time slot
    (ParDNN's "load in the span", read off the schedule instead of the levels)."""

    def __init__(self, g: Graph, pl: np.ndarray, start: Sequence[float], finish: Sequence[float]) -> None:
        s, f = np.asarray(start, dtype=np.float64), np.asarray(finish, dtype=np.float64)
        self.k = g.k
        self.start, self.finish = s, f
        self.time = np.asarray(g.time, dtype=np.float64)
        self.speed = np.asarray(g.speed, dtype=np.float64)
        self.lines = []
        for d in range(g.k):
            on = np.flatnonzero(pl == d)
            o = on[np.argsort(s[on], kind="stable")]
            b, e = s[o], f[o]   # as lists: scalar reads and bisect are ~10x numpy's per call
            self.lines.append((b.tolist(), e.tolist(), np.concatenate([[0.0], np.cumsum(e - b)]).tolist()))
        coords = np.unique(np.concatenate([s, f])).tolist()  # the slots moved onto each device
        self.extra = [_Overlaps(coords) for _ in range(g.k)]

    def _busy(self, d: int, lo: float, hi: float) -> float:
        """Busy time of device ``d`` within ``[lo, hi]``."""
        b, e, cum = self.lines[d]
        i = bisect_right(e, lo)   # first slot ending after lo
        j = bisect_left(b, hi)    # slots starting before hi
        total = 0.0
        if j > i:
            total = cum[j] - cum[i] - max(0.0, lo - b[i]) - max(0.0, e[j - 1] - hi)
        total += self.extra[d].overlap(lo, hi)
        return min(max(0.0, total), hi - lo)

    def moved(self, nodes: Sequence[int], d: int) -> None:
        """``nodes`` now also run on ``d`` (in their old slots)."""
        for v in nodes:
            if self.finish[v] > self.start[v]:
                self.extra[d].add(float(self.start[v]), float(self.finish[v]))

    def cost(self, nodes: Sequence[int]) -> np.ndarray:
        """Per device: the run time ``nodes`` would add there, weighted by how busy it is then."""
        out = np.zeros(self.k)
        for v in nodes:
            lo, hi = float(self.start[v]), float(self.finish[v])
            if hi <= lo:
                continue
            for d in range(self.k):
                out[d] += self.time[v] / self.speed[d] * self._busy(d, lo, hi) / (hi - lo)
        return out


class _Fixed:
    """Static model: a unit frees its own memory, all step."""

    def __init__(self, mem: np.ndarray) -> None:
        self.share = mem
        self.got = 0.0

    def moved(self, u: int) -> list[int]:
        self.got += float(self.share[u])
        return []


def _relieve(un: _Units, adj: _Adjacency, busy: _Busy, pl: np.ndarray, d: int, k: int, cand: np.ndarray,
             credit, done, move, left: np.ndarray, fill=None) -> None:
    """Move candidates off ``d`` until ``done()``: the research code's rule (bytes freed per
    communication added, best first), with the communication counted against the target
    (edges to the target's nodes become local) and recomputed, with the bytes, for every
    unit a move concerns, so moved units pull their neighbours after them. ``credit``
    holds each unit's bytes (``share``) and is told of every move (``moved``);
    ``move(u, e)`` moves unit ``u`` to ``e`` when it fits there (True) or refuses. Targets
    are tried in increasing communication added, or, with ``fill`` (the share of its
    capacity device ``e`` holds), least filled first: the research code's own target."""
    version = np.zeros(un.size, dtype=np.int64)
    is_cand = np.zeros(un.size, dtype=bool)
    is_cand[cand] = True
    share = credit.share

    def entry(u: int):
        if share[u] <= 0:
            return None
        add = adj.added(u, pl, d, k) + busy.cost(un.members[u])
        ok = un.ok[u] & ~left[u]
        ok[d] = False
        if not ok.any():
            return None
        return float(np.min(add[ok])) / float(share[u]), -float(share[u]), int(u), int(version[u])

    heap = [x for x in (entry(u) for u in cand.tolist()) if x is not None]
    heapq.heapify(heap)
    while heap and not done():
        _key, _sh, u, ver = heapq.heappop(heap)
        if ver != version[u] or pl[un.first[u]] != d:
            continue
        add = adj.added(u, pl, d, k) + busy.cost(un.members[u])
        for e in sorted(range(k), key=lambda x: (add[x], x) if fill is None else (fill(x), add[x], x)):
            if e == d or not un.ok[u, e] or left[u, e]:
                continue
            if move(u, e):
                left[u, d] = True
                busy.moved(un.members[u], e)
                touched = set(adj.neighbours(u, un).tolist()) | set(credit.moved(u))
                for w in sorted(touched):
                    if is_cand[w] and pl[un.first[w]] == d:
                        version[w] += 1
                        x = entry(w)
                        if x is not None:
                            heapq.heappush(heap, x)
                break


@fill_doc
def static_memory_step(problem: Problem, g: Graph, place: Sequence[int], units, capacity: Sequence[float],
                       target: str = "comm") -> list[int] | None:
    """Move units off over-full devices under the static model (see the module docstring).

    Parameters
    ----------
    %(problem_g)s
    place : sequence of int
        Device of every node (constraints projected).
    units : tuple
        :func:`optpart.schedule.units.memory_units` of the problem.
    capacity : sequence of float
        Bytes each device may hold.
    target : {"comm", "room"}
        Where a moved unit goes first: the device it adds least communication to
        (``comm``), or the device of most room (``room``, the research code's rule; the
        fallback when ``comm`` fills the devices unevenly and gets stuck).

    Returns
    -------
    list of int or None
        A placement whose static memory fits ``capacity`` on every device, or None when
        some device stays over capacity (no unit finds a device with room).
    """
    un = _Units(problem, units)
    k = g.k
    pl = np.asarray(place, dtype=np.int64).copy()
    cap = np.asarray(capacity, dtype=np.float64)
    used = np.bincount(pl, weights=problem.memory, minlength=k)
    adj = _Adjacency(problem, un, _edge_costs(problem, g))
    left = np.zeros((un.size, k), dtype=bool)
    over = np.flatnonzero(~fits(used, cap))
    for d in over[np.argsort(-(used[over] - cap[over]) / np.maximum(cap[over], 1.0), kind="stable")].tolist():
        cand = np.flatnonzero((pl[un.first] == d) & un.movable & (un.mem > 0))

        def move(u: int, e: int, d: int = d) -> bool:
            if not fits(float(used[e] + un.mem[u]), float(cap[e])):  # Python floats: fits' scalar path
                return False
            pl[un.members[u]] = e
            used[d] -= un.mem[u]
            used[e] += un.mem[u]
            return True

        busy = _Busy(g, pl, *schedule_placement(g, pl.tolist(), 0)[:2])
        fill = None if target == "comm" else (lambda e: float(used[e]) / max(cap[e], 1.0))
        _relieve(un, adj, busy, pl, d, k, cand, _Fixed(un.mem), lambda d=d: fits(float(used[d]), float(cap[d])),
                 move, left, fill)
        if not fits(used[d], cap[d]):
            return None
    return pl.tolist()


# ---------------------------------------------------------------- under the peak model

class _Timeline:
    """A device's bytes in use as a step function: ``level[i]`` on ``[times[i], times[i+1])``."""

    def __init__(self, times: np.ndarray, level: np.ndarray) -> None:
        self.times, self.level = times, level

    def at(self, pts: np.ndarray) -> np.ndarray:
        return self.level[np.maximum(np.searchsorted(self.times, pts, side="right") - 1, 0)]

    def peak_with(self, lo: np.ndarray, hi: np.ndarray, nbytes: np.ndarray, base: float) -> float:
        """Highest level with ``base`` bytes all step and ``nbytes[i]`` on ``[lo[i], hi[i])`` added."""
        if lo.size == 0:
            return float(self.level.max()) + base
        pts = np.unique(np.concatenate([self.times[(self.times >= lo.min()) & (self.times <= hi.max())], lo]))
        p = pts[:, None]
        val = self.at(pts) + ((p >= lo) & ((p < hi) | ((hi <= lo) & (p == lo)))) @ nbytes
        outside = self.level[(self.times < lo.min()) | (self.times > hi.max())]
        return max(float(val.max()), float(outside.max(initial=-np.inf))) + base

    def add(self, lo: np.ndarray, hi: np.ndarray, nbytes: np.ndarray, base: float) -> None:
        pts = np.unique(np.concatenate([self.times, lo, hi]))
        val = self.at(pts) + ((pts[:, None] >= lo) & (pts[:, None] < hi)) @ nbytes + base
        self.times, self.level = pts, val


class _Live:
    """The liveness facts of one schedule that the peak step reads (docs/model.md section 3)."""

    def __init__(self, problem: Problem, pl: np.ndarray, start: np.ndarray, finish: np.ndarray,
                 cost: np.ndarray) -> None:
        self.pl, self.start, self.finish = pl, start, finish
        src, dst = problem.edge_src, problem.edge_dst
        self.comm = problem.transfer_times(pl)
        self.local = pl[src] == pl[dst]
        end = output_ends(problem, pl, finish, self.comm)
        self.has_out = np.isfinite(end)
        self.end = np.where(self.has_out, end, float(finish.max()) if finish.size else 0.0)
        self.out_cost = np.zeros(problem.n_nodes)
        np.maximum.at(self.out_cost, src, cost)


class _Keepers:
    """Who keeps which bytes on device ``d`` at instant ``t`` (peak model, schedule fixed): a
    node's parameters or running temporaries (its unit), an output produced on ``d`` (every unit
    on ``d`` reading it after ``t``, and its producer's while a transfer out is in flight, it has
    no reader, or a transfer to a new device would land after ``t``), a copy received on ``d``
    (its readers there after ``t``). A tensor leaves once all its keepers have; each is credited
    an equal share (the research code's "memory potential"), the others' shares growing as
    keepers leave."""

    def __init__(self, problem: Problem, un: _Units, lv: _Live, d: int, t: float) -> None:
        pl, s, f = lv.pl, lv.start, lv.finish
        src, dst = problem.edge_src, problem.edge_dst
        n = problem.n_nodes
        out_b = problem.output_bytes
        on = pl == d
        par = np.flatnonzero(on & (problem.param_bytes > 0))
        run = np.flatnonzero(on & (s <= t) & ((t < f) | ((f == s) & (s == t))) & (problem.temp_bytes > 0))
        own = on & (s <= t) & ((t < lv.end) | ((lv.end <= s) & (s == t))) & (out_b > 0)
        rem = ~lv.local
        cp = rem & (pl[dst] == d)
        arrive = np.full(n, np.inf)
        np.minimum.at(arrive, src[cp], f[src[cp]] + lv.comm[cp])
        last = np.full(n, -np.inf)
        np.maximum.at(last, src[cp], f[dst[cp]])
        copy = ~on & (arrive <= t) & (t < last) & (out_b > 0)
        late = np.zeros(n, dtype=bool)  # a transfer out still in flight after t
        late[src[rem & (f[src] + lv.comm > t)]] = True
        pins = own & (late | ~lv.has_out | (f + lv.out_cost > t))
        # tensor ids: parameters, temporaries, then one per node for its output / copy
        n_par, n_run = par.size, run.size
        out_id = np.full(n, -1, dtype=np.int64)
        tens = np.flatnonzero(own | copy)
        out_id[tens] = n_par + n_run + np.arange(tens.size)
        nbytes = np.concatenate([problem.param_bytes[par], problem.temp_bytes[run], out_b[tens]])
        readers = (pl[dst] == d) & (f[dst] > t) & (out_id[src] >= 0)
        pin_nodes = np.flatnonzero(pins)
        tid = np.concatenate([np.arange(n_par), n_par + np.arange(n_run), out_id[src[readers]], out_id[pin_nodes]])
        uid = np.concatenate([un.of[par], un.of[run], un.of[dst[readers]], un.of[pin_nodes]])
        pair = np.unique(tid * un.size + uid)
        tid, uid = pair // un.size, pair % un.size
        count = np.bincount(tid, minlength=nbytes.size)
        lonely = np.flatnonzero((count == 0) & (nbytes > 0))  # an output live with no keeper: its producer's
        if lonely.size:
            prod = np.empty(nbytes.size, dtype=np.int64)
            prod[out_id[tens]] = tens
            tid = np.concatenate([tid, lonely])
            uid = np.concatenate([uid, un.of[prod[lonely]]])
            count = np.bincount(tid, minlength=nbytes.size)
        self.bytes, self.count = nbytes, count
        order = np.argsort(uid, kind="stable")
        self.u_ptr = np.searchsorted(uid[order], np.arange(un.size + 1))
        self.u_tens = tid[order]
        order = np.argsort(tid, kind="stable")
        self.t_ptr = np.searchsorted(tid[order], np.arange(nbytes.size + 1))
        self.t_units = uid[order]
        self.gone = np.zeros(un.size, dtype=bool)
        self.share = np.bincount(uid, weights=nbytes[tid] / count[tid], minlength=un.size)
        self.got = 0.0

    def moved(self, u: int) -> list[int]:
        """Unit ``u`` left ``d``: release what it alone kept, grow the others' shares."""
        self.gone[u] = True
        touched = []
        for x in self.u_tens[self.u_ptr[u]:self.u_ptr[u + 1]].tolist():
            c = self.count[x]
            self.count[x] = c - 1
            if c == 1:
                self.got += float(self.bytes[x])
                continue
            for w in self.t_units[self.t_ptr[x]:self.t_ptr[x + 1]].tolist():
                if not self.gone[w]:
                    self.share[w] += self.bytes[x] / (c - 1) - self.bytes[x] / c
                    touched.append(w)
        self.share[u] = 0.0
        return touched


def _intervals(problem: Problem, g: Graph, un: _Units, lv: _Live, u: int, e: int
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Intervals ``(lo, hi, bytes)`` and all-step bytes that unit ``u`` brings to device ``e``
    (its times kept): temporaries while running, outputs until their current end, and a
    copy of each input that is not on ``e`` from its arrival until the reader finishes."""
    pl, s, f = lv.pl, lv.start, lv.finish
    nodes = un.members[u]
    inside = set(nodes)
    lo, hi, nb = [], [], []
    copies: dict[int, list[float]] = {}
    out_b, tmp_b = problem.output_bytes, problem.temp_bytes
    for v in nodes:
        if tmp_b[v] > 0:
            lo.append(s[v]), hi.append(f[v]), nb.append(tmp_b[v])
        if out_b[v] > 0:
            lo.append(s[v]), hi.append(max(lv.end[v], f[v])), nb.append(out_b[v])
        for i in range(g.in_ptr[v], g.in_ptr[v + 1]):
            x = g.pred[i]
            if x in inside or pl[x] == e or out_b[x] <= 0:
                continue
            a = f[x] + g.comm(g.in_bytes[i], pl[x], e)
            c = copies.setdefault(x, [a, f[v]])
            c[0], c[1] = min(c[0], a), max(c[1], f[v])
    for x, (a, b) in copies.items():
        lo.append(a), hi.append(max(a, b)), nb.append(out_b[x])
    base = float(problem.param_bytes[nodes].sum())
    return np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64), np.asarray(nb, dtype=np.float64), base


def peak_memory_step(problem: Problem, g: Graph, place: Sequence[int], units, rounds: int | None = None,
                     target: str = "comm", patience: int = 8
                     ) -> tuple[list[int], list[float], list[float], float] | None:
    """Move units off overflowing devices under the peak (liveness) model.

    Parameters
    ----------
    problem, g, place, units
        As for :func:`static_memory_step`; the capacities are ``problem.device_memory``.
    rounds : int, optional
        Reschedules at most (default ``20 + 2 * units``; every round moves a unit).
    target : {"comm", "room"}
        As for :func:`static_memory_step`.
    patience : int
        Rounds without a lower total excess over the capacities before the step gives up
        (it is moving memory around without progress).

    Returns
    -------
    (place, start, finish, makespan) or None
        A placement and its schedule (:func:`optpart.schedule.insertion.schedule_placement`, no
        justification) whose liveness peak fits every device, checked with
        :func:`optpart.model.memory.peak_memory`; None when the step gets stuck.
    """
    un = _Units(problem, units)
    k = g.k
    cap = problem.device_memory.astype(np.float64)
    cost = _edge_costs(problem, g)
    adj = _Adjacency(problem, un, cost)
    left = np.zeros((un.size, k), dtype=bool)
    pl = np.asarray(place, dtype=np.int64).copy()
    rounds = 20 + 2 * un.size if rounds is None else rounds
    best, stale = np.inf, 0
    for _ in range(rounds):
        s, f, ms = schedule_placement(g, pl.tolist(), 0)
        st, fi = np.asarray(s), np.asarray(f)
        peak = peak_memory(problem, pl, st, fi)
        ok = fits(peak, cap)
        if ok.all():
            return pl.tolist(), s, f, ms
        excess = float(np.maximum(peak - cap, 0.0).sum())
        best, stale = (excess, 0) if excess < best else (best, stale + 1)
        if stale > patience:
            return None
        d = int(np.argmax(np.where(ok, -np.inf, (peak - cap) / np.maximum(cap, 1.0))))
        lines = [_Timeline(*tl) for tl in memory_timeline(problem, pl, st, fi)]
        i = int(np.argmax(lines[d].level))
        t = float(lines[d].times[i])
        need = (float(lines[d].level[i]) - cap[d]) * 1.02 + 1e-9 * max(1.0, cap[d])
        lv = _Live(problem, pl, st, fi, cost)
        keep = _Keepers(problem, un, lv, d, t)
        cand = np.flatnonzero((pl[un.first] == d) & un.movable & (keep.share > 0))

        def move(u: int, e: int) -> bool:
            lo, hi, nb, base = _intervals(problem, g, un, lv, u, e)
            if not fits(lines[e].peak_with(lo, hi, nb, base), cap[e]):
                return False
            lines[e].add(lo, hi, nb, base)
            pl[un.members[u]] = e
            return True

        fill = None if target == "comm" else (lambda e: float(lines[e].level.max()) / max(cap[e], 1.0))
        _relieve(un, adj, _Busy(g, pl, s, f), pl, d, k, cand, keep, lambda: keep.got >= need, move, left, fill)
        if not keep.gone.any():
            return None
    return None


# ---------------------------------------------------------------- the C++ port's balancing

def balance_variables(problem: Problem, place: Sequence[int], units) -> list[int]:
    """The C++ port's memory step (``Graph::handle_memory``), which reads no capacity: devices rated
    ``r(d) = k (I(d) / I + V(d) / V) / 2`` (``I``: output and temporary bytes, ``V``: parameter
    bytes, ``I(d)``, ``V(d)`` the device's share) in increasing ``r``, each below the mean filled
    with the largest parameter-holding units of the most loaded device until it reaches the mean
    or that device drops to it. A group moves whole, only where all its members may run; pinned
    units stay.

    Parameters
    ----------
    problem : Problem
        The problem.
    place : sequence of int
        Device of every node (constraints projected).
    units : tuple
        :func:`optpart.schedule.units.memory_units` of the problem.

    Returns
    -------
    list of int
        The balanced placement (a new list); ``place`` unchanged when no node has
        parameters.
    """
    unit_of, members, _ = units
    k = problem.n_devices
    pl = np.asarray(place, dtype=np.int64).copy()
    par = problem.param_bytes.astype(np.float64)
    inter = (problem.output_bytes + problem.temp_bytes).astype(np.float64)
    v_tot, i_tot = float(par.sum()), float(inter.sum())
    if v_tot <= 0 or k < 2:
        return pl.tolist()
    var = np.bincount(pl, weights=par, minlength=k) / v_tot
    imm = np.bincount(pl, weights=inter, minlength=k) / i_tot if i_tot > 0 else np.full(k, 1.0 / k)
    ratio = k * (imm + var) / 2.0
    uvar = np.asarray([float(par[m].sum()) for m in members])
    first = np.asarray([m[0] for m in members], dtype=np.int64)
    movable = problem.pin[first] < 0
    ok = np.asarray([problem.allowed[m].all(axis=0) for m in members])
    # each device's variable units, largest first (ties: lower unit index)
    stacks = {d: [] for d in range(k)}
    for u in np.lexsort((np.arange(len(members)), -uvar)).tolist():
        if uvar[u] > 0 and movable[u]:
            stacks[int(pl[first[u]])].append(u)
    order = sorted(range(k), key=lambda d: (ratio[d], d))
    most = k - 1
    for i in range(k - 1):
        d = order[i]
        while most > i and ratio[d] < 1.0 and ratio[d] < ratio[order[most]]:
            src = order[most]
            stack = stacks[src]
            j = next((j for j, u in enumerate(stack) if ok[u, d]), -1)
            if j < 0:
                break                             # nothing on src may run on d
            u = stack.pop(j)
            pl[members[u]] = d
            share = uvar[u] / v_tot
            ratio[d] += k * share / 2.0
            ratio[src] -= k * share / 2.0
            while most > i and (ratio[order[most]] <= 1.0 or not stacks[order[most]]):
                most -= 1
    return pl.tolist()
