"""Pipeline-stage placements of a training step: a start for the windowed search of ``cpsat``.

On traced training graphs the critical path carries most of the work, and peak memory is
what forces the step onto several devices: the forward pass saves activations that live until the backward pass consumes
them. The placement that pipeline parallelism uses answers both at once: cut the forward
pass into consecutive *stages*, one per device, and run each backward node on the device of
the forward nodes whose saved tensors it reads. Saved activations then never cross a link,
each device holds the activations of its own stage, and the critical path changes device
only at the ``2 (S - 1)`` stage boundaries (GPipe, Huang et al., NeurIPS 2019; PipeDream,
Narayanan et al., SOSP 2019, with the stage boundaries chosen by search instead of by
profile).

How a node finds its stage, in one linear pass (then every cut vector is one
``searchsorted``):

* the *forward set* ``F``: the nodes whose ``phase`` is ``"forward"`` when every node says
  (the importers write it), and the ancestors of the node at which the most output bytes
  (the largest outgoing tensor without the peak split) are live when the graph runs in
  topological order (the turn from forward to backward); both are tried;
* a node of ``F`` is anchored at its position in ``F``'s topological order;
* another node at the latest ``F`` predecessor it reads from, else at the predecessor with
  the heaviest edge (ties: the lowest anchor, the direction the backward pass runs), else
  (a source) at the successor with the heaviest edge.

Stage ``s`` holds the anchors in ``[cut_{s-1}, cut_s)``. The cuts start where the bytes a
stage keeps (parameters, and outputs read outside ``F``; the static ``memory`` without the
split) are shared in proportion to the devices' capacities, and a coordinate descent moves
one cut at a time by halving steps while the canonical schedule
(:func:`optpart.evaluate.canonical_schedule`) gets shorter or, while it overflows memory,
less over. When no stage placement fits (the parameters of every stage's weights land on
few devices, as when a few large weight groups each need more than a device), a second
round packs the parameter-holding nodes with their colocation groups over the devices,
largest first, and places the rest by stages as before. Then a first-improvement descent
moves single nodes of the schedule's critical chain to other devices (weight gradients
queued behind the critical path on their stage's device go where a device waits). Every
candidate is scored by that one evaluator under the requested memory model; the best that
fits is returned. Deterministic: an evaluation cap (``max_evals``); a wall-clock deadline
only when the caller has a time limit.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import numpy as np

from ...evaluate import canonical_schedule
from ...model.memory import fits, peak_memory, static_memory
from ...model.paths import critical_path_nodes
from ...model.problem import Problem
from ...schedule import justify
from ...schedule.graph import canonical_order

__all__ = ["forward_set", "phase_forward", "stage_anchors", "stage_seed", "parameter_units", "stage_candidate"]

#: Canonical-schedule evaluations of one :func:`stage_seed` call at most: for the cuts, and
#: as many again for the moves along the critical chain (:func:`_chain_moves`).
MAX_EVALS = 240
#: The heuristic's budget for it: (nodes + edges) x evaluations per round, per unit of effort;
#: fewer than :data:`MIN_EVALS` per round do not pay (the cut descent could not try each cut once).
STAGE_WORK, MIN_EVALS = 600_000, 16


def stage_candidate(run) -> None:
    """The stage placement as the heuristic's last candidate, a finished answer (it brings its
    own descent; offered before the search, the search from it found nothing where the search
    from the other constructions went further). Under ``peak`` on every graph with the liveness
    split; under ``static`` on a training step that declares its phases (what the importers
    write). ``max_evals = min(MAX_EVALS, effort x STAGE_WORK / (nodes + edges))``, skipped below
    :data:`MIN_EVALS`.

    Parameters
    ----------
    run : optpart.solvers.heuristic.pipeline.Run
        The solve: the candidate is offered to it (justified, kept when it fits and is shorter).
    """
    problem = run.problem
    evals = int(min(MAX_EVALS, run.effort * STAGE_WORK / max(1, run.size)))
    declared = phase_forward(problem)
    if evals < MIN_EVALS or not (run.peak or (declared is not None and declared.any() and not declared.all())):
        return
    got = stage_seed(problem, "peak" if run.peak else "static", deadline=run.deadline, max_evals=evals)
    if got is None:
        return
    place, start = got
    if not run.peak and not fits(np.bincount(place, weights=problem.memory, minlength=problem.n_devices),
                                 np.asarray(run.capacity)).all():
        return
    finish = start + problem.duration(place)
    place, start, finish = place.tolist(), start.tolist(), finish.tolist()
    s, f, _ = justify(run.g, place, start, finish, run.jr)
    if not run.offer("stage-seed", place, s, f):
        run.offer("stage-seed", place, start, finish)


def phase_forward(problem: Problem) -> np.ndarray | None:
    """The ``phase == "forward"`` mask when every node has a ``phase`` (the importers write it).

    Parameters
    ----------
    problem : Problem
        The problem; its ``node_meta`` is read.

    Returns
    -------
    ndarray of bool or None
        The mask, or None when some node has no ``phase``.
    """
    meta = problem.node_meta or ()
    n = problem.n_nodes
    if n and len(meta) == n and all(isinstance(m, Mapping) and "phase" in m for m in meta):
        return np.array([m["phase"] == "forward" for m in meta], dtype=bool)
    return None


def forward_set(problem: Problem) -> list[np.ndarray]:
    """The candidate forward sets: from the ``phase`` metadata and from liveness.

    Parameters
    ----------
    problem : Problem
        The problem (a training step: forward, backward, optimizer).

    Returns
    -------
    list of ndarray of bool
        One or two masks over the nodes (the metadata's first when every node has a
        ``phase``; the liveness split second when it differs).
    """
    declared = phase_forward(problem)
    out = [] if declared is None else [declared]
    live_split = _liveness_split(problem)
    if not any(np.array_equal(live_split, f) for f in out):
        out.append(live_split)
    return [f for f in out if f.any()]


def _liveness_split(problem: Problem) -> np.ndarray:
    """Ancestors (inclusive) of the node where the most output bytes are live in topological order."""
    n = problem.n_nodes
    topo = canonical_order(problem)
    pos = np.empty(n, dtype=np.int64)
    pos[topo] = np.arange(n)
    last = pos.copy()
    np.maximum.at(last, problem.edge_src, pos[problem.edge_dst])
    diff = np.zeros(n + 1)
    if problem.has_split:
        out_b = problem.output_bytes.astype(np.float64)
    else:  # without the split, a node's tensor is its largest outgoing edge
        out_b = np.zeros(n)
        np.maximum.at(out_b, problem.edge_src, problem.edge_bytes.astype(np.float64))
    np.add.at(diff, pos, out_b)
    np.add.at(diff, last, -out_b)
    turn = int(topo[int(np.argmax(np.cumsum(diff)[:n]))])
    anc = np.zeros(n, dtype=bool)
    anc[turn] = True
    in_ptr, in_e, src = problem.in_ptr, problem.in_edges, problem.edge_src
    for v in topo[::-1].tolist():
        if anc[v]:
            anc[src[in_e[in_ptr[v]:in_ptr[v + 1]]]] = True
    return anc


def stage_anchors(problem: Problem, forward: np.ndarray) -> np.ndarray:
    """Each node's anchor: a position in the forward set's topological order.

    Parameters
    ----------
    problem : Problem
        The problem.
    forward : ndarray of bool
        The forward set.

    Returns
    -------
    ndarray of int64
        ``anchor[v]``; stage ``s`` of cuts ``c`` holds the nodes with ``c[s-1] <= anchor < c[s]``.
    """
    n = problem.n_nodes
    topo = canonical_order(problem).tolist()
    anchor = np.full(n, -1, dtype=np.int64)
    f_order = [v for v in topo if forward[v]]
    anchor[f_order] = np.arange(len(f_order))
    src, dst, eb = problem.edge_src.tolist(), problem.edge_dst.tolist(), problem.edge_bytes.tolist()
    in_ptr, in_e = problem.in_ptr.tolist(), problem.in_edges.tolist()
    out_ptr, out_e = problem.out_ptr.tolist(), problem.out_edges.tolist()
    fw = forward.tolist()
    anc = anchor.tolist()
    for v in topo:
        if fw[v]:
            continue
        latest, heavy, heavy_b = -1, -1, -1.0
        for i in range(in_ptr[v], in_ptr[v + 1]):
            e = in_e[i]
            u = src[e]
            if fw[u]:
                latest = max(latest, anc[u])
            elif anc[u] >= 0 and (eb[e] > heavy_b or eb[e] == heavy_b and anc[u] < heavy):
                heavy, heavy_b = anc[u], eb[e]  # ties: the lower anchor, where the backward pass heads
        anc[v] = latest if latest >= 0 else heavy
    for v in reversed(topo):  # sources outside F: follow their heaviest successor
        if anc[v] >= 0:
            continue
        heavy, heavy_b = 0, -1.0
        for i in range(out_ptr[v], out_ptr[v + 1]):
            e = out_e[i]
            if anc[dst[e]] >= 0 and (eb[e] > heavy_b or eb[e] == heavy_b and anc[dst[e]] < heavy):  # ties: lower anchor
                heavy, heavy_b = anc[dst[e]], eb[e]
        anc[v] = heavy
    return np.asarray(anc, dtype=np.int64)


def _group_view(problem: Problem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The grouped nodes, their group ids and each group's allowed devices (the rows of
    :attr:`Problem.allowed` are the same for every member of a group)."""
    grouped = np.flatnonzero(problem.group_of >= 0)
    gid = problem.group_of[grouped]
    first = np.full(len(problem.groups), -1, dtype=np.int64)
    first[gid[::-1]] = grouped[::-1]  # each group's lowest member
    return grouped, gid, problem.allowed[first] if first.size else np.zeros((0, problem.n_devices), dtype=bool)


