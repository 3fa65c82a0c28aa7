"""The registry and the common solver contract, run against every installed solver."""

from __future__ import annotations

import numpy as np
import pytest

import optpart
from optpart import SolverError, Status
from optpart.generators import layered_dag
from optpart.solvers.registry import SOLVERS, available_solvers, solver_info


def test_unknown_solver_lists_the_known_ones():
    with pytest.raises(SolverError, match="unknown solver 'nope'; available: .*single"):
        solver_info("nope")


def test_registry_entries_point_at_modules_with_solve():
    import importlib
    for name in available_solvers():
        info = SOLVERS[name]
        assert callable(importlib.import_module(info.module).solve), name


# The contract every solver keeps (answers, memory models, options, determinism) is
# tests/solvers/test_contract.py; this file tests the registry itself.


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


def test_options_are_validated_through_the_spec_before_the_solver_runs():
    p = layered_dag(8, k=2, seed=1)
    with pytest.raises(SolverError, match=r"^topo: option slack='lots' must be a number$"):
        optpart.solve(p, "topo", slack="lots")
    with pytest.raises(SolverError, match=r"^topo: option slack=-1 must be >= 0$"):
        optpart.solve(p, "topo", slack=-1)
    r = optpart.solve(p, "topo", slack="0.2")  # strings from the command line are converted
    assert r.options["slack"] == 0.2


def test_ignored_arguments_are_announced_not_dropped_silently():
    from optpart.solvers.registry import solver_spec
    p = layered_dag(8, k=2, seed=1)
    ignoring = [n for n in available_solvers() if not solver_spec(n).uses_time_limit]
    assert ignoring, "some solver ignores time limits"
    r = optpart.solve(p, ignoring[0], time_limit=5)
    assert r.stats["ignored"] == ["time_limit"] and "ignored: time_limit" in r.message
    using = [n for n in available_solvers() if solver_spec(n).uses_time_limit][0]
    assert "ignored" not in optpart.solve(p, using, time_limit=30).stats


def test_defaults_are_heuristic_and_peak():
    p = layered_dag(8, k=2, seed=1)
    r = optpart.solve(p)
    assert r.solver == "heuristic" and r.memory_model == "peak" and r.options["memory_model"] == "peak"


def test_the_registry_reads_the_modules_spec(monkeypatch):  # no second copy of the specs
    import types

    from optpart.solvers import registry
    from optpart.solvers.spec import Option, SolverSpec
    spec = SolverSpec(options=(Option("depth", int, 3, "how deep", min=1),))
    fake = types.SimpleNamespace(SPEC=spec)
    monkeypatch.setattr(registry.importlib, "import_module", lambda name: fake)
    assert registry.solver_spec("heft") is spec


@pytest.mark.parametrize("name", sorted(SOLVERS))
def test_a_direct_call_keeps_the_declared_contract(name):
    """No solver validates by hand; ``SPEC.checked`` holds the registry's checks for direct calls."""
    import importlib
    import inspect

    info = SOLVERS[name]
    if not info.installed:
        pytest.skip(f"{name} is not installed (extra '{info.extra}')")
    module = importlib.import_module(info.module)
    params = set(inspect.signature(module.solve).parameters) - {"problem", "time_limit", "seed", "hint", "memory_model"}
    assert params == {o.name for o in module.SPEC.options}, "solve's options and the declared ones differ"
    assert inspect.unwrap(module.solve) is not module.solve  # wrapped by SPEC.checked
    p = layered_dag(8, k=2, seed=1)
    with pytest.raises(SolverError, match=rf"^{name}: memory_model='liveness' must be one of: "):
        module.solve(p, memory_model="liveness")
    with pytest.raises(SolverError, match=rf"^{name}: no option 'bogus'"):
        module.solve(p, bogus=1)
    for opt in module.SPEC.options:
        with pytest.raises(SolverError, match=rf"^{name}: option {opt.name}=\[1\] must be "):
            module.solve(p, **{opt.name: [1]})


def test_non_finite_efforts_and_slacks_are_refused_by_the_spec():
    p = layered_dag(8, k=2, seed=1)
    for solver, key in (("heuristic", "effort"), ("topo", "slack")):
        with pytest.raises(SolverError, match=rf"^{solver}: option {key}=inf must be a finite number$"):
            optpart.solve(p, solver, **{key: float("inf")})
