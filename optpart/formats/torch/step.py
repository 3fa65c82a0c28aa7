"""The function one training step is: the one the tracer records and the trace proof runs eagerly.

:class:`StepFunction` calls the module on its parameters and buffers (swapped in as
``torch.func.functional_call`` does, and kept in through the backward pass, where activation
checkpointing recomputes blocks), builds the loss (the user's ``loss_fn``, the output's own
``loss``, or :func:`~optpart.formats.torch.inputs.default_loss`) and differentiates it
with ``torch.autograd.grad``. :func:`~optpart.formats.torch.trace.trace_training_step`
traces it under ``make_fx``; :mod:`~optpart.formats.torch.proof` runs the very same
function on real tensors, so the proof compares the graph with eager autograd of the same
loss definition.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Mapping

from ...errors import FormatError
from .inputs import DEFAULT_LOSS, OUTPUT_LOSS, _rebuild, default_loss, output_tensors

__all__ = ["StepFunction", "seeded", "replaying", "TRACE_SEED"]

#: Seed of torch's global random generator while a step is traced, functionalized and proved.
TRACE_SEED = 0


@contextmanager
def seeded(seed: int = TRACE_SEED):
    """Torch's CPU random generator seeded with ``seed`` inside, and restored afterwards.

    A step's random operators (dropout, ViT-MAE's masking noise) draw the same numbers in the
    trace, in its functionalization (which runs it again: a real-tensor trace must take the
    same path) and in both runs of the trace proof, which draw in the same order.

    Parameters
    ----------
    seed : int
        The seed (default :data:`TRACE_SEED`).

    Returns
    -------
    contextlib.AbstractContextManager
        ``torch.random.fork_rng`` over the CPU generator, seeded.
    """
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def replaying():
    """Grad mode on, as a traced step was recorded: the context to run its graph in.

    The tracer records the forward with grad mode on, and a few kernels return what their
    backward reads only then: ``aten.mkldnn_rnn_layer`` (``nn.LSTM`` on a CPU) returns its
    oneDNN workspace, read by ``mkldnn_rnn_layer_backward``, as an undefined tensor under
    ``torch.no_grad()``. The graph's inputs require no grad, so no autograd graph is built.

    Returns
    -------
    torch.enable_grad
        The context manager.
    """
    import torch

    return torch.enable_grad()


class StepFunction:
    """``step(params, buffers, *inputs, *targets) -> (loss, *grads, *outputs)`` of one module.

    Parameters
    ----------
    module : torch.nn.Module
        The model.
    param_names, buffer_names : tuple of str
        ``named_parameters()`` / ``named_buffers()`` names, in placeholder order.
    frozen : frozenset of str
        Parameters not differentiated (``requires_grad=False``): their gradient is ``None``.
    structure : list of (str, Any)
        The example inputs' top-level items (rebuilt around the flat input tensors).
    as_keywords : bool
        Pass the rebuilt inputs as keywords (the example inputs were a dict).
    n_inputs : int
        Number of flat input tensors (the rest of ``*xs`` are targets).
    training : bool
        Differentiate the loss (else return the outputs only).
    loss_fn : callable, optional
        ``loss_fn(output, *targets)``; default :func:`default_loss`.
    stamper : object, optional
        Module attribution of the tracer (``stamp_backward(loss)``); None for an eager run.
    """

    def __init__(self, module, param_names, buffer_names, frozen, structure, as_keywords: bool, n_inputs: int,
                 training: bool, loss_fn: Callable[..., Any] | None = None, stamper=None):
        self.module, self.param_names, self.buffer_names = module, tuple(param_names), tuple(buffer_names)
        self.frozen, self.structure, self.as_keywords = frozenset(frozen), structure, as_keywords
        self.n_inputs, self.training, self.loss_fn, self.stamper = n_inputs, training, loss_fn, stamper
        #: how the loss is defined (:attr:`TracedStep.loss`), known after the first call
        self.loss = "none" if not training else ("loss_fn" if loss_fn is not None else DEFAULT_LOSS)
        #: number of forward output tensors appended to the result, known after the first call
        self.n_outputs = 0

    def __call__(self, params, buffers, *xs):
        """Run the step.

        Parameters
        ----------
        params, buffers : sequence of torch.Tensor
            In :attr:`param_names` / :attr:`buffer_names` order.
        *xs : torch.Tensor
            The flat input tensors, then the targets.

        Returns
        -------
        tuple
            Training: ``(loss, *grads, *outputs)`` (a gradient is ``None`` for a frozen or unused
            parameter); inference: the output tensors.
        """
        import torch
        from torch.nn.utils.stateless import _reparametrize_module  # what torch.func.functional_call enters

        values = dict(zip(self.param_names, params))
        values.update(zip(self.buffer_names, buffers))
        leaves = iter(xs[:self.n_inputs])
        rebuilt = [(name, _rebuild(value, leaves)) for name, value in self.structure]
        args, kwargs = ((), dict(rebuilt)) if self.as_keywords else (tuple(v for _, v in rebuilt), {})
        # The module holds the step's tensors through the backward pass too: activation
        # checkpointing recomputes its blocks there, reading the module's parameters again.
        with _reparametrize_module(self.module, values, tie_weights=True, strict=False):
            out = self.module(*args, **kwargs)
            outs = tuple(output_tensors(out))
            self.n_outputs = len(outs)
            result = (*self._differentiate(out, params, xs), *outs) if self.training else outs
            self._keep_reassigned(buffers)
            return result

    def _keep_reassigned(self, buffers) -> None:
        """Write each buffer the forward reassigned (``self.ema = ...``) into the step's buffer, in place.

        Leaving the swap restores the module's own attributes, so a buffer the forward replaced
        by a new tensor (rather than updated in place, as ``BatchNorm`` does) would lose its
        update: the step would return eager autograd's loss and gradients while its buffers
        never move. Copied into the step's buffer after the backward pass (which may read the
        old value), the update is an in-place write the trace records, as eager training's
        reassignment leaves the module.
        """
        import torch

        for name, old in zip(self.buffer_names, buffers):
            owner, _, leaf = name.rpartition(".")
            new = self.module.get_submodule(owner)._buffers.get(leaf)
            if new is old or new is None:
                continue
            if new.shape != old.shape or new.dtype != old.dtype:
                raise FormatError(f"buffer '{name}' of {type(self.module).__name__} is reassigned in the forward "
                                  f"with shape {tuple(new.shape)} {new.dtype}, not its own {tuple(old.shape)} "
                                  f"{old.dtype}: a traced step updates a buffer in place only")
            with torch.no_grad():
                old.copy_(new)

    def _differentiate(self, out, params, xs) -> tuple:
        """``(loss, *grads)``: the loss of ``out`` and its gradient for each parameter (``torch.autograd.grad``)."""
        import torch

        if self.loss_fn is not None:
            loss = self.loss_fn(out, *xs[self.n_inputs:])
        else:
            loss = default_loss(out)
            if isinstance(out, Mapping) and out.get("loss") is loss:
                self.loss = OUTPUT_LOSS
        if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
            raise FormatError(f"the loss of {type(self.module).__name__} must be a scalar tensor, got "
                              f"{tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__}")
        if self.stamper is not None:
            self.stamper.stamp_backward(loss)
        trained = [p for n, p in zip(self.param_names, params) if n not in self.frozen]
        got = iter(torch.autograd.grad(loss, trained, allow_unused=True))
        return (loss, *(None if n in self.frozen else next(got) for n in self.param_names))
