"""Pipelined steps of the bundled models: speed-up over one device and peak memory per device.

For every bundled training step, every device count K and every micro-batch count M, the
default solver places and schedules one step of M micro-batches (docs/model.md section 7;
M = 1 is the ordinary step). The one-step heuristic placement of each (model, K) is computed
once (the M = 1 row) and given as the hint for M > 1, which the pipelined heuristic schedules
next to its stage-contiguous placements. Each device has the file's suggested capacity.

Columns: makespan; speed-up = the step's total work on one device of speed 1 / makespan;
the largest and smallest peak memory over the devices (liveness model, micro-batches in
flight); the placement and order that won; status. The last part checks the target of
issue 25: GPT-2's bundled step, M = 8, 4 devices of 3 GiB, at least 2.5x faster than its
total work on one device, judged valid by the evaluator (``optpart evaluate``'s judge).

    nice -n 10 python benchmarks/pipeline.py                       # every model, M 1..16, K 2/4/8
    nice -n 10 python benchmarks/pipeline.py --models gpt2 --k 4 --m 1 8
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from _common import table

import optpart
from optpart.formats import result_to_json
from optpart.formats.optpart_json import result_from_dict
from optpart.judge import judge
from optpart.pipeline import PipelineStep
from optpart.units import format_bytes

ROOT = Path(__file__).resolve().parent.parent
MODELS = ["gpt2", "gpt2xl", "vit-b16", "resnet50", "lstm-lm", "densenet121", "mlp4-torch"]


def model_file(name: str) -> Path:
    for f in sorted(ROOT.glob(f"instances/**/{name}-training.json*")):
        return f
    raise SystemExit(f"pipeline.py: no bundled instance named {name!r}")


def row(name: str, p: optpart.Problem, k: int, m: int, hint, effort: float) -> tuple[list, optpart.Result]:
    t0 = time.perf_counter()
    if m == 1:
        r = optpart.solve(p, effort=effort)
        work = float(p.time.sum())
    else:
        r = optpart.solve(p, micro_batches=m, hint=hint)
        work = PipelineStep(p, m).work()
    wall = time.perf_counter() - t0
    if not r.ok:
        return [name, k, m, "-", "-", "-", "-", r.status.value, f"{wall:.1f}"], r
    peak = r.memory_peak
    won = r.stats.get("placement", "one-step") + " / " + r.options.get("schedule", "canonical")
    return [name, k, m, f"{r.makespan * 1e3:.1f} ms", f"{work / r.makespan:.2f}x",
            f"{format_bytes(float(peak.max()))} / {format_bytes(float(peak.min()))}", won,
            r.status.value, f"{wall:.1f}"], r


def target(effort: float) -> int:
    """GPT-2, M = 8, 4 x 3 GiB: >= 2.5x over one device's work, valid under the judge."""
    p = optpart.load(model_file("gpt2")).with_devices(4, memory="3GiB")
    one = optpart.solve(p, effort=effort)
    r = optpart.solve(p, micro_batches=8, hint=one.placement)
    step = PipelineStep(p, 8)
    unrolled = step.unrolled()
    doc = json.loads(result_to_json(r, unrolled))
    verdict = judge(unrolled, doc, result_from_dict(doc, unrolled))
    speed = step.work() / r.makespan
    ok = verdict.valid and r.ok and speed >= 2.5
    print(f"\ntarget: GPT-2 step, M=8, 4 x 3 GiB: makespan {r.makespan * 1e3:.1f} ms, work on one device "
          f"{step.work() * 1e3:.1f} ms, speed-up {speed:.2f}x (>= 2.5x), peak "
          f"{', '.join(format_bytes(float(x)) for x in r.memory_peak)}; verdict "
          f"{'valid' if verdict.valid else 'INVALID: ' + '; '.join(verdict.false_claims)} -> "
          f"{'MET' if ok else 'NOT MET'}")
    return 0 if ok else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=MODELS)
    ap.add_argument("--k", nargs="+", type=int, default=[2, 4, 8])
    ap.add_argument("--m", nargs="+", type=int, default=[1, 2, 4, 8, 16])
    ap.add_argument("--effort", type=float, default=1.0, help="effort of the one-step heuristic")
    args = ap.parse_args()
    rows = []
    for name in args.models:
        base = optpart.load(model_file(name))
        cap = float(base.device_memory[0])
        for k in args.k:
            p = base.with_devices(k, memory=cap)
            hint = None
            for m in args.m:
                cells, r = row(name, p, k, m, hint, args.effort)
                if m == 1 and r.ok:
                    hint = r.placement
                rows.append(cells)
                print("  " + " | ".join(map(str, cells)), file=sys.stderr, flush=True)
    print(table(rows, ["model", "K", "M", "makespan", "speed-up", "peak max / min", "placement / order",
                       "status", "solve s"]))
    return target(args.effort)


if __name__ == "__main__":
    sys.exit(main())
