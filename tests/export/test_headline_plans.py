"""The README's headline plan and held-out Hugging Face models: exported plans that fit and apply.

GPT-2 small's bundled training step (``instances/gpt2-training.json``) carries 4 x 3 GiB, at
least the capacity a module-granular plan needs (instances/README.md): a device map or pipeline
keeps the loss on one device (2.3 GiB of logits, log-softmax and their gradients), which the
1.25x rule's 2 GiB cannot hold. At the bundled memory the default solver's plan exports both
ways and fits, and both exports apply (accelerate's check and dispatch; torch pipelining's
splitter); one device still cannot hold the step.
"""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest

from conftest import ROOT

import optpart
from optpart import export
from optpart.export.stages import untied
from optpart.export.tree import export_modules
from optpart.model.memory import peak_memory
from optpart.units import parse_bytes

GPT2 = ROOT / "instances" / "gpt2-training.json"


def _gpt2_class():
    sys.path.insert(0, str(ROOT / "instances"))
    try:
        import make
    finally:
        sys.path.pop(0)
    return make._torch_models()["GPT2"]


@pytest.fixture(scope="module")
def gpt2():
    """The bundled problem and the default solver's result on it (no time limit: deterministic)."""
    problem = optpart.load(GPT2)
    result = optpart.solve(problem)
    assert result.ok and result.memory_model == "peak"
    return problem, result


def test_bundled_gpt2_plan_exports_as_a_device_map_and_split_points_that_fit(gpt2):
    problem, result = gpt2
    cap = problem.device_memory
    assert problem.n_devices == 4
    dm = export.module_plan(problem, result)
    sp = export.split_points(problem, result)
    # The split points are scored as torch pipelining runs them: the tied embedding/head
    # weight is replicated per stage (its colocation split by module), and a note says so.
    relaxed, _ = untied(problem, export_modules(problem))
    for plan, judged in ((dm, problem), (sp.plan, relaxed)):
        assert plan.memory_model == "peak"
        assert plan.fits and "DOES NOT FIT" not in plan.summary(), plan.summary()
        assert np.all(plan.result.memory_peak <= cap)
        assert optpart.violations(judged, plan.result) == []
    assert any("wte.weight" in n and "head" in n for n in sp.notes())
    assert len(sp.stages) > 1 and len(sp.split_points) == len(sp.stages) - 1
    devices = [d for _, d in sp.stages]
    assert len(devices) == len(set(devices))
    # Still a partitioning problem: one device of the bundled capacity cannot hold the step
    # (run alone, in the single-device order, with room for everything to measure its peak).
    one = problem.with_devices(1, memory=float(problem.memory.sum()) + float(cap[0]))
    rs = optpart.solve(one, "single", memory_model="static")
    assert rs.ok
    assert float(peak_memory(one, rs.placement, rs.start, rs.finish).max()) > float(cap[0])
    alone = optpart.solve(problem.with_devices(1, memory=float(cap[0])), "single")
    assert not alone.ok


