"""Issue 22's sweep: a placed training step computes what autograd computes, for public model families.

For each family (tiny random-weight configs built from Hugging Face config classes, no
download; plus a Conv1d + BatchNorm + GRU net in plain ``torch.nn``) the script traces the
training step, runs the aliasing checker (:func:`optpart.formats.torch.check_aliasing`),
builds the problem, and then, ``--trials`` times, draws a random valid placement on K = 2..4
devices (colocation groups kept whole) and a random topological order (random start times),
runs :func:`optpart.torch.apply` on K distinct torch devices (``cpu``, ``cpu:0``, ``cpu:1``,
``cpu:2``: every crossing edge is a copy, proved present by
:func:`optpart.torch.check_devices`) and compares the loss and every gradient with plain
autograd on a copy of the module. Dropout is off (every ``*dropout*``/``*pdrop*``/
``drop_path_rate``/``layerdrop`` config field set to 0) so both sides compute one function.

Prints one Markdown table: family, problem nodes, checker result, worst absolute and
relative error of the loss and of the gradients over all trials (relative: ``max |a - b| /
max |b|`` per tensor), how many trials were bit-exact, and pass (relative error <=
``--rtol`` everywhere). Exit status 1 when any family fails.

    nice -n 10 python benchmarks/apply_exactness.py [--trials 4] [--seed 0] [--only gpt2 swin]
"""

from __future__ import annotations

import argparse
import copy
import sys
import time

import numpy as np
from _common import table

V, S = 64, 8  # vocabulary and sequence length of the text models


def _zero_dropout(cfg):
    """The config with every dropout-like probability set to 0 (deterministic steps)."""
    for key, value in list(vars(cfg).items()):
        if isinstance(value, float) and any(w in key for w in ("dropout", "pdrop", "drop_path", "layerdrop")):
            setattr(cfg, key, 0.0)
    return cfg


def families() -> dict:
    """Family name -> builder returning ``(module, example inputs)`` (seeded, tiny)."""
    import torch
    import transformers as tf

    ids = lambda: torch.randint(1, V, (2, S))  # noqa: E731
    text = dict(num_hidden_layers=2, hidden_size=32, intermediate_size=64, num_attention_heads=2, vocab_size=V,
                max_position_embeddings=32)
    decoder = dict(num_key_value_heads=1, bos_token_id=0, eos_token_id=0, pad_token_id=0, **text)
    seq2seq = dict(vocab_size=V, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                   decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=32,
                   pad_token_id=0, bos_token_id=0, eos_token_id=0, decoder_start_token_id=0)

    def hf(model_cls, cfg, inputs):
        return lambda: (model_cls(_zero_dropout(cfg())), inputs())

    class GRUNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn = torch.nn.Conv1d(3, 4, 3), torch.nn.BatchNorm1d(4)
            self.rnn, self.head = torch.nn.GRU(4, 5, batch_first=True), torch.nn.Linear(5, 2)

        def forward(self, x):
            out, _ = self.rnn(torch.relu(self.bn(self.conv(x))).transpose(1, 2))
            return self.head(out[:, -1])

    image = lambda size=16: (torch.randn(2, 3, size, size),)  # noqa: E731
    return {
        "gpt2": hf(tf.GPT2LMHeadModel, lambda: tf.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=V,
                                                               n_positions=32, bos_token_id=0, eos_token_id=0),
                   lambda: (ids(),)),
        "bert": hf(tf.BertForMaskedLM, lambda: tf.BertConfig(pad_token_id=0, **text), lambda: (ids(),)),
        "roberta": hf(tf.RobertaForMaskedLM, lambda: tf.RobertaConfig(pad_token_id=0, bos_token_id=0,
                                                                      eos_token_id=0, **{**text, "max_position_embeddings": 40}),
                      lambda: (ids(),)),
        "llama": hf(tf.LlamaForCausalLM, lambda: tf.LlamaConfig(**decoder), lambda: (ids(),)),
        "qwen2": hf(tf.Qwen2ForCausalLM, lambda: tf.Qwen2Config(**decoder), lambda: (ids(),)),
        "mixtral": hf(tf.MixtralForCausalLM, lambda: tf.MixtralConfig(num_local_experts=4, num_experts_per_tok=2,
                                                                      **decoder), lambda: (ids(),)),
        "bart": hf(tf.BartForConditionalGeneration, lambda: tf.BartConfig(**seq2seq),
                   lambda: {"input_ids": ids(), "decoder_input_ids": ids()}),
        "whisper": hf(tf.WhisperForConditionalGeneration,
                      lambda: tf.WhisperConfig(**{**seq2seq, "max_source_positions": 8, "max_target_positions": 32},
                                               num_mel_bins=8),
                      lambda: {"input_features": torch.randn(2, 8, 16), "decoder_input_ids": ids()}),
        "clip": hf(tf.CLIPModel, lambda: tf.CLIPConfig(
            text_config=dict(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                             num_attention_heads=2, max_position_embeddings=S),
            vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                               image_size=16, patch_size=8), projection_dim=16),
            lambda: {"input_ids": ids(), "pixel_values": image()[0]}),
        "vit": hf(tf.ViTForImageClassification, lambda: tf.ViTConfig(**{k: text[k] for k in (
            "num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads")}, image_size=16,
            patch_size=8, num_labels=5), image),
        "resnet": hf(tf.ResNetModel, lambda: tf.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1]),
                     lambda: image(32)),
        "convnext": hf(tf.ConvNextModel, lambda: tf.ConvNextConfig(hidden_sizes=[8, 16], depths=[1, 1],
                                                                   num_stages=2, patch_size=2),
                       lambda: image(16)),
        "swin": hf(tf.SwinModel, lambda: tf.SwinConfig(image_size=8, patch_size=2, embed_dim=8, depths=[1, 1],
                                                       num_heads=[1, 2], window_size=2, mlp_ratio=1.0),
                   lambda: image(8)),
        "conv1d_bn_gru": lambda: (GRUNet(), (torch.randn(3, 3, 6),)),
    }


