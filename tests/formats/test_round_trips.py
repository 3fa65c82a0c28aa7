"""Round trips and readers: optpart JSON, gzip, networkx, STG and dnn-partitioning; results
(an ``invalid`` one too) through a file."""

from __future__ import annotations

import json

import numpy as np
import pytest

import optpart
from optpart import FormatError, ProblemError
from optpart.formats import parse_stg, problem_to_json, result_to_json
from optpart.generators import layered_dag, training_graph

from conftest import INSTANCES, shared_data


def _same_problem(a, b):
    assert a.node_ids == b.node_ids
    for f in ("time", "memory", "edge_src", "edge_dst", "edge_bytes", "device_memory", "device_speed",
              "latency", "bandwidth", "pin", "group_of"):
        assert np.array_equal(getattr(a, f), getattr(b, f)), f


def test_problem_json_round_trip_is_byte_identical(tmp_path, diamond):
    p = training_graph(4, k=3, memory_slack=1.5, seed=3).with_devices(
        [optpart.Device("g0", 2**33, 1.0), optpart.Device("g1", 2**33, 2.0), optpart.Device("g2", float("inf"))],
        links=optpart.Links(1e-5, 2.5e10, (optpart.LinkOverride("g0", "g1", 1e-6, 5e10),)),
        constraints=optpart.Constraints(pin={"input": "g0"}, forbid={"loss": ("g2",)}))
    for name in ("p.json", "p.json.gz"):
        optpart.save(p, tmp_path / name)
        q = optpart.load(tmp_path / name)
        _same_problem(p, q)
        assert problem_to_json(q) == problem_to_json(p)
    assert (tmp_path / "p.json").read_bytes() == problem_to_json(p).encode()
    optpart.save(p, tmp_path / "again.json.gz")
    assert (tmp_path / "again.json.gz").read_bytes() == (tmp_path / "p.json.gz").read_bytes()


def test_node_metadata_survives(tmp_path):
    p = optpart.Problem.build(nodes=[{"id": "a", "time": 1, "memory": 2, "op": "matmul", "layer": 3}])
    optpart.save(p, tmp_path / "m.json")
    assert optpart.load(tmp_path / "m.json").node_meta == [{"op": "matmul", "layer": 3}]


def test_result_round_trip(tmp_path, diamond):
    r = optpart.evaluate(diamond, [0, 0, 1, 0], solver="hand")
    optpart.save_result(r, diamond, tmp_path / "r.json")
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["format"] == "optpart-result" and doc["placement"]["c"] == "gpu1"
    assert doc["schedule"]["d"] == {"start": 7.0, "finish": 8.0}
    back = optpart.load_result(tmp_path / "r.json", diamond)
    assert back.makespan == r.makespan and np.array_equal(back.placement, r.placement)
    assert result_to_json(back, diamond, include_wall_time=False) == result_to_json(r, diamond, include_wall_time=False)


def test_result_without_schedule_is_rescored(tmp_path, diamond):
    doc = {"format": "optpart-result", "version": 1, "solver": "x", "status": "feasible",
           "placement": {"a": "gpu0", "b": "gpu0", "c": "gpu1", "d": "gpu0"}}
    (tmp_path / "r.json").write_text(json.dumps(doc))
    assert optpart.load_result(tmp_path / "r.json", diamond).makespan == 8.0


@pytest.mark.parametrize("doc,message", [
    ({"version": 1, "nodes": []}, "missing field 'format'"),
    ({"format": "other", "version": 1, "nodes": []}, "unknown format 'other'"),
    ({"format": "optpart-problem", "version": 7, "nodes": []}, "unsupported optpart-problem version 7"),
    ({"format": "optpart-problem", "nodes": []}, "missing field 'version'"),
    ({"format": "optpart-problem", "version": 1}, "missing field 'nodes'"),
    ({"format": "optpart-problem", "version": 1, "nodes": [{"id": "a", "memory": 1}]}, "node 'a' has no field 'time'"),
    ({"format": "optpart-problem", "version": 1, "nodes": [{"time": 1}]}, "no field 'id'"),
    ({"format": "optpart-problem", "version": 1, "nodes": [{"id": "a", "time": 1, "memory": 1}],
      "devices": [{"id": "g"}]}, "device 'g' has no field 'memory'"),
])
def test_bad_documents(tmp_path, doc, message):
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    with pytest.raises((FormatError, ProblemError), match=message):
        optpart.load(tmp_path / "bad.json")


