"""Property-based tests: the promises of optpart, checked by hypothesis on every CI run.

1. The checker accepts every evaluator schedule and rejects mutated ones.
2. Every solver's ``feasible``/``optimal`` result passes the checker.
3. The heuristic returns a feasible placement whenever capacities meet its sufficient condition.
4. Exact solvers agree with the brute force on tiny problems; lower bounds never exceed a valid makespan.
5. The heuristic stays within (1 + g) of the optimum on problems small enough for cpsat.
6. Determinism and JSON round-trip identity.
7. Arithmetic edge cases for every solver.
8. Peak memory agrees with an independent interval sweep (tests/oracle.py) on random problems,
   placements and schedules, and on every bundled instance.

Profiles (tests/conftest.py): ``ci`` (default) and ``thorough`` (HYPOTHESIS_PROFILE=thorough).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import Phase, assume, given, settings
from hypothesis import strategies as st

import optpart
from optpart import Status
from optpart.evaluate import bottom_levels, violations
from optpart.formats import problem_to_json, result_to_json
from optpart.model.memory import MEMORY_RTOL
from optpart.model.constraints import Constraints
from optpart.model.devices import Device, Links
from optpart.schedule.insertion import insertion_schedule
from optpart.model.paths import priority_order

from conftest import MILP_NODES
from oracle import sweep_peak
from strategies import edge_case_problems, examples, placements, problems, split_problems, tiny_problems

AVAILABLE = optpart.available_solvers()
EXACT = [s for s in ("cpsat", "milp") if s in AVAILABLE]
FAST = [s for s in AVAILABLE if s not in ("cpsat", "milp")]


def unlimited(problem):
    """The same problem with unlimited memory on every device."""
    return problem.with_devices([Device(d.id, math.inf, d.speed) for d in problem.devices],
                                links=problem.links, constraints=problem.constraints)


#: Deterministic budgets: CP-SAT stops on its deterministic time (machine-independent); the
#: wall-clock limit is a safety net never reached on these sizes. Heuristics run without a
#: time limit (their work is bounded by their own counters). MILP stops on a branch-and-bound
#: node count (``max_nodes``, a deterministic work limit).
EXACT_BUDGET = {"cpsat": {"deterministic_time": 20.0}, "milp": {"max_nodes": MILP_NODES}}
SAFETY_NET_S = 600


def assert_fits_by_the_sweep(problem, result) -> None:
    """A peak answer's schedule fits every device by tests/oracle.py's sweep, not optpart.model.memory."""
    if result.memory_model == "peak":
        used = sweep_peak(problem, result.placement, result.start, result.finish)
        assert (used <= problem.device_memory * (1 + 1e-9) + 1e-9).all(), (result.solver, used)


def solve(problem, solver, **kw):
    if solver in EXACT:
        kw.setdefault("time_limit", SAFETY_NET_S)
        kw.setdefault("deterministic", True)
        for key, value in EXACT_BUDGET.get(solver, {}).items():
            kw.setdefault(key, value)
    return optpart.solve(problem, solver, seed=0, **kw)


# ------------------------------------------------------------------ 1. the checker is tested
@given(st.data())
def test_checker_accepts_evaluator_schedules(data):
    problem = unlimited(data.draw(problems()))
    placement = data.draw(placements(problem))
    canonical = optpart.evaluate(problem, placement)
    assert violations(problem, canonical) == []
    order = priority_order(problem, bottom_levels(problem, placement))
    inserted = optpart.evaluate(problem, placement, insertion_schedule(problem, placement, order))
    assert violations(problem, inserted) == []


@given(st.data())
def test_checker_rejects_a_node_moved_earlier(data):
    problem = unlimited(data.draw(problems()))
    assume(problem.n_edges > 0)
    placement = data.draw(placements(problem))
    r = optpart.evaluate(problem, placement)
    e = data.draw(st.integers(0, problem.n_edges - 1))
    u, w = int(problem.edge_src[e]), int(problem.edge_dst[e])
    need = r.finish[u] + problem.transfer_times(placement)[e]
    r.start[w] = need - 1.0
    r.finish[w] = r.start[w] + problem.duration(placement)[w]
    r.makespan = float(r.finish.max())
    assert violations(problem, r), "a node starting before its input arrives must be rejected"


@given(st.data())
def test_checker_rejects_two_nodes_overlapped(data):
    problem = unlimited(data.draw(problems()))
    placement = data.draw(placements(problem))
    dur = problem.duration(placement)
    r = optpart.evaluate(problem, placement)
    busy = [v for v in range(problem.n_nodes) if dur[v] > 0]
    pairs = [(a, b) for a in busy for b in busy if a < b and placement[a] == placement[b]]
    assume(pairs)
    a, b = data.draw(st.sampled_from(pairs))
    r.start[b] = r.start[a]
    r.finish[b] = r.start[b] + dur[b]
    r.makespan = float(r.finish.max())
    assert violations(problem, r), "two nodes running at once on one device must be rejected"


@given(st.data())
def test_checker_rejects_an_overfilled_device(data):
    problem = data.draw(problems())
    placement = data.draw(placements(problem))
    used = optpart.static_memory(problem, placement)
    d = int(np.argmax(used))
    assume(used[d] > 0)
    devices = list(problem.devices)
    # One byte over, or (GiB-scale) just beyond the fit rule's float-noise allowance.
    over = max(1.0, math.ceil(2 * MEMORY_RTOL * float(used[d])))
    devices[d] = Device(devices[d].id, float(used[d]) - over, devices[d].speed)
    small = problem.with_devices(devices, links=problem.links, constraints=problem.constraints)
    r = optpart.evaluate(small, placement)
    assert any("holds" in v for v in violations(small, r))


def test_checker_rejects_a_device_one_byte_over_a_gib_capacity():
    gib = 2.0 ** 30
    p = optpart.Problem.from_arrays(["a", "b"], [1.0, 1.0], [gib, gib], [], [], [],
                                    devices=[Device("d0", 2 * gib - 1)])
    r = optpart.evaluate(p, np.zeros(2, dtype=np.int64))
    assert any("holds" in v for v in violations(p, r))


# ------------------------------------------------------------------ 2. every solver passes the checker
@pytest.mark.parametrize("solver", FAST)
@given(problem=problems())
def test_every_fast_solver_result_passes_the_checker(solver, problem):
    r = solve(problem, solver)
    if r.ok:
        assert violations(problem, r) == []
        assert (r.memory_static <= problem.device_memory * (1 + 1e-9)).all()
        assert_fits_by_the_sweep(problem, r)
    else:
        assert r.placement is None and r.message


@pytest.mark.parametrize("solver", EXACT)
@settings(max_examples=examples(15))
@given(problem=problems(max_nodes=7, max_devices=3))
def test_every_exact_solver_result_passes_the_checker(solver, problem):
    r = solve(problem, solver)
    if r.ok:
        assert violations(problem, r) == []
    else:
        assert r.placement is None and r.message, (solver, r.status)


# ------------------------------------------------------------------ 3. the heuristic's guarantee
@pytest.mark.skipif("heuristic" not in AVAILABLE, reason="the heuristic solver is not installed")
@given(problem=problems(max_nodes=14, memory=("just_enough",), pins=False))
def test_heuristic_is_feasible_under_its_sufficient_condition(problem):
    r = solve(problem, "heuristic")
    assert r.status in (Status.FEASIBLE, Status.OPTIMAL), r.message
    assert violations(problem, r) == []


# ------------------------------------------------------------------ 4. exact agreement and bounds
@given(st.data())
def test_lower_bounds_never_exceed_a_valid_makespan(data):
    problem = data.draw(problems())
    placement = data.draw(placements(problem))
    r = optpart.evaluate(unlimited(problem), placement)
    for name, bound in optpart.all_bounds(problem).items():
        assert bound <= r.makespan + 1e-9, name


# Nanosecond-scale times (2**-30 s) are pinned by the two one-case tests below (once wrong
# answers: an absolute 1e-9 floor in the exact grid and in milp's bound); the derandomized
# examples drawn here do not reach them.
@pytest.mark.parametrize(("solver", "scales"), [
    pytest.param(s, scaled, id=f"{s}-{'scaled' if scaled else 'unit'}")
    for s in EXACT for scaled in (False, True)])
# No shrinking: the examples are tiny, and shrinking a failure here once cost minutes.
@settings(max_examples=examples(25), phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(data=st.data())
def test_exact_solvers_agree_with_brute_force(solver, scales, data):
    """``unit``: integer times and bytes; ``scaled``: also equal times, 2**-30 s and 2**20 s time
    units and GiB-scale memories (exact binary fractions: both solvers must stay exact)."""
    from oracle import brute_force_makespan

    problem = data.draw(tiny_problems(max_nodes=6, max_devices=3, scales=scales))
    best = brute_force_makespan(problem)
    r = solve(problem, solver)
    if best is None:
        assert r.status is Status.INFEASIBLE, (solver, r.status, r.message)
    else:
        assert r.status is Status.OPTIMAL, (solver, r.status, r.message)
        assert r.makespan == pytest.approx(best, rel=1e-6, abs=1e-9 * min(1.0, best)), solver
        assert all(b <= best * (1 + 1e-9) for b in optpart.all_bounds(problem).values())


@pytest.mark.skipif("cpsat" not in EXACT, reason="cpsat is not installed")
def test_cpsat_places_a_nanosecond_node_on_a_fast_device():
    p = optpart.Problem.from_arrays(["a"], [2.0 ** -30], [73.0], [], [], [], devices=[Device("d0", 82.0, 2.0)])
    r = solve(p, "cpsat")
    assert r.status is Status.OPTIMAL and r.makespan == 2.0 ** -31, (r.status, r.message)


@pytest.mark.skipif("milp" not in EXACT, reason="milp is not installed")
def test_milp_proves_a_nanosecond_chain_optimal():
    u = 2.0 ** -30
    p = optpart.Problem.from_arrays(["a", "b"], [3 * u, 5 * u], [1.0, 1.0], [0], [1], [0.0],
                                    devices=[Device("d0", 10.0)])
    r = solve(p, "milp")
    assert r.status is Status.OPTIMAL and r.makespan == 8 * u, (r.status, r.message)


# ------------------------------------------------------------------ 5. heuristic gap to the optimum
#: g: the heuristic's makespan is at most (1 + g) x the cpsat optimum, measured on this test's
#: own distribution (the strategy below, 300 draws with hypothesis seed 0) by
#:     nice -n 10 python benchmarks/property_gap.py --examples 300
#: 253 problems with a proven optimum: mean gap 0.08%, p95 0.00%, max 20.45%. g is that
#: maximum plus a margin; tightening it is progress. (benchmarks/heuristic_quality.py --part
#: cpsat measures other sizes: 10-20 nodes, max 28.98%.)
HEURISTIC_GAP_BOUND = 0.25


@pytest.mark.skipif("heuristic" not in AVAILABLE or "cpsat" not in AVAILABLE, reason="needs heuristic and cpsat")
@settings(max_examples=examples(20))
@given(problem=problems(max_nodes=9, max_devices=3, memory=("loose", "just_enough")))
def test_heuristic_within_measured_gap_of_optimum(problem):
    opt = solve(problem, "cpsat")
    assume(opt.status is Status.OPTIMAL)
    h = solve(problem, "heuristic")
    assert h.ok, h.message
    assert h.makespan <= (1 + HEURISTIC_GAP_BOUND) * opt.makespan + 1e-9


# ------------------------------------------------------------------ 6. determinism and round trips
@pytest.mark.skipif("milp" not in EXACT, reason="milp is not installed")
def test_milp_answers_a_zero_time_diamond_with_a_colocated_triple():
    """Found by the properties below: four zero-time, zero-memory nodes, a - (b, c) - d, with
    a, b, c colocated, on one device. Every placement is optimal with makespan 0."""
    p = optpart.Problem.from_arrays(["a", "b", "c", "d"], [0.0] * 4, [0.0] * 4, [0, 0, 1, 2], [1, 2, 3, 3],
                                    [0.0] * 4, devices=[Device("d0", 1.0)], links=Links(0.0, 1.0),
                                    constraints=Constraints(colocate=(("a", "b", "c"),)))
    r = solve(p, "milp")
    assert r.status is Status.OPTIMAL and r.makespan == 0.0, (r.status, r.message)


@pytest.mark.parametrize("solver", AVAILABLE)
@settings(max_examples=examples(10))
@given(problem=problems(max_nodes=8, max_devices=3))
def test_solvers_are_deterministic(solver, problem):
    a = solve(problem, solver)
    b = solve(problem, solver)
    assert _without_wall_times(a, problem) == _without_wall_times(b, problem)


def _without_wall_times(result, problem) -> dict:
    """The result document without wall times (``wall_seconds`` and stats such as ``search_seconds``;
    CP-SAT's ``deterministic_seconds`` stays: it is deterministic)."""
    import json
    doc = json.loads(result_to_json(result, problem, include_wall_time=False))
    stats = doc.get("stats", {})
    for key in [k for k in stats if k.endswith("_seconds") and k != "deterministic_seconds"]:
        del stats[key]
    return doc


#: Run in a fresh interpreter: every installed solver on one problem with pins (one on a
#: colocated node), forbids and groups of three, then the pipeline orders (gpipe, 1f1b) and the
#: pipelined heuristic on two micro-batches; prints each result without wall times.
_DETERMINISM_SCRIPT = """
import json, sys
import optpart
from optpart.formats import result_to_json
from optpart.generators import training_graph
from optpart.model.problem import Constraints

base = training_graph(2, k=3, memory_slack=3.5, seed=5)  # one device holds all: `single` answers too
problem = base.with_devices(base.devices, links=base.links, constraints=Constraints(
    pin={"w0": "dev1"}, forbid={"f1.1": ("dev2",), "loss": ("dev0",)}, colocate=base.constraints.colocate))
budgets = json.loads(sys.argv[1])
for name in optpart.available_solvers():
    r = optpart.solve(problem, name, seed=0, **budgets.get(name, {}))
    doc = json.loads(result_to_json(r, problem, include_wall_time=False))
    stats = doc.get("stats", {})
    for key in [k for k in stats if k.endswith("_seconds") and k != "deterministic_seconds"]:
        del stats[key]
    print(name, json.dumps(doc, sort_keys=True))
# The pipeline orders and the pipelined heuristic, on two micro-batches of a generated step.
from optpart.pipeline import PipelineStep
step = training_graph(5, k=3, memory_slack=3.0, seed=0)
for name in ("gpipe", "1f1b", "heuristic"):
    r = optpart.solve(step, name, seed=0, micro_batches=2, **({"effort": 0.2} if name == "heuristic" else {}))
    doc = json.loads(result_to_json(r, PipelineStep(step, 2).unrolled(), include_wall_time=False))
    stats = doc.get("stats", {})
    for key in [k for k in stats if k.endswith("_seconds") and k != "deterministic_seconds"]:
        del stats[key]
    print(name + "@2", json.dumps(doc, sort_keys=True))
"""


def test_every_solver_gives_byte_identical_results_across_processes_and_hash_seeds():
    """The same input in two interpreters with different ``PYTHONHASHSEED`` (string hashing, so
    set and dict-of-set orders differ) gives the same bytes from every solver."""
    import json
    import os
    import subprocess
    import sys

    budgets = {s: {"deterministic": True, "time_limit": SAFETY_NET_S, **EXACT_BUDGET.get(s, {})} for s in EXACT}
    budgets.get("cpsat", {})["deterministic_time"] = 2.0  # milp: its branch-and-bound node limit
    procs = [subprocess.Popen([sys.executable, "-c", _DETERMINISM_SCRIPT, json.dumps(budgets)],
                              env={**os.environ, "PYTHONHASHSEED": hash_seed},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for hash_seed in ("0", "4242")]
    outputs = []
    for proc in procs:  # both run at once
        out, err = proc.communicate(timeout=SAFETY_NET_S)
        assert proc.returncode == 0, err.decode()
        outputs.append(out)
    lines = outputs[0].decode().splitlines()
    assert [line.split(" ", 1)[0] for line in lines] == AVAILABLE + ["gpipe@2", "1f1b@2", "heuristic@2"]
    assert sum('"status": "optimal"' in line or '"status": "feasible"' in line for line in lines) == len(lines), \
        f"every solver must answer, or the comparison checks only an error message: {lines}"
    for a, b in zip(outputs[0].decode().splitlines(), outputs[1].decode().splitlines()):
        assert a == b, f"{a.split(' ', 1)[0]} differs between hash seeds"
    assert outputs[0] == outputs[1]


@given(problem=problems())
def test_problem_json_round_trip(tmp_path_factory, problem):
    path = tmp_path_factory.mktemp("rt") / "p.json"
    optpart.save(problem, path)
    back = optpart.load(path)
    assert problem_to_json(back) == problem_to_json(problem)
    assert back.topo.tolist() == problem.topo.tolist()


@given(st.data())
def test_result_json_round_trip(tmp_path_factory, data):
    problem = unlimited(data.draw(problems()))
    placement = data.draw(placements(problem))
    r = optpart.evaluate(problem, placement, solver="prop")
    path = tmp_path_factory.mktemp("rr") / "r.json"
    optpart.save_result(r, problem, path)
    back = optpart.load_result(path, problem)
    assert result_to_json(back, problem, include_wall_time=False) == result_to_json(r, problem, include_wall_time=False)


# ------------------------------------------------------------------ 7. arithmetic edge cases
@pytest.mark.parametrize("solver", AVAILABLE)
# No shrinking: the examples are already tiny, and shrinking a failure here once cost minutes.
@settings(max_examples=examples(15), phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(problem=edge_case_problems())
def test_every_solver_on_arithmetic_edge_cases(solver, problem):
    """Zero-time nodes, 1e-9 s and 1e6 s units, equal finish times, chained views, peak vs
    static: every answer passes the checker under the model it names, and the evaluator's own
    schedule of a placement is always valid."""
    for model in ("peak", "static"):
        r = solve(problem, solver, memory_model=model)
        assert r.memory_model == model
        if r.ok:
            optpart.check(problem, r)
            assert_fits_by_the_sweep(problem, r)
        else:
            assert r.placement is None and r.message
            assert r.status is not Status.INFEASIBLE or problem.infeasibility(model) is not None \
                or solver in EXACT, (solver, model, r.message)
    placement = np.zeros(problem.n_nodes, dtype=np.int64)
    for g in problem.groups:
        placement[g] = placement[g[0]]
    assert not violations(unlimited(problem), optpart.evaluate(unlimited(problem), placement))


# ------------------------------------------------------------------ 8. an independent peak-memory oracle
def _assert_peak_matches_oracle(problem, placement, result) -> None:
    expected = sweep_peak(problem, placement, result.start, result.finish)
    np.testing.assert_allclose(result.memory_peak, expected, rtol=1e-9, atol=1e-9)


def test_sweep_oracle_on_hand_computed_cases():
    """The oracle itself, on figures worked out by hand from docs/model.md section 3."""
    two = [Device("d0", math.inf), Device("d1", math.inf)]
    p = optpart.Problem.from_arrays(
        ["a", "b", "z"], [1.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0, 1], [1, 2], [4.0, 0.0], devices=two,
        links=optpart.Links(1.0, 4.0, ()), param_bytes=[100.0, 0.0, 0.0], output_bytes=[10.0, 5.0, 0.0],
        temp_bytes=[0.0, 3.0, 50.0])
    # One device: a [0,1) then b [1,2) then z at the instant 2. At 1: 100 (a's parameters) + 10
    # (a's output, live until b ends) + 5 + 3 (b's output and temp) = 118. At 2 the half-open
    # intervals [0,2) and [1,2) are over and z's temp counts at its instant: 100 + 50.
    assert sweep_peak(p, [0, 0, 0], [0, 1, 2], [1, 2, 2]).tolist() == [150.0, 0.0]
    # a on d0, b and z on d1: the transfer lands at 1 + 1 + 4/4 = 3; a's output lives on d0 over
    # [0, 3) beside its parameters; on d1 the copy (10), b's output and temp (5 + 3) over [3, 4),
    # then z's temp alone at the instant 4.
    assert sweep_peak(p, [0, 1, 1], [0, 3, 4], [1, 4, 4]).tolist() == [110.0, 50.0]


@given(st.data())
def test_peak_memory_agrees_with_an_independent_sweep(data):
    problem = unlimited(data.draw(split_problems()))
    placement = data.draw(placements(problem))
    canonical = optpart.evaluate(problem, placement)
    _assert_peak_matches_oracle(problem, placement, canonical)
    # A second valid schedule of the same placement: a random topological order, inserted.
    order = data.draw(st.permutations(range(problem.n_nodes)))
    inserted = optpart.evaluate(problem, placement, insertion_schedule(problem, placement, _topo_order(problem, order)))
    assert violations(problem, inserted) == []
    _assert_peak_matches_oracle(problem, placement, inserted)


def _topo_order(problem, permutation) -> np.ndarray:
    """The topological order that, among ready nodes, takes the earliest in ``permutation``."""
    position = np.empty(problem.n_nodes)
    position[np.asarray(permutation, dtype=np.int64)] = np.arange(problem.n_nodes)
    from optpart.schedule.graph import Graph
    from optpart.schedule.graph import topological_order as topological_priority

    return np.asarray(topological_priority(Graph(problem), -position), dtype=np.int64)


def _bundled_instances() -> list:
    from conftest import INSTANCES

    return sorted(p for p in INSTANCES.rglob("*") if p.name.endswith((".json", ".json.gz")))


@pytest.mark.parametrize("path", _bundled_instances(), ids=lambda p: p.name)
def test_peak_memory_agrees_with_the_sweep_on_every_bundled_instance(path):
    problem = optpart.load(path)
    if problem.n_devices < 2:  # a graph file: the command line would give the devices
        problem = problem.with_devices([Device(f"g{i}", math.inf) for i in range(4)],
                                       links=optpart.Links(1e-5, 1e9, ()))
    problem = unlimited(problem)
    rng = np.random.default_rng(0)
    allowed = problem.allowed
    placement = np.argmax(rng.random(allowed.shape) * allowed, axis=1).astype(np.int64)  # any allowed device
    for g in problem.groups:
        placement[g] = placement[g[0]]
    r = optpart.evaluate(problem, placement)
    assert (placement != placement[0]).any(), "the check must see transfers between devices"
    _assert_peak_matches_oracle(problem, placement, r)
