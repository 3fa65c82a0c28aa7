"""A device map's step as accelerate runs it (optpart.export.sequential), against a brute-force oracle.

The oracle is written independently with plain loops: it runs the nodes one at a time in the
lowest-index-first topological order, moves each tensor once to every other device that reads
bytes of it (right after its producer), and sums the clock. Memory is checked against a
brute-force reading of the liveness rule (docs/model.md section 3): at every instant where an
interval begins, the bytes of every interval that covers it.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import oracle_run
from strategies import edge_case_problems, examples, placements, split_problems

import optpart
from optpart.export.sequential import program_order, sequential_run


def oracle_peak(problem, placement, start):
    """Peak bytes per device by the liveness rule, read interval by interval."""
    n, k = problem.n_nodes, problem.n_devices
    finish = start + problem.time / problem.device_speed[placement]
    makespan = float(finish.max()) if n else 0.0
    intervals = []  # (device, begin, end, bytes)
    for u in range(n):
        a = int(placement[u])
        ends = []
        copies: dict[int, list[float]] = {}
        for e in range(problem.n_edges):
            if int(problem.edge_src[e]) != u:
                continue
            v = int(problem.edge_dst[e])
            b = int(placement[v])
            if b == a:
                ends.append(float(finish[v]))
            else:
                arrive = float(finish[u]) + float(problem.latency[a, b]) + float(problem.edge_bytes[e]) / float(
                    problem.bandwidth[a, b])
                ends.append(arrive)
                first, last = copies.get(b, [np.inf, -np.inf])
                copies[b] = [min(first, arrive), max(last, float(finish[v]))]
        intervals.append((a, float(start[u]), max(ends) if ends else makespan, float(problem.output_bytes[u])))
        intervals.append((a, float(start[u]), float(finish[u]), float(problem.temp_bytes[u])))
        for b, (first, last) in copies.items():
            intervals.append((b, first, max(first, last), float(problem.output_bytes[u])))
    peak = np.zeros(k)
    for d in range(k):
        mine = [(b, e, s) for dev, b, e, s in intervals if dev == d and s > 0]
        for t in [b for b, _, _ in mine]:
            level = sum(s for b, e, s in mine if (b <= t < e) or (b == e == t))
            peak[d] = max(peak[d], level)
    base = np.bincount(placement, weights=problem.param_bytes, minlength=k)
    return base + peak


@st.composite
def placed(draw, strategy):
    problem = draw(strategy)
    return problem, draw(placements(problem))


@settings(max_examples=examples(60))
@given(placed(edge_case_problems()))
def test_the_run_is_the_oracles_one_node_at_a_time(case):
    """Zero, tiny (1e-9 s) and huge (1e6 s) times, equal times, views of 0 bytes, infinite bandwidth."""
    problem, placement = case
    run = sequential_run(problem, placement)
    start, total, moves = oracle_run(problem, placement)
    assert run.transfers == moves
    assert run.time == pytest.approx(total, rel=1e-9, abs=0.0)
    assert np.allclose(run.start, start, rtol=1e-9, atol=0.0)
    assert run.compute + run.transfer == pytest.approx(run.time, rel=1e-9, abs=0.0)
    # The schedule runs one node at a time: no two nodes overlap, whatever their devices.
    finish = run.start + problem.duration(placement)
    order = np.argsort(run.start, kind="stable")
    assert np.all(run.start[order][1:] >= finish[order][:-1] - 1e-9 * max(run.time, 1.0))
    # ... and every read of bytes on another device arrives before its reader starts.
    comm = problem.transfer_times(placement)
    data = problem.edge_bytes > 0
    src, dst = problem.edge_src[data], problem.edge_dst[data]
    assert np.all(run.start[dst] >= finish[src] + comm[data] - 1e-9 * max(run.time, 1.0))


@settings(max_examples=examples(40))
@given(placed(split_problems(max_nodes=8, max_devices=3)))
def test_memory_on_the_run_is_the_liveness_rule_read_interval_by_interval(case):
    problem, placement = case
    run = sequential_run(problem, placement)
    scored = optpart.evaluate(problem, placement, run.start)
    assert scored.makespan == pytest.approx(run.time, rel=1e-9, abs=1e-300)
    assert np.allclose(scored.memory_peak, oracle_peak(problem, placement, run.start), rtol=1e-9, atol=0.0)


def test_a_tensor_read_twice_on_another_device_moves_once_and_a_zero_byte_edge_not_at_all():
    p = optpart.Problem.build(
        nodes=[{"id": i, "time": 1.0, "memory": 1.0} for i in ("a", "b", "c", "d")],
        edges=[{"src": "a", "dst": "b", "bytes": 100}, {"src": "a", "dst": "c", "bytes": 50},
               {"src": "b", "dst": "d", "bytes": 0}, {"src": "c", "dst": "d", "bytes": 10}],
        links={"latency": 0.5, "bandwidth": 100.0}).with_devices(2, memory=10.0)
    run = sequential_run(p, np.array([0, 1, 1, 0]))
    # a -> dev1 once (the larger read: 0.5 + 1 s), c -> dev0 (0.6 s); b -> d carries no bytes.
    assert run.transfers == 2
    assert run.time == pytest.approx(4 + 1.5 + 0.6)
    assert run.start.tolist() == pytest.approx([0.0, 2.5, 3.5, 5.1])


def test_a_node_order_that_is_not_topological_runs_in_the_nearest_topological_order():
    p = optpart.Problem.build(nodes=[{"id": i, "time": 1.0, "memory": 0.0} for i in ("x", "y", "z")],
                              edges=[{"src": "z", "dst": "x", "bytes": 0}]).with_devices(1, memory=1.0)
    assert program_order(p).tolist() == [1, 2, 0]
