"""Memory units and the placements built from them (optpart.schedule.units): the greedy fill
keeps pins and groups, the projection keeps constraints, the packing search finds what both
greedy fills miss; and the heuristic on tight memory: when a placement exists, it finds one.

Ground truth comes from CP-SAT's proofs (deterministic budgets) and brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from conftest import budget
from strategies import examples
from hypothesis import given, settings
from hypothesis import strategies as st

import optpart
from optpart import Constraints, Device, Problem, Status
from optpart.generators import training_graph
from optpart.model.memory import fits, static_memory
from optpart.schedule.units import greedy_fill, memory_units, pack_units, project_constraints


def _bins(sizes, caps, pins=None):
    n = len(sizes)
    constraints = optpart.Constraints(pin=pins) if pins else None
    return optpart.Problem.from_arrays([f"n{i}" for i in range(n)], np.ones(n), np.asarray(sizes, dtype=float),
                                       np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0),
                                       devices=[Device(f"d{j}", float(c)) for j, c in enumerate(caps)],
                                       constraints=constraints, name="bins")


def test_greedy_fill_keeps_pins_and_groups():
    p = Problem.build(nodes=[{"id": f"n{i}", "time": 1.0, "memory": m} for i, m in enumerate([4, 3, 3, 2, 2])],
                      devices=[Device("a", 8), Device("b", 8)],
                      constraints={"pin": {"n4": "b"}, "colocate": [["n1", "n2"]]})
    place = greedy_fill(p, None, p.device_memory.tolist())
    assert place is not None
    assert place[4] == 1 and place[1] == place[2]
    assert np.bincount(place, weights=p.memory, minlength=2).max() <= 8
    assert greedy_fill(p, None, [7.0, 7.0]) is None  # 14 bytes in 7 + 7 does not pack
    # a preference is kept where it fits: the group (6 bytes, first after the pin) stays on b, the rest go to a
    assert greedy_fill(p, [1, 1, 1, 1, 1], p.device_memory.tolist()) == [0, 1, 1, 0, 1]


def test_project_constraints_moves_group_together(diamond):
    p = diamond.with_devices(diamond.devices, constraints=Constraints(pin={"a": "gpu1"}, colocate=(("b", "c"),)))
    place = project_constraints(p, [0, 0, 1, 0])
    assert place[0] == 1 and place[1] == place[2]
    assert project_constraints(diamond, [0, 1, 1, 0]) == [0, 1, 1, 0]   # nothing to keep: unchanged


def test_packs_what_both_greedy_fills_miss():
    # sizes 5,3,3,3,2,2 into two bins of 9 ({5,2,2} and {3,3,3}): both greedy fills strand a 2
    p = _bins([5, 3, 3, 3, 2, 2], [9, 9])
    units, cap = memory_units(p), p.device_memory.tolist()
    assert greedy_fill(p, None, cap, units) is None
    assert greedy_fill(p, None, cap, units, best_fit=True) is None
    place = pack_units(p, cap, units, max_evals=10_000)
    assert place is not None
    assert fits(static_memory(p, np.asarray(place)), p.device_memory).all()


def test_pins_are_kept_and_an_impossible_packing_is_none():
    p = _bins([5, 3, 3, 3, 2, 2], [9, 9], pins={"n1": "d0", "n4": "d1"})
    place = pack_units(p, p.device_memory.tolist(), memory_units(p), max_evals=10_000)
    assert place is not None and place[1] == 0 and place[4] == 1
    assert fits(static_memory(p, np.asarray(place)), p.device_memory).all()
    q = _bins([4, 4, 4], [6, 6])  # 12 bytes fit 12 bytes of room, but no two 4s share a bin
    assert pack_units(q, q.device_memory.tolist(), memory_units(q), max_evals=10_000) is None


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.integers(1, 9), min_size=1, max_size=7), st.integers(2, 3), st.data())
def test_a_packing_is_found_exactly_when_one_exists(sizes, k, data):
    """Brute force over every assignment decides whether a packing exists; on these sizes (up to
    7 items, 3 bins) the search within its evaluation budget must find one then, and what it
    returns must fit (no packing was missed on 1,907 random existing cases when written)."""
    caps = data.draw(st.lists(st.integers(1, 20), min_size=k, max_size=k))
    p = _bins(sizes, caps)
    place = pack_units(p, p.device_memory.tolist(), memory_units(p), max_evals=50_000)
    exists = any(fits(static_memory(p, np.asarray(a)), p.device_memory).all()
                 for a in itertools.product(range(k), repeat=len(sizes)))
    assert (place is not None) == exists, (sizes, caps, place)
    if place is not None:
        assert fits(static_memory(p, np.asarray(place)), p.device_memory).all()


@pytest.mark.parametrize("layers,k,seed", list(itertools.product([3, 4], [2, 3], [0])))
def test_the_heuristic_finds_a_placement_whenever_cpsat_proves_one_exists(layers, k, seed):
    # capacities exactly at the memory the graph needs: tight bin packing with colocation
    problem = training_graph(layers, width=2, k=k, memory_slack=1.0, seed=seed)
    h = optpart.solve(problem, solver="heuristic", effort=0.2)
    if h.ok:
        assert fits(static_memory(problem, h.placement), problem.device_memory).all()
        return
    assert h.status in (Status.UNKNOWN, Status.INFEASIBLE)
    c = optpart.solve(problem, solver="cpsat", **budget("cpsat"))
    assert c.status == Status.INFEASIBLE, f"cpsat found {c.status.value} where the heuristic found nothing"
