"""The ``heuristic`` solver: its pipeline, memory under both models, the guarantee, determinism.

Budgets are work counts (``effort``), never wall time.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import optpart
from optpart import Constraints, Device, Links, Problem, Status
from optpart.errors import SolverError
from optpart.generators import chain, fork_join, large_training_graph, layered_dag, planted_dag, training_graph, \
    uniform_devices
from optpart.generators.planted import EDGE_RULES
from optpart.model.paths import priority_order, upward_rank
from optpart.schedule import Beaten, Graph, StaticPolicy, eft_schedule, etf_schedule, insertion_times
from optpart.schedule.units import memory_units
from optpart.solvers.heuristic.pipeline import CONSTRUCTIONS

from conftest import shared_data
from strategies import examples


def solve_checked(problem: Problem, **options) -> optpart.Result:
    result = optpart.solve(problem, "heuristic", **options)
    assert optpart.violations(problem, result) == []
    return result


# ---------------------------------------------------------------- the pipeline

def test_the_constructions_run_in_their_order_and_report_what_they_cost_and_made():
    assert [name for name, _ in CONSTRUCTIONS][:2] == ["heft", "etf"]
    assert all(build.__doc__ for _, build in CONSTRUCTIONS)   # each says when it wins
    p = layered_dag(60, ccr=1.0, k=3, memory_slack=1.2, seed=3)
    r = solve_checked(p, memory_model="static", gap=0)
    stages = r.stats["stages"]
    order = [name for name, _ in CONSTRUCTIONS]
    ran = [name for name in stages if name in order]
    assert ran == sorted(ran, key=order.index)
    assert {"heft", "etf"} <= set(stages)
    assert set(r.stats["stage_seconds"]) == set(stages) and all(x >= 0 for x in r.stats["stage_seconds"].values())
    heft = optpart.solve(p, "heft", memory_model="static")
    etf = optpart.solve(p, "etf", memory_model="static")
    assert stages["heft"] == pytest.approx(heft.makespan, rel=1e-12) or stages["heft"] < heft.makespan
    assert r.makespan <= min(heft.makespan, etf.makespan, min(stages.values())) * (1 + 1e-12)
    assert r.stats["construction"].split("+")[0] in stages


@pytest.mark.parametrize("engine", ["eft", "etf"])
def test_a_construction_that_cannot_beat_the_bound_stops(engine):
    p = planted_dag(2000, 4, ccr=5.0, edges="local", seed=2)
    g = Graph(p)

    def run(bound=None):
        if engine == "eft":
            return eft_schedule(g, priority_order(p, upward_rank(p)).tolist(), StaticPolicy(p), bound=bound)
        return etf_schedule(g, upward_rank(p).tolist(), StaticPolicy(p), bound=bound)

    full = run()
    assert run(full.makespan).makespan == full.makespan      # a tie is not beaten
    with pytest.raises(Beaten):
        run(full.makespan * (1 - 1e-6))
    lower = optpart.lower_bound(p)
    with pytest.raises(Beaten):
        run(lower * 0.999)                                     # no schedule gets there


def test_insertion_fills_an_idle_gap():
    # a(1) -> b(1) across devices with transfer 2: b waits; c(1) independent fits in the gap before b
    p = Problem.from_arrays(["a", "b", "c"], [1.0, 1.0, 1.0], [0.0] * 3, [0], [1], [2.0],
                            devices=uniform_devices(2), links=Links(0.0, 1.0))
    g = Graph(p)
    s, f = insertion_times(g, [0, 1, 1], [0, 1, 2])
    assert s == [0.0, 3.0, 0.0] and f == [1.0, 4.0, 1.0]


# ---------------------------------------------------------------- whole solver

@pytest.mark.parametrize("effort", [0, 1])
@pytest.mark.parametrize("make", [
    lambda: layered_dag(40, ccr=0.5, k=3, memory_slack=1.05, seed=1),
    lambda: layered_dag(60, ccr=5.0, k=4, memory_slack=1.02, seed=2),
    lambda: training_graph(10, k=4, memory_slack=1.05, seed=3),
    lambda: training_graph(6, width=3, k=2, memory_slack=1.01, seed=4),
    lambda: planted_dag(200, 4, ccr=1.0, seed=5),
    lambda: large_training_graph(2000, seed=6, k=8, memory_slack=1.02),
])
def test_memory_and_constraints_hold(make, effort):
    p = make()
    r = solve_checked(p, effort=effort)
    assert r.status.has_solution
    assert (r.memory_static <= p.device_memory * (1 + 1e-9)).all()


@pytest.mark.parametrize("seed", range(4))
def test_exact_fit_is_valid_or_honestly_unknown(seed):
    p = training_graph(6, width=3, k=2, memory_slack=1.0, seed=seed)
    r = optpart.solve(p, "heuristic")
    assert optpart.violations(p, r) == []
    assert r.status.has_solution or (r.status is Status.UNKNOWN and "no placement" in r.message)


def test_heterogeneous_speeds_and_links():
    p = layered_dag(50, ccr=1.0, seed=7)
    links = Links(1e-3, 1e8, pairs=(optpart.LinkOverride("d0", "d1", 0.0, 1e11),))
    p = p.with_devices([Device("d0", 4e9, 2.0), Device("d1", 2e9, 1.0), Device("d2", 2e9, 0.5)], links=links)
    r = solve_checked(p)
    assert r.makespan <= optpart.solve(p, "single").makespan + 1e-9


def _guarantee_problem(seed: int, k: int, with_groups: bool, with_pins: bool) -> Problem:
    rng = np.random.default_rng(seed)
    base = layered_dag(int(rng.integers(10, 60)), ccr=float(rng.choice([0.1, 1, 5])), seed=seed)
    n = base.n_nodes
    colocate, pin = (), {}
    if with_groups:
        perm = rng.permutation(n).tolist()
        colocate = tuple(tuple(f"n{v}" for v in perm[i:i + 3]) for i in range(0, min(n, 12), 3))
    if with_pins:
        grouped = {x for g in colocate for x in g}
        free = [f"n{v}" for v in range(n) if f"n{v}" not in grouped]
        pin = {free[i]: f"dev{i % k}" for i in range(min(k, len(free)))}
    q = base.with_devices(k, constraints=Constraints(pin=pin, colocate=colocate))
    _, members, unit_mem = memory_units(q)
    cap = float(q.memory.sum()) / k + max(unit_mem)  # exactly the guarantee's capacity
    return q.with_devices(k, memory=cap, constraints=q.constraints)


@pytest.mark.parametrize("seed", range(12))
def test_guarantee_at_total_over_k_plus_largest_unit(seed):
    k = 2 + seed % 4
    p = _guarantee_problem(seed, k, with_groups=seed % 2 == 0, with_pins=seed % 3 == 0)
    assert p.infeasibility() is None
    r = solve_checked(p, effort=seed % 2)
    assert r.status in (Status.FEASIBLE, Status.OPTIMAL), r.message


def test_infeasible_when_total_memory_exceeds_capacity():
    p = layered_dag(20, k=2, memory_slack=0.9, seed=1)
    r = optpart.solve(p, "heuristic")
    assert r.status is Status.INFEASIBLE and r.placement is None


def test_pins_overflowing_a_device_are_infeasible():
    p = chain(4, memory=10.0).with_devices(2, memory=25.0,
                                           constraints=Constraints(pin={f"c{i}": "dev0" for i in range(3)}))
    r = optpart.solve(p, "heuristic")
    assert r.status is Status.INFEASIBLE and "dev0" in r.message


def test_peak_memory_model_is_respected():
    rng = np.random.default_rng(0)
    base = layered_dag(60, ccr=1.0, seed=11)
    n = base.n_nodes
    param, out, tmp = rng.uniform(1, 5, n) * 1e6, rng.uniform(1, 20, n) * 1e6, rng.uniform(0, 2, n) * 1e6
    p = Problem.from_arrays(base.node_ids, base.time, None, base.edge_src, base.edge_dst, base.edge_bytes,
                            param_bytes=param, output_bytes=out, temp_bytes=tmp,
                            devices=uniform_devices(3, float((param + out + tmp).sum()) / 3 * 1.02),
                            links=base.links)
    r = optpart.solve(p, "heuristic", memory_model="peak")
    assert optpart.violations(p, r) == []   # the checker verifies the peak model the result claims
    assert r.status.has_solution and r.memory_model == "peak"
    assert (r.memory_peak <= p.device_memory * (1 + 1e-9)).all()


def test_bad_options_are_errors(diamond):
    with pytest.raises(SolverError, match="memory_model"):
        optpart.solve(diamond, "heuristic", memory_model="dynamic")
    with pytest.raises(SolverError, match="effort"):
        optpart.solve(diamond, "heuristic", effort=-1)


def test_seed_method_is_its_own_solver_and_optimal_only_when_proven(diamond):
    r = solve_checked(diamond, effort=2)
    assert r.solver == "heuristic"
    seed = optpart.solve(diamond, "pardnn")
    optpart.check(diamond, seed)
    assert seed.solver == "pardnn" and seed.makespan >= r.makespan - 1e-12
    if r.status is Status.OPTIMAL:
        assert r.makespan <= r.lower_bound * (1 + 1e-6)


def test_planted_optimum_is_approached():
    p = planted_dag(400, 4, ccr=1.0, seed=9)
    r = solve_checked(p)
    assert r.makespan >= p.meta["optimum"] * (1 - 1e-9)
    assert r.makespan <= 1.10 * p.meta["optimum"]


def test_stg_instances_are_valid_and_not_below_optimum():
    root = shared_data("stg")
    rows = (root / "optima" / "Case50_4_OPT.csv").read_text().splitlines()[:5]
    for row in rows:
        fields = row.split(",")
        if len(fields) > 3:
            continue
        p = optpart.load(root / fields[0]).with_devices(int(fields[1]))
        r = solve_checked(p)
        assert r.makespan >= float(fields[2]) - 1e-9


_DETERMINISM_SCRIPT = """
import json
import optpart
from optpart.formats.optpart_json import result_to_json


