"""The example inputs and outputs of a traced step: flattening, rebuilding, the default loss.

A module's inputs may nest tuples, lists and dicts; each tensor leaf becomes one graph
input (:func:`_split_inputs`), and the module sees them rebuilt into the structure it
was given (:func:`_rebuild`). Its output tree is read the same way
(:func:`output_tensors`), and :func:`default_loss` makes a scalar of it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from ...errors import FormatError

__all__ = ["output_tensors", "default_loss", "cross_entropy", "materialized", "DEFAULT_LOSS", "OUTPUT_LOSS"]

#: How :func:`default_loss` is described in :attr:`TracedStep.loss` and problem metadata.
DEFAULT_LOSS = "sum over the floating tensors of the output of their mean"
#: :attr:`TracedStep.loss` when the output carried its own scalar ``loss`` (Hugging Face ``labels``).
OUTPUT_LOSS = "the output's own 'loss' field"


def output_tensors(value, *, floating_only: bool = False) -> list:
    """The tensors in a module's output tree, depth first, in a fixed order.

    Understood containers: tuples, lists, dicts (insertion order; Hugging Face
    ``ModelOutput`` is one and holds only its non-``None`` fields), and dataclasses (field
    order). Anything else (a key/value cache object, ``None``, a number) is skipped.

    Parameters
    ----------
    value : Any
        A module's output (or any nesting of the containers above).
    floating_only : bool
        Keep only floating-point and complex tensors (those a loss can be built from).

    Returns
    -------
    list of torch.Tensor
        The tensors, depth first.
    """
    import torch

    out: list = []

    def walk(v):
        if isinstance(v, torch.Tensor):
            if not floating_only or v.is_floating_point() or v.is_complex():
                out.append(v)
        elif isinstance(v, Mapping):
            for item in v.values():
                walk(item)
        elif isinstance(v, (tuple, list)):
            for item in v:
                walk(item)
        elif dataclasses.is_dataclass(v) and not isinstance(v, type):
            for f in dataclasses.fields(v):
                walk(getattr(v, f.name))

    walk(value)
    return out


def default_loss(output):
    """The loss used when none is given.

    An output that carries its own scalar ``loss`` (a Hugging Face model given ``labels``:
    its ``ModelOutput`` has a ``loss`` field) is trained on that loss. Otherwise: the sum,
    over the floating tensors of the output, of their mean (so every output, e.g. both
    logits and hidden states, gets a gradient); a scalar output is therefore its own loss.

    Parameters
    ----------
    output : Any
        The module's output (tensor, container, ``ModelOutput``).

    Returns
    -------
    torch.Tensor
        A scalar loss.

    Raises
    ------
    FormatError
        The output holds no floating-point tensor (pass ``loss_fn=``).
    """
    import torch

    if isinstance(output, Mapping) and isinstance(output.get("loss"), torch.Tensor) and output["loss"].dim() == 0:
        return output["loss"]
    tensors = output_tensors(output, floating_only=True)
    if not tensors:
        raise FormatError(f"the module's output ({type(output).__name__}) holds no floating-point tensor to "
                          f"build the default loss from; pass loss_fn=")
    loss = tensors[0].mean()
    for t in tensors[1:]:
        loss = loss + t.mean()
    return loss


def cross_entropy(logits, target):
    """Mean cross-entropy written as log-softmax plus gather.

    ``torch.nn.functional.cross_entropy`` lowers to ``nll_loss``, whose backward has no
    meta kernel on some torch versions; this form traces on meta tensors everywhere.

    Parameters
    ----------
    logits : torch.Tensor
        Scores ``(..., classes)``; computed in float32.
    target : torch.Tensor
        Integer class indices, one per row of ``logits`` (any shape with that many elements).

    Returns
    -------
    torch.Tensor
        The scalar mean negative log-likelihood.
    """
    import torch

    logp = torch.log_softmax(logits.reshape(-1, logits.shape[-1]).float(), dim=-1)
    return -logp.gather(1, target.reshape(-1, 1)).mean()


def _split_inputs(example_inputs) -> tuple[tuple[str, ...], list, bool, Any]:
    """(names, tensors, as_keywords, structure) of the example inputs: a tensor, a sequence
    or a dict, whose items may nest tuples, lists and dicts. Each tensor leaf is one graph
    input, named by its position or keyword (``'0'``, ``'input_ids'``) plus ``.j`` per nesting
    level (``'1.0'``); other leaves (numbers, ``None``) stay constants of the trace."""
    import torch

    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    if isinstance(example_inputs, Mapping):
        keys = list(example_inputs)
        for k in keys:
            if not isinstance(k, str):
                raise FormatError(f"example input key {k!r} must be a string (a keyword of forward())")
        top, as_kw = [(k, example_inputs[k]) for k in keys], True
    elif isinstance(example_inputs, (tuple, list)):
        top, as_kw = [(str(i), v) for i, v in enumerate(example_inputs)], False
    else:
        raise FormatError(f"example inputs must be a tensor, a tuple/list or a dict of keyword inputs, "
                          f"not {type(example_inputs).__name__}")
    leaves: list[tuple[str, Any]] = []

    def walk(value, name):
        if isinstance(value, torch.Tensor):
            leaves.append((name, value))
        elif isinstance(value, (tuple, list)):
            for j, v in enumerate(value):
                walk(v, f"{name}.{j}")
        elif isinstance(value, Mapping):
            for k, v in value.items():
                walk(v, f"{name}.{k}")

    for name, value in top:
        walk(value, name)
    return tuple(n for n, _ in leaves), [t for _, t in leaves], as_kw, top


def _rebuild(value, tensors):
    """``value`` with its tensor leaves replaced, in order, by the items of the iterator ``tensors``."""
    import torch

    if isinstance(value, torch.Tensor):
        return next(tensors)
    if isinstance(value, tuple):
        items = [_rebuild(v, tensors) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    if isinstance(value, list):
        return [_rebuild(v, tensors) for v in value]
    if isinstance(value, Mapping):
        return {k: _rebuild(v, tensors) for k, v in value.items()}
    return value


def _materialize(t, gen, requires_grad: bool = False):
    """A real CPU tensor with ``t``'s shape and dtype: ``t`` itself (moved) or, for a meta
    tensor, a fixed-seed random init (floats ~ N(0, 0.02), integers 0)."""
    import torch

    if not isinstance(t, torch.Tensor):
        return t
    if t.is_meta:
        if t.is_floating_point():
            x = torch.randn(t.shape, generator=gen, dtype=torch.float32).mul_(0.02).to(t.dtype)
        else:
            x = torch.zeros(t.shape, dtype=t.dtype)
    else:
        x = t.detach().to("cpu").clone()
    return x.requires_grad_(requires_grad) if requires_grad else x


def materialized(params, buffers, inputs, requires_grad) -> tuple[list, list, list]:
    """Real CPU copies of a step's tensors, the same on every call: a real tensor is copied, a
    meta one filled by one fixed-seed generator (floats ~ N(0, 0.02), integers 0) in this order.

    The real-tensor trace and the trace proof both start from these values, so the proof runs
    the parameters, buffers and inputs the trace saw.

    Parameters
    ----------
    params, buffers, inputs : sequence
        Tensors (real or meta); ``inputs`` are the flat inputs, then the targets (non-tensors pass).
    requires_grad : sequence of bool
        One per parameter: make it a leaf that requires a gradient.

    Returns
    -------
    tuple of list
        ``(params, buffers, inputs)``.
    """
    import torch

    gen = torch.Generator().manual_seed(0)
    return ([_materialize(p, gen, g) for p, g in zip(params, requires_grad)],
            [_materialize(b, gen) for b in buffers], [_materialize(x, gen) for x in inputs])


def drop_outputs(gm, n: int) -> list:
    """Remove the last ``n`` leaves of ``gm``'s output and return their FX nodes.

    A training step is traced returning ``(loss, *grads, *forward outputs)`` so that the
    forward outputs can be found in the graph; they are then dropped from the output, so
    the graph (after dead-code elimination) and its problem are those of ``(loss, *grads)``.

    Parameters
    ----------
    gm : torch.fx.GraphModule
        A graph ``make_fx`` returned (its output a flat list of leaves, a pytree out spec).
    n : int
        How many trailing leaves to drop.

    Returns
    -------
    list
        The dropped leaves (FX nodes, or constants), in output order.
    """
    import torch.utils._pytree as pytree

    if n <= 0:
        return []
    out = next(nd for nd in gm.graph.nodes if nd.op == "output")
    leaves = list(out.args[0])
    out.args = (leaves[:-n],)
    codegen = gm.graph._codegen
    info = getattr(codegen, "pytree_info", None)
    if info is not None and info.out_spec is not None:
        spec = info.out_spec
        kept = pytree.TreeSpec(spec.type, spec.context, list(spec.children())[:-n])
        codegen.pytree_info = info._replace(out_spec=kept)
    return leaves[-n:]