def test_unreadable_files(tmp_path):
    with pytest.raises(FormatError, match="no such file"):
        optpart.load(tmp_path / "missing.json")
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(FormatError, match="not valid JSON"):
        optpart.load(tmp_path / "x.json")
    (tmp_path / "x.txt").write_text("hello")
    with pytest.raises(FormatError, match="unknown format"):
        optpart.load(tmp_path / "x.txt")


def test_networkx_round_trip():
    p = layered_dag(25, seed=2)
    g = optpart.to_networkx(p)
    q = optpart.from_networkx(g, name=p.name)
    assert q.node_ids == p.node_ids and np.array_equal(q.time, p.time) and np.array_equal(q.memory, p.memory)
    edges = lambda x: sorted(zip(x.edge_src.tolist(), x.edge_dst.tolist(), x.edge_bytes.tolist()))
    assert edges(q) == edges(p)
    with pytest.raises(ProblemError, match="node 'x' has no attribute 'time'"):
        import networkx as nx
        bad = nx.DiGraph()
        bad.add_node("x")
        optpart.from_networkx(bad)


STG_TEXT = """3
  0 0 0
  1 5 1 0
  2 4 1 0
  3 2 2 1 2
  4 0 1 3
# comment
"""


def test_parse_stg_by_hand():
    p = parse_stg(STG_TEXT, name="tiny")
    assert p.n_nodes == 5 and p.n_edges == 5 and p.time.tolist() == [0, 5, 4, 2, 0]
    assert p.links.bandwidth == float("inf") and p.memory.sum() == 0
    assert optpart.critical_path_bound(p) == 7.0
    with pytest.raises(FormatError, match="declares 2"):
        parse_stg("3\n0 0 0\n1 5 2 0\n2 0 1 1\n3 0 0\n4 0 0\n")


def test_stg_files_from_the_shared_set():
    base = shared_data("stg")
    files = sorted((base / "50").glob("*.stg"))[:20]
    assert files, "no STG files in the shared set"
    for path in files:
        p = optpart.load(path)
        assert p.n_nodes == 52
        # The STG header comment gives the critical path length; our bound must match it.
        cp = [ln for ln in path.read_text().splitlines() if "CP Length" in ln]
        if cp:
            assert optpart.critical_path_bound(p) == pytest.approx(float(cp[0].split(":")[1]))


def test_dnn_partitioning_files():
    base = shared_data("dnn-partitioning")
    for path in sorted(base.glob("*.json")):
        p = optpart.load(path)
        doc = json.loads(path.read_text())
        assert p.n_nodes == len(doc["nodes"]) and p.n_edges == len(doc["edges"])
        assert p.n_devices == doc["maxFPGAs"]
        assert p.time.sum() == pytest.approx(sum(n["fpgaLatency"] for n in doc["nodes"]) * 1e-3)
        ratios = sorted(e["size"] / e["cost"] for e in doc["edges"] if e["cost"] > 0 and e["size"] > 0)
        assert p.links.bandwidth == pytest.approx(float(np.median(ratios)) * 1e3, rel=1e-9)


def test_bundled_small_instances_load():
    files = sorted((INSTANCES / "small").glob("*.json"))
    assert files, "instances/small holds no problem"
    for path in files:
        assert optpart.load(path).n_nodes > 0


# ---------------------------------------------------------------------- columnar .npz
def _npz_members(path):
    import zipfile
    with zipfile.ZipFile(path) as zf:
        return {i.filename: zf.read(i) for i in zf.infolist()}


def _write_members(path, members):
    import zipfile
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)


@pytest.mark.parametrize("make", [
    lambda: layered_dag(30, seed=5),
    lambda: training_graph(3, seed=2),
    lambda: optpart.load(INSTANCES / "gpt2-training.json"),
])
def test_npz_round_trip_keeps_every_field_and_bytes_are_deterministic(tmp_path, make):
    p = make()
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    optpart.save(p, a)
    optpart.save(optpart.load(a), b)
    assert problem_to_json(optpart.load(a)) == problem_to_json(p)
    assert a.read_bytes() == b.read_bytes()


