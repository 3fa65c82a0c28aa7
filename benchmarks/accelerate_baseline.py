"""accelerate's own device map beside ours, both as accelerate runs them: time, peak memory, fits?

For every model: ``accelerate.infer_auto_device_map`` on the same model and devices
(``max_memory`` = capacity minus a ``--reserve`` share held back for activations, the usual
practice), alone ("sequential") and after ``get_balanced_memory`` ("balanced", what
transformers' ``device_map="auto"`` does on several devices), each map turned into a placement
the way accelerate runs it and scored one device at a time (:mod:`optpart.export.sequential`)
under ``peak``, beside our own device map (``optpart export -f device_map`` of the default
solver's placement), scored the same way, and the default solver's operator placement
(its concurrent schedule, for reference).

Models: the bundled PyTorch instances of ``instances/make.py`` on their own devices (built on
the ``meta`` device: no weights), and Hugging Face models from small configs (random
weights, no download) on 4 equal devices at 1.25x the smallest capacity at which the
default solver fits (the bundled instances' rule).

    python benchmarks/accelerate_baseline.py [--reserve 0.25] [--only-small]
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from _common import table

import optpart
from optpart import export
from optpart.export.accelerate import accelerate_baseline
from optpart.units import format_bytes, format_time

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "instances"))

import make  # noqa: E402

V, S = 128, 16
BUNDLED = {"gpt2-training": ("gpt2-training.json", "GPT2", {}),
           "vit-b16-training": ("vit-b16-training.json", "ViT", {}),
           "lstm-lm-training": ("lstm-lm-training.json", "LSTMLM", {}),
           "mlp4-torch-training": ("small/mlp4-torch-training.json", "MLP", {})}


def bundled(names: list[str]):
    """(name, problem, meta-device model) for the bundled PyTorch instances."""
    import torch

    classes = make._torch_models()
    for name in names:
        rel, cls, kw = BUNDLED[name]
        with torch.device("meta"):
            model = classes[cls](**kw)
        yield name, optpart.load(ROOT / "instances" / rel), model


def hugging_face():
    """(name, problem, model) for small-config Hugging Face models on 4 devices at 1.25x the fitting minimum."""
    import torch
    import transformers as tf

    from optpart.fit import min_capacity
    from optpart.formats.torch_import import from_torch

    common = dict(num_hidden_layers=4, hidden_size=64, intermediate_size=128, num_attention_heads=4,
                  vocab_size=V, max_position_embeddings=32, bos_token_id=0, eos_token_id=0)
    builders = {
        "HF GPT-2": lambda: tf.GPT2LMHeadModel(tf.GPT2Config(n_layer=4, n_embd=64, n_head=4, vocab_size=V,
                                                             n_positions=32, bos_token_id=0, eos_token_id=0)),
        "HF Llama": lambda: tf.LlamaForCausalLM(tf.LlamaConfig(num_key_value_heads=2, **common)),
        "HF Qwen3": lambda: tf.Qwen3ForCausalLM(tf.Qwen3Config(num_key_value_heads=2, head_dim=16, **common)),
        "HF OPT": lambda: tf.OPTForCausalLM(tf.OPTConfig(num_hidden_layers=4, hidden_size=64, ffn_dim=128,
                                                         num_attention_heads=4, vocab_size=V,
                                                         max_position_embeddings=32, word_embed_proj_dim=64)),
    }
    ids = torch.randint(0, V, (4, S), generator=torch.Generator().manual_seed(0))
    for name, build in builders.items():
        torch.manual_seed(0)
        model = build()
        graph = from_torch(model, (ids,), name=name)
        cap = min_capacity(graph.with_devices(4), 4, "heuristic").capacity
        yield name, graph.with_devices(4, memory=1.25 * cap), model


def fullest(problem: optpart.Problem, result: optpart.Result) -> str:
    """The fullest device's peak memory over its capacity."""
    share = result.memory_peak / problem.device_memory
    return f"{share.max():.2f}x"


def row(name: str, problem: optpart.Problem, model, reserve: float) -> list[str]:
    logging.disable(logging.WARNING)  # accelerate warns that CUDA devices 0..k-1 are absent (we only read sizes)
    try:
        acc = [accelerate_baseline(problem, model, reserve=reserve, balanced=b) for b in (False, True)]
    finally:
        logging.disable(logging.NOTSET)
    ours = optpart.solve(problem)
    cells = [name, str(problem.n_nodes), format_bytes(float(problem.device_memory[0]))]
    for res, dmap in acc:
        used = sorted({v for v in dmap.values()}, key=str)
        cells += [format_time(res.makespan), fullest(problem, res), "yes" if res.ok else "NO",
                  ",".join(map(str, used))]
    if not ours.ok:
        return cells + [ours.status.value] + ["-"] * 6
    plan = export.module_plan(problem, ours)
    cells += [format_time(plan.makespan), fullest(problem, plan.result), "yes" if plan.fits else "NO",
              ",".join(map(str, sorted(set(plan.device_map.values())))), str(plan.run.transfers)]
    for res, _ in acc:
        cells.append(f"{res.makespan / plan.makespan:.2f}x")
    cells.append(format_time(ours.makespan))
    return cells


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reserve", type=float, default=0.25, help="share of capacity kept from accelerate (default 0.25)")
    ap.add_argument("--only-small", action="store_true", help="skip the bundled instances of more than 2,000 nodes")
    args = ap.parse_args(argv)
    names = [n for n in BUNDLED if not args.only_small or n == "mlp4-torch-training"]
    rows = [row(name, p, m, args.reserve) for name, p, m in bundled(names)]
    try:
        rows += [row(name, p, m, args.reserve) for name, p, m in hugging_face()]
    except ImportError:
        print("(transformers not installed: Hugging Face models skipped)\n")
    print(f"accelerate's device map (max_memory = {1 - args.reserve:.0%} of capacity; 'sequential' = "
          "infer_auto_device_map alone, 'balanced' = get_balanced_memory first, what transformers' "
          "device_map='auto' does) vs optpart's device map of the default solver's placement, every map timed as "
          "accelerate runs it (one device at a time, forward, backward and optimizer, a move per tensor that "
          "crosses devices) under peak memory; 'fullest' = highest peak / capacity; the last column is the "
          "operator placement's own concurrent makespan\n")
    print(table(rows, ["model", "nodes", "capacity",
                       "sequential time", "fullest", "fits", "devices",
                       "balanced time", "fullest", "fits", "devices",
                       "optpart map time", "fullest", "fits", "devices", "moves",
                       "sequential / optpart", "balanced / optpart", "operator placement"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
