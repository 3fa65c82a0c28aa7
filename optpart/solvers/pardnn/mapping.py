"""Phase 2, *merging and mapping*: every secondary cluster joins a primary (ParDNN, section 4.2).

We follow the authors' C++ port (ParCoreLab/pardnn, ``Graph::obtain_mapped_clusters``).
Primary cluster ``i`` is device ``i`` (the critical path on the fastest device). Levels
are the top levels with every path of phase 1 clustered (an edge inside a path is free);
the *span* of a secondary cluster is the window of levels between the earliest finish of
its first node's parents and the earliest level of its last node's children; a
primary's *load in a span* is the work it holds at those levels (one Fenwick tree per
primary, so a span query is ``O(log levels)``). Secondaries are taken in decreasing
weighted level (top + bottom) of their first node.

**Merging** (communication against the work potential of the span). Repeated sweeps over
the first 50%, 60%, ..., 100% of the secondaries, each sweep in increasing span length,
until a sweep merges nothing (twice: the first round skips clusters that start within
five hops of a source, the second takes them too). A cluster ``S`` whose communication
all goes to one primary ``P`` (``comm(S) <= comm(S, P)`` and ``comm(S, P)`` above one
latency) is merged into ``P`` when ``P`` would still carry no more than its fair share
of the span, or than the best alternative would cost, i.e. when any of

* ``work(span) / k >= load(P) + w(S)``;
* ``max(most, least + w(S) + comm(S, P) + delay + unmapped / k) >= load(P) + w(S)``;
* ``load(P) <= comm(S, P)``;
* ``comm(S, P) >= most - least``

holds (``most``/``least``: the highest/lowest primary load in the span; ``delay``:
``P``'s load between ``S``'s latest parent and ``S``'s start; ``unmapped``: the span's
work not yet on a primary). Communication is recounted after every sweep that merged.
On communication-bound graphs (``ceil(CCR) >= max(10, 2 DoP)``) the port's extra
rules run too: :data:`_HIGH_CCR` below.

**Mapping** the rest: every remaining cluster, in the same order, goes to the primary of
least ``load(P, span) - comm(S, P)`` (communication counted once, before this sweep).

Costs are mean run times and mean transfers (:func:`optpart.model.paths.mean_costs`).
Differences from the port (docs/heuristic.md, "The seed method"): a merged cluster's
nodes count as its primary when communication is recounted (the port also kept them
under the merged cluster, counting their transfers twice), and the port's high-CCR
final sweep reads the load of primary 0 for every candidate (a stale index); here each
candidate's own. ``O(passes (V + E) + sweeps * clusters * k log levels)``.
"""

from __future__ import annotations

import bisect
import math

import numpy as np

from ..._docstrings import fill_doc
from ...schedule import Graph
from .slicing import clustered_levels

__all__ = ["map_clusters"]

#: The extra merge rules of the port for communication-bound graphs (CCR >= max(10, 2 DoP)).
_HIGH_CCR = ("all-primary-comm", "dominant-primary", "sorted-primaries")


class _Fenwick:
    """Prefix sums with point updates (a binary indexed tree over level indices)."""

    __slots__ = ("tree", "n")

    def __init__(self, values: np.ndarray) -> None:
        self.n = n = int(values.size)
        tree = [0.0] * (n + 1)
        for i, x in enumerate(values.tolist(), start=1):
            tree[i] += x
            j = i + (i & -i)
            if j <= n:
                tree[j] += tree[i]
        self.tree = tree

    def add(self, i: int, x: float) -> None:
        i += 1
        tree, n = self.tree, self.n
        while i <= n:
            tree[i] += x
            i += i & -i

    def prefix(self, i: int) -> float:
        """Sum of entries ``0..i`` (0 for ``i < 0``)."""
        s = 0.0
        i += 1
        tree = self.tree
        while i > 0:
            s += tree[i]
            i -= i & -i
        return s

    def span(self, lo: int, hi: int) -> float:
        """Sum of entries ``lo+1..hi`` (the port's ``getSum(hi) - getSum(lo)``)."""
        return self.prefix(hi) - self.prefix(lo)


