"""Which tensors a pipelined plan holds, and for how long, in terms of its actions.

A per-micro-batch tensor is born inside one action and dies when its last consumer finishes
(docs/model.md section 3, on the unrolled step). :func:`liveness` sorts the tensors of a
stage assignment into

* **internal** ones, born and dead inside one action (per action kind: their peak with the
  running node's temporary, and what is live at the action's last instant), and
* **groups** (:class:`Group`) of the others, by producer stage and action, device, the set
  of consumer actions and coarse start and end buckets, each with the earliest start and the
  latest end of its members relative to those actions,

so the simulator bounds the memory of a plan from above with ``O(M x groups)`` intervals.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Group", "liveness", "transfer", "PART_F", "PART_I", "PART_W", "PART_ONCE", "VAR_B", "VAR_IW", "END", "NEXT"]

#: Parts of a node: forward, input-gradient and weight-gradient backward, once per step.
PART_F, PART_I, PART_W, PART_ONCE = 0, 1, 2, 3
#: Producer action variants: a backward node runs in ``B`` (full) or in ``I`` / ``W`` (split).
VAR_B, VAR_IW = 0, 1
#: Pseudo consumer keys: the step's end (no consumer, or an optimizer node), the next micro-batch's copy.
END, NEXT = (-1, -1, 0), (-2, -2, 1)


def transfer(p, a: int, b: int, nbytes: float) -> float:
    """Seconds to send ``nbytes`` from device ``a`` to ``b`` (0 on one device).

    Parameters
    ----------
    p : Problem
        The problem (its links).
    a, b : int
        Device indices.
    nbytes : float
        Bytes.

    Returns
    -------
    float
    """
    if a == b:
        return 0.0
    return float(p.latency[a, b] + nbytes / p.bandwidth[a, b])


@dataclass
class Group:
    """Tensors of one producer stage and part whose lifetimes are bounded together.

    ``device``: where they are held; ``start``: offset of their earliest start (or arrival)
    after their producer action starts; ``ends``: consumer key ``(stage, part, delta)`` ->
    ``(offset in a B action, offset in an I/W or F action)`` of the latest finish among
    their consumers there (``delta`` 1: the next micro-batch's copy, a gradient handed on);
    ``send``: offset after the producer action's start by which their transfers out have
    arrived (-inf: none); ``to_end``: held to the end of the step; ``last_only``: only the last
    micro-batch's copies (a gradient sent to an optimizer node on another device).
    """

    device: int
    stage: int
    part: int
    variant: int
    nbytes: float = 0.0
    start: float = np.inf
    ends: dict = field(default_factory=dict)
    send: float = -np.inf
    to_end: bool = False
    last_only: bool = False


#: Tensors of one group start in the same 1/START_BUCKETS of their action and end in the same
#: 1/END_BUCKETS of their last consumer's (so a group's interval is close to each member's).
START_BUCKETS, END_BUCKETS = 4, 8


def _buckets(action_time, s, pu, var, start, home, fin, fin_b, stage, part) -> tuple:
    """``("when", start bucket, end bucket)`` of a tensor for grouping (:data:`START_BUCKETS`)."""
    own = action_time[s, 3 if var == VAR_B else pu]
    sb = int(START_BUCKETS * start / own) if own > 0 else 0
    eb = -1
    for kv, v in home:
        if kv[0] >= 0:
            b_var = var == VAR_B and kv[1] != PART_F
            t = action_time[kv[0], 3 if b_var else kv[1]]
            e = (fin_b[v] if b_var else fin[v]) / t if t > 0 else 0.0
            eb = max(eb, min(END_BUCKETS - 1, int(END_BUCKETS * e)))
    return ("when", min(sb, START_BUCKETS - 1), eb)


def liveness(step, stage, sdev, part, dur, off, off_b, action_time, replicas=()):
    """Liveness groups of the tensors that outlive their action, and each action's internal peak.

    Parameters
    ----------
    step : PipelineStep
        The step.
    stage, sdev, part : numpy.ndarray
        Stage per node, device per stage, ``PART_*`` per node.
    dur, off, off_b : numpy.ndarray
        Seconds per node on its device; start offset in its ``F``/``I``/``W`` action and in ``B``.
    action_time : numpy.ndarray
        ``(S, 4)`` seconds of ``F``, ``I``, ``W``, ``B``.
    replicas : tuple of (int, int)
        ``(update node, device)`` of the replicated tied parameters: their inputs are read
        on that device too.

    Returns
    -------
    tuple
        ``(groups, internal, at_end)``: the :class:`Group` list and the ``(S, 4)`` internal
        peaks and bytes live at each action's last instant.
    """
    p = step.base
    n_st = sdev.size
    dev = sdev[stage]
    m = step.micro_batches
    per = ~step.once
    ob = step.output_bytes
    src, dst = p.edge_src, p.edge_dst
    out_ptr, out_edges = p.out_ptr, p.out_edges
    feeds_once = np.zeros(p.n_nodes, dtype=bool)
    feeds_once[src[per[src] & step.once[dst]]] = True
    chained = feeds_once & (m > 1)  # copy i hands its gradient to copy i + 1, the last one to the update
    fin = off + dur
    fin_b = off_b + dur
    groups: dict[tuple, Group] = {}
    inside: list[list[tuple[float, float, float]]] = [[] for _ in range(4 * n_st)]
    extra: dict[int, list[tuple[int, int]]] = {}  # producer -> (replicated update, its device)
    for owner, d in replicas:
        for e in p.in_edges[p.in_ptr[owner]:p.in_ptr[owner + 1]].tolist():
            extra.setdefault(int(src[e]), []).append((int(owner), int(d)))
    for u in np.flatnonzero(per & (ob > 0)).tolist():
        s, pu, d = int(stage[u]), int(part[u]), int(dev[u])
        cons = dst[out_edges[out_ptr[u]:out_ptr[u + 1]]]
        keys: dict[int, set] = {}
        last_only: dict[int, set] = {}  # once consumers of a chained gradient: the last copy only
        for owner, e in extra.get(u, ()):  # a replica on device e reads it like its update does
            if e != d:
                (last_only if chained[u] else keys).setdefault(e, set()).add((END, owner))
        for v in cons.tolist():
            if step.once[v]:
                if chained[u]:
                    if int(dev[v]) != d:
                        last_only.setdefault(int(dev[v]), set()).add((END, v))
                    continue
                keys.setdefault(int(dev[v]), set()).add((END, v))
            else:
                keys.setdefault(int(dev[v]), set()).add(((int(stage[v]), int(part[v]), 0), v))
        if chained[u]:
            keys.setdefault(d, set()).add((NEXT, u))
        if not cons.size:
            keys.setdefault(d, set()).add((END, u))
        home = keys.get(d, set())
        remote = {e: ks for e, ks in keys.items() if e != d}
        for var in ((VAR_IW,) if pu == PART_F else (VAR_B, VAR_IW)):
            split = pu == PART_F or var == VAR_IW
            inside_only = not remote and not last_only and all(
                kv[0] == s and kv[2] == 0 and (kv[1] == pu if split else kv[1] in (PART_I, PART_W)) for kv, _ in home)
            start = off_b[u] if var == VAR_B else off[u]
            end_u = fin_b[u] if var == VAR_B else fin[u]
            if inside_only:
                last = max([fin_b[v] if var == VAR_B else fin[v] for _, v in home] + [end_u])
                inside[4 * s + (3 if var == VAR_B else pu)].append((start, last, float(ob[u])))
                continue
            when = _buckets(action_time, s, pu, var, start, home, fin, fin_b, stage, part)
            g = _group(groups, d, s, pu, var, False,
                       frozenset(kv for kv, _ in home) | {("send", bool(remote)), when})
            g.nbytes += float(ob[u])
            g.start = min(g.start, start)
            _ends(g, home, fin, fin_b, u)
            for e, ks in list(remote.items()) + [(e, ks) for e, ks in last_only.items()]:
                only = e in last_only and e not in remote
                c = [_edge_transfer(p, u, v, d, e, step) for _, v in ks]
                if not only:
                    g.send = max(g.send, end_u + max(c))
                r = _group(groups, e, s, pu, var, only, frozenset(kv for kv, _ in ks))
                r.nbytes += float(ob[u])
                r.start = min(r.start, end_u + min(c))
                _ends(r, ks, fin, fin_b, u)
    internal = np.zeros((n_st, 4))
    at_end = np.zeros((n_st, 4))
    for s in range(n_st):
        for a in range(4):
            internal[s, a], at_end[s, a] = _internal_peak(step, stage, part, s, a, off, off_b, dur,
                                                          inside[4 * s + a])
    return list(groups.values()), internal, at_end


def _edge_transfer(p, u, v, a, b, step) -> float:
    e = p.out_edges[p.out_ptr[u]:p.out_ptr[u + 1]]
    e = e[p.edge_dst[e] == v]
    return transfer(p, a, b, float(step.edge_bytes[e].max()) if e.size else 0.0)


def _group(groups, device, stage, part, var, last_only, keyset) -> Group:
    key = (device, stage, part, var, last_only, keyset)
    if key not in groups:
        groups[key] = Group(device, stage, part, var, last_only=last_only)
    return groups[key]


def _ends(g: Group, consumers, fin, fin_b, u) -> None:
    for kv, v in consumers:
        if kv == END:
            g.to_end = True
        elif kv == NEXT:
            key = (g.stage, g.part, 1)
            g.ends[key] = _pair(g.ends.get(key), fin_b[u], fin[u])
        else:
            g.ends[kv] = _pair(g.ends.get(kv), fin_b[v], fin[v])


def _pair(old, b: float, iw: float) -> tuple[float, float]:
    return (b, iw) if old is None else (max(old[0], b), max(old[1], iw))


def _internal_peak(step, stage, part, s, action, off, off_b, dur, tensors) -> tuple[float, float]:
    """Largest bytes inside one action (the running node's temporary plus the tensors born and
    dead inside that are live at its start; closed intervals: an upper bound), and the bytes
    live at the action's last instant (zero-length tensors and temporaries there), which add to
    whatever starts at that instant."""
    nodes = np.flatnonzero((stage == s) & ((part == action) if action < 3 else step.backward))
    if not nodes.size:
        return 0.0, 0.0
    o = (off_b if action == 3 else off)[nodes]
    order = np.argsort(o, kind="stable")
    o, temps, d = o[order], step.temp_bytes[nodes][order], dur[nodes][order]
    end = float((o + d).max())
    pad = 1e-9 * (end + 1e-9)  # a float ulp apart is "at the same time" to the evaluator
    level = np.zeros(o.size + 1)
    last = 0.0
    if tensors:
        t = np.array(tensors, dtype=np.float64)
        first = np.searchsorted(o, t[:, 0] - pad, side="left")
        stop = np.searchsorted(o, t[:, 1] + pad, side="right")
        np.add.at(level, first, t[:, 2])
        np.add.at(level, stop, -t[:, 2])
        last = float(t[t[:, 1] >= end - pad, 2].sum())
    last += float(temps[(o >= end - pad) & (d <= pad)].sum())
    # temporaries live while their node runs; zero-length nodes at one instant all count there
    held = np.zeros(o.size + 1)
    zero = d <= pad
    lo = np.searchsorted(o, o - pad, side="left")
    hi = np.where(zero, np.searchsorted(o, o + pad, side="right"), np.searchsorted(o, o + d - pad, side="left"))
    hi = np.maximum(hi, lo + 1)
    np.add.at(held, lo, temps)
    np.add.at(held, hi, -temps)
    return float((np.cumsum(level)[:o.size] + np.cumsum(held)[:o.size]).max()), last
