"""The model and its validation: every bad input names its culprit."""

from __future__ import annotations

import math

import numpy as np
import pytest

import optpart
from optpart import Device, Problem, ProblemError

from conftest import budget


def build(nodes, edges=(), devices=None, **kw):
    return Problem.build(nodes=nodes, edges=edges, devices=devices, **kw)


N2 = [{"id": "a", "time": 1, "memory": 1}, {"id": "b", "time": 1, "memory": 1}]


def test_arrays_csr_and_topological_order():
    p = build([{"id": x, "time": 1, "memory": 1} for x in "dcba"],
              [{"src": "d", "dst": "a"}, {"src": "c", "dst": "a"}, {"src": "b", "dst": "c"}])
    assert p.n_nodes == 4 and p.n_edges == 3
    pos = {v: i for i, v in enumerate(p.topo.tolist())}
    for s, t in zip(p.edge_src, p.edge_dst):
        assert pos[s] < pos[t]
    a = p.node_index["a"]
    preds = sorted(p.node_ids[p.edge_src[e]] for e in p.in_edges[p.in_ptr[a]:p.in_ptr[a + 1]])
    assert preds == ["c", "d"]
    assert p.topo.tolist() == [0, 2, 1, 3]  # Kahn, FIFO in index order: d, b, then c, then a


def test_cycle_names_a_node_on_it():
    with pytest.raises(ProblemError, match=r"cycle: node '(b|c|d)'"):
        build([{"id": x, "time": 1, "memory": 1} for x in "abcd"],
              [{"src": "a", "dst": "b"}, {"src": "b", "dst": "c"}, {"src": "c", "dst": "d"},
               {"src": "d", "dst": "b"}])


def test_self_loop_is_a_cycle():
    with pytest.raises(ProblemError, match="node 'a' has an edge to itself"):
        build(N2, [{"src": "a", "dst": "a"}])


def test_duplicate_id():
    with pytest.raises(ProblemError, match="duplicate node id 'a'"):
        build(N2 + [{"id": "a", "time": 1, "memory": 1}])


def test_duplicate_edge():
    with pytest.raises(ProblemError, match="duplicate edge 'a' -> 'b'"):
        build(N2, [{"src": "a", "dst": "b"}, {"src": "a", "dst": "b", "bytes": 3}])


def test_edge_to_unknown_node():
    with pytest.raises(ProblemError, match="edge 'a' -> 'zz' names unknown node 'zz'"):
        build(N2, [{"src": "a", "dst": "zz"}])


@pytest.mark.parametrize("field,value", [("time", -1.0), ("time", math.nan), ("time", math.inf),
                                         ("memory", -5), ("memory", math.nan)])
def test_bad_node_numbers(field, value):
    nodes = [dict(N2[0]), dict(N2[1])]
    nodes[1][field] = value
    with pytest.raises(ProblemError, match=f"node 'b' has {field}="):
        build(nodes)


def test_non_numeric_node_field():
    with pytest.raises(ProblemError, match="node 'a' has time='fast'"):
        build([{"id": "a", "time": "fast", "memory": 1}])


def test_bad_edge_bytes():
    with pytest.raises(ProblemError, match="edge 'a' -> 'b' has bytes=-1"):
        build(N2, [{"src": "a", "dst": "b", "bytes": -1}])


def test_bad_device_and_links():
    with pytest.raises(ProblemError, match="device 'g' has speed=0"):
        build(N2, devices=[{"id": "g", "memory": 1, "speed": 0}])
    with pytest.raises(ProblemError, match="links has bandwidth=-3"):
        build(N2, devices=[Device("g", 1)], links={"latency": 0, "bandwidth": -3})
    with pytest.raises(ProblemError, match="unknown device 'nope'"):
        build(N2, devices=[Device("g", 1), Device("h", 1)],
              links={"latency": 0, "bandwidth": 1, "pairs": [{"src": "g", "dst": "nope", "latency": 0, "bandwidth": 1}]})


def test_node_larger_than_every_device_is_infeasible_not_an_error():
    p = build([{"id": "big", "time": 1, "memory": 100}, {"id": "b", "time": 1, "memory": 1}],
              devices=[Device("g0", 50), Device("g1", 60)])
    reason = p.infeasibility()
    assert reason is not None and "node 'big'" in reason
    r = optpart.solve(p, "single")
    assert r.status is optpart.Status.INFEASIBLE and "node 'big'" in r.message and r.placement is None


