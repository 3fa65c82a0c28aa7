"""Unit moves of ``cpsat`` on large graphs (``optpart/solvers/exact/lns.py``).

Budgets are CP-SAT deterministic seconds, never wall time.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import optpart
from optpart import Device, Problem, Status
from optpart.evaluate import canonical_schedule
from optpart.model.memory import overflow_message
from optpart.model.devices import Links
from optpart.generators import layered_dag
from optpart.schedule.replay import schedule_tails, tighten_schedule
from optpart.solvers.exact import lns
from optpart.solvers.exact.call import Budget

from strategies import examples, placements, problems, split_problems, zero_time_problems

INSTANCES = Path(__file__).resolve().parents[2] / "instances"


def _makespan(problem: Problem, place: np.ndarray, start: np.ndarray) -> float:
    return float((start + problem.duration(place)).max()) if problem.n_nodes else 0.0


def _valid(problem: Problem, place: np.ndarray, start: np.ndarray, memory_model: str) -> float:
    """The schedule's makespan after the evaluator accepted it (precedence, devices, memory)."""
    r = optpart.evaluate(problem, place, start, memory_model=memory_model)
    assert r.status is Status.FEASIBLE, r.message
    assert overflow_message(problem, place, start, start + problem.duration(place), memory_model) is None
    return float(r.makespan)


def _chain(n: int = 4) -> Problem:
    """A chain of unit-time nodes whose tensors take 5 s to cross the link between two devices."""
    ids = [f"v{i}" for i in range(n)]
    return Problem.from_arrays(ids, [1.0] * n, [1.0] * n, list(range(n - 1)), list(range(1, n)), [10.0] * (n - 1),
                               devices=[Device("g0", 100.0), Device("g1", 100.0)], links=Links(0.0, 2.0),
                               name="chain")


def test_a_move_that_removes_a_crossing_is_found_and_one_that_adds_one_is_refused():
    p = _chain()
    place = np.array([0, 0, 1, 1])
    start = canonical_schedule(p, place)[0]
    assert _makespan(p, place, start) == 9.0  # 4 s of work and one 5 s crossing
    got, spent = lns.retime_move(p, place, start, np.array([2, 3]), 0, seconds=math.inf, dtime=1.0)
    assert got is not None and spent >= 0
    new_place, key, key_end = got
    new_start = tighten_schedule(p, new_place, key, key_end)
    assert new_place.tolist() == [0, 0, 0, 0]
    assert _valid(p, new_place, new_start, "static") == 4.0
    # Node 1 alone to g1 adds a second crossing: no shorter schedule, proven by the sub-solve.
    got, _ = lns.retime_move(p, place, start, np.array([1]), 1, seconds=math.inf, dtime=1.0)
    assert got is None


def test_moves_are_whole_groups_on_allowed_devices_and_nearest_the_critical_crossing_first():
    p = _chain(6)
    anchor = np.arange(6)  # every node its own anchor: the cut is where the device changes
    order = np.arange(6)
    place = np.array([0, 0, 0, 1, 1, 1])
    start = canonical_schedule(p, place)[0]
    moves = list(lns.unit_moves(p, anchor, order, place, start))
    assert moves, "a cut gives moves"
    first_nodes, first_dev = moves[0]
    assert (first_nodes.tolist(), first_dev) in (([2], 1), ([3], 0))
    for nodes, d in moves:
        assert nodes.size and np.all(place[nodes] != d)
    assert len({(d, nodes.tobytes()) for nodes, d in moves}) == len(moves)


def test_unit_moves_shorten_the_heuristics_schedule_of_a_real_step():
    """On DenseNet-121's bundled training step the moves find a shorter schedule than the
    heuristic's within a deterministic budget, and it fits under peak."""
    p = optpart.load(INSTANCES / "densenet121-training.json")
    r = optpart.solve(p, "heuristic", seed=0, memory_model="peak")
    place, start = np.asarray(r.placement, dtype=np.int64), np.asarray(r.start)
    new_place, new_start, stats = lns.improve_units(p, place, start, Budget(math.inf), memory_model="peak",
                                                   reserve=0.0, max_dtime=3.0)
    ms = _valid(p, new_place, new_start, "peak")
    assert stats["unit_improvements"] >= 1 and stats["unit_end_makespan"] == ms
    assert ms < r.makespan, (ms, r.makespan)


