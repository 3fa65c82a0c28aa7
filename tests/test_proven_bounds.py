"""The energetic bound (``optpart.bounds.window_energy``) and the exact solvers' best bound
(``solvers/exact/proven_bounds.py``) never exceed a known optimum.

Brute force on random tiny problems (static and peak memory, pins, forbids, colocation,
speeds, per-pair links), planted optima; the energetic bound lifts the work bound where work
waits behind a long head, and ``cpsat`` on a large graph reports the best part.
"""

from __future__ import annotations

import numpy as np
import pytest

import optpart
from optpart import Device
from optpart.bounds import energetic_bound, window_energy
from optpart.generators import planted_dag
from optpart.model.devices import Links
from optpart.solvers.exact.proven_bounds import bound_parts, proven_bound

from oracle import brute_force
from test_cpsat_peak import _random_split, brute_force_peak
from test_exact import feasible_random_problem

EPS = 1e-9


@pytest.mark.parametrize("seed", [*range(60), 1305])
def test_every_part_stays_below_the_static_optimum(seed):
    p, best = feasible_random_problem(seed)
    assert energetic_bound(p) <= best * (1 + EPS) + EPS
    parts = bound_parts(p, "static", region_dtime=1.0)
    assert all(v <= best * (1 + EPS) + EPS for v in parts.values()), (parts, best)


@pytest.mark.parametrize("seed", range(30))
def test_every_part_stays_below_the_peak_optimum(seed):
    p = _random_split(seed, 5, [2, 3], integral_only=True)
    best = brute_force_peak(p)
    if np.isfinite(best):
        parts = bound_parts(p, "peak", region_dtime=1.0)
        assert all(v <= best * (1 + EPS) + EPS for v in parts.values()), (parts, best)


@pytest.mark.parametrize("seed", range(4))
def test_proven_bound_stays_below_planted_optima(seed):
    p = planted_dag(60, 4, ccr=1.0, seed=seed)
    for model in ("static", "peak"):
        assert proven_bound(p, model, region_dtime=2.0) <= p.meta["optimum"] * (1 + EPS) + EPS


def _chain_then_fan(width: int) -> optpart.Problem:
    """A chain of 3 unit nodes feeding ``width`` unit nodes, on 2 devices with free links."""
    n = 3 + width
    src = [0, 1] + [2] * width
    dst = [1, 2] + list(range(3, n))
    return optpart.Problem.from_arrays([f"v{i}" for i in range(n)], np.ones(n), np.ones(n), src, dst,
                                       np.zeros(n - 1), devices=[Device("a", 1e9), Device("b", 1e9)],
                                       links=Links(0.0, np.inf), name="chain-fan")


def test_energetic_bound_counts_the_work_behind_a_long_head():
    # Nothing of the fan can start before 3; its 4 s on 2 devices take 2 more: 5, the optimum,
    # where the critical path says 4 and the work bound 3.5.
    p = _chain_then_fan(4)
    assert brute_force(p)[0] == pytest.approx(5.0)
    assert optpart.lower_bound(p) == pytest.approx(4.0)
    assert energetic_bound(p) == pytest.approx(5.0)


def test_window_energy_needs_work_inside_the_window():
    # One node of 1 s: windows past its end hold no work and are not counted (they would
    # claim any h), so the bound stays between the work bound and the node's length.
    assert 0.5 <= window_energy([0.0], [0.0], [1.0], 2) <= 1.0
    assert window_energy([0.0, 5.0], [5.0, 0.0], [1.0, 1.0], 2) <= 6.0
    assert window_energy([], [], [], 2) == 0.0


def test_parts_are_named_and_the_best_is_reported():
    p = planted_dag(40, 3, ccr=1.0, seed=1)
    stats: dict = {}
    best = proven_bound(p, "peak", stats=stats)
    assert set(stats["bounds"]) == {"generic", "comm_path", "energetic", "memory_path", "regions"}
    assert best == max(stats["bounds"].values())
    assert best >= optpart.lower_bound(p)


def test_cpsat_on_a_large_graph_reports_the_best_part_and_a_valid_start():
    from optpart.generators import large_training_graph
    p = large_training_graph(700, k=4, seed=3)
    assert p.n_nodes >= 600  # the windowed path
    r = optpart.solve(p, "cpsat", memory_model="peak", deterministic_time=0.2, seed=0)
    optpart.check(p, r)
    parts = r.stats["bounds"]
    assert set(parts) == {"generic", "comm_path", "energetic", "memory_path", "regions"}
    assert r.lower_bound == pytest.approx(min(max(parts.values()), r.makespan))
    assert r.lower_bound >= optpart.lower_bound(p)
    assert r.stats["start_from"] in ("heuristic", "stage seed", "deep heuristic")
    assert r.makespan <= r.stats["heuristic_makespan"] * (1 + 1e-12)
