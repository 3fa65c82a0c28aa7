"""Hostile and malformed files, one case per class of mistake, for each input format.

Each case goes through the command line (``optpart info FILE``, in process) and asserts
exit code 2, exactly one line on stderr, and that the line names the culprit (field,
node, edge, file) and its value. Nothing is silently accepted, rounded or replaced.
"""

from __future__ import annotations

import gzip
import json
import math

import numpy as np
import pytest
from conftest import assert_one_line_error, run_cli

import optpart
from optpart.cli import main
from optpart.errors import OptpartError, ProblemError
from optpart.formats import load
from optpart.model.devices import Device, Links
from optpart.model.problem import Problem


def doc(nodes, edges=(), **extra) -> dict:
    return {"format": "optpart-problem", "version": 1, "nodes": list(nodes), "edges": list(edges), **extra}


def write_json(path, obj) -> str:
    path.write_text(json.dumps(obj))
    return str(path)


CHAIN = [{"id": "a", "time": 1.0, "memory": 1}, {"id": "b", "time": 1.0, "memory": 1}]


# ---------------------------------------------------------------------- optpart JSON
@pytest.mark.parametrize("document, needles", [
    # A sum that overflows: each value is finite, the total time is not.
    (doc([{"id": "a", "time": 1e308, "memory": 1}, {"id": "b", "time": 1e308, "memory": 1}],
         [{"src": "a", "dst": "b", "bytes": 0}]), ["'time'", "sums to inf", "node 'a'"]),
    (doc(CHAIN, [{"src": "a", "dst": "b", "bytes": 1e308}, {"src": "b", "dst": "c", "bytes": 1e308}]
         ) | {"nodes": CHAIN + [{"id": "c", "time": 1, "memory": 1}]}, ["'bytes'", "sums to inf"]),
    # "version": true equals 1 in Python; it is not version 1.
    ({"format": "optpart-problem", "version": True, "nodes": CHAIN}, ["version True"]),
    ({"format": "optpart-problem", "version": "1", "nodes": CHAIN}, ["version '1'"]),
    # memory -5 next to the split was replaced by the split's sum; now it is an error.
    (doc([{"id": "a", "time": 1, "memory": -5, "param_bytes": 3}]), ["node 'a'", "memory=-5"]),
    (doc([{"id": "a", "time": 1, "memory": None}]), ["node 'a'", "memory=None"]),
    (doc([{"id": "a", "time": "1", "memory": 1}]), ["node 'a'", "time='1'"]),
    (doc([{"id": "a", "time": True, "memory": 1}]), ["node 'a'", "time=True"]),
    (doc([{"id": ["a"], "time": 1, "memory": 1}]), ["position 0", "['a']"]),
    (doc(CHAIN, [{"src": "a", "dst": "b", "bytes": -3}]), ["edge 'a' -> 'b'", "bytes=-3"]),
    (doc(CHAIN, [{"src": "a", "dst": "b", "bytes": "big"}]), ["edge 'a' -> 'b'", "bytes='big'"]),
    (doc(CHAIN, name=7), ["'name'", "7"]),
    (doc(CHAIN, devices={"gpu0": 1}), ["'devices'", "dict"]),
    (doc(CHAIN, devices=[{"id": "g", "memory": -1}]), ["device 'g'", "-1"]),
    (doc(CHAIN, devices=[{"id": "g", "memory": 1, "speed": 0}]), ["device 'g'", "speed=0"]),
    (doc(CHAIN, links={"latency": 0, "bandwidth": 1, "pairs": {"x": 1}}), ["links.pairs"]),
    (doc(CHAIN, links={"latency": 0, "bandwidht": 1}), ["bandwidht"]),
])
def test_optpart_json_mistakes_are_one_line_errors(tmp_path, capsys, document, needles):
    code, err = run_cli(capsys, "info", write_json(tmp_path / "bad.json", document))
    assert_one_line_error(code, err, *needles)


def test_an_integer_beyond_float_names_the_node(tmp_path, capsys):
    # json.dumps writes 10**400 exactly; orjson and json both refuse or flag it.
    path = tmp_path / "big.json"
    path.write_text(json.dumps(doc([{"id": "a", "time": 1, "memory": 10**400}])))
    code, err = run_cli(capsys, "info", str(path))
    assert_one_line_error(code, err, str(path) if "JSON" in err else "node 'a'")
    # Through the library (a dict, no parser involved) the validator names node and field.
    with pytest.raises(ProblemError, match=r"node 'a' has memory=1000.*beyond the float range"):
        optpart.formats.optpart_json.problem_from_dict(doc([{"id": "a", "time": 1, "memory": 10**400}]))


