"""Hostile and mistaken command lines: negative values, huge values, repeated options,
outputs into missing directories, escape codes in ids, and the device resolution rules
(:func:`optpart.model.devices.resolve_devices`) that the CLI and ``bench`` share."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

import optpart
from optpart.model.devices import with_resolved_devices
from optpart.cli import main
from optpart.errors import OptpartError
from optpart.model.devices import Device
from optpart.model.problem import Problem
from optpart.text import plot_safe, safe

from conftest import assert_one_line_error, budget, run_cli


@pytest.fixture
def graph(tmp_path):
    """A 3-node chain without devices."""
    p = Problem.build(nodes=[{"id": n, "time": 1.0, "memory": 10} for n in "abc"],
                      edges=[{"src": "a", "dst": "b", "bytes": 5}, {"src": "b", "dst": "c", "bytes": 5}],
                      name="chain")
    path = tmp_path / "chain.json"
    optpart.save(p, path)
    return str(path)


# ---------------------------------------------------------------------- negative and huge values
@pytest.mark.parametrize("argv", [
    ["--memory", "-5GiB"], ["--memory=-5GiB"], ["-m", "-5GiB"], ["-m-5GiB"],
])
def test_negative_memory_reaches_its_validator_in_every_spelling(capsys, graph, argv):
    code, err = run_cli(capsys, "solve", graph, "-k", "2", *argv)
    assert_one_line_error(code, err, "--memory", "'-5GiB'", "non-negative")


@pytest.mark.parametrize("flag, value, needle", [
    ("--latency", "-1us", "--latency"),
    ("--bandwidth", "-2GB/s", "--bandwidth"),
    ("--speed", "-1", "--speed"),
    ("--time-limit", "-3", "--time-limit"),
])
def test_other_negative_values_reach_their_validators(capsys, graph, flag, value, needle):
    try:
        code, err = run_cli(capsys, "solve", graph, "-k", "2", "--memory", "1GiB", flag, value)
    except SystemExit as exc:  # argparse's type check (--time-limit takes units): one line, exit 2
        code, err = exc.code, capsys.readouterr().err
    assert_one_line_error(code, err, needle, value.lstrip("-").rstrip("usGB/s") or value)


def test_memory_beyond_float_is_not_unlimited(capsys, graph):
    code, err = run_cli(capsys, "solve", graph, "-k", "2", "--memory", "1e400")
    assert_one_line_error(code, err, "--memory", "'1e400'", "beyond the float range")


@pytest.mark.parametrize("k", ["20000", "100000"])
def test_device_count_is_limited_before_allocating(capsys, graph, k):
    code, err = run_cli(capsys, "solve", graph, "--devices", k, "--memory", "1GiB")
    assert_one_line_error(code, err, f"--devices {k}", "limit of 1024", "OPTPART_MAX_DEVICES")


def test_device_count_zero_and_float(capsys, graph):
    assert_one_line_error(*run_cli(capsys, "solve", graph, "--devices", "0"), "--devices 0", "at least 1")
    with pytest.raises(SystemExit) as info:  # argparse's type check: one line, exit 2
        main(["solve", graph, "--devices", "2.7"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1 and "--devices" in err and "'2.7'" in err


def test_seed_beyond_int32_is_a_usage_error(capsys, graph):
    code, err = run_cli(capsys, "solve", graph, "-k", "2", "--seed", str(2**40))
    assert_one_line_error(code, err, "--seed", str(2**40), "2147483647")


def test_repeated_or_reserved_options_are_refused(capsys, graph):
    code, err = run_cli(capsys, "solve", graph, "-k", "2", "--option", "a=1", "--option", "a=2")
    assert_one_line_error(code, err, "--option a", "twice")
    code, err = run_cli(capsys, "solve", graph, "-k", "2", "--option", "time_limit=5")
    assert_one_line_error(code, err, "time_limit", "--time-limit")


def test_out_into_a_missing_directory_fails_before_solving(capsys, graph, tmp_path):
    target = tmp_path / "missing" / "r.json"
    code, err = run_cli(capsys, "solve", graph, "-k", "2", "-o", str(target))
    assert_one_line_error(code, err, "--out", "missing", "does not exist")


def test_usage_errors_are_one_line(capsys, graph):
    with pytest.raises(SystemExit) as info:
        main(["solve", graph, "--no-such-flag"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("optpart: error: ") and "--no-such-flag" in err


def test_per_device_memory_count_must_match(capsys, graph):
    code, err = run_cli(capsys, "solve", graph, "-k", "3", "--memory", "1GiB,2GiB")
    assert_one_line_error(code, err, "--memory", "2 values for 3 devices")


# ---------------------------------------------------------------------- escaping
def test_safe_escapes_control_characters_and_cuts():
    assert safe("a\x1b[31mb\nc\u202e") == "a\\x1b[31mb\\nc\\u202e"
    assert safe("x" * 10, limit=3) == "xxx..."
    assert safe("plain id") == "plain id"
    assert plot_safe("cost$1$") == "cost\\$1\\$"


def test_escape_codes_in_ids_never_reach_the_terminal(capsys, tmp_path):
    evil = "\x1b]0;owned\x07\x1b[2J"
    p = Problem.build(nodes=[{"id": "n" + evil, "time": 1.0, "memory": 1}], name="x" + evil,
                      devices=[Device("gpu" + evil, 10.0)])
    path = tmp_path / "evil.json"
    optpart.save(p, path)
    assert main(["solve", str(path)]) == 0
    out = capsys.readouterr()
    assert "\x1b" not in out.out and "\x1b" not in out.err
    assert "\\x1b" in out.out  # shown, escaped
    bad = json.loads(path.read_text())
    bad["edges"] = [{"src": "n" + evil, "dst": "ghost" + evil}]
    path.write_text(json.dumps(bad))
    code, err = run_cli(capsys, "solve", str(path))
    assert_one_line_error(code, err, "\\x1b")
    assert "\x1b" not in err


def test_plot_draws_dollar_signs_in_ids(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    p = Problem.build(nodes=[{"id": "$a$", "time": 1.0, "memory": 1}, {"id": "b$_{x}", "time": 1.0, "memory": 1}],
                      edges=[{"src": "$a$", "dst": "b$_{x}", "bytes": 1}], name="cost$",
                      devices=[Device("$g^", 10.0), Device("h$", 10.0)])
    prob, res, png = tmp_path / "p.json", tmp_path / "r.json", tmp_path / "g.png"
    optpart.save(p, prob)
    assert main(["solve", str(prob), "-s", "single", "-o", str(res)]) == 0
    assert main(["plot", str(res), "--problem", str(prob), "-o", str(png)]) == 0
    assert png.stat().st_size > 0


# ---------------------------------------------------------------------- resolve_devices (library)
def test_resolve_devices_reads_numbers_units_lists_and_dicts():
    p = Problem.build(nodes=[{"id": "a", "time": 1.0, "memory": 1}])
    q = with_resolved_devices(p, devices=3, memory="80GiB,80GiB,40GiB", speed=[1, 2, 1.5])
    assert q.device_ids == ["dev0", "dev1", "dev2"]
    assert q.device_memory.tolist() == [80 * 2**30, 80 * 2**30, 40 * 2**30]
    assert q.device_speed.tolist() == [1.0, 2.0, 1.5]
    # Defaults when neither the file nor the caller gives links: 25 GB/s and 10 us.
    assert q.links is None and (q.bandwidth[0, 1], q.latency[0, 1]) == (25e9, 1e-5)
    r = with_resolved_devices(q, memory={"dev1": "1GiB"}, bandwidth="1GB/s", latency=0)
    assert r.device_memory.tolist() == [80 * 2**30, 2**30, 40 * 2**30]
    assert (r.links.bandwidth, r.links.latency) == (1e9, 0.0)
    assert with_resolved_devices(p, devices=2, memory=1024).device_memory.tolist() == [1024.0, 1024.0]


def test_resolve_devices_keeps_file_ids_and_names_new_ones():
    p = Problem.build(nodes=[{"id": "a", "time": 1.0, "memory": 1}],
                      devices=[Device("gpuA", 100.0, 2.0)], links={"latency": 0.5, "bandwidth": 10})
    q = with_resolved_devices(p, devices=2)
    assert q.device_ids == ["gpuA", "dev1"]
    assert q.device_memory.tolist() == [100.0, 100.0] and q.device_speed.tolist() == [2.0, 1.0]
    assert (q.links.latency, q.links.bandwidth) == (0.5, 10.0)  # the file's links stay
    assert with_resolved_devices(p) is p


@pytest.mark.parametrize("kwargs, needle", [
    ({"devices": 2, "memory": {"nope": 1}}, "unknown device 'nope'"),
    ({"devices": 2, "memory": {"dev0": 1}}, "no value for new device 'dev1'"),
    ({"devices": 2, "memory": "1GiB,"}, "empty item"),
    ({"devices": 2, "memory": [1, 2, 3]}, "3 values for 2 devices"),
    ({"devices": 2, "speed": "0"}, "speed"),
    ({"devices": 2, "speed": math.inf}, "speed"),
    ({"devices": True}, "devices True"),
    ({"devices": 2.5}, "devices 2.5"),
    ({"memory": "1GiB"}, "has no devices"),
])
def test_resolve_devices_errors_name_the_value(kwargs, needle):
    p = Problem.build(nodes=[{"id": "a", "time": 1.0, "memory": 1}])
    with pytest.raises(OptpartError, match=needle):
        with_resolved_devices(p, **kwargs)


def test_bench_does_not_import_the_command_line():
    code = "import sys, optpart.bench.sweep; print('optpart.cli' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_many_devices_on_a_tiny_graph_form_one_symmetry_class_and_get_a_one_device_optimum():
    """1024 devices (the default limit) on 3 nodes: the devices form one symmetry class (for
    cpsat's symmetry breaking too), and both the heuristic and cpsat answer the one-device
    placement of makespan 4 (cpsat proves it). How cheap this is is not asserted: it is a matter
    of wall time, which no test may depend on (the heuristic stops at the bound heft meets, so
    no search evaluation runs)."""
    import optpart
    p = optpart.Problem.build(
        nodes=[{"id": "a", "time": 1, "memory": 10}, {"id": "b", "time": 2, "memory": 10},
               {"id": "c", "time": 1, "memory": 10}],
        edges=[{"src": "a", "dst": "b", "bytes": 100}, {"src": "b", "dst": "c", "bytes": 100}],
        links={"latency": 1e-5, "bandwidth": 1e9}).with_devices(1024, memory=100)
    from optpart.solvers.exact.grid import device_classes
    assert device_classes(p) == [list(range(1024))]
    r = optpart.solve(p, "heuristic")
    optpart.check(p, r)
    assert r.makespan == 4.0 and len(set(r.placement.tolist())) == 1
    assert r.stats["search"]["work"] <= r.stats["search"]["budget"], r.stats
    # the chain's work (4 s) is the lower bound and the answer meets it: a proven optimum
    assert r.status is optpart.Status.OPTIMAL and r.lower_bound == 4.0, (r.status, r.lower_bound, r.stats)
    exact = optpart.solve(p, "cpsat", **budget("cpsat"))
    assert exact.status is optpart.Status.OPTIMAL and exact.makespan == 4.0, exact.message
    assert exact.stats["symmetry_classes"] == [list(range(1024))]


# ---------------------------------------------------------------- exit codes, exactly
def _two_device_graph(tmp_path) -> str:
    """A chain that fits on two devices together but on neither alone: `single` answers unknown."""
    p = Problem.build(nodes=[{"id": "a", "time": 1.0, "memory": 6}, {"id": "b", "time": 1.0, "memory": 6}],
                      edges=[{"src": "a", "dst": "b", "bytes": 1}],
                      devices=[Device("g0", 10), Device("g1", 10)], links={"latency": 0.0, "bandwidth": 1.0})
    path = tmp_path / "two.json"
    optpart.save(p, path)
    return str(path)


def test_exit_codes_0_1_2_for_answer_unknown_and_bad_input(tmp_path, capsys):
    path = _two_device_graph(tmp_path)
    assert main(["solve", path, "--solver", "heft"]) == 0
    assert capsys.readouterr().err == ""
    assert main(["solve", path, "--solver", "single"]) == 1  # no single device holds it: unknown
    err = capsys.readouterr().err
    assert err.startswith("optpart: unknown: ") and err.count("\n") == 1, err
    assert main(["solve", str(tmp_path / "missing.json")]) == 2
    assert capsys.readouterr().err.startswith("optpart: error: ")


@pytest.mark.parametrize(("raised", "code", "needle"), [
    (RuntimeError("boom"), 3, "optpart: internal error: RuntimeError: boom (set OPTPART_DEBUG=1 for a traceback)"),
    (KeyboardInterrupt(), 130, "optpart: interrupted; results written so far are kept"),
])
def test_exit_codes_3_for_an_internal_error_and_130_on_ctrl_c(tmp_path, capsys, monkeypatch, raised, code, needle):
    import optpart.cli.solve as solve_cli

    def broken(*args, **kwargs):
        raise raised

    monkeypatch.setattr(solve_cli, "solve", broken)
    monkeypatch.delenv("OPTPART_DEBUG", raising=False)
    assert main(["solve", _two_device_graph(tmp_path), "--solver", "heft"]) == code
    assert capsys.readouterr().err == needle + "\n"


def test_exit_code_141_and_silence_on_a_broken_pipe(tmp_path):
    """`optpart solve ... --json | head -c0`: the reader is gone before the result is written."""
    proc = subprocess.Popen([sys.executable, "-m", "optpart", "solve", _two_device_graph(tmp_path), "--solver", "heft",
                             "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 141, err
    assert err == ""


def test_an_infinite_effort_on_the_command_line_is_not_an_internal_error(tmp_path, capsys):
    # Nodes with the param/output/temp split: the heuristic's liveness path (solvers/pardnn/peak.py) runs.
    nodes = [{"id": f"n{i}", "time": 1.0 + i, "param_bytes": 4, "output_bytes": 8, "temp_bytes": 2} for i in range(6)]
    edges = [{"src": f"n{i}", "dst": f"n{i + 1}", "bytes": 8} for i in range(5)] + [{"src": "n0", "dst": "n3", "bytes": 8}]
    path = tmp_path / "g.json"
    optpart.save(optpart.Problem.build(nodes=nodes, edges=edges, name="split6"), path)
    code = main(["solve", str(path), "-k", "2", "-q", "-t", "5s", "--option", "effort=inf"])
    err = capsys.readouterr().err
    assert code == 2, err  # effort must be finite: bad input, one line naming it
    assert err.count("\n") == 1 and "effort" in err and "Traceback" not in err, err