def _repair(problem: Problem, place: np.ndarray, view: tuple | None = None) -> np.ndarray | None:
    """Pins, forbidden devices and colocation groups kept (None when this simple repair fails):
    a node on a device it may not use goes to the nearest allowed index, then each group to
    the allowed device most of its members are on (ties: the lower index). O(V k), vectorised."""
    if not problem.has_constraints:
        return place
    allowed = problem.allowed
    n, k = problem.n_nodes, problem.n_devices
    place = place.copy()
    bad = np.flatnonzero(~allowed[np.arange(n), place])
    if bad.size:
        ok = allowed[bad]
        if not ok.any(axis=1).all():
            return None
        dist = np.where(ok, np.abs(np.arange(k)[None, :] - place[bad, None]), k + 1)
        place[bad] = np.argmin(dist, axis=1)  # ties: the lower index
    grouped, gid, common = view if view is not None else _group_view(problem)
    if grouped.size:
        if not common.any(axis=1).all():
            return None
        counts = np.zeros(common.shape, dtype=np.int64)
        np.add.at(counts, (gid, place[grouped]), 1)
        place[grouped] = np.argmax(np.where(common, counts, -1), axis=1)[gid]
    return place if bool(allowed[np.arange(n), place].all()) else None


class _Scorer:
    """Canonical schedule and memory of a stage placement, with an evaluation count."""

    def __init__(self, problem: Problem, memory_model: str, deadline: float | None, max_evals: int = MAX_EVALS) -> None:
        self.problem = problem
        self.peak = memory_model == "peak" and problem.has_split
        self.deadline = deadline
        self.evals = 0
        self.limit = self.per_round = max_evals
        self.groups = _group_view(problem) if problem.has_constraints else None

    def spent(self) -> bool:
        """The evaluation cap reached, or the deadline (when one was given) passed."""
        return self.evals >= self.limit or self.deadline is not None and time.perf_counter() > self.deadline

    def __call__(self, place: np.ndarray):
        """``(key, place, start)`` of the canonical schedule: key ``(0, makespan)`` when it fits,
        ``(1, worst overflow ratio)`` when it does not, ``(2, 0)`` when the constraints cannot be kept."""
        self.evals += 1
        p = self.problem
        place = _repair(p, place, self.groups)
        if place is None:
            return (2, 0.0), None, None
        start, finish = canonical_schedule(p, place)
        used = peak_memory(p, place, start, finish) if self.peak else static_memory(p, place)
        if not bool(np.all(fits(used, p.device_memory))):
            over = float(np.max(used / np.maximum(p.device_memory, 1.0))) - 1.0  # inf capacity: 0
            return (1, max(over, 1e-12)), place, start
        return (0, float(finish.max()) if p.n_nodes else 0.0), place, start


