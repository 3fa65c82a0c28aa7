"""Issue 28's sweep: exported device maps that accelerate accepts and dispatches, on 17 model families.

For each family (tiny random-weight configs built from Hugging Face config classes, no
download; plus ``torch.nn.TransformerEncoder`` and a Conv1d + BatchNorm + GRU net in plain
``torch.nn``) the script imports the training step (:func:`optpart.formats.torch_import.from_torch`),
puts it on 4 equal devices at 1.25x the smallest capacity at which the default solver fits
(the bundled instances' rule), solves with the default solver, and exports at the default depth:

* the device map (:func:`optpart.export.module_plan`): does it fit the devices (scored by the
  evaluator under peak), does ``accelerate.utils.check_device_map`` accept it on the model, and
  does ``accelerate.dispatch_model`` with every device mapped to ``cpu`` (hooks forced, so the
  dispatched forward really runs through accelerate's hooks) give the model's own outputs;
* the pipeline split points (:func:`optpart.export.split_points`): does their plan fit.

Prints one Markdown table; exit status 1 when any family's map is refused, fails to dispatch or
gives other outputs, or does not fit while export's advice (the memory at which its plan fits,
re-solved and re-exported there) is missing or false.

    nice -n 10 python benchmarks/export_families.py [--only qwen3 bart] [--devices 4]
"""

from __future__ import annotations

import argparse
import copy
import logging
import sys
import time

from _common import table

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
    }


def outputs(module, inputs):
    """The forward outputs that matter (logits where the model names them), as a list of tensors."""
    import torch

    with torch.no_grad():
        out = module(**inputs) if isinstance(inputs, dict) else module(*inputs)
    if isinstance(out, torch.Tensor):
        return [out]
    names = [k for k in ("logits", "logits_per_image", "logits_per_text", "last_hidden_state") if
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
    import accelerate
    import numpy as np
    import torch
    from accelerate.utils import check_device_map

    import optpart
    from optpart import export
    from optpart.fit import min_capacity
    from optpart.formats.torch_import import from_torch
    from optpart.units import format_bytes

    t0 = time.perf_counter()
    torch.manual_seed(0)
    model, inputs = build()
    graph = from_torch(copy.deepcopy(model), inputs, name=name)
    cap = min_capacity(graph.with_devices(n_devices), n_devices, "heuristic", tolerance=0.1).capacity
    problem = graph.with_devices(n_devices, memory=1.25 * cap)
    result = optpart.solve(problem)
    cells = [name, problem.n_nodes, format_bytes(float(problem.device_memory[0])), result.status.value]
    if not result.ok:
        return cells + ["-"] * 7 + ["FAIL"]
    plan = export.module_plan(problem, result)
    sp = export.split_points(problem, result, plan=plan)
    used = len(set(plan.device_map.values()))
    model.eval()
    ref = outputs(model, inputs)
    try:
        check_device_map(model, plan.device_map)
        check = "ok"
    except ValueError as exc:  # accelerate's refusal: the parameters without a device
        check = f"REFUSED: {exc}"[:70]
    err = float("inf")
    if check == "ok":
        logging.disable(logging.WARNING)
        try:
            dispatched = accelerate.dispatch_model(copy.deepcopy(model), device_map={k: "cpu" for k in plan.device_map},
                                                   force_hooks=True)
        finally:
            logging.disable(logging.NOTSET)
        got = outputs(dispatched, inputs)
        if len(got) == len(ref) and all(g.shape == r.shape for g, r in zip(got, ref)):
            err = max(float((g - r).abs().max()) for g, r in zip(got, ref))
    fits = "yes" if plan.fits else "NO: " + advised(graph, n_devices, plan.advice)
    ok = check == "ok" and err <= 1e-6 and (plan.fits or fits.endswith("fits there"))
    print(f"done {name} ({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
    return cells + [len(plan.device_map), used, fits,
                    f"{float(np.max(plan.result.memory_peak / problem.device_memory)):.2f}x", check, f"{err:.1g}",
                    f"{len(sp.stages)} stages, {'fits' if sp.plan.fits else 'DOES NOT FIT'}", "pass" if ok else "FAIL"]


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
          "peak memory; device map and split points at the default depth; dispatch: every device -> cpu, "
          "hooks forced; error = max |dispatched - original| over the outputs (eval mode)\n")
    print(table(rows, ["family", "nodes", "capacity", "solve", "map entries", "devices used", "map fits",
                       "fullest", "check_device_map", "dispatch error", "split points", "result"]))
    return 0 if all(r[-1] == "pass" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
