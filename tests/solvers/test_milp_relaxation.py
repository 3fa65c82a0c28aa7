"""The energetic window rows of the exact models (``bounds.window_cuts``) are valid
and lift the MILP's LP relaxation where work waits behind a long chain.

Validity: on the random tiny problems of ``exact_cases.py`` (pins, forbids, colocation,
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
from exact_cases import feasible_random_problem

import optpart
from optpart import Device
from optpart.generators import planted_dag
from optpart.model.devices import Links
from optpart.solvers.exact.bounds import comm_lower_bound, heads_tails_comm, min_transfer, window_cuts
from optpart.solvers.exact.grid import durations, transfer_table
from optpart.solvers.exact.milp import root_lp_bound


def _window(p: optpart.Problem) -> float:
    dur = durations(p)
    md = np.where(p.allowed, dur, np.inf).min(axis=1).tolist()
    head, tail = heads_tails_comm(p, md, min_transfer(p, transfer_table(p)))
    lb, k = comm_lower_bound(p), p.n_devices
    cuts = window_cuts(head, tail, md, k, lb, max_cuts=1)
    return max([lb] + [h + t + sum(max(0.0, d - x) for d, x in zip(md, a)) / k for h, t, a in cuts])


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
