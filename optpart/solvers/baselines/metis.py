"""``metis``: balanced k-way graph partitioning with METIS, then the canonical schedule.

METIS (Karypis and Kumar, "A fast and high quality multilevel scheme for
partitioning irregular graphs", SIAM J. Sci. Comput. 20(1), 1998), called through
pymetis, cuts the graph into ``k`` parts of balanced weight while minimising the
bytes that cross parts. It is the classic graph-partitioning baseline of device
placement (e.g. the METIS baseline in Baechi, ACM SoCC 2020, and in ParDNN).

How the problem becomes a METIS graph:

* colocation groups are contracted into one vertex (METIS knows no constraints), and the
  vertices numbered in the canonical order (:attr:`optpart.schedule.graph.Graph.canon`), so
  renumbering the nodes does not change the partition;
* edges become undirected, both directions merged, weighted by their tensor bytes
  (integer-scaled, at least 1);
* vertex weights: with equal device speeds, two constraints, compute (``time``)
  and memory, balanced together (multi-constraint partitioning); with different
  speeds, compute only, with target part weights proportional to device speed
  (``tpwgts``; pymetis takes one target per part, so not with two constraints);
* the METIS seed is the solver's ``seed``; ``ufactor`` sets the allowed imbalance
  (30 = 3 %, METIS's default for k-way).

Parts are then given to devices by an assignment that maximises the memory of
nodes whose pin or allowed devices are honoured (and, with different speeds,
keeps part ``i`` on device ``i``, whose speed its target weight followed). Nodes
still on a device their constraints forbid move to an allowed device, and a bounded
repair moves vertices off devices whose memory overflows, to allowed devices with
room, preferring the vertices and targets with the most traffic between them.
If a device still overflows the answer is ``unknown`` with the reason
(``metis part 2 needs 19.1 GiB of 16 GiB``); an overflowing placement is never
returned as valid.
"""

from __future__ import annotations

import numpy as np

from ...model.memory import fits
from ...model.problem import Problem
from ...schedule import Graph
from ...result import Status
from ...units import format_bytes
from ..base import Solution
from ..spec import Option, SolverSpec

__all__ = ["solve", "SPEC"]

_SCALE = 10**7  # total integer weight per vertex constraint / over all edges, well inside 32 bits


def _int_weights(x: np.ndarray, total: int = _SCALE) -> np.ndarray:
    """Non-negative floats to integers >= 1 in proportion, summing to about ``total + len(x)``."""
    s = float(x.sum())
    if s <= 0:
        return np.ones(x.size, dtype=np.int64)
    return 1 + np.floor(x / s * total).astype(np.int64)


def _contract(problem: Problem) -> tuple[np.ndarray, int]:
    """Super-vertex of each node: one per colocation group, one per free node, numbered by the
    canonical position of their first member."""
    n = problem.n_nodes
    canon = np.asarray(Graph(problem).canon)
    group_of = problem.group_of
    key = np.where(group_of >= 0, n + group_of, np.arange(n))   # one key per super-vertex
    lowest = np.full(n + len(problem.groups), n, dtype=np.int64)  # its members' least canonical position
    np.minimum.at(lowest, key, canon)
    keys = np.unique(key)
    rank = np.empty(lowest.size, dtype=np.int64)
    rank[keys[np.argsort(lowest[keys], kind="stable")]] = np.arange(keys.size)
    return rank[key], int(keys.size)


def _undirected(problem: Problem, comp: np.ndarray, n_super: int):
    """CSR of the contracted undirected graph and its summed edge bytes per adjacency entry."""
    a, b = comp[problem.edge_src], comp[problem.edge_dst]
    keep = a != b
    a, b, w = a[keep], b[keep], problem.edge_bytes[keep]
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    key = lo * n_super + hi
    uniq, inv = np.unique(key, return_inverse=True)
    wsum = np.bincount(inv, weights=w, minlength=uniq.size)
    u, v = uniq // n_super, uniq % n_super
    src = np.concatenate([u, v])
    dst = np.concatenate([v, u])
    ws = np.concatenate([wsum, wsum])
    order = np.lexsort((dst, src))
    src, dst, ws = src[order], dst[order], ws[order]
    xadj = np.zeros(n_super + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n_super), out=xadj[1:])
    return xadj, dst, ws


