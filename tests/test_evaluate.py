"""The evaluator on hand-computed schedules, and the checker tested against mutations."""

from __future__ import annotations

import numpy as np
import pytest

import optpart
from optpart import Device, Problem, ScheduleError, Status
from optpart.evaluate import bottom_levels, canonical_schedule, peak_memory, static_memory, violations


def test_diamond_by_hand(diamond):
    # a, b, d on gpu0 and c on gpu1; a transfer takes 0.5 + 10/10 = 1.5 s.
    # a [0,1]; b [1,3]; c ready 1+1.5 = 2.5 -> [2.5,5.5]; d ready max(3, 5.5+1.5) = 7 -> [7,8].
    start, finish = canonical_schedule(diamond, [0, 0, 1, 0])
    assert start.tolist() == [0.0, 1.0, 2.5, 7.0]
    assert finish.tolist() == [1.0, 3.0, 5.5, 8.0]
    r = optpart.evaluate(diamond, [0, 0, 1, 0])
    assert r.makespan == 8.0 and r.status is Status.FEASIBLE
    assert r.memory_static.tolist() == [12.0, 4.0]
    optpart.check(diamond, r)


def test_single_device_order_follows_bottom_level():
    # x and y ready at 0 on one device; y leads to z (5 s), so y and then z run before x,
    # although x has the lower index.
    p = Problem.build(nodes=[{"id": "x", "time": 1, "memory": 0}, {"id": "y", "time": 1, "memory": 0},
                             {"id": "z", "time": 5, "memory": 0}],
                      edges=[{"src": "y", "dst": "z"}], devices=[Device("g", 1)])
    assert bottom_levels(p, [0, 0, 0]).tolist() == [1.0, 6.0, 5.0]
    start, finish = canonical_schedule(p, [0, 0, 0])
    assert start.tolist() == [6.0, 0.0, 1.0] and finish.max() == 7.0


def test_ties_go_to_the_lower_index_and_idle_devices_wait():
    p = Problem.build(nodes=[{"id": "s", "time": 2, "memory": 0}, {"id": "p", "time": 1, "memory": 0},
                             {"id": "q", "time": 1, "memory": 0}],
                      edges=[{"src": "s", "dst": "p", "bytes": 0}, {"src": "s", "dst": "q", "bytes": 0}],
                      devices=[Device("g0", 1), Device("g1", 1)], links={"latency": 3, "bandwidth": "inf"})
    # s on g0; p and q on g1 wait for s (2) plus latency (3); equal priority: p (lower index) first.
    start, finish = canonical_schedule(p, [0, 1, 1])
    assert start.tolist() == [0.0, 5.0, 6.0]


def test_speed_divides_time():
    p = Problem.build(nodes=[{"id": "a", "time": 4, "memory": 0}], devices=[Device("slow", 1, 1.0), Device("fast", 1, 4.0)])
    assert optpart.evaluate(p, [1]).makespan == 1.0
    assert optpart.evaluate(p, [0]).makespan == 4.0


def test_peak_memory_by_hand():
    # a -> b on one device. a: param 1, output 10, temp 3; b: param 1, output 5.
    # t in [0,1): params 2 + a.temp 3 + a.out 10 = 15; [1,2): params 2 + a.out 10 + b.out 5 = 17.
    p = Problem.build(nodes=[{"id": "a", "time": 1, "param_bytes": 1, "output_bytes": 10, "temp_bytes": 3},
                             {"id": "b", "time": 1, "param_bytes": 1, "output_bytes": 5}],
                      edges=[{"src": "a", "dst": "b", "bytes": 10}], devices=[Device("g", 100), Device("h", 100)],
                      links={"latency": 1, "bandwidth": "inf"})
    r = optpart.evaluate(p, [0, 0])
    assert r.memory_static.tolist() == [20.0, 0.0]
    assert r.memory_peak.tolist() == [17.0, 0.0]
    # Across devices: a on g [0,1]; its output lives on g until the transfer lands at 2;
    # the copy on h lives from 2 until b finishes at 3. g: 1 + 3 + 10 = 14; h: 1 + 10 + 5 = 16.
    r = optpart.evaluate(p, [0, 1])
    assert r.finish.tolist() == [1.0, 3.0]
    assert r.memory_peak.tolist() == [14.0, 16.0]


