"""One process of a pipelined run (:func:`optpart.torch.run_pipeline`): rank ``r``'s stages, steps and report.

:func:`run_rank` is the spawned function. It writes ``rank<r>.pt`` (times, loss, gradients,
peak memory) into the run's folder, or ``rank<r>.err`` (one line) and exits with code 3. A
line that begins ``peer:`` is a communication failure caused by another process (its peer
died); the parent then names the process that failed first.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

__all__ = ["run_rank", "schedstat_wait"]

_PEER_HINTS = ("Connection closed", "Connection reset", "Broken pipe", "Timed out", "timed out", "ECONNRESET",
               "EPIPE", "Socket closed", "DistNetworkError", "DistBackendError", "peer")


def schedstat_wait() -> tuple[float, float]:
    """``(run seconds, run-queue wait seconds)`` of the calling thread (``/proc/thread-self/schedstat``).

    Returns
    -------
    tuple of float
        Zeros where the file does not exist.
    """
    try:
        run, wait, _ = Path("/proc/thread-self/schedstat").read_text().split()[:3]
        return int(run) * 1e-9, int(wait) * 1e-9
    except (OSError, ValueError):
        return 0.0, 0.0


def _die_with_parent(parent: int) -> None:
    """Ask the kernel to kill this process when its parent dies (Linux), so no rank outlives the run."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(3)


def run_rank(rank: int, job: dict) -> None:
    """Run one rank of a pipelined plan (module docstring); never returns on failure.

    Parameters
    ----------
    rank : int
        This process's rank.
    job : dict
        What :func:`optpart.torch.run_pipeline` packed: factory, inputs, plan record, steps,
        optimizer, threads, cores, rendezvous, timeout, CSV path and output folder.

    Returns
    -------
    None
    """
    out = Path(job["out"])
    _die_with_parent(job["parent"])
    try:
        report = _run(rank, job)
        import torch

        torch.save(report, out / f"rank{rank}.pt")
    except BaseException as exc:  # every failure becomes one line for the parent
        chain = [exc] + _causes(exc)
        peer = any(h in f"{type(c).__name__}: {c}" for c in chain for h in _PEER_HINTS)
        from ..errors import OptpartError

        root = chain[-1]
        first = (str(root).strip().splitlines() or [""])[0].strip()
        line = first if isinstance(root, OptpartError) else f"{type(root).__name__}: {first}".rstrip(": ")
        if root is not exc and not isinstance(exc, OptpartError):
            line += f" (in {(str(exc).strip().splitlines() or [type(exc).__name__])[0].strip().rstrip(':')})"
        (out / f"rank{rank}.err").write_text(("peer:" if peer else "") + line[:400])
        os._exit(3)
    finally:
        try:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()
        except Exception:  # the group may already be broken by a dead peer
            pass


def _causes(exc: BaseException) -> list[BaseException]:
    seen, out = set(), []
    c = exc.__cause__ or exc.__context__
    while c is not None and id(c) not in seen:
        seen.add(id(c))
        out.append(c)
        c = c.__cause__ or c.__context__
    return out


def _no_weight_pass():
    """``dw_builder`` of a stage whose backward runs whole in its ``I`` action: a ``W`` that does nothing."""
    return _nothing


def _nothing() -> None:
    return None


def _identity(output, target):
    """The schedule's loss: the last stage already returns the loss."""
    return output


#: Named schedules whose torch class runs one stage per rank (``PipelineScheduleSingle``).
_SINGLE = ("GPipe", "1F1B")


def _schedule(plan, stages: list, csv: str):
    """Torch's schedule class for the plan: the named one when the lists are exactly its order
    (:func:`~optpart.pipeline.schedules.torch_schedule`), else the runtime with the plan's CSV."""
    from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime, get_schedule_class

    from ..errors import OptpartError
    from ..pipeline.schedules import torch_schedule

    m = plan.micro_batches
    name = torch_schedule(plan)
    if name in _SINGLE:
        for st in stages:
            st.stage_index_to_group_rank = plan.stage_ranks()
        return get_schedule_class(name)(stages[0], m, loss_fn=_identity, scale_grads=True)
    if name != "custom":
        sched = get_schedule_class(name)(stages, m, loss_fn=_identity, scale_grads=True)
        if dict(sched.stage_index_to_group_rank) != plan.stage_ranks():
            raise OptpartError(f"schedule {name} maps stages to ranks {sched.stage_index_to_group_rank}; "
                               f"the plan maps them {plan.stage_ranks()}")
        return sched
    sched = _PipelineScheduleRuntime(stages, m, loss_fn=_identity, scale_grads=True)
    sched._load_csv(csv)
    return sched


def _receive_buffers(stages: list) -> list:
    """The tensors torch's stages keep to receive activations and gradients into: one per value and
    micro-batch, allocated at the first step and kept (``args_recv_info``, ``grad_recv_info``)."""
    out = []
    for st in stages:
        for table in (st.args_recv_info, st.grad_recv_info):
            for infos in table.values():
                out += [i.buffer for i in infos if getattr(i, "buffer", None) is not None]
    return out