SPEC = SolverSpec(
    options=(Option("ufactor", int, 30, "allowed load imbalance in thousandths (METIS ufactor)", min=1),),
    memory_models=("static",), uses_hint=False, uses_time_limit=False)


@SPEC.checked("metis")
def solve(problem: Problem, *, time_limit: float | None = None, seed: int = 0,
          hint: np.ndarray | None = None, memory_model: str = "static", ufactor: int = 30) -> Solution:
    """Partition ``problem`` with METIS; see the module docstring.

    Parameters
    ----------
    problem : Problem
        The instance, with devices.
    time_limit : float, optional
        Accepted for the common solver signature; one partition call ignores it.
    seed : int
        The METIS seed.
    hint : numpy.ndarray, optional
        Ignored (METIS starts from nothing).
    memory_model : str
        ``"static"``, the model the partition's memory weights balance.
    ufactor : int
        Allowed load imbalance in thousandths (METIS ``ufactor``; 30 means 1.03).

    Returns
    -------
    Solution
        The placement (repaired to fit memory) and status, ``unknown`` with a one-line
        reason when the repair fails.
    """
    import pymetis

    k = problem.n_devices
    comp, n_super = _contract(problem)
    s_time = np.bincount(comp, weights=problem.time, minlength=n_super)
    s_mem = np.bincount(comp, weights=problem.memory, minlength=n_super)
    xadj, adjncy, ew = _undirected(problem, comp, n_super)
    speed = problem.device_speed
    uniform = bool(np.all(speed == speed[0]))

    if k == 1 or n_super <= 1:
        parts = np.zeros(n_super, dtype=np.int64)
        ncon = 0
    else:
        options = pymetis.Options(seed=int(seed) & 0x7FFFFFFF, ufactor=int(ufactor))
        adjacency = pymetis.CSRAdjacency(xadj.tolist(), adjncy.tolist())
        eweights = _int_weights(ew).tolist() if ew.size else None
        if uniform:
            ncon = 2
            vw = np.stack([_int_weights(s_time), _int_weights(s_mem)], axis=1).reshape(-1)
            result = pymetis.part_graph(k, adjacency, vweights=vw.tolist(), eweights=eweights, options=options)
        else:
            ncon = 1
            target = (speed / speed.sum()).tolist()
            result = pymetis.part_graph(k, adjacency, vweights=_int_weights(s_time).tolist(),
                                        eweights=eweights, tpwgts=target, options=options)
        parts = np.asarray(result.vertex_part, dtype=np.int64)

    device_of_part = _assign_parts(problem, comp, parts, n_super, uniform)
    sdev = device_of_part[parts]
    sdev, reason, moves = _repair(problem, comp, n_super, sdev, s_mem, xadj, adjncy, ew, device_of_part)
    stats = {"constraints": ncon, "super_vertices": n_super, "repair_moves": moves}
    if reason is not None:
        return Solution(Status.UNKNOWN, message=reason, stats=stats)
    placement = sdev[comp]
    return Solution(Status.FEASIBLE, placement=placement, stats=stats)


def _assign_parts(problem: Problem, comp: np.ndarray, parts: np.ndarray, n_super: int,
                  uniform: bool) -> np.ndarray:
    """Device of each part: the assignment honouring the most constrained memory, and capacities."""
    from scipy.optimize import linear_sum_assignment

    k = problem.n_devices
    node_part = parts[comp]
    allowed = problem.allowed
    constrained = ~allowed.all(axis=1)
    # score[p, d]: bytes (+1 per node) of constrained nodes of part p that may run on d
    score = np.zeros((k, k))
    idx = np.flatnonzero(constrained)
    if idx.size:
        weight = problem.memory[idx] + 1.0
        np.add.at(score, node_part[idx], allowed[idx] * weight[:, None])
    part_mem = np.bincount(node_part, weights=problem.memory, minlength=k)
    fits = part_mem[:, None] <= problem.device_memory[None, :]
    cost = -score - fits * (score.max() + 1.0) * k  # fitting memory counts most
    if not uniform:
        cost -= np.eye(k) * 0.5  # part i was sized for device i's speed: keep ties there
    rows, cols = linear_sum_assignment(cost)
    out = np.empty(k, dtype=np.int64)
    out[rows] = cols
    return out


