"""The roofline cost model against measured operator times, and what the difference does to a plan.

For three small models (GPT-2, BERT, a CNN; random weights, no downloads) this script
imports one training step twice: priced by the cost model (``docs/costmodel.md``) and
with every operator timed on this machine (``optpart.torch.measured_problem``: warm-up,
then the median of ``--repeats`` runs). It prints

1. per operator type: count, estimated and measured total seconds, and their ratio;
2. the heuristic's plan on each version of the problem (``--devices`` devices), scored
   under both: the makespan a plan made from estimates really gets once times are measured.

    python benchmarks/costmodel_vs_profile.py [--device cpu] [--repeats 5] [--devices 2] [--top 8] [--threads 1]

Measured times are wall-clock medians: they change from run to run and machine to machine.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

from _common import table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import optpart  # noqa: E402
from optpart.formats.torch_import import cross_entropy, from_torch  # noqa: E402
from optpart.torch import measured_problem  # noqa: E402


def models():
    """(name, module, inputs, importer keywords): small configs, fixed seeds."""
    import torch
    import transformers

    torch.manual_seed(0)
    gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        n_layer=2, n_embd=128, n_head=4, vocab_size=1000, n_positions=128, bos_token_id=0, eos_token_id=0))
    ids = torch.randint(0, 1000, (4, 64))
    bert = transformers.BertForMaskedLM(transformers.BertConfig(
        num_hidden_layers=2, hidden_size=128, num_attention_heads=4, intermediate_size=512, vocab_size=1000,
        max_position_embeddings=128))
    labels = torch.randint(0, 1000, (4, 64))
    cnn = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 3, padding=1, stride=2), torch.nn.BatchNorm2d(64), torch.nn.ReLU(),
        torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(), torch.nn.Linear(64, 10))
    return [("gpt2-2x128", gpt2, (ids,), {}),
            ("bert-2x128", bert, (ids,), {"loss_fn": lambda out, y: cross_entropy(out.logits, y),
                                          "targets": (labels,)}),
            ("cnn-3conv", cnn, (torch.randn(16, 3, 32, 32),), {})]


def op_type(meta: dict) -> str:
    op = meta.get("op", "?")
    parts = op.split(".")
    return ".".join(parts[:2]) if op.startswith("aten.") else op


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu", help="torch device to time on (default cpu)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--devices", type=int, default=2, help="devices of the plans (default 2)")
    ap.add_argument("--top", type=int, default=8, help="operator types shown per model")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch CPU threads while timing (default 1: steady on a shared machine)")
    args = ap.parse_args()
    plans = []
    for name, module, inputs, kw in models():
        est = from_torch(module, inputs, devices=args.devices, **kw)
        meas = measured_problem(est, module, inputs, device=args.device, repeats=args.repeats,
                                threads=args.threads, **kw)
        per = defaultdict(lambda: [0, 0.0, 0.0])
        for m, te, tm in zip(est.node_meta, est.time.tolist(), meas.time.tolist()):
            row = per[op_type(m)]
            row[0] += 1
            row[1] += te
            row[2] += tm
        ranked = sorted(per.items(), key=lambda kv: (-kv[1][2], kv[0]))
        shown = ranked[:args.top]
        rest = ranked[args.top:]
        if rest:
            shown.append((f"({len(rest)} other types)", [sum(r[1][i] for r in rest) for i in range(3)]))
        shown.append(("total", [est.n_nodes, float(est.time.sum()), float(meas.time.sum())]))
        rows = [[t, str(int(c)), f"{e * 1e6:.1f}", f"{m * 1e6:.1f}", f"{m / e:.2f}" if e > 0 else "-"]
                for t, (c, e, m) in shown]
        print(f"\n## {name}: {est.n_nodes} nodes, times in microseconds (measured on {args.device}, "
              f"{args.threads} thread(s))\n")
        print(table(rows, ["operator type", "count", "estimated", "measured", "measured/estimated"]))
        for source, prob in (("estimated", est), ("measured", meas)):
            r = optpart.solve(prob, "heuristic", seed=0)
            under_est = optpart.evaluate(est, r.placement).makespan
            under_meas = optpart.evaluate(meas, r.placement).makespan
            plans.append([name, f"heuristic on {source} times", f"{under_est * 1e6:.1f}", f"{under_meas * 1e6:.1f}"])
    print(f"\n## Plans ({args.devices} devices; canonical schedule, microseconds)\n")
    print(table(plans, ["model", "plan", "makespan (estimated times)", "makespan (measured times)"]))


if __name__ == "__main__":
    main()
