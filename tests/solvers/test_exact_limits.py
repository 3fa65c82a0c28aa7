"""Unlimited and huge time limits: every solver either runs without a wall limit or refuses.

``--time-limit inf`` used to end in a thread timer's ``OverflowError`` traceback
(``threading.Timer`` cannot wait ``inf`` seconds). Now an infinite or huge limit means
"no wall limit": CP-SAT runs until its proof or its deterministic budget, the MILP backends
get no time limit, and nothing is printed from a thread.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import optpart
from optpart import Status
from optpart.generators import layered_dag
from optpart.solvers.exact.call import UNLIMITED_S, unlimited
from conftest import MILP_NODES


@pytest.fixture
def thread_errors(monkeypatch):
    """Exceptions raised in any thread during the test (a timer's OverflowError among them)."""
    seen: list = []
    monkeypatch.setattr(threading, "excepthook", lambda args: seen.append(args.exc_value))
    return seen


def _problem() -> optpart.Problem:
    return layered_dag(14, k=2, seed=3, memory_slack=1.1)


@pytest.mark.parametrize("limit", [float("inf"), 1e300, 1e9])
def test_cpsat_without_a_wall_limit_stops_on_its_deterministic_budget(limit, thread_errors):
    p = _problem()
    r = optpart.solve(p, "cpsat", time_limit=limit, deterministic_time=2.0, confirm_deterministic_time=4.0)
    assert not thread_errors
    assert r.status in (Status.OPTIMAL, Status.FEASIBLE)
    assert r.makespan >= r.lower_bound > 0
    # Deterministic budgets and no wall limit: the same answer as a run with a finite limit.
    again = optpart.solve(p, "cpsat", time_limit=600, deterministic_time=2.0, confirm_deterministic_time=4.0)
    assert again.status == r.status and np.isclose(again.makespan, r.makespan)


@pytest.mark.parametrize("backend", ["highs", "cbc"])
def test_milp_without_a_wall_limit_proves_a_small_graph(backend, thread_errors):
    p = layered_dag(8, k=2, seed=1, memory_slack=1.1)
    r = optpart.solve(p, "milp", time_limit=float("inf"), backend=backend, max_nodes=MILP_NODES)  # the deterministic backstop
    assert not thread_errors
    assert r.status is Status.OPTIMAL
    ref = optpart.solve(p, "cpsat", time_limit=600, deterministic_time=5.0)
    assert ref.status is Status.OPTIMAL and np.isclose(r.makespan, ref.makespan, rtol=1e-6)


def test_unlimited_is_inf_or_huge_only():
    assert unlimited(float("inf")) and unlimited(1e300) and unlimited(UNLIMITED_S)
    assert not unlimited(3600.0) and not unlimited(0.5)


@pytest.mark.parametrize("solver", ["heuristic", "heft"])
def test_other_solvers_accept_an_infinite_limit(solver, thread_errors):
    r = optpart.solve(_problem(), solver, time_limit=float("inf"))
    assert not thread_errors
    assert r.status in (Status.OPTIMAL, Status.FEASIBLE)
