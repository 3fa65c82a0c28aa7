"""The sweep over public model families: each traced step proved, placed and run on a second batch.

For each family (tiny random-weight configs built from Hugging Face config classes, no
download, dropout as the config has it: decoders, encoders, encoder-decoders, state-space
models (Mamba, Mamba2) and a hybrid (Jamba), block-sparse attention (BigBird), vision and
audio (Wav2Vec2, HuBERT) models; plus plain ``torch.nn`` models: multi-head attention,
two custom ``autograd.Function`` classes (one with a non-differentiable output), a BatchNorm CNN with
in-place ReLU, a Conv1d + BatchNorm + GRU net, a bidirectional LSTM, blocks under
``torch.utils.checkpoint``, buffers updated in place and reassigned) the script

1. imports the training step with the trace proof (what :func:`optpart.formats.torch_import.from_torch`
   does with ``check=True``: the graph replayed against eager autograd,
   :func:`optpart.formats.torch.proof.prove_step`);
2. ``--trials`` times, draws a random valid placement on K = 2..4 devices (colocation groups
   kept whole) and a random topological order (random start times), runs
   :func:`optpart.torch.apply` on K distinct torch devices (``cpu``, ``cpu:0``, ``cpu:1``,
   ``cpu:2``: every crossing edge is a copy, proved present by :func:`optpart.torch.check_devices`)
   and compares the loss and every gradient with plain autograd on a copy of the module,
   both runs seeded alike (dropout draws the same masks: the placed step keeps the traced
   order of random operators);
3. runs the placed step on a **second batch** of the traced shapes: its loss and gradients
   must equal those of autograd on a copy that ran the first batch before it (so a step
   reads the buffers the first one updated), and the module's buffers after both steps
   must equal that copy's; or, for a step that read its data (a real-tensor
   trace: mixture-of-experts routing, a padding check, a matcher in NumPy), the call must be
   refused with one line naming the operator and module whose data took another path.

Prints one Markdown table: family, problem nodes, trace mode, trace proof error (worst
relative error of the loss and gradients, graph replay vs eager autograd), apply error
(worst over all trials: ``max |a - b| / max |b|`` per tensor), the second batch's outcome,
and pass. Exit status 1 when any family fails. ``tests/torch/test_families.py`` runs a cheap
subset of these families through :func:`sweep`.

    nice -n 10 python benchmarks/apply_exactness.py [--trials 3] [--seed 0] [--only gpt2 deepseek_v3]
"""

from __future__ import annotations

import argparse
import copy
import sys
import time

import numpy as np

V, S = 64, 8  # vocabulary and sequence length of the text models


