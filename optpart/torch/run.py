"""Run a pipelined plan with ``torch.distributed.pipelining`` across processes: :func:`run_pipeline`.

One process per device of the plan (rank ``r`` is the ``r``-th device in the order its first
stage comes), started with ``torch.multiprocessing``'s spawn. The plan is the planner's
:class:`~optpart.pipeline.plan.PipelinePlan`, read from a pipelined result's
``options["pipeline"]`` (or that document alone) against the ids it names
(:class:`~optpart.pipeline.plan.PlanIds`). Every process calls the same
model factory (same seed, same weights), cuts its own stages from the trace at the
micro-batch size (:func:`optpart.torch.stages.stage_modules`), wraps them in
``PipelineStage`` and in torch's schedule class (the named one when the lists are exactly its
order, :func:`optpart.pipeline.schedules.torch_schedule`, else ``_PipelineScheduleRuntime``
with the plan's action lists loaded from the CSV torch writes), and runs ``steps`` training
steps: ``schedule.step``, then the gradients of a parameter held by several stages (GPT-2's
tied ``wte`` / ``lm_head``) summed across those stages with one ``all_reduce`` each, then the
optimizer step. Each process reports its measured step times, its CPU time and run-queue wait
(``/proc/thread-self/schedstat``), the first step's loss and gradients, and, on request, its
peak memory (:class:`optpart.torch.memtrack.LiveBytes`, one extra step).

Processes talk over gloo on CPU (nccl when every rank has a GPU), rendezvous on the loopback
address and a free port unless the caller names another address. A process that dies or is
killed ends the run within seconds: the parent polls every process, terminates the others
and raises one line naming the stage; the process group has a timeout, and each child asks the
kernel to kill it when the parent dies (no orphans).
"""

from __future__ import annotations

import os
import signal
import socket
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from ..errors import OptpartError
from ..pipeline.plan import PipelinePlan, PlanIds
from .worker import run_rank

__all__ = ["run_pipeline", "PipelineRun"]

#: Seconds the parent gives the other processes to end after one failed, before it kills them.
GRACE = 2.0


@dataclass
class PipelineRun:
    """What a pipelined run measured, beside what the plan predicted.

    Attributes
    ----------
    loss : float
        The first step's loss (the mean of the micro-batch losses: the batch's loss for a loss
        that is a mean over samples).
    losses : list of float
        Every step's loss.
    grads : dict of str to torch.Tensor
        The first step's gradient of every trained parameter by ``named_parameters()`` name
        (summed across the stages holding it), gathered from the stages.
    first_step : float
        Seconds of the first step (it infers the shapes sent between stages), reported apart.
    step_times : list of float
        Seconds of every later step, as the slowest rank measured it (schedule step, tied
        gradients, optimizer step).
    predicted : float
        The plan's step time (the pipelined result's makespan), seconds.
    predicted_peak : dict of int to float
        Predicted peak bytes per stage (its device's peak; stages sharing a device share it).
    measured_peak : dict of int to float
        Measured peak bytes per stage (empty unless ``memory=True``).
    ranks : list of dict
        Per rank: ``device``, ``stages``, ``cpu`` and ``wall`` seconds and ``wait`` (run-queue
        wait from schedstat) over the timed steps.
    tied : list of str
        Parameters held by several stages whose gradients were summed.
    """

    loss: float
    losses: list[float]
    grads: dict[str, Any]
    first_step: float
    step_times: list[float]
    predicted: float
    predicted_peak: dict[int, float] = field(default_factory=dict)
    measured_peak: dict[int, float] = field(default_factory=dict)
    ranks: list[dict] = field(default_factory=list)
    tied: list[str] = field(default_factory=list)

    @property
    def measured(self) -> float:
        """Median of the timed steps (the first step's time when there is no other)."""
        times = sorted(self.step_times) or [self.first_step]
        mid = len(times) // 2
        return times[mid] if len(times) % 2 else 0.5 * (times[mid - 1] + times[mid])

    def noisy(self, limit: float = 0.1) -> bool:
        """Whether another job held the cores: some rank waited in the run queue (schedstat) more
        than ``limit`` of its wall time over the timed steps. (CPU time below wall time alone is
        no sign: a rank also waits for its peers.)

        Parameters
        ----------
        limit : float
            Fraction of the wall time.

        Returns
        -------
        bool
        """
        return any(r["wait"] > limit * r["wall"] for r in self.ranks if r["wall"] > 0)