def parameter_units(problem: Problem) -> list[np.ndarray]:
    """The nodes that hold parameters, with their colocation groups: units placed whole.

    Parameters
    ----------
    problem : Problem
        The problem (``param_bytes`` and colocation groups).

    Returns
    -------
    list of ndarray
        Node ids per unit (a group, or one node outside groups), largest parameter bytes
        first, ties by first node.
    """
    seen: set = set()
    units = []
    for v in np.flatnonzero(problem.param_bytes > 0).tolist():
        g = int(problem.group_of[v])
        key = ("g", g) if g >= 0 else ("v", v)
        if key not in seen:
            seen.add(key)
            units.append(problem.groups[g] if g >= 0 else np.array([v], dtype=np.int64))
    size = [float(problem.param_bytes[u].sum()) for u in units]
    return [units[i] for i in sorted(range(len(units)), key=lambda i: (-size[i], int(units[i][0])))]


def _pack(problem: Problem, place: np.ndarray, devices: np.ndarray, units: list) -> np.ndarray:
    """``place`` with each parameter unit on the device of ``devices`` with the most capacity
    left after the units placed before it (longest-processing-time packing, Graham 1969)."""
    place = place.copy()
    left = {int(d): float(problem.device_memory[d]) for d in devices}
    for members in units:
        ok = [d for d in left if problem.allowed[members, d].all()]
        if not ok:
            continue
        d = max(ok, key=lambda e: (left[e], -e))
        place[members] = d
        left[d] -= float(problem.param_bytes[members].sum())
    return place


