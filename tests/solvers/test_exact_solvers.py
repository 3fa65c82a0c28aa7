"""The exact solvers ``cpsat`` and ``milp`` against a brute-force oracle and published optima.

Every result goes through :func:`optpart.check`; optimal makespans are compared with the
brute force of ``tests/oracle.py`` on random problems of at most 7 nodes and 3 devices
covering tight memory, pins, forbidden devices, colocation, heterogeneous speeds,
per-pair links and non-integral times.
"""

from __future__ import annotations


import numpy as np
import pytest

import optpart
from conftest import budget, shared_data
from optpart import Device, Status
from optpart.generators import layered_dag
from optpart.solvers.exact.grid import device_classes, durations, relabel, time_grid, transfer_table

from oracle import brute_force
from exact_cases import random_problem, stg_optimum_bounds, stg_problems

EXACT = ["cpsat", "milp"]


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))


@pytest.mark.parametrize("seed", range(120))
def test_exact_solvers_agree_with_brute_force(seed):
    problem = random_problem(seed)
    best, _, _ = brute_force(problem)
    for name in EXACT:
        r = optpart.solve(problem, name, seed=0, deterministic=True, **budget(name))
        if not np.isfinite(best):
            assert r.status is Status.INFEASIBLE, (name, r)
            assert r.placement is None and r.message
            continue
        optpart.check(problem, r)
        assert r.status is Status.OPTIMAL, (name, r, r.message)
        assert _close(r.makespan, best), (name, r.makespan, best)
        assert r.lower_bound <= best * (1 + 1e-9) + 1e-9


def test_feature_mix_is_covered():
    """The random cases above really exercise every feature (guards the generator)."""
    probs = [random_problem(s) for s in range(120)]
    assert any(p.groups for p in probs)
    assert any((p.pin >= 0).any() for p in probs)
    assert any(p.forbidden for p in probs)
    assert any(len(set(p.device_speed.tolist())) > 1 for p in probs)
    assert any(p.links.pairs for p in probs)
    assert any(np.isfinite(p.device_memory).all() and p.memory.sum() > p.device_memory.min() for p in probs)
    assert any(not time_grid(durations(p), transfer_table(p), 1.0).exact for p in probs)


def test_brute_force_matches_a_hand_computed_optimum(diamond):
    # All on one device: 1 + 2 + 3 + 1 = 7. Better: a, c on gpu0 (0-1, 1-4); b, d on gpu1:
    # b after a's transfer 1 + 1.5 = 2.5 until 4.5, d after c's transfer 4 + 1.5 = 5.5 until 6.5.
    best, place, start = brute_force(diamond)
    assert best == pytest.approx(6.5)
    r = optpart.evaluate(diamond, place, start)
    optpart.check(diamond, r)


@pytest.mark.parametrize("name", EXACT)
def test_no_fit_is_infeasible(name):
    # Each node fits a device alone, but no two nodes fit together and there are three nodes
    # on two devices: infeasible, which only the solver's search can prove.
    p = optpart.Problem.build(
        nodes=[{"id": f"n{i}", "time": 1.0, "memory": 6} for i in range(3)],
        devices=[Device("a", 10), Device("b", 10)])
    assert p.infeasibility() is None
    r = optpart.solve(p, name, **budget(name))
    assert r.status is Status.INFEASIBLE and r.placement is None and "no placement" in r.message


@pytest.mark.parametrize("name", EXACT)
def test_pre_screened_infeasibility_names_the_node(name):
    p = optpart.Problem.build(nodes=[{"id": "big", "time": 1.0, "memory": 20}],
                              devices=[Device("a", 10), Device("b", 10)])
    r = optpart.solve(p, name, **budget(name))
    assert r.status is Status.INFEASIBLE and "big" in r.message


@pytest.mark.parametrize("name", EXACT)
def test_deterministic_runs_are_identical(name):
    p = layered_dag(12, k=3, ccr=1.0, memory_slack=1.3, seed=7)
    a = optpart.solve(p, name, seed=3, deterministic=True, **budget(name))
    b = optpart.solve(p, name, seed=3, deterministic=True, **budget(name))
    optpart.check(p, a)
    assert a.status is b.status is Status.OPTIMAL
    assert np.array_equal(a.placement, b.placement) and np.array_equal(a.start, b.start)