def _free_port(address: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((address, 0))
        return int(s.getsockname()[1])


def _predictions(result: Any, plan: PipelinePlan, ids: PlanIds) -> tuple[float, dict[int, float]]:
    """The result's makespan and its per-stage peak memory (the device's), when it has them."""
    makespan = float(getattr(result, "makespan", float("nan")))
    peaks = getattr(result, "memory_peak", None)
    prob = getattr(result, "source_problem", None)
    if peaks is None or prob is None:
        return makespan, {}
    index = {d: i for i, d in enumerate(prob.device_ids)}
    return makespan, {s: float(peaks[index[ids.device_ids[d]]]) for s, d in enumerate(plan.stage_device)
                      if ids.device_ids[d] in index}


def run_pipeline(model_factory: str | Callable, inputs: Any = None, result: Any = None, *,
                 processes: int | None = None, steps: int = 2, optimizer: str | None = "adam", lr: float = 1e-3,
                 threads: int | None = None, cores: list[int] | None = None, memory: bool = False,
                 address: str = "127.0.0.1", port: int | None = None, timeout: float = 60.0,
                 search_path: tuple[str, ...] = (), kill: Mapping[str, float] | None = None) -> PipelineRun:
    """Run ``steps`` training steps of a pipelined plan with torch's pipeline runtime (module docstring).

    Parameters
    ----------
    model_factory : str or callable
        ``module:function`` or an importable function (:mod:`optpart.torch.factory`); every
        process calls it.
    inputs : optional
        The whole batch (default: the factory's example inputs); the targets and ``loss_fn``
        are the factory's.
    result : Result or dict
        The pipelined plan: a Result with ``options["pipeline"]`` (its makespan and peaks are
        the predictions), or that record.
    processes : int, optional
        Must equal the plan's number of devices (default: that number).
    steps : int
        Training steps (the first one infers shapes and is reported apart).
    optimizer : {'adam', 'sgd', None}
        The optimizer step after each pipeline step (None: none; every step then computes the
        same gradients).
    lr : float
        Its learning rate.
    threads : int, optional
        torch threads per process (default: the cores divided among the processes, at least 1).
    cores : list of int, optional
        Pin rank ``r`` to core ``cores[r]`` (``os.sched_setaffinity``).
    memory : bool
        Measure every rank's peak memory in one extra, untimed step.
    address : str
        Rendezvous address (default the loopback; another one only when given).
    port : int, optional
        Rendezvous port (default: a free one).
    timeout : float
        Seconds of the process group's timeout (a peer that stops answering).
    search_path : tuple of str
        Directories for a ``module:function`` factory (as ``optpart import --path``).
    kill : {"stage": s, "after": seconds}, optional
        Testing: the rank holding stage ``s`` kills itself with SIGKILL that many seconds
        after its first step began.

    Returns
    -------
    PipelineRun
        Loss, gradients, measured and predicted times and memory.

    Raises
    ------
    OptpartError
        Bad input (a plan for another model, ``processes`` not the plan's device count, ``M``
        not dividing the batch) or a process that died: one line, naming the stage.
    """
    import torch.multiprocessing as mp

    plan, ids, doc = PipelinePlan.read(result)
    devices = [ids.device_ids[d] for d in plan.ranks()]
    k = len(devices)
    if processes is not None and int(processes) != k:
        raise OptpartError(f"--processes {processes}: the plan runs on {k} devices ({', '.join(devices)}), "
                           f"one process each")
    if steps < 1:
        raise OptpartError(f"--steps {steps} must be at least 1")
    if optimizer not in ("adam", "sgd", None):
        raise OptpartError(f"optimizer {optimizer!r} must be 'adam', 'sgd' or None")
    if inputs is not None:  # the batch must divide into M micro-batches: said here, before any process starts
        from .stages import split_batch

        split_batch(inputs, (), plan.micro_batches)
    predicted, predicted_peak = _predictions(result, plan, ids)
    threads = threads or max(1, (os.cpu_count() or 1) // k)
    port = port or _free_port(address)
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="optpart-run-") as tmp:
        csv = Path(tmp) / "schedule.csv"
        _write_csv(plan, csv)
        job = {"factory": model_factory, "inputs": inputs, "plan": dict(doc), "steps": int(steps),
               "optimizer": optimizer, "lr": float(lr), "threads": int(threads), "cores": cores, "memory": memory,
               "address": address, "port": int(port), "timeout": float(timeout), "search_path": tuple(search_path),
               "csv": str(csv), "out": tmp, "world": k, "parent": os.getpid(), "kill": dict(kill or {})}
        # A killed rank leaves the semaphores its imports made (tqdm's lock) to multiprocessing's resource
        # tracker, which would warn about them at exit: the run's failure is already reported in one line.
        os.environ.setdefault("PYTHONWARNINGS", "ignore::UserWarning:multiprocessing.resource_tracker")
        procs = [ctx.Process(target=run_rank, args=(r, job), daemon=True) for r in range(k)]
        for p in procs:
            p.start()
        _watch(procs, plan, devices, tmp)
        reports = [_load(Path(tmp) / f"rank{r}.pt") for r in range(k)]
    return _gather(reports, predicted, predicted_peak)


def _write_csv(plan: PipelinePlan, path: Path) -> None:
    """The action lists as torch's schedule CSV (one row per rank, as ``_dump_csv`` writes)."""
    import csv

    with open(path, "w", newline="") as fh:
        csv.writer(fh).writerows(plan.csv_rows())


def _load(path: Path) -> dict:
    import torch

    return torch.load(path, weights_only=False)


def _watch(procs: list, plan: PipelinePlan, devices: list[str], tmp: str) -> None:
    """Wait for every process; when one fails, end the others and raise one line naming its stage."""
    while any(p.is_alive() for p in procs):
        failed = [r for r, p in enumerate(procs) if not p.is_alive() and p.exitcode not in (0, None)]
        if failed:
            break
        time.sleep(0.05)
    failed = [r for r, p in enumerate(procs) if p.exitcode not in (0, None)]
    if not failed:
        return
    time.sleep(0.3)  # let a peer that saw the loss report it, so the root cause is chosen below
    for p in procs:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + GRACE
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join(1.0)
    messages = {r: (Path(tmp) / f"rank{r}.err").read_text().strip() for r in range(len(procs))
                if (Path(tmp) / f"rank{r}.err").exists()}
    killed = [r for r in failed if procs[r].exitcode is not None and procs[r].exitcode < 0 and r not in messages]
    own = [r for r in failed if r in messages and not messages[r].startswith("peer:")]
    rank = (killed or own or failed)[0]
    stages = [s for s, rr in plan.stage_ranks().items() if rr == rank]
    where = f"stage {', '.join(map(str, stages))} (rank {rank} on '{devices[rank]}')"
    if rank in messages:
        raise OptpartError(f"{where}: {messages[rank].removeprefix('peer:')}")
    code = procs[rank].exitcode
    why = f"killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
    raise OptpartError(f"{where} died ({why}); the other processes were stopped")


def _gather(reports: list[dict], predicted: float, predicted_peak: dict) -> PipelineRun:
    grads: dict[str, Any] = {}
    for rep in reports:
        for name, g in rep["grads"].items():
            grads.setdefault(name, g)
    last = next(rep for rep in reports if rep["losses"])
    n_timed = min(len(rep["times"]) for rep in reports)
    step_times = [max(rep["times"][i] for rep in reports) for i in range(1, n_timed)]
    peaks = {s: float(rep["peak"]) for rep in reports if rep.get("peak") is not None for s in rep["stages"]}
    ranks = [{k: rep[k] for k in ("device", "stages", "cpu", "wall", "wait")} for rep in reports]
    return PipelineRun(loss=float(last["losses"][0]), losses=[float(x) for x in last["losses"]], grads=grads,
                       first_step=max(rep["times"][0] for rep in reports), step_times=step_times,
                       predicted=predicted, predicted_peak=predicted_peak, measured_peak=peaks, ranks=ranks,
                       tied=sorted(reports[0]["tied"]))