def untimed(x):
    # the stages' and the search's wall seconds are the only numbers a run may change
    if isinstance(x, dict):
        return {k: untimed(v) for k, v in x.items() if not k.endswith("seconds")}
    return [untimed(v) for v in x] if isinstance(x, list) else x

from optpart.generators import training_graph, layered_dag, planted_dag
# peak (the search with the liveness check), static (restarts, the other baselines), and a
# memory-tight static graph on which the search reassigns devices' contents
for p in (training_graph(12, k=3, memory_slack=1.05, seed=1), layered_dag(80, ccr=2.0, k=4, memory_slack=1.1, seed=2),
          planted_dag(200, 8, ccr=5.0, seed=1, chains=True)):
    r = optpart.solve(p, "heuristic")
    print(json.dumps(untimed(json.loads(result_to_json(r, p, include_wall_time=False))), sort_keys=True))
"""


def test_same_output_across_hash_seeds():
    outs = []
    for seed in ("0", "4242"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        proc = subprocess.run([sys.executable, "-c", _DETERMINISM_SCRIPT], env=env, capture_output=True,
                              text=True, timeout=120, check=True)
        outs.append(proc.stdout)
    assert outs[0] == outs[1]
    assert '"status": "feasible"' in outs[0] or '"status": "optimal"' in outs[0]


# ---------------------------------------------------------------- on the benchmark set

#: The gap to the planted optimum the heuristic stays within on planted graphs of up to 40 nodes,
#: but under peak with tight memory (docs/heuristic.md, "Guarantees").
SMALL_GAP = 0.10


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(2, 40), k=st.integers(1, 4), ccr=st.sampled_from([0.0, 0.1, 1.0, 5.0]),
       rule=st.sampled_from(EDGE_RULES), model=st.sampled_from(["static", "peak"]),
       slack=st.sampled_from([None, 0.05, 0.5]), seed=st.integers(0, 2**16))
def test_on_small_planted_graphs_within_the_documented_gap_and_never_worse_than_heft_or_etf(
        n, k, ccr, rule, model, slack, seed):
    p = planted_dag(max(n, k), k, ccr=ccr, edges=rule, memory_model=model, memory_slack=slack, seed=seed)
    r = optpart.solve(p, "heuristic", memory_model=model)
    opt = p.meta["optimum"]
    if model == "peak" and slack == 0.05:   # tight liveness: a valid answer or an honest unknown, no gap claim
        assert r.status.has_solution or r.status is optpart.Status.UNKNOWN
        if r.status.has_solution:
            optpart.check(p, r)
            assert r.makespan >= opt * (1 - 1e-9)
        return
    optpart.check(p, r)
    assert r.status.has_solution, r.message   # the planted placement fits: one exists
    assert opt * (1 - 1e-9) <= r.makespan <= opt * (1 + SMALL_GAP), (r.makespan / opt - 1, r.stats["stages"])
    for base in ("heft", "etf"):
        b = optpart.solve(p, base, memory_model=model)
        if b.status.has_solution:
            assert r.makespan <= b.makespan * (1 + 1e-12), (base, r.makespan, b.makespan)
