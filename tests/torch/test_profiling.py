"""Measured operator costs: profile_times, measured problems, ``optpart import --profile``."""

from __future__ import annotations

import json
import sys
import textwrap

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from optpart.errors import OptpartError  # noqa: E402
from optpart.formats.torch import trace_training_step  # noqa: E402
from optpart.formats.torch_import import from_torch  # noqa: E402
from optpart.torch import measured_problem, profile_times, with_measured_times  # noqa: E402


def small_cnn():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                               torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 3))


X = (torch.randn(2, 3, 8, 8),)


def test_every_operator_and_update_gets_a_measured_time():
    net = small_cnn()
    problem = from_torch(net, X)
    step = trace_training_step(net, X)
    times = profile_times(step, "cpu", repeats=2, module=net, example_inputs=X)
    assert set(times) == set(problem.node_ids)
    meta = dict(zip(problem.node_ids, problem.node_meta))
    for nid, t in times.items():
        if meta[nid]["op"] in ("input", "buffer", "target"):
            assert t == 0.0
        else:
            assert t > 0.0, nid  # every operator ran and was timed
    # The module was not changed (batch norm statistics were updated on copies).
    assert torch.equal(net[1].running_mean, torch.zeros(4))


def test_measured_problem_keeps_everything_but_the_times():
    net = small_cnn()
    problem = from_torch(net, X)
    q = measured_problem(problem, net, X, repeats=2)
    assert q.node_ids == problem.node_ids
    assert np.array_equal(q.edge_src, problem.edge_src) and np.array_equal(q.edge_bytes, problem.edge_bytes)
    assert np.array_equal(q.memory, problem.memory) and np.array_equal(q.output_bytes, problem.output_bytes)
    assert q.constraints == problem.constraints
    assert not np.array_equal(q.time, problem.time)
    cm = q.meta["cost_model"]
    assert cm["times"] == "measured" and cm["profile"]["device"] == "cpu" and cm["profile"]["repeats"] == 2
    assert cm["profile"]["statistic"] == "median"


def test_a_meta_device_model_is_profiled_with_filled_tensors():
    with torch.device("meta"):
        net = small_cnn()
    problem = from_torch(net, X)
    q = measured_problem(problem, net, X, repeats=1, warmup=0)
    ops = [i for i, m in enumerate(q.node_meta) if m["op"] not in ("input", "buffer")]
    assert (q.time[ops] > 0).all()


def test_bad_arguments_are_one_clear_error():
    step = trace_training_step(small_cnn(), X)
    with pytest.raises(OptpartError, match="repeats=0"):
        profile_times(step, "cpu", repeats=0)
    with pytest.raises(OptpartError, match="'tpu9' is not a torch device"):
        profile_times(step, "tpu9")
    if not torch.cuda.is_available():
        with pytest.raises(OptpartError, match="no CUDA device"):
            profile_times(step, "cuda")
    problem = from_torch(small_cnn(), X)
    with pytest.raises(OptpartError, match=f"no measured time for node '{problem.node_ids[0]}'"):
        with_measured_times(problem, {}, device="cpu", repeats=1)


def test_import_command_profile_flag(tmp_path, monkeypatch, capsys):
    from optpart.cli import main
    from optpart.formats import load

    (tmp_path / "tinynet.py").write_text(textwrap.dedent("""
        import torch
        def make():
            torch.manual_seed(0)
            return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)), \\
                (torch.randn(4, 8),)
    """))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    assert main(["import", "tinynet:make", "-o", "est.json"]) == 0
    assert main(["import", "tinynet:make", "-o", "meas.json", "--profile", "--profile-repeats", "2",
                 "--profile-threads", "1"]) == 0
    capsys.readouterr()
    est, meas = load(tmp_path / "est.json"), load(tmp_path / "meas.json")
    assert est.node_ids == meas.node_ids
    assert "times" not in est.meta["cost_model"]
    cm = json.loads((tmp_path / "meas.json").read_text())["meta"]["cost_model"]
    assert cm["times"] == "measured" and cm["profile"]["threads"] == 1 and cm["profile"]["repeats"] == 2
    assert main(["import", "tinynet:make", "-o", "x.json", "--profile-device", "cpu"]) == 2
    assert "--profile-device needs --profile" in capsys.readouterr().err