def _run(rank: int, job: dict) -> dict:
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage

    from ..pipeline.plan import PipelinePlan
    from .factory import load_model
    from .stages import split_batch, stage_modules

    import logging

    logging.getLogger("torch.distributed.pipelining").setLevel(logging.CRITICAL)  # failures are reported in one line
    torch.set_num_threads(job["threads"])
    if job["cores"]:
        os.sched_setaffinity(0, {job["cores"][rank % len(job["cores"])]})
    plan, ids, _ = PipelinePlan.read(job["plan"])
    world, m, n_stages = job["world"], plan.micro_batches, plan.n_stages
    stage_of = plan.stage_by_id(ids)
    ranks = plan.stage_ranks()
    if job["address"].startswith("127.") or job["address"] in ("localhost", "::1"):
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    cuda = torch.cuda.is_available() and torch.cuda.device_count() >= world
    device = torch.device(f"cuda:{rank}") if cuda else torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo", init_method=f"tcp://{job['address']}:{job['port']}",
                            rank=rank, world_size=world, timeout=timedelta(seconds=job["timeout"]))
    module, inputs, extra = load_model(job["factory"], job["search_path"])
    if job["inputs"] is not None:
        inputs = job["inputs"]
    targets = list(extra.get("targets", ()))
    mb_inputs, mb_targets = split_batch(inputs, targets, m)
    sm = stage_modules(module, mb_inputs, stage_of, n_stages, loss_fn=extra.get("loss_fn"), mb_targets=mb_targets)
    mine = [s for s in range(n_stages) if ranks[s] == rank]
    mods = {s: sm.modules[s].to(device) for s in mine}
    stages = []
    for s in mine:  # static shapes from the trace: torch runs no shape inference on uninitialized tensors
        ins, outs = sm.examples(s, device)
        # torch's input backward (I) finds a stage's weights through the gradients of what it received; a
        # later stage receiving nothing differentiable (token ids) would get no weight gradient: its whole
        # backward runs in I and its W is empty (the first stage runs it in W, as torch does)
        dw = _no_weight_pass if s > 0 and not any(t.requires_grad for t in ins) else None
        stages.append(PipelineStage(mods[s], s, n_stages, device, input_args=ins, output_args=outs, dw_builder=dw))
    sched = _schedule(plan, stages, job["csv"])
    params = [p for s in mine for p in mods[s].parameters()]
    opt = None
    if job["optimizer"] == "adam" and params:
        opt = torch.optim.Adam(params, lr=job["lr"])
    elif job["optimizer"] == "sgd" and params:
        opt = torch.optim.SGD(params, lr=job["lr"])
    flat = [t.to(device) for t in sm.step.flatten_inputs(inputs)] + [t.to(device) for t in targets]
    dummy = torch.zeros(m, device=device)
    shapes = dict(module.named_parameters())
    first, last = 0 in mine, n_stages - 1 in mine

    def one_step(losses):
        for p in params:
            p.grad = None
        sched.step(*(flat if first else ()), return_outputs=False,
                   **({"target": dummy, "losses": losses} if last else {}))
        for name in sorted(sm.tied):  # a parameter on several stages: its gradients summed
            held = [mods[s].get_parameter(name) for s in mine if name in sm.params[s]]
            total = torch.zeros_like(shapes[name], device=device)
            for p in held:
                if p.grad is not None:
                    total += p.grad
            dist.all_reduce(total)
            for p in held:
                p.grad = total.clone()
        if opt is not None:
            opt.step()

    kill = job["kill"]
    times, losses_by_step, grads = [], [], {}
    cpu = wall = wait = 0.0
    for n in range(job["steps"]):
        dist.barrier()
        if n == 0 and kill and kill.get("stage") in mine:
            threading.Timer(float(kill.get("after", 0.0)), os.kill, (os.getpid(), signal.SIGKILL)).start()
        losses: list = []
        t0, c0, (_, w0) = time.perf_counter(), time.thread_time(), schedstat_wait()
        one_step(losses)
        t1, c1, (_, w1) = time.perf_counter(), time.thread_time(), schedstat_wait()
        times.append(t1 - t0)
        if n > 0 or job["steps"] == 1:
            cpu, wall, wait = cpu + c1 - c0, wall + t1 - t0, wait + w1 - w0
        if last:
            losses_by_step.append(float(torch.stack([x.detach() for x in losses]).mean()))
        if n == 0:
            grads = {name: p.grad.detach().cpu().clone() for s in mine
                     for name, p in mods[s].named_parameters() if p.grad is not None}
    peak = None
    if job["memory"]:
        from .memtrack import LiveBytes

        dist.barrier()
        state = [t for st in (opt.state.values() if opt is not None else ()) for t in st.values()]
        held = [*params, *(p.grad for p in params if p.grad is not None), *state,
                *(b for mod in mods.values() for b in mod.buffers()), *_receive_buffers(stages)]
        with LiveBytes(held) as tracker:
            one_step([])
        peak = tracker.peak
    dist.barrier()
    return {"device": ids.device_ids[plan.ranks()[rank]], "stages": mine, "times": times, "losses": losses_by_step, "grads": grads,
            "cpu": cpu, "wall": wall, "wait": wait, "peak": peak, "tied": list(sm.tied)}