def _descend(score: _Scorer, anchor: np.ndarray, devices: np.ndarray, cuts: np.ndarray, top: int,
             units: list | None = None):
    """Coordinate descent over the cut positions (halving steps); the best ``(key, place, start)``.
    With ``units``, the parameter units are packed over the stages' devices (:func:`_pack`)."""
    def place_of(c: np.ndarray) -> np.ndarray:
        place = devices[np.searchsorted(c, anchor, side="right")]
        return place if units is None else _pack(score.problem, place, devices, units)

    best = (score(place_of(cuts)), cuts)
    step = max(1, top // 8)
    while step >= 1 and not score.spent():
        moved = True
        while moved and not score.spent():
            moved = False
            for i in range(cuts.size):
                for delta in (-step, step):
                    c = best[1].copy()
                    c[i] = min(max(0, c[i] + delta), top)
                    if np.any(np.diff(c) < 0) or np.array_equal(c, best[1]) or score.spent():
                        continue
                    got = score(place_of(c))
                    if got[0] < best[0][0]:
                        best, moved = (got, c), True
        step //= 4 if step >= 4 else 2
    return best[0]


def stage_seed(problem: Problem, memory_model: str, *, deadline: float | None = None,
               max_evals: int = MAX_EVALS) -> tuple[np.ndarray, np.ndarray] | None:
    """The best pipeline-stage placement that fits, with its canonical schedule.

    Cost: at most ``3 * max_evals`` evaluations (``max_evals`` for the cuts, as many again
    for the packed cuts when no stage placement fits, and for the chain moves), each one
    canonical schedule and its memory check, O((V + E) log V); plus O(V + E) per forward
    set for the anchors and once for the critical path. So O(max_evals (V + E) log V).

    Parameters
    ----------
    problem : Problem
        The problem, with devices.
    memory_model : {"static", "peak"}
        The model the returned placement fits.
    deadline : float, optional
        ``time.perf_counter()`` value after which no further evaluation starts (a user's
        time limit). Without it the clock is never read: the result depends on the
        input and ``max_evals`` only.
    max_evals : int
        The evaluation cap of each of the three rounds (default :data:`MAX_EVALS`).

    Returns
    -------
    tuple of (ndarray, ndarray) or None
        ``(placement, start)`` valid under ``memory_model`` and the constraints, or None
        when no stage placement tried fits.
    """
    n, k = problem.n_nodes, problem.n_devices
    if n == 0 or k == 0:
        return None
    score = _Scorer(problem, memory_model, deadline, max(1, int(max_evals)))
    # Devices by capacity (largest first, then index): stage s runs on by_cap[s].
    by_cap = np.lexsort((np.arange(k), -problem.device_memory))
    best = None
    candidates = forward_set(problem)
    for packed in (False, True):  # parameters packed over the devices only when no stage placement fits
        if best is not None:
            break
        units = parameter_units(problem) if packed else None
        if packed:
            score.limit = score.evals + score.per_round
        best = _stages(problem, score, candidates, by_cap, units)
    if best is None:
        return None
    score.limit = score.evals + score.per_round
    got = _chain_moves(score, best)
    return got[1], got[2]


def _stages(problem: Problem, score: _Scorer, candidates: list, by_cap: np.ndarray, units: list | None):
    """The best fitting stage placement over the forward sets and stage counts, or None."""
    n, k = problem.n_nodes, problem.n_devices
    best = None
    budget_end = score.limit
    for rounds, forward in zip(range(len(candidates), 0, -1), candidates):
        anchor = stage_anchors(problem, forward)
        top = int(forward.sum())
        reads_out = np.zeros(n, dtype=bool)
        reads_out[problem.edge_src[~forward[problem.edge_dst]]] = True
        keep = (problem.param_bytes + problem.output_bytes * reads_out) if problem.has_split else problem.memory
        weight = np.zeros(top)
        np.add.at(weight, anchor, keep)  # each node's bytes at its anchor
        cum = np.cumsum(weight)
        for s in range(k, 0, -1):  # the most stages first: the likeliest to fit
            # An even share of what is left of the evaluations for each stage count.
            score.limit = min(budget_end, score.evals + (budget_end - score.evals) // (s + k * (rounds - 1)))
            if score.spent():
                break
            devices = by_cap[:s]
            cap = problem.device_memory[devices]
            share = np.cumsum(np.where(np.isfinite(cap), cap, 1.0))
            cuts = np.searchsorted(cum, cum[-1] * share[:-1] / share[-1]).astype(np.int64) if s > 1 \
                else np.zeros(0, dtype=np.int64)
            got = _descend(score, anchor, devices, cuts, top, units)
            if got[1] is not None and got[0][0] == 0 and (best is None or got[0] < best[0]):
                best = got
    return best


def _binding_chain(problem: Problem, place: np.ndarray, start: np.ndarray) -> np.ndarray:
    """The nodes of one critical chain: from the last to finish, back through whatever
    started each node (the latest-arriving input, or the device's previous node)."""
    n = problem.n_nodes
    dur = problem.duration(place)
    end = start + dur
    comm = problem.transfer_times(place)
    prev = np.full(n, -1, dtype=np.int64)
    last: dict = {}
    rank = np.empty(n, dtype=np.int64)
    rank[canonical_order(problem)] = np.arange(n)
    for u in np.lexsort((rank, end, start)).tolist():
        prev[u] = last.get(int(place[u]), -1)
        last[int(place[u])] = u
    in_ptr, in_e, src = problem.in_ptr, problem.in_edges, problem.edge_src
    chain = []
    v = int(np.argmax(end))
    while v >= 0:
        chain.append(v)
        es = in_e[in_ptr[v]:in_ptr[v + 1]]
        nxt, ready = -1, -np.inf
        if es.size:
            arrive = end[src[es]] + comm[es]
            a = int(np.argmax(arrive))
            nxt, ready = int(src[es[a]]), float(arrive[a])
        if prev[v] >= 0 and end[prev[v]] >= ready - 1e-12 * max(1.0, ready):
            nxt = int(prev[v])
        v = nxt
    return np.asarray(chain, dtype=np.int64)


def _chain_moves(score: _Scorer, best: tuple) -> tuple:
    """First-improvement descent: move one node of the schedule's critical chain to another device.

    The stage placement runs every backward node beside its stage's forward nodes, so work
    off the critical path (weight gradients) queues on the critical devices while others
    wait. Each pass tries the critical nodes, longest first (with their colocation group), on
    every other device the group may use
    and keeps the first move that shortens the canonical schedule and fits memory; nodes off
    the DAG's critical path go first.
    """
    p = score.problem
    allowed = p.allowed
    on_path = np.zeros(p.n_nodes, dtype=bool)
    on_path[critical_path_nodes(p, p.time)[0]] = True
    rank = np.empty(p.n_nodes, dtype=np.int64)
    rank[canonical_order(p)] = np.arange(p.n_nodes)
    while not score.spent():
        (_, ms), place, start = best
        critical = _binding_chain(p, place, start)
        critical = critical[p.time[critical] > 0]
        moved = False
        # Work off the DAG's critical path first (it can leave the chain), longest first.
        for v in critical[np.lexsort((rank[critical], -p.time[critical], on_path[critical]))].tolist():
            g = int(p.group_of[v])
            members = p.groups[g] if g >= 0 else np.array([v])  # a colocation group moves whole
            for d in np.flatnonzero(allowed[members].all(axis=0)).tolist():
                if d == place[v] or score.spent():
                    continue
                trial = place.copy()
                trial[members] = d
                got = score(trial)
                if got[0] < best[0]:
                    best, moved = got, True
                    break
            if moved or score.spent():
                break
        if not moved:
            break
    return best
