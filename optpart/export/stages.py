"""Contiguous pipeline stages built directly from the order modules run, for split points.

When the closest module-consistent plan to a placement is not a pipeline (a device's modules
come back after another device's stage), :func:`pipeline_plan` builds one: modules in the
order they first run are cut into at most one stage per device, the cuts balancing run time,
and every candidate is scored by the evaluator (memory under its model included); the fastest
one that fits wins.

A parameter shared by modules of different stages (a language model head tied to the token
embedding) is what ``torch.distributed.pipelining`` replicates on every stage that uses it
(each stage accumulates its own gradient; the user sums them before the optimizer step). The
plan is scored that way: the tie's colocation is split per module, so the later stage receives
the weight as a copy, counted in its memory, and sends its gradient back.
"""

from __future__ import annotations

import numpy as np

from ..model.constraints import Constraints
from ..model.problem import Problem
from .tree import Units, first_seen

__all__ = ["untied", "stage_candidates", "unit_order", "all_blocks"]


def untied(problem: Problem, modules: list[str | None]) -> tuple[Problem, list[tuple[str, list[str]]]]:
    """The problem with each tied weight's colocation group split by module, and the weights that spanned modules.

    Only a group holding a trainable parameter (its ``update.`` node) is split: that is a weight
    torch pipelining replicates on each stage using it. Other groups (a module kept whole, a
    buffer and the operator writing it in place) stay whole.

    Parameters
    ----------
    problem : Problem
        The problem; its colocation groups tie a parameter's update to the operators using it.
    modules : list of str or None
        The module of every node (:func:`optpart.export.tree.node_modules`, maybe cut to a depth).

    Returns
    -------
    (Problem, list of (str, list of str))
        The relaxed problem, and for each weight that spanned modules its update node's id
        with the modules sharing it.
    """
    c = problem.constraints
    parts: list[tuple[str, ...]] = []
    shared: list[tuple[str, list[str]]] = []
    index = problem.node_index
    for group in c.colocate:
        by_mod: dict[str, list[str]] = {}
        for nid in group:
            m = modules[index[nid]]
            by_mod.setdefault("\0" if m is None else m, []).append(nid)
        real = sorted(k for k in by_mod if k != "\0")
        owner = next((n for n in group if n.startswith("update.")), None)
        if owner is None or len(real) < 2:
            parts.append(tuple(group))
            continue
        shared.append((owner, real))
        if "\0" in by_mod:  # members outside every module stay with the first module's part
            by_mod[real[0]] += by_mod.pop("\0")
        parts += [tuple(v) for v in by_mod.values() if len(v) > 1]
    if not shared:
        return problem, []
    relaxed = problem.with_devices(list(problem.devices), links=problem.links,
                                   constraints=Constraints(pin=dict(c.pin), forbid=dict(c.forbid),
                                                           colocate=tuple(parts)))
    return relaxed, shared


def stage_candidates(problem: Problem, units: Units, modules: list[str | None], *,
                     n_cuts: int = 24, weight: np.ndarray | None = None) -> list[np.ndarray]:
    """Device per unit for contiguous stages, one candidate per balance target.

    Units run in the order their modules first run; stage ``s`` goes to device ``s``. For
    each target stage weight between the mean share and the whole, units are packed greedily
    (a stage closes before the unit that would push it past the target), so the candidates
    use from all the devices down to one; duplicates are dropped.

    Parameters
    ----------
    problem : Problem
        The problem (its devices are the stages' devices).
    units : Units
        The modules merged by colocation.
    modules : list of str or None
        The module of every node.
    n_cuts : int
        How many balance targets to try.
    weight : numpy.ndarray, optional
        What a stage balances, per node (default: run time; ``problem.memory`` balances memory).

    Returns
    -------
    list of numpy.ndarray
        A device index per unit, one array per distinct candidate.
    """
    order = unit_order(problem, units, modules)
    w = problem.time if weight is None else np.asarray(weight, dtype=np.float64)
    time = np.array([float(w[units.members[u]].sum()) for u in order])
    total, k = float(time.sum()), problem.n_devices
    if k == 0 or units.n == 0:
        return []
    targets = np.linspace(total / k, total, n_cuts) if total > 0 else np.array([0.0])
    seen: set[tuple[int, ...]] = set()
    out: list[np.ndarray] = []
    for target in targets.tolist():
        dev, stage, acc = np.zeros(units.n, dtype=np.int64), 0, 0.0
        for pos, u in enumerate(order):
            if acc > 0 and acc + time[pos] > target * (1 + 1e-12) and stage + 1 < k:
                stage, acc = stage + 1, 0.0
            dev[u] = stage
            acc += time[pos]
        key = tuple(dev.tolist())
        if key not in seen:
            seen.add(key)
            out.append(dev)
    return out


def unit_order(problem: Problem, units: Units, modules: list[str | None]) -> list[int]:
    """Units in the order their modules first run (ties by key): the order of pipeline stages.

    Parameters
    ----------
    problem : Problem
        The problem (its node order is program order).
    units : Units
        The modules merged by colocation.
    modules : list of str or None
        The module of every node.

    Returns
    -------
    list of int
        Unit indices.
    """
    rank = first_seen(problem, modules)
    return sorted(range(units.n), key=lambda u: (min(rank.get(m, 1 << 60) for m in _unit_modules(units, u, modules)),
                                                 units.keys[u]))


def _unit_modules(units: Units, u: int, modules: list[str | None]) -> set[str]:
    return {modules[v] for v in units.members[u].tolist() if modules[v] is not None} or {units.keys[u]}


#: Most contiguous splits :func:`module_plan` scores one by one (beyond, balanced candidates).
EXHAUSTIVE = 256


def all_blocks(n: int, k: int, limit: int) -> list[np.ndarray] | None:
    """Every split of ``n`` units in order into at most ``k`` contiguous blocks, block ``s`` on device ``s``.

    Parameters
    ----------
    n, k : int
        Units and devices.
    limit : int
        Most splits to list.

    Returns
    -------
    list of numpy.ndarray or None
        Device per position in the order, one array per split; None when there are more than ``limit``.
    """
    from itertools import combinations
    from math import comb

    if n == 0 or k == 0:
        return [np.zeros(n, dtype=np.int64)] if n == 0 else None
    if sum(comb(n - 1, j) for j in range(min(k, n))) > limit:
        return None
    out = []
    for j in range(min(k, n)):
        for cuts in combinations(range(1, n), j):
            dev = np.zeros(n, dtype=np.int64)
            for c in cuts:
                dev[c:] += 1
            out.append(dev)
    return out