def families() -> dict:
    """Family name -> builder returning ``(module, batch)``; ``batch(seed)`` makes example inputs."""
    import torch
    import transformers as tf

    def ids(seed, shape=(2, S), low=1):
        return torch.randint(low, V, shape, generator=torch.Generator().manual_seed(seed))

    def randn(seed, *shape):
        return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))

    text = dict(num_hidden_layers=2, hidden_size=32, intermediate_size=64, num_attention_heads=2, vocab_size=V,
                max_position_embeddings=32)
    decoder = dict(num_key_value_heads=1, bos_token_id=0, eos_token_id=0, pad_token_id=0, **text)
    seq2seq = dict(vocab_size=V, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                   decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=32,
                   pad_token_id=0, bos_token_id=0, eos_token_id=0, decoder_start_token_id=0)
    moe = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, **decoder)

    def hf(model_cls, cfg, batch):
        return lambda: (model_cls(cfg()), batch)

    causal = lambda seed: (ids(seed),)  # noqa: E731
    labelled = lambda seed: {"input_ids": ids(seed), "labels": ids(seed)}  # noqa: E731
    image = lambda size: (lambda seed: (randn(seed, 2, 3, size, size),))  # noqa: E731

    class GRUNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn = torch.nn.Conv1d(3, 4, 3), torch.nn.BatchNorm1d(4)
            self.rnn, self.head = torch.nn.GRU(4, 5, batch_first=True), torch.nn.Linear(5, 2)

        def forward(self, x):
            out, _ = self.rnn(torch.relu(self.bn(self.conv(x))).transpose(1, 2))
            return self.head(out[:, -1])

    class BNCNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = torch.nn.Sequential(
                torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(inplace=True),
                torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(inplace=True),
                torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 5))

        def forward(self, x):
            return self.body(x)

    class MHA(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = torch.nn.MultiheadAttention(16, 2, dropout=0.1, batch_first=True)
            self.norm, self.out = torch.nn.LayerNorm(16), torch.nn.Linear(16, 3)

        def forward(self, x):
            y, _ = self.attn(x, x, x, need_weights=False)
            return self.out(self.norm(x + y))

    class SquarePlus(torch.autograd.Function):
        """``x + sqrt(x^2 + 4)`` with a hand-written backward."""

        @staticmethod
        def forward(ctx, x):
            root = torch.sqrt(x * x + 4)
            ctx.save_for_backward(x, root)
            return (x + root) / 2

        @staticmethod
        def backward(ctx, grad):
            x, root = ctx.saved_tensors
            return grad * (1 + x / root) / 2

    class Custom(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(6, 12), torch.nn.Linear(12, 2)

        def forward(self, x):
            return self.b(SquarePlus.apply(self.a(x)))

    def padded(seed):
        g = torch.Generator().manual_seed(seed)
        mask = torch.ones(2, S, dtype=torch.long)
        mask[1, int(torch.randint(2, S - 1, (1,), generator=g)):] = 0  # the second sequence is padded
        return {"input_ids": ids(seed), "attention_mask": mask}

    def detr_batch(seed):
        g = torch.Generator().manual_seed(seed)
        labels = [{"class_labels": torch.randint(0, 3, (2,), generator=g),
                   "boxes": torch.rand(2, 4, generator=g) * 0.5 + 0.25} for _ in range(2)]
        return {"pixel_values": randn(seed, 2, 3, 32, 32), "labels": labels}

    class LSTMTagger(torch.nn.Module):
        """Embedding, a two-layer bidirectional LSTM with dropout (oneDNN's LSTM kernel on a CPU), a head."""

        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(V, 8)
            self.rnn = torch.nn.LSTM(8, 6, num_layers=2, batch_first=True, bidirectional=True, dropout=0.1)
            self.head = torch.nn.Linear(12, 3)

        def forward(self, x):
            out, (h, _) = self.rnn(self.emb(x))
            return self.head(out.mean(1)) + h.sum(0).sum(-1, keepdim=True)

    class Checkpointed(torch.nn.Module):
        """A stem, two blocks with dropout under ``torch.utils.checkpoint`` (non-reentrant), one without, a head."""

        def __init__(self):
            super().__init__()
            self.stem, self.head = torch.nn.Linear(8, 8), torch.nn.Linear(8, 2)
            self.blocks = torch.nn.ModuleList(torch.nn.Sequential(
                torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Dropout(0.1), torch.nn.Linear(16, 8))
                for _ in range(3))

        def forward(self, x):
            x = self.stem(x)
            for i, blk in enumerate(self.blocks):
                x = x + (torch.utils.checkpoint.checkpoint(blk, x, use_reentrant=False) if i < 2 else blk(x))
            return self.head(x)

    class ScaleGrad(torch.autograd.Function):
        """``x * w`` and a non-differentiable argmax; the backward scales by a number kept on ``ctx``."""

        @staticmethod
        def forward(ctx, x, w, alpha):
            ctx.alpha = alpha
            ctx.save_for_backward(w)
            out = x * w
            idx = out.argmax(-1)
            ctx.mark_non_differentiable(idx)
            return out, idx

        @staticmethod
        def backward(ctx, grad, _):
            (w,) = ctx.saved_tensors
            return grad * w * ctx.alpha, None, None

    class Custom2(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(6, 12), torch.nn.Linear(12, 2)
            self.w = torch.nn.Parameter(torch.randn(12))

        def forward(self, x):
            y, idx = ScaleGrad.apply(self.a(x), self.w, 0.5)
            return self.b(torch.tanh(y)) + idx.unsqueeze(-1)

    class Centred(torch.nn.Module):
        """Outputs centred by a running mean the forward reassigns (``self.ema = ...``), scaled by a step counter."""

        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(6, 8), torch.nn.Linear(8, 2)
            self.register_buffer("ema", torch.zeros(8))
            self.register_buffer("steps", torch.zeros((), dtype=torch.long))

        def forward(self, x):
            h = torch.relu(self.a(x))
            self.ema = 0.9 * self.ema + 0.1 * h.detach().mean(0)
            self.steps += 1
            return self.b(h - self.ema) * self.steps

    audio = dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                 conv_dim=(8, 8), conv_stride=(5, 4), conv_kernel=(10, 8), num_conv_pos_embeddings=8,
                 num_conv_pos_embedding_groups=2, vocab_size=12, pad_token_id=0, mask_time_prob=0.0)

    def ctc(seed):
        return {"input_values": randn(seed, 2, 400),
                "labels": torch.randint(1, 10, (2, 3), generator=torch.Generator().manual_seed(seed))}

    def gpt2_checkpointed():
        model = tf.GPT2LMHeadModel(tf.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=V, n_positions=32,
                                                 bos_token_id=0, eos_token_id=0))
        model.gradient_checkpointing_enable()
        return model, causal

    return {
        "gpt2": hf(tf.GPT2LMHeadModel, lambda: tf.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=V,
                                                               n_positions=32, bos_token_id=0, eos_token_id=0),
                   causal),
        "gpt2_checkpointing": gpt2_checkpointed,
        "bert": hf(tf.BertForMaskedLM, lambda: tf.BertConfig(pad_token_id=0, **text), causal),
        "bert_padding": hf(tf.BertForMaskedLM, lambda: tf.BertConfig(pad_token_id=0, **text), padded),
        "roberta": hf(tf.RobertaForMaskedLM, lambda: tf.RobertaConfig(
            pad_token_id=0, bos_token_id=0, eos_token_id=0, **{**text, "max_position_embeddings": 40}), causal),
        "llama": hf(tf.LlamaForCausalLM, lambda: tf.LlamaConfig(**decoder), causal),
        "llama_tied": hf(tf.LlamaForCausalLM, lambda: tf.LlamaConfig(tie_word_embeddings=True, **decoder), labelled),
        "qwen2": hf(tf.Qwen2ForCausalLM, lambda: tf.Qwen2Config(**decoder), causal),
        "mixtral": hf(tf.MixtralForCausalLM, lambda: tf.MixtralConfig(num_local_experts=4, num_experts_per_tok=2,
                                                                      **decoder), causal),
        "qwen2_moe": hf(tf.Qwen2MoeForCausalLM, lambda: tf.Qwen2MoeConfig(
            shared_expert_intermediate_size=32, **moe), labelled),
        "qwen3_moe": hf(tf.Qwen3MoeForCausalLM, lambda: tf.Qwen3MoeConfig(head_dim=16, **moe), labelled),
        "deepseek_v3": hf(tf.DeepseekV3ForCausalLM, lambda: tf.DeepseekV3Config(
            vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
            num_key_value_heads=2, kv_lora_rank=8, q_lora_rank=16, qk_rope_head_dim=8, v_head_dim=8,
            qk_nope_head_dim=8, first_k_dense_replace=1, n_routed_experts=4, num_experts_per_tok=2, n_group=2,
            topk_group=1, moe_intermediate_size=16, max_position_embeddings=32, rope_scaling=None,
            bos_token_id=0, eos_token_id=0, pad_token_id=0), labelled),
        "t5": hf(tf.T5ForConditionalGeneration, lambda: tf.T5Config(
            num_layers=1, num_decoder_layers=1, d_model=32, d_kv=16, num_heads=2, d_ff=64, vocab_size=V,
            decoder_start_token_id=0, pad_token_id=0),
            lambda seed: {"input_ids": ids(seed), "labels": ids(seed + 1000)}),
        "bart": hf(tf.BartForConditionalGeneration, lambda: tf.BartConfig(**seq2seq),
                   lambda seed: {"input_ids": ids(seed), "decoder_input_ids": ids(seed + 1000)}),
        "whisper": hf(tf.WhisperForConditionalGeneration,
                      lambda: tf.WhisperConfig(**{**seq2seq, "max_source_positions": 8, "max_target_positions": 32},
                                               num_mel_bins=8),
                      lambda seed: {"input_features": randn(seed, 2, 8, 16), "decoder_input_ids": ids(seed)}),
        "mamba": hf(tf.MambaForCausalLM, lambda: tf.MambaConfig(vocab_size=V, hidden_size=16, state_size=4,
                                                                num_hidden_layers=2, expand=2, conv_kernel=3,
                                                                bos_token_id=0, eos_token_id=0, pad_token_id=0),
                    labelled),
        "clip": hf(tf.CLIPModel, lambda: tf.CLIPConfig(
            text_config=dict(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                             num_attention_heads=2, max_position_embeddings=S),
            vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                               image_size=16, patch_size=8), projection_dim=16),
            lambda seed: {"input_ids": ids(seed), "pixel_values": randn(seed, 2, 3, 16, 16)}),
        "vit": hf(tf.ViTForImageClassification, lambda: tf.ViTConfig(**{k: text[k] for k in (
            "num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads")}, image_size=16,
            patch_size=8, num_labels=5), image(16)),
        "vit_mae": hf(tf.ViTMAEForPreTraining, lambda: tf.ViTMAEConfig(
            hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, image_size=16,
            patch_size=4, decoder_hidden_size=16, decoder_num_hidden_layers=1, decoder_num_attention_heads=2,
            decoder_intermediate_size=32), image(16)),
        "detr": hf(tf.DetrForObjectDetection, lambda: tf.DetrConfig(
            use_timm_backbone=False, use_pretrained_backbone=False, backbone_config=tf.ResNetConfig(
                embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], out_features=["stage2"]),
            d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
            encoder_ffn_dim=32, decoder_ffn_dim=32, num_queries=4, num_labels=3), detr_batch),
        "resnet": hf(tf.ResNetModel, lambda: tf.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1]),
                     image(32)),
        "convnext": hf(tf.ConvNextModel, lambda: tf.ConvNextConfig(hidden_sizes=[8, 16], depths=[1, 1],
                                                                   num_stages=2, patch_size=2), image(16)),
        "swin": hf(tf.SwinModel, lambda: tf.SwinConfig(image_size=8, patch_size=2, embed_dim=8, depths=[1, 1],
                                                       num_heads=[1, 2], window_size=2, mlp_ratio=1.0), image(8)),
        "multihead_attention": lambda: (MHA(), lambda seed: (randn(seed, 2, 5, 16),)),
        "autograd_function": lambda: (Custom(), lambda seed: (randn(seed, 4, 6),)),
        "bn_cnn_inplace_relu": lambda: (BNCNN(), image(8)),
        "conv1d_bn_gru": lambda: (GRUNet(), lambda seed: (randn(seed, 3, 3, 6),)),
        "bloom": hf(tf.BloomForCausalLM, lambda: tf.BloomConfig(vocab_size=V, hidden_size=32, n_layer=2, n_head=2,
                                                              bos_token_id=0, eos_token_id=0, pad_token_id=0),
                    causal),
        "gptj": hf(tf.GPTJForCausalLM, lambda: tf.GPTJConfig(vocab_size=V, n_embd=32, n_layer=2, n_head=2,
                                                           rotary_dim=8, n_positions=32, bos_token_id=0,
                                                           eos_token_id=0), causal),
        "granite": hf(tf.GraniteForCausalLM, lambda: tf.GraniteConfig(**decoder), causal),
        "cohere": hf(tf.CohereForCausalLM, lambda: tf.CohereConfig(**decoder), causal),
        "starcoder2": hf(tf.Starcoder2ForCausalLM, lambda: tf.Starcoder2Config(**decoder), causal),
        "deberta_v2": hf(tf.DebertaV2ForMaskedLM, lambda: tf.DebertaV2Config(
            pad_token_id=0, relative_attention=True, position_buckets=4, pos_att_type=["p2c", "c2p"],
            max_relative_positions=8, **text), causal),
        "electra": hf(tf.ElectraForPreTraining, lambda: tf.ElectraConfig(embedding_size=16, pad_token_id=0, **text),
                      causal),
        "pegasus": hf(tf.PegasusForConditionalGeneration, lambda: tf.PegasusConfig(**seq2seq),
                      lambda seed: {"input_ids": ids(seed), "decoder_input_ids": ids(seed + 1000)}),
        "lstm_tagger": lambda: (LSTMTagger(), lambda seed: (ids(seed),)),
        "checkpointed_blocks": lambda: (Checkpointed(), lambda seed: (randn(seed, 2, 5, 8),)),
        "autograd_function_nondiff": lambda: (Custom2(), lambda seed: (randn(seed, 4, 6),)),
        "reassigned_buffer": lambda: (Centred(), lambda seed: (randn(seed, 4, 6),)),
        "olmo": hf(tf.OlmoForCausalLM, lambda: tf.OlmoConfig(**decoder), causal),
        "stablelm": hf(tf.StableLmForCausalLM, lambda: tf.StableLmConfig(**decoder), causal),
        "mamba2": hf(tf.Mamba2ForCausalLM, lambda: tf.Mamba2Config(
            vocab_size=V, hidden_size=16, state_size=4, num_hidden_layers=2, expand=2, conv_kernel=3, num_heads=4,
            head_dim=8, n_groups=1, chunk_size=4, bos_token_id=0, eos_token_id=0, pad_token_id=0), labelled),
        "jamba": hf(tf.JambaForCausalLM, lambda: tf.JambaConfig(
            num_experts=2, num_experts_per_tok=1, expert_layer_period=2, expert_layer_offset=1,
            attn_layer_period=2, attn_layer_offset=1, mamba_d_state=4, mamba_d_conv=3, mamba_expand=2,
            mamba_dt_rank=4, **decoder), labelled),
        "xlnet": hf(tf.XLNetLMHeadModel, lambda: tf.XLNetConfig(vocab_size=V, d_model=32, n_layer=2, n_head=2,
                                                                d_inner=64, pad_token_id=0, bos_token_id=0,
                                                                eos_token_id=0), causal),
        "big_bird": hf(tf.BigBirdForMaskedLM, lambda: tf.BigBirdConfig(
            attention_type="block_sparse", block_size=2, num_random_blocks=2, pad_token_id=0, sep_token_id=2,
            **{**text, "max_position_embeddings": 64}), lambda seed: (ids(seed, (2, 32)),)),
        "segformer": hf(tf.SegformerForSemanticSegmentation, lambda: tf.SegformerConfig(
            num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[8, 16], patch_sizes=[7, 3],
            strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2], decoder_hidden_size=16, num_labels=3),
            lambda seed: {"pixel_values": randn(seed, 2, 3, 32, 32),
                          "labels": torch.randint(0, 3, (2, 32, 32), generator=torch.Generator().manual_seed(seed))}),
        "dinov2": hf(tf.Dinov2ForImageClassification, lambda: tf.Dinov2Config(
            hidden_size=32, num_hidden_layers=2, num_attention_heads=2, mlp_ratio=2, image_size=16, patch_size=8,
            num_labels=3), image(16)),
        "mobilevit": hf(tf.MobileViTForImageClassification, lambda: tf.MobileViTConfig(
            image_size=32, patch_size=2, hidden_sizes=[16, 16, 16], neck_hidden_sizes=[8, 8, 8, 8, 8, 8, 16],
            num_attention_heads=2, num_labels=3), image(32)),
        "wav2vec2": hf(tf.Wav2Vec2ForCTC, lambda: tf.Wav2Vec2Config(**audio), ctc),
        "hubert": hf(tf.HubertForCTC, lambda: tf.HubertConfig(**audio), ctc),
    }


