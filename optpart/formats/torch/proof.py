"""The trace proof: the traced graph, replayed, computes what eager autograd computes.

:func:`prove_step` runs one step twice on the same real CPU tensors (the module's own
parameters and buffers, copied; meta ones filled by the fixed-seed init of the real-tensor
fallback, :func:`~optpart.formats.torch.inputs.materialized`) and the example inputs:

* **eager**: :class:`~optpart.formats.torch.step.StepFunction`, the very function the
  tracer recorded (``torch.func.functional_call``, the same loss definition,
  ``torch.autograd.grad``), with the module set up as for tracing;
* **replay**: the traced ``torch.fx`` graph, node by node, checking on the way that every
  read of the data (:mod:`~optpart.formats.torch.datadep`) gives what the trace saw.

Both runs start from one seed of torch's random generator (:func:`~optpart.formats.torch.step.seeded`,
as the trace did), and the graph keeps the trace's order of random operators, so dropout
draws the same masks in both and can neither fail the proof nor hide an error.

The loss and every gradient are compared by their **relative error**, ``max |graph - eager|
/ max |eager|`` per tensor. Both runs execute the same ATen kernels on the same values; they
may differ only where a sum is associated differently (a functionalized scatter, another
accumulation order), i.e. by float rounding: for float32 (``eps = 1.2e-7``) a sum of ``n``
terms rounds by about ``sqrt(n) * eps`` relative, under ``1e-5`` for sums of up to ``10^4``
terms. The tolerance is :data:`TOLERANCE` of the parameter's dtype (float32 ``1e-5``);
a gradient whose eager values are all zero must be zero. A wrong graph (the view replay
bug of real traces) is off by ``1e-2`` and more.
"""

from __future__ import annotations

import math
from pathlib import Path

from ...errors import FormatError
from .datadep import path_error, read_mismatch
from .inputs import _split_inputs, materialized
from .rng import draws_random
from .settings import tracing_settings
from .step import StepFunction, replaying, seeded

__all__ = ["prove_step", "TOLERANCE", "relative_error"]

#: Largest relative error a gradient (or the loss) of each dtype may show: float rounding of
#: sums associated differently, ``sqrt(n) * eps`` for sums of ``n <= 10^4`` terms (see the module doc).
TOLERANCE = {"float64": 1e-12, "float32": 1e-5, "bfloat16": 5e-2, "float16": 1e-2}


def relative_error(got, want) -> float:
    """``max |got - want| / max |want|`` (0 for equal tensors, ``inf`` for a nonzero error on zeros).

    Parameters
    ----------
    got, want : torch.Tensor or None
        ``None`` is a zero gradient (an unused parameter).

    Returns
    -------
    float
    """
    import torch

    if got is None and want is None:
        return 0.0
    if got is None or want is None:
        got = torch.zeros_like(want) if got is None else got
        want = torch.zeros_like(got) if want is None else want
    if got.shape != want.shape:
        return math.inf
    got, want = got.detach().double(), want.detach().double()
    if not got.numel():
        return 0.0
    err = float((got - want).abs().max())
    scale = float(want.abs().max())
    if math.isnan(err):
        return 0.0 if bool(torch.equal(got.isnan(), want.isnan())) and torch.allclose(
            got.nan_to_num(), want.nan_to_num()) else math.inf
    return err / scale if scale > 0 else (0.0 if err == 0 else math.inf)


