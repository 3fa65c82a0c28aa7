"""networkx interop: the round trip keeps everything; foreign graphs read with attribute names."""

from __future__ import annotations


import networkx as nx
import numpy as np
import pytest

from conftest import INSTANCES

import optpart
from optpart.errors import ProblemError



def _same(p, q):
    assert q.name == p.name and q.node_ids == p.node_ids
    for f in ("time", "memory", "edge_src", "edge_dst", "edge_bytes"):
        assert np.array_equal(getattr(q, f), getattr(p, f)), f
    assert q.has_split == p.has_split
    if p.has_split:
        for f in ("param_bytes", "output_bytes", "temp_bytes"):
            assert np.array_equal(getattr(q, f), getattr(p, f)), f
    assert q.node_meta == p.node_meta
    assert q.devices == p.devices and q.links == p.links and q.constraints == p.constraints
    assert q.meta == p.meta


def test_round_trip_of_a_traced_model_keeps_groups_devices_links_and_metadata():
    p = optpart.load(INSTANCES / "gpt2-training.json")
    assert len(p.groups) == 75 and p.n_devices and p.links.bandwidth < float("inf")
    q = optpart.from_networkx(optpart.to_networkx(p))
    _same(p, q)
    assert optpart.evaluate(q, np.zeros(q.n_nodes, dtype=np.int64)).makespan == \
        optpart.evaluate(p, np.zeros(p.n_nodes, dtype=np.int64)).makespan


def test_edge_metadata_survives_and_pins_need_devices():
    g = nx.DiGraph(name="g", constraints={"pin": {"a": "gpu1"}})
    g.add_node("a", time=1.0, layer=3)
    g.add_node("b", time=2.0)
    g.add_edge("a", "b", bytes=10, kind="activation")
    with pytest.raises(ProblemError, match="pin"):
        optpart.from_networkx(g)
    p = optpart.from_networkx(g, devices=["gpu0", "gpu1"], memory_capacity="1GiB")
    assert p.constraints.pin == {"a": "gpu1"} and p.node_meta[0] == {"layer": 3}
    back = optpart.to_networkx(p)
    assert back.edges["a", "b"] == {"bytes": 10.0, "kind": "activation"}
    _same(p, optpart.from_networkx(back))
    bigger = optpart.from_networkx(back, memory_capacity="2GiB")  # the graph's devices, new capacity
    assert [(d.id, d.memory) for d in bigger.devices] == [("gpu0", 2 * 2**30), ("gpu1", 2 * 2**30)]
    assert bigger.constraints.pin == {"a": "gpu1"}


def test_foreign_attribute_names_units_and_a_device_count():
    g = nx.DiGraph()
    g.add_node(1, weight="2ms", mem="1MiB")
    g.add_node(2, weight=0.5, mem=0)
    g.add_edge(1, 2, size="3kB")
    p = optpart.from_networkx(g, time="weight", memory="mem", bytes="size", devices=2,
                              memory_capacity=["4MiB", "2MiB"], speed=[1, 0.5])
    assert p.node_ids == ["1", "2"] and p.time.tolist() == [0.002, 0.5]
    assert p.memory.tolist() == [2**20, 0] and p.edge_bytes.tolist() == [3000.0]
    assert [(d.id, d.memory, d.speed) for d in p.devices] == [("dev0", 4 * 2**20, 1.0), ("dev1", 2 * 2**20, 0.5)]
    with pytest.raises(ProblemError, match="node '1' has no attribute 'time' .*time="):
        optpart.from_networkx(nx.DiGraph([(1, 2)]))
    with pytest.raises(ProblemError, match="node '1' weight: unknown time unit 'parsecs'"):
        g.nodes[1]["weight"] = "3parsecs"
        optpart.from_networkx(g, time="weight")
