"""Pipelined plans run by ``torch.distributed.pipelining`` across 2 processes (gloo on CPU).

Loss and every gradient equal plain autograd over the whole batch (dropout off); a custom
action list (I/W split) and a named schedule; a rank killed mid-run ends ``optpart run``
within seconds with one line naming its stage and no process left; bad inputs are one line.
"""

from __future__ import annotations

import copy
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import pipeline_models  # noqa: E402

import optpart  # noqa: E402
from optpart.errors import OptpartError  # noqa: E402
from optpart.formats.torch_import import from_torch  # noqa: E402
from optpart.pipeline.plan import Action, PipelinePlan  # noqa: E402
from optpart.pipeline.solve import score_plan  # noqa: E402
from optpart.torch import run_pipeline  # noqa: E402

M = 2
ROOT = HERE.parents[1]


def _problem(name: str):
    d = getattr(pipeline_models, name)()
    return d, from_torch(d["module"], d["inputs"], micro_batches=M).with_devices(2)


def _whole_batch_autograd(d):
    model = copy.deepcopy(d["module"])
    loss = model(**d["inputs"]).loss
    loss.backward()
    return float(loss), {n: q.grad for n, q in model.named_parameters()}


def _check_equal(run, d):
    ref_loss, ref = _whole_batch_autograd(d)
    assert run.loss == pytest.approx(ref_loss, rel=1e-5)
    assert sorted(run.grads) == sorted(ref)
    for n, g in ref.items():
        torch.testing.assert_close(run.grads[n], g, rtol=1e-4, atol=1e-6, msg=n)


def test_gpt2_with_tied_embeddings_under_1f1b_equals_autograd():
    d, p = _problem("gpt2")
    result = optpart.solve(p, "1f1b", micro_batches=M)
    assert result.options["schedule"] == "1F1B"
    run = run_pipeline(str(HERE / "pipeline_models.py") + ":gpt2", None, result, processes=2, steps=2,
                       optimizer=None, threads=1)
    assert run.tied == ["transformer.wte.weight"]  # replicated on both stages, gradients summed
    _check_equal(run, d)
    assert run.losses == [pytest.approx(run.loss)] * 2  # no optimizer: the same step twice
    assert len(run.step_times) == 1 and run.first_step > 0
    assert run.predicted == result.makespan and set(run.predicted_peak) == {0, 1}


def test_llama_under_a_custom_input_weight_split_order_equals_autograd():
    d, p = _problem("llama")
    plan = PipelinePlan.from_result(optpart.solve(p, "1f1b", micro_batches=M), p)
    actions = [[Action.parse(a) for a in row] for row in (["0F0", "0F1", "0I0", "0W0", "0I1", "0W1"],
                                                          ["1F0", "1I0", "1F1", "1W0", "1I1", "1W1"])]
    result = score_plan(p, plan.with_actions(actions))
    assert result.ok and result.options["schedule"] == "custom"
    run = run_pipeline(str(HERE / "pipeline_models.py") + ":llama", None, result, processes=2, steps=1,
                       optimizer=None, threads=1, memory=True)
    _check_equal(run, d)
    assert set(run.measured_peak) == {0, 1} and all(b > 0 for b in run.measured_peak.values())


def test_bad_inputs_are_one_line_before_any_process_starts():
    d, p = _problem("gpt2")
    result = optpart.solve(p, "gpipe", micro_batches=M)
    factory = str(HERE / "pipeline_models.py") + ":gpt2"
    with pytest.raises(OptpartError, match="--processes 3: the plan runs on 2 devices"):
        run_pipeline(factory, None, result, processes=3)
    odd = {k: v[:3] for k, v in d["inputs"].items()}
    with pytest.raises(OptpartError, match="does not divide the batch of 3"):
        run_pipeline(factory, odd, result, processes=2)
    with pytest.raises(OptpartError, match="no pipelined plan"):
        run_pipeline(factory, None, {"micro_batches": 2}, processes=2)


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


def test_a_killed_rank_ends_the_run_within_seconds_naming_its_stage(tmp_path):
    _, p = _problem("gpt2")
    result = optpart.solve(p, "1f1b", micro_batches=M)
    optpart.save(p, tmp_path / "p.json")
    optpart.save_result(result, result.source_problem, tmp_path / "r.json")
    from optpart.cli import main

    assert main(["export", str(tmp_path / "r.json"), "-p", str(tmp_path / "p.json"), "-f", "pipeline",
                 "-o", str(tmp_path / "plan"), "-q"]) == 0
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "optpart", "run", str(tmp_path / "plan"), "--model",
                             str(HERE / "pipeline_models.py") + ":gpt2", "--processes", "2", "--steps", "1000000",
                             "--optimizer", "none", "--threads", "1"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        ranks: list[int] = []
        while time.monotonic() < deadline and len(ranks) < 2:  # the two ranks (spawned Python processes)
            ranks = [c for c in _children(proc.pid)
                     if "spawn_main" in Path(f"/proc/{c}/cmdline").read_text(errors="replace")]
            time.sleep(0.2)
        assert len(ranks) == 2, "the ranks did not start"
        time.sleep(3.0)  # well into set-up or the steps: either way a peer waits on the dead one
        victim = sorted(ranks)[1]
        os.kill(victim, signal.SIGKILL)
        killed = time.monotonic()
        _, err = proc.communicate(timeout=60)
        took = time.monotonic() - killed
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    lines = [line for line in err.strip().splitlines() if line.strip() and "loss_type" not in line]
    assert len(lines) == 1 and lines[0].startswith("optpart: error: stage "), err
    assert took < 10.0, f"the run took {took:.1f} s to end after the kill"
    assert all(not Path(f"/proc/{r}").exists() or "zombie" in Path(f"/proc/{r}/status").read_text().lower()
               for r in ranks)