def test_colocation_group_that_fits_no_device():
    p = build([{"id": x, "time": 1, "memory": 30} for x in "abc"], devices=[Device("g0", 70), Device("g1", 70)],
              constraints={"colocate": [["a", "b", "c"]]})
    assert "colocation group of node 'a'" in p.infeasibility()
    assert optpart.solve(p, "single").status is optpart.Status.INFEASIBLE


def test_total_memory_above_total_capacity():
    p = build([{"id": x, "time": 1, "memory": 30} for x in "abc"], devices=[Device("g0", 40), Device("g1", 40)])
    assert "the graph needs 90 B but all devices together hold 80 B" in p.infeasibility("static")
    # Under peak (the default) the same sum is what is live when the first node starts.
    assert "90 B are live on the devices together" in p.infeasibility() and "hold 80 B" in p.infeasibility()


def test_constraints_pin_forbid_colocate():
    devs = [Device("g0", 10), Device("g1", 10), Device("g2", 10)]
    p = build([{"id": x, "time": 1, "memory": 1} for x in "abcd"], devices=devs,
              constraints={"pin": {"a": "g1"}, "colocate": [["a", "b"], ["b", "c"]], "forbid": {"d": ["g0", "g2"]}})
    assert p.pin.tolist() == [1, 1, 1, -1]  # the group {a, b, c} inherits a's pin
    assert len(p.groups) == 1 and p.groups[0].tolist() == [0, 1, 2]
    assert p.allowed.tolist() == [[False, True, False]] * 4
    with pytest.raises(ProblemError, match="pinned to several devices"):
        build(N2, devices=devs, constraints={"pin": {"a": "g0", "b": "g1"}, "colocate": [["a", "b"]]})
    with pytest.raises(ProblemError, match="pin names unknown node 'x'"):
        build(N2, devices=devs, constraints={"pin": {"x": "g0"}})
    with pytest.raises(ProblemError, match="unknown device 'g9'"):
        build(N2, devices=devs, constraints={"pin": {"a": "g9"}})
    with pytest.raises(ProblemError, match="pinned to device 'g0' that it is forbidden on"):
        build(N2, devices=devs, constraints={"pin": {"a": "g0"}, "forbid": {"a": ["g0"]}})


def test_transfer_times_use_pair_overrides():
    devs = [Device("g0", 10), Device("g1", 10), Device("g2", 10)]
    p = build(N2, [{"src": "a", "dst": "b", "bytes": 100}], devices=devs,
              links={"latency": 1.0, "bandwidth": 10,
                     "pairs": [{"src": "g0", "dst": "g1", "latency": 0.0, "bandwidth": 100}]})
    assert p.transfer_times([0, 0]).tolist() == [0.0]
    assert p.transfer_times([0, 1]).tolist() == [1.0]   # override
    assert p.transfer_times([1, 0]).tolist() == [1.0]   # symmetric unless the reverse is given
    assert p.transfer_times([0, 2]).tolist() == [11.0]  # uniform


def test_with_devices_keeps_graph_and_colocation():
    from optpart.generators import training_graph
    g = training_graph(3)
    assert g.n_devices == 0 and len(g.groups) == 3
    p = g.with_devices(4, memory=2**34, speed=[1, 1, 2, 2])
    assert p.n_devices == 4 and p.device_speed.tolist() == [1, 1, 2, 2]
    assert len(p.groups) == 3 and p.n_nodes == g.n_nodes
    assert np.array_equal(p.duration(np.full(p.n_nodes, 2)), g.time / 2)
    with pytest.raises(ProblemError, match="no devices"):
        optpart.solve(g, "single")


def test_split_memory_defaults_static_to_the_sum():
    p = build([{"id": "a", "time": 1, "param_bytes": 5, "output_bytes": 3, "temp_bytes": 2}])
    assert p.memory.tolist() == [10.0] and p.has_split


