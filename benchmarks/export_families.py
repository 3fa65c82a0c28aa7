"""Exported device maps that accelerate accepts and dispatches, on 45 model families, and their time.

For each family (tiny random-weight configs built from Hugging Face config classes, no
download; plus ``torch.nn.TransformerEncoder`` and a Conv1d + BatchNorm + GRU net in plain
``torch.nn``; and the families of ``apply_exactness.py`` named in :data:`FROM_APPLY`, on their
first batch) the script imports the training step (:func:`optpart.formats.torch_import.from_torch`),
puts it on 4 equal devices at 1.25x the smallest capacity at which the default solver fits
(the bundled instances' rule), solves with the default solver, and exports at the default depth:

* the device map (:func:`optpart.export.module_plan`): does it fit the devices (peak memory as
  accelerate runs it), its time as accelerate runs it beside the map closest to the operator
  placement and accelerate's own balanced map on the same rule, does
  ``accelerate.utils.check_device_map`` accept it on the model and does every parameter and
  buffer have an entry, and does ``accelerate.dispatch_model`` with every device mapped to
  ``cpu`` (hooks forced, so the step really runs through accelerate's hooks) give the model's
  own outputs and gradients (:func:`apply_check`);
* the pipeline split points (:func:`optpart.export.split_points`): does their plan fit, and
  does no stage begin inside a module the import kept whole (``NO_SPLIT``).

Prints one Markdown table; exit status 1 when any family's map is refused, fails to dispatch or
gives other outputs or gradients, a stage begins inside a kept-whole module, or the map does not
fit while export's advice (the memory at which its plan fits,
re-solved and re-exported there) is missing or false.

    nice -n 10 python benchmarks/export_families.py [--only qwen3 bart] [--devices 4]
"""

from __future__ import annotations

import argparse
import copy
import logging
import sys
import time
import warnings

from _common import table
from apply_exactness import families as batched

V, S = 64, 8  # vocabulary and sequence length of the text models


