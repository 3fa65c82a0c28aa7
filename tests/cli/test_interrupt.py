"""Ctrl-C (and SIGTERM) during a solve keep the best plan found so far.

The interrupt is raised by a stand-in solver after it has made a plan, as a real one is
when the user presses Ctrl-C while ``cpsat`` searches from the heuristic's schedule: the
solve must answer that plan (``feasible``, marked interrupted), the command line must write
it to ``--out`` and exit 130 (143 for SIGTERM), and ``optpart evaluate`` must accept it.
"""

from __future__ import annotations

import json

import pytest

import optpart
from optpart.cli import main
from optpart.cli.common import Terminated
from optpart.solvers import registry
from optpart.solvers.base import Solution
from optpart.solvers.baselines import heft
from optpart.solvers.incumbent import Interrupted

MLP = "instances/small/mlp6-training.json"


def _stand_in(stop: type[BaseException], plans: int = 1):
    """A solver that makes ``plans`` plans (HEFT's, then all on device 0) and is then stopped."""

    def solve(problem, *, time_limit=None, seed=0, hint=None, memory_model="static", **options):
        heft.solve(problem, time_limit=time_limit, seed=seed, hint=None, memory_model=memory_model)
        if plans > 1:  # a second, worse plan offered later: the shorter one must win
            import numpy as np
            Solution(optpart.Status.FEASIBLE, placement=np.zeros(problem.n_nodes, dtype=np.int64))
        raise stop()

    return solve


@pytest.fixture
def stopped_solver(monkeypatch):
    def install(stop=KeyboardInterrupt, plans=1):
        real = registry.get_solver
        monkeypatch.setattr(registry, "get_solver",
                            lambda name: _stand_in(stop, plans) if name == "etf" else real(name))
    return install


def test_interrupted_solve_answers_the_shortest_plan_found(stopped_solver):
    stopped_solver(plans=2)
    problem = optpart.load(MLP).with_devices(2, memory=8 * 2**30)
    expected = optpart.solve(problem, "heft")
    with pytest.raises(Interrupted) as caught:
        optpart.solve(problem, "etf")
    result = caught.value.result
    assert isinstance(caught.value, KeyboardInterrupt)
    assert result.status is optpart.Status.FEASIBLE and result.stats["interrupted"] is True
    assert result.makespan == pytest.approx(expected.makespan, rel=1e-12)
    assert "interrupted" in result.message
    optpart.check(problem, result)


def test_interrupted_before_any_plan_is_unknown(monkeypatch):
    real = registry.get_solver

    def solve(problem, **kwargs):
        raise KeyboardInterrupt()

    monkeypatch.setattr(registry, "get_solver", lambda name: solve if name == "etf" else real(name))
    problem = optpart.load(MLP).with_devices(2, memory=8 * 2**30)
    with pytest.raises(Interrupted) as caught:
        optpart.solve(problem, "etf")
    assert caught.value.result.status is optpart.Status.UNKNOWN
    assert "before any plan" in caught.value.result.message


@pytest.mark.parametrize("stop, code", [(KeyboardInterrupt, 130), (Terminated, 143)])
def test_cli_writes_the_best_plan_and_evaluate_accepts_it(stopped_solver, tmp_path, capsys, stop, code):
    stopped_solver(stop)
    out = tmp_path / "r.json"
    rc = main(["solve", MLP, "--solver", "etf", "--devices", "2", "--memory", "8GiB", "-q", "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == code
    assert f"written to {out}" in err and err.count("\n") == 1
    doc = json.loads(out.read_text())
    assert doc["status"] == "feasible" and "interrupted" in doc["message"]
    assert main(["evaluate", MLP, str(out), "--devices", "2", "--memory", "8GiB"]) == 0
