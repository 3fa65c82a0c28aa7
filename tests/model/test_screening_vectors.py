"""The vectorised paths of the final check and the screening agree with plain per-node references."""

from __future__ import annotations

import numpy as np

import optpart
from optpart import Device, Problem
from optpart.evaluate import violations
from optpart.model.constraints import best_allowed


def test_best_allowed_matches_a_dense_reference():
    rng = np.random.default_rng(0)
    for k in (1, 3, 8):
        allowed = rng.random((200, k)) < 0.6
        allowed[:20] = True      # rows allowed everywhere (the fast path)
        allowed[20:30] = False   # rows allowed nowhere
        value = rng.choice([1.0, 2.0, 5.0, np.inf], size=k)
        ref = np.where(allowed, value[None, :], -1.0).max(axis=1)
        assert np.array_equal(best_allowed(allowed, value, -1.0), ref)


def _grouped(n_groups: int) -> Problem:
    nodes = [{"id": f"n{i}", "time": 1, "memory": 1} for i in range(3 * n_groups)]
    groups = [[f"n{3 * g}", f"n{3 * g + 1}", f"n{3 * g + 2}"] for g in range(n_groups)]
    return Problem.build(nodes=nodes, devices=[Device("g0", 1e9), Device("g1", 1e9)],
                         constraints={"colocate": groups})


def test_check_names_exactly_the_split_groups_in_order():
    p = _grouped(6)
    placement = np.zeros(p.n_nodes, dtype=np.int64)
    placement[[4, 17]] = 1   # splits group 1 (n3-n5) and group 5 (n15-n17)
    placement[[6, 7, 8]] = 1  # group 2 moved whole: not split
    found = [v for v in violations(p, optpart.evaluate(p, placement)) if "split over" in v]
    assert len(found) == 2
    assert "node 'n3'" in found[0] and "node 'n15'" in found[1]


def test_screen_reports_the_first_group_that_fits_no_device():
    nodes = [{"id": f"n{i}", "time": 1, "memory": 4} for i in range(6)]
    p = Problem.build(nodes=nodes, devices=[Device("g0", 10), Device("g1", 10)],
                      constraints={"colocate": [["n0", "n1"], ["n2", "n3", "n4"], ["n5"]]})
    reason = p.infeasibility("static")
    assert reason is not None and "colocation group of node 'n2' (3 nodes)" in reason


def test_allowed_mask_matches_the_per_group_reference():
    rng = np.random.default_rng(1)
    n, k = 60, 4
    nodes = [{"id": f"n{i}", "time": 1, "memory": 1} for i in range(n)]
    perm = rng.permutation(n).tolist()
    groups = [[f"n{v}" for v in perm[i:i + 3]] for i in range(0, 30, 3)]
    pin = {f"n{v}": f"g{rng.integers(k)}" for v in perm[30:36]}
    pin[f"n{perm[0]}"] = "g1"   # a pinned member inside a group
    forbid = {f"n{v}": [f"g{rng.integers(k)}"] for v in perm[36:45] + [perm[4]]}
    p = Problem.build(nodes=nodes, devices=[Device(f"g{d}", 1e9) for d in range(k)],
                      constraints={"pin": pin, "forbid": forbid, "colocate": groups})
    ref = np.ones((n, k), dtype=bool)
    pinned = np.flatnonzero(p.pin >= 0)
    ref[pinned] = False
    ref[pinned, p.pin[pinned]] = True
    for v, devs in p.forbidden.items():
        ref[v, list(devs)] = False
    for members in p.groups:
        ref[members] = ref[members].all(axis=0)
    assert np.array_equal(p.allowed, ref)
    assert not p.allowed.all()  # the constraints did restrict something