def families() -> dict:
    """Family name -> builder returning ``(module, example inputs)`` (seeded, tiny, random weights)."""
    import torch
    import transformers as tf

    ids = lambda: torch.randint(1, V, (2, S))  # noqa: E731
    image = lambda size=16: torch.randn(2, 3, size, size)  # noqa: E731
    text = dict(num_hidden_layers=2, hidden_size=32, intermediate_size=64, num_attention_heads=2, vocab_size=V,
                max_position_embeddings=32)
    decoder = dict(num_key_value_heads=1, bos_token_id=0, eos_token_id=0, pad_token_id=0, **text)
    seq2seq = dict(vocab_size=V, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                   decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=32,
                   pad_token_id=0, bos_token_id=0, eos_token_id=0, decoder_start_token_id=0)

    def hf(model_cls, cfg, inputs):
        return lambda: (model_cls(cfg()), inputs())

    class GRUNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn = torch.nn.Conv1d(3, 4, 3), torch.nn.BatchNorm1d(4)
            self.rnn, self.head = torch.nn.GRU(4, 5, batch_first=True), torch.nn.Linear(5, 2)

        def forward(self, x):
            out, _ = self.rnn(torch.relu(self.bn(self.conv(x))).transpose(1, 2))
            return self.head(out[:, -1])

    def encoder():
        layer = torch.nn.TransformerEncoderLayer(d_model=32, nhead=2, dim_feedforward=64, dropout=0.0,
                                                 batch_first=True)
        return torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False), (torch.randn(2, S, 32),)

    return {
        "qwen3": hf(tf.Qwen3ForCausalLM, lambda: tf.Qwen3Config(head_dim=16, **decoder), lambda: (ids(),)),
        "mistral": hf(tf.MistralForCausalLM, lambda: tf.MistralConfig(**decoder), lambda: (ids(),)),
        "phi3": hf(tf.Phi3ForCausalLM, lambda: tf.Phi3Config(**decoder), lambda: (ids(),)),
        "gpt_neox": hf(tf.GPTNeoXForCausalLM, lambda: tf.GPTNeoXConfig(**text, bos_token_id=0, eos_token_id=0),
                       lambda: (ids(),)),
        "opt": hf(tf.OPTForCausalLM, lambda: tf.OPTConfig(num_hidden_layers=2, hidden_size=32, ffn_dim=64,
                                                          num_attention_heads=2, vocab_size=V,
                                                          max_position_embeddings=32, word_embed_proj_dim=32),
                  lambda: (ids(),)),
        "falcon": hf(tf.FalconForCausalLM, lambda: tf.FalconConfig(num_hidden_layers=2, hidden_size=32,
                                                                   num_attention_heads=2, vocab_size=V,
                                                                   bos_token_id=0, eos_token_id=0),
                     lambda: (ids(),)),
        "gemma": hf(tf.GemmaForCausalLM, lambda: tf.GemmaConfig(head_dim=16, **decoder), lambda: (ids(),)),
        "gemma2": hf(tf.Gemma2ForCausalLM, lambda: tf.Gemma2Config(head_dim=16, **decoder), lambda: (ids(),)),
        "distilbert": hf(tf.DistilBertForMaskedLM, lambda: tf.DistilBertConfig(
            vocab_size=V, dim=32, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=32, pad_token_id=0),
            lambda: (ids(),)),
        "roberta": hf(tf.RobertaForMaskedLM, lambda: tf.RobertaConfig(
            pad_token_id=0, bos_token_id=0, eos_token_id=0, **{**text, "max_position_embeddings": 40}),
            lambda: (ids(),)),
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
            lambda: {"input_ids": ids(), "pixel_values": image()}),
        "swin": hf(tf.SwinForImageClassification, lambda: tf.SwinConfig(
            image_size=8, patch_size=2, embed_dim=8, depths=[1, 1], num_heads=[1, 2], window_size=2, mlp_ratio=1.0,
            num_labels=3), lambda: (image(8),)),
        "convnext": hf(tf.ConvNextForImageClassification, lambda: tf.ConvNextConfig(
            hidden_sizes=[8, 16], depths=[1, 1], num_stages=2, patch_size=2, num_labels=3), lambda: (image(16),)),
        "transformer_encoder": encoder,
        "conv1d_bn_gru": lambda: (GRUNet(), (torch.randn(3, 3, 6),)),
        # A tied embedding and head, imported with its decoder layers kept whole (NO_SPLIT).
        "llama_tied": hf(tf.LlamaForCausalLM, lambda: tf.LlamaConfig(tie_word_embeddings=True, **decoder),
                         lambda: (ids(),)),
        # Frozen position embeddings owned by modules whose children may go to other devices.
        "vit_mae": hf(tf.ViTMAEForPreTraining, lambda: tf.ViTMAEConfig(
            hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, image_size=16,
            patch_size=4, decoder_hidden_size=32, decoder_num_hidden_layers=1, decoder_num_attention_heads=2,
            decoder_intermediate_size=64, mask_ratio=0.0), lambda: (image(16),)),
        "t5": hf(tf.T5ForConditionalGeneration, lambda: tf.T5Config(
            vocab_size=V, d_model=32, d_kv=16, d_ff=64, num_layers=1, num_decoder_layers=1, num_heads=2,
            decoder_start_token_id=0, pad_token_id=0), lambda: {"input_ids": ids(), "decoder_input_ids": ids()}),
        "mixtral_moe": hf(tf.MixtralForCausalLM, lambda: tf.MixtralConfig(
            num_local_experts=4, num_experts_per_tok=2, **{**decoder, "num_hidden_layers": 1}), lambda: (ids(),)),
        "detr": hf(tf.DetrForObjectDetection, lambda: tf.DetrConfig(
            use_timm_backbone=False, use_pretrained_backbone=False, num_queries=4, num_labels=3, d_model=16,
            backbone_config=tf.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
                                            out_features=["stage2"]),
            encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
            encoder_ffn_dim=32, decoder_ffn_dim=32), lambda: (image(16),)),
        "resnet_bn": hf(tf.ResNetForImageClassification, lambda: tf.ResNetConfig(
            embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], num_labels=3), lambda: (image(16),)),
        **{name: _first_batch(build) for name, build in batched().items() if name in FROM_APPLY},
    }


