"""The contract every registered solver must keep, checked through the registry.

For every installed solver and every small case (:func:`check_contract`):

* it answers (``feasible``/``optimal``) whenever ``heft`` answers, and says
  ``infeasible`` whenever the screening proves it;
* asked for a memory model its spec declares, it answers wherever ``heft`` answers under
  that model; asked for one it does not declare, it answers exactly when the placement it
  makes under a declared model fits the requested one (else ``unknown``, saying so);
* every placement it returns fits the requested memory model (and, when the spec does not
  declare that one, the declared model it was made under) and passes :func:`optpart.check`;
* it rejects unknown and ill-typed options, worded the one way of
  :mod:`optpart.solvers.spec`;
* equal inputs and seed give equal results.

``test_a_solver_that_always_says_unknown_fails_the_contract`` shows the check can
fail: a fake solver that never answers is registered and must be caught.

Budgets are deterministic (``conftest.budget``): CP-SAT stops on deterministic time,
other solvers on their own work counters, and the wall-clock limit is a safety net
never reached on these small cases, so no outcome depends on the machine's speed.
"""

from __future__ import annotations

import importlib.machinery
import sys
import types

import numpy as np
import pytest

import optpart
from optpart import Device, Problem, SolverError, Status
from optpart.generators import layered_dag, training_graph
from optpart.model.memory import overflow_message
from optpart.model.constraints import Constraints
from optpart.solvers import registry
from optpart.solvers.base import Solution
from optpart.solvers.spec import SolverSpec

from conftest import budget

#: Solvers that, by design, answer only on some instances, with the instances they must answer.
PARTIAL = {
    # `single` puts the whole graph on one device: it must answer when one allowed device holds it.
    "single": lambda p: bool((p.allowed.all(axis=0) & optpart.model.memory.fits(p.memory.sum(), p.device_memory)).any()),
}


def _split_case() -> Problem:
    """A chain a -> b -> c with the param/output/temp split, where peak and static differ."""
    return Problem.from_arrays(
        ["a", "b", "c", "d"], [1.0, 2.0, 1.0, 1.0], None, [0, 1, 0], [1, 2, 3], [8.0, 8.0, 8.0],
        param_bytes=[2, 2, 2, 2], output_bytes=[8, 8, 1, 1], temp_bytes=[1, 1, 0, 0],
        devices=[Device("g0", 24), Device("g1", 16)], name="split-chain")


def _pinned_overflow_case() -> Problem:
    p = layered_dag(6, k=2, memory_slack=None, seed=7)
    cap = float(p.memory.sum()) * 0.6  # the whole graph fits on two devices, not what is pinned to g0
    order = np.argsort(-p.memory, kind="stable").tolist()
    top = [p.node_ids[v] for i, v in enumerate(order) if p.memory[order[:i]].sum() <= cap]
    return p.with_devices([Device("g0", cap), Device("g1", cap)],
                          constraints=Constraints(pin={nid: "g0" for nid in top}))


CASES = {
    "layered-8": layered_dag(8, k=2, memory_slack=1.6, seed=1, ccr=1.0),
    "layered-10-k3": layered_dag(10, k=3, memory_slack=None, seed=2, ccr=0.2),
    "training-2": training_graph(2, k=2, memory_slack=2.0, seed=3),
    "split-chain": _split_case(),
    "pinned-overflow": _pinned_overflow_case(),
}


def _run(name: str, problem: Problem, **kw) -> optpart.Result:
    return optpart.solve(problem, name, seed=0, **budget(name), **kw)


def check_contract(name: str, problem: Problem) -> None:
    """Assert that solver ``name`` keeps the contract on ``problem`` (see the module docstring)."""
    spec = registry.solver_spec(name)
    screened = problem.infeasibility("static")
    answers: dict[str, optpart.Result] = {}
    for model in ("static", "peak"):
        r = answers[model] = _run(name, problem, memory_model=model)
        assert r.solver == registry.solver_info(name).name and r.memory_model == model, (name, model)
        assert r.lower_bound >= optpart.lower_bound(problem) - 1e-9
        if problem.infeasibility(model) is not None:
            assert r.status is Status.INFEASIBLE and r.message, (name, model, r)
            continue
        if model in spec.memory_models:
            # A model it guarantees: it answers wherever heft (which guarantees both) answers.
            reference = optpart.solve(problem, "heft", seed=0, memory_model=model)
            must_answer = reference.ok and (name not in PARTIAL or PARTIAL[name](problem))
        else:
            # A model it does not guarantee: it runs under one it does, and that placement is
            # kept exactly when the evaluator finds that it fits the requested model.
            made = answers[spec.memory_models[0]]
            must_answer = made.ok and overflow_message(problem, made.placement, made.start, made.finish,
                                                       model) is None
            if not r.ok and made.ok:
                assert f"({model})" in r.message and "made under the" in r.message, (name, r.message)
        assert not must_answer or r.ok, f"{name} answered {r.status.value} ({r.message}) under {model} where it must answer"
        if r.ok:
            optpart.check(problem, r)
            assert overflow_message(problem, r.placement, r.start, r.finish, model) is None, (name, model)
            if model not in spec.memory_models:
                # Made under a model it guarantees, the placement fits that one too.
                base = spec.memory_models[0]
                assert overflow_message(problem, r.placement, r.start, r.finish, base) is None, (name, base)
        else:
            assert r.placement is None and r.message, (name, model, r)
        if r.status is Status.INFEASIBLE:
            assert screened is not None or registry.solver_info(name).exact, (name, r.message)
    again_a = _run(name, problem)
    again_b = _run(name, problem)
    assert again_a.status == again_b.status, name
    if again_a.ok:
        assert np.array_equal(again_a.placement, again_b.placement), f"{name} is not deterministic"
        assert np.array_equal(again_a.start, again_b.start), f"{name} is not deterministic"


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("name", registry.available_solvers())
def test_every_solver_keeps_the_contract(name, case):
    check_contract(name, CASES[case])