def _available_bytes() -> float:
    """Host memory available now (``MemAvailable``), or ``inf`` when the system does not say."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return float(line.split()[1]) * 1024
    except OSError:
        pass
    return math.inf


def _needed_bytes(step) -> float:
    """Host memory a proof needs: parameters three times (values, two sets of gradients),
    buffers and inputs twice, and the activations a step saves for its backward pass."""
    from .reading import TracedGraph, tensors

    def size(name: str) -> float:
        import torch

        return float(getattr(torch, name).itemsize)

    tg = TracedGraph(step, size)
    n_p = len(step.param_names)
    state = [sum(tg.nbytes(t) for t in tensors(nd.meta.get("val"))) for nd in tg.placeholders]
    return 3 * sum(state[:n_p]) + 2 * sum(state[n_p:]) + sum(tg.saved_on.values())


class _Replay:
    """Runs a traced graph node by node (``torch.fx.Interpreter``), checking every data read."""

    def __init__(self, step):
        import torch.fx

        reads = {r.node: r for r in step.reads}

        class _Checking(torch.fx.Interpreter):
            def run_node(self, n):
                try:
                    value = super().run_node(n)
                except FormatError:
                    raise
                except Exception as exc:  # noqa: BLE001 - a kernel's failure becomes one line naming the node
                    text = str(exc).strip().splitlines()
                    raise FormatError(f"trace proof: operator '{n.name}' ({n.target}) fails on real tensors: "
                                      f"{type(exc).__name__}: {text[0] if text else ''}") from None
                read = reads.get(n.name)
                if read is not None:
                    mismatch = read_mismatch(value, read)
                    if mismatch is not None:
                        raise FormatError("trace proof: the traced batch, replayed, took another path: "
                                          + path_error(read, mismatch))
                return value

        self.interpreter = _Checking(step.graph_module)
        self.interpreter.extra_traceback = False  # our one-line errors stay one line

    def __call__(self, params, buffers, xs):
        return self.interpreter.run(params, buffers, *xs)


def prove_step(step, module, example_inputs, *, loss_fn=None, targets=(), memory_limit: float | None = None) -> dict:
    """Replay ``step``'s graph on the example inputs and compare it with eager autograd.

    Parameters
    ----------
    step : TracedStep
        The trace of ``module`` on ``example_inputs`` (same ``loss_fn`` and ``targets``).
    module : torch.nn.Module
        The model (real or on the meta device); not changed.
    example_inputs : tensor, sequence or dict
        The inputs the step was traced with.
    loss_fn : callable, optional
        As given to the tracer.
    targets : sequence of tensors
        As given to the tracer.
    memory_limit : float, optional
        Host bytes the proof may use (default: the memory available now); a step that needs
        more is not run and the result says so.

    Returns
    -------
    dict
        ``{"loss_rel_err", "worst_parameter", "worst_rel_err", "tolerance", "compared", "init",
        "seed", "random_operators"}`` (training; an inference step compares its outputs: worst
        ``"output <i>"``), or ``{"skipped": reason}`` when the step cannot be run here.

    Raises
    ------
    FormatError
        One line naming the worst parameter (or the loss), its relative error and the tolerance,
        when it exceeds the tolerance; or the first data read that took another path.
    """
    import torch

    from .step import TRACE_SEED

    need = _needed_bytes(step)
    limit = _available_bytes() if memory_limit is None else memory_limit
    if need > 0.8 * limit:
        return {"skipped": f"the proof needs about {need / 2 ** 30:.3g} GiB of host memory for real tensors, "
                           f"{limit / 2 ** 30:.3g} GiB are available"}
    pnames = tuple(n for n, _ in module.named_parameters())
    if pnames != step.param_names:
        raise FormatError("trace proof: the module's parameters are not the traced step's")
    names, tensors, as_kw, structure = _split_inputs(example_inputs)
    pvals = [p for _, p in module.named_parameters()]
    bvals = [b for _, b in module.named_buffers()]
    flat = [*tensors, *targets]
    trained = [step.training and n not in step.frozen for n in pnames]
    fn = StepFunction(module, pnames, step.buffer_names, step.frozen, structure, as_kw, len(tensors), step.training,
                      loss_fn)
    with tracing_settings(module, step.training, []):
        params, buffers, xs = materialized(pvals, bvals, flat, trained)
        with seeded(), torch.enable_grad():
            want = [None if v is None else v.detach() for v in fn(params, buffers, *xs)]
        params, buffers, xs = materialized(pvals, bvals, flat, [False] * len(pnames))
        with seeded(), replaying():  # nothing requires grad: no autograd graph is built
            got = list(_Replay(step)(params, buffers, xs))
    if step.training:
        labels = ["loss", *pnames]
        want = want[:1 + len(pnames)]
    else:
        labels = [f"output {i}" for i in range(len(got))]
    if len(got) != len(want):
        raise FormatError(f"trace proof: the graph returns {len(got)} values, eager autograd {len(want)}")
    errors = {label: relative_error(g, w) for label, g, w in zip(labels, got, want)}
    tols = {label: TOLERANCE.get(str((w if w is not None else g).dtype).replace("torch.", ""), TOLERANCE["float32"])
            if (w is not None or g is not None) else TOLERANCE["float32"] for label, g, w in zip(labels, got, want)}
    rest = [label for label in labels if label != "loss"]
    worst = max(rest, key=lambda label: errors[label] / tols[label]) if rest else "loss"  # first of equals
    random_ops = sum(1 for nd in step.graph_module.graph.nodes if draws_random(nd))
    loss_bad = step.training and errors["loss"] > tols["loss"]
    if errors[worst] > tols[worst] or loss_bad:
        seeds = f"; the step draws random numbers ({random_ops} random operator(s), seeded alike in both runs)" \
            if random_ops else ""
        if errors[worst] > tols[worst]:
            label, what = worst, (f"gradient of '{worst}'" if step.training else worst)
            also = f"; the loss by {errors['loss']:.3g}" if step.training else ""
        else:
            label, what = "loss", "loss"
            also = f"; worst gradient '{worst}' by {errors[worst]:.3g}" if rest else ""
        raise FormatError(f"trace proof failed: the traced graph's {what} differs from eager autograd's by "
                          f"{errors[label]:.3g} relative (tolerance {tols[label]:g}{also}){seeds}")
    meta_params = any(p.is_meta for p in pvals) or any(b.is_meta for b in bvals)
    return {"loss_rel_err": errors.get("loss", 0.0), "worst_parameter": worst if step.training and rest else None,
            "worst_rel_err": max(errors.values()) if errors else 0.0, "tolerance": tols.get(worst, 1e-5),
            "compared": len(labels), "init": "fixed-seed random init (meta tensors)" if meta_params
            else "the module's own values", "seed": TRACE_SEED, "random_operators": random_ops}
