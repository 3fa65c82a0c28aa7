"""Import a PyTorch ``nn.Module`` as a placement problem: one node per ATen operator.

How the graph is traced: :func:`optpart.formats.torch.trace_training_step` (fake tensors,
with a real-tensor fallback for data-dependent models; every node attributed to the
``named_modules()`` path that created it, backward nodes to their forward's module).
Every ``call_function`` node keeps its FX name as node id; multi-output operators'
``getitem`` projections are folded into edges. Inputs are ``input.<i>`` (or
``input.<keyword>``), targets ``target.<i>``, buffers ``buffer.<name>``.

Phases: backward nodes are the descendants of the loss (autograd seeds the backward
with ``ones_like(loss)``) and every operator autograd ran while differentiating (such as
the transposed weight a weight gradient reads); forward nodes are the others;
for each trainable parameter one **optimizer** node ``update.<param name>`` is added
(an Adam-like step, priced by the bytes it moves). A frozen parameter
(``requires_grad=False``) is not differentiated and has no optimizer node: its weights
are held by its first reader, as in an inference graph.

Costs (:class:`~optpart.formats.costmodel.CostModel`, ``docs/costmodel.md``): FLOPs per
node from ``torch.utils.flop_counter``'s formula registry applied to the traced
shapes (matmuls, convolutions, attention; elementwise ops count 0 FLOPs and are priced
by the memory-bound term); edge bytes are the tensor's bytes.

Memory (static model): an update node holds its parameter, gradient and optimizer
state; a forward operator holds the activations the backward pass reads from it
(its output when a backward node consumes it, views charged to the tensor they
alias, each storage once); an input node holds the batch. The peak-model split
gives ``param_bytes`` (state held all step) and ``output_bytes`` (the tensor a node
produces; 0 for views, whose readers get a 0-byte edge from the node that made the storage
they alias, so it lives until its last reader through any view). A parameter read by several operators (a tied embedding,
an unrolled RNN cell) is charged once, on its update node, and every operator that
reads it, directly or through a view, is colocated with that node.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence


from ..errors import FormatError
from ..model.devices import Device
from ..model.problem import Problem
from .costmodel import CostModel
from .node_columns import NodeColumns
from .torch import TracedStep, trace_training_step
from .torch.aliasing import check_problem_order, writer_groups
from .torch.datadep import routing_summary
from .torch.flops import operator_flops
from .torch.inputs import cross_entropy
from .torch.proof import prove_step
from .torch.reading import SHAPE_ONLY_OPS, VIEW_OPS, TracedGraph

__all__ = ["from_torch", "problem_from_traced", "trace_training_step", "TracedStep", "cross_entropy", "VIEW_OPS",
           "SHAPE_ONLY_OPS"]

def from_torch(
    module,
    example_inputs,
    *,
    training: bool = True,
    loss_fn: Callable[..., Any] | None = None,
    targets: Sequence[Any] = (),
    cost_model: CostModel | None = None,
    devices: int | Sequence[Device] | None = None,
    memory: Any = math.inf,
    name: str | None = None,
    no_split: str | Sequence[str] = (),
    trace_mode: str = "auto",
    check: bool | None = None,
    micro_batches: int = 1,
) -> Problem:
    """Trace ``module`` on ``example_inputs`` and return its operator graph as a :class:`Problem`.

    Parameters
    ----------
    module : torch.nn.Module
        The model. Build large ones under ``with torch.device("meta"):`` so no weight is
        allocated (only shapes and dtypes are read, unless the model reads values: see
        ``trace_mode``).
    example_inputs : tensor, sequence of tensors, or dict of keyword tensors
        Inputs of ``module.forward`` (a dict is passed as keywords, e.g. Hugging Face
        ``{"input_ids": ..., "decoder_input_ids": ...}``).
    training : bool
        Trace one training step (forward, backward, one optimizer node per parameter)
        when True; the forward pass only (no gradients, no optimizer state) when False.
    loss_fn : callable, optional
        ``loss_fn(output, *targets) -> scalar``. Default
        :func:`~optpart.formats.torch.default_loss`: the sum of the means of every floating
        tensor of the output (tensors, tuples, dicts, dataclasses, ``ModelOutput``).
        Use :func:`cross_entropy` for classification.
    targets : sequence of tensors
        Extra inputs of ``loss_fn`` (labels); they become nodes ``target.<i>``.
    cost_model : CostModel, optional
        Prices operators and tensors; stored in ``problem.meta["cost_model"]``.
    devices, memory : optional
        Devices to attach, as :meth:`Problem.with_devices` takes them; default: none.
    name : str, optional
        Problem name; default the module's class name (plus ``-training``).
    no_split : str or sequence of str
        Module class names (``"GPT2Block"``, or ``"GPT2Block,GPT2MLP"``) whose every
        instance is kept on one device: all its nodes (forward, backward, optimizer) form
        one colocation group, like accelerate's ``no_split_module_classes``.
    trace_mode : {'auto', 'fake', 'real'}
        See :func:`~optpart.formats.torch.trace_training_step`; the mode used is recorded
        in ``problem.meta["trace_mode"]``.
    check : bool, optional
        Prove the traced step: replay its graph on the example inputs and compare the loss
        and every gradient with eager autograd (:func:`~optpart.formats.torch.proof.prove_step`;
        ``problem.meta["trace_check"]``). ``None`` (default) proves real-tensor traces only
        (cheap beside such a trace); ``True`` proves every trace, fake ones on real copies of the
        parameters (meta ones get the fixed-seed init of the real fallback), and also proves on
        the problem's own edges that no two operators touching one storage, at least one
        writing, are unordered (:func:`~optpart.formats.torch.aliasing.check_problem_order`,
        ``problem.meta["aliasing_check"]``; the traced graph is always checked); ``False``
        proves nothing.
    micro_batches : int
        ``M > 1`` traces one micro-batch: the first of ``M`` equal parts of the batch (the
        first dimension of every input and target), and records it in ``meta`` so that a
        solve is a step of ``M`` micro-batches (:mod:`optpart.pipeline.micro`,
        docs/model.md section 7). A batch that does not divide is a :class:`FormatError`.

    Returns
    -------
    Problem
        Nodes in FX order (inputs first), links from the cost model, colocation groups
        for shared parameters and ``no_split`` modules, node metadata ``op``, ``flops``,
        ``phase``, ``module`` (the ``named_modules()`` path, ``''`` for the root) and
        ``module_class``.

    Raises
    ------
    FormatError
        When torch is missing, a ``no_split`` class is not in the model, or the module
        cannot be traced (one line naming the module and the tracer's message), or
        ``check`` finds two unordered accesses (one line naming them), or the trace proof
        finds a gradient off by more than its tolerance (one line naming the worst parameter).
    """
    from ..progress import progress as _progress

    from ..pipeline.micro import record_micro_batches, split_micro_batch

    example_inputs, targets, split = split_micro_batch(example_inputs, targets, micro_batches)
    cm = cost_model or CostModel()
    label = name or (type(module).__name__ + ("-training" if training else ""))
    with _progress(f"importing {type(module).__name__}") as bar:
        step = trace_training_step(module, example_inputs, training=training, loss_fn=loss_fn, targets=targets,
                                   trace_mode=trace_mode, progress=bar)
        bar.stage("pricing operators")
        problem = problem_from_traced(step, cost_model=cm, name=label, no_split=no_split)
        if check or (check is None and step.trace_mode == "real"):
            bar.stage("proving the traced step against eager autograd")
            problem = problem.with_meta(trace_check=prove_step(step, module, example_inputs, loss_fn=loss_fn,
                                                               targets=targets))
        if check:
            bar.stage("checking aliasing")
            problem = problem.with_meta(aliasing_check=check_problem_order(problem, step))
    if devices is not None:
        problem = problem.with_devices(devices, memory=memory)
    return record_micro_batches(problem, split)


def _no_split_groups(step, ids: list[str], modules: list[str], no_split) -> list[tuple[str, ...]]:
    """One colocation group per instance of a ``no_split`` class: every node under its path."""
    wanted = [c.strip() for c in (no_split.split(",") if isinstance(no_split, str) else no_split) if c.strip()]
    if not wanted:
        return []
    present = sorted(set(step.module_classes.values()))
    missing = [c for c in wanted if c not in present]
    if missing:
        raise FormatError(f"no_split class {missing[0]!r} is not in the model; its module classes are: "
                          f"{', '.join(present)}")
    roots = sorted(p for p, c in step.module_classes.items() if c in wanted and p)
    # Outermost instances only: a no_split module inside another is already covered.
    tops: list[str] = []
    for path in roots:
        if not any(path.startswith(t + ".") for t in tops):
            tops.append(path)
    groups: list[tuple[str, ...]] = []
    for top in tops:
        members = tuple(i for i, m in zip(ids, modules) if m == top or m.startswith(top + "."))
        if len(members) > 1:
            groups.append(members)
    return groups


def problem_from_traced(step, *, cost_model: CostModel | None = None, name: str | None = None,
                        no_split: str | Sequence[str] = ()) -> Problem:
    """The placement problem of a :class:`~optpart.formats.torch.TracedStep` (see :func:`from_torch`).

    Parameters
    ----------
    step : TracedStep
        A traced training step or forward pass (:func:`~optpart.formats.torch.trace_training_step`).
    cost_model : CostModel, optional
        Prices operators (FLOPs and bytes moved), edges and optimizer state (default
        :class:`CostModel`).
    name : str, optional
        Problem name (default: the graph module's class name).
    no_split : str or sequence of str
        Module class names (comma-separated string or list) whose every instance becomes
        one colocation group.

    Returns
    -------
    Problem
        Without devices; one node per operator, input, buffer and (training) optimizer
        update, the step's ordering edges included with 0 bytes.

    Raises
    ------
    FormatError
        An operator whose FLOPs formula fails on the traced shapes.
    """
    cm = cost_model or CostModel()
    tg = TracedGraph(step, cm.element_bytes)
    cols = _Columns()
    index = {nd: i for i, nd in enumerate(tg.kept)}
    fx_to_id = {fx: pid for pid, fx in step.node_names.items()}
    for nd in tg.kept:
        cols.add_kept(tg, nd, cm, fx_to_id)
    pvals = [p.meta.get("val") for p in tg.placeholders[:len(step.param_names)]]
    colocate, update_edges = _parameter_holders(tg, cols, index, pvals, cm)
    colocate.extend(writer_groups(step, cols.ids))
    edge_bytes = _edges(tg, index, update_edges)
    problem_meta = {
        "source": "torch", "training": bool(step.training), "cost_model": cm.to_dict(),
        "total_flops": int(sum(m["flops"] for m in cols.meta)),
        "parameter_bytes": float(sum(int(v.numel()) * cm.element_bytes(str(v.dtype).replace("torch.", ""))
                                     for v in pvals)),
        "parameters": int(sum(int(v.numel()) for v in pvals)),
        "trace_mode": step.trace_mode, "loss": step.loss,
        "module_classes": {path: step.module_classes[path] for path in sorted(step.module_classes)},
    }
    if step.notes:
        problem_meta["trace_notes"] = list(step.notes)
    if step.reads:  # the costs follow the path the example batch took (its routing)
        problem_meta["data_dependent"] = routing_summary(step.reads)
    groups = _no_split_groups(step, cols.ids, [m["module"] for m in cols.meta], no_split)
    if groups:
        problem_meta["no_split"] = sorted({c.strip() for c in (no_split.split(",") if isinstance(no_split, str)
                                                                else no_split) if c.strip()})
    return cols.problem(edge_bytes, tuple(colocate) + tuple(groups), cm, None,
                        name or type(step.graph_module).__name__, problem_meta)


class _Columns(NodeColumns):
    """The problem's node columns as they are built (ids, run times, memory split, metadata)."""

    def add_kept(self, tg: TracedGraph, nd, cm: CostModel, fx_to_id: dict[str, str]) -> None:
        """An input or buffer (it holds its tensor), or an operator priced by the cost model (it
        holds its saved activations; its output is 0 bytes when it aliases an input)."""
        step = tg.step
        path, mclass = step.node_module.get(nd.name, ("", step.module_classes.get("", "")))
        if nd.op == "placeholder":
            b = tg.value_bytes(nd)
            self.add(fx_to_id[nd.name], 0.0, b, b, 0.0,
                     {"op": tg.kind[nd], "flops": 0, "phase": "forward", "module": path, "module_class": mclass})
            return
        op = tg.facts(nd)
        out_b = tg.value_bytes(nd)
        in_b = 0.0
        for a in ([] if op.shape_only else nd.all_input_nodes):
            in_b += tg.item_bytes(*tg.source(a))
        flops = 0 if op.view else operator_flops(nd, op.name)
        moved = {} if op.view else {"bytes": int(in_b + out_b)}  # the roofline's inputs, kept for re-pricing
        self.add(nd.name, cm.op_time(flops, in_b + out_b, kernel=not op.view), tg.saved_on.get(nd, 0.0), 0.0,
                 0.0 if op.aliases else out_b,
                 {"op": op.name, "flops": flops, **moved, "phase": tg.phase[nd], "module": path,
                  "module_class": mclass})


def _parameter_holders(tg: TracedGraph, cols: _Columns, index: dict, pvals: list, cm: CostModel
                       ) -> tuple[list[tuple[str, ...]], list[tuple[int, int, float]]]:
    """Who holds each parameter: its ``update.`` node (training; fed by the parameter's
    gradient) or its first reader (inference, or a frozen parameter). Returns the colocation
    groups of each parameter's readers and the gradient -> update edges."""
    step = tg.step
    colocate: list[tuple[str, ...]] = []
    grads = [tg.source(g)[0] if g is not None else None for g in tg.outs[1:]] if step.training else []
    update_edges: list[tuple[int, int, float]] = []
    for p, pname in enumerate(step.param_names):
        t = pvals[p]
        dtype = str(t.dtype).replace("torch.", "")
        numel = int(t.numel())
        group = [cols.ids[index[r]] for r in tg.readers[p]]
        if step.training and pname not in step.frozen:
            uid = f"update.{pname}"
            state = cm.training_state_bytes(numel, dtype)
            owner = pname.rpartition(".")[0]
            moved = cm.update_bytes_moved(numel, dtype)
            cols.add(uid, cm.op_time(0, moved), state, state, 0.0,
                     {"op": "optimizer.update", "flops": 0, "bytes": int(moved), "phase": "optimizer", "param": pname,
                      "numel": numel, "module": owner, "module_class": step.module_classes.get(owner, "")})
            g = grads[p] if p < len(grads) else None
            if g is not None and g in index:
                update_edges.append((index[g], len(cols.ids) - 1, tg.nbytes(t)))
                root = tg.root_of(tg.outs[1 + p])[0]  # a gradient that is a view keeps its storage live
                if root is not g and root in index and root.op == "call_function":
                    update_edges.append((index[root], len(cols.ids) - 1, 0.0))
            group = [uid] + group
        elif tg.readers[p]:  # inference, or a frozen parameter: its weights only, on its first reader
            holder = index[tg.readers[p][0]]
            b = numel * cm.element_bytes(dtype)
            cols.mem[holder] += b
            cols.pbytes[holder] += b
            cols.meta[holder].setdefault("params", []).append(pname)  # named, so a device map can place it
        if len(group) > 1:
            colocate.append(tuple(group))
    return colocate, update_edges


def _edges(tg: TracedGraph, index: dict, update_edges: list[tuple[int, int, float]]
           ) -> dict[tuple[int, int], float]:
    """Bytes per ``(producer, consumer)``: each value an operator reads once (0 bytes for a
    shape-only read), a 0-byte edge from the maker of a storage to every reader of a view of it
    (the storage lives until its last reader through any view), the gradient -> update edges,
    and the step's ordering edges (a write and the accesses around it) with 0 bytes."""
    edge_bytes: dict[tuple[int, int], float] = {}
    for nd in tg.ops:
        c = index[nd]
        shape_only = tg.facts(nd).shape_only
        seen_vals = set()
        for a in nd.all_input_nodes:
            b, idx = tg.source(a)
            if b not in index or (b, idx) in seen_vals:
                continue
            seen_vals.add((b, idx))
            size = 0.0 if shape_only else tg.item_bytes(b, idx)  # shape-only: a dependency, no data
            key = (index[b], c)
            edge_bytes[key] = edge_bytes.get(key, 0.0) + size
            if not shape_only and b.op == "call_function" and tg.facts(b).aliases:
                # a view has no storage of its own (0 output bytes): reading it keeps alive the storage
                # it aliases, so the operator that made that storage gets a 0-byte edge to this reader
                root = tg.root_of(a)[0]
                if root is not b and root in index and root.op == "call_function" and index[root] != c:
                    edge_bytes.setdefault((index[root], c), 0.0)
    for s, d, b in update_edges:
        edge_bytes[(s, d)] = edge_bytes.get((s, d), 0.0) + b
    by_name = {nd.name: nd for nd in tg.ops}
    for a, b in tg.step.order:  # ordering edges: no data crosses
        if a in by_name and b in by_name:
            edge_bytes.setdefault((index[by_name[a]], index[by_name[b]]), 0.0)
    return edge_bytes
