"""What the problem builder reads off a traced step's FX graph, computed once.

:class:`TracedGraph` answers, for :func:`optpart.formats.torch_import.problem_from_traced`:
which placeholders are parameters, buffers and inputs; which nodes are kept (every
``call_function`` but ``getitem``, whose projections fold into edges); the phase of each
(backward: the loss's descendants and what autograd ran); the storage root a view or an
in-place result aliases; which operators read each parameter (directly or through views);
and the saved activations, the forward values a backward node reads, charged to their
storage root once.
"""

from __future__ import annotations

import operator
from typing import Any, NamedTuple

from .aliasing import alias_source

__all__ = ["TracedGraph", "OpFacts", "VIEW_OPS", "SHAPE_ONLY_OPS", "tensors"]

#: ATen operators that only change tensor metadata: they alias their first input.
VIEW_OPS = frozenset({
    "t", "view", "_unsafe_view", "reshape", "unsqueeze", "squeeze", "permute", "transpose", "expand",
    "slice", "select", "alias", "detach", "as_strided", "split", "split_with_sizes", "unbind", "chunk",
    "diagonal", "unfold", "view_as", "expand_as", "narrow", "lift_fresh", "lift_fresh_copy", "_reshape_alias",
    "numpy_T", "flatten", "unflatten", "movedim", "squeeze_", "unsqueeze_", "t_", "transpose_",
})

#: ATen operators that read only the shape and dtype of their tensor input, never its data.
SHAPE_ONLY_OPS = frozenset({
    "ones_like", "zeros_like", "empty_like", "full_like", "rand_like", "randn_like",
    "new_zeros", "new_ones", "new_empty", "new_full", "sym_size", "sym_numel", "sym_stride",
})


def tensors(val) -> list:
    """The tensors in a traced value (a tensor, or a tuple/list of them).

    Parameters
    ----------
    val : object
        A node's ``meta["val"]``.

    Returns
    -------
    list of torch.Tensor
    """
    import torch

    if isinstance(val, torch.Tensor):
        return [val]
    if isinstance(val, (tuple, list)):
        return [x for x in val if isinstance(x, torch.Tensor)]
    return []


def _packet(nd) -> str | None:
    packet = getattr(nd.target, "overloadpacket", None)
    return None if packet is None else packet.__name__


def _aliases(nd) -> bool:
    """The output is (a view of) an input: a view, or the tensor an in-place op wrote."""
    return _packet(nd) in VIEW_OPS or alias_source(nd) is not None


def _shape_only(nd) -> bool:
    """The operator reads only the shape and dtype of its input (no data crosses)."""
    return _packet(nd) in SHAPE_ONLY_OPS


class OpFacts(NamedTuple):
    """What the problem builder needs of one operator node (:meth:`TracedGraph.facts`)."""

    #: ``aten.<op>.<overload>`` (its target's text for other callables)
    name: str
    #: metadata only: no kernel, no new storage (:data:`VIEW_OPS`)
    view: bool
    #: its output is (a view of) an input: a view, or the tensor an in-place op wrote
    aliases: bool
    #: it reads only the shape and dtype of its input, never its data (:data:`SHAPE_ONLY_OPS`)
    shape_only: bool


