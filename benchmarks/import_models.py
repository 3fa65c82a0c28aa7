"""How long importing real models takes: PyTorch tracing and ONNX reading, per model.

Prints a Markdown table of median wall seconds (over ``--repeat`` runs), graph size, total
FLOPs and the peak resident memory of the process so far. The PyTorch models are the ones
of ``instances/make.py`` (traced on fake tensors: no weights are allocated).

    python benchmarks/import_models.py [--repeat 3] [--skip-xl]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from _common import peak_rss_mib, table, timed

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "instances"))

import make  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-xl", action="store_true", help="leave out the 48-layer GPT-2-XL shape")
    args = ap.parse_args()
    jobs = [("mlp4 (torch)", lambda: make._torch_instance("mlp4-torch-training")),
            ("resnet50 (torch)", lambda: make._torch_instance("resnet50-training")),
            ("gpt2 small (torch)", lambda: make._torch_instance("gpt2-training")),
            ("lstm-lm unrolled (torch)", lambda: make._torch_instance("lstm-lm-training"))]
    if not args.skip_xl:
        jobs.append(("gpt2-xl shape (torch)", lambda: make._torch_instance("gpt2xl-training")))
    if make._onnx_light("densenet121") is not None:
        jobs += [("squeezenet (onnx)", lambda: make._onnx_instance("squeezenet-training")),
                 ("densenet121 (onnx)", lambda: make._onnx_instance("densenet121-training"))]
    make._torch_instance("mlp4-torch-training")  # warm up: torch's first trace pays its imports
    rows = []
    for label, fn in jobs:
        seconds, p = timed(fn, args.repeat)
        rows.append([label, p.n_nodes, p.n_edges, f"{p.meta['total_flops'] / 1e9:.4g}", f"{seconds:.2f}",
                     f"{peak_rss_mib():.0f}"])
        print(f"done {label}", file=sys.stderr, flush=True)
    print(table(rows, ["model", "nodes", "edges", "GFLOP (step)", "import s (median)", "peak RSS MiB"]))


if __name__ == "__main__":
    main()