def _hop_depth(g: Graph) -> list[int]:
    """Edges on the longest path from a source, plus one (the port's ``level``)."""
    depth = [1] * g.n
    for v in g.topo.tolist():
        dv = depth[v] + 1
        for i in range(g.out_ptr[v], g.out_ptr[v + 1]):
            w = g.succ[i]
            if dv > depth[w]:
                depth[w] = dv
    return depth


class _State:
    """Clusters, loads and communication of the merging phase."""

    def __init__(self, g: Graph, paths: list[list[int]], n_primary: int) -> None:
        self.g = g
        n, self.p = g.n, n_primary
        self.k = g.k
        path_of = np.empty(n, dtype=np.int64)
        for c, path in enumerate(paths):
            path_of[path] = c
        top, bottom = clustered_levels(g, path_of.tolist())
        self.top = top
        t = g.mean_time
        weighted = [top[path[0]] + bottom[path[0]] for path in paths]
        # secondaries by decreasing weighted level of their first node (stable)
        order = sorted(range(n_primary, len(paths)), key=lambda c: -weighted[c])
        self.sec = [paths[c] for c in order]
        self.prim = [list(paths[c]) for c in range(n_primary)]
        part = np.empty(n, dtype=np.int64)
        for c in range(n_primary):
            part[paths[c]] = c
        for s, nodes in enumerate(self.sec):
            part[nodes] = n_primary + s
        self.part = part
        self.weight = [sum(t[v] for v in nodes) for nodes in self.sec]
        # levels: the distinct top levels
        self.lv = sorted(set(top))
        lv_index = {x: i for i, x in enumerate(self.lv)}
        self.lidx = [lv_index[x] for x in top]
        lid = np.asarray(self.lidx, dtype=np.int64)
        tm = np.asarray(t, dtype=np.float64)
        n_lv = len(self.lv)
        self.total = _Fenwick(np.bincount(lid, weights=tm, minlength=n_lv))
        self.trees = [_Fenwick(np.bincount(lid[part == c], weights=tm[part == c], minlength=n_lv))
                      for c in range(n_primary)]
        self.depth = _hop_depth(g)
        self._spans(t)
        self.merged = [False] * len(self.sec)
        # transfers per out-edge position, with the edge's source
        self.e_src = np.repeat(np.arange(n), np.diff(np.asarray(g.out_ptr, dtype=np.int64)))
        self.e_dst = np.asarray(g.succ, dtype=np.int64)
        self.e_c = np.asarray(g.out_comm_mean, dtype=np.float64)
        self.latency = g.mean_lat
        work = float(tm.sum())
        crit = sum(t[v] for v in paths[0]) if paths else 0.0
        self.dop = work / crit if crit > 0 else 1.0
        self.ccr = float(self.e_c.sum()) / work if work > 0 else (math.inf if self.e_c.sum() > 0 else 0.0)
        self.high_ccr = math.ceil(self.ccr) >= max(10, 2 * int(self.dop)) if math.isfinite(self.ccr) else True

    def _level_of(self, x: float) -> int:
        """Index of the highest level at or below the time ``x`` (-1 below every level)."""
        return bisect.bisect_right(self.lv, x) - 1

    def _spans(self, t: list[float]) -> None:
        g, top, lv = self.g, self.top, self.lv
        sink_top = max(a + b for a, b in zip(top, t))
        self.span_lo, self.span_hi, self.span_len, self.delay_lo, self.start_lv = [], [], [], [], []
        for nodes in self.sec:
            first, last = nodes[0], nodes[-1]
            end = min((top[g.succ[i]] for i in range(g.out_ptr[last], g.out_ptr[last + 1])), default=sink_top)
            begin = top[first]
            latest_parent = 0.0
            for i in range(g.in_ptr[first], g.in_ptr[first + 1]):
                u = g.pred[i]
                latest_parent = max(latest_parent, top[u])
                j = bisect.bisect_left(lv, top[u] + t[u])
                if j < len(lv) and lv[j] <= end and lv[j] < begin:
                    begin = lv[j]
            self.span_lo.append(self._level_of(begin))
            self.span_hi.append(self._level_of(end))
            self.span_len.append(end - begin)
            self.delay_lo.append(self._level_of(latest_parent))
            self.start_lv.append(self.lidx[first])

    def recount(self, critical: bool) -> None:
        """Communication of every unmerged secondary with each primary and in total (the
        port's ``obtain_clusters_comms``): per node and target cluster the largest transfer
        of its out-edges there, summed; primary-to-primary edges do not count; with
        ``critical`` the nodes within five hops of a source are left out."""
        p, part = self.p, self.part
        pu, pw = part[self.e_src], part[self.e_dst]
        keep = (pu != pw) & ~((pu < p) & (pw < p))
        if critical:
            keep &= np.asarray(self.depth, dtype=np.int64)[self.e_src] >= 5
        u, tw, c = self.e_src[keep], pw[keep], self.e_c[keep]
        n_cl = p + len(self.sec)
        key = u * n_cl + tw
        order = np.lexsort((-c, key))
        key, c = key[order], c[order]
        head = np.ones(key.size, dtype=bool)
        head[1:] = key[1:] != key[:-1]
        key, m = key[head], c[head]          # the largest transfer per (node, target cluster)
        a, b = part[key // n_cl], key % n_cl
        n_sec = len(self.sec)
        total = np.zeros(n_cl)
        np.add.at(total, a, m)
        np.add.at(total, b, m)
        comm = np.zeros((n_sec, max(p, 1)))
        sa, pb = a >= p, b < p
        np.add.at(comm, (a[sa & pb] - p, b[sa & pb]), m[sa & pb])
        np.add.at(comm, (b[~pb & ~sa] - p, a[~pb & ~sa]), m[~pb & ~sa])
        self.comm = comm[:, :p].tolist() if p else [[] for _ in range(n_sec)]
        self.tot = total[p:].tolist()
        self.with_prim = comm[:, :p].sum(axis=1).tolist() if p else [0.0] * n_sec

    def loads(self, s: int) -> list[float]:
        lo, hi = self.span_lo[s], self.span_hi[s]
        return [tr.span(lo, hi) for tr in self.trees]

    def merge(self, s: int, c: int) -> None:
        tree, t, lidx = self.trees[c], self.g.mean_time, self.lidx
        for v in self.sec[s]:
            tree.add(lidx[v], t[v])
        self.part[self.sec[s]] = c
        self.prim[c].extend(self.sec[s])
        self.merged[s] = True

    def best_primary(self, s: int) -> int:
        """The primary ``s`` communicates most with (-1 when none)."""
        row = self.comm[s]
        best, j = 0.0, -1
        for c, x in enumerate(row):
            if x > best:
                best, j = x, c
        return j

    def figures(self, s: int, j: int) -> tuple[float, float, float, float, float, float]:
        """``(least, most, unmapped, work, merged load, delay)`` of ``s`` and primary ``j``."""
        lo, hi = self.span_lo[s], self.span_hi[s]
        loads = self.loads(s)
        work = self.total.span(lo, hi)
        delay = self.trees[j].span(self.delay_lo[s], self.start_lv[s])
        return min(loads), max(loads), work - sum(loads), work, self.weight[s] + loads[j], delay


def _sweep(st: _State, cands: list[int], rule: str) -> int:
    """One merging sweep of ``cands`` under ``rule``; returns the number of merges."""
    k, lat = st.k, st.latency
    merges = 0
    for s in cands:
        if st.merged[s]:
            continue
        j = st.best_primary(s)
        if j < 0:
            continue
        c = st.comm[s][j]
        if c <= lat:
            continue
        w = st.weight[s]
        if rule == "one-primary":
            if st.tot[s] > c:
                continue
            least, most, unmapped, work, merged, delay = st.figures(s, j)
            ok = (work / k >= merged or max(most, least + w + c + delay + unmapped / k) >= merged
                  or merged <= w + c or c >= most - least)
        elif rule == "all-primary-comm":
            if st.with_prim[s] > c:
                continue
            least, most, unmapped, work, merged, delay = st.figures(s, j)
            ok = work / k >= merged or max(most, least + w + c) + delay + unmapped / k >= merged or merged <= w + c
        else:  # "dominant-primary"
            if c <= max(st.with_prim[s] / 2, st.tot[s] / k):
                continue
            least, most, unmapped, work, merged, delay = st.figures(s, j)
            ok = (work / k >= merged or min(most, least + w + c - st.with_prim[s] / k + delay) >= merged
                  or c >= max(most, merged))
        if ok:
            st.merge(s, j)
            merges += 1
    return merges


def _sorted_primaries_sweep(st: _State) -> None:
    """The port's last high-CCR sweep: each cluster tries the primaries in decreasing
    communication and joins the first where it does not overload the span."""
    lat = st.latency
    for s in range(len(st.sec)):
        if st.merged[s]:
            continue
        loads = st.loads(s)
        most, least, w = max(loads), min(loads), st.weight[s]
        row = st.comm[s]
        order = sorted(range(st.p), key=lambda j: (-(row[j] + 1.0 / (loads[j] + 1.0)), j))
        top_comm = row[order[0]] if order else 0.0
        for j in order:
            cur = row[j]
            if cur <= lat:
                break
            merged = w + loads[j]
            if (min(most, least + w + cur + (cur - top_comm)) >= merged or merged <= most
                    or merged <= w + cur or cur >= max(most, merged)):
                st.merge(s, j)
                break


@fill_doc
def map_clusters(g: Graph, paths: list[list[int]], n_primary: int) -> list[int]:
    """Merge and map the clusters of :func:`~.slicing.linear_clusters`; the primary of every node.

    Parameters
    ----------
    %(g)s
    paths, n_primary
        The output of :func:`~.slicing.linear_clusters`.

    Returns
    -------
    list of int
        ``primary[v]`` in ``0..n_primary-1`` for every node (the caller maps primaries to
        devices). Memory is not considered here: phase 4 enforces it.
    """
    if g.n == 0:
        return []
    st = _State(g, paths, n_primary)
    n_sec = len(st.sec)
    if n_sec == 0 or n_primary == 0:
        return np.zeros(g.n, dtype=np.int64).tolist() if n_primary == 0 else st.part.tolist()
    st.recount(critical=True)
    src_depth = [st.depth[nodes[0]] for nodes in st.sec]
    for itrr in (0, 1):
        while True:
            merges = 0
            for step in range(5, 11):
                cands = [s for s in range(step * n_sec // 10) if src_depth[s] > 5 or itrr == 1]
                cands.sort(key=lambda s: st.span_len[s])
                merges += _sweep(st, cands, "one-primary")
                if st.high_ccr:
                    merges += _sweep(st, cands, "all-primary-comm")
            if merges or itrr == 0:
                st.recount(critical=not (itrr == 1 and st.high_ccr))
            elif st.high_ccr:
                for step in range(5, 11):
                    cands = [s for s in range(step * n_sec // 10) if src_depth[s] > 5 or step == 9]
                    while _sweep(st, cands, "dominant-primary"):
                        st.recount(critical=False)
            if not merges:
                break
    if st.high_ccr:
        _sorted_primaries_sweep(st)
    # mapping: the rest to the primary of least load in the span minus communication
    st.recount(critical=False)
    for s in range(n_sec):
        if st.merged[s]:
            continue
        loads, row = st.loads(s), st.comm[s]
        j = min(range(n_primary), key=lambda c: (loads[c] - row[c], c))
        st.merge(s, j)
    return st.part.tolist()
