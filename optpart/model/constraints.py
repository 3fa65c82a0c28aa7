"""Constraints: pins, colocation groups (one union-find) and forbidden devices.

:class:`Constraints` names nodes and devices by id; :func:`resolve_constraints` turns
them into the integer form solvers read (``pin`` per node, colocation ``groups`` with
``group_of`` per node, ``forbidden`` node -> device set) and :func:`allowed_mask` into the
``n x k`` mask "may node ``v`` run on device ``d``".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain, repeat
from typing import Mapping, NamedTuple, Sequence

import numpy as np

from ..errors import ProblemError

__all__ = ["Constraints", "Resolved", "resolve_constraints", "allowed_mask", "best_allowed",
           "colocation_groups", "constraint_devices"]


@dataclass(frozen=True)
class Constraints:
    """Pins (node -> device), colocation groups (nodes on one device) and forbidden devices."""

    pin: Mapping[str, str] = field(default_factory=dict)
    colocate: tuple[tuple[str, ...], ...] = ()
    forbid: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def is_empty(self) -> bool:
        """True when no pin, colocation group or forbidden device is given.

        Returns
        -------
        bool
        """
        return not (self.pin or self.colocate or self.forbid)


def constraint_devices(c: Constraints) -> set[str]:
    """Every device id the constraints name.

    Parameters
    ----------
    c : Constraints
        The constraints.

    Returns
    -------
    set of str
    """
    out = set(c.pin.values())
    for devs in c.forbid.values():
        out.update(devs)
    return out


class Resolved(NamedTuple):
    """Constraints as integer arrays: ``pin`` (-1 free), ``forbidden``, ``group_of`` (-1 free), ``groups``."""

    pin: np.ndarray
    forbidden: dict[int, frozenset[int]]
    group_of: np.ndarray
    groups: list[np.ndarray]


def resolve_constraints(c: Constraints, node_ids: Sequence[str], node_index: Mapping[str, int],
                        device_ids: Sequence[str], device_index: Mapping[str, int]) -> Resolved:
    """Resolve ids to indices and check the constraints agree with each other.

    Overlapping colocation groups merge, so ``group_of`` is a partition; groups are ordered
    by their smallest node index, members sorted. Pins inside a group must agree and the
    group inherits the pin; a node pinned to a device it is forbidden on is an error.

    Parameters
    ----------
    c : Constraints
        The constraints, by id.
    node_ids, node_index : sequence and mapping
        The node ids and their indices.
    device_ids, device_index : sequence and mapping
        The device ids and their indices.

    Returns
    -------
    Resolved
        Pins, forbidden devices and colocation groups as indices.
    """
    n, k = len(node_ids), len(device_ids)
    pin = np.full(n, -1, dtype=np.int64)
    forbidden: dict[int, frozenset[int]] = {}
    if (c.pin or c.forbid) and k == 0:
        raise ProblemError("pin/forbid constraints name devices, but the problem has no devices")

    def node(nid: str, what: str) -> int:
        if nid not in node_index:
            raise ProblemError(f"{what} names unknown node '{nid}'")
        return node_index[nid]

    def device(did: str, what: str) -> int:
        if did not in device_index:
            raise ProblemError(f"{what} names unknown device '{did}'; devices: {', '.join(device_ids)}")
        return device_index[did]

    for nid, did in c.pin.items():
        pin[node(nid, "pin")] = device(did, f"pin of node '{nid}'")
    for nid, dids in c.forbid.items():
        forbidden[node(nid, "forbid")] = frozenset(device(d, f"forbid of node '{nid}'") for d in dids)
    group_of = np.full(n, -1, dtype=np.int64)
    groups = colocation_groups(c.colocate, node_index, n) if c.colocate else []
    if groups:  # one scatter, not one per group (10^5 groups in big graphs)
        sizes = np.fromiter(map(len, groups), dtype=np.int64, count=len(groups))
        group_of[np.concatenate(groups)] = np.repeat(np.arange(len(groups)), sizes)
    if c.pin and groups:
        for gi in np.unique(group_of[(pin >= 0) & (group_of >= 0)]).tolist():
            members = groups[gi]
            pins = {int(d) for d in pin[members] if d >= 0}
            if len(pins) > 1:
                names = sorted(device_ids[d] for d in pins)
                raise ProblemError(f"colocation group of node '{node_ids[members[0]]}' is pinned to "
                                   f"several devices: {', '.join(names)}")
            pin[members] = pins.pop()
    for v, devs in forbidden.items():
        if pin[v] >= 0 and pin[v] in devs:
            raise ProblemError(f"node '{node_ids[v]}' is pinned to device '{device_ids[pin[v]]}' "
                               "that it is forbidden on")
    return Resolved(pin, forbidden, group_of, groups)


def allowed_mask(n: int, k: int, pin: np.ndarray, forbidden: Mapping[int, frozenset[int]],
                 group_of: np.ndarray, groups: Sequence[np.ndarray]) -> np.ndarray:
    """``n x k`` boolean mask: may node ``v`` run on device ``d`` (pins, forbids and groups applied).

    Parameters
    ----------
    n, k : int
        Node and device counts.
    pin, forbidden, group_of, groups
        The resolved constraints (:class:`Resolved`).

    Returns
    -------
    numpy.ndarray of bool, shape (n, k)
    """
    mask = np.ones((n, k), dtype=bool)
    pinned = np.flatnonzero(pin >= 0)
    mask[pinned] = False
    mask[pinned, pin[pinned]] = True
    for v, devs in forbidden.items():
        mask[v, list(devs)] = False
    # Only a group with a pinned or forbidden member changes (AND of all-True rows is a no-op).
    restricted = np.concatenate([pinned, np.fromiter(forbidden, dtype=np.int64)])
    touched = np.unique(group_of[restricted]) if len(groups) else restricted[:0]
    for gi in touched[touched >= 0].tolist():
        members = groups[gi]
        mask[members] = mask[members].all(axis=0)
    mask.flags.writeable = False
    return mask


def best_allowed(allowed: np.ndarray, value: np.ndarray, none: float) -> np.ndarray:
    """Per row of the ``n x k`` mask ``allowed``: the largest ``value[d]`` over its allowed
    columns, or ``none`` when no column is allowed.

    Rows allowed everywhere (most nodes) take ``value.max()``; only the other rows are
    searched, by a boolean ``argmax`` over the columns sorted by value. No ``n x k`` float
    matrix (512 MB at 10^6 nodes on 64 devices).

    Parameters
    ----------
    allowed : numpy.ndarray of bool, shape (n, k)
        ``allowed[v, d]``: node ``v`` may run on device ``d``.
    value : numpy.ndarray, shape (k,)
        A per-device value (a capacity in bytes, a speed).
    none : float
        The answer for a row with no allowed device.

    Returns
    -------
    numpy.ndarray of float64, shape (n,)
        Per node, the best value among the devices it may use.
    """
    n, k = allowed.shape
    out = np.full(n, float(value.max()) if k else none)
    rows = np.flatnonzero(~allowed.all(axis=1))
    if rows.size:
        order = np.argsort(-value, kind="stable")
        ranked = allowed[rows][:, order]
        first = ranked.argmax(axis=1)
        best = value[order][first].astype(np.float64)
        best[~ranked[np.arange(rows.size), first]] = none
        out[rows] = best
    return out


def colocation_groups(colocate: Sequence[Sequence[str]], index: Mapping[str, int], n: int) -> list[np.ndarray]:
    """Colocation groups as sorted index arrays, overlapping groups merged, ordered by their
    smallest member; groups of one node dropped.

    Disjoint groups (the common case: one group per variable) take a vectorised path;
    overlapping ones a union-find (Tarjan 1975) over the merged nodes.

    Parameters
    ----------
    colocate : sequence of sequence of str
        The ``colocate`` constraint: groups of node ids that must share a device.
    index : mapping of str to int
        Node id to node index.
    n : int
        The node count.

    Returns
    -------
    list of numpy.ndarray of int64
        One sorted index array per merged group of two or more nodes.

    Raises
    ------
    ProblemError
        When a group names an unknown node.
    """
    sizes = np.fromiter(map(len, colocate), dtype=np.int64, count=len(colocate))
    flat_ids = list(chain.from_iterable(colocate))
    flat = np.fromiter(map(index.get, flat_ids, repeat(-1)), dtype=np.int64, count=len(flat_ids))
    if (flat < 0).any():
        raise ProblemError(f"colocate names unknown node '{flat_ids[int(np.flatnonzero(flat < 0)[0])]}'")
    gid = np.repeat(np.arange(sizes.size), sizes)
    if flat.size == 0:
        return []
    if np.bincount(flat, minlength=n).max() <= 1:  # disjoint groups, no repeats
        keep = sizes[gid] >= 2
        flat, gid = flat[keep], gid[keep]
        if flat.size == 0:
            return []
        order = np.lexsort((flat, gid))
        flat, gid = flat[order], gid[order]
        starts = np.flatnonzero(np.r_[True, gid[1:] != gid[:-1]])
        bounds = np.r_[starts, flat.size].tolist()
        order = np.argsort(flat[starts], kind="stable").tolist()
        return [flat[bounds[i]:bounds[i + 1]] for i in order]
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    bounds = np.r_[0, np.cumsum(sizes)].tolist()
    members_all = flat.tolist()
    for i in range(sizes.size):
        members = members_all[bounds[i]:bounds[i + 1]]
        for v in members[1:]:
            ra, rb = find(members[0]), find(v)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    roots: dict[int, list[int]] = {}
    for v in sorted(set(members_all)):
        roots.setdefault(find(v), []).append(v)
    out = []
    for r in sorted(roots):
        if len(roots[r]) >= 2:
            out.append(np.array(roots[r], dtype=np.int64))
    return out
