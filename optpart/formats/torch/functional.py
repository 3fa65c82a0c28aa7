"""Functionalize a traced training step: no in-place operator left but the true side effects.

``make_fx`` records the ATen operators the step ran, in-place ones included
(``copy_`` into an ``as_strided`` view of a ``new_zeros`` buffer in AdaptiveAvgPool1d's
backward, hundreds of ``add_``/``mul_`` in the CPU GRU composite). In such a graph a
write through one alias is not ordered against a read through another, so a scheduler
that picks another topological order, or another device, computes something else.

:func:`functionalize_graph` runs the traced graph again under
``torch.func.functionalize`` (PyTorch's functionalization pass, the one AOTAutograd
uses): every mutation becomes its out-of-place form (``add_`` -> ``add``, ``copy_`` into
a slice -> ``slice_scatter``), views of immutable tensors stay views. What the step
changes outside itself (a buffer such as batch norm's running statistics, an input
it writes) remains: one ``copy_`` into that placeholder at the end of the graph, ordered
after every reader of the placeholder by :func:`~optpart.formats.torch.aliasing.ordering_edges`.

``native_batch_norm`` in training mode updates its running statistics without its
schema saying so, which functionalization cannot see; it is run as
``_native_batch_norm_legit_functional`` plus explicit ``copy_`` into the statistics. An
in-place random operator on a permuted tensor (dropout's ``bernoulli_``) draws through a
contiguous permutation of it, so that its numbers land where eager mode puts them.

Node metadata (the module stamps of :mod:`~optpart.formats.torch.trace`) carries over
through ``torch.fx.traceback.preserve_node_meta``.

References: PyTorch functionalization (``torch.func.functionalize``; Bezerra et al.,
"PyTorch 2: Faster Machine Learning Through Dynamic Python Bytecode Transformation and
Graph Compilation", ASPLOS 2024, section on AOTAutograd).
"""

from __future__ import annotations

from typing import Any, Sequence

from .datadep import keep_node
from .step import replaying

__all__ = ["functionalize_graph", "SEQ_KEY"]

#: ``node.meta["custom"]`` key carrying a node's autograd sequence number across the re-trace.
SEQ_KEY = "optpart_seq"


def _interpreter(gm):
    import torch

    aten = torch.ops.aten

    class _Functionalizing(torch.fx.Interpreter):
        """Runs ``gm`` node by node; batch norm's hidden statistics update made explicit."""

        def call_function(self, target, args, kwargs):
            if (target is aten.native_batch_norm.default and len(args) >= 8 and args[5] is True
                    and args[3] is not None and args[4] is not None):
                x, w, b, rm, rv, _, momentum, eps = args[:8]
                out, mean, rstd, new_rm, new_rv = aten._native_batch_norm_legit_functional.default(
                    x, w, b, rm, rv, True, momentum, eps)
                rm.copy_(new_rm)
                rv.copy_(new_rv)
                return out, mean, rstd
            perm = _memory_order(target, args)
            if perm is not None:  # draw in memory order, as eager fills a strided tensor
                super().call_function(target, (args[0].permute(perm), *args[1:]), kwargs)
                return args[0]
            return super().call_function(target, args, kwargs)

    return _Functionalizing(gm)


def _memory_order(target, args) -> list[int] | None:
    """The dimensions of an in-place random operator's tensor in memory order, when that is not
    their logical order (a permuted, dense tensor); else None.

    ``x.bernoulli_(p)`` fills ``x``'s memory in order; its functional form ``bernoulli(x, p)``
    fills a new contiguous tensor in logical order. For a permuted ``x`` (DETR flattens and
    permutes its feature map before dropout) the two put the same random numbers at other
    places, and the graph's dropout masks would not be eager autograd's. The functional
    draw on ``x.permute(order)`` (contiguous) puts them where eager does.
    """
    import torch

    schema = getattr(target, "_schema", None)
    if (schema is None or torch.Tag.nondeterministic_seeded not in getattr(target, "tags", ()) or not args
            or not schema.arguments or schema.arguments[0].alias_info is None
            or not schema.arguments[0].alias_info.is_write or not isinstance(args[0], torch.Tensor)):
        return None
    x = args[0]
    if x.is_contiguous() or x.dim() < 2:
        return None
    order = sorted(range(x.dim()), key=lambda d: (-x.stride(d), d))
    return order if x.permute(order).is_contiguous() else None


def functionalize_graph(gm, args: Sequence[Any], mode: str):
    """The graph of ``gm`` with every mutation removed but the writes to its inputs.

    Parameters
    ----------
    gm : torch.fx.GraphModule
        A flat ATen graph as ``make_fx`` returns it (its placeholders in flat order).
    args : sequence
        Its flat inputs: the tensors it was traced with (fake or real).
    mode : {'fake', 'real'}
        The ``make_fx`` tracing mode to re-trace in (the one ``gm`` was traced with).

    Returns
    -------
    torch.fx.GraphModule
        Same placeholders and outputs; node ``meta["custom"]`` as in ``gm`` (plus
        :data:`SEQ_KEY`, the autograd sequence number of the node it came from).
    """
    import torch
    import torch.fx.traceback as fxt
    from torch.fx.experimental.proxy_tensor import make_fx

    for nd in gm.graph.nodes:
        seq = nd.meta.get("seq_nr")
        if nd.op == "call_function" and isinstance(seq, int):
            nd.meta["custom"] = dict(nd.meta.get("custom") or {}, **{SEQ_KEY: seq})
    interp = _interpreter(gm)

    def run(*flat):
        return interp.run(*flat)

    flat = [a.detach() if isinstance(a, torch.Tensor) else a for a in args]
    with fxt.preserve_node_meta(), replaying():  # flat is detached: nothing is differentiated
        kw = {} if mode == "fake" else {"_error_on_data_dependent_ops": False}
        out = make_fx(torch.func.functionalize(run, remove="mutations"), tracing_mode=mode, **kw)(*flat)
    out.graph._codegen = gm.graph._codegen  # called as gm was: (params, buffers, *inputs)
    _drop_identity_copies(out.graph)
    out.graph.eliminate_dead_code(is_impure_node=keep_node)
    out.recompile()
    return out


def _drop_identity_copies(graph) -> None:
    """Replace ``aten.copy(dst, src)`` by ``src`` when both have one shape, dtype and device.

    Functionalization turns ``x.copy_(y)`` into ``copy(x, y)`` (a new tensor equal to ``y``
    broadcast to ``x``); when nothing is broadcast or converted, ``y`` itself is that value,
    and, being immutable in a functional graph, can be used in its place (one node and one
    allocation fewer per batch-norm statistic).
    """
    import torch

    copy_op = torch.ops.aten.copy.default
    for nd in list(graph.nodes):
        if nd.op != "call_function" or nd.target is not copy_op or len(nd.args) < 2 or nd.kwargs:
            continue
        dst, src = nd.args[0], nd.args[1]
        a, b = getattr(dst, "meta", {}).get("val"), getattr(src, "meta", {}).get("val")
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            continue
        if a.shape == b.shape and a.dtype == b.dtype and a.device == b.device:
            nd.replace_all_uses_with(src)
            graph.erase_node(nd)
