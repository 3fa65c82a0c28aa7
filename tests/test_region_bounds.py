"""The critical path with its fork-join regions solved exactly (``solvers/exact/region_bounds.py``).

The bound must never exceed a known optimum: brute force on random tiny problems (static
and peak memory, pins, forbids, colocation, speeds, per-pair links), planted optima and the
published STG optima (skipped, saying so, without ``../shared/data``). On a shortcut whose
transfers cost more than running it beside the path it lifts the critical path to the
optimum; it is reproducible and a zero budget gives the critical path back.
"""

from __future__ import annotations

import numpy as np
import pytest

import optpart
from optpart import Device
from optpart.generators import planted_dag
from optpart.model.devices import Links
from optpart.model.paths import critical_path_nodes
from optpart.solvers.exact.region_bounds import path_regions, region_path_bound

from oracle import brute_force
from test_cpsat_peak import _random_split, brute_force_peak
from test_exact import feasible_random_problem, stg_problems

EPS = 1e-9


# 1305: two slow devices alike and one fast one; fixing the fork to device 0 (as if all
# three were interchangeable) once gave 9.26 against the optimum 5.87.
@pytest.mark.parametrize("seed", [*range(80), 1305])
def test_region_bound_never_exceeds_the_brute_force_optimum(seed):
    p, best = feasible_random_problem(seed)
    assert region_path_bound(p) <= best * (1 + EPS) + EPS


@pytest.mark.parametrize("seed", range(30))
def test_region_bound_never_exceeds_the_peak_optimum(seed):
    p = _random_split(seed, 5, [2, 3], integral_only=True)
    best = brute_force_peak(p)
    if np.isfinite(best):
        assert region_path_bound(p) <= best * (1 + EPS) + EPS


def test_region_bound_lifts_random_problems_somewhere():
    # The brute-force comparisons above are not vacuous: on some of those problems the
    # regions lift the communication-free critical path.
    lifted = 0
    for seed in range(80):
        p, _ = feasible_random_problem(seed)
        lifted += region_path_bound(p) > optpart.critical_path_bound(p) * (1 + 1e-6)
    assert lifted >= 3


def _shortcut(nbytes: float) -> optpart.Problem:
    """A residual block: a -> b -> c -> d on the path, a -> x -> d a shortcut of 2 s."""
    ids = ["a", "b", "c", "x", "d"]
    time_s = np.array([1.0, 3.0, 3.0, 2.0, 1.0])
    src, dst = [0, 1, 2, 0, 3], [1, 2, 4, 3, 4]
    return optpart.Problem.from_arrays(ids, time_s, np.ones(5), src, dst, np.full(5, nbytes),
                                       devices=[Device("g0", 1e9), Device("g1", 1e9)], links=Links(0.0, 1.0),
                                       name="shortcut")


def test_region_bound_serialises_a_shortcut_that_costs_more_to_move():
    # Path a-b-c-d = 8 s. Running x elsewhere costs 4 + 2 + 4 = 10 s between a and d, more
    # than the 6 s of b and c; beside them it adds its 2 s: the optimum is 10 s.
    p = _shortcut(4.0)
    best, _, _ = brute_force(p)
    assert best == pytest.approx(10.0)
    assert optpart.critical_path_bound(p) == pytest.approx(8.0)
    assert region_path_bound(p) == pytest.approx(10.0, rel=1e-5)
    # Cheap transfers: x runs beside the path, the critical path is the optimum and the bound.
    cheap = _shortcut(0.5)
    assert brute_force(cheap)[0] == pytest.approx(8.0)
    assert region_path_bound(cheap) == pytest.approx(8.0, rel=1e-5)


def test_regions_are_the_tightest_fork_for_each_join():
    p = _shortcut(4.0)
    path, _ = critical_path_nodes(p, p.time)
    regions = path_regions(p, path)
    assert [(i, j) for i, j, _ in regions] == [(0, 3)]
    assert sorted(p.node_ids[v] for v in regions[0][2]) == ["a", "b", "c", "d", "x"]


def test_region_bound_is_reproducible_and_a_zero_budget_gives_the_critical_path():
    p = planted_dag(40, 3, ccr=1.0, seed=0)
    assert region_path_bound(p) == region_path_bound(p)
    assert region_path_bound(p, budget_dtime=0.0) == pytest.approx(optpart.critical_path_bound(p))


@pytest.mark.parametrize("seed", range(4))
def test_region_bound_stays_below_planted_optima(seed):
    p = planted_dag(40, 3, ccr=1.0, seed=seed)
    assert region_path_bound(p) <= p.meta["optimum"] * (1 + EPS) + EPS


@pytest.mark.parametrize("procs", [2, 16])
def test_region_bound_stays_below_published_stg_optima(procs):
    cases = stg_problems(procs, 40)
    assert cases
    for rel, problem, opt in cases:
        assert region_path_bound(problem) <= opt * (1 + EPS), rel
