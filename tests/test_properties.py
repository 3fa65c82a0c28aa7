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
from optpart.problem import Device
from optpart.timeline import insertion_schedule, priority_order

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
#: time limit (their work is bounded by their own counters). MILP has no deterministic work
#: limit, so it keeps the safety net only (its tiny models solve in milliseconds).
EXACT_BUDGET = {"cpsat": {"deterministic_time": 20.0}, "milp": {}}
SAFETY_NET_S = 600


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
    devices[d] = Device(devices[d].id, float(used[d]) - 1.0, devices[d].speed)
    small = problem.with_devices(devices, links=problem.links, constraints=problem.constraints)
    r = optpart.evaluate(small, placement)
    assert any("holds" in v for v in violations(small, r))


# ------------------------------------------------------------------ 2. every solver passes the checker
@pytest.mark.parametrize("solver", FAST)
@given(problem=problems())
def test_every_fast_solver_result_passes_the_checker(solver, problem):
    r = solve(problem, solver)
    if r.ok:
        assert violations(problem, r) == []
        assert (r.memory_static <= problem.device_memory * (1 + 1e-9)).all()
    else:
        assert r.placement is None and r.message


@pytest.mark.parametrize("solver", EXACT)
@settings(max_examples=15)
@given(problem=problems(max_nodes=7, max_devices=3))
def test_every_exact_solver_result_passes_the_checker(solver, problem):
    r = solve(problem, solver)
    if r.ok:
        assert violations(problem, r) == []


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


@pytest.mark.skipif(not EXACT, reason="no exact solver installed")
@settings(max_examples=25)
@given(problem=tiny_problems(max_nodes=6, max_devices=3))
def test_exact_solvers_agree_with_brute_force(problem):
    from oracle import brute_force_makespan

    best = brute_force_makespan(problem)
    for solver in EXACT:
        r = solve(problem, solver)
        if best is None:
            assert r.status is Status.INFEASIBLE, (solver, r.status, r.message)
        else:
            assert r.status is Status.OPTIMAL, (solver, r.status, r.message)
            assert r.makespan == pytest.approx(best, rel=1e-6, abs=1e-9), solver
            assert all(b <= best + 1e-9 for b in optpart.all_bounds(problem).values())


# ------------------------------------------------------------------ 5. heuristic gap to the optimum
#: g: the heuristic's makespan is at most (1 + g) x the cpsat optimum. Measured by
#:     python benchmarks/heuristic_quality.py --part cpsat
#: on 237 random problems of 10-20 nodes (K 2-4, CCR 0.1-5, loose and tight memory), default
#: effort: mean gap 1.73%, p95 8.54%, max 28.98%. g is that maximum plus a margin; tightening
#: it is progress.
HEURISTIC_GAP_BOUND = 0.35


@pytest.mark.skipif("heuristic" not in AVAILABLE or "cpsat" not in AVAILABLE, reason="needs heuristic and cpsat")
@settings(max_examples=20)
@given(problem=problems(max_nodes=9, max_devices=3, memory=("loose", "just_enough")))
def test_heuristic_within_measured_gap_of_optimum(problem):
    opt = solve(problem, "cpsat")
    assume(opt.status is Status.OPTIMAL)
    h = solve(problem, "heuristic")
    assert h.ok, h.message
    assert h.makespan <= (1 + HEURISTIC_GAP_BOUND) * opt.makespan + 1e-9


# ------------------------------------------------------------------ 6. determinism and round trips
@pytest.mark.parametrize("solver", AVAILABLE)
@settings(max_examples=10)
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
#: Known failures, each reported to the solver's owner (a solver bug must not hide as a skip).
EDGE_CASE_XFAIL: dict[str, str] = {}


@pytest.mark.parametrize("solver", [pytest.param(s, marks=pytest.mark.xfail(reason=EDGE_CASE_XFAIL[s], strict=False))
                                    if s in EDGE_CASE_XFAIL else s for s in AVAILABLE])
# No shrinking: the examples are already tiny, and shrinking a known (xfail) failure costs minutes.
@settings(max_examples=15, phases=[Phase.explicit, Phase.reuse, Phase.generate])
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


def _topo_order(problem, priority) -> np.ndarray:
    """The topological order that, among ready nodes, takes the earliest in ``priority``."""
    import heapq

    rank = {v: i for i, v in enumerate(priority)}
    indeg = np.bincount(problem.edge_dst, minlength=problem.n_nodes).tolist()
    succ = [[] for _ in range(problem.n_nodes)]
    for u, w in zip(problem.edge_src.tolist(), problem.edge_dst.tolist()):
        succ[u].append(w)
    heap = [(rank[v], v) for v in range(problem.n_nodes) if indeg[v] == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        _, v = heapq.heappop(heap)
        out.append(v)
        for w in succ[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                heapq.heappush(heap, (rank[w], w))
    return np.asarray(out, dtype=np.int64)


def _bundled_instances() -> list:
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "instances"
    return sorted(p for p in root.rglob("*") if p.name.endswith((".json", ".json.gz")))


@pytest.mark.parametrize("path", _bundled_instances(), ids=lambda p: p.name)
def test_peak_memory_agrees_with_the_sweep_on_every_bundled_instance(path):
    problem = optpart.load(path)
    if problem.n_devices < 2:  # a graph file: the command line would give the devices
        problem = problem.with_devices([Device(f"g{i}", math.inf) for i in range(4)],
                                       links=optpart.Links(1e-5, 1e9, ()))
    problem = unlimited(problem)
    rng = np.random.default_rng(0)
    allowed = problem.allowed
    placement = np.array([rng.choice(np.flatnonzero(allowed[v])) for v in range(problem.n_nodes)], dtype=np.int64)
    for g in problem.groups:
        placement[g] = placement[g[0]]
    r = optpart.evaluate(problem, placement)
    assert (placement != placement[0]).any(), "the check must see transfers between devices"
    _assert_peak_matches_oracle(problem, placement, r)