def _call(fn, inputs):
    return fn(**inputs) if isinstance(inputs, dict) else fn(*inputs)


def reference(module, inputs, seed: int, before=None):
    """Loss, gradients and buffers of one eager autograd step on a copy (train mode, no cache), seeded with ``seed``.

    ``before``: inputs of a step taken first (seeded alike), whose buffer updates (running
    statistics, counters) the step then reads, as the placed step that ran it does.
    """
    import torch

    from optpart.formats.torch import default_loss

    ref = copy.deepcopy(module).train()
    if getattr(getattr(ref, "config", None), "use_cache", None):
        ref.config.use_cache = False
    experts = getattr(ref, "get_experts_implementation", lambda: None)()
    if experts:  # the importer traces mixture-of-experts layers with the per-expert loop: so does autograd
        ref.set_experts_implementation({k: ("eager" if v == "grouped_mm" else v) for k, v in experts.items()})
    for batch in ([before] if before is not None else []) + [inputs]:
        ref.zero_grad(set_to_none=True)
        torch.manual_seed(seed)
        loss = default_loss(_call(ref, batch))
        loss.backward()
    return loss.detach(), {n: p.grad for n, p in ref.named_parameters()}, dict(ref.named_buffers())


def random_plan(problem, rng, k: int):
    """A random valid placement on ``k`` devices (colocation groups whole) and random start times."""
    from optpart.result import Result, Status

    placement = rng.integers(0, k, problem.n_nodes)
    for g in problem.groups:
        placement[list(g)] = rng.integers(0, k)
    return Result(problem=problem.name, solver="random", status=Status.FEASIBLE,
                  placement=placement.astype(np.int64), start=rng.random(problem.n_nodes))


