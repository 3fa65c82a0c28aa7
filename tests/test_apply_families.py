"""Issue 22 item 4: the placed step equals autograd on public families beyond GPT-2/BERT/Swin.

Three cheap Hugging Face families with different operator patterns (tiny configs, random
weights, no download): Llama (RMSNorm, rotary embeddings, grouped-query attention), Whisper
(Conv1d encoder, encoder-decoder cross attention, a frozen sinusoidal position table that
autograd leaves without a gradient) and ConvNeXt (depthwise convolutions, channels-last
LayerNorm through permutes). Each runs under random placements on 2..4 distinct torch
devices and random topological orders; ``benchmarks/apply_exactness.py`` sweeps 14 families.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")

from optpart.formats.torch import check_aliasing, default_loss, trace_training_step  # noqa: E402
from optpart.formats.torch_import import problem_from_traced  # noqa: E402
from optpart.result import Result, Status  # noqa: E402
from optpart.torch import apply, check_devices  # noqa: E402

V = 64


def llama():
    cfg = tf.LlamaConfig(num_hidden_layers=1, hidden_size=32, intermediate_size=64, num_attention_heads=2,
                         num_key_value_heads=1, vocab_size=V, max_position_embeddings=16, bos_token_id=0,
                         eos_token_id=0, attention_dropout=0.0)
    return tf.LlamaForCausalLM(cfg), (torch.randint(1, V, (2, 6)),)


def whisper():
    cfg = tf.WhisperConfig(vocab_size=V, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                           decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, num_mel_bins=4,
                           max_source_positions=4, max_target_positions=16, dropout=0.0, attention_dropout=0.0,
                           activation_dropout=0.0, pad_token_id=0, bos_token_id=0, eos_token_id=0,
                           decoder_start_token_id=0)
    return (tf.WhisperForConditionalGeneration(cfg),
            {"input_features": torch.randn(2, 4, 8), "decoder_input_ids": torch.randint(1, V, (2, 5))})


def convnext():
    cfg = tf.ConvNextConfig(hidden_sizes=[4, 8], depths=[1, 1], num_stages=2, patch_size=2, drop_path_rate=0.0)
    return tf.ConvNextModel(cfg), (torch.randn(2, 3, 8, 8),)


MODELS = {"llama": llama, "whisper": whisper, "convnext": convnext}


def _call(fn, inputs):
    return fn(**inputs) if isinstance(inputs, dict) else fn(*inputs)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_placed_step_equals_autograd_under_random_plans(name):
    torch.manual_seed(0)
    module, inputs = MODELS[name]()
    ref = copy.deepcopy(module).train()
    ref.config.use_cache = False
    ref_loss = default_loss(_call(ref, inputs))
    ref_loss.backward()
    step = trace_training_step(module, inputs)
    check_aliasing(step)
    frozen = {n for n, p in module.named_parameters() if not p.requires_grad}
    assert step.frozen == frozen and (name != "whisper" or frozen)
    problem = problem_from_traced(step)
    assert not any(nid == f"update.{n}" for n in frozen for nid in problem.node_ids)
    rng = np.random.default_rng(22)
    for k in (2, 4):
        placement = rng.integers(0, k, problem.n_nodes)
        for g in problem.groups:
            placement[list(g)] = rng.integers(0, k)
        plan = Result(problem=problem.name, solver="random", status=Status.FEASIBLE,
                      placement=placement.astype(np.int64), start=rng.random(problem.n_nodes))
        devices = {f"dev{i}": ("cpu" if i == 0 else f"cpu:{i - 1}") for i in range(k)}
        gm = apply(copy.deepcopy(module), inputs, plan, devices, problem.with_devices(k), step=step)
        assert check_devices(gm)["transfers"] > 0
        loss, grads = _call(gm, inputs)
        torch.testing.assert_close(loss, ref_loss.detach(), rtol=1e-6, atol=1e-9)
        for pname, p in ref.named_parameters():
            if p.grad is None:
                assert grads[pname] is None, pname
            else:
                torch.testing.assert_close(grads[pname], p.grad, rtol=1e-6, atol=1e-9, msg=pname)
