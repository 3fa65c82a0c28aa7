"""Measured operator times: run each operator of a traced step on real tensors on one device.

:func:`profile_times` executes the traced training step
(:func:`optpart.formats.torch.trace_training_step`) on real tensors of the traced
shapes, on the requested device, and times every operator separately (the device is
synchronised before and after each one, so a time is the operator's own latency,
launch overhead included). It runs ``warmup`` whole steps first (allocator, kernel
caches, lazy initialisation), then ``repeats`` timed steps, and keeps each operator's
median. Running whole steps, rather than each operator alone, gives every operator
inputs with the values, layouts and cache state it meets in training.

Optimizer nodes ``update.<param>`` are timed as one ``torch.optim.Adam`` step
(``foreach=False``) on a tensor of the parameter's shape, the optimizer the importer's
cost model assumes; inputs, targets and buffers take 0 s, as in the importer.

Values: the module's parameters and the example inputs when they are real tensors;
otherwise (a model built on the meta device) floats drawn from N(0, 0.02) with a fixed
seed and integers 0 (always a valid index). Times are wall-clock medians, so they
differ from run to run; the importer records how they were made in
``meta["cost_model"]``.
"""

from __future__ import annotations

import operator
import statistics
import time
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import OptpartError
from ..formats.torch.step import replaying

__all__ = ["profile_times", "with_measured_times", "measured_problem"]


