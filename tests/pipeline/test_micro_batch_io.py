"""The pipelined step in and out: per-micro-batch cost rule end to end, tracing one micro-batch
from PyTorch, and --micro-batches on import, fit, bench, show and plot (docs/model.md section 7)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import optpart
from optpart.cli import main
from optpart.pipeline.step import PipelineStep

torch = pytest.importorskip("torch")
from optpart.formats.torch_import import from_torch  # noqa: E402


def _file(tmp_path, per_micro_batch: bool) -> str:
    """f (forward) -> b (backward) -> u (update), on one device; with or without the flag."""
    meta = {"per_micro_batch": True} if per_micro_batch else {}
    nodes = [
        {"id": "f", "time": 2.0, "param_bytes": 8, "output_bytes": 40, "temp_bytes": 4, "phase": "forward"},
        {"id": "b", "time": 4.0, "param_bytes": 0, "output_bytes": 6, "temp_bytes": 2, "phase": "backward"},
        {"id": "u", "time": 1.0, "param_bytes": 100, "output_bytes": 0, "temp_bytes": 0,
         "phase": "optimizer", "op": "optimizer.update"},
    ]
    edges = [{"src": "f", "dst": "b", "bytes": 40}, {"src": "b", "dst": "u", "bytes": 6}]
    p = optpart.Problem.build(nodes, edges, name="rule", meta=meta).with_devices(1, memory=1e6)
    path = tmp_path / f"rule-{int(per_micro_batch)}.json"
    optpart.save(p, path)
    return str(path)


@pytest.mark.parametrize("per_micro_batch", [False, True])
def test_cost_rule_end_to_end_through_the_cli(tmp_path, capsys, per_micro_batch):
    """solve --micro-batches 2 writes a result whose copies run 1/M of the time (or the file's
    own per-micro-batch time), whose parameters are held once, and that evaluate judges valid."""
    path = _file(tmp_path, per_micro_batch)
    out = tmp_path / "r.json"
    assert main(["solve", path, "--micro-batches", "2", "-o", str(out), "-q"]) == 0
    doc = json.loads(out.read_text())
    base = optpart.load(path)
    unrolled = PipelineStep(base, 2).unrolled()
    r = optpart.load_result(out, unrolled)
    scale = 1.0 if per_micro_batch else 0.5
    dur = dict(zip(unrolled.node_ids, (r.finish - r.start).tolist()))
    assert dur["f@mb0"] == dur["f@mb1"] == pytest.approx(2.0 * scale)
    assert dur["b@mb1"] == pytest.approx(4.0 * scale) and dur["u"] == pytest.approx(1.0)  # the update: once
    assert r.makespan == pytest.approx(2 * 6.0 * scale + 1.0)  # one device: the work of the step
    held = dict(zip(unrolled.node_ids, unrolled.param_bytes.tolist()))
    assert held["f@mb0"] == 8 and held["f@mb1"] == 0 and held["u"] == 100  # parameters never scale
    out_bytes = dict(zip(unrolled.node_ids, unrolled.output_bytes.tolist()))
    assert out_bytes["f@mb1"] == pytest.approx(40 * scale) and out_bytes["b@mb0"] == 6  # a gradient: unscaled
    assert doc["options"]["micro_batches"] == 2
    capsys.readouterr()
    assert main(["evaluate", path, str(out)]) == 0 and "verdict   valid" in capsys.readouterr().out


def _mlp(batch: int = 4):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    return model, (torch.randn(batch, 8),)


def test_from_torch_traces_one_micro_batch_and_records_it():
    model, inputs = _mlp(4)
    whole = from_torch(model, inputs, devices=2)
    half = from_torch(model, inputs, devices=2, micro_batches=2)
    assert half.meta["per_micro_batch"] is True
    assert dict(half.meta["pipeline"]) == {"micro_batches": 2, "micro_batch_size": 2, "batch_size": 4}
    assert "pipeline" not in whole.meta and whole.node_ids == half.node_ids
    i = whole.node_index["input.0"]
    assert half.output_bytes[i] == whole.output_bytes[i] / 2  # traced at 2 samples, not 4
    weights = [v for v, nid in enumerate(whole.node_ids) if not nid.startswith(("input.", "target."))]
    assert half.param_bytes[weights].sum() == whole.param_bytes[weights].sum() > 0  # parameters: not scaled
    # the file records M: a solve without micro_batches is the step of 2, and is not halved again
    r = optpart.solve(half, effort=0)
    assert r.options["micro_batches"] == 2
    unrolled = PipelineStep(half, 2).unrolled()
    assert unrolled.time[unrolled.node_index["input.0@mb1"]] == half.time[i]
    assert "pipeline" not in unrolled.meta and "per_micro_batch" not in unrolled.meta
    assert optpart.solve(half, micro_batches=1, effort=0).placement.size == half.n_nodes  # one micro-batch
    for bad, words in ((3, "does not divide the batch of 4"), (8, "larger than the batch"), (0, "integer >= 1")):
        with pytest.raises(optpart.OptpartError, match=words):
            from_torch(model, inputs, micro_batches=bad)


def test_import_cli_micro_batches(tmp_path, capsys):
    factory = tmp_path / "zoo.py"
    factory.write_text("import torch\n"
                       "def make(batch=6):\n"
                       "    m = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))\n"
                       "    return m, (torch.randn(batch, 8),)\n")
    out = tmp_path / "p.json"
    assert main(["import", f"{factory}:make", "-o", str(out), "--micro-batches", "4", "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--micro-batches 4 does not divide the batch of 6" in err[0]
    assert main(["import", f"{factory}:make", "-o", str(out), "--micro-batches", "3", "-k", "2", "-q"]) == 0
    p = optpart.load(out)
    assert p.meta["pipeline"]["micro_batches"] == 3
    r_path = tmp_path / "r.json"
    assert main(["solve", str(out), "-o", str(r_path), "-q", "--option", "effort=0"]) == 0  # M from the file
    doc = json.loads(r_path.read_text())
    assert doc["options"]["micro_batches"] == 3 and "input.0@mb2" in doc["placement"]
    capsys.readouterr()
    assert main(["show", str(r_path), "--problem", str(out), "--by", "phase", "--json"]) == 0
    rows = {row["group"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["forward"]["nodes"] == 3 * sum(m.get("phase") == "forward" for m in p.node_meta)


def test_fit_bench_and_plot_with_micro_batches(tmp_path, capsys):
    path = _file(tmp_path, False)
    fit_out = tmp_path / "fit.json"
    assert main(["fit", path, "--devices", "1", "--micro-batches", "2", "--json", "-o", str(fit_out)]) == 0
    fit = json.loads(capsys.readouterr().out)
    unrolled = PipelineStep(optpart.load(path), 2).unrolled()
    assert fit["result"]["options"]["micro_batches"] == 2
    # one device, 1F1B-like order: parameters 108 B, one 20 B activation, gradient hand-over
    assert fit["lower_bound"] <= fit["capacity"] < 108 + 2 * 20 + 2 * 6 + 2 * 2 + 4 * 2
    assert set(json.loads(fit_out.read_text())["placement"]) == set(unrolled.node_ids)
    db = tmp_path / "b.sqlite"
    assert main(["bench", path, "--solvers", "heuristic,gpipe", "--micro-batches", "1,2", "--db", str(db),
                 "--executor", "inline"]) == 0
    report = capsys.readouterr().out
    assert "4 runs: 4 run now" in report and "heuristic (M=2)" in report and "gpipe (M=2)" in report
    pytest.importorskip("matplotlib")
    from optpart.bench.plots import plot_schedule

    r = optpart.solve(optpart.load(path).with_devices(2, memory=1e6), micro_batches=3)
    fig = plot_schedule(PipelineStep(optpart.load(path).with_devices(2, memory=1e6), 3).unrolled(), r)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert {"micro-batch 0", "micro-batch 2", "once per step (optimizer)"} <= set(labels)
    res = tmp_path / "r3.json"
    optpart.save_result(r, PipelineStep(optpart.load(path).with_devices(2, memory=1e6), 3).unrolled(), res)
    assert main(["plot", str(res), "--problem", path, "--devices", "2", "--memory", "1MB",
                 "-o", str(tmp_path / "g.png")]) == 0
    assert np.isfinite(r.makespan)
