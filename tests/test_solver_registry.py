"""The registry and the common solver contract, run against every installed solver."""

from __future__ import annotations

import numpy as np
import pytest

import optpart
from optpart import SolverError, Status
from optpart.generators import layered_dag, training_graph
from optpart.solvers.registry import SOLVERS, available_solvers, solver_info


def test_unknown_solver_lists_the_known_ones():
    with pytest.raises(SolverError, match="unknown solver 'nope'; available: .*single"):
        solver_info("nope")


def test_registry_entries_point_at_modules_with_solve():
    import importlib
    for name in available_solvers():
        info = SOLVERS[name]
        assert callable(importlib.import_module(info.module).solve), name


CONTRACT_CASES = [
    layered_dag(12, k=2, memory_slack=1.6, seed=1, ccr=1.0),
    layered_dag(15, k=3, memory_slack=None, seed=2, ccr=0.2),
    training_graph(2, k=2, memory_slack=2.0, seed=3),
]


@pytest.mark.parametrize("name", available_solvers())
@pytest.mark.parametrize("case", range(len(CONTRACT_CASES)))
def test_contract_every_result_passes_the_checker(name, case):
    problem = CONTRACT_CASES[case]
    result = optpart.solve(problem, name, time_limit=20, seed=0)
    assert result.solver == name and result.problem == problem.name
    assert result.lower_bound >= optpart.lower_bound(problem) - 1e-9
    if result.ok:
        optpart.check(problem, result)
        assert result.makespan >= result.lower_bound - 1e-9
    else:
        assert result.placement is None and result.message


def test_single_runs_everything_on_the_fastest_device_that_fits():
    p = layered_dag(20, seed=4).with_devices(
        [optpart.Device("a", 1e12, 1.0), optpart.Device("b", 1e12, 3.0), optpart.Device("c", 1.0, 9.0)])
    r = optpart.solve(p, "single")
    assert r.status is Status.FEASIBLE and set(r.placement.tolist()) == {1}
    assert r.makespan == pytest.approx(p.time.sum() / 3.0)


def test_single_is_honest_when_no_single_device_holds_the_graph():
    p = layered_dag(20, k=4, memory_slack=1.0, seed=5)
    r = optpart.solve(p, "single")
    assert r.status is Status.UNKNOWN and "no single device holds" in r.message


def test_a_solver_returning_an_invalid_schedule_is_caught():
    from optpart.solvers.base import Solution, finalize
    p = layered_dag(10, k=2, seed=6)
    bad = Solution(Status.FEASIBLE, placement=np.zeros(p.n_nodes, dtype=int), start=np.zeros(p.n_nodes))
    with pytest.raises(SolverError, match="invalid schedule"):
        finalize(p, bad, "broken", 0.0, {})


def test_unproven_optimal_claims_are_downgraded():
    from optpart.solvers.base import Solution, finalize
    p = layered_dag(10, k=2, seed=6)
    claim = Solution(Status.OPTIMAL, placement=np.zeros(p.n_nodes, dtype=int), lower_bound=1.0)
    r = finalize(p, claim, "boastful", 0.0, {})
    assert r.status is Status.FEASIBLE and "proven bound" in r.message
