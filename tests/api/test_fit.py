"""``optpart fit`` and :mod:`optpart.fit`: the smallest capacity or device count, and its proven bound.

Guards: the reported capacity is one at which the solver's placement fits (under the
model) and the bisection is tight to its tolerance (the solver fails one step below on
the hand-made chain); the lower bounds hold for every placement and schedule (checked
against random placements); the device-count search agrees with the capacity search; the
CLI prints the documented JSON keys and exits 2 on bad flags.
"""

from __future__ import annotations

import json

import pytest
from conftest import INSTANCES
from hypothesis import given
from hypothesis import strategies as st
from strategies import draw_placement, split_problems

import optpart
from optpart import Device
from optpart.cli import main
from optpart.evaluate import canonical_schedule
from optpart.fit import (
    capacity_lower_bound,
    devices_lower_bound,
    min_capacity,
    min_devices,
    on_devices,
)
from optpart.generators import training_graph
from optpart.model.memory import fits

SQUEEZE = INSTANCES / "small" / "squeezenet-training.json"


def _chain() -> optpart.Problem:
    # One device: peak 23 = params 3 + two live outputs of 10 (see tests/solvers/test_cpsat_peak.py).
    return optpart.Problem.build(
        nodes=[{"id": c, "time": 1, "param_bytes": 1, "output_bytes": 10, "temp_bytes": 0} for c in "abc"],
        edges=[{"src": "a", "dst": "b", "bytes": 0}, {"src": "b", "dst": "c", "bytes": 0}],
        devices=[Device("x", 1000)])


def test_min_capacity_of_a_chain_is_its_peak():
    fit = min_capacity(_chain(), 1, tolerance=0.001)
    assert fit.capacity == 23 and fit.devices == 1 and fit.memory_model == "peak"
    assert fit.result.ok and fit.result.memory_peak[0] == pytest.approx(23)
    # proven: when b starts, all 3 parameter bytes and the outputs of a and b are live
    assert fit.lower_bound == pytest.approx(23)
    assert [c for _, c, ok in fit.probes if ok][-1] == 23  # found at the bound: the true minimum


def test_static_model_is_the_plain_sum():
    fit = min_capacity(_chain(), 1, memory_model="static", tolerance=0.001)
    assert fit.capacity == 33 and fit.lower_bound == pytest.approx(33)


def test_min_capacity_fits_and_beats_nothing_it_should_not():
    p = optpart.load(str(SQUEEZE))
    fit = min_capacity(p, 2)
    q = on_devices(p, 2, fit.capacity)
    assert fit.result.ok and fits(fit.result.memory_peak, q.device_memory).all()
    assert fit.lower_bound <= fit.capacity
    failed = [c for _, c, ok in fit.probes if not ok]
    assert failed and max(failed) * 1.01 >= fit.capacity  # bisection closed to 1%
    assert all(c <= fit.capacity for c in failed)
    again = min_capacity(p, 2)
    assert again.capacity == fit.capacity and again.probes == fit.probes  # deterministic


def test_min_devices_agrees_with_min_capacity():
    p = optpart.load(str(SQUEEZE))
    cap = min_capacity(p, 3).capacity
    fit = min_devices(p, cap)
    assert fit.devices is not None and fit.devices <= 3 and fit.lower_bound <= fit.devices
    assert fit.result.ok and fits(fit.result.memory_peak, cap).all()


def test_min_devices_says_when_no_count_fits():
    fit = min_devices(_chain(), 20)
    assert fit.devices is None and fit.result is None and "'b'" in fit.reason


@given(split_problems(max_nodes=8, max_devices=3), st.data())
def test_lower_bounds_hold_for_every_placement(problem, data):
    k = problem.n_devices
    place = draw_placement(data, problem)
    start, finish = canonical_schedule(problem, place)
    worst = float(optpart.peak_memory(problem, place, start, finish).max()) if problem.n_nodes else 0.0
    assert worst >= capacity_lower_bound(problem, k, "peak") * (1 - 1e-12) - 1e-9
    static = float(optpart.static_memory(problem, place).max()) if problem.n_nodes else 0.0
    assert static >= capacity_lower_bound(problem, k, "static") * (1 - 1e-12) - 1e-9
    # device counts: with `worst` bytes each, k devices do hold this placement
    count, _ = devices_lower_bound(problem, max(worst, 1e-9), "peak")
    assert 1 <= count <= k


def test_cli_fit_json(capsys):
    code = main(["fit", str(SQUEEZE), "--devices", "2", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    assert {"capacity", "devices", "lower_bound", "result"} <= set(doc)
    assert doc["devices"] == 2 and doc["lower_bound"] <= doc["capacity"]
    assert doc["result"]["format"] == "optpart-result" and doc["result"]["status"] in ("feasible", "optimal")


def test_cli_fit_devices_text_and_failure(capsys):
    assert main(["fit", str(SQUEEZE), "--memory", "30MiB"]) == 0
    out = capsys.readouterr().out
    assert "devices" in out and "lower bound" in out
    assert main(["fit", str(SQUEEZE), "--memory", "1MiB"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs" in err


def test_cli_fit_bad_flags(capsys):
    assert main(["fit", str(SQUEEZE), "--devices", "2", "--tolerance", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--tolerance" in err
    assert main(["fit", str(SQUEEZE), "--devices", "2", "--option", "memory_model=lots"]) == 2
    assert "memory_model" in capsys.readouterr().err


def test_fit_can_be_told_the_static_memory_model(tmp_path, capsys):
    path = tmp_path / "g.json"
    optpart.save(training_graph(3, seed=1), path)
    assert main(["fit", str(path), "--devices", "2", "--json", "--memory-model", "static"]) == 0
    assert json.loads(capsys.readouterr().out)["result"]["memory_model"] == "static"
    # The model through --option is refused in one line pointing to its own flag (exit 2).
    assert main(["fit", str(path), "--devices", "2", "--json", "--option", "memory_model=static"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "memory_model has its own flag (--memory-model)" in err, err
