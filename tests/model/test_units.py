"""Unit strings and per-device values: read the way people write them, refuse what is ambiguous."""

from __future__ import annotations

import math

import pytest

import optpart
from optpart.errors import OptpartError, ProblemError
from optpart.units import parse_bandwidth, parse_bytes, parse_list, parse_speed, parse_time


@pytest.mark.parametrize("text, value", [
    ("16GiB", 16 * 2**30), ("2GB", 2e9), ("2.5 MB", 2.5e6), (1024, 1024.0), ("inf", math.inf), ("1KiB", 1024.0),
])
def test_sizes(text, value):
    assert parse_bytes(text) == value


@pytest.mark.parametrize("text, value", [
    ("25GB/s", 25e9), ("25GiB/s", 25 * 2**30), ("100Gbit/s", 12.5e9), ("100 Mbit/s", 12.5e6), ("1e9", 1e9),
    ("inf", math.inf), ("900 GB/s", 9e11),
])
def test_bandwidths(text, value):
    assert parse_bandwidth(text) == value


@pytest.mark.parametrize("text", ["25GBps", "25Gbps", "25gbps", "25Gb/s", "25gb/s", "10 MBps"])
def test_ambiguous_bandwidth_is_refused_with_both_readings(text):
    with pytest.raises(OptpartError, match=r"ambiguous bandwidth unit .* write [GM]B/s for bytes or "
                                           r"[GM]bit/s for bits per second"):
        parse_bandwidth(text)


def test_bad_values_name_themselves():
    with pytest.raises(OptpartError, match="unknown size unit 'GJ' in '3GJ'"):
        parse_bytes("3GJ")
    with pytest.raises(OptpartError, match="speed '0' must be a positive"):
        parse_speed("0")
    with pytest.raises(OptpartError, match="empty entry"):
        parse_list("1GiB,,2GiB", parse_bytes, "--memory")
    assert parse_time("10us") == pytest.approx(1e-5)
    assert parse_list("80GiB,40GiB", parse_bytes, "--memory") == [80 * 2**30, 40 * 2**30]


@pytest.fixture
def chain():
    return optpart.Problem.build(nodes=[{"id": "a", "time": 1.0, "memory": 4}, {"id": "b", "time": 1.0, "memory": 4}],
                                 edges=[{"src": "a", "dst": "b", "bytes": 8}], name="chain")


def test_with_devices_takes_units_lists_and_dicts(chain):
    p = chain.with_devices(4, memory="8GiB")
    assert [d.memory for d in p.devices] == [8 * 2**30] * 4 and p.device_ids == ["dev0", "dev1", "dev2", "dev3"]
    p = chain.with_devices(memory={"gpu0": "80GiB", "gpu1": "40GiB"}, speed={"gpu1": 0.5, "gpu0": 1})
    assert [(d.id, d.memory, d.speed) for d in p.devices] == [("gpu0", 80 * 2**30, 1.0), ("gpu1", 40 * 2**30, 0.5)]
    p = chain.with_devices(memory=["80GiB", "40GiB"], speed=[1, "0.5"])
    assert [(d.id, d.memory, d.speed) for d in p.devices] == [("dev0", 80 * 2**30, 1.0), ("dev1", 40 * 2**30, 0.5)]
    p = chain.with_devices(["a", "b"], memory="1KiB")
    assert p.device_ids == ["a", "b"] and p.devices[1].memory == 1024


def test_with_devices_mismatches_are_one_clear_error(chain):
    with pytest.raises(ProblemError, match="memory gives 3 values for 2 devices"):
        chain.with_devices(2, memory=["1GiB", "1GiB", "1GiB"])
    with pytest.raises(ProblemError, match="speed names unknown device 'x'; devices: gpu0, gpu1"):
        chain.with_devices(memory={"gpu0": 1, "gpu1": 2}, speed={"x": 1})
    with pytest.raises(ProblemError, match="memory: unknown size unit 'GJ'"):
        chain.with_devices(2, memory=["1GiB", "2GJ"])
    with pytest.raises(ProblemError, match="devices 0 must be at least 1"):
        chain.with_devices(0)


def test_cli_refuses_ambiguous_bandwidth_and_takes_per_device_memory(tmp_path, capsys):
    from optpart.cli import main

    path = tmp_path / "chain.json"
    optpart.save(optpart.Problem.build(nodes=[{"id": "a", "time": 1.0, "memory": 4}, {"id": "b", "time": 1.0,
                                                                                       "memory": 4}],
                                       edges=[{"src": "a", "dst": "b", "bytes": 8}], name="chain"), path)
    assert main(["solve", str(path), "-k", "2", "--bandwidth", "25GBps"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "GB/s for bytes or Gbit/s for bits" in err
    out = tmp_path / "r.json"
    assert main(["solve", str(path), "-m", "4B,8B", "--speed", "1,0.5", "-o", str(out)]) == 0
    assert "dev1" in capsys.readouterr().out
    assert main(["solve", str(path), "-k", "3", "-m", "4B,8B"]) == 2
    assert "--memory gives 2 values for 3 devices" in capsys.readouterr().err


def test_a_bandwidth_without_per_second_is_refused_as_an_amount():
    from optpart.errors import OptpartError
    from optpart.units import parse_bandwidth
    with pytest.raises(OptpartError, match=r"'25GB' has no '/s'.*write e.g. 25GB/s"):
        parse_bandwidth("25GB")
    assert parse_bandwidth("25GB/s") == 25e9 and parse_bandwidth("1e9") == 1e9
