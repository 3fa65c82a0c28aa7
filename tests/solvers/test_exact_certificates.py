"""Proofs of the exact solvers are certified, budgets are kept, the heuristic is never beaten by default.

* ``cpsat`` hits the planted optimum of :func:`optpart.generators.planted_dag` exactly
  (20-40 nodes, K=4, ccr 1, capacities 1.05x the planted loads) and never claims
  ``optimal`` above it; budgets are deterministic (``deterministic_time``), the
  wall-clock limit is set far away so that it never decides.
* A false proof (google/or-tools#5293: presolve removing the optimum) is simulated by a
  solver that drops every solution below the optimum; the independent confirmation must
  catch it and the status must fall to ``feasible``.
* A model too large for the budget is not built: the heuristic's answer comes back with a
  message saying why (sizes, not seconds, decide).
* Both exact solvers start from the heuristic's schedule and never return a longer one.
"""

from __future__ import annotations

import numpy as np
import pytest

import optpart
from optpart import Status
from optpart.generators import fork_join_dag, layered_dag, planted_dag
from optpart.solvers.exact.bounds import comm_lower_bound
from optpart.solvers.exact import cpsat, cpsat_model, cpsat_search, milp
from optpart.solvers.spec import SolverSpec
from conftest import MILP_NODES, budget

FAR = 600.0  # a wall-clock limit that never binds in these tests


@pytest.mark.parametrize("n,seed", [(20, 0), (20, 1), (28, 0), (28, 1), (28, 2), (36, 0), (40, 0), (40, 2)])
def test_cpsat_hits_the_planted_optimum(n, seed):
    p = planted_dag(n, 4, ccr=1.0, seed=seed, chains=True)
    opt = p.meta["optimum"]
    r = optpart.solve(p, "cpsat", time_limit=FAR, deterministic_time=30.0)
    optpart.check(p, r)
    assert r.status is Status.OPTIMAL, (r.status, r.message)
    assert r.makespan == pytest.approx(opt, rel=1e-9)
    assert r.lower_bound <= opt * (1 + 1e-9)
    assert r.stats["stop_reason"] == "proven optimal"
    assert r.stats["confirmation"].startswith(("OPTIMAL", "trivial"))


@pytest.mark.parametrize("seed", range(2))
def test_cpsat_never_claims_optimal_above_the_planted_optimum(seed):
    # Without chains the planted instances are harder: whatever the outcome within the
    # budget, an optimality claim must sit at the planted optimum.
    p = planted_dag(28, 4, ccr=1.0, seed=seed, chains=False)
    r = optpart.solve(p, "cpsat", time_limit=FAR, deterministic_time=2.0, use_hint=False)
    optpart.check(p, r)
    assert r.lower_bound <= p.meta["optimum"] * (1 + 1e-9)
    if r.status is Status.OPTIMAL:
        assert r.makespan == pytest.approx(p.meta["optimum"], rel=1e-9)


class _DropsTheOptimum:
    """A CP-SAT solver whose search with presolve loses every solution below ``cut`` (as the
    presolve bug did) and proves a false optimum; everything else is the real solver."""

    def __init__(self, real, cut: int):
        self.real = real
        self.cut = cut
        self.parameters = real.parameters

    def solve(self, model):
        if not self.parameters.cp_model_presolve:  # the bug is presolve's: a re-solve without it is sound
            return self.real.solve(model)
        bad = model.clone()
        idx = next(i for i, v in enumerate(bad.proto.variables) if v.name == "makespan")
        bad.add(bad.get_int_var_from_proto_index(idx) >= self.cut)
        bad.clear_hints()
        return self.real.solve(bad)

    def __getattr__(self, name):
        return getattr(self.real, name)


def test_a_false_proof_is_caught_by_the_confirmation(monkeypatch):
    p = layered_dag(14, ccr=1.0, k=3, seed=2)
    true = optpart.solve(p, "cpsat", time_limit=FAR, deterministic_time=30.0, use_hint=False)
    assert true.status is Status.OPTIMAL
    units = int(round(true.stats["objective_units"]))
    real_solver = cpsat_search.make_solver

    def buggy(*args, **kwargs):
        return _DropsTheOptimum(real_solver(*args, **kwargs), units + 1)

    monkeypatch.setattr(cpsat_search, "make_solver", buggy)
    r = optpart.solve(p, "cpsat", time_limit=FAR, deterministic_time=30.0, use_hint=False)
    optpart.check(p, r)
    assert r.stats["cpsat_status"] == "OPTIMAL"          # the main search claims a proof ...
    assert r.status is Status.FEASIBLE                    # ... which is not believed
    assert r.stats["stop_reason"] == "proof not confirmed"
    assert "not confirm" in r.message
    assert r.lower_bound <= true.makespan * (1 + 1e-9)    # no bound above the true optimum
    assert "the proof was false" in r.stats["confirmation"]  # the re-solve found the missed optimum