def test_peak_screening_counts_only_what_is_surely_held():
    # Static memory (2 x 10) exceeds the one device (15), but under peak only the
    # parameters (2 x 1) are surely held all step: no proof of infeasibility.
    p = Problem.build(nodes=[{"id": "a", "time": 1, "param_bytes": 1, "output_bytes": 9},
                             {"id": "b", "time": 1, "param_bytes": 1, "output_bytes": 9}],
                      devices=[Device("g", 15)])
    assert "all devices together hold" in p.infeasibility("static")
    assert p.infeasibility("peak") is None and p.infeasibility() is None  # peak is the default
    big = Problem.build(nodes=[{"id": "a", "time": 1, "param_bytes": 10, "temp_bytes": 9}], devices=[Device("g", 15)])
    assert "node 'a' needs" in big.infeasibility("peak")
    with pytest.raises(ProblemError, match="memory_model='liveness'"):
        p.infeasibility("liveness")


# ---------------------------------------------------------------- mixed memory fields
MIXED_NODES = [{"id": "a", "time": 1, "param_bytes": 10, "output_bytes": 20, "temp_bytes": 1},
               {"id": "b", "time": 1, "memory": 50}]


def _assert_mixed(p):
    """A node with only `memory` holds it as parameters under peak; the split node keeps its split."""
    assert p.has_split
    assert p.memory.tolist() == [31, 50]
    assert p.param_bytes.tolist() == [10, 50]
    assert p.output_bytes.tolist() == [20, 0] and p.temp_bytes.tolist() == [1, 0]


def test_mixed_nodes_through_build_and_from_arrays():
    _assert_mixed(build(MIXED_NODES))
    nan = float("nan")
    _assert_mixed(Problem.from_arrays(["a", "b"], [1, 1], [nan, 50], param_bytes=[10, nan],
                                      output_bytes=[20, nan], temp_bytes=[1, nan]))
    with pytest.raises(ProblemError, match="node 'b' gives neither memory nor param_bytes"):
        Problem.from_arrays(["a", "b"], [1, 1], [nan, nan], param_bytes=[10, nan])


def test_mixed_nodes_through_the_json_reader(tmp_path):
    import json
    path = tmp_path / "mixed.json"
    path.write_text(json.dumps({"format": "optpart-problem", "version": 1, "nodes": MIXED_NODES, "edges": []}))
    _assert_mixed(optpart.load(path))


@pytest.mark.parametrize("name", optpart.available_solvers())
def test_mixed_file_no_solver_claims_a_fit_that_breaks_peak(name):
    """The issue-12 instance: 81 B of nodes and two 50 B devices; b (50 B of parameters) fills one,
    so under peak b cannot even receive a's 1 B output: no placement fits."""
    nodes = [{"id": "a", "time": 1, "param_bytes": 30, "output_bytes": 1},
             {"id": "b", "time": 1, "memory": 50}, {"id": "c", "time": 1, "memory": 0}]
    p = build(nodes, [{"src": "a", "dst": "b", "bytes": 1}], devices=[Device("g0", 50), Device("g1", 50)])
    r = optpart.solve(p, name, memory_model="peak", **budget(name))
    assert r.status is optpart.Status.INFEASIBLE and r.message == p.infeasibility("peak"), (name, r.message)
    static = optpart.solve(p, name, memory_model="static", **budget(name))
    if name == "single":  # one device by design: 81 B never fits in 50 B, and that is not proof of infeasibility
        assert static.status is optpart.Status.UNKNOWN and "no single device holds the graph" in static.message
        return
    assert static.ok, f"{name}: {static.status.value}: {static.message}"  # a (31 B) and b (50 B) fit apart
    optpart.check(p, static)
    assert static.placement[0] != static.placement[1], name


# ---------------------------------------------------------------- immutability
def test_problem_arrays_are_read_only_and_the_bound_cannot_go_stale(diamond):
    bound = optpart.bounds.problem_lower_bound(diamond)
    for name in ("time", "memory", "param_bytes", "edge_bytes", "edge_src", "device_memory", "latency",
                 "pin", "topo", "allowed"):
        with pytest.raises(ValueError, match="read-only"):
            getattr(diamond, name)[0] = 100
        with pytest.raises(ValueError, match="WRITEABLE"):  # and cannot be made writeable again
            getattr(diamond, name).flags.writeable = True
    for group in diamond.groups:
        with pytest.raises(ValueError, match="WRITEABLE"):
            group.flags.writeable = True
    q = diamond.with_devices(3, memory=100)
    with pytest.raises(ValueError, match="read-only"):
        q.device_speed[0] = 2
    assert optpart.bounds.problem_lower_bound(diamond) == bound == optpart.lower_bound(diamond)
    assert not hasattr(diamond, "__dict__")  # __slots__: nothing can be cached on (or added to) a problem