def test_peak_equals_static_without_split(diamond):
    r = optpart.evaluate(diamond, [0, 1, 1, 0])
    assert np.array_equal(r.memory_peak, r.memory_static)


def _valid(diamond):
    r = optpart.evaluate(diamond, [0, 0, 1, 0])
    assert violations(diamond, r) == []
    return r


def test_checker_rejects_a_node_moved_earlier(diamond):
    r = _valid(diamond)
    r.start[3] -= 0.5
    r.finish[3] -= 0.5
    r.makespan = float(r.finish.max())
    with pytest.raises(ScheduleError, match="edge 'c' -> 'd'"):
        optpart.check(diamond, r)


def test_checker_rejects_overlap(diamond):
    r = _valid(diamond)
    r.placement = np.array([0, 0, 0, 0])  # b [1,3] and c [2.5,5.5] now share gpu0
    r.start[2], r.finish[2] = 2.5, 5.5
    assert any("overlap" in v for v in violations(diamond, r))


def test_checker_rejects_memory_overflow(diamond):
    small = diamond.with_devices([Device("gpu0", 11), Device("gpu1", 12)])
    r = optpart.evaluate(small, [0, 0, 1, 0])
    assert any("device 'gpu0' holds" in v for v in violations(small, r))


def test_checker_rejects_wrong_duration_makespan_and_status(diamond):
    r = _valid(diamond)
    r.finish[0] = 0.5
    assert any("runs 0.5" in v for v in violations(diamond, r))
    r = _valid(diamond)
    r.makespan = 7.0
    assert any("reported makespan" in v for v in violations(diamond, r))
    r = _valid(diamond)
    r.status = Status.OPTIMAL
    assert any("status 'optimal'" in v for v in violations(diamond, r))


def test_checker_rejects_broken_constraints():
    p = Problem.build(nodes=[{"id": x, "time": 1, "memory": 1} for x in "abc"],
                      devices=[Device("g0", 9), Device("g1", 9)],
                      constraints={"pin": {"a": "g1"}, "colocate": [["b", "c"]]})
    r = optpart.evaluate(p, [0, 0, 1])
    found = " | ".join(violations(p, r))
    assert "node 'a' is on device 'g0'" in found and "split over devices" in found


def test_evaluator_accepts_a_solver_schedule(diamond):
    r = optpart.evaluate(diamond, [0, 0, 1, 0], start=np.array([0.0, 1.0, 2.5, 7.5]))
    assert r.makespan == 8.5 and violations(diamond, r) == []


def test_bounds(diamond):
    b = optpart.all_bounds(diamond)
    assert b == {"critical_path": 5.0, "work": 3.5, "largest_node": 3.0}
    assert optpart.lower_bound(diamond) == 5.0
    fast = diamond.with_devices([Device("gpu0", 12, 2.0), Device("gpu1", 12, 1.0)])
    assert optpart.all_bounds(fast) == {"critical_path": 2.5, "work": 7 / 3, "largest_node": 1.5}


def test_bounds_respect_pins():
    p = Problem.build(nodes=[{"id": "a", "time": 4, "memory": 0}], devices=[Device("slow", 1, 1.0), Device("fast", 1, 4.0)],
                      constraints={"pin": {"a": "slow"}})
    assert optpart.critical_path_bound(p) == 4.0


def test_static_memory_is_a_bincount(diamond):
    assert static_memory(diamond, [1, 1, 1, 0]).tolist() == [4.0, 12.0]
    assert peak_memory(diamond, [1, 1, 1, 0], *canonical_schedule(diamond, [1, 1, 1, 0])).tolist() == [4.0, 12.0]


def test_random_placements_are_always_valid():
    from optpart.generators import layered_dag
    rng = np.random.default_rng(0)
    for seed in range(20):
        p = layered_dag(40, k=3, seed=seed, ccr=2.0)
        placement = rng.integers(0, 3, size=p.n_nodes)
        r = optpart.evaluate(p, placement)
        assert violations(p, r) == []
        assert r.makespan >= optpart.lower_bound(p) - 1e-9