def test_npz_keeps_constraints_split_and_unicode_ids(tmp_path):
    p = optpart.Problem.build(
        nodes=[{"id": "ä", "time": 1.0, "param_bytes": 4, "output_bytes": 1},
               {"id": "b", "time": 2.0, "memory": 3}, {"id": "ç", "time": 1.0, "memory": 1}],
        edges=[{"src": "ä", "dst": "b", "bytes": 2}],
        devices=[optpart.Device("g0", 100.0), optpart.Device("g1", float("inf"), 2.0)],
        links={"latency": 0.5, "bandwidth": 10, "pairs": [{"src": "g0", "dst": "g1", "latency": 1, "bandwidth": 5}]},
        constraints={"pin": {"b": "g1"}, "colocate": [["ä", "ç"]], "forbid": {"ç": ["g0"]}}, name="mixed")
    path = tmp_path / "m.npz"
    optpart.save(p, path)
    q = optpart.load(path)
    assert problem_to_json(q) == problem_to_json(p)
    assert [g.tolist() for g in q.groups] == [g.tolist() for g in p.groups]


@pytest.mark.parametrize("edit, message", [
    (lambda m: m.pop("time.npy"), "missing member 'time.npy'"),
    (lambda m: m.__setitem__("evil.npy", b"x"), "unknown member 'evil.npy'"),
    (lambda m: m.__setitem__("time.npy", m["edge_bytes.npy"]), "'time' has"),
    (lambda m: m.__setitem__("edge_src.npy", m["time.npy"]), "'edge_src' has"),
    (lambda m: m.__setitem__("time.npy", m["time.npy"][:60]), "'time.npy' is not a valid numpy array"),
])
def test_npz_members_are_checked(tmp_path, edit, message):
    path = tmp_path / "p.npz"
    optpart.save(layered_dag(12, seed=1), path)
    members = _npz_members(path)
    edit(members)
    _write_members(path, members)
    with pytest.raises(FormatError, match=message):
        optpart.load(path)


def test_npz_refuses_pickled_objects_and_oversized_headers(tmp_path):
    import io
    path = tmp_path / "p.npz"
    optpart.save(layered_dag(12, seed=1), path)
    members = _npz_members(path)
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.array([object()], dtype=object), allow_pickle=True)
    members["time.npy"] = buf.getvalue()
    _write_members(path, members)
    with pytest.raises(FormatError, match="Python objects"):
        optpart.load(path)
    # A header that claims 10^12 elements is refused before any allocation.
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.zeros(3))
    members["time.npy"] = buf.getvalue().replace(b"(3,)", b"(1000000000000,)")
    _write_members(path, members)
    with pytest.raises(FormatError, match="declares 1000000000000 elements"):
        optpart.load(path)


def test_npz_values_are_validated_like_json(tmp_path):
    p = layered_dag(8, seed=1)
    path = tmp_path / "p.npz"
    optpart.save(p, path)
    members = _npz_members(path)
    import io
    buf = io.BytesIO()
    bad = p.time.copy()
    bad[3] = -1.0
    np.lib.format.write_array(buf, bad)
    members["time.npy"] = buf.getvalue()
    _write_members(path, members)
    with pytest.raises(ProblemError, match=f"node '{p.node_ids[3]}' has time=-1.0"):
        optpart.load(path)


def test_result_json_writes_infinite_and_nan_statistics(diamond):
    """A solver's free-form statistics may hold inf (no incumbent found) or NaN: the file stays
    valid JSON, with the format's "inf" spelling and null."""
    import json
    import math
    r = optpart.solve(diamond, "heft")
    r.stats = {"best": math.inf, "ratio": math.nan, "nested": [1.0, -math.inf]}
    doc = json.loads(optpart.formats.result_to_json(r, diamond))
    assert doc["stats"] == {"best": "inf", "nested": [1.0, "-inf"], "ratio": None}


def test_an_invalid_result_keeps_its_placement_and_schedule_through_a_file(tmp_path):
    p = layered_dag(20, k=3, seed=1, memory_slack=1.05)
    r = optpart.evaluate(p, np.zeros(p.n_nodes, dtype=int))  # everything on one device: over its memory
    assert r.status is optpart.Status.INVALID
    path = tmp_path / "r.json"
    optpart.save_result(r, p, path)
    back = optpart.load_result(path, p)
    assert back.status is optpart.Status.INVALID and "holds" in back.message
    assert np.array_equal(back.placement, r.placement) and np.array_equal(back.start, r.start)
    assert back.makespan == r.makespan
    # re-scored against a problem where the placement fits, the same file reads feasible
    roomy = p.with_memory_scale(10.0)
    again = optpart.load_result(path, roomy)
    assert again.status is optpart.Status.FEASIBLE and np.array_equal(again.placement, r.placement)