@pytest.mark.parametrize("name", registry.available_solvers())
def test_every_solver_rejects_unknown_and_ill_typed_options(name):
    problem = CASES["layered-8"]
    spec = registry.solver_spec(name)
    with pytest.raises(SolverError, match=rf"^{name}: no option 'bogus'; its options: "):
        optpart.solve(problem, name, bogus=1)
    for opt in spec.options:
        with pytest.raises(SolverError, match=rf"^{name}: option {opt.name}=\[1\] must be "):
            optpart.solve(problem, name, **{opt.name: [1]})
    with pytest.raises(SolverError, match="memory_model='liveness' must be one of: static, peak"):
        optpart.solve(problem, name, memory_model="liveness")


@pytest.mark.parametrize("name", registry.available_solvers())
def test_every_solver_declares_a_spec_the_registry_can_print(name):
    spec = registry.solver_spec(name)
    assert isinstance(spec, SolverSpec) and spec.memory_models
    assert set(spec.memory_models) <= {"static", "peak"}
    for opt in spec.options:
        assert opt.coerce(name, opt.default) == opt.default or opt.default is None


# ---------------------------------------------------------------- the contract can fail
def _install_fake(monkeypatch, name: str, solve, spec: SolverSpec) -> None:
    module = types.ModuleType(f"optpart_fake_{name}")
    module.__spec__ = importlib.machinery.ModuleSpec(module.__name__, None)
    module.solve, module.SPEC = solve, spec
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(registry.SOLVERS, name, registry.SolverInfo(name, module.__name__, "a test double"))


def test_a_solver_that_always_says_unknown_fails_the_contract(monkeypatch):
    def solve(problem, *, time_limit=None, seed=0, hint=None, memory_model="static"):
        return Solution(Status.UNKNOWN, message="gave up", memory_model=memory_model)

    _install_fake(monkeypatch, "shrug", solve, SolverSpec(memory_models=("static", "peak")))
    with pytest.raises(AssertionError, match="shrug answered unknown"):
        check_contract("shrug", CASES["layered-8"])


def test_a_nondeterministic_solver_fails_the_contract(monkeypatch):
    calls = []

    def solve(problem, *, time_limit=None, seed=0, hint=None):
        calls.append(1)
        return Solution(Status.FEASIBLE, placement=np.full(problem.n_nodes, len(calls) % 2, dtype=np.int64))

    _install_fake(monkeypatch, "coin", solve, SolverSpec())
    with pytest.raises(AssertionError, match="coin is not deterministic"):
        check_contract("coin", layered_dag(5, k=2, memory_slack=None, seed=3))


def test_a_static_solver_asked_for_peak_is_checked_by_the_evaluator(monkeypatch):
    """A placement made under static that overflows under peak comes back `unknown`, naming the device."""
    p = _split_case()
    place = np.array([0, 1, 0, 0])  # b alone on g1: 11 B static, but it also holds a's received output

    def solve(problem, *, time_limit=None, seed=0, hint=None):
        return Solution(Status.FEASIBLE, placement=place.copy())

    _install_fake(monkeypatch, "static_only", solve, SolverSpec(memory_models=("static",)))
    start, finish = optpart.canonical_schedule(p, place)
    assert optpart.model.memory.fits(optpart.model.memory.static_memory(p, place), p.device_memory).all()
    peak = optpart.model.memory.peak_memory(p, place, start, finish)
    assert peak[1] > 16
    assert optpart.solve(p, "static_only", memory_model="static").status is Status.FEASIBLE
    r = optpart.solve(p, "static_only", memory_model="peak")
    assert r.status is Status.UNKNOWN and r.placement is None and r.memory_model == "peak"
    assert "holds" in r.message and "(peak)" in r.message and "made under the static model" in r.message