def test_below_the_bundled_capacity_the_gpt2_device_map_names_its_memory():
    """Why the bundled capacity is what the device map needs: below it the operator placement
    still fits (it spreads the loss's operators), the module-granular map does not, and export
    names the memory at which it would."""
    below = 2.5 * 2**30
    problem = optpart.load(GPT2).with_devices(4, memory=below)
    assert below < float(optpart.load(GPT2).device_memory[0])
    result = optpart.solve(problem)
    assert result.ok and np.all(result.memory_peak <= below)
    dm = export.module_plan(problem, result)
    assert not dm.fits and "DOES NOT FIT" in dm.summary()
    need = parse_bytes(re.search(r"--memory (\S+)", dm.advice).group(1))
    peak = float(dm.result.memory_peak.max())
    assert peak <= need < peak + 11 * 2**20
    # the bundled capacity holds the device map (as accelerate runs it, one device at a time)
    assert float(optpart.load(GPT2).device_memory[0]) >= -(-peak // 2**28) * 2**28


def test_headline_gpt2_plan_exports_and_applies(gpt2):
    torch = pytest.importorskip("torch")
    accelerate = pytest.importorskip("accelerate")
    pipelining = pytest.importorskip("torch.distributed.pipelining")
    problem, result = gpt2
    dm = export.module_plan(problem, result)
    sp = export.split_points(problem, result)
    assert dm.fits and sp.plan.fits and len(sp.stages) > 1
    # They apply to the model the instance was traced from (same module names, small sizes).
    torch.manual_seed(0)
    model = _gpt2_class()(layers=12, d=16, heads=2, vocab=32, ctx=8)
    ids = torch.randint(0, 32, (2, 8))
    from accelerate.utils import check_device_map

    check_device_map(model, dm.device_map)  # every parameter and buffer has a device
    ref = model(ids)
    pipe = pipelining.pipeline(model, mb_args=(ids,),
                               split_spec={n: pipelining.SplitPoint.BEGINNING for n in sp.split_points})
    assert pipe.num_stages == len(sp.stages)
    assert torch.allclose(pipe(ids)[0], ref, atol=1e-6)
    out = accelerate.dispatch_model(model, device_map={k: "cpu" for k in dm.device_map})(ids)
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
def test_opt_and_whisper_export_plans_that_fit_at_default_depth_or_at_the_advised_memory_and_dispatch(build):
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
    sp = export.split_points(problem, result)
    assert sp.plan.fits, sp.plan.summary()
    if not dm.fits:
        # A device map keeps each decoder layer whole (its residuals are its own code, which
        # accelerate runs on one device), so it may need more than the pipeline: the advice
        # names a memory at which the re-solved step's map fits.
        import re

        from optpart.units import parse_bytes

        flag = re.search(r"--memory (\S+)", dm.advice)
        assert flag, dm.summary()
        problem = graph.with_devices(4, memory=parse_bytes(flag.group(1)))
        result = optpart.solve(problem)
        assert result.ok
        dm = export.module_plan(problem, result)
        assert dm.fits, dm.summary()
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


def _bart():
    import torch
    import transformers as tf

    cfg = tf.BartConfig(vocab_size=64, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                        decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=16,
                        pad_token_id=0, bos_token_id=0, eos_token_id=0, decoder_start_token_id=0)
    ids = torch.randint(1, 64, (2, 6))
    return tf.BartForConditionalGeneration(cfg), {"input_ids": ids, "decoder_input_ids": ids}, "final_logits_bias"


def _clip():
    import torch
    import transformers as tf

    cfg = tf.CLIPConfig(text_config=dict(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, max_position_embeddings=6),
                        vision_config=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                           num_attention_heads=2, image_size=8, patch_size=4), projection_dim=8)
    return (tf.CLIPModel(cfg), {"input_ids": torch.randint(1, 64, (2, 6)), "pixel_values": torch.randn(2, 3, 8, 8)},
            "logit_scale")


@pytest.mark.parametrize("build", [_bart, _clip], ids=["bart", "clip"])
def test_maps_with_tensors_of_the_top_level_module_pass_accelerates_check_and_dispatch(build):
    """BART's final_logits_bias and CLIP's logit_scale belong to the model itself (module ""):
    under a plan that puts the two stacks of layers on devices 1 and 2 they get their own entry, accelerate's
    check accepts the map, and the model dispatched with it (hooks on every mapped module,
    devices mapped to cpu) computes the original logits."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    accelerate = pytest.importorskip("accelerate")
    from accelerate.utils import check_device_map

    from optpart.formats.torch_import import from_torch

    torch.manual_seed(0)
    model, inputs, root_tensor = build()
    problem = from_torch(model, inputs, devices=3)
    # The first stack of layers on device 1, the second on 2, the rest (the root's tensors) on 0:
    # their parents only pass tensors from one child to the next, so the map stays split.
    mods = export.node_modules(problem)
    placement = np.array([0 if m is None or ".layers" not in m else 1 if ("model.encoder" in m or "text_model" in m)
                          else 2 for m in mods], dtype=np.int64)
    plan = export.closest_plan(problem, optpart.evaluate(problem, placement), rule="accelerate")
    assert root_tensor in plan.device_map and len(set(plan.device_map.values())) > 1
    model.eval()
    check_device_map(model, plan.device_map)  # raises when a parameter or buffer has no device
    with pytest.raises(ValueError, match=root_tensor):
        check_device_map(model, {k: v for k, v in plan.device_map.items() if k != root_tensor})
    with torch.no_grad():
        ref = model(**inputs)
        out = accelerate.dispatch_model(model, device_map={k: "cpu" for k in plan.device_map},
                                        force_hooks=True)(**inputs)
    for name in ("logits", "logits_per_image"):
        if getattr(ref, name, None) is not None:
            assert torch.equal(getattr(out, name), getattr(ref, name))
