"""An exception out of CP-SAT's C++ code never reaches the user as an internal error.

OR-Tools 9.15's presolve raises ``IndexError: raw_hash_map<>::at`` on some small models
(found on ``training_graph(2, width=2, k=2, memory_slack=1.0, seed=0)``); ``solve_within``
retries without presolve, and a second failure is one clear :class:`SolverError`.
"""

from __future__ import annotations

import pytest
from conftest import budget

import optpart
from optpart.errors import SolverError
from optpart.generators import training_graph
from optpart.solvers.exact.call import solve_within


class _Params:
    def __init__(self) -> None:
        self.cp_model_presolve = True
        self.max_time_in_seconds = 0.0


class _FlakySolver:
    """Raises like the C++ layer while presolve is on, then answers ``code``."""

    def __init__(self, fail_always: bool = False, code: int = 4) -> None:
        self.parameters = _Params()
        self.fail_always, self.code, self.calls = fail_always, code, []

    def solve(self, model) -> int:
        self.calls.append(self.parameters.cp_model_presolve)
        if self.fail_always or self.parameters.cp_model_presolve:
            raise IndexError("absl::container_internal::raw_hash_map<>::at")
        return self.code

    def stop_search(self) -> None:  # the timer's target; never reached in these tests
        pass


def test_a_presolve_crash_is_retried_without_presolve():
    solver = _FlakySolver()
    assert solve_within(solver, model=None, seconds=30.0) == 4
    assert solver.calls == [True, False]


def test_a_second_crash_is_one_solver_error_naming_both():
    solver = _FlakySolver(fail_always=True)
    with pytest.raises(SolverError, match="with presolve .*IndexError.* and without it"):
        solve_within(solver, model=None, seconds=30.0)


@pytest.mark.parametrize("memory_model", ["peak", "static"])
def test_the_model_that_crashed_presolve_gets_the_same_answer_as_the_milp(memory_model):
    problem = training_graph(2, width=2, k=2, memory_slack=1.0, seed=0)
    cp = optpart.solve(problem, solver="cpsat", memory_model=memory_model, **budget("cpsat"))
    mi = optpart.solve(problem, solver="milp", memory_model="static", **budget("milp"))
    # No memory split on this graph, so both models are the static sum and the MILP is exact.
    assert not problem.has_split
    assert mi.status == "infeasible"
    assert cp.status == mi.status
