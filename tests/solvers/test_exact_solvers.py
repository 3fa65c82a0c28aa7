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
from conftest import budget
from optpart import Constraints, Device, Status
from optpart.generators import layered_dag
from optpart.model.devices import LinkOverride, Links
from optpart.solvers.exact.grid import device_classes, durations, relabel, time_grid, transfer_table

from conftest import shared_data
from oracle import brute_force

EXACT = ["cpsat", "milp"]


def random_problem(seed: int) -> optpart.Problem:
    """A random DAG of 3-7 nodes on 1-3 devices, with a random mix of the model's features."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 8))
    k = int(rng.integers(1, 4))
    integral = rng.random() < 0.5
    time_s = rng.integers(0, 10, size=n).astype(float) if integral else np.round(rng.uniform(0.1, 5.0, n), 3)
    memory = rng.integers(1, 20, size=n).astype(float)
    edges = [(u, w) for w in range(n) for u in range(w) if rng.random() < 0.35]
    src = [u for u, _ in edges]
    dst = [w for _, w in edges]
    nbytes = rng.integers(0, 50, size=len(edges)).astype(float)
    speeds = [1.0] * k if rng.random() < 0.5 else [float(s) for s in rng.choice([0.5, 1.0, 2.0], size=k)]
    total = float(memory.sum())
    tight = rng.random() < 0.5
    caps = [float(np.ceil(total / k * rng.uniform(1.0, 1.4))) if tight else 1e9 for _ in range(k)]
    devices = [Device(f"d{i}", caps[i], speeds[i]) for i in range(k)]
    pairs: tuple = ()
    if k >= 2 and rng.random() < 0.4:
        pairs = (LinkOverride("d0", "d1", float(rng.uniform(0, 1)), float(rng.choice([5.0, 50.0]))),)
    links = Links(latency=float(rng.choice([0.0, 0.5, 1.0])), bandwidth=float(rng.choice([10.0, 20.0, np.inf])),
                  pairs=pairs)
    ids = [f"v{i}" for i in range(n)]
    pin, colocate, forbid = {}, (), {}
    if k >= 2 and rng.random() < 0.3:
        pin = {ids[int(rng.integers(n))]: f"d{int(rng.integers(k))}"}
    if rng.random() < 0.3:
        a, b = rng.choice(n, size=2, replace=False)
        colocate = ((ids[int(a)], ids[int(b)]),)
    if k >= 2 and rng.random() < 0.3:
        forbid = {ids[int(rng.integers(n))]: (f"d{int(rng.integers(k))}",)}
    try:
        cons = Constraints(pin=pin, colocate=colocate, forbid=forbid)
        return optpart.Problem.from_arrays(ids, time_s, memory, src, dst, nbytes, devices=devices, links=links,
                                           constraints=cons, name=f"rand-{seed}")
    except optpart.ProblemError:  # e.g. a pin on a forbidden device: drop the constraints
        return optpart.Problem.from_arrays(ids, time_s, memory, src, dst, nbytes, devices=devices, links=links,
                                           name=f"rand-{seed}")


def feasible_random_problem(seed: int) -> tuple[optpart.Problem, float]:
    """The first draw of :func:`random_problem` at ``seed``, ``seed + 1000``, ... that some
    placement fits, with its brute-force optimum: tests that compare with an optimum get one
    on every item (about one draw in ten fits nothing)."""
    for draw in range(seed, seed + 100_000, 1000):
        p = random_problem(draw)
        best = brute_force(p)[0]
        if np.isfinite(best):
            return p, best
    raise AssertionError(f"no feasible draw from seed {seed}")


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


def _stg_cases(p: int, count: int) -> list[tuple[str, int]]:
    root = shared_data("stg")
    out = []
    for line in (root / "optima" / f"Case50_{p}_OPT.csv").read_text().splitlines():
        fields = line.strip().split(",")
        if len(fields) == 3:
            out.append((fields[0], int(fields[2])))
    return out[:count]


def stg_problems(p: int, count: int) -> list[tuple[str, optpart.Problem, int]]:
    """``(file, problem on p identical devices, published optimum)`` of the first ``count``
    proven STG instances (skipped, saying so, without ../shared/data)."""
    from optpart.formats.stg import read_stg
    root = shared_data("stg")
    return [(rel, read_stg(root / rel).with_devices(p), opt) for rel, opt in _stg_cases(p, count)]


@pytest.mark.parametrize("p", [2, 4, 8, 16])
def test_cpsat_reproduces_published_stg_optima(p):
    # The first 6 proven instances per p; all but rand0001 with p = 4 (~4 s) take < 0.5 s.
    for rel, problem, opt in stg_problems(p, 6):
        r = optpart.solve(problem, "cpsat", seed=0, **budget("cpsat"))
        optpart.check(problem, r)
        assert r.status is Status.OPTIMAL, (rel, r)
        assert r.makespan == opt, (rel, r.makespan, opt)
