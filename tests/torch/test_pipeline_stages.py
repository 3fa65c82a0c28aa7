"""Stage modules cut from our own trace of the planner's plans (one process).

The stages of a plan, run one after the other on every micro-batch with autograd, give the loss
and every gradient of plain autograd over the same micro-batches (for a mean loss: over the
whole batch; for batch norm, whose statistics are per micro-batch, over the micro-batches).
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pipeline_models  # noqa: E402

import optpart  # noqa: E402
import optpart.torch  # noqa: E402
from optpart.errors import OptpartError  # noqa: E402
from optpart.formats.torch_import import from_torch  # noqa: E402
from optpart.pipeline.plan import PipelinePlan  # noqa: E402
from optpart.torch.stages import split_batch, stage_modules  # noqa: E402

M = 2


@pytest.fixture(scope="module")
def built():
    """name -> (factory output, problem at the micro-batch size on 2 devices, 1F1B result)."""
    out = {}
    for name in ("gpt2", "llama", "cnn"):
        d = getattr(pipeline_models, name)()
        p = from_torch(d["module"], d["inputs"], targets=d.get("targets", ()), loss_fn=d.get("loss_fn"),
                       micro_batches=M).with_devices(2)
        out[name] = (d, p, optpart.solve(p, "1f1b", micro_batches=M))
    return out


def _stages(result) -> tuple[dict, int]:
    """``({node id: stage}, stages)`` of a pipelined result, read as each process of a run reads it."""
    plan, ids, _ = PipelinePlan.read(result)
    return plan.stage_by_id(ids), plan.n_stages


def _reference(d):
    """Loss and gradients of plain autograd over the micro-batches (mean of the micro-batch losses)."""
    model = copy.deepcopy(d["module"])
    inp, tg, lf = d["inputs"], d.get("targets", ()), d.get("loss_fn")
    loss = 0.0
    for i in range(M):
        if isinstance(inp, dict):
            out = model(**{k: v.chunk(M)[i] for k, v in inp.items()})
        else:
            out = model(*(v.chunk(M)[i] for v in inp))
        part = out.loss if lf is None else lf(out, *(t.chunk(M)[i] for t in tg))
        (part / M).backward()
        loss += float(part) / M
    return loss, {n: q.grad for n, q in model.named_parameters()}


@pytest.mark.parametrize("name", ["gpt2", "llama", "cnn"])
def test_stages_run_in_turn_give_autograds_loss_and_gradients(built, name):
    d, p, r = built[name]
    assert r.ok and r.options["schedule"] == "1F1B"
    stage_of, n_stages = _stages(r)
    mb_in, mb_tg = split_batch(d["inputs"], d.get("targets", ()), M)
    sm = stage_modules(d["module"], mb_in, stage_of, n_stages, loss_fn=d.get("loss_fn"), mb_targets=mb_tg)
    flat = sm.step.flatten_inputs(d["inputs"]) + list(d.get("targets", ()))
    loss = 0.0
    for i in range(M):
        vals = [t.chunk(M)[i] for t in flat]
        for s, mod in enumerate(sm.modules):
            vals = mod(*vals)
            if s < len(sm.modules) - 1:
                ins, outs = sm.examples(s + 1)
                assert len(vals) == len(ins) and [v.shape for v in vals] == [t.shape for t in ins]
                assert [v.requires_grad for v in vals] == [t.requires_grad for t in ins]
        (vals / M).backward()
        loss += float(vals) / M
    ref_loss, ref = _reference(d)
    got: dict = {}
    for mod in sm.modules:
        for n, q in mod.named_parameters():
            assert isinstance(q, torch.nn.Parameter)
            got[n] = q.grad if n not in got else got[n] + q.grad  # a replicated parameter: summed
    assert sorted(got) == sorted(ref)
    assert loss == pytest.approx(ref_loss, rel=1e-5)
    for n, g in ref.items():
        torch.testing.assert_close(got[n], g, rtol=1e-4, atol=1e-6, msg=n)


def test_the_tied_embedding_is_replicated_on_the_first_and_last_stage(built):
    d, p, r = built["gpt2"]
    stage_of, n_stages = _stages(r)
    assert n_stages == 2
    sm = stage_modules(d["module"], split_batch(d["inputs"], (), M)[0], stage_of, 2)
    assert sm.tied == {"transformer.wte.weight": [0, 1]}
    w = [mod.get_parameter("transformer.wte.weight") for mod in sm.modules]
    assert w[0] is not w[1] and torch.equal(w[0], w[1])
    assert sm.received[1] and all(isinstance(n, str) for n in sm.received[1])


def test_apply_runs_a_pipelined_result_over_its_micro_batches(built):
    d, p, r = built["gpt2"]
    model = copy.deepcopy(d["module"])
    step = optpart.torch.apply(model, d["inputs"], r, devices={"dev0": "cpu", "dev1": "cpu:0"})
    loss, grads = step(**d["inputs"])
    ref = model(**d["inputs"]).loss
    ref.backward()
    assert float(loss) == pytest.approx(float(ref), rel=1e-5)
    for n, q in model.named_parameters():
        torch.testing.assert_close(grads[n], q.grad, rtol=1e-4, atol=1e-6, msg=n)


def test_a_plan_for_another_model_a_missing_stage_and_a_backward_flow_each_fail_in_one_line(built):
    d, _, _ = built["gpt2"]
    mb = split_batch(d["inputs"], (), M)[0]
    with pytest.raises(OptpartError, match="a plan for another model") as e:
        stage_modules(d["module"], mb, _stages(built["llama"][2])[0], 2)
    assert "\n" not in str(e.value)
    stage_of = _stages(built["gpt2"][2])[0]
    first = next(n for n in stage_of if n.startswith("embedding"))
    with pytest.raises(OptpartError, match=f"forward operator '{first}' .* no stage"):
        stage_modules(d["module"], mb, {k: v for k, v in stage_of.items() if k != first}, 2)
    backwards = {k: (1 - v if k == first else v) for k, v in stage_of.items()}
    with pytest.raises(OptpartError, match="not a pipeline|not in the last stage"):
        stage_modules(d["module"], mb, backwards, 2)
    with pytest.raises(OptpartError, match="does not divide the batch"):
        split_batch(d["inputs"], (), 3)


def test_live_bytes_counts_storage_while_it_is_referenced():
    from optpart.torch.memtrack import LiveBytes

    held = torch.zeros(250)  # 1000 bytes alive before the mode starts
    with LiveBytes([held]) as t:
        a = torch.ones(1000)  # 4000 bytes
        b = a * 2  # 4000 more
        view = b.view(10, 100)  # shares b's storage: nothing more
        assert (t.now, t.peak) == (9000, 9000)
        del a
        assert t.now == 5000
        del b, view
        assert (t.now, t.peak) == (1000, 9000)