def _sync(torch, device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _real(torch, t, device, gen):
    """``t`` as a real tensor on ``device``: a copy of a real one, else a fixed-seed fill."""
    if not isinstance(t, torch.Tensor):
        return t
    from torch._subclasses.fake_tensor import FakeTensor

    if t.is_meta or isinstance(t, FakeTensor):
        if t.is_floating_point():
            x = torch.randn(tuple(t.shape), generator=gen, dtype=torch.float32).mul_(0.02).to(t.dtype)
        else:
            x = torch.zeros(tuple(t.shape), dtype=t.dtype)
        return x.to(device)
    return t.detach().to(device).clone()


def profile_times(step, device: str = "cpu", *, repeats: int = 5, warmup: int = 1, module=None,
                  example_inputs: Sequence[Any] | Mapping[str, Any] | None = None,
                  targets: Sequence[Any] = (), seed: int = 0, threads: int | None = None) -> dict[str, float]:
    """Seconds per problem node of ``step``, measured on ``device`` (median of ``repeats`` runs).

    Parameters
    ----------
    step : TracedStep
        From :func:`optpart.formats.torch.trace_training_step`.
    device : str
        A torch device, e.g. ``"cpu"`` or ``"cuda:0"``.
    repeats, warmup : int
        Timed runs (the median is kept) and untimed runs before them.
    module, example_inputs, targets : optional
        Real values to run with (see the module docstring); placeholders' traced shapes otherwise.
    seed : int
        Seeds the random fill of tensors that have no real value.
    threads : int, optional
        CPU threads for torch while timing (``torch.set_num_threads``; restored after).
        Default: torch's setting. On a shared CPU, 1 gives steadier times.

    Returns
    -------
    dict
        ``{node id: seconds}`` for every operator node and optimizer node of the step's
        problem (inputs, targets and buffers: 0).

    Raises
    ------
    OptpartError
        A bad device or count, or an operator that fails on real tensors (named).
    """
    try:
        import torch
        import torch.fx as fx
    except ImportError:  # pragma: no cover
        raise OptpartError("profiling needs torch: pip install 'optpart[torch]'") from None
    if not isinstance(repeats, int) or repeats < 1:
        raise OptpartError(f"repeats={repeats!r} must be an integer >= 1")
    if not isinstance(warmup, int) or warmup < 0:
        raise OptpartError(f"warmup={warmup!r} must be an integer >= 0")
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise OptpartError(f"threads={threads!r} must be an integer >= 1")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise OptpartError(f"device {device!r} is not a torch device (e.g. 'cpu', 'cuda:0')") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise OptpartError(f"device '{device}' asked for, but this torch sees no CUDA device")
    gm = step.graph_module
    gen = torch.Generator().manual_seed(seed)
    placeholders = [nd for nd in gm.graph.nodes if nd.op == "placeholder"]
    n_p, n_b = len(step.param_names), len(step.buffer_names)
    given: list[Any] = [None] * len(placeholders)
    if module is not None:
        params = dict(module.named_parameters())
        buffers = dict(module.named_buffers())
        for i, name in enumerate(step.param_names):
            given[i] = params.get(name)
        for i, name in enumerate(step.buffer_names):
            given[n_p + i] = buffers.get(name)
    if example_inputs is not None:
        xs = step.flatten_inputs(example_inputs) + [t for t in targets if isinstance(t, torch.Tensor)]
        for i, x in enumerate(xs):
            if n_p + n_b + i < len(given):
                given[n_p + n_b + i] = x

    def value(g, nd):  # a given tensor of the traced shape, else a fill of that shape
        val = nd.meta.get("val")
        ok = isinstance(g, torch.Tensor) and not g.is_meta and (val is None or tuple(g.shape) == tuple(val.shape))
        return _real(torch, g if ok else val, dev, gen)

    args = [value(g, nd) for g, nd in zip(given, placeholders)]
    args = [a.requires_grad_(False) if isinstance(a, torch.Tensor) else a for a in args]

    samples: dict[str, list[float]] = {}

    class Timer(fx.Interpreter):
        timing = False

        def run_node(self, n):
            if n.op != "call_function" or n.target is operator.getitem:
                return super().run_node(n)
            _sync(torch, dev)
            t0 = time.perf_counter()
            try:
                out = super().run_node(n)
            except Exception as exc:  # noqa: BLE001 - any kernel error becomes one line naming the operator
                raise OptpartError(f"operator '{n.name}' ({n.target}) failed on real tensors on {dev}: "
                                   f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
            _sync(torch, dev)
            if self.timing:
                samples.setdefault(n.name, []).append(time.perf_counter() - t0)
            return out

        def fetch_attr(self, target):  # constants the trace baked in go to the timed device
            value = super().fetch_attr(target)
            return value.to(dev) if isinstance(value, torch.Tensor) else value

        def call_function(self, target, a, kw):
            if isinstance(kw.get("device"), torch.device):
                kw = dict(kw, device=dev)
            return super().call_function(target, a, kw)

    runner = Timer(gm)
    threads_before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        with replaying():  # the arguments require no grad
            for r in range(warmup + repeats):
                runner.timing = r >= warmup
                # In-place operators (batch-norm running statistics) update these copies, not the module.
                runner.run(*args)
        updates = _update_times(torch, step, placeholders, dev, repeats, warmup)
    finally:
        torch.set_num_threads(threads_before)
    fx_to_id = {fxname: nid for nid, fxname in step.node_names.items()}
    times = {nid: 0.0 for nid in step.node_names}
    for name, vals in samples.items():
        if name in fx_to_id:
            times[fx_to_id[name]] = float(statistics.median(vals))
    times.update(updates)
    return times


def _update_times(torch, step, placeholders, dev, repeats: int, warmup: int) -> dict[str, float]:
    """Seconds of each optimizer node ``update.<param>`` (one measurement per shape and dtype)."""
    if not step.training:
        return {}
    cache: dict[tuple, float] = {}
    out = {}
    for i, name in enumerate(step.param_names):
        t = placeholders[i].meta.get("val")
        key = (tuple(t.shape), t.dtype)
        if key not in cache:
            cache[key] = _update_time(torch, key, dev, repeats, warmup)
        out[f"update.{name}"] = cache[key]
    return out


def _update_time(torch, key, dev, repeats: int, warmup: int) -> float:
    """Median seconds of one Adam step on a parameter of ``key = (shape, dtype)``."""
    shape, dtype = key
    p = torch.nn.Parameter(torch.zeros(shape, dtype=dtype, device=dev))
    p.grad = torch.full(shape, 1e-3, dtype=dtype, device=dev)
    opt = torch.optim.Adam([p], lr=1e-3, foreach=False)
    runs = []
    for r in range(warmup + repeats):
        _sync(torch, dev)
        t0 = time.perf_counter()
        opt.step()
        _sync(torch, dev)
        if r >= warmup:
            runs.append(time.perf_counter() - t0)
    return float(statistics.median(runs))


def with_measured_times(problem, times: Mapping[str, float], *, device: str, repeats: int, warmup: int = 1,
                        threads: int | None = None):
    """``problem`` with node times replaced by ``times`` (every node must have one).

    ``meta["cost_model"]`` gains ``"times": "measured"`` and a ``profile`` record (device,
    repeats, warm-up runs, statistic, threads, torch version); edge bytes, memory and links are
    unchanged (still the cost model's).

    Parameters
    ----------
    problem : Problem
        The problem whose times to replace.
    times : {node id: seconds}
        A measured time for every node (:func:`profile_times`).
    device : str
        Where the times were measured (recorded in the metadata).
    repeats, warmup : int
        Timed and untimed runs behind each median (recorded).
    threads : int, optional
        CPU threads used (recorded; default: torch's current count).

    Returns
    -------
    Problem
        A new problem; everything but node times and metadata unchanged.

    Raises
    ------
    OptpartError
        A node of ``problem`` without a measured time.
    """
    import torch

    from ..model.problem import Problem

    missing = [nid for nid in problem.node_ids if nid not in times]
    if missing:
        raise OptpartError(f"no measured time for node '{missing[0]}' ({len(missing)} missing)")
    new_time = np.array([float(times[nid]) for nid in problem.node_ids])
    meta = dict(problem.meta)
    cm = dict(meta.get("cost_model") or {})
    cm["times"] = "measured"
    cm["profile"] = {"device": str(device), "repeats": int(repeats), "warmup": int(warmup),
                     "statistic": "median", "threads": threads if threads is not None else torch.get_num_threads(),
                     "torch": torch.__version__}
    meta["cost_model"] = cm
    split = problem.has_split
    return Problem.from_arrays(
        problem.node_ids, new_time, problem.memory, problem.edge_src, problem.edge_dst,
        problem.edge_bytes, devices=list(problem.devices) or None, links=problem.links,
        constraints=problem.constraints, param_bytes=problem.param_bytes if split else None,
        output_bytes=problem.output_bytes if split else None, temp_bytes=problem.temp_bytes if split else None,
        node_meta=problem.node_meta, name=problem.name, meta=meta)


def measured_problem(problem, module, example_inputs, *, device: str = "cpu", repeats: int = 5, warmup: int = 1,
                     loss_fn=None, targets: Sequence[Any] = (), step=None, threads: int | None = None):
    """``problem`` (imported from ``module``) with every node's time measured on ``device``.

    Traces the step again unless ``step`` is given, runs :func:`profile_times` with the
    module's parameters and ``example_inputs``, and returns :func:`with_measured_times`.

    Parameters
    ----------
    problem : Problem
        Imported from ``module`` and ``example_inputs`` (same loss and targets).
    module : torch.nn.Module
        The model; meta-device parameters are replaced by a seeded random init for timing.
    example_inputs : tensor, sequence or dict
        As given to the importer.
    device : str
        Torch device to time on (``'cpu'``, ``'cuda:0'``).
    repeats, warmup : int
        Timed runs per operator (the median is kept) and untimed runs before them.
    loss_fn, targets :
        As given to the importer.
    step : TracedStep, optional
        A trace of this module and inputs, to skip tracing again.
    threads : int, optional
        CPU threads for the timing runs (default: torch's current count).

    Returns
    -------
    Problem
        ``problem`` with measured node times (:func:`with_measured_times`).
    """
    from ..formats.torch import trace_training_step

    if step is None:
        step = trace_training_step(module, example_inputs, training=bool(problem.meta.get("training", True)),
                                   loss_fn=loss_fn, targets=targets)
    real = not any(getattr(p, "is_meta", False) for p in module.parameters())
    times = profile_times(step, device, repeats=repeats, warmup=warmup, module=module if real else None,
                          example_inputs=example_inputs, targets=targets, threads=threads)
    return with_measured_times(problem, times, device=device, repeats=repeats, warmup=warmup, threads=threads)
