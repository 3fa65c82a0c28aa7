"""Solving a pipelined step: runnable plans, scored by the evaluator, never worse than a named
schedule on the same stages, never ``unknown`` where one micro-batch at a time fits; the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import optpart
from optpart.cli import main
from optpart.errors import ProblemError, SolverError
from optpart.pipeline.plan import PipelinePlan
from optpart.pipeline.schedules import NAMED, TORCH_NAME
from optpart.pipeline.candidates import Candidate, time_orders
from optpart.pipeline.step import PipelineStep

ROOT = Path(__file__).resolve().parents[2]
MLP = ROOT / "instances" / "small" / "mlp4-torch-training.json"
GPT2 = ROOT / "instances" / "gpt2-training.json"


def _valid(problem: optpart.Problem, r: optpart.Result) -> PipelinePlan:
    """The result is valid on its plan's unrolled step, within memory, and carries its plan."""
    assert r.ok, r.message
    assert optpart.violations(r.source_problem, r) == []
    assert np.all(r.memory_peak <= problem.device_memory)
    plan = PipelinePlan.from_result(r, problem)
    assert plan.micro_batches == r.options["micro_batches"]
    assert r.lower_bound <= r.makespan * (1 + 1e-9)
    assert r.stats["stage_bound"] <= r.makespan * (1 + 1e-9)
    return plan


@pytest.mark.parametrize("m", [2, 4, 8])
def test_plan_is_valid_and_never_worse_than_a_named_schedule_on_its_stages(m):
    p = optpart.load(MLP)
    r = optpart.solve(p, micro_batches=m, effort=0.2)
    plan = _valid(p, r)
    step = PipelineStep(p, m)
    ranks = sorted(set(plan.stage_device))
    local = len(plan.stage_device) // len(ranks)
    style = "v" if local == 2 and plan.stage_device[0] == plan.stage_device[-1] else "loop"
    cand = Candidate(plan.stage_of, plan.stage_device, local, style, "found")
    named = [s for s in time_orders(step, cand, list(NAMED) + ["sequential"], "peak") if s.fits]
    assert named, "some named order applies to the stages found"
    assert r.makespan <= min(s.makespan for s in named) * (1 + 1e-9)
    # every named solver gives a valid plan named after torch's class (or says why none applies)
    for name in ("gpipe", "1f1b", "zbh1", "zbv", "sequential"):
        got = optpart.solve(p, name, micro_batches=m)
        if not got.ok:  # 1F1B needs M >= stages: with M = 2 only layouts of 2 devices, too small here
            assert name == "1f1b" and m < 4 and "'1f1b'" in got.message, got.message
            continue
        _valid(p, got)
        assert got.options["schedule"] == TORCH_NAME.get(name, "custom")
        assert r.makespan <= got.makespan * (1 + 1e-9)


def test_never_unknown_where_one_micro_batch_at_a_time_fits():
    """Shrinking memory: the plan found always fits; at the smallest capacity where only one
    micro-batch in flight fits, the solve still answers, and below everything it says why."""
    p = optpart.load(MLP)
    m = 4
    seq = optpart.solve(p, "sequential", micro_batches=m)
    need = float(seq.memory_peak.max())
    for cap in (need * 1.001, need * 1.3, 24e6):
        q = p.with_devices(4, memory=cap)
        r = optpart.solve(q, micro_batches=m, effort=0)
        _valid(q, r)
    r = optpart.solve(p.with_devices(4, memory=need * 0.3), micro_batches=m, effort=0)
    assert not r.ok and r.status.value in ("unknown", "infeasible") and r.message


def test_gpt2_target_plan_runs_and_is_bounded():
    """Bundled GPT-2 step, M = 8, 4 devices of 3 GiB: a runnable plan at least 2.5x faster than
    one device's work, its bound below it, the bound over orders on its stages within 10%."""
    p = optpart.load(GPT2).with_devices(4, memory="3GiB")
    r = optpart.solve(p, micro_batches=8, effort=0)
    _valid(p, r)
    assert r.stats["work"] / r.makespan >= 2.5
    assert r.stats["stage_gap"] <= 0.10


def test_cli_solve_prints_the_plan_and_evaluate_judges_it(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["solve", str(MLP), "--micro-batches", "4", "--option", "effort=0", "-o", str(out), "-q"]) == 0
    text = capsys.readouterr().out
    for word in ("pipeline  ", "stages    0: ", "step      ", "bound     ", "peak      ", "micro-batches"):
        assert word in text, word
    doc = json.loads(out.read_text())
    assert doc["options"]["micro_batches"] == 4 and doc["options"]["pipeline"]["micro_batches"] == 4
    assert main(["evaluate", str(MLP), str(out)]) == 0
    assert "verdict   valid" in capsys.readouterr().out
    # one micro-batch's copy moved to another device: not the plan (and not one placement)
    moved = json.loads(out.read_text())
    nid = next(n for n in moved["placement"] if n.endswith("@mb1"))
    moved["placement"][nid] = next(d for d in sorted(set(moved["placement"].values())) if d != moved["placement"][nid])
    bad = tmp_path / "moved.json"
    bad.write_text(json.dumps(moved))
    assert main(["evaluate", str(MLP), str(bad)]) == 1
    assert "but its stage" in capsys.readouterr().out
    # the plan claims an order its schedule does not follow
    swapped = json.loads(out.read_text())
    acts = next(a for a in swapped["options"]["pipeline"]["actions"].values() if len(a) > 3)
    i = next(j for j in range(len(acts) - 1) if acts[j][0] != acts[j + 1][0] or acts[j][-1] != acts[j + 1][-1])
    acts[i], acts[i + 1] = acts[i + 1], acts[i]
    other = tmp_path / "swapped.json"
    other.write_text(json.dumps(swapped))
    code = main(["evaluate", str(MLP), str(other)])
    captured = capsys.readouterr()
    assert code in (1, 2) and ("before" in captured.out or "pipeline" in captured.err)


def test_bad_requests_are_one_clear_line(tmp_path, capsys):
    p = optpart.load(MLP)
    with pytest.raises(SolverError, match="does not make pipelined plans"):
        optpart.solve(p, "heft", micro_batches=4)
    with pytest.raises(SolverError, match="takes no hint"):
        optpart.solve(p, micro_batches=4, hint=np.zeros(p.n_nodes, dtype=int))
    with pytest.raises(SolverError, match="no option 'effort'"):
        optpart.solve(p, "gpipe", micro_batches=4, effort=1)
    assert main(["solve", str(MLP), "--micro-batches", "4", "--solver", "metis"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not make pipelined plans" in err[0]
    for bad in ("0", "2.5", "many"):
        assert main(["solve", str(MLP), "--micro-batches", bad]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--micro-batches" in err[0]


def test_batch_size_is_honoured_and_its_absence_said(tmp_path, capsys):
    from optpart.pipeline.step import batch_note, check_micro_batches

    p = optpart.load(MLP)
    assert p.meta.get("batch_size") == 64  # the bundled training instances record their batch
    with pytest.raises(ProblemError, match="does not divide the batch of 64"):
        check_micro_batches(3, p)
    with pytest.raises(ProblemError, match="larger than the batch"):
        check_micro_batches(128, p)
    assert batch_note(p, 4) is None and batch_note(p, 1) is None
    doc = json.loads(MLP.read_text())
    del doc["meta"]["batch_size"]
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(doc))
    note = batch_note(optpart.load(bare), 4)
    assert "records no batch size" in note and "4 equal micro-batches" in note
    assert main(["solve", str(bare), "--micro-batches", "4", "--option", "effort=0", "-q"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "records no batch size" in err[0]
