"""Symmetry breaking, dominance rules and the search strategy of the ``cpsat`` model.

Every rule here removes schedules, never the optimum: for each schedule it cuts, another
schedule of the same or a shorter makespan satisfies it (the argument is in each
docstring, and ``tests/test_cpsat_rules.py`` checks every rule against the brute force of
``tests/oracle.py``).

* :func:`symmetry_order` and :func:`add_symmetry`: devices of a class of interchangeable
  devices are used in order of first use along a fixed order of the nodes. Any fixed
  order is valid; the order puts the hubs of the graph (a fork's source, a join's sink)
  first, so that, as in the processor normalisation of fork-join scheduling (Wang and
  Sinnen, ICPP 2022; Dutot, Fu, Prasad and Sinnen), the source lands on the first device
  and the sink on the first or the second.
* :func:`add_twin_order`: twins (same predecessors and successors, equal run times on
  every device) that share a device run in a fixed order when one dominates the other.
* :func:`add_search_strategy`: placement literals first (in symmetry order), then starts
  at their earliest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..._docstrings import fill_doc
from ...model.problem import Problem

if TYPE_CHECKING:  # pragma: no cover - types only
    from .cpsat_model import CpData, CpModelVars

__all__ = ["symmetry_order", "add_symmetry", "Twins", "twins", "add_twin_order", "order_twins",
           "add_search_strategy"]


@fill_doc
def symmetry_order(problem: Problem) -> np.ndarray:
    """The order of nodes along which devices are used for the first time.

    Nodes of highest degree (in plus out) first, ties in topological order: a hub
    constrains most of the graph, so fixing its device early propagates most, and on a
    fork-join graph the source then takes the first device and the sink the first or the
    second (processor normalisation). Any fixed order is a valid symmetry breaking: every
    placement has exactly one relabelling whose devices are first used in class order
    along it (:func:`optpart.solvers.exact._exact_common.relabel`).

    Parameters
    ----------
    %(problem_dag)s

    Returns
    -------
    numpy.ndarray
        Node ids, a permutation of ``range(n)``.
    """
    degree = np.diff(problem.in_ptr) + np.diff(problem.out_ptr)
    return np.lexsort((problem.topo_rank, -degree)).astype(np.int64)


def add_symmetry(model, data: CpData, mv: CpModelVars) -> None:
    """Within a class of interchangeable devices, device ``j`` is used only after ``j - 1``.

    Along ``data.sym_order``, ``used[j]`` (one literal per node and class member) says
    that device ``j`` of the class took an earlier node; a node may take device ``j``
    only when ``used[j - 1]`` holds. Linear in the number of nodes.

    Parameters
    ----------
    model : ortools.sat.python.cp_model.CpModel
        The model (changed in place).
    data : CpData
        The model's data (classes, leaders, the order).
    mv : CpModelVars
        The model's variables (placement literals).
    """
    if data.pooled:
        return
    allowed, leader, x = data.problem.allowed, data.leader, mv.x
    for cls in data.classes:
        used: list = [None] * len(cls)  # literal "device cls[j] used by an earlier node"
        done: set[int] = set()
        for v in np.asarray(data.sym_order).tolist():
            lv = leader[v]
            if lv in done or not allowed[lv, cls[0]]:
                continue
            done.add(lv)
            for j in range(1, len(cls)):
                if used[j - 1] is None:
                    model.add(x[lv, cls[j]] == 0)
                else:
                    model.add_implication(x[lv, cls[j]], used[j - 1])
            for j in range(len(cls) - 1):  # the last member never gates another
                now = model.new_bool_var(f"used_{cls[j]}_{lv}")
                model.add_implication(x[lv, cls[j]], now)
                if used[j] is None:
                    model.add_implication(now, x[lv, cls[j]])
                else:
                    model.add_implication(used[j], now)
                    model.add_bool_or([~now, used[j], x[lv, cls[j]]])
                used[j] = now


@dataclass
class Twins:
    """Twins of a model: ``pairs`` ``(i, j)`` run ``i`` first when they share a device;
    ``identical`` buckets (ids ascending) start in id order wherever they run."""

    pairs: list = field(default_factory=list)
    identical: list = field(default_factory=list)


def twins(problem: Problem, dur: np.ndarray, comm: np.ndarray, mem: np.ndarray) -> Twins:
    """The twins of a model and the order that may be imposed on them (static memory).

    Twins are nodes outside colocation groups with the same predecessors, the same
    successors, the same allowed devices and equal integer run times on every device
    (``dur``). Twin ``i`` *dominates* ``j`` when every transfer into ``i`` is at most the
    matching one into ``j`` and every transfer out of ``i`` at least the matching one out
    of ``j`` (``comm``, every device pair); ties go to the lower id.

    Why ``i`` first is no loss (both on device ``d``, ``j`` first): swap their slots on
    ``d``. The slots have equal lengths, so ``d`` stays busy exactly as before. ``i``
    moves earlier, into ``j``'s slot, where ``j``'s data had arrived, and ``i``'s data
    arrive no later; ``j`` moves later. ``i`` now ends earlier with transfers out at least
    as large, and ``j`` ends where ``i`` ended with transfers out no larger than ``i``'s:
    every successor gets its data no later, and static memory of ``d`` holds the same
    nodes. Such a swap strictly reduces the inversions of a fixed linear order of the
    dominance, so repeated swaps reach a schedule that keeps every pair, no longer than
    before (:func:`order_twins` does it to the hint).

    A bucket whose twins all have equal transfers both ways and equal memory is
    *identical*: any permutation of their positions (device and slot) changes nothing,
    so their starts follow their ids on every device. Peak memory depends on the order,
    so :func:`add_twin_order` adds nothing under it.

    Parameters
    ----------
    problem : Problem
        The problem.
    dur : numpy.ndarray
        ``n x k`` integer run times of the model.
    comm : numpy.ndarray
        ``m x k x k`` integer transfer times of the model.
    mem : numpy.ndarray
        Integer static memories of the model.

    Returns
    -------
    Twins
        The same-device pairs of non-identical buckets and the identical buckets.
    """
    ins, outs = _io(problem)
    grouped = problem.group_of >= 0
    buckets: dict = {}
    for v in range(problem.n_nodes):
        if not grouped[v]:
            key = (tuple(sorted(ins[v])), tuple(sorted(outs[v])), dur[v].tobytes(), problem.allowed[v].tobytes())
            buckets.setdefault(key, []).append(v)
    out = Twins()
    for members in buckets.values():
        if len(members) < 2:
            continue
        if all(mem[v] == mem[members[0]] and _dominates(comm, ins, outs, v, members[0])
               and _dominates(comm, ins, outs, members[0], v) for v in members[1:]):
            out.identical.append(members)
            continue
        for a in range(len(members)):
            for b in range(a + 1, len(members)):
                i, j = members[a], members[b]
                if _dominates(comm, ins, outs, i, j):
                    out.pairs.append((i, j))
                elif _dominates(comm, ins, outs, j, i):
                    out.pairs.append((j, i))
    return out


def _io(problem: Problem) -> tuple[list, list]:
    """Per node: ``{predecessor: edge}`` and ``{successor: edge}``."""
    ins: list[dict] = [dict() for _ in range(problem.n_nodes)]
    outs: list[dict] = [dict() for _ in range(problem.n_nodes)]
    for e, (u, w) in enumerate(zip(problem.edge_src.tolist(), problem.edge_dst.tolist())):
        ins[w][u] = e
        outs[u][w] = e
    return ins, outs


def _dominates(comm: np.ndarray, ins: list, outs: list, i: int, j: int) -> bool:
    """Transfers into ``i`` no larger and out of ``i`` no smaller than ``j``'s (every device pair)."""
    for u, e in ins[i].items():
        if (comm[e] > comm[ins[j][u]]).any():
            return False
    for w, e in outs[i].items():
        if (comm[e] < comm[outs[j][w]]).any():
            return False
    return True


