"""The README's headline plan and held-out Hugging Face models: exported plans that fit and apply.

GPT-2 small's bundled training step (``instances/gpt2-training.json``) fits its 4 x 2 GiB
only as an operator placement that spreads the loss's operators over devices; a device map or
pipeline keeps the loss on one device (2.3 GiB of logits, log-softmax and their gradients), so
export must say so in one line with the memory at which its plan fits, and at that memory both
exports fit and apply (accelerate's check and dispatch; torch pipelining's splitter).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

import optpart
from optpart import export
from optpart.units import parse_bytes

ROOT = Path(__file__).resolve().parent.parent


def _gpt2_class():
    sys.path.insert(0, str(ROOT / "instances"))
    try:
        import make
    finally:
        sys.path.pop(0)
    return make._torch_models()["GPT2"]


def test_headline_gpt2_plan_says_what_memory_fits_and_then_exports_and_applies():
    torch = pytest.importorskip("torch")
    accelerate = pytest.importorskip("accelerate")
    pipelining = pytest.importorskip("torch.distributed.pipelining")
    problem = optpart.load(ROOT / "instances" / "gpt2-training.json")
    result = optpart.solve(problem)
    assert result.ok
    dm = export.module_plan(problem, result)
    sp = export.split_points(problem, result, plan=dm)
    # At 2 GiB nothing module-level fits; each answer names the memory at which its plan does
    # (a placement's peak does not depend on the capacities), and no less.
    for plan in (dm, sp.plan):
        assert not plan.fits and "DOES NOT FIT" in plan.summary()
        need = parse_bytes(re.search(r"--memory (\S+)", plan.advice).group(1))
        peak = float(plan.result.memory_peak.max())
        assert peak <= need < peak + 11 * 2**20
    # At the device map's memory, both exports of the same placement fit.
    need = re.search(r"--memory (\S+)", dm.advice).group(1)
    bigger = problem.with_devices(4, memory=need)
    placed = optpart.evaluate(bigger, result.placement)
    dm2 = export.module_plan(bigger, placed)
    sp2 = export.split_points(bigger, placed, plan=dm2)
    assert dm2.fits and sp2.plan.fits and len(sp2.stages) > 1
    # They apply to the model the instance was traced from (same module names, small sizes).
    torch.manual_seed(0)
    model = _gpt2_class()(layers=12, d=16, heads=2, vocab=32, ctx=8)
    ids = torch.randint(0, 32, (2, 8))
    from accelerate.utils import check_device_map

    check_device_map(model, dm2.device_map)  # every parameter and buffer has a device
    ref = model(ids)
    pipe = pipelining.pipeline(model, mb_args=(ids,),
                               split_spec={n: pipelining.SplitPoint.BEGINNING for n in sp2.split_points})
    assert pipe.num_stages == len(sp2.stages)
    assert torch.allclose(pipe(ids)[0], ref, atol=1e-6)
    out = accelerate.dispatch_model(model, device_map={k: "cpu" for k in dm2.device_map})(ids)
    assert torch.allclose(out, ref, atol=1e-6)


def _opt():
    import torch
    import transformers as tf

    cfg = tf.OPTConfig(num_hidden_layers=1, hidden_size=32, ffn_dim=64, num_attention_heads=2, vocab_size=64,
                       max_position_embeddings=16, word_embed_proj_dim=32)
    return tf.OPTForCausalLM(cfg), {"input_ids": torch.randint(0, 64, (2, 8))}


def _whisper():
    import torch
    import transformers as tf

    cfg = tf.WhisperConfig(vocab_size=64, num_mel_bins=8, encoder_layers=1, decoder_layers=1, d_model=32,
                           encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                           decoder_ffn_dim=64, max_source_positions=8, max_target_positions=16,
                           decoder_start_token_id=0, pad_token_id=0, bos_token_id=0, eos_token_id=0)
    return tf.WhisperForConditionalGeneration(cfg), {"input_features": torch.randn(2, 8, 16),
                                                     "decoder_input_ids": torch.randint(0, 64, (2, 6))}


@pytest.mark.parametrize("build", [_opt, _whisper], ids=["opt", "whisper"])
def test_opt_and_whisper_export_plans_that_fit_at_default_depth_and_dispatch(build):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    accelerate = pytest.importorskip("accelerate")
    from accelerate.utils import check_device_map

    from optpart.fit import min_capacity
    from optpart.formats.torch_import import from_torch

    torch.manual_seed(0)
    model, inputs = build()
    graph = from_torch(model, inputs)
    # 4 devices at 1.25x the smallest capacity at which the default solver fits (the bundled rule).
    cap = min_capacity(graph.with_devices(4), 4, "heuristic", tolerance=0.1).capacity
    problem = graph.with_devices(4, memory=1.25 * cap)
    result = optpart.solve(problem)
    assert result.ok
    dm = export.module_plan(problem, result)
    sp = export.split_points(problem, result, plan=dm)
    assert dm.fits, dm.summary()
    assert sp.plan.fits, sp.plan.summary()
    # The stages run in module order, each device at most once.
    devices = [d for _, d in sp.stages]
    assert len(devices) == len(set(devices))
    names = dict(model.named_modules())
    assert all(m in names for m in sp.split_points)
    model.eval()
    check_device_map(model, dm.device_map)
    with torch.no_grad():
        ref = model(**inputs).logits
        out = accelerate.dispatch_model(model, device_map={k: "cpu" for k in dm.device_map})(**inputs).logits
    assert np.allclose(out.numpy(), ref.numpy(), atol=1e-6)
