"""Predicted vs measured: pipelined plans run by torch.distributed.pipelining on 2 processes.

For GPT-2-tiny and a CNN, at M micro-batches:

1. the operators are profiled at one thread at the micro-batch size (``optpart.torch.measured_problem``);
2. the gloo link of this machine is measured by a ping-pong between two processes (latency from
   4-byte messages, bandwidth from 4 MiB ones, one way = half the round trip);
3. the pipeline runtime's own cost per action (Python dispatch, send/receive set-up) is measured
   once on a calibration model whose operators cost almost nothing: the per-action gap at which
   the replay of its GPipe plan predicts its measured step (bisection); the same constant is
   then used for every model (docs/apply.md says where it sits in the cost model);
4. the plans (GPipe, 1F1B, and optpart's order: the fastest replayed of GPipe, 1F1B and 1F1B with
   the last stage's weight gradients deferred, an I/W split) are exported, read back as
   ``optpart run`` reads them and run on 2 processes pinned to one core each, one thread each;
5. the table prints predicted and measured step time (median of the timed steps, the first
   step apart) and per-stage peak memory (live tensor storage), and each run's run-queue wait
   from ``/proc/thread-self/schedstat``: a run whose ranks waited for a core more than 10% of
   their wall time is marked noisy and left out of the summary.

    nice -n 10 python benchmarks/pipeline_measured.py [--steps 6] [--micro-batches 2,4] [--json out.json]
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


def _optpart_order(p, m: int, overhead: float):
    """The fastest replayed order on the 1F1B stages: GPipe, 1F1B, or 1F1B with the last stage's
    weight gradients deferred to its end (an I/W split)."""
    from optpart.torch.replay import pipelined_result

    tries = [pipelined_result(p, m, "GPipe", overhead=overhead), pipelined_result(p, m, "1F1B", overhead=overhead)]
    acts = [a for i in range(m) for a in (f"1F{i}", f"1I{i}")] + [f"1W{i}" for i in range(m)]
    first = tries[1].options["pipeline"]["actions"]["dev0"]
    tries.append(pipelined_result(p, m, "custom", overhead=overhead, actions={"dev0": first, "dev1": acts}))
    return min(tries, key=lambda r: (r.makespan, float(r.memory_peak.max())))  # ties: the smaller peak


def _run_exported(spec: str, result, problem, steps: int):
    """Export the plan, read it back as ``optpart run`` does and run it on 2 pinned processes."""
    from optpart.cli.run import read_plan
    from optpart.export import torch_pipeline
    from optpart.torch import run_pipeline

    exp = torch_pipeline(problem, result)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "pipeline.json").write_text(json.dumps(exp.doc))
        if exp.custom:
            import csv

            with open(Path(tmp) / "schedule.csv", "w", newline="") as fh:
                csv.writer(fh).writerows(exp.rows)
            exp.doc["schedule_csv"] = "schedule.csv"
            (Path(tmp) / "pipeline.json").write_text(json.dumps(exp.doc))
        plan = read_plan(tmp)
    run = run_pipeline(spec, None, plan["pipeline"], processes=2, steps=steps, cores=[0, 1], threads=1, memory=True)
    run.predicted, run.predicted_peak = plan["predicted"], plan["predicted_peak"]
    return run, exp.doc["schedule"]


def calibrate(links, steps: int, m: int = 4) -> tuple[float, bool]:
    """The per-action gap at which the replay predicts the calibration model's measured GPipe step."""
    from optpart.torch.pipeplan import PipelinePlan
    from optpart.torch.replay import pipelined_result, replay_actions

    p = _problem(calibration, m, links)
    r0 = pipelined_result(p, m, "GPipe")
    run, _ = _run_exported(f"{HERE}:calibration", r0, p, steps)
    plan = PipelinePlan.of(r0)
    lo, hi = 0.0, max(run.measured, 1e-6)
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if replay_actions(p, plan, overhead=mid).makespan < run.measured:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi), run.noisy()


def main() -> None:
    from optpart.model.devices import Links
    from optpart.units import format_bytes, format_time

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--micro-batches", default="2,4")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    ms = [int(x) for x in args.micro_batches.split(",")]
    print(f"# pipeline_measured: torch {torch.__version__}, {os.cpu_count()} cores, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    lat, bw, lat_median = measure_link()
    links = Links(lat, bw)
    print(f"gloo link (ping-pong, fastest round trips): latency {format_time(lat)} (median "
          f"{format_time(lat_median)}), bandwidth {bw / 1e9:.3g} GB/s")
    overhead, noisy_cal = calibrate(links, args.steps)
    print(f"runtime cost per action (calibration model, GPipe M=4): {format_time(overhead)}"
          + (" [noisy]" if noisy_cal else ""))
    rows = []
    print("| model | M | schedule | predicted | measured | measured/predicted | peak predicted (s0, s1) | "
          "peak measured (s0, s1) | run-queue wait | noisy |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, factory in (("gpt2-tiny", gpt2_bench), ("cnn", cnn_bench)):
        for m in ms:
            p = _problem(factory, m, links)
            from optpart.torch.replay import pipelined_result

            plans = [pipelined_result(p, m, "GPipe", overhead=overhead),
                     pipelined_result(p, m, "1F1B", overhead=overhead), _optpart_order(p, m, overhead)]
            for label, r in zip(("GPipe", "1F1B", "optpart"), plans):
                run, sched = _run_exported(f"{HERE}:{factory.__name__}", r, p, args.steps)
                wait = max(x["wait"] / x["wall"] for x in run.ranks if x["wall"] > 0)
                row = {"model": name, "M": m, "schedule": label if label != "optpart" else f"optpart ({sched})",
                       "predicted": run.predicted, "measured": run.measured, "ratio": run.measured / run.predicted,
                       "peak_predicted": [run.predicted_peak.get(s) for s in (0, 1)],
                       "peak_measured": [run.measured_peak.get(s) for s in (0, 1)], "wait": wait,
                       "noisy": run.noisy()}
                rows.append(row)
                print(f"| {name} | {m} | {row['schedule']} | {format_time(row['predicted'])} | "
                      f"{format_time(row['measured'])} | {row['ratio']:.2f} | "
                      f"{', '.join(format_bytes(b) for b in row['peak_predicted'])} | "
                      f"{', '.join(format_bytes(b) for b in row['peak_measured'])} | {100 * wait:.0f}% | "
                      f"{'yes' if row['noisy'] else 'no'} |", flush=True)
    quiet = [r for r in rows if not r["noisy"]]
    print(f"\nquiet runs: {len(quiet)} of {len(rows)}")
    if quiet:
        ratios = [r["ratio"] for r in quiet]
        peaks = [m / p for r in quiet for m, p in zip(r["peak_measured"], r["peak_predicted"]) if m and p]
        print(f"time measured/predicted: min {min(ratios):.2f}, median {statistics.median(ratios):.2f}, "
              f"max {max(ratios):.2f}; peak measured/predicted: min {min(peaks):.2f}, max {max(peaks):.2f}")
    for name in ("gpt2-tiny", "cnn"):
        for m in ms:
            got = {r["schedule"].split(" ")[0]: r for r in rows if r["model"] == name and r["M"] == m}
            if "optpart" in got and "1F1B" in got:
                o, b = got["optpart"], got["1F1B"]
                flag = " (noisy)" if o["noisy"] or b["noisy"] else ""
                print(f"{name} M={m}: optpart's order measured {format_time(o['measured'])} vs 1F1B "
                      f"{format_time(b['measured'])}{flag}")
    if args.json:
        Path(args.json).write_text(json.dumps({"link": [lat, bw], "overhead": overhead, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