def _start(problem: Problem, place: np.ndarray, memory_model: str):
    start = canonical_schedule(problem, place)[0]
    if overflow_message(problem, place, start, start + problem.duration(place), memory_model) is not None:
        return None
    return start


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(problems(max_nodes=14, max_devices=4), split_problems(max_nodes=14, max_devices=3),
                 zero_time_problems(max_nodes=12, max_devices=3)),
       st.sampled_from(["static", "peak"]), st.data())
def test_unit_moves_never_lengthen_and_always_fit(problem, memory_model, data):
    place = data.draw(placements(problem))
    if not problem.respects_constraints(place):
        return
    start = _start(problem, place, memory_model)
    if start is None:
        return
    ms0 = _makespan(problem, place, start)
    runs = [lns.improve_units(problem, place, start, Budget(math.inf), memory_model=memory_model,
                             reserve=0.0, max_dtime=0.5) for _ in range(2)]
    new_place, new_start, stats = runs[0]
    assert problem.respects_constraints(new_place)
    ms = _valid(problem, new_place, new_start, memory_model)
    assert ms <= ms0 * (1 + 1e-12)
    assert stats["unit_end_makespan"] == ms and stats["unit_start_makespan"] == ms0
    assert (ms < ms0) == (stats["unit_improvements"] > 0)
    # Deterministic under a deterministic budget: the same answer twice.
    assert np.array_equal(runs[1][0], new_place) and np.array_equal(runs[1][1], new_start)


def _valid(problem: optpart.Problem, place: np.ndarray, start: np.ndarray, memory_model: str) -> float:
    """The schedule's makespan after the evaluator accepted it."""
    r = optpart.evaluate(problem, place, start, memory_model=memory_model)
    assert r.status is Status.FEASIBLE, r.message
    assert overflow_message(problem, place, start, start + problem.duration(place), memory_model) is None
    return float(r.makespan)


def test_windows_improve_a_one_device_schedule_and_stay_valid():
    p = layered_dag(160, k=4, seed=5, memory_slack=2.0)
    place = (p.topo_rank % 4).astype(np.int64)  # round robin: valid, and far from good
    assert np.all(optpart.static_memory(p, place) <= p.device_memory)
    start = canonical_schedule(p, place)[0]
    ms0 = float((start + p.duration(place)).max())
    new_place, new_start, stats = lns.improve_windows(p, place, start, Budget(math.inf), memory_model="static",
                                                     reserve=0.0, size=60, max_windows=4)
    ms = _valid(p, new_place, new_start, "static")
    assert stats["window_solves"] >= 1 and stats["window_end_makespan"] == ms
    assert ms < ms0 * (1 - 1e-3), (ms, ms0)


def test_tails_meet_the_makespan_on_the_critical_path():
    p = layered_dag(40, k=3, seed=2)
    place = np.asarray(optpart.solve(p, "heft").placement, dtype=np.int64)
    start = canonical_schedule(p, place)[0]
    ms = float((start + p.duration(place)).max())
    tail = schedule_tails(p, place, start)
    assert np.all(start + tail <= ms * (1 + 1e-12))
    assert np.isclose((start + tail).max(), ms, rtol=1e-12)


def test_cpsat_searches_windows_on_a_large_peak_graph_never_worse_than_the_heuristic():
    p = optpart.load(INSTANCES / "resnet50-training.json")
    assert p.n_nodes >= 600 and p.has_split
    r = optpart.solve(p, "cpsat", memory_model="peak", deterministic_time=0.3, seed=0)
    optpart.check(p, r)
    assert r.status is Status.FEASIBLE
    assert r.stats["window_solves"] >= 1
    assert r.makespan <= r.stats["heuristic_makespan"] * (1 + 1e-12)
    assert 0 < r.lower_bound <= r.makespan
    _valid(p, np.asarray(r.placement), np.asarray(r.start), "peak")