#: Families of ``apply_exactness.py`` swept here too, on their first batch.
FROM_APPLY = ("bloom", "gptj", "granite", "cohere", "starcoder2", "deberta_v2", "electra", "pegasus",
              "lstm_tagger", "checkpointed_blocks", "autograd_function_nondiff", "olmo", "stablelm", "mamba2",
              "jamba", "xlnet", "big_bird", "segformer", "dinov2", "mobilevit", "wav2vec2", "hubert")


def _first_batch(build):
    """A builder of ``apply_exactness.py`` (``(module, batch)``) as one of this script's (``(module, inputs)``)."""
    def built():
        module, batch = build()
        return module, batch(0)
    return built


#: Module classes the import keeps whole (``optpart import --no-split``), per family.
NO_SPLIT = {"llama_tied": "LlamaDecoderLayer"}


def tensors_without_entry(model, device_map) -> list[str]:
    """Parameters and buffers (tied, frozen, non-persistent included) that no key of the map covers."""
    names = [n for n, _ in model.named_parameters(remove_duplicate=False)]
    names += [n for n, _ in model.named_buffers(remove_duplicate=False)]
    if "" in device_map:
        return []
    return [n for n in names if not any(n == k or n.startswith(k + ".") for k in device_map)]


def apply_check(model, inputs, device_map) -> tuple[str, float]:
    """accelerate's verdict on ``device_map`` for ``model``, and the largest difference it makes.

    ``check_device_map`` must accept the map and every parameter and buffer must have an entry;
    then the model is dispatched (every device mapped to ``cpu``, hooks forced, so the step
    really runs through accelerate's hooks) and one forward and backward (the sum of the outputs
    that matter) is compared with the undispatched model's: outputs and every gradient.

    Returns
    -------
    (str, float)
        ``"ok"`` or the refusal, and the largest absolute difference (``inf`` when refused).
    """
    import accelerate
    import torch
    from accelerate.utils import check_device_map

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tensor-level keys are not module names
            check_device_map(model, device_map)
    except ValueError as exc:  # accelerate's refusal: the parameters without a device
        return f"REFUSED: {exc}"[:70], float("inf")
    missing = tensors_without_entry(model, device_map)
    if missing:
        return f"NO ENTRY: {', '.join(missing[:3])}"[:70], float("inf")
    model.eval()

    def step(module):
        module.zero_grad(set_to_none=True)
        torch.manual_seed(0)  # the same random draws in both runs (ViT-MAE's masking noise)
        outs = outputs(module, inputs, grad=True)
        sum(o.float().sum() for o in outs).backward()
        grads = {n: p.grad.detach().clone() for n, p in module.named_parameters() if p.grad is not None}
        return [o.detach() for o in outs], grads

    ref_out, ref_grad = step(model)
    logging.disable(logging.WARNING)
    try:
        dispatched = accelerate.dispatch_model(copy.deepcopy(model), device_map={k: "cpu" for k in device_map},
                                               force_hooks=True)
    finally:
        logging.disable(logging.NOTSET)
    got_out, got_grad = step(dispatched)
    if len(got_out) != len(ref_out) or any(g.shape != r.shape for g, r in zip(got_out, ref_out)) \
            or sorted(got_grad) != sorted(ref_grad):
        return "ok", float("inf")
    err = max([float((g - r).abs().max()) for g, r in zip(got_out, ref_out)]
              + [float((got_grad[n] - ref_grad[n]).abs().max()) for n in ref_grad] + [0.0])
    return "ok", err


def outputs(module, inputs, grad: bool = False):
    """The forward outputs that matter (logits where the model names them), as a list of tensors."""
    import torch

    with torch.set_grad_enabled(grad):
        out = module(**inputs) if isinstance(inputs, dict) else module(*inputs)
    if isinstance(out, torch.Tensor):
        return [out]
    names = [k for k in ("logits", "logits_per_image", "logits_per_text", "pred_boxes", "last_hidden_state") if
             getattr(out, k, None) is not None]
    return [getattr(out, k) for k in names] if names else [t for t in out if isinstance(t, torch.Tensor)]


