"""Predicted vs measured: pipelined plans of the planner run by torch.distributed.pipelining.

For GPT-2-tiny and a CNN, at M micro-batches, on 2 processes pinned to one core each:

1. the operators are profiled at one thread at the micro-batch size (``optpart.torch.measured_problem``);
2. the gloo link of this machine is measured by a ping-pong between two pinned processes
   (latency from 4-byte messages, bandwidth from 4 MiB ones, one way = half the round trip);
3. the pipeline runtime's own cost per action (Python dispatch, autograd and send/receive
   set-up: the step's ``action_overhead``, docs/model.md section 7) is measured on a
   calibration model whose operators cost almost nothing: the cost at which the planner's
   prediction of its GPipe plan equals its measured step (bisection), the median over
   ``--calibrations`` runs that were not noisy; that one figure is used for every model;
4. the planner's plans: ``gpipe``, ``1f1b``, the default solver's order search on 1F1B's stages
   (``plan_on_stages``) and the default solver's own plan; each is exported
   (``optpart export -f pipeline``), read back as ``optpart run`` reads it and run;
5. the table prints predicted and measured step time (the median of the timed steps of the
   runs that were not noisy; the first step of a run apart) and per-stage peak memory
   (bytes of live tensor storage, receive buffers included), with each run's run-queue wait
   from ``/proc/thread-self/schedstat``: a run whose ranks waited for a core more than 10% of
   their wall time is reported as noisy and left out of the medians. The load average is
   printed with every row.

    nice -n 10 python benchmarks/pipeline_measured.py [--steps 6] [--runs 3] [--micro-batches 2,4] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

HERE = Path(__file__).resolve()


def gpt2_bench():
    """GPT-2-tiny: 4 layers of width 128, tied embeddings, a batch of 8 sequences of 64 tokens."""
    import transformers

    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=4, n_embd=128, n_head=4, vocab_size=1000, n_positions=64,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
    ids = torch.randint(0, 1000, (8, 64), generator=torch.Generator().manual_seed(1))
    return {"module": transformers.GPT2LMHeadModel(cfg), "inputs": {"input_ids": ids, "labels": ids}}


class _CNN(torch.nn.Module):
    def __init__(self, width=32):
        super().__init__()
        layers, c = [], 3
        for i in range(4):
            layers += [torch.nn.Conv2d(c, width, 3, padding=1, stride=2 if i % 2 else 1), torch.nn.BatchNorm2d(width),
                       torch.nn.ReLU()]
            c = width
        self.body = torch.nn.Sequential(*layers)
        self.head = torch.nn.Linear(width, 10)

    def forward(self, x):
        return self.head(self.body(x).mean((2, 3)))


def _ce(out, target):
    return torch.nn.functional.cross_entropy(out, target)


def cnn_bench():
    """A CNN: 4 convolutions with batch norm, 16 images of 32x32."""
    torch.manual_seed(0)
    x = torch.randn(16, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    y = torch.randint(0, 10, (16,), generator=torch.Generator().manual_seed(2))
    return {"module": _CNN(), "inputs": (x,), "targets": (y,), "loss_fn": _ce}


def calibration():
    """Almost no compute: four 8x8 linear layers on a batch of 8 (the runtime's own cost per action)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(4)])
    return model, (torch.randn(8, 8, generator=torch.Generator().manual_seed(1)),)


def _pingpong(rank: int, port: int, out: str) -> None:
    import torch.distributed as dist

    os.sched_setaffinity(0, {rank % (os.cpu_count() or 1)})
    torch.set_num_threads(1)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    res = {}
    for nbytes in (4, 4 << 20):
        t = torch.zeros(nbytes // 4)
        times = []
        for _ in range(30 if nbytes == 4 else 10):
            dist.barrier()
            t0 = time.perf_counter()
            if rank == 0:
                dist.send(t, 1)
                dist.recv(t, 1)
            else:
                dist.recv(t, 0)
                dist.send(t, 0)
            times.append(time.perf_counter() - t0)
        res[nbytes] = [min(times) / 2, statistics.median(times) / 2]
    if rank == 0:
        Path(out).write_text(json.dumps(res))
    dist.destroy_process_group()


def measure_link() -> tuple[float, float, float]:
    """(latency s, bandwidth B/s, median latency s) of gloo on the loopback, one way: the fastest
    round trips (the link itself; the median, printed beside, carries the machine's scheduling)."""
    import torch.multiprocessing as mp

    from optpart.torch.run import _free_port

    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "link.json")
        mp.start_processes(_pingpong, args=(_free_port("127.0.0.1"), out), nprocs=2, start_method="spawn")
        res = {int(k): v for k, v in json.loads(Path(out).read_text()).items()}
    lat = res[4][0]
    return lat, (4 << 20) / max(res[4 << 20][0] - lat, 1e-9), res[4][1]


def _problem(factory, m: int, links):
    from optpart.formats.torch_import import from_torch
    from optpart.torch import measured_problem
    from optpart.torch.stages import split_batch

    made = factory()
    if isinstance(made, tuple):
        made = {"module": made[0], "inputs": made[1]}
    module, inputs = made["module"], made["inputs"]
    tg, lf = made.get("targets", ()), made.get("loss_fn")
    p = from_torch(module, inputs, targets=tg, loss_fn=lf, micro_batches=m)
    mb_in, mb_tg = split_batch(inputs, tg, m)
    p = measured_problem(p, module, mb_in, targets=mb_tg, loss_fn=lf, threads=1, repeats=5)
    return p.with_devices(2, links=links)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _run_exported(spec: str, result, problem, steps: int, runs: int):
    """Export the plan, read it back as ``optpart run`` does and run it ``runs`` times on 2 pinned
    processes: ``(runs, schedule name)``."""
    from optpart.cli.run import read_plan
    from optpart.export import torch_pipeline
    from optpart.torch import run_pipeline

    exp = torch_pipeline(problem, result)
    with tempfile.TemporaryDirectory() as tmp:
        if exp.custom:
            import csv

            with open(Path(tmp) / "schedule.csv", "w", newline="") as fh:
                csv.writer(fh).writerows(exp.rows)
            exp.doc["schedule_csv"] = "schedule.csv"
        (Path(tmp) / "pipeline.json").write_text(json.dumps(exp.doc))
        plan = read_plan(tmp)
    out = []
    for _ in range(runs):
        run = run_pipeline(spec, None, plan["pipeline"], processes=2, steps=steps, cores=[0, 1], threads=1,
                           memory=True, optimizer="adam")
        run.predicted, run.predicted_peak = plan["predicted"], plan["predicted_peak"]
        out.append(run)
    return out, exp.doc["schedule"]


def _quiet_median(runs, key) -> float | None:
    vals = [key(r) for r in runs if not r.noisy()]
    return statistics.median(vals) if vals else None


def calibrate(links, steps: int, runs: int, m: int = 4) -> tuple[float | None, list[float]]:
    """The runtime's seconds per action at which the planner predicts the calibration model's
    measured GPipe step: the median over the quiet runs (and every run's figure)."""
    import optpart
    from optpart.pipeline.plan import PipelinePlan
    from optpart.pipeline.solve import score_plan

    p = _problem(calibration, m, links)
    r0 = optpart.solve(p, "gpipe", micro_batches=m, action_overhead=0.0)
    plan = PipelinePlan.from_result(r0, p)
    measured, _ = _run_exported(f"{HERE}:calibration", r0, p, steps, runs)
    figures, quiet = [], []
    for run in measured:
        lo, hi = 0.0, max(run.measured, 1e-6)
        for _ in range(40):
            mid = 0.5 * (lo + hi)
            if score_plan(p, plan, action_overhead=mid).makespan < run.measured:
                lo = mid
            else:
                hi = mid
        figures.append(0.5 * (lo + hi))
        if not run.noisy():
            quiet.append(figures[-1])
    return (statistics.median(quiet) if quiet else None), figures


def _plans(p, m: int, overhead: float) -> list[tuple[str, object]]:
    """GPipe, 1F1B, the order search on 1F1B's stages, and the default solver's own plan."""
    import optpart
    from optpart.pipeline.plan import PipelinePlan
    from optpart.pipeline.solve import plan_on_stages
    from optpart.pipeline.step import PipelineStep

    gpipe = optpart.solve(p, "gpipe", micro_batches=m, action_overhead=overhead)
    one = optpart.solve(p, "1f1b", micro_batches=m, action_overhead=overhead)
    plan = PipelinePlan.from_result(one, p)
    same = plan_on_stages(PipelineStep(p, m, overhead), plan.stage_of, plan.stage_device)
    own = optpart.solve(p, micro_batches=m, action_overhead=overhead)
    return [("GPipe", gpipe), ("1F1B", one), ("optpart on 1F1B's stages", same), ("optpart", own)]


def main() -> None:
    from optpart.model.devices import Links
    from optpart.units import format_bytes, format_time

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--runs", type=int, default=3, help="runs per plan (noisy ones are reported, not used)")
    ap.add_argument("--calibrations", type=int, default=5, help="runs of the calibration model")
    ap.add_argument("--micro-batches", default="2,4")
    ap.add_argument("--action-overhead", type=float, metavar="SECONDS",
                    help="use this runtime cost per action instead of calibrating it")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    ms = [int(x) for x in args.micro_batches.split(",")]
    print(f"# pipeline_measured: torch {torch.__version__}, {os.cpu_count()} cores, load average {_load()}")
    lat, bw, lat_median = measure_link()
    links = Links(lat, bw)
    print(f"gloo link (ping-pong, fastest round trips): latency {format_time(lat)} (median "
          f"{format_time(lat_median)}), bandwidth {bw / 1e9:.3g} GB/s; load {_load()}")
    if args.action_overhead is not None:
        overhead, figures = args.action_overhead, []
    else:
        overhead, figures = calibrate(links, args.steps, args.calibrations)
        print(f"runtime cost per action (calibration model, GPipe M=4, {len(figures)} runs): "
              + (format_time(overhead) if overhead is not None else "every run noisy")
              + f" (each run: {', '.join(format_time(f) for f in figures)}); load {_load()}")
        if overhead is None:
            overhead = statistics.median(figures)
            print("  using the median of the noisy runs: the figures below are not the machine's")
    rows = []
    print("| model | M | plan | stages | predicted | measured (quiet runs) | measured/predicted | "
          "peak predicted | peak measured | peak measured/predicted | run-queue wait | noisy runs | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, factory in (("gpt2-tiny", gpt2_bench), ("cnn", cnn_bench)):
        for m in ms:
            p = _problem(factory, m, links)
            for label, r in _plans(p, m, overhead):
                if r is None or not r.ok:
                    print(f"| {name} | {m} | {label} | - | no plan | | | | | | | | {_load()} |")
                    continue
                runs, sched = _run_exported(f"{HERE}:{factory.__name__}", r, p, args.steps, args.runs)
                pred_peak = runs[0].predicted_peak
                n_st = len(pred_peak)
                measured = _quiet_median(runs, lambda x: x.measured)
                peaks = [_quiet_median(runs, lambda x, s=s: x.measured_peak.get(s)) for s in range(n_st)]
                if all(x.noisy() for x in runs):  # reported, never averaged in
                    peaks = [statistics.median(x.measured_peak.get(s) for x in runs) for s in range(n_st)]
                wait = [max(x["wait"] / x["wall"] for x in run.ranks if x["wall"] > 0) for run in runs]
                row = {"model": name, "M": m, "plan": label, "schedule": sched, "stages": n_st,
                       "predicted": r.makespan, "measured": measured,
                       "ratio": measured / r.makespan if measured else None,
                       "peak_predicted": [pred_peak.get(s) for s in range(n_st)], "peak_measured": peaks,
                       "peak_ratio": [b / a if a and b else None for a, b in zip(pred_peak.values(), peaks)],
                       "wait": wait, "noisy": sum(x.noisy() for x in runs), "runs": len(runs),
                       "all_measured": [x.measured for x in runs], "load": _load()}
                rows.append(row)
                ratio = f"{row['ratio']:.2f}" if row["ratio"] else "-"
                print(f"| {name} | {m} | {label} ({sched}) | {n_st} | {format_time(r.makespan)} | "
                      f"{format_time(measured) if measured else 'all noisy'} | {ratio} | "
                      f"{', '.join(format_bytes(b) for b in row['peak_predicted'])} | "
                      f"{', '.join(format_bytes(b) for b in peaks)} | "
                      f"{', '.join(f'{x:.2f}' for x in row['peak_ratio'] if x is not None)} | "
                      f"{', '.join(f'{100 * w:.0f}%' for w in wait)} | {row['noisy']}/{row['runs']} | {row['load']} |",
                      flush=True)
    quiet = [r for r in rows if r["ratio"] is not None]
    print(f"\nplans with quiet runs: {len(quiet)} of {len(rows)}")
    if quiet:
        ratios = [r["ratio"] for r in quiet]
        peaks = [x for r in rows for x in r["peak_ratio"] if x is not None]
        print(f"time measured/predicted: min {min(ratios):.2f}, median {statistics.median(ratios):.2f}, "
              f"max {max(ratios):.2f}; peak measured/predicted: min {min(peaks):.2f}, max {max(peaks):.2f}")
    for name in ("gpt2-tiny", "cnn"):
        for m in ms:
            got = {r["plan"]: r for r in rows if r["model"] == name and r["M"] == m}
            o, b = got.get("optpart on 1F1B's stages"), got.get("1F1B")
            if o and b and o["measured"] and b["measured"]:
                print(f"{name} M={m}: optpart's order on 1F1B's stages measured {format_time(o['measured'])} vs "
                      f"1F1B {format_time(b['measured'])} ({o['measured'] / b['measured']:.2f}x)")
    if args.json:
        Path(args.json).write_text(json.dumps({"link": [lat, bw], "overhead": overhead, "calibration": figures,
                                               "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
