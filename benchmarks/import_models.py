"""How long importing real models takes: PyTorch tracing and ONNX reading, per model.

Prints a Markdown table of median wall seconds (over ``--repeat`` runs), graph size, total
FLOPs, the trace mode used (fake tensors, or the real-tensor fallback) and the peak resident
memory of the process so far. Models: the bundled ones of ``instances/make.py`` (traced on
fake tensors: no weights are allocated), ``torch.nn.Transformer``/``LSTM``, and Hugging Face
models from small configs (2 layers, hidden 32, vocabulary 128, sequence 8; random weights,
no download; skipped without ``transformers``).

    python benchmarks/import_models.py [--repeat 3] [--skip-xl] [--only-small]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from _common import peak_rss_mib, table, timed

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "instances"))

import make  # noqa: E402

V, S = 128, 8


def _small_jobs() -> list:
    import torch

    from optpart.formats.torch_import import from_torch

    ids = torch.randint(0, V, (2, S), generator=torch.Generator().manual_seed(0))
    builders = {
        "nn.Transformer 1+1 layers": lambda: (torch.nn.Transformer(d_model=32, nhead=2, num_encoder_layers=1,
                                                                   num_decoder_layers=1, dim_feedforward=64,
                                                                   batch_first=True),
                                              (torch.empty(2, S, 32), torch.empty(2, S, 32))),
        "nn.LSTM 2 layers": lambda: (torch.nn.LSTM(16, 32, num_layers=2, batch_first=True), (torch.empty(2, S, 16),)),
    }
    try:
        import transformers as tf
    except ImportError:
        print("transformers not installed: Hugging Face models skipped", file=sys.stderr)
    else:
        common = dict(num_hidden_layers=2, hidden_size=32, intermediate_size=64, num_attention_heads=2,
                      vocab_size=V, max_position_embeddings=16)
        builders.update({
            "HF GPT-2 (small config)": lambda: (tf.GPT2LMHeadModel(tf.GPT2Config(
                n_layer=2, n_embd=32, n_head=2, vocab_size=V, n_positions=16, bos_token_id=0, eos_token_id=0)), (ids,)),
            "HF BERT (small config)": lambda: (tf.BertForMaskedLM(tf.BertConfig(**common)), (ids,)),
            "HF T5 (small config)": lambda: (tf.T5ForConditionalGeneration(tf.T5Config(
                num_layers=2, num_decoder_layers=2, d_model=32, d_kv=16, num_heads=2, d_ff=64, vocab_size=V,
                decoder_start_token_id=0)), {"input_ids": ids, "decoder_input_ids": ids}),
            "HF Llama (small config)": lambda: (tf.LlamaForCausalLM(tf.LlamaConfig(
                num_key_value_heads=1, bos_token_id=0, eos_token_id=0, **common)), (ids,)),
            "HF Mixtral 4 experts (small config)": lambda: (tf.MixtralForCausalLM(tf.MixtralConfig(
                num_key_value_heads=1, num_local_experts=4, num_experts_per_tok=2, bos_token_id=0, eos_token_id=0,
                **common)), (ids,)),
        })
    jobs = []
    for label, build in builders.items():
        model, inputs = build()
        jobs.append((label, lambda model=model, inputs=inputs: from_torch(model, inputs)))
    return jobs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-xl", action="store_true", help="leave out the 48-layer GPT-2-XL shape")
    ap.add_argument("--only-small", action="store_true", help="only nn.Transformer/LSTM and the small HF models")
    args = ap.parse_args()
    jobs = []
    if not args.only_small:
        jobs += [("mlp4 (torch)", lambda: make._torch_instance("mlp4-torch-training")),
                 ("resnet50 (torch)", lambda: make._torch_instance("resnet50-training")),
                 ("gpt2 small (torch)", lambda: make._torch_instance("gpt2-training")),
                 ("lstm-lm unrolled (torch)", lambda: make._torch_instance("lstm-lm-training"))]
        if not args.skip_xl:
            jobs.append(("gpt2-xl shape (torch)", lambda: make._torch_instance("gpt2xl-training")))
        if make._onnx_light("densenet121") is not None:
            jobs += [("squeezenet (onnx)", lambda: make._onnx_instance("squeezenet-training")),
                     ("densenet121 (onnx)", lambda: make._onnx_instance("densenet121-training"))]
    jobs += _small_jobs()
    make._torch_instance("mlp4-torch-training")  # warm up: torch's first trace pays its imports
    rows = []
    for label, fn in jobs:
        seconds, p = timed(fn, args.repeat)
        rows.append([label, p.n_nodes, p.n_edges, f"{p.meta['total_flops'] / 1e9:.4g}",
                     p.meta.get("trace_mode", "-"), f"{seconds:.2f}", f"{peak_rss_mib():.0f}"])
        print(f"done {label}", file=sys.stderr, flush=True)
    print(table(rows, ["model", "nodes", "edges", "GFLOP (step)", "trace", "import s (median)", "peak RSS MiB"]))


if __name__ == "__main__":
    main()