def reference(module, inputs):
    """Loss and gradients of one eager autograd step on a copy (train mode, no cache)."""
    from optpart.formats.torch import default_loss

    ref = copy.deepcopy(module).train()
    if getattr(getattr(ref, "config", None), "use_cache", None):
        ref.config.use_cache = False
    experts = getattr(ref, "get_experts_implementation", lambda: None)()
    if experts:  # the importer traces mixture-of-experts layers with the per-expert loop: so does autograd
        ref.set_experts_implementation({k: ("eager" if v == "grouped_mm" else v) for k, v in experts.items()})
    out = ref(**inputs) if isinstance(inputs, dict) else ref(*inputs)
    loss = default_loss(out)
    loss.backward()
    return loss.detach(), {n: p.grad for n, p in ref.named_parameters()}


def random_plan(problem, rng, k: int):
    """A random valid placement on ``k`` devices (colocation groups whole) and random start times."""
    from optpart.result import Result, Status

    placement = rng.integers(0, k, problem.n_nodes)
    for g in problem.groups:
        placement[list(g)] = rng.integers(0, k)
    return Result(problem=problem.name, solver="random", status=Status.FEASIBLE,
                  placement=placement.astype(np.int64), start=rng.random(problem.n_nodes))


def errors(got, want) -> tuple[float, float, bool]:
    """``(max abs error, max abs error / max |want|, bit-exact)`` of two tensors (None: no gradient)."""
    import torch

    if got is None or want is None:
        same = got is None and want is None
        return (0.0, 0.0, True) if same else (float("inf"), float("inf"), False)
    got, want = got.detach().cpu().double(), want.detach().cpu().double()
    if got.shape != want.shape:
        return float("inf"), float("inf"), False
    err = float((got - want).abs().max()) if got.numel() else 0.0
    scale = float(want.abs().max()) if want.numel() else 0.0
    return err, (err / scale if scale > 0 else (0.0 if err == 0 else float("inf"))), bool(torch.equal(got, want))


def sweep(name: str, build, trials: int, seed: int, rtol: float) -> list:
    """One table row for family ``name``."""
    import torch

    from optpart.errors import FormatError
    from optpart.formats.torch import check_aliasing, trace_training_step
    from optpart.formats.torch_import import problem_from_traced
    from optpart.torch import apply

    torch.manual_seed(seed)
    module, inputs = build()
    t0 = time.perf_counter()
    step = trace_training_step(module, inputs)
    try:
        check_aliasing(step)
        checker = "ok" + ("" if step.functional else " (fallback edges)")
    except FormatError as exc:
        checker = f"FAILED: {exc}"[:60]
    problem = problem_from_traced(step)
    ref_loss, ref_grads = reference(module, inputs)
    rng = np.random.default_rng(seed)
    worst = dict(la=0.0, lr=0.0, ga=0.0, gr=0.0)
    exact = 0
    ks = []
    for _ in range(trials):
        k = int(rng.integers(2, 5))
        ks.append(k)
        devices = {f"dev{i}": ("cpu" if i == 0 else f"cpu:{i - 1}") for i in range(k)}
        placed = copy.deepcopy(module)
        gm = apply(placed, inputs, random_plan(problem.with_devices(k), rng, k), devices,
                   problem.with_devices(k), step=step)
        loss, grads = gm(**inputs) if isinstance(inputs, dict) else gm(*inputs)
        la, lr, lsame = errors(loss, ref_loss)
        all_same = lsame
        worst["la"], worst["lr"] = max(worst["la"], la), max(worst["lr"], lr)
        for pname, g in ref_grads.items():
            ga, gr, gsame = errors(grads.get(pname), g)
            worst["ga"], worst["gr"] = max(worst["ga"], ga), max(worst["gr"], gr)
            all_same &= gsame
        exact += all_same
    ok = checker.startswith("ok") and worst["lr"] <= rtol and worst["gr"] <= rtol
    print(f"done {name} ({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
    return [name, problem.n_nodes, len(ref_grads), checker, ",".join(map(str, ks)), f"{worst['la']:.2g}",
            f"{worst['lr']:.2g}", f"{worst['ga']:.2g}", f"{worst['gr']:.2g}", f"{exact}/{trials}",
            "pass" if ok else "FAIL"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=4, help="random placements and orders per family")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rtol", type=float, default=1e-5, help="largest relative error that passes")
    ap.add_argument("--only", nargs="*", default=None, help="family names")
    args = ap.parse_args(argv)
    fams = families()
    unknown = sorted(set(args.only or ()) - set(fams))
    if unknown:
        ap.error(f"unknown families {unknown}; known: {sorted(fams)}")
    rows = [sweep(n, fams[n], args.trials, args.seed, args.rtol) for n in (args.only or fams)]
    print(table(rows, ["family", "nodes", "grads", "aliasing check", "K per trial", "loss abs err",
                       "loss rel err", "grad abs err", "grad rel err", "bit-exact trials", "result"]))
    return 0 if all(r[-1] == "pass" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