class TracedGraph:
    """The facts of one traced step's FX graph (see the module docstring).

    Parameters
    ----------
    step : TracedStep
        The traced step.
    element_bytes : callable
        Bytes of one element of a dtype name (the cost model's ``element_bytes``).
    """

    def __init__(self, step, element_bytes) -> None:
        self.step, self.element_bytes = step, element_bytes
        self.nodes = list(step.graph_module.graph.nodes)
        n_p, n_b = len(step.param_names), len(step.buffer_names)
        self.placeholders = [nd for nd in self.nodes if nd.op == "placeholder"]
        self.param_of = {nd: i for i, nd in enumerate(self.placeholders[:n_p])}
        self.kind: dict[Any, str] = {}
        for i, nd in enumerate(self.placeholders):
            self.kind[nd] = "param" if i < n_p else "buffer" if i < n_p + n_b else "input"
        outs = next(nd for nd in self.nodes if nd.op == "output").args[0]
        self.outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        self.ops = [nd for nd in self.nodes if nd.op == "call_function" and nd.target is not operator.getitem]
        self.kept = [nd for nd in self.placeholders if self.kind[nd] != "param"] + self.ops
        self._root: dict[Any, tuple] = {}
        self.phase = self._phases()
        self.readers = self._parameter_readers()
        self.saved_on = self._saved_activations()

    # ------------------------------------------------------------------ one node or value
    def nbytes(self, t) -> float:
        """Bytes of tensor ``t``.

        Parameters
        ----------
        t : torch.Tensor
            A traced tensor.

        Returns
        -------
        float
        """
        return float(t.numel()) * self.element_bytes(str(t.dtype).replace("torch.", ""))

    @staticmethod
    def source(nd) -> tuple[Any, int | None]:
        """``(node, index)`` of a value: a node, or the node and index behind a ``getitem``.

        Parameters
        ----------
        nd : torch.fx.Node
            Any node.

        Returns
        -------
        tuple
            ``(node, None)`` for a node's whole value.
        """
        if nd.op == "call_function" and nd.target is operator.getitem:
            b, _ = TracedGraph.source(nd.args[0])
            return b, nd.args[1]
        return nd, None

    def value_bytes(self, nd) -> float:
        """Bytes of every tensor of a node's value.

        Parameters
        ----------
        nd : torch.fx.Node
            A node.

        Returns
        -------
        float
        """
        return float(sum(self.nbytes(t) for t in tensors(nd.meta.get("val"))))

    def item_bytes(self, base, idx: int | None) -> float:
        """Bytes of the value ``(base, idx)`` (:meth:`source`).

        Parameters
        ----------
        base : torch.fx.Node
            The producing node.
        idx : int or None
            The output index behind a ``getitem``, or None for the whole value.

        Returns
        -------
        float
        """
        return self.value_bytes(base) if idx is None else self.nbytes(tensors(base.meta.get("val"))[idx])

    @staticmethod
    def facts(nd) -> OpFacts:
        """What the builder needs of one operator node.

        Parameters
        ----------
        nd : torch.fx.Node
            A ``call_function`` node.

        Returns
        -------
        OpFacts
            Its name, and whether it is a view, aliases an input, or reads only shapes.
        """
        t = nd.target
        packet = getattr(t, "overloadpacket", None)
        view = _packet(nd) in VIEW_OPS
        return OpFacts(str(t) if packet is None else f"aten.{packet.__name__}.{t._overloadname}", view,
                       _aliases(nd), _packet(nd) in SHAPE_ONLY_OPS)

    def root_of(self, nd) -> tuple:
        """The storage a value lives in: a view aliases the root of its first tensor input.

        Parameters
        ----------
        nd : torch.fx.Node
            A node (a ``getitem`` resolves to its ``(node, index)``).

        Returns
        -------
        tuple
            ``(node, index)`` of the storage's own value.
        """
        base, idx = self.source(nd)
        key = (base, idx)
        if key in self._root:
            return self._root[key]
        if base.op == "call_function" and _aliases(base):
            src = alias_source(base)
            arg = base.args[src] if src is not None and src < len(base.args) else None
            first = arg if hasattr(arg, "op") else next((a for a in base.all_input_nodes), None)
            r = self.root_of(first) if first is not None else key
        else:
            r = key
        self._root[key] = r
        return r

    # ------------------------------------------------------------------ the whole graph
    def _phases(self) -> dict[Any, str]:
        """Backward: strict descendants of the loss, and what autograd ran (training only)."""
        phase: dict[Any, str] = {nd: "forward" for nd in self.kept}
        if self.step.training:
            loss_node, _ = self.source(self.outs[0])
            stack, seen = list(loss_node.users), set()
            while stack:
                u = stack.pop()
                if u in seen or u.op == "output":
                    continue
                seen.add(u)
                stack.extend(u.users)
            for nd in self.ops:
                if nd in seen or nd.name in self.step.backward:
                    phase[nd] = "backward"
        return phase

    def _parameter_readers(self) -> list[list[Any]]:
        """Per parameter, every kept operator that reads it or a view of it (in graph order)."""
        owner_param: dict[Any, int] = dict(self.param_of)  # views of a parameter (recursively) belong to it
        for nd in self.ops:
            if _aliases(nd):
                ins = [self.source(a)[0] for a in nd.all_input_nodes]
                if ins and ins[0] in owner_param:
                    owner_param[nd] = owner_param[ins[0]]
        for nd in [n for n in self.nodes if n.op == "call_function" and n.target is operator.getitem]:
            b, _ = self.source(nd)
            if b in owner_param:
                owner_param[nd] = owner_param[b]
        readers: list[list[Any]] = [[] for _ in self.step.param_names]
        for nd in self.ops:
            seen_p = set()
            if nd in owner_param and nd not in self.param_of:
                seen_p.add(owner_param[nd])
            for a in nd.all_input_nodes:
                if a in owner_param:
                    seen_p.add(owner_param[a])
            for p in sorted(seen_p):
                readers[p].append(nd)
        return readers

    def _saved_activations(self) -> dict[Any, float]:
        """Bytes each forward node holds for the backward pass: the forward values a backward
        node reads, charged to their storage root once (training only)."""
        saved: dict[tuple, float] = {}
        if self.step.training:
            for nd in self.ops:
                if self.phase[nd] != "backward" or _shape_only(nd):
                    continue
                for a in nd.all_input_nodes:
                    b, _ = self.source(a)
                    if b.op == "placeholder" or self.phase.get(b) != "forward":
                        continue
                    r = self.root_of(a)
                    if r[0].op == "placeholder" or r in saved:
                        continue
                    rn, ri = r
                    ts = tensors(rn.meta.get("val"))
                    saved[r] = self.nbytes(ts[ri]) if ri is not None and ri < len(ts) else \
                        float(sum(self.nbytes(t) for t in ts))
        saved_on: dict[Any, float] = {}
        for (rn, _), b in saved.items():
            saved_on[rn] = saved_on.get(rn, 0.0) + b
        return saved_on
