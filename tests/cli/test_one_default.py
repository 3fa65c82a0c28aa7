"""A file without links means the same in Python and on the command line, and a result is
judged against the links it was solved for."""

from __future__ import annotations

import json

import pytest

import optpart
from optpart.cli import main
from optpart.model.devices import default_links


def _linkless(tmp_path):
    """A small training graph written without devices or links (edges carry bytes)."""
    doc = json.loads(open("instances/small/mlp6-training.json").read())
    doc.pop("links", None)
    doc.pop("devices", None)
    path = tmp_path / "graph.json"
    path.write_text(json.dumps(doc))
    return path


def test_python_and_cli_give_the_same_answer_for_a_file_without_links(tmp_path, capsys):
    path = _linkless(tmp_path)
    problem = optpart.load(path).with_devices(2, memory=8 * 2**30)
    assert problem.links is None
    lk = default_links()
    off = problem.latency[0, 1], problem.bandwidth[0, 1]
    assert off == (lk.latency, lk.bandwidth) and (lk.latency, lk.bandwidth) == (1e-5, 25e9)
    py = optpart.solve(problem, "heft")
    out = tmp_path / "cli.json"
    assert main(["solve", str(path), "--solver", "heft", "--devices", "2", "--memory", "8GiB", "-q",
                 "-o", str(out)]) == 0
    cli = json.loads(out.read_text())
    assert cli["makespan"] == pytest.approx(py.makespan, rel=1e-12)
    assert cli["links"] == {"latency": 1e-5, "bandwidth": 25e9}
    # a result saved from Python is valid on the command line
    saved = tmp_path / "py.json"
    optpart.save_result(py, problem, saved)
    capsys.readouterr()
    assert main(["evaluate", str(path), str(saved), "--devices", "2", "--memory", "8GiB"]) == 0
    assert "verdict   valid" in capsys.readouterr().out


def test_a_result_is_judged_against_the_links_it_was_solved_for(tmp_path, capsys):
    path = tmp_path / "with-devices.json"
    doc = json.loads(_linkless(tmp_path).read_text())
    doc["devices"] = [{"id": "g0", "memory": 8 * 2**30}, {"id": "g1", "memory": 8 * 2**30}]
    path.write_text(json.dumps(doc))
    out = tmp_path / "fast.json"
    assert main(["solve", str(path), "--solver", "heft", "--bandwidth", "1TB/s", "--latency", "1ns", "-q",
                 "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(path), str(out)]) == 0
    captured = capsys.readouterr()
    assert "verdict   valid" in captured.out
    assert "solved for links 1 TB/s + 1 ns" in captured.err and captured.err.count("\n") == 1
    # the flags still choose: against the default links its transfers arrive too late
    assert main(["evaluate", str(path), str(out), "--bandwidth", "25GB/s", "--latency", "10us"]) == 1