def step_error(gm, step, inputs, want_loss, want_grads, seed: int) -> float:
    """Worst relative error of the placed step's loss and gradients on ``inputs`` (seeded with ``seed``)."""
    import torch

    from optpart.formats.torch.proof import relative_error

    torch.manual_seed(seed)
    loss, grads = gm(*step.flatten_inputs(inputs))  # nested inputs (DETR's labels) as their tensors
    return max([relative_error(loss, want_loss)] + [relative_error(grads.get(n), g) for n, g in want_grads.items()])


def sweep(name: str, build, trials: int = 3, seed: int = 0) -> dict:
    """Import, prove, place and run family ``name``; the row's facts as a dict.

    Returns ``{"family", "nodes", "trace_mode", "reads", "proof", "apply", "second", "second_refused", "ok",
    "step", "problem", "module"}``: ``proof`` and ``apply`` are worst relative errors, ``second`` the second
    batch's worst relative error or its one-line refusal (``second_refused``).
    """
    import torch

    from optpart.errors import OptpartError
    from optpart.formats.torch import trace_training_step
    from optpart.formats.torch.proof import TOLERANCE, prove_step, relative_error
    from optpart.formats.torch_import import problem_from_traced
    from optpart.torch import apply, check_devices

    torch.manual_seed(seed)
    module, batch = build()
    first, second = batch(seed), batch(seed + 1)
    step = trace_training_step(module, first)  # what from_torch(module, first, check=True) does, step kept
    problem = problem_from_traced(step)
    proof = prove_step(step, module, first)
    tol = TOLERANCE["float32"]
    ref_loss, ref_grads, _ = reference(module, first, seed)
    rng = np.random.default_rng(seed)
    worst, gm = 0.0, None
    for _ in range(trials):
        k = int(rng.integers(2, 5))
        devices = {f"dev{i}": ("cpu" if i == 0 else f"cpu:{i - 1}") for i in range(k)}
        held = copy.deepcopy(module)  # the placed step updates its buffers (running statistics) in place
        gm = apply(held, first, random_plan(problem.with_devices(k), rng, k), devices, problem.with_devices(k),
                   step=step)
        check_devices(gm)
        worst = max(worst, step_error(gm, step, first, ref_loss, ref_grads, seed))
    refused, second_err = None, None
    try:  # the last placed step ran the first batch: eager autograd runs it before the second too
        loss2, grads2, buffers2 = reference(module, second, seed, before=first)
        second_err = step_error(gm, step, second, loss2, grads2, seed)
        second_err = max([second_err] + [relative_error(b.double(), buffers2[n].double())
                                          for n, b in held.named_buffers()])
    except OptpartError as exc:
        refused = str(exc)
    ok = proof.get("worst_rel_err", np.inf) <= tol and worst <= tol and (
        (second_err is not None and second_err <= tol) or
        (refused is not None and "\n" not in refused and bool(step.reads) and refused.startswith("this step was traced")))
    return {"family": name, "nodes": problem.n_nodes, "trace_mode": step.trace_mode, "reads": len(step.reads),
            "proof": proof.get("worst_rel_err", proof.get("skipped")), "apply": worst,
            "second": second_err if refused is None else refused, "second_refused": refused is not None, "ok": ok,
            "step": step, "problem": problem, "module": module}


def main(argv=None) -> int:
    from _common import table

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=3, help="random placements and orders per family")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", nargs="*", default=None, help="family names")
    args = ap.parse_args(argv)
    fams = families()
    unknown = sorted(set(args.only or ()) - set(fams))
    if unknown:
        ap.error(f"unknown families {unknown}; known: {sorted(fams)}")
    rows = []
    for name in args.only or fams:
        t0 = time.perf_counter()
        r = sweep(name, fams[name], args.trials, args.seed)
        print(f"done {name} ({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
        second = (f"refused: {r['second'].split(': ', 1)[1].split(';')[0]}" if r["second_refused"]
                  else f"equal ({r['second']:.2g})")
        rows.append([name, r["nodes"], r["trace_mode"] + (f", {r['reads']} reads" if r["reads"] else ""),
                     f"{r['proof']:.2g}" if isinstance(r["proof"], float) else r["proof"], f"{r['apply']:.2g}",
                     second, "pass" if r["ok"] else "FAIL"])
    print(table(rows, ["family", "nodes", "trace mode", "trace proof error", "apply error", "second batch",
                       "result"]))
    return 0 if all(r[-1] == "pass" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
