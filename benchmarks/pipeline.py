"""Pipelined steps of the bundled models: speed-up over one device and peak memory per device.

For every bundled training step, every device count K and every micro-batch count M, the
default solver places and schedules one step of M micro-batches (docs/model.md section 7;
M = 1 is the ordinary step). The one-step heuristic placement of each (model, K) is computed
once (the M = 1 row) and given as the hint for M > 1, which the pipelined heuristic schedules
next to its stage-contiguous placements. Each device has the file's suggested capacity.

Columns: makespan; speed-up = the step's total work on one device of speed 1 / makespan;
the largest and smallest peak memory over the devices (liveness model, micro-batches in
flight); the placement and order that won; status.

The headline (printed first, :func:`headline`): GPT-2's bundled step (batch 4 x 1024 tokens)
on 4 devices of 3 GiB, M = 1, 2, 4, 8, four methods on the same devices: optpart's pipelined
placement and schedule (``optpart.solve(..., micro_batches=M)``), GPipe and 1F1B (their fixed
orders on the stage-contiguous placement), and the single-batch placement (the one-step
heuristic's placement, scheduled for M micro-batches by :func:`schedule_placement`; at M = 1
the ordinary step). Every result is written as result JSON and judged by
:func:`optpart.judge.judge` (what ``optpart evaluate`` runs) on the unrolled step under the
peak model: makespan per step and per sample, the largest peak memory against the capacity.

The last part checks the target of issue 25: GPT-2's bundled step, M = 8, 4 devices of
3 GiB, at least 2.5x faster than its total work on one device, judged valid.

    nice -n 10 python benchmarks/pipeline.py                       # headline, every model, M 1..16, K 2/4/8
    nice -n 10 python benchmarks/pipeline.py --headline-only       # the headline table and the target
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
from optpart.pipeline import PipelineStep, schedule_placement
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


def judged(problem: optpart.Problem, r: optpart.Result, m: int) -> str:
    """``valid`` or ``INVALID: ...``: the result file of ``r`` judged on its (unrolled) step."""
    target_problem = problem if m == 1 else PipelineStep(problem, m).unrolled()
    doc = json.loads(result_to_json(r, target_problem))
    verdict = judge(target_problem, doc, result_from_dict(doc, target_problem))
    return "valid" if verdict.valid else "INVALID: " + "; ".join(verdict.false_claims[:2])


#: Samples per step of the bundled GPT-2 instance (instances/README.md: batch 4 x 1024 tokens).
GPT2_BATCH = 4


def headline(effort: float, k: int = 4, memory: str = "3GiB", ms: tuple[int, ...] = (1, 2, 4, 8)) -> str:
    """The headline table: GPT-2, ``k`` devices of ``memory``, ours vs GPipe vs 1F1B vs the
    single-batch placement for every M in ``ms`` (see the module docstring)."""
    p = optpart.load(model_file("gpt2")).with_devices(k, memory=memory)
    one = optpart.solve(p, effort=effort)
    cap = float(p.device_memory.max())
    rows = []
    for m in ms:
        step = PipelineStep(p, m)
        runs = [("optpart pipelined", one if m == 1 else optpart.solve(p, micro_batches=m, hint=one.placement)),
                ("GPipe", optpart.solve(p, "gpipe", micro_batches=m)),
                ("1F1B", optpart.solve(p, "1f1b", micro_batches=m)),
                ("single-batch placement", one if m == 1 else schedule_placement(step, one.placement)[0])]
        for method, r in runs:
            if r is None or not r.ok:
                rows.append([m, method, "-", "-", "-", "-", "no schedule fits" if r is None else r.status.value])
                continue
            peak = float(r.memory_peak.max())
            rows.append([m, method, f"{r.makespan * 1e3:.1f} ms", f"{r.makespan / GPT2_BATCH * 1e3:.1f} ms",
                         f"{step.work() / r.makespan:.2f}x",
                         f"{format_bytes(peak)} / {format_bytes(cap)} ({peak / cap:.0%})", judged(p, r, m)])
    return (f"headline: GPT-2 bundled step ({GPT2_BATCH} samples x 1024 tokens), {k} devices of {memory}, "
            f"peak memory model; one device would take {float(p.time.sum()) * 1e3:.1f} ms\n"
            + table(rows, ["M", "method", "makespan / step", "per sample", "speed-up vs 1 device",
                           "peak max / capacity", "judge (peak)"]))


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
    ap.add_argument("--headline-only", action="store_true", help="only the headline table and the target")
    args = ap.parse_args()
    print(headline(args.effort), flush=True)
    if args.headline_only:
        return target(args.effort)
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