@pytest.mark.parametrize("name", EXACT)
def test_a_small_deterministic_budget_still_gives_a_valid_answer_with_a_bound(name):
    """A search cut short by a deterministic budget (CP-SAT 0.2 deterministic s, MILP one
    branch-and-bound node) on a graph whose model is built: the answer is valid, never
    ``unknown``, its bound sound and its gap consistent. (How long calls take per time limit
    is measured by benchmarks/time_limits.py, not asserted here.)"""
    if name == "cpsat":
        p, opts = layered_dag(60, k=4, ccr=1.0, memory_slack=1.2, seed=11), {"deterministic_time": 0.2}
    else:
        p, opts = layered_dag(26, k=4, ccr=1.0, memory_slack=1.2, seed=1), {"max_nodes": 1}
    r = optpart.solve(p, name, time_limit=600, seed=0, **opts)
    optpart.check(p, r)
    assert r.status in (Status.FEASIBLE, Status.OPTIMAL)
    assert r.stats["stop_reason"] in ("proven optimal", "deterministic time limit", "work limit")
    assert optpart.lower_bound(p) - 1e-9 <= r.lower_bound <= r.makespan * (1 + 1e-9)
    if r.status is Status.FEASIBLE:
        assert r.gap == pytest.approx((r.makespan - r.lower_bound) / r.makespan)
    else:
        assert r.gap <= 1e-6


def test_milp_cbc_backend_agrees():
    for seed in (1, 5, 9):
        p = random_problem(seed)
        best, _, _ = brute_force(p)
        r = optpart.solve(p, "milp", backend="cbc", deterministic=True, **budget("milp"))
        if np.isfinite(best):
            optpart.check(p, r)
            assert r.status is Status.OPTIMAL and _close(r.makespan, best)


@pytest.mark.parametrize("name", EXACT)
def test_unknown_option_and_bad_values_are_errors(name):
    p = layered_dag(5, k=2, seed=0)
    with pytest.raises(optpart.SolverError, match="no option 'bogus'"):
        optpart.solve(p, name, bogus=1)
    bad = {"cpsat": {"workers": 0}, "milp": {"backend": "gurobi"}}[name]
    with pytest.raises(optpart.SolverError, match=list(bad)[0]):
        optpart.solve(p, name, **bad)


def test_cpsat_peak_memory_with_and_without_the_split():
    p = layered_dag(8, k=2, memory_slack=1.2, seed=2)
    r = optpart.solve(p, "cpsat", memory_model="peak", **budget("cpsat"))
    assert r.memory_model == "peak"
    optpart.check(p, r)  # the checker verifies peak memory
    split = optpart.Problem.build(
        nodes=[{"id": "a", "time": 1, "param_bytes": 1, "output_bytes": 2, "temp_bytes": 0}],
        devices=[Device("x", 10)])
    r = optpart.solve(split, "cpsat", memory_model="peak", **budget("cpsat"))
    assert r.status is optpart.Status.OPTIMAL and r.memory_model == "peak" and r.makespan == 1.0
    optpart.check(split, r)


def test_hint_is_used_and_symmetric_devices_are_detected():
    p = layered_dag(10, k=3, ccr=1.0, seed=3)
    assert device_classes(p) == [[0, 1, 2]]
    hint = np.array([2] * 5 + [1] * 5)
    relabelled = relabel(hint, [[0, 1, 2]], p.topo)
    assert sorted(set(relabelled.tolist())) == [0, 1]
    r = optpart.solve(p, "cpsat", hint=hint, **budget("cpsat"))
    optpart.check(p, r)
    assert r.status is Status.OPTIMAL
    hetero = p.with_devices([Device("a", speed=1.0), Device("b", speed=2.0), Device("c", speed=1.0)])
    assert device_classes(hetero) == [[0, 2]]


@pytest.mark.parametrize("p", [2, 4, 8, 16])
def test_cpsat_reproduces_published_stg_optima(p):
    # The first 6 proven instances per p; all but rand0001 with p = 4 (~4 s) take < 0.5 s.
    for rel, problem, opt in stg_problems(p, 6):
        r = optpart.solve(problem, "cpsat", seed=0, **budget("cpsat"))
        optpart.check(problem, r)
        assert r.status is Status.OPTIMAL, (rel, r)
        assert r.makespan == opt, (rel, r.makespan, opt)


@pytest.mark.parametrize("k", [2, 4])
@pytest.mark.parametrize("name", ["50/rand0000.stg", "50/rand0060.stg"])
def test_cpsat_on_stg_never_claims_below_the_known_optimum(name, k):
    """An `optimal` lies within the published [lower, upper] optimum; a bound never exceeds the upper one."""
    lo, hi = stg_optimum_bounds(k)[name]
    p = optpart.load(shared_data("stg", name)).with_devices(k)
    r = optpart.solve(p, "cpsat", **budget("cpsat", 5.0))
    optpart.check(p, r)
    assert r.lower_bound <= hi + 1e-9 and r.makespan >= lo - 1e-9
    if r.status is Status.OPTIMAL:
        assert lo - 1e-9 <= r.makespan <= hi + 1e-9
    if lo == hi:
        assert r.makespan >= hi - 1e-9
