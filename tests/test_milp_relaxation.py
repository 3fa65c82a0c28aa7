"""The energetic window rows of the exact models (``_exact_common.window_cuts``) are valid
and lift the MILP's LP relaxation where work waits behind a long chain.

Validity: on the random tiny problems of ``test_exact.py`` (pins, forbids, colocation,
speeds, per-pair links, non-integral times) neither the windows' constant bound nor the
root LP bound with the rows exceeds the brute-force optimum of ``tests/oracle.py``; on
planted graphs (known optimum) the root LP bound stays at or below the optimum and
``milp`` never claims ``optimal`` above it. Strength: on a chain feeding a wide layer the
root LP bound with the rows reaches the optimum, without them it stays at the critical path.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import budget
from oracle import brute_force
from test_exact import feasible_random_problem, random_problem

import optpart
from optpart import Device
from optpart.generators import planted_dag
from optpart.model.devices import Links
from optpart.solvers.exact import _exact_common as xc
from optpart.solvers.exact import milp_time_indexed as ti
from optpart.solvers.exact.milp import root_lp_bound


def _window(p: optpart.Problem) -> float:
    dur = xc.durations(p)
    md = np.where(p.allowed, dur, np.inf).min(axis=1).tolist()
    head, tail = xc.heads_tails_comm(p, md, xc.min_transfer(p, xc.transfer_table(p)))
    return xc.window_bound(head, tail, md, p.n_devices, xc.comm_lower_bound(p))


@pytest.mark.parametrize("seed", range(40))
def test_window_and_root_lp_bounds_never_exceed_the_optimum(seed):
    p, best = feasible_random_problem(seed)
    tol = best * (1 + 1e-9) + 1e-9
    assert _window(p) <= tol
    assert root_lp_bound(p) <= tol
    assert root_lp_bound(p, window_cuts=False) <= root_lp_bound(p) + 1e-9 * max(best, 1.0)


def _chain_then_fan(chain: int, width: int, k: int) -> optpart.Problem:
    """``chain`` unit nodes in a row, the last feeding ``width`` unit nodes; free links."""
    n = chain + width
    src = list(range(chain - 1)) + [chain - 1] * width
    dst = list(range(1, chain)) + list(range(chain, n))
    devices = [Device(f"d{i}", 1e9) for i in range(k)]
    return optpart.Problem.from_arrays([f"v{i}" for i in range(n)], np.ones(n), np.ones(n), src, dst,
                                       np.zeros(n - 1), devices=devices, links=Links(0.0, np.inf),
                                       name=f"chain{chain}-fan{width}")


def test_windows_lift_the_root_lp_to_the_optimum_on_a_chain_then_fan():
    # 3 + 4 unit nodes on 2 devices: critical path 4, work bound 3.5; the fan waits for the
    # chain (head 3) and needs 4 / 2 more: optimum 5.
    p = _chain_then_fan(3, 4, 2)
    best, _, _ = brute_force(p)
    assert best == pytest.approx(5.0)
    assert root_lp_bound(p, window_cuts=False) == pytest.approx(4.0)
    assert root_lp_bound(p) == pytest.approx(5.0)
    r = optpart.solve(p, "milp", seed=0, **budget("milp"))
    optpart.check(p, r)
    assert r.status is optpart.Status.OPTIMAL and r.makespan == pytest.approx(5.0)


def test_partial_overlaps_count_in_the_window():
    # A fan of 6 behind a chain of 2 on 4 devices: the plain window gives 2 + 6 / 4 = 3.5,
    # the optimum is 4 (two rounds of fan nodes after the chain).
    p = _chain_then_fan(2, 6, 4)
    assert _window(p) >= 3.5 - 1e-9
    assert root_lp_bound(p) >= 3.5 - 1e-9
    assert root_lp_bound(p) <= 4.0 + 1e-9


@pytest.mark.parametrize("seed", range(3))
def test_root_lp_and_milp_respect_planted_optima(seed):
    p = planted_dag(12, 3, ccr=1.0, seed=seed)
    opt = p.meta["optimum"]
    assert root_lp_bound(p) <= opt * (1 + 1e-9) + 1e-9
    r = optpart.solve(p, "milp", seed=0, **budget("milp"))
    optpart.check(p, r)
    assert r.lower_bound <= opt * (1 + 1e-9) + 1e-9
    if r.status is optpart.Status.OPTIMAL:
        assert r.makespan == pytest.approx(opt, rel=1e-6)


def test_cpsat_with_windows_proves_the_chain_then_fan_optimum():
    p = _chain_then_fan(3, 4, 2)
    r = optpart.solve(p, "cpsat", time_limit=600, deterministic_time=5.0, seed=0)
    optpart.check(p, r)
    assert r.status is optpart.Status.OPTIMAL and r.makespan == pytest.approx(5.0)
    assert r.lower_bound <= 5.0 + 1e-9


def _time_indexed_cases() -> list[int]:
    """Seeds of ``random_problem`` with whole time units and a small time-indexed model
    (horizon: every node and transfer in sequence, as without a warm start)."""
    seeds = []
    for seed in range(120):
        p = random_problem(seed)
        dur, comm = xc.durations(p), xc.transfer_table(p)
        horizon = float(np.where(p.allowed, dur, 0).max(axis=1).sum())
        if comm.size:
            horizon += float(comm.reshape(comm.shape[0], -1).max(axis=1).sum())
        try:
            size = ti.check_size(p, dur, comm, horizon)
        except optpart.errors.OptpartError:
            continue
        if size.terms(p) <= 20_000:
            seeds.append(seed)
    return seeds


TI_SEEDS = _time_indexed_cases()


def test_time_indexed_cases_cover_the_features():
    probs = [random_problem(s) for s in TI_SEEDS]
    assert len(probs) >= 20
    assert any(p.groups for p in probs) and any((p.pin >= 0).any() for p in probs)
    assert any(len(set(p.device_speed.tolist())) > 1 for p in probs)
    assert any(np.isfinite(p.bandwidth).any() for p in probs)


@pytest.mark.parametrize("seed", TI_SEEDS)
def test_time_indexed_milp_reaches_the_brute_force_optimum(seed):
    # Without the heuristic's warm start the model alone must find and prove the optimum;
    # its root LP never exceeds it.
    p = random_problem(seed)
    best, _, _ = brute_force(p)
    r = optpart.solve(p, "milp", formulation="time-indexed", use_hint=False, seed=0, **budget("milp"))
    if not np.isfinite(best):
        assert r.status is optpart.Status.INFEASIBLE
        return
    optpart.check(p, r)
    assert r.status is optpart.Status.OPTIMAL, r.message
    assert r.makespan == pytest.approx(best, rel=1e-9, abs=1e-9)
    assert root_lp_bound(p, horizon=best, formulation="time-indexed") <= best * (1 + 1e-9) + 1e-9


def test_time_indexed_root_lp_sees_the_fan_behind_the_chain_without_windows():
    # The time-indexed relaxation keeps each device busy one unit at a time after the
    # chain's head, so it rises above the big-M one without windows (4); it stays below the
    # optimum 5 because the makespan row sees a node's average finish (half its run starting
    # at 3, half at 4 gives 4.5), which the window rows of the big-M model do not suffer.
    p = _chain_then_fan(3, 4, 2)
    assert root_lp_bound(p, window_cuts=False, horizon=7.0) == pytest.approx(4.0)
    assert 4.0 + 0.25 <= root_lp_bound(p, horizon=7.0, formulation="time-indexed") <= 5.0 + 1e-9


def test_time_indexed_refuses_in_one_line():
    p = _chain_then_fan(2, 3, 2)
    frac = optpart.Problem.from_arrays([f"v{i}" for i in range(3)], [0.1234567, 1.0, 1.0], np.ones(3),
                                       [0, 0], [1, 2], np.zeros(2), devices=[Device("d0", 1e9), Device("d1", 1e9)],
                                       links=Links(0.0, np.inf), name="fractional")
    with pytest.raises(optpart.errors.SolverError, match="whole time units") as info:
        optpart.solve(frac, "milp", formulation="time-indexed", **budget("milp"))
    assert "\n" not in str(info.value)
    long = p.with_devices([Device(f"d{i}", 1e9) for i in range(2)], links=Links(0.0, np.inf))
    long = optpart.Problem.from_arrays([f"v{i}" for i in range(5)], [30000.0] * 5, np.ones(5), [0, 1], [1, 2],
                                       np.zeros(2), devices=long.devices, links=Links(0.0, np.inf), name="long")
    with pytest.raises(optpart.errors.SolverError, match="start binaries") as info:
        optpart.solve(long, "milp", formulation="time-indexed", **budget("milp"))
    assert "\n" not in str(info.value) and "'long'" not in str(info.value)