def test_nan_and_infinity_literals_are_not_json(tmp_path, capsys):
    path = tmp_path / "nan.json"
    path.write_text('{"format": "optpart-problem", "version": 1, "nodes": [{"id": "a", "time": NaN, "memory": 1}]}')
    code, err = run_cli(capsys, "info", str(path))
    assert_one_line_error(code, err, "nan.json", "not valid JSON", "line 1")


def test_deep_nesting_and_bad_utf8_are_clean_errors(tmp_path, capsys):
    deep = tmp_path / "deep.json"
    deep.write_text('{"format": "optpart-problem", "version": 1, "meta": ' + "[" * 100000 + "]" * 100000 + "}")
    assert_one_line_error(*run_cli(capsys, "info", str(deep)), "deep.json")
    raw = tmp_path / "latin1.json"
    raw.write_bytes(b'{"format": "optpart-problem", "version": 1, "name": "caf\xe9", "nodes": []}')
    assert_one_line_error(*run_cli(capsys, "info", str(raw)), "latin1.json")


# ---------------------------------------------------------------------- gzip
def test_truncated_gzip_is_named(tmp_path, capsys):
    good = gzip.compress(json.dumps(doc(CHAIN)).encode())
    path = tmp_path / "cut.json.gz"
    path.write_bytes(good[: len(good) // 2])
    assert_one_line_error(*run_cli(capsys, "info", str(path)), "cut.json.gz", "truncated")


def test_not_gzip_is_named(tmp_path, capsys):
    path = tmp_path / "plain.json.gz"
    path.write_text(json.dumps(doc(CHAIN)))
    assert_one_line_error(*run_cli(capsys, "info", str(path)), "plain.json.gz", "gzip")


def test_gzip_bomb_stops_at_the_input_limit(tmp_path, capsys, monkeypatch):
    # 64 MiB of spaces compress to ~64 KiB; with a 1 MiB limit reading stops after the
    # first chunk instead of inflating everything.
    path = tmp_path / "bomb.json.gz"
    with gzip.open(path, "wb") as fh:
        fh.write(b"{" + b" " * (64 * 2**20) + b"}")
    monkeypatch.setenv("OPTPART_MAX_INPUT_BYTES", str(2**20))
    assert_one_line_error(*run_cli(capsys, "info", str(path)), "bomb.json.gz", "1048576 bytes",
                          "OPTPART_MAX_INPUT_BYTES")


def test_plain_file_over_the_limit_and_a_bad_limit(tmp_path, capsys, monkeypatch):
    path = write_json(tmp_path / "p.json", doc(CHAIN))
    monkeypatch.setenv("OPTPART_MAX_INPUT_BYTES", "10")
    assert_one_line_error(*run_cli(capsys, "info", path), "p.json", "larger than", "10 bytes")
    monkeypatch.setenv("OPTPART_MAX_INPUT_BYTES", "lots")
    assert_one_line_error(*run_cli(capsys, "info", path), "OPTPART_MAX_INPUT_BYTES", "'lots'")


def test_device_count_limit_in_files(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPTPART_MAX_DEVICES", "4")
    devices = [{"id": f"g{i}", "memory": 1} for i in range(5)]
    path = write_json(tmp_path / "many.json", doc(CHAIN, devices=devices))
    assert_one_line_error(*run_cli(capsys, "info", path), "5", "limit of 4", "OPTPART_MAX_DEVICES")


# ---------------------------------------------------------------------- STG
@pytest.mark.parametrize("text, needles", [
    ("-2\n", ["task count -2"]),
    ("x\n", ["task count", "'x'"]),
    ("1\n0 0 0\n1 -4 1 0\n2 0 1 1\n", ["line 3", "task 1", "time -4"]),
    ("1\n0 0 0\n1 inf 1 0\n2 0 1 1\n", ["line 3", "task 1", "time inf"]),
    ("1\n0 0 0\n1 3 -1\n2 0 1 1\n", ["line 3"]),
    ("1\n0 0 0\n1 3 1 7\n2 0 1 1\n", ["line 3", "unknown predecessor 7"]),
    ("5\n0 0 0\n", ["declares 5 tasks"]),
    ("", ["empty"]),
])
def test_stg_mistakes_are_one_line_errors(tmp_path, capsys, text, needles):
    path = tmp_path / "bad.stg"
    path.write_text(text)
    assert_one_line_error(*run_cli(capsys, "info", str(path)), *needles)


# ---------------------------------------------------------------------- dnn-partitioning
def dnn(**overrides) -> dict:
    base = {"maxSizePerFPGA": 100, "maxFPGAs": 2, "nodes": [{"id": 1, "fpgaLatency": 1.0, "size": 4},
                                                            {"id": 2, "fpgaLatency": 2.0, "size": 4}],
            "edges": [{"sourceId": 1, "destId": 2, "size": 8, "cost": 1.0}]}
    base.update(overrides)
    return base


@pytest.mark.parametrize("document, needles", [
    (dnn(maxFPGAs=2.7), ["'maxFPGAs'", "2.7", "whole number"]),
    (dnn(maxFPGAs=True), ["'maxFPGAs'", "True"]),
    (dnn(maxFPGAs=0), ["'maxFPGAs'", "at least 1"]),
    (dnn(maxFPGAs=10**6), ["'maxFPGAs'", "1000000", "OPTPART_MAX_DEVICES"]),
    (dnn(maxSizePerFPGA=-1), ["'maxSizePerFPGA'", "-1"]),
    (dnn(edges=[{"sourceId": 1, "destId": 2, "size": 8, "cost": -1.0}]), ["edge '1' -> '2'", "'cost'", "-1.0"]),
    (dnn(edges=[{"sourceId": 1, "destId": 2, "size": -8, "cost": 1.0}]), ["edge '1' -> '2'", "'size'", "-8"]),
    (dnn(nodes=[{"id": 1, "fpgaLatency": "fast", "size": 4}], edges=[]), ["node '1'", "'fpgaLatency'", "'fast'"]),
    (dnn(nodes=[{"id": 1, "fpgaLatency": 1, "size": 4, "supportedOnFpga": "yes"}], edges=[]),
     ["node '1'", "supportedOnFpga='yes'"]),
    (dnn(nodes=[7], edges=[]), ["position 0", "7"]),
    (dnn(nodes={"a": 1}), ["'nodes'", "list"]),
])
def test_dnn_partitioning_mistakes_are_one_line_errors(tmp_path, capsys, document, needles):
    code, err = run_cli(capsys, "info", write_json(tmp_path / "bad-dnn.json", document))
    assert_one_line_error(code, err, *needles)


def test_dnn_partitioning_whole_float_device_count_is_read():
    p = optpart.formats.dnn_partitioning.dnn_partitioning_from_dict(dnn(maxFPGAs=3.0))
    assert p.n_devices == 3


# ---------------------------------------------------------------------- library entry points
def test_library_refuses_device_counts_over_the_limit_before_allocating(monkeypatch):
    p = Problem.build(nodes=[{"id": "a", "time": 1.0, "memory": 1}])
    monkeypatch.setenv("OPTPART_MAX_DEVICES", "8")
    with pytest.raises(OptpartError, match="9 exceeds the limit of 8"):
        p.with_devices([Device(f"d{i}", 1.0) for i in range(9)])


def test_node_device_tables_are_limited(monkeypatch):
    p = Problem.build(nodes=[{"id": f"n{i}", "time": 1.0, "memory": 1} for i in range(10)])
    monkeypatch.setenv("OPTPART_MAX_CELLS", "30")
    with pytest.raises(ProblemError, match="10 nodes x 4 devices = 40 .* limit of 30 .*OPTPART_MAX_CELLS"):
        p.with_devices([Device(f"d{i}", 1.0) for i in range(4)])
    assert p.with_devices([Device(f"d{i}", 1.0) for i in range(3)]).n_devices == 3


def test_a_schedule_that_could_overflow_is_refused_naming_the_cause():
    nodes = [{"id": "a", "time": 1e300, "memory": 1}, {"id": "b", "time": 1.0, "memory": 1}]
    p = Problem.build(nodes=nodes, edges=[{"src": "a", "dst": "b", "bytes": 1}])
    with pytest.raises(ProblemError, match="slowest device"):
        p.with_devices([Device("slow", 10.0, 1e-10), Device("fast", 10.0, 1.0)])
    heavy = Problem.build(nodes=nodes, edges=[{"src": "a", "dst": "b", "bytes": 1e10}])
    with pytest.raises(ProblemError, match="edges carry 10000000000.0 bytes"):
        heavy.with_devices([Device("x", 10.0), Device("y", 10.0)], links=Links(0.0, 1e-300))


def test_result_file_fields_are_checked(tmp_path, capsys, diamond):
    prob = tmp_path / "p.json"
    optpart.save(diamond, prob)
    res = {"format": "optpart-result", "version": 1, "solver": "x", "status": "feasible",
           "lower_bound": "low", "placement": {"a": "gpu0", "b": "gpu0", "c": "gpu0", "d": "gpu0"}}
    path = write_json(tmp_path / "r.json", res)
    assert_one_line_error(*run_cli(capsys, "evaluate", str(prob), path), "'lower_bound'", "'low'")
    res["lower_bound"] = 0
    res["schedule"] = {"a": 3}
    path = write_json(tmp_path / "r.json", res)
    assert_one_line_error(*run_cli(capsys, "evaluate", str(prob), path), "start time for node")


def test_writing_into_a_missing_directory_is_a_format_error(tmp_path, diamond):
    with pytest.raises(OptpartError, match="cannot write"):
        optpart.save(diamond, tmp_path / "no" / "such" / "dir.json")


def test_round_trip_is_unchanged_by_the_fast_parser(tmp_path, diamond):
    path = tmp_path / "d.json"
    optpart.save(diamond, path)
    again = load(path)
    assert optpart.formats.problem_to_json(again) == optpart.formats.problem_to_json(diamond)
    assert np.array_equal(again.time, diamond.time)


def test_empty_node_ids_nodes_as_a_dict_and_a_byte_order_mark(tmp_path):
    """An empty id is refused naming its position; 'nodes' given as an object says so; a UTF-8
    byte-order mark before the JSON is read like any editor's file."""
    import json

    import optpart
    from optpart.errors import OptpartError
    doc = {"format": "optpart-problem", "version": 1,
           "nodes": [{"id": "a", "time": 1, "memory": 1}, {"id": "", "time": 1, "memory": 1}], "edges": []}
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(OptpartError, match="node 1 has an empty id"):
        optpart.load(path)
    doc["nodes"] = {"a": {"time": 1}}
    path.write_text(json.dumps(doc))
    with pytest.raises(OptpartError, match="field 'nodes' is a dict; it must be a list"):
        optpart.load(path)
    doc["nodes"] = [{"id": "a", "time": 1, "memory": 1}]
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(doc).encode())
    assert optpart.load(path).n_nodes == 1


def test_a_per_device_list_that_disagrees_with_the_files_devices_is_refused(tmp_path, capsys):
    import optpart
    from optpart.cli import main
    p = optpart.Problem.build(nodes=[{"id": "a", "time": 1, "memory": 1}],
                              devices=[optpart.Device("gpu0", 10), optpart.Device("gpu1", 10)])
    path = tmp_path / "p.json"
    optpart.save(p, path)
    assert main(["solve", str(path), "--memory", "1GiB,2GiB,3GiB"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--memory gives 3 values but 'problem' has 2 devices" in err
    assert main(["solve", str(path), "--memory", "1GiB,2GiB,3GiB", "--devices", "3"]) == 0


def test_dnn_partitioning_denormal_edge_cost_is_no_rate():
    """A cost so small that it underflows to 0 seconds gives no bandwidth reading (found by the fuzzer)."""
    from optpart.formats.dnn_partitioning import dnn_partitioning_from_dict
    doc = {"maxSizePerFPGA": 100, "maxFPGAs": 2,
           "nodes": [{"id": 1, "fpgaLatency": 1.0, "size": 4, "colorClass": 0, "supportedOnFpga": 1},
                     {"id": 2, "fpgaLatency": 2.0, "size": 4, "colorClass": 0, "supportedOnFpga": 1}],
           "edges": [{"sourceId": 1, "destId": 2, "cost": 5e-324, "size": 8}]}
    p = dnn_partitioning_from_dict(doc)
    assert p.n_edges == 1 and p.n_devices == 2
    assert p.links.bandwidth == math.inf and p.links.latency == 0.0, p.links  # the cost gave no rate
    assert p.transfer_times(np.array([0, 1])).tolist() == [0.0]
    doc["edges"][0]["cost"] = 4.0  # the same file with a normal cost does give a rate: the check can fail
    assert math.isfinite(dnn_partitioning_from_dict(doc).links.bandwidth)