def test_confirmation_off_is_reported_not_optimal():
    p = layered_dag(10, ccr=1.0, k=2, seed=1)
    r = optpart.solve(p, "cpsat", time_limit=FAR, deterministic_time=10.0, confirm=False)
    optpart.check(p, r)
    assert r.status is Status.FEASIBLE
    assert r.stats["stop_reason"] == "proof not confirmed"


@pytest.mark.parametrize("name", ["cpsat", "milp"])
def test_model_too_large_returns_the_heuristic_with_a_reason(name, monkeypatch):
    module = {"cpsat": cpsat, "milp": milp}[name]
    monkeypatch.setattr(module, "MAX_TERMS", 10)
    p = layered_dag(40, ccr=1.0, k=3, seed=0)
    extra = {"lns": False} if name == "cpsat" else {"max_nodes": MILP_NODES}  # lns=True: windows (tests/solvers/test_exact_lns.py)
    r = optpart.solve(p, name, time_limit=FAR, **extra)
    optpart.check(p, r)
    assert r.status in (Status.FEASIBLE, Status.OPTIMAL)
    assert r.stats["stop_reason"] == "model not built"
    assert r.stats["from_heuristic"] is True
    assert "not built" in r.message and "terms" in r.message
    heur = optpart.solve(p, "heuristic", time_limit=FAR * 0.2)
    assert r.makespan == pytest.approx(heur.makespan)


def test_model_size_estimate_grows_with_the_graph():
    small = cpsat_model.estimate_size(layered_dag(50, k=4, seed=0), peak=False)
    large = cpsat_model.estimate_size(layered_dag(500, k=4, seed=0), peak=False)
    assert 0 < small < large


@pytest.mark.parametrize("seed", [0, 1])
def test_cpsat_never_returns_worse_than_the_heuristic(seed):
    # A tiny deterministic budget: the search cannot do much, the incumbent must survive.
    p = layered_dag(80, ccr=1.0, k=4, seed=seed)
    r = optpart.solve(p, "cpsat", time_limit=FAR, seed=seed, deterministic_time=0.05)
    optpart.check(p, r)
    assert r.stats["stop_reason"] != "model not built"
    assert np.isfinite(r.stats["heuristic_makespan"])
    assert r.makespan <= r.stats["heuristic_makespan"] * (1 + 1e-12)


@pytest.mark.parametrize("n,seed", [(22, 0), (26, 1)])
def test_milp_cut_short_by_its_work_limit_keeps_the_incumbent(n, seed):
    # Graphs whose MILP is built and needs more than one branch-and-bound node: stopped
    # there (a deterministic work limit), the answer is never worse than the heuristic's,
    # claims no proof, and its bound stays at or above the generic bound.
    p = layered_dag(n, ccr=1.0, k=4, seed=seed, memory_slack=1.2)
    r = optpart.solve(p, "milp", time_limit=FAR, seed=seed, max_nodes=1)
    optpart.check(p, r)
    assert r.stats["stop_reason"] == "work limit" and r.stats["nodes"] == 1
    assert r.status is Status.FEASIBLE and "work limit" in r.message
    assert optpart.lower_bound(p) - 1e-9 <= r.lower_bound <= r.makespan
    assert r.makespan <= r.stats["heuristic_makespan"] * (1 + 1e-12)


def test_cpsat_result_reports_why_it_stopped():
    p = layered_dag(60, ccr=1.0, k=4, seed=3)
    r = optpart.solve(p, "cpsat", time_limit=FAR, deterministic_time=0.2)
    optpart.check(p, r)
    assert r.stats["stop_reason"] in ("proven optimal", "deterministic time limit")
    if r.status is not Status.OPTIMAL:
        assert "deterministic time limit" in r.message


def test_milp_warm_starts_from_the_heuristic():
    p = planted_dag(10, 2, ccr=1.0, seed=4)
    r = optpart.solve(p, "milp", **budget("milp"))
    optpart.check(p, r)
    assert r.stats["warm_start"] is True
    assert r.makespan <= r.stats["heuristic_makespan"] * (1 + 1e-12)


@pytest.mark.parametrize("name,suffix,marker", [("cpsat", ".pbtxt", "variables"), ("milp", ".lp", "Minimize"),
                                                ("milp", ".mps", "ROWS")])
def test_export_model_writes_the_model(tmp_path, name, suffix, marker):
    p = layered_dag(8, k=2, seed=0)
    path = tmp_path / f"model{suffix}"
    opts = {"deterministic_time": 5.0} if name == "cpsat" else {"max_nodes": MILP_NODES}
    r = optpart.solve(p, name, time_limit=FAR, export_model=str(path), **opts)
    optpart.check(p, r)
    text = path.read_text()
    assert marker in text.upper() or marker in text


