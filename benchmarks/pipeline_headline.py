"""The README's headline pipelined step, run for real on this machine's CPU.

The three commands of the README's "Pipelined steps" (GPT-2 small, 8 sequences of 512 tokens,
4 devices of 3 GiB, 8 micro-batches)::

    optpart solve instances/gpt2-training.json --memory 3GiB --micro-batches 8 -o gpt2-m8.json
    optpart export gpt2-m8.json -p instances/gpt2-training.json -f pipeline -o plan/
    optpart run plan/ --model instances/torch_models.py:gpt2_training --processes 4 --steps 1

The first two run as commands; the third runs as ``optpart run`` runs it (``read_plan`` then
:func:`optpart.torch.run_pipeline`, same arguments), so that the gradients it gathers can be
compared: one process per device, each building the factory's seeded model and cutting its
stages from a trace at the micro-batch size. The check: the pipelined loss and every
gradient against one process's plain autograd over the whole batch (the model has no
dropout). Printed: each command's wall time, the run's step time beside the plan's
prediction (the plan's times are the instance's V100 cost model, not this CPU's: the ratio
is not a calibration), the largest gradient difference relative to the gradient's own
largest entry, and the load average with every figure. Takes minutes on a 2-core CPU.

    nice -n 10 python benchmarks/pipeline_headline.py [--keep DIR] [--layers N]

``--layers`` runs the same path on a shallower GPT-2 (its own instance traced like
``instances/make.py`` traces the bundled one) when minutes are not available.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

FACTORY = "instances/torch_models.py:gpt2_training"
INSTANCE = "instances/gpt2-training.json"


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _command(args: list[str], cwd: Path) -> float:
    """Run ``optpart ARGS`` in ``cwd``, echo its output; its wall time."""
    print("$ optpart " + " ".join(args), flush=True)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "optpart", *args], cwd=cwd, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.perf_counter() - t0
    print("\n".join("  " + line for line in (out.stdout + out.stderr).strip().splitlines()))
    if out.returncode:
        raise SystemExit(f"optpart {args[0]} exited {out.returncode}")
    print(f"  ({wall:.1f} s wall; load {_load()})", flush=True)
    return wall


def _small_instance(layers: int, path: Path) -> None:
    """A GPT-2 small of ``layers`` layers traced as ``instances/make.py`` traces the bundled one."""
    sys.path.insert(0, str(ROOT / "instances"))
    import make
    from torch_models import torch_models

    from optpart.formats.torch_import import cross_entropy, from_torch

    with torch.device("meta"):
        model = torch_models()["GPT2"](layers=layers)
        x, y = torch.zeros(8, 512, dtype=torch.long), torch.zeros(8, 512, dtype=torch.long)
    p = from_torch(model, (x,), loss_fn=cross_entropy, targets=(y,), cost_model=make.COST, name="gpt2-training")
    import optpart

    p = make.suggest_devices(p.with_meta(batch_size=8))
    optpart.save(p.with_devices(list(p.device_ids), memory=3 * 2.0 ** 30, links=p.links), path)  # as the bundled


def _autograd(factory) -> tuple[float, dict, float]:
    """Loss, gradients and seconds of one process's plain autograd over the whole batch."""
    made = factory()
    module = made["module"]
    t0 = time.perf_counter()
    loss = made["loss_fn"](module(*made["inputs"]), *made["targets"])
    loss.backward()
    wall = time.perf_counter() - t0
    return float(loss), {n: p.grad for n, p in module.named_parameters()}, wall


def main() -> int:
    from optpart.cli.run import read_plan
    from optpart.torch import run_pipeline
    from optpart.torch.factory import load_factory
    from optpart.units import format_bytes, format_time

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", metavar="DIR", help="write the result and the plan here (default: a temp dir)")
    ap.add_argument("--layers", type=int, help="a GPT-2 small of this many layers instead of the bundled 12")
    args = ap.parse_args()
    print(f"# pipeline_headline: torch {torch.__version__}, {os.cpu_count()} cores, load {_load()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.keep or tmp)
        work.mkdir(parents=True, exist_ok=True)
        instance, factory = str(ROOT / INSTANCE), str(ROOT / FACTORY.split(":")[0]) + ":gpt2_training"
        if args.layers:
            instance = str(work / f"gpt2-{args.layers}-training.json")
            _small_instance(args.layers, Path(instance))
            (work / "factory.py").write_text(
                "import sys\nsys.path.insert(0, %r)\nfrom torch_models import gpt2_training as _g\n\n\n"
                "def gpt2_training():\n    return _g(layers=%d)\n" % (str(ROOT / "instances"), args.layers))
            factory = str(work / "factory.py") + ":gpt2_training"
        times = {"solve": _command(["solve", instance, "--memory", "3GiB", "--micro-batches", "8",
                                    "-o", "gpt2-m8.json"], work),
                 "export": _command(["export", "gpt2-m8.json", "-p", instance, "-f", "pipeline", "-o", "plan/"],
                                    work)}
        plan = read_plan(work / "plan")
        k = len(plan["pipeline"]["actions"])
        print(f"$ optpart run plan/ --model {FACTORY if not args.layers else factory} --processes {k} --steps 1",
              flush=True)
        t0 = time.perf_counter()
        run = run_pipeline(factory, None, plan["pipeline"], processes=k, steps=1, timeout=600.0)
        times["run"] = time.perf_counter() - t0
        print(f"  ran {plan['pipeline']['schedule']} on {k} processes, {plan['pipeline']['micro_batches']} "
              f"micro-batches: loss {run.loss:.6g}; step {format_time(run.first_step)} (the first step: shapes "
              f"inferred), predicted {format_time(plan['predicted'])} on the instance's devices; "
              f"{times['run']:.1f} s wall with start-up; load {_load()}", flush=True)
        for r, rank in enumerate(run.ranks):
            print(f"  rank {r} ({rank['device']}): stages {rank['stages']}, cpu {format_time(rank['cpu'])} of "
                  f"{format_time(rank['wall'])} wall")
        ref_loss, ref, ref_wall = _autograd(load_factory(factory))
        print(f"one process, plain autograd over the whole batch: loss {ref_loss:.6g} "
              f"({format_time(ref_wall)}; load {_load()})")
        worst, where = 0.0, ""
        missing = sorted(set(ref) ^ set(run.grads))
        for name, g in ref.items():
            if name not in run.grads:
                continue
            scale = float(g.abs().max()) or 1.0
            diff = float((run.grads[name] - g).abs().max()) / scale
            if diff > worst:
                worst, where = diff, name
        loss_rel = abs(run.loss - ref_loss) / abs(ref_loss)
        ok = not missing and loss_rel < 1e-5 and worst < 1e-4
        params = sum(g.numel() for g in ref.values())
        print(f"check: loss relative difference {loss_rel:.2e}; gradients of {len(ref)} parameters "
              f"({format_bytes(4.0 * params)}): largest difference {worst:.2e} of the gradient's largest entry "
              f"({where}); parameters only one side has: {missing or 'none'}; tied: {run.tied} -> "
              f"{'EQUAL' if ok else 'DIFFERENT'}")
        print("wall: " + ", ".join(f"{k} {v:.1f} s" for k, v in times.items()) + f"; load {_load()}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