def test_build_does_not_go_through_the_file_format():
    import subprocess
    import sys
    code = ("import sys, optpart; sys.modules.pop('optpart.formats.optpart_json', None)\n"
            "import optpart.model.problem as pr\n"
            "sys.modules['optpart.formats.optpart_json'] = None\n"
            "p = pr.Problem.build(nodes=[{'id': 'a', 'time': 1, 'memory': 1}], devices=[{'id': 'g', 'memory': 2}],"
            " links={'latency': 0, 'bandwidth': 'inf'}, constraints={'pin': {'a': 'g'}})\n"
            "assert p.pin.tolist() == [0] and p.bandwidth[0, 0] == float('inf')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


# ---------------------------------------------------------------- infeasibility screening
@pytest.mark.parametrize("model", ["static", "peak"])
def test_pinned_nodes_that_overflow_their_device_are_infeasible_for_every_solver(model):
    p = build([{"id": x, "time": 1, "memory": 30} for x in "abc"],
              devices=[Device("g0", 50), Device("g1", 100)], constraints={"pin": {"a": "g0", "b": "g0"}})
    reason = p.infeasibility(model)
    assert reason == f"the 2 node(s) pinned to device 'g0' need 60 B ({model}) but it has 50 B"
    for name in optpart.available_solvers():
        r = optpart.solve(p, name, memory_model=model)
        assert r.status is optpart.Status.INFEASIBLE and r.message == reason and r.memory_model == model, name


def test_peak_screening_counts_inputs_while_a_node_runs():
    """b holds its 2 B of parameters, 3 B of output and a's 4 B output while it runs: 9 B > 8 B."""
    p = Problem.from_arrays(["a", "b"], [1.0, 1.0], None, [0], [1], [4.0], param_bytes=[0, 2],
                            output_bytes=[4, 3], temp_bytes=[0, 0], devices=[Device("g0", 8), Device("g1", 8)])
    assert p.running_need().tolist() == [4, 9]
    assert p.infeasibility("static") is None
    assert p.infeasibility("peak") == ("node 'b' needs 9 B while it runs (parameters, temporaries, output and "
                                       "inputs) but the largest device it may use has 8 B")


ZERO_TIME_CONSUMER = Problem.from_arrays(
    ["a", "b"], [1.0, 0.0], None, [0], [1], [4.0], param_bytes=[0, 2], output_bytes=[4, 3], temp_bytes=[0, 0],
    devices=[Device("g0", 8), Device("g1", 8)])


def _declares(name: str, model: str) -> bool:
    from optpart.solvers.registry import solver_spec
    return model in solver_spec(name).memory_models


@pytest.mark.parametrize("name", [s for s in optpart.available_solvers() if _declares(s, "peak")])
def test_a_zero_time_consumer_does_not_count_its_inputs(name):
    """It runs for an instant, at which a's output is already freed: both on one device peak at
    6 B (a's output and b's parameters while a runs) and fit in 8 B. Apart, b's device holds the
    received copy at b's instant with b's output and parameters: 9 B. So every solver that models
    peak must find a colocated placement with makespan 1 (the total work)."""
    from oracle import sweep_peak

    q = ZERO_TIME_CONSUMER
    assert q.running_need().tolist() == [4, 5] and q.infeasibility("peak") is None
    r = optpart.solve(q, name, memory_model="peak", **budget(name))
    assert r.ok, f"{name}: {r.status.value}: {r.message}"
    optpart.check(q, r)
    assert r.placement[0] == r.placement[1] and r.makespan == 1.0, (r.placement, r.makespan)
    assert sweep_peak(q, r.placement, r.start, r.finish).max() == 6.0  # tests/oracle.py, apart from optpart.model.memory


@pytest.mark.parametrize("name", [s for s in optpart.available_solvers() if not _declares(s, "peak")])
def test_static_only_solvers_answer_unknown_on_the_zero_time_consumer(name):
    """A static-only solver places under static, where only the split placement fits (both
    together need 9 B); under peak b's device then holds the received copy, 9 B of 8 B. So its
    answer is `unknown` naming 9 B against 8 B, never a false `infeasible` (a fit exists)."""
    r = optpart.solve(ZERO_TIME_CONSUMER, name, memory_model="peak", **budget(name))
    assert r.status is optpart.Status.UNKNOWN and "9 B" in r.message and "8 B" in r.message, r.message