def advised(graph, n_devices: int, advice: str) -> str:
    """The memory ``advice`` names, and whether the default solver's device map fits there (re-solved)."""
    import re

    import optpart
    from optpart import export
    from optpart.units import parse_bytes

    found = re.search(r"--memory (\S+)", advice)
    if not found:
        return f"no advice ({advice!r})"
    problem = graph.with_devices(n_devices, memory=parse_bytes(found.group(1)))
    result = optpart.solve(problem)
    plan = export.module_plan(problem, result) if result.ok else None
    return f"advice {found.group(1)}: " + ("fits there" if plan is not None and plan.fits else "DOES NOT FIT there")


def row(name: str, build, n_devices: int) -> list:
    """One table row for family ``name``."""
    import numpy as np
    import torch

    import optpart
    from optpart import export
    from optpart.export.accelerate import accelerate_baseline
    from optpart.fit import min_capacity
    from optpart.formats.torch_import import from_torch
    from optpart.units import format_bytes, format_time

    t0 = time.perf_counter()
    torch.manual_seed(0)
    model, inputs = build()
    graph = from_torch(copy.deepcopy(model), inputs, name=name, no_split=NO_SPLIT.get(name, ()))
    cap = min_capacity(graph.with_devices(n_devices), n_devices, "heuristic", tolerance=0.1).capacity
    problem = graph.with_devices(n_devices, memory=1.25 * cap)
    result = optpart.solve(problem)
    cells = [name, problem.n_nodes, format_bytes(float(problem.device_memory[0])), result.status.value]
    if not result.ok:
        return cells + ["-"] * 10 + ["FAIL"]
    plan = export.module_plan(problem, result)
    closest = export.closest_plan(problem, result, rule="accelerate")
    sp = export.split_points(problem, result)
    cuts = [s for s, _ in sp.stages if any(s.startswith(w + ".") for w in plan.kept_whole)]
    acc, _ = accelerate_baseline(problem, model, balanced=True)
    check, err = apply_check(model, inputs, plan.device_map)
    fits = "yes" if plan.fits else "NO: " + advised(graph, n_devices, plan.advice)
    ok = check == "ok" and err <= 1e-5 and (plan.fits or fits.endswith("fits there")) and not cuts
    print(f"done {name} ({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
    return cells + [len(plan.device_map), len(set(plan.device_map.values())), fits,
                    f"{float(np.max(plan.memory / problem.device_memory)):.2f}x",
                    f"{format_time(plan.makespan)}, {plan.run.transfers} moves",
                    f"{format_time(closest.makespan)}, {closest.run.transfers} moves",
                    f"{format_time(acc.makespan)}, {'fits' if acc.ok else 'DOES NOT FIT'}",
                    check, f"{err:.1g}",
                    f"{len(sp.stages)} stages, {'fits' if sp.plan.fits else 'DOES NOT FIT'}"
                    + (f", CUTS {cuts[0]}" if cuts else ""), "pass" if ok else "FAIL"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", default=None, help="family names")
    ap.add_argument("--devices", type=int, default=4, help="equal devices (default 4)")
    args = ap.parse_args(argv)
    fams = families()
    unknown = sorted(set(args.only or ()) - set(fams))
    if unknown:
        ap.error(f"unknown families {unknown}; known: {sorted(fams)}")
    rows = [row(n, fams[n], args.devices) for n in (args.only or fams)]
    print(f"{args.devices} devices at 1.25x the default solver's smallest fitting capacity; default solver, "
          "peak memory; device map and split points at the default depth; times as accelerate runs a map (one "
          "device at a time, forward, backward and optimizer, the import's cost model); 'closest map' is the map "
          "nearest the operator placement, 'accelerate balanced' is infer_auto_device_map after "
          "get_balanced_memory, both on the same rule; dispatch: every device -> cpu, hooks forced; error = max "
          "|dispatched - original| over the outputs and every gradient of one forward and backward (eval mode)\n")
    print(table(rows, ["family", "nodes", "capacity", "solve", "map entries", "devices used", "map fits",
                       "fullest", "map as accelerate runs it", "closest map", "accelerate balanced",
                       "check_device_map", "fwd/bwd error", "split points", "result"]))
    return 0 if all(r[-1] == "pass" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
