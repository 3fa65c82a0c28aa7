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
produces; 0 for views). A parameter read by several operators (a tied embedding,
an unrolled RNN cell) is charged once, on its update node, and every operator that
reads it, directly or through a view, is colocated with that node.
"""

from __future__ import annotations

import math
import operator
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import FormatError
from ..problem import Constraints, Device, Links, Problem
from .costmodel import CostModel
from .torch import TracedStep, trace_training_step
from .torch.aliasing import alias_source, check_problem_order, writer_groups
from .torch.flops import operator_flops
from .torch.inputs import cross_entropy

__all__ = ["from_torch", "problem_from_traced", "trace_training_step", "TracedStep", "cross_entropy", "VIEW_OPS",
           "SHAPE_ONLY_OPS"]

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


def _tensors(val) -> list:
    """The tensors in a traced value (a tensor, or a tuple/list of them)."""
    import torch

    if isinstance(val, torch.Tensor):
        return [val]
    if isinstance(val, (tuple, list)):
        return [x for x in val if isinstance(x, torch.Tensor)]
    return []


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
    check: bool = False,
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
    check : bool
        Also prove on the problem's own edges that no two operators touching one storage,
        at least one writing, are unordered
        (:func:`~optpart.formats.torch.aliasing.check_problem_order`; the traced graph is
        always checked). What was proved goes to ``problem.meta["aliasing_check"]``.
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
        ``check`` finds two unordered accesses (one line naming them).
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
    graph = step.graph_module.graph
    pnames, bnames, training = list(step.param_names), list(step.buffer_names), step.training
    fx_to_id = {fx: pid for pid, fx in step.node_names.items()}
    nodes = list(graph.nodes)
    placeholders = [nd for nd in nodes if nd.op == "placeholder"]
    param_of = {nd: i for i, nd in enumerate(placeholders[:len(pnames)])}
    kind: dict[Any, str] = {}
    for nd in placeholders[:len(pnames)]:
        kind[nd] = "param"
    for nd in placeholders[len(pnames):len(pnames) + len(bnames)]:
        kind[nd] = "buffer"
    for nd in placeholders[len(pnames) + len(bnames):]:
        kind[nd] = "input"
    out_node = next(nd for nd in nodes if nd.op == "output")
    outs = out_node.args[0]
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]

    def nbytes(t) -> float:
        return float(t.numel()) * cm.element_bytes(str(t.dtype).replace("torch.", ""))

    # Values: a node, or (node, index) behind a getitem. `source` resolves getitems.
    def source(nd):
        if nd.op == "call_function" and nd.target is operator.getitem:
            base, idx = nd.args[0], nd.args[1]
            b, _ = source(base)
            return b, idx
        return nd, None

    def value_bytes(nd) -> float:
        val = nd.meta.get("val")
        return float(sum(nbytes(t) for t in _tensors(val)))

    def opname(nd) -> str:
        t = nd.target
        packet = getattr(t, "overloadpacket", None)
        return str(t) if packet is None else f"aten.{packet.__name__}.{t._overloadname}"

    def is_view(nd) -> bool:
        """Metadata-only: no kernel, no new storage."""
        packet = getattr(nd.target, "overloadpacket", None)
        return packet is not None and packet.__name__ in VIEW_OPS

    def aliases(nd) -> bool:
        """The output is (a view of) an input: a view, or the tensor an in-place op wrote."""
        return is_view(nd) or alias_source(nd) is not None

    def shape_only(nd) -> bool:
        packet = getattr(nd.target, "overloadpacket", None)
        return packet is not None and packet.__name__ in SHAPE_ONLY_OPS

    # Kept nodes: placeholders for inputs and buffers, every call_function except getitem.
    ops = [nd for nd in nodes if nd.op == "call_function" and nd.target is not operator.getitem]
    kept = [nd for nd in placeholders if kind[nd] != "param"] + ops
    # Phases: backward = strict descendants of the loss (training only).
    phase: dict[Any, str] = {nd: "forward" for nd in kept}
    if training:
        loss_node, _ = source(outs[0])
        stack, seen = list(loss_node.users), set()
        while stack:
            u = stack.pop()
            if u in seen or u.op == "output":
                continue
            seen.add(u)
            stack.extend(u.users)
        for nd in ops:
            if nd in seen or nd.name in step.backward:
                phase[nd] = "backward"
    # Storage roots: a view aliases the root of its first tensor input.
    root: dict[Any, tuple] = {}

    def root_of(nd):
        base, idx = source(nd)
        key = (base, idx)
        if key in root:
            return root[key]
        if base.op == "call_function" and aliases(base):
            src = alias_source(base)
            arg = base.args[src] if src is not None and src < len(base.args) else None
            first = arg if hasattr(arg, "op") else next((a for a in base.all_input_nodes), None)
            r = root_of(first) if first is not None else key
        else:
            r = key
        root[key] = r
        return r

    # Parameter alias sets: views of a parameter (recursively) belong to it.
    owner_param: dict[Any, int] = dict(param_of)
    for nd in ops:
        if aliases(nd):
            ins = [source(a)[0] for a in nd.all_input_nodes]
            if ins and ins[0] in owner_param:
                owner_param[nd] = owner_param[ins[0]]
    for nd in [n for n in nodes if n.op == "call_function" and n.target is operator.getitem]:
        b, _ = source(nd)
        if b in owner_param:
            owner_param[nd] = owner_param[b]
    # Colocation: every kept operator that reads a parameter (or a view of it).
    readers: list[list[Any]] = [[] for _ in pnames]
    for nd in ops:
        seen_p = set()
        if nd in owner_param and nd not in param_of:
            seen_p.add(owner_param[nd])
        for a in nd.all_input_nodes:
            if a in owner_param:
                seen_p.add(owner_param[a])
        for p in sorted(seen_p):
            readers[p].append(nd)
    # Saved activations: forward values read by a backward node, charged to their storage root once.
    saved: dict[tuple, float] = {}
    if training:
        for nd in ops:
            if phase[nd] != "backward" or shape_only(nd):
                continue
            for a in nd.all_input_nodes:
                b, _ = source(a)
                if b.op == "placeholder" or phase.get(b) != "forward":
                    continue
                r = root_of(a)
                if r[0].op == "placeholder" or r in saved:
                    continue
                rn, ri = r
                val = rn.meta.get("val")
                ts = _tensors(val)
                saved[r] = nbytes(ts[ri]) if ri is not None and ri < len(ts) else float(sum(nbytes(t) for t in ts))
    saved_on: dict[Any, float] = {}
    for (rn, _), b in saved.items():
        saved_on[rn] = saved_on.get(rn, 0.0) + b

    # ------------------------------------------------------------------ nodes
    index = {nd: i for i, nd in enumerate(kept)}
    ids: list[str] = []
    time, mem, pbytes, obytes, meta = [], [], [], [], []
    for nd in kept:
        path, mclass = step.node_module.get(nd.name, ("", step.module_classes.get("", "")))
        if nd.op == "placeholder":
            nid = fx_to_id[nd.name]
            b = value_bytes(nd)
            ids.append(nid)
            time.append(0.0)
            mem.append(b)
            pbytes.append(b)
            obytes.append(0.0)
            meta.append({"op": kind[nd], "flops": 0, "phase": "forward", "module": path, "module_class": mclass})
            continue
        view = is_view(nd)
        out_b = value_bytes(nd)
        in_b = 0.0
        for a in ([] if shape_only(nd) else nd.all_input_nodes):
            b, idx = source(a)
            if idx is None:
                in_b += value_bytes(b)
            else:
                in_b += nbytes(_tensors(b.meta.get("val"))[idx])
        flops = 0 if view else operator_flops(nd, opname(nd))
        ids.append(nd.name)
        time.append(cm.op_time(flops, in_b + out_b, kernel=not view))
        s = saved_on.get(nd, 0.0)
        mem.append(s)
        pbytes.append(0.0)
        obytes.append(0.0 if aliases(nd) else out_b)
        meta.append({"op": opname(nd), "flops": flops, "phase": phase[nd], "module": path, "module_class": mclass})
    # Parameter holders: the update node (training) or the first reader (inference).
    colocate: list[tuple[str, ...]] = []
    pvals = [p.meta.get("val") for p in placeholders[:len(pnames)]]
    grads = [source(g)[0] if g is not None else None for g in outs[1:]] if training else []
    update_edges: list[tuple[int, int, float]] = []
    for p, pname in enumerate(pnames):
        t = pvals[p]
        dtype = str(t.dtype).replace("torch.", "")
        numel = int(t.numel())
        group = [ids[index[r]] for r in readers[p]]
        if training and pname not in step.frozen:
            uid = f"update.{pname}"
            ids.append(uid)
            state = cm.training_state_bytes(numel, dtype)
            time.append(cm.op_time(0, cm.update_bytes_moved(numel, dtype)))
            mem.append(state)
            pbytes.append(state)
            obytes.append(0.0)
            owner = pname.rpartition(".")[0]
            meta.append({"op": "optimizer.update", "flops": 0, "phase": "optimizer", "param": pname,
                         "numel": numel, "module": owner, "module_class": step.module_classes.get(owner, "")})
            g = grads[p] if p < len(grads) else None
            if g is not None and g in index:
                update_edges.append((index[g], len(ids) - 1, nbytes(t)))
            group = [uid] + group
        elif readers[p]:  # inference, or a frozen parameter: its weights only, on its first reader
            holder = index[readers[p][0]]
            b = numel * cm.element_bytes(dtype)
            mem[holder] += b
            pbytes[holder] += b
        if len(group) > 1:
            colocate.append(tuple(group))
    colocate.extend(writer_groups(step, ids))
    # ------------------------------------------------------------------ edges
    edge_bytes: dict[tuple[int, int], float] = {}
    for nd in ops:
        c = index[nd]
        seen_vals = set()
        for a in nd.all_input_nodes:
            b, idx = source(a)
            if b not in index or (b, idx) in seen_vals:
                continue
            seen_vals.add((b, idx))
            size = value_bytes(b) if idx is None else nbytes(_tensors(b.meta.get("val"))[idx])
            if shape_only(nd):
                size = 0.0  # a dependency, but no data crosses it
            key = (index[b], c)
            edge_bytes[key] = edge_bytes.get(key, 0.0) + size
    for s, d, b in update_edges:
        edge_bytes[(s, d)] = edge_bytes.get((s, d), 0.0) + b
    by_name = {nd.name: nd for nd in ops}
    for a, b in step.order:  # ordering edges (a write and the accesses around it): no data crosses
        if a in by_name and b in by_name:
            edge_bytes.setdefault((index[by_name[a]], index[by_name[b]]), 0.0)
    keys = sorted(edge_bytes)
    src = np.array([k[0] for k in keys], dtype=np.int64)
    dst = np.array([k[1] for k in keys], dtype=np.int64)
    eb = np.array([edge_bytes[k] for k in keys], dtype=np.float64)
    total_flops = int(sum(m["flops"] for m in meta))
    param_total = float(sum(int(v.numel()) * cm.element_bytes(str(v.dtype).replace("torch.", "")) for v in pvals))
    problem_meta = {
        "source": "torch", "training": bool(training), "cost_model": cm.to_dict(),
        "total_flops": total_flops, "parameter_bytes": param_total,
        "parameters": int(sum(int(v.numel()) for v in pvals)),
        "trace_mode": step.trace_mode, "loss": step.loss,
        "module_classes": {path: step.module_classes[path] for path in sorted(step.module_classes)},
    }
    if step.notes:
        problem_meta["trace_notes"] = list(step.notes)
    groups = _no_split_groups(step, ids, [m["module"] for m in meta], no_split)
    if groups:
        problem_meta["no_split"] = sorted({c.strip() for c in (no_split.split(",") if isinstance(no_split, str)
                                                                else no_split) if c.strip()})
    return Problem.from_arrays(
        ids, np.array(time), np.array(mem), src, dst, eb,
        devices=None, links=Links(cm.link_latency, cm.link_bandwidth),
        constraints=Constraints(colocate=tuple(colocate) + tuple(groups)),
        param_bytes=np.array(pbytes), output_bytes=np.array(obytes), temp_bytes=None,
        node_meta=meta, name=name or type(step.graph_module).__name__, meta=problem_meta,
    )