@pytest.mark.parametrize("module", [cpsat, milp])
def test_exact_solvers_declare_their_spec(module):
    spec = module.SPEC
    assert isinstance(spec, SolverSpec)
    assert spec.uses_hint and spec.uses_time_limit
    # cpsat models liveness exactly; milp guarantees peak by checking its static-row placement
    # with the evaluator and otherwise returning the heuristic's peak-feasible schedule.
    assert set(spec.memory_models) == {"static", "peak"}
    with pytest.raises(optpart.errors.OptpartError, match="export_model"):
        spec.validate(module.__name__, {"export_model": 3})


def test_lns_improves_the_incumbent_deterministically():
    # Budgets in deterministic time and rounds: the same improvement on every machine.
    p = layered_dag(60, ccr=1.0, k=4, memory_slack=1.1, seed=0)
    runs = [optpart.solve(p, "cpsat", time_limit=FAR, deterministic_time=0.1, lns_rounds=3) for _ in range(2)]
    for r in runs:
        optpart.check(p, r)
        assert r.stats["lns_rounds"] == 3
        assert r.makespan <= r.stats["heuristic_makespan"] * (1 + 1e-12)
    assert runs[0].makespan == runs[1].makespan
    assert runs[0].stats["lns_end_units"] < runs[0].stats["lns_start_units"]  # LNS found a shorter schedule


@pytest.mark.parametrize("make", [
    lambda s: layered_dag(10, ccr=1.0, k=3, memory_slack=1.2, seed=s),
    lambda s: fork_join_dag(10, width=3, ccr=2.0, k=2, memory_slack=1.3, seed=s),
    lambda s: planted_dag(12, 3, ccr=1.0, seed=s, chains=False),
], ids=["layered", "forkjoin", "planted"])
@pytest.mark.parametrize("seed", [0, 1])
def test_milp_and_cpsat_agree_beyond_brute_force_sizes(make, seed):
    # milp is the independent cross-check of cpsat (docs/exact.md): two formulations, two
    # backends, one optimum. Both stop on deterministic budgets (cpsat's deterministic time,
    # milp's branch-and-bound node limit from budget()); the wall clock is a never-reached net.
    p = make(seed)
    a = optpart.solve(p, "cpsat", time_limit=FAR, deterministic_time=60.0)
    b = optpart.solve(p, "milp", **budget("milp"))
    for r in (a, b):
        optpart.check(p, r)
        assert r.status is Status.OPTIMAL, (r.solver, r.status, r.message)
    assert a.makespan == pytest.approx(b.makespan, rel=1e-6)


def test_proofs_with_communication_come_from_the_plain_cp_search():
    # On a layered graph with communication the bound stays at the critical path: the
    # proof comes from search, which the plain CP phase does alone, and the confirmation's
    # own CP phase re-proves it without presolve (docs/exact.md, "Search in two phases").
    p = layered_dag(24, ccr=1.0, k=4, memory_slack=1.05, seed=1)
    r = optpart.solve(p, "cpsat", time_limit=FAR, deterministic_time=10.0)
    optpart.check(p, r)
    assert r.status is Status.OPTIMAL, r.message
    # (a target phase may come first: a schedule at the closed-form bound, not found here)
    *targets, last = r.stats["search_phases"]
    assert last == "cp search: OPTIMAL" and all(t.endswith(": not found") for t in targets), targets
    assert r.stats["confirmation"].startswith("OPTIMAL") and "(cp search OPTIMAL)" in r.stats["confirmation"]
    assert r.lower_bound > comm_lower_bound(p) * (1 + 1e-6)  # the proof lifted the bound


def test_the_portfolio_takes_over_from_an_unfinished_cp_search():
    # Half of a tiny deterministic budget cannot finish the CP phase on 40 nodes; the
    # portfolio then continues from its best schedule, and nothing gets worse.
    p = layered_dag(40, ccr=1.0, k=4, memory_slack=1.05, seed=0)
    r = optpart.solve(p, "cpsat", time_limit=FAR, deterministic_time=0.02)
    optpart.check(p, r)
    phases = [ph for ph in r.stats["search_phases"] if not ph.startswith("target ")]
    assert phases[0] in ("cp search: FEASIBLE", "cp search: UNKNOWN") and len(phases) == 2, phases
    assert phases[1].startswith("portfolio: ")
    assert r.stats["deterministic_seconds"] <= 0.02 * 1.5 + 0.05  # the two phases share one budget
    assert r.makespan <= r.stats["heuristic_makespan"] * (1 + 1e-12)
    assert r.lower_bound <= r.makespan


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cpsat_and_milp_agree_on_fork_join_graphs_with_tight_memory(seed):
    # The families the two-phase search was tuned on, at sizes milp proves too.
    p = fork_join_dag(14, width=3, ccr=1.0, k=3, memory_slack=1.05, seed=seed)
    a = optpart.solve(p, "cpsat", time_limit=FAR, deterministic_time=20.0)
    b = optpart.solve(p, "milp", **budget("milp"))
    for r in (a, b):
        optpart.check(p, r)
        assert r.status is Status.OPTIMAL, (r.solver, r.status, r.message)
    assert a.makespan == pytest.approx(b.makespan, rel=1e-6)
