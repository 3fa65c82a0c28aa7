"""The README's headline pipelined run at a tiny size: solve, export and run as commands do.

``instances/make.py`` traces ``instances/torch_models.py``'s GPT-2 on meta tensors; ``optpart
solve --micro-batches``, ``optpart export -f pipeline`` and ``optpart run`` (``read_plan`` and
``run_pipeline``) then run the plan on 2 processes of the seeded factory; loss and every
gradient equal one process's autograd over the whole batch (``benchmarks/pipeline_headline.py``
runs the full-size commands).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "instances"))
import pipeline_models  # noqa: E402
from torch_models import torch_models  # noqa: E402

import optpart  # noqa: E402
from optpart.cli import main  # noqa: E402
from optpart.cli.run import read_plan  # noqa: E402
from optpart.formats.torch_import import cross_entropy, from_torch  # noqa: E402
from optpart.torch import run_pipeline  # noqa: E402


def test_solve_export_run_of_a_meta_traced_gpt2_equals_autograd(tmp_path):
    with torch.device("meta"):  # as instances/make.py traces the bundled instance
        model = torch_models()["GPT2"](layers=2, d=32, heads=2, vocab=100, ctx=32)
        x, y = torch.zeros(4, 16, dtype=torch.long), torch.zeros(4, 16, dtype=torch.long)
    p = from_torch(model, (x,), loss_fn=cross_entropy, targets=(y,), name="gpt2-tiny").with_meta(batch_size=4)
    optpart.save(p.with_devices(2, memory=2.0 ** 30), tmp_path / "gpt2.json")
    assert main(["solve", str(tmp_path / "gpt2.json"), "--micro-batches", "2", "-o", str(tmp_path / "r.json")]) == 0
    assert main(["export", str(tmp_path / "r.json"), "-p", str(tmp_path / "gpt2.json"), "-f", "pipeline",
                 "-o", str(tmp_path / "plan")]) == 0
    plan = read_plan(tmp_path / "plan")
    run = run_pipeline(str(HERE / "pipeline_models.py") + ":gpt2_plain", None, plan["pipeline"], processes=2,
                       steps=1, optimizer=None, threads=1)
    d = pipeline_models.gpt2_plain()
    loss = d["loss_fn"](d["module"](*d["inputs"]), *d["targets"])
    loss.backward()
    assert run.loss == pytest.approx(float(loss), rel=1e-5)
    ref = {n: q.grad for n, q in d["module"].named_parameters()}
    assert sorted(run.grads) == sorted(ref)
    for n, g in ref.items():
        torch.testing.assert_close(run.grads[n], g, rtol=1e-4, atol=1e-6, msg=n)


def test_a_stage_receiving_only_token_ids_gets_its_weight_gradients_under_split_backwards():
    # torch's input backward (I) finds a stage's weights through the gradients of what it received:
    # a stage whose inputs are token ids (the headline plan's second stage) must still get them
    from optpart.pipeline.plan import Action, PipelinePlan
    from optpart.pipeline.solve import plan_on_stages, score_plan
    from optpart.pipeline.stages import forward_chain, stage_of_cuts
    from optpart.pipeline.step import PipelineStep

    d = pipeline_models.gpt2_plain()
    p = from_torch(d["module"], d["inputs"], targets=d["targets"], loss_fn=d["loss_fn"],
                   micro_batches=2).with_devices(2)
    step = PipelineStep(p, 2, 0.0)
    stage_of = stage_of_cuts(forward_chain(step), [1])  # stage 0: the token ids alone
    first = [p.node_ids[i] for i in range(p.n_nodes) if stage_of[i] == 0 and p.node_meta[i]["phase"] == "forward"]
    assert first and all(n.startswith("input.") for n in first)
    plan = PipelinePlan.from_result(plan_on_stages(step, stage_of, (0, 1)), p)
    actions = [[Action.parse(a) for a in row] for row in (["0F0", "0F1", "0I0", "0W0", "0I1", "0W1"],
                                                          ["1F0", "1I0", "1F1", "1W0", "1I1", "1W1"])]
    result = score_plan(p, plan.with_actions(actions))
    run = run_pipeline(str(HERE / "pipeline_models.py") + ":gpt2_plain", None, result, processes=2, steps=1,
                       optimizer=None, threads=1)
    loss = d["loss_fn"](d["module"](*d["inputs"]), *d["targets"])
    loss.backward()
    ref = {n: q.grad for n, q in d["module"].named_parameters()}
    assert sorted(run.grads) == sorted(ref)
    for n, g in ref.items():
        torch.testing.assert_close(run.grads[n], g, rtol=1e-4, atol=1e-6, msg=n)


def test_the_planner_times_that_stage_as_torch_runs_it_whole_backward_in_i():
    from optpart.pipeline.costs import stage_costs
    from optpart.pipeline.liveness import PART_I, PART_W
    from optpart.pipeline.stages import forward_chain, stage_of_cuts
    from optpart.pipeline.step import PipelineStep

    d = pipeline_models.gpt2_plain()
    p = from_torch(d["module"], d["inputs"], targets=d["targets"], loss_fn=d["loss_fn"],
                   micro_batches=2).with_devices(2)
    step = PipelineStep(p, 2, 0.0)
    chain = forward_chain(step)
    receives_ids = stage_costs(step, stage_of_cuts(chain, [1]), (0, 1))
    bwd1 = step.backward & (receives_ids.stage_of == 1)
    assert bwd1.any() and (receives_ids.part[bwd1] == PART_I).all()  # torch: the whole backward in I
    assert receives_ids.action_time[1, 2] == 0.0  # and an empty W
    cuts = [b for b in range(chain.n_positions // 2, chain.n_positions) if chain.allowed[b]][:1]
    mid = stage_costs(step, stage_of_cuts(chain, cuts), (0, 1))  # activations cross: the split stays
    bwd1 = step.backward & (mid.stage_of == 1)
    assert (mid.part[bwd1] == PART_W).any() and (mid.part[bwd1] == PART_I).any()