def _repair(problem: Problem, comp: np.ndarray, n_super: int, sdev: np.ndarray, s_mem: np.ndarray,
            xadj: np.ndarray, adjncy: np.ndarray, ew: np.ndarray, device_of_part: np.ndarray):
    """Move super-vertices to allowed devices, then off overflowing devices; bounded by O(V) moves.

    Parameters
    ----------
    problem : Problem
    comp : numpy.ndarray
        Super-vertex of each node (:func:`_contract`).
    n_super : int
        Number of super-vertices.
    sdev : numpy.ndarray
        Device of each super-vertex from the partition (not modified).
    s_mem : numpy.ndarray
        Static bytes of each super-vertex.
    xadj, adjncy, ew : numpy.ndarray
        The undirected super-vertex graph in CSR form, with edge bytes.
    device_of_part : numpy.ndarray
        Device of each METIS part (names the part in the message).

    Returns
    -------
    tuple
        ``(sdev, reason, moves)``: the repaired devices, None or the one-line reason a device
        still overflows, and how many super-vertices were moved.
    """
    k = problem.n_devices
    cap = problem.device_memory.tolist()
    # Allowed devices per super vertex (the group's members share one mask).
    rep = np.zeros(n_super, dtype=np.int64)
    rep[comp[::-1]] = np.arange(problem.n_nodes)[::-1]  # first member of each super vertex
    allowed = problem.allowed[rep]
    sdev = sdev.copy()
    used = np.bincount(sdev, weights=s_mem, minlength=k).tolist()
    mem = s_mem.tolist()
    xa, adj, w = xadj.tolist(), adjncy.tolist(), ew.tolist()
    moves = [0]

    def traffic(s: int) -> list[float]:
        t = [0.0] * k
        for i in range(xa[s], xa[s + 1]):
            t[sdev[adj[i]]] += w[i]
        return t

    def move(s: int, targets: list[int]) -> bool:
        t = traffic(s)
        options = [d for d in targets if fits(used[d] + mem[s], cap[d])]
        if not options:
            return False
        d = max(options, key=lambda e: (t[e], cap[e] - used[e], -e))
        used[sdev[s]] -= mem[s]
        used[d] += mem[s]
        sdev[s] = d
        moves[0] += 1
        return True

    # Constraints first: a super-vertex on a device it may not use goes to an allowed one.
    wrong = np.flatnonzero(~allowed[np.arange(n_super), sdev]).tolist()
    for s in wrong:
        targets = np.flatnonzero(allowed[s]).tolist()
        if not move(s, targets):
            d = targets[0]
            used[sdev[s]] -= mem[s]
            used[d] += mem[s]
            sdev[s] = d  # memory repair below may still make room
            moves[0] += 1
    # Memory: empty overflowing devices, best-connected-elsewhere vertices first.
    for d in range(k):
        if fits(used[d], cap[d]):
            continue
        on_d = np.flatnonzero(sdev == d).tolist()
        gains = []
        for s in on_d:
            t = traffic(s)
            gains.append((t[d] - max((t[e] for e in range(k) if e != d), default=0.0), -mem[s], s))
        gains.sort()
        for _, _, s in gains:
            if fits(used[d], cap[d]):
                break
            targets = [e for e in np.flatnonzero(allowed[s]).tolist() if e != d]
            move(s, targets)
    for d in range(k):
        if not fits(used[d], cap[d]):
            p = int(np.flatnonzero(device_of_part == d)[0])
            return sdev, (f"metis part {p} needs {format_bytes(used[d])} of {format_bytes(cap[d])} "
                          f"on device '{problem.device_ids[d]}' after repair"), moves[0]
    return sdev, None, moves[0]
