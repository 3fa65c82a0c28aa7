"""Each rule of the model is written once, and every entry point gives the same answer.

* a misspelt or unknown field is the same one-line error through ``Problem.build`` and
  through the JSON reader (``optpart.load``);
* the device rules (counts, ids, per-device lists, comma lists, mappings, file devices)
  give the same devices through every entry point (one resolver);
* a Problem cannot be rebound, and a derived problem never serves a stale cached bound.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import examples

import optpart
from optpart.model.devices import with_resolved_devices
from optpart import Device, OptpartError, Problem
from optpart.generators import training_graph

NODES = [{"id": "a", "time": 1, "memory": 1}, {"id": "b", "time": 2, "memory": 1}]
EDGES = [{"src": "a", "dst": "b", "bytes": 8}]
DEVICES = [{"id": "g0", "memory": 100}, {"id": "g1", "memory": 100, "speed": 2}]


def _document(**change):
    doc = {"format": "optpart-problem", "version": 1, "nodes": NODES, "edges": EDGES, "devices": DEVICES,
           "links": {"latency": 0, "bandwidth": 1e9}}
    doc.update(change)
    return doc


def _error(call):
    with pytest.raises(OptpartError) as info:
        call()
    return str(info.value)


@pytest.mark.parametrize("change, field", [
    ({"links": {"latency": 0, "bandwith": 1e9}}, "bandwith"),            # free communication before
    ({"nodes": [{"id": "a", "tiem": 1, "memory": 1}, NODES[1]]}, "tiem"),  # metadata before
    ({"devices": [{"id": "g0", "memroy": 100}]}, "memroy"),
    ({"edges": [{"src": "a", "dst": "b", "btyes": 8}]}, "btyes"),
])
def test_a_misspelt_field_is_one_error_through_build_and_the_json_reader(tmp_path, change, field):
    doc = _document(**change)
    through_build = _error(lambda: Problem.build(nodes=doc["nodes"], edges=doc["edges"], devices=doc["devices"],
                                                 links=doc["links"]))
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    through_file = _error(lambda: optpart.load(path))
    assert field in through_build and "\n" not in through_build
    assert through_file.endswith(through_build), (through_build, through_file)


def test_the_json_reader_and_build_make_the_same_problem(tmp_path):
    doc = _document()
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    a = optpart.load(path)
    b = Problem.build(nodes=NODES, edges=EDGES, devices=DEVICES, links=doc["links"])
    for name in ("time", "memory", "edge_bytes", "device_memory", "device_speed", "latency", "bandwidth"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert a.device_ids == b.device_ids and a.node_ids == b.node_ids


# ---------------------------------------------------------------- one device resolver
_VALUE = st.sampled_from([1, 7, 1024, 2.5])


@st.composite
def _device_values(draw):
    """A device count, the ids, and memory/speed values in each of the accepted spellings."""
    k = draw(st.integers(1, 4))
    ids = [f"dev{i}" for i in range(k)]
    mem = [float(draw(_VALUE)) * 1024 for _ in range(k)]
    spd = [float(draw(_VALUE)) for _ in range(k)]
    spelling = draw(st.sampled_from(["list", "tuple", "array", "comma", "mapping", "scalar"]))
    if spelling == "scalar":
        mem, spd = [mem[0]] * k, [spd[0]] * k
    spell = {"list": list, "tuple": tuple, "array": np.array, "scalar": lambda v: v[0],
             "comma": lambda v: ",".join(f"{x!r}" for x in v),
             "mapping": lambda v: dict(zip(ids, v))}[spelling]
    mem_units = ",".join(f"{int(x // 1024)}KiB" if x % 1024 == 0 else repr(x) for x in mem) \
        if spelling == "comma" else spell(mem)
    return k, ids, mem, spd, mem_units, spell(spd), spelling


@settings(max_examples=examples(60), deadline=None)
@given(_device_values())
def test_every_entry_point_resolves_devices_alike(values):
    k, ids, mem, spd, mem_value, spd_value, spelling = values
    graph = Problem.build(nodes=NODES, edges=EDGES)
    expected = [Device(i, m, s) for i, m, s in zip(ids, mem, spd)]
    by_count = graph.with_devices(k, memory=mem_value, speed=spd_value)
    by_ids = graph.with_devices(ids, memory=mem_value, speed=spd_value)
    by_flags = with_resolved_devices(graph, devices=k, memory=mem_value, speed=spd_value)
    by_records = Problem.build(nodes=NODES, edges=EDGES,
                               devices=[{"id": i, "memory": m, "speed": s} for i, m, s in zip(ids, mem, spd)],
                               links={"latency": 1e-5, "bandwidth": 2.5e10})  # the default link
    for p in (by_count, by_ids, by_flags, by_records):
        assert list(p.devices) == expected, spelling
    if spelling == "mapping" or (spelling != "scalar" and k > 1):  # the values alone give the count
        assert list(graph.with_devices(memory=mem_value, speed=spd_value).devices) == expected
        assert list(with_resolved_devices(graph, memory=mem_value, speed=spd_value).devices) == expected
    # file devices: nothing asked keeps them; a mapping naming one device changes only it
    assert with_resolved_devices(by_records) is by_records
    changed = with_resolved_devices(by_records, memory={ids[-1]: 1.0})
    assert changed.device_memory.tolist() == mem[:-1] + [1.0] and changed.device_speed.tolist() == spd
    grown = with_resolved_devices(by_records, devices=k + 1)
    assert list(grown.devices[:k]) == expected
    assert grown.devices[k] == Device(f"dev{k}", min(mem), 1.0)
    # the uniform link, from flags or records, is the same link
    linked = with_resolved_devices(by_records, bandwidth="1GB/s", latency="1us")
    rec = Problem.build(nodes=NODES, edges=EDGES, devices=list(by_records.devices),
                        links={"latency": 1e-6, "bandwidth": 1e9})
    assert np.array_equal(linked.bandwidth, rec.bandwidth) and np.array_equal(linked.latency, rec.latency)


@pytest.mark.parametrize("call", [
    lambda g: g.with_devices(3, memory=[1, 2]),
    lambda g: with_resolved_devices(g, devices=3, memory=[1, 2]),
    lambda g: g.with_devices(3, memory="1KiB,2KiB"),
    lambda g: with_resolved_devices(g, devices=3, memory="1KiB,2KiB"),
])
def test_a_list_of_the_wrong_length_is_the_same_error_everywhere(call):
    graph = Problem.build(nodes=NODES, edges=EDGES)
    assert _error(lambda: call(graph)) == "memory gives 2 values for 3 devices"


# ---------------------------------------------------------------- frozen, never stale
def test_rebinding_or_deleting_any_attribute_of_a_problem_raises():
    p = Problem.build(nodes=NODES, edges=EDGES, devices=DEVICES)
    names = [n for n in dir(p) if not n.startswith("__")] + ["__dict__", "anything_new"]
    assert len(names) > 40
    for name in names:
        with pytest.raises(AttributeError):
            setattr(p, name, 1)
        if hasattr(p, name):
            with pytest.raises(AttributeError):
                delattr(p, name)
    assert p.device_speed.tolist() == [1.0, 2.0]


def test_a_derived_problem_never_serves_a_stale_bound(tmp_path):
    """Rebinding ``device_speed`` would leave a stale cached bound (a gap of 0.909 where the truth is 0.09)."""
    p = training_graph(6, k=2, seed=1)
    before = optpart.solve(p, "heft")
    assert before.lower_bound == optpart.lower_bound(p)
    for derive in (lambda q: q.with_devices(list(q.device_ids), memory=list(q.device_memory), speed=10.0),
                   lambda q: q.with_memory_scale(3.0), lambda q: q.with_name("renamed")):
        q = derive(p)
        optpart.save(q, tmp_path / "q.json")
        fresh = optpart.load(tmp_path / "q.json")  # read anew: no cache can be shared
        assert optpart.lower_bound(q) == optpart.lower_bound(fresh)
        r, s = optpart.solve(q, "heft"), optpart.solve(fresh, "heft")
        assert r.lower_bound == s.lower_bound and r.makespan == s.makespan
        assert math.isclose(r.gap, s.gap) and 0 <= r.gap < 1
    faster = p.with_devices(list(p.device_ids), memory=list(p.device_memory), speed=10.0)
    assert optpart.lower_bound(faster) < optpart.lower_bound(p)
    assert optpart.lower_bound(p) == before.lower_bound  # the original's bound is untouched


@pytest.mark.parametrize("memory, needle", [
    ({"nope": 1}, "memory names unknown device 'nope'; devices: dev0, dev1"),
    ({"dev0": 1}, "memory gives no value for new device 'dev1'"),
])
def test_a_mapping_that_misses_the_count_is_the_same_error_everywhere(memory, needle):
    graph = Problem.build(nodes=NODES, edges=EDGES)
    assert _error(lambda: graph.with_devices(2, memory=memory)) == needle
    assert _error(lambda: with_resolved_devices(graph, devices=2, memory=memory)) == needle
