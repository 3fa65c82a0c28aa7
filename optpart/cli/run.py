"""``optpart run PLAN --model FILE.py:factory --processes K``: run an exported pipeline with torch.

``PLAN`` is what ``optpart export RESULT -p PROBLEM -f pipeline -o PLAN`` wrote (a folder with
``pipeline.json``, or the ``.json`` file). Every process calls the factory (as ``optpart
import`` does), cuts its stages from the trace at the micro-batch size and runs the plan's
schedule (:func:`optpart.torch.run_pipeline`); the command prints the loss, the measured step
time beside the predicted one, per-stage peak memory with ``--memory``, and each rank's
run-queue wait (a run whose ranks waited for the CPU is reported as noisy).

Exit codes: 0 run; 2 bad input or a process that died (one line naming its stage).
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

from ..errors import OptpartError
from ..pipeline.plan import PipelinePlan
from ..units import format_bytes, format_time
from .common import Command

__all__ = ["COMMANDS", "read_plan"]


def read_plan(path: str | Path) -> dict:
    """An exported pipeline as ``result.options["pipeline"]`` plus its predictions.

    Parameters
    ----------
    path : str or pathlib.Path
        A folder holding ``pipeline.json``, or the ``.json`` file.

    Returns
    -------
    dict
        ``{"pipeline": record, "predicted": seconds, "predicted_peak": {stage: bytes}}``; a
        custom order's actions are read from its CSV (torch's format).

    Raises
    ------
    OptpartError
        No such file, not an ``optpart-pipeline`` document, or a CSV of other ranks (one line).
    """
    p = Path(path)
    doc_path = p / "pipeline.json" if p.is_dir() else p
    try:
        doc = json.loads(doc_path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise OptpartError(f"cannot read the pipeline plan {str(doc_path)!r}: {exc.strerror}") from None
    except ValueError as exc:
        raise OptpartError(f"{doc_path}: not JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != "optpart-pipeline":
        raise OptpartError(f"{doc_path}: not an optpart-pipeline document (write one with optpart export -f pipeline)")
    rows = doc.get("actions")
    if doc.get("schedule_csv"):
        try:
            with open(doc_path.parent / doc["schedule_csv"], newline="", encoding="utf-8") as fh:
                rows = [[a for a in row if a.strip()] for row in csv.reader(fh)]
        except OSError as exc:
            raise OptpartError(f"cannot read the schedule {doc['schedule_csv']!r} beside {doc_path}: "
                               f"{exc.strerror}") from None
    devices, stages = doc.get("devices"), doc.get("stages")
    if not isinstance(rows, list) or not isinstance(devices, list) or not isinstance(stages, list):
        raise OptpartError(f"{doc_path}: an optpart-pipeline document needs 'devices', 'stages' and 'actions'")
    if len(rows) != len(devices):
        raise OptpartError(f"{doc_path}: {len(rows)} rows of actions for {len(devices)} devices")
    record = {"micro_batches": doc.get("micro_batches"), "schedule": doc.get("schedule", "custom"),
              "stages": [{"stage": s.get("stage"), "device": s.get("device"), "nodes": s.get("forward_nodes")}
                         for s in stages if isinstance(s, dict)],
              "actions": dict(zip(devices, rows)), "action_overhead": doc.get("action_overhead", 0.0)}
    PipelinePlan.read(record)  # checked here: one line before any process starts
    pred = doc.get("predicted") or {}
    peaks = {int(s): b for s, b in (pred.get("peak_memory") or {}).items() if b is not None}
    return {"pipeline": record, "predicted": float(pred.get("step_time", float("nan"))), "predicted_peak": peaks,
            "action_overhead": (pred.get("assumes") or {}).get("action_overhead", record["action_overhead"])}


def _cmd_run(args: argparse.Namespace) -> int:
    from ..torch.run import run_pipeline

    plan = read_plan(args.plan)
    cores = [int(c) for c in args.cores.split(",")] if args.cores else None
    run = run_pipeline(args.model, None, plan["pipeline"], processes=args.processes, steps=args.steps,
                       optimizer=None if args.optimizer == "none" else args.optimizer, lr=args.lr,
                       threads=args.threads, cores=cores, memory=args.memory, address=args.address, port=args.port,
                       timeout=args.timeout, search_path=tuple(args.path or ()))
    run.predicted, run.predicted_peak = plan["predicted"], plan["predicted_peak"]
    noisy = run.noisy()
    if args.json:
        print(json.dumps({"loss": run.loss, "losses": run.losses, "first_step": run.first_step,
                          "step_times": run.step_times, "measured": run.measured, "predicted": run.predicted,
                          "ratio": run.measured / run.predicted if run.predicted > 0 else None,
                          "predicted_peak": run.predicted_peak, "measured_peak": run.measured_peak,
                          "ranks": run.ranks, "noisy": noisy, "tied": run.tied,
                          "grad_norms": {k: float(g.norm()) for k, g in sorted(run.grads.items())}}, indent=1))
        return 0
    k = len(run.ranks)
    print(f"ran {plan['pipeline']['schedule']} on {k} processes, {plan['pipeline']['micro_batches']} micro-batches, "
          f"{args.steps} steps: loss {run.loss:.6g}")
    ratio = f" (measured/predicted {run.measured / run.predicted:.2f})" if run.predicted > 0 else ""
    print(f"step time: measured {format_time(run.measured)} (median of {len(run.step_times) or 1}; first step "
          f"{format_time(run.first_step)}, shape set-up, apart), predicted {format_time(run.predicted)}{ratio} "
          f"(runtime {format_time(plan['action_overhead'])} per action)")
    for s in sorted(set(run.predicted_peak) | set(run.measured_peak)):
        got = run.measured_peak.get(s)
        print(f"stage {s}: peak memory predicted {format_bytes(run.predicted_peak.get(s, float('nan')))}"
              + (f", measured {format_bytes(got)}" if got is not None else ""))
    for r, rank in enumerate(run.ranks):
        share = rank["wait"] / rank["wall"] if rank["wall"] > 0 else 0.0
        print(f"rank {r} ({rank['device']}): cpu {format_time(rank['cpu'])} of {format_time(rank['wall'])} wall, "
              f"run-queue wait {100 * share:.0f}%")
    if noisy:
        print("noisy: other jobs held the cores (run-queue wait above 10% of a rank's wall time); "
              "the measured time is not the plan's")
    for name in run.tied:
        print(f"'{name}' is held by several stages: its gradients were summed across them before the optimizer step")
    return 0


def _arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of ``optpart run``."""
    p.add_argument("plan", help="what optpart export -f pipeline wrote (a folder, or its .json file)")
    p.add_argument("--model", required=True, metavar="MODULE:FUNCTION",
                   help="the model factory, as optpart import takes it (file.py:function or package.module:function); "
                        "every process runs it")
    p.add_argument("--processes", "-k", type=int, metavar="K", help="processes, one per device of the plan "
                                                                     "(default: the plan's device count)")
    p.add_argument("--steps", type=int, default=3, metavar="N", help="training steps (default 3; the first is "
                                                                      "reported apart)")
    p.add_argument("--json", action="store_true", help="print the measurements as JSON")
    p.add_argument("--path", action="append", metavar="DIR", help="directory to search for the factory's module (repeatable; default: none, installed packages only)")
    p.add_argument("--optimizer", choices=("adam", "sgd", "none"), default="adam",
                   help="the optimizer step after each pipeline step (default adam)")
    p.add_argument("--lr", type=float, default=1e-3, help="learning rate (default 1e-3)")
    p.add_argument("--threads", type=int, metavar="N", help="torch threads per process (default: cores / K)")
    p.add_argument("--cores", metavar="C0,C1,...", help="pin rank r to core C_r (default: no pinning)")
    p.add_argument("--memory", action="store_true", help="measure each stage's peak memory in one extra step "
                                                        "(bytes of live tensor storage)")
    p.add_argument("--address", default="127.0.0.1",
                   help="rendezvous address (default 127.0.0.1: nothing listens beyond this machine)")
    p.add_argument("--port", type=int, help="rendezvous port (default: a free one)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds before a silent peer fails the run "
                                                               "(default 60)")


#: ``optpart run`` (registered by :func:`optpart.cli.build_parser`)
COMMANDS = (Command("run", "run an exported pipeline across processes with torch.distributed.pipelining",
                    _arguments, _cmd_run,
                    description="Run the plan written by optpart export -f pipeline. The model factory is "
                                "imported and RUN in every process (as optpart import does)."),)