def add_twin_order(model, data: CpData, mv: CpModelVars) -> Twins:
    """The order of :func:`twins` as constraints (static memory only; none under peak).

    Parameters
    ----------
    model : ortools.sat.python.cp_model.CpModel
        The model (changed in place).
    data : CpData
        The model's data.
    mv : CpModelVars
        The model's variables.

    Returns
    -------
    Twins
        What was imposed (empty under peak).
    """
    if data.peak:
        return Twins()
    tw = twins(data.problem, data.dur, data.comm, data.mem)
    allowed = data.problem.allowed
    for bucket in tw.identical:
        for i, j in zip(bucket, bucket[1:]):
            model.add(mv.S[i] <= mv.S[j])
    for i, j in tw.pairs:
        if data.pooled:  # one pool: the twins' slots can always be swapped
            model.add(mv.S[i] <= mv.S[j])
            continue
        for d in range(data.problem.n_devices):
            if allowed[i, d] and allowed[j, d]:
                model.add(mv.S[i] <= mv.S[j]).only_enforce_if([mv.x[i, d], mv.x[j, d]])
    return tw


def order_twins(tw: Twins, place: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A schedule that keeps the order of ``tw``, no longer than ``(place, start)``.

    Identical twins take their bucket's positions (device and start) in id order; then
    any pair sharing a device in the wrong order swaps its slots, until none is left
    (each swap removes an inversion of a fixed linear order, see :func:`twins`).

    Parameters
    ----------
    tw : Twins
        The twins of the model.
    place : numpy.ndarray
        Device per node.
    start : numpy.ndarray
        Integer start per node.

    Returns
    -------
    tuple of numpy.ndarray
        The new placement and starts (copies).
    """
    place, start = np.array(place, dtype=np.int64), np.array(start, dtype=np.int64)
    for bucket in tw.identical:
        slots = sorted((int(start[v]), int(place[v])) for v in bucket)
        for v, (s, d) in zip(bucket, slots):
            start[v], place[v] = s, d
    changed = True
    while changed:
        changed = False
        for i, j in tw.pairs:
            if place[i] == place[j] and start[i] > start[j]:
                start[i], start[j] = start[j], start[i]
                changed = True
    return place, start


def add_search_strategy(model, data: CpData, mv: CpModelVars) -> None:
    """Placement literals first, then starts at their earliest (the "set times" idea of Le Pape et al.).

    Under peak memory on a rounded (fine) grid a start is split in halves instead of set
    to its least value: the liveness rows do not push a failed start further, so setting
    values one by one walked unit after unit (161,000 branches and 14 CPU s on a 5-node
    graph whose grid has 10^8 units per second, against 110 branches split in halves);
    with static memory halves were 10-20 times slower on layered graphs (docs/exact.md).

    Parameters
    ----------
    model : ortools.sat.python.cp_model.CpModel
        The model (changed in place).
    data : CpData
        The model's data (colocation leaders).
    mv : CpModelVars
        The model's variables.
    """
    from ortools.sat.python import cp_model
    lits = [mv.x[v, d] for (v, d) in sorted(mv.x) if data.leader[v] == v]
    if lits:
        model.add_decision_strategy(lits, cp_model.CHOOSE_FIRST, cp_model.SELECT_MAX_VALUE)
    halves = data.peak and not data.grid.exact
    model.add_decision_strategy(mv.S, cp_model.CHOOSE_LOWEST_MIN,
                                cp_model.SELECT_LOWER_HALF if halves else cp_model.SELECT_MIN_VALUE)
    model.add_decision_strategy(mv.E + [mv.makespan], cp_model.CHOOSE_FIRST, cp_model.SELECT_MIN_VALUE)
