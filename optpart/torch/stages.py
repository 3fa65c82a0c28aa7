"""Pipeline stage modules cut from our own traced graph (``torch.distributed.pipelining`` runs them).

:func:`stage_modules` traces the model at the micro-batch size (ATen graphs bake shapes in),
keeps the forward operators of the step (the operators autograd did not run while
differentiating the loss, and nothing computed from the loss or from the backward), assigns
each to the stage whose node list names it (``getitem`` projections follow their source) and
builds one ``torch.fx.GraphModule`` per stage:

* its parameters are ``nn.Parameter`` copies registered under the model's own
  ``named_parameters()`` names (``stage.get_parameter("transformer.h.0.ln_1.weight")``);
  buffers and traced constants are buffers; a parameter read by several stages (GPT-2's tied
  ``wte`` / ``lm_head``) is replicated on each of them, and :attr:`StageModules.tied` names it
  (the runner sums its gradients across those stages);
* torch pipelining is a chain, so stage ``s`` receives, in graph order, every value that
  stages ``s`` and later need and that earlier stages made (or the step's inputs), and passes
  on whatever later stages need: a value used two stages later is relayed;
* stage 0 takes the step's inputs and targets positionally (``TracedStep.input_names`` order,
  then the targets); the last stage returns the scalar loss the problem was built from, so a
  schedule's ``loss_fn`` is the identity.

The backward is autograd's own over the ATen forward operators (each has an autograd
kernel), so the schedule runs ``B``, or ``I`` and ``W``, unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..errors import OptpartError

__all__ = ["StageModules", "stage_modules", "forward_nodes", "split_batch", "update_buffer", "restore_layout",
           "sent_form", "dense_grad"]

#: The view operators a stage runs as ``reshape`` (set on first use; torch is imported lazily).
_VIEWS: tuple = ()


@dataclass
class StageModules:
    """The stage modules of one pipelined plan and what flows between them.

    Attributes
    ----------
    modules : list of torch.fx.GraphModule
        Stage ``s``'s module; ``modules[s](*received)`` returns the tuple of values sent on
        (the scalar loss for the last stage).
    received : list of list of str
        FX names of the values each stage takes, in argument order (stage 0: the step's inputs).
    params : list of list of str
        ``named_parameters()`` names of each stage's trainable parameters.
    tied : dict of str to list of int
        Parameters held by several stages, with those stages: their gradients must be summed.
    step : TracedStep
        The trace at the micro-batch size the modules were cut from.
    grad_of : dict of str to bool
        Whether each value sent between stages carries a gradient (autograd's answer on meta
        tensors).
    """

    modules: list
    received: list[list[str]]
    params: list[list[str]]
    tied: dict[str, list[int]] = field(default_factory=dict)
    step: Any = None
    grad_of: dict[str, bool] = field(default_factory=dict)

    @property
    def n_stages(self) -> int:
        """Number of stages."""
        return len(self.modules)

    def examples(self, stage: int, device: Any = "cpu") -> tuple[tuple, tuple]:
        """Empty tensors shaped like what stage ``stage`` receives and sends, for ``PipelineStage``'s
        ``input_args`` / ``output_args``: torch then infers nothing at run time (its inference runs
        the stage on uninitialized tensors, which an index such as a token id must not be).

        Parameters
        ----------
        stage : int
            The stage.
        device : torch device
            Where the tensors are made.

        Returns
        -------
        tuple
            ``(inputs, outputs)``, tuples of tensors with the traced shapes, dtypes and
            ``requires_grad`` (the last stage's output is the scalar loss).
        """
        import torch

        by_name = {nd.name: nd for nd in self.step.graph_module.graph.nodes}

        def empty(name: str):
            val = by_name[name].meta["val"]
            t = torch.empty(tuple(val.shape), dtype=val.dtype, device=device)
            return t.requires_grad_(bool(self.grad_of.get(name)))

        loss = next(nd for nd in by_name.values() if nd.op == "output").args[0][0]
        outs = self.received[stage + 1] if stage + 1 < self.n_stages else [loss.name]
        return tuple(empty(n) for n in self.received[stage]), tuple(empty(n) for n in outs)


def _is_getitem(nd) -> bool:
    import operator

    return nd.op == "call_function" and nd.target is operator.getitem


def forward_nodes(step) -> list:
    """The forward operators of a traced training step, in graph order.

    An operator is forward when autograd did not stamp it as backward and it is computed
    neither from the loss nor from a backward operator (the seed ``ones_like(loss)`` of the
    gradient is neither stamped nor forward).

    Parameters
    ----------
    step : TracedStep
        A training step (:func:`optpart.formats.torch.trace_training_step`).

    Returns
    -------
    list of torch.fx.Node
        ``call_function`` nodes, ``getitem`` projections included.
    """
    nodes = list(step.graph_module.graph.nodes)
    loss = next(nd for nd in nodes if nd.op == "output").args[0][0]
    tainted: set = set()
    for nd in nodes:
        if nd.op != "call_function":
            continue
        if nd.name in step.backward or any(a in tainted or a is loss for a in nd.all_input_nodes):
            tainted.add(nd)
    return [nd for nd in nodes if nd.op == "call_function" and nd not in tainted]


def split_batch(inputs: Any, targets: Sequence[Any], micro_batches: int) -> tuple[Any, list]:
    """The first of ``micro_batches`` equal parts of the batch, as the trace at the micro-batch size takes it.

    Parameters
    ----------
    inputs : tensor, sequence or dict
        The model's example inputs (the whole batch).
    targets : sequence of tensors
        The loss's extra inputs.
    micro_batches : int
        ``M``; the batch (first dimension) must divide into ``M`` equal parts.

    Returns
    -------
    tuple
        ``(inputs, targets)`` of one micro-batch.

    Raises
    ------
    OptpartError
        When the batch does not divide (one line naming the input and the sizes).
    """
    from ..errors import FormatError
    from ..pipeline.micro import split_micro_batch

    try:
        mb_inputs, mb_targets, _ = split_micro_batch(inputs, tuple(targets), micro_batches)
    except FormatError as exc:
        raise OptpartError(str(exc)) from None
    return mb_inputs, list(mb_targets)


def stage_modules(module, mb_inputs: Any, stage_of: Mapping[str, int], n_stages: int, *, loss_fn=None,
                  mb_targets: Sequence[Any] = (), step=None) -> StageModules:
    """Cut the forward of ``module``'s training step into pipeline stage modules.

    Parameters
    ----------
    module : torch.nn.Module
        The model with its real weights (they are copied into the stages).
    mb_inputs : tensor, sequence or dict
        Inputs of **one micro-batch** (shapes are baked into the ATen graph).
    stage_of : {problem node id: stage}
        The plan's stage of every node; forward operator ids are FX node names.
    n_stages : int
        Number of stages.
    loss_fn, mb_targets :
        As given to the importer (default: its default loss, no targets), one micro-batch.
    step : TracedStep, optional
        A trace of ``module`` on ``mb_inputs``, to skip tracing again.

    Returns
    -------
    StageModules
        One module per stage.

    Raises
    ------
    OptpartError
        A forward operator the plan does not name, a plan that names operators the trace does
        not have (a plan for another model or other shapes), a value flowing to an earlier
        stage, or a loss outside the last stage: one line each.
    """
    import torch
    import torch.fx as fx

    from ..formats.torch import trace_training_step

    global _VIEWS
    _VIEWS = (torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default)
    if step is None:
        step = trace_training_step(module, mb_inputs, loss_fn=loss_fn, targets=mb_targets)
    gm = step.graph_module
    nodes = list(gm.graph.nodes)
    index = {nd: i for i, nd in enumerate(nodes)}
    placeholders = [nd for nd in nodes if nd.op == "placeholder"]
    n_p, n_b = len(step.param_names), len(step.buffer_names)
    state_name = {nd: (step.param_names + step.buffer_names)[i] for i, nd in enumerate(placeholders[:n_p + n_b])}
    data = placeholders[n_p + n_b:]
    loss = next(nd for nd in nodes if nd.op == "output").args[0][0]
    fwd = forward_nodes(step)
    known = set(step.node_names) | {f"update.{p}" for p in step.param_names}
    stranger = sorted(n for n in stage_of if n not in known)
    if stranger:
        raise OptpartError(f"the plan names node '{stranger[0]}' (and {len(stranger) - 1} more), which the trace of "
                           f"{type(module).__name__} at the micro-batch size does not have: a plan for another model "
                           "or other input shapes")
    stage: dict = {}
    for nd in fwd:
        if _is_getitem(nd):
            stage[nd] = stage[nd.args[0]]
            continue
        if nd.name not in stage_of:
            raise OptpartError(f"the plan gives forward operator '{nd.name}' of {type(module).__name__} no stage "
                               "(was the problem imported from this model and these inputs?)")
        s = int(stage_of[nd.name])
        if not 0 <= s < n_stages:
            raise OptpartError(f"the plan puts node '{nd.name}' in stage {s}; stages are 0..{n_stages - 1}")
        stage[nd] = s
    writes = set()
    for nd in fwd:  # a buffer's update (batch norm's running statistics) runs where the buffer is read
        buf = nd.args[0] if nd.target is torch.ops.aten.copy_.default and nd.args[0] in state_name else None
        readers = sorted({stage[u] for u in buf.users if u is not nd and u in stage}) if buf is not None else []
        if len(readers) > 1:
            raise OptpartError(f"buffer '{state_name[buf]}' is read in stages {readers} and updated by '{nd.name}': "
                               "each stage would keep its own copy of it")
        if readers:
            stage[nd] = readers[0]
        if buf is not None:
            writes.add(nd)
    if stage.get(loss) != n_stages - 1:
        raise OptpartError(f"the loss '{loss.name}' is in stage {stage.get(loss)}, not in the last stage "
                           f"{n_stages - 1}: torch pipelining takes the loss from the last stage")
    last_use: dict = {}  # value -> the latest stage that reads it
    for nd in fwd:
        for a in nd.all_input_nodes:
            if a.op == "call_function" and stage[a] > stage[nd]:
                raise OptpartError(f"not a pipeline: '{a.name}' in stage {stage[a]} feeds '{nd.name}' in the earlier "
                                   f"stage {stage[nd]}")
            last_use[a] = max(last_use.get(a, -1), stage[nd])
    made = {nd: (stage[nd] if nd.op == "call_function" else -1) for nd in list(data) + fwd}
    received: list[list] = [list(data)]
    for s in range(1, n_stages):
        received.append(sorted((v for v, last in last_use.items() if v in made and made[v] < s <= last),
                               key=index.get))
    params, buffers = dict(module.named_parameters()), dict(module.named_buffers())
    modules, stage_params = [], []
    uses: dict[str, list[int]] = {}
    for s in range(n_stages):
        graph, root, env = fx.Graph(), torch.nn.Module(), {}
        for v in received[s]:
            env[v] = graph.placeholder(f"in_{v.name}")
            if s > 0:  # its gradient is sent back: dense, as gloo sends
                env[v] = graph.call_function(dense_grad, (env[v],))
            val = v.meta.get("val")
            if s > 0 and isinstance(val, torch.Tensor) and not val.is_contiguous() and _dense(val):
                # sent dense: given back the traced layout, so every operator sees what the trace saw
                env[v] = graph.call_function(restore_layout, (env[v], tuple(val.stride())))
        own: list[str] = []

        def local(a, s=s, graph=graph, root=root, env=env, own=own):
            if a in env:
                return env[a]
            if a in state_name:
                name = state_name[a]
                _register(torch, root, name, params.get(name), buffers.get(name), step.frozen)
                if name in params and name not in step.frozen:
                    own.append(name)
            elif a.op == "get_attr":
                name = f"_const_{a.target}"
                value = getattr(gm, a.target)
                if isinstance(value, torch.Tensor):
                    root.register_buffer(name, value.detach().clone(), persistent=False)
                else:
                    setattr(root, name, value)
            else:  # a value of an earlier stage that was not received: a bug of ours
                raise OptpartError(f"stage {s}: value '{a.name}' is neither made nor received here")
            env[a] = graph.get_attr(state_name.get(a, f"_const_{a.target}"))
            return env[a]

        for nd in fwd:
            if stage[nd] == s:
                env[nd] = graph.node_copy(nd, local)
                if nd in writes:  # not an autograd-visible in-place write: the operator read the buffer
                    env[nd].target = update_buffer
                elif nd.target in _VIEWS:  # a received value's layout may differ (an expanded one arrives
                    env[nd].target = torch.ops.aten.reshape.default  # dense): the same values, no aliasing needed
        if s == n_stages - 1:
            graph.output(env[loss])
        else:
            # a value this stage also reads (an operator may have saved it) or relays gets its own copy
            graph.output(tuple(graph.call_function(sent_form, (local(v), v in received[s] or any(
                stage.get(u) == s for u in v.users))) for v in received[s + 1]))
        modules.append(fx.GraphModule(root, graph, class_name=f"Stage{s}"))
        stage_params.append(sorted(set(own), key=list(params).index))
        for name in stage_params[-1]:
            uses.setdefault(name, []).append(s)
    names = [[v.name for v in r] for r in received]
    return StageModules(modules=modules, received=names, params=stage_params,
                        tied={n: ss for n, ss in sorted(uses.items()) if len(ss) > 1}, step=step,
                        grad_of=_carries_grad(torch, modules, names, data) | {loss.name: True})


def _carries_grad(torch, modules: list, received: list[list[str]], data: list) -> dict[str, bool]:
    """Whether each value sent between stages carries a gradient: the stages run once on fake
    tensors (``torch.func.functional_call`` swaps in fake parameters and buffers: no storage, no
    effect on the modules), so autograd itself says which outputs require grad."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    out = {nd.name: False for nd in data}
    with FakeTensorMode():
        vals = [torch.empty(tuple(nd.meta["val"].shape), dtype=nd.meta["val"].dtype) for nd in data]
        for s, mod in enumerate(modules[:-1]):
            state = {n: torch.empty(t.shape, dtype=t.dtype).requires_grad_(t.requires_grad)
                     for n, t in [*mod.named_parameters(), *mod.named_buffers()]}
            with torch.enable_grad():
                vals = list(torch.func.functional_call(mod, state, tuple(vals)))
            for name, v in zip(received[s + 1], vals):
                out[name] = bool(v.requires_grad)
            vals = [v.detach().requires_grad_(v.requires_grad) for v in vals]
    return out


def _dense(val) -> bool:
    from torch._prims_common import is_non_overlapping_and_dense_or_false

    return bool(is_non_overlapping_and_dense_or_false(val))


def restore_layout(x, stride: tuple):
    """``x`` (received dense) with the strides the trace had (a transposed activation), same values.

    Parameters
    ----------
    x : torch.Tensor
        The received tensor.
    stride : tuple of int
        The traced strides (non-overlapping and dense).

    Returns
    -------
    torch.Tensor
        A copy of ``x`` laid out with ``stride`` (differentiable).
    """
    import torch

    return torch.empty_strided(x.shape, stride, dtype=x.dtype, device=x.device).copy_(x)


def sent_form(x, copy: bool = False):
    """A stage output as torch's runtime takes it: dense (gloo sends dense tensors), owning its
    storage and read by nothing else. The runtime's input backward detaches every stage output in
    place: a view refuses that, and a tensor an operator of the stage saved for its weight backward
    (or a received tensor the stage relays) would lose its autograd history.

    Parameters
    ----------
    x : torch.Tensor
        A value the next stage reads.
    copy : bool
        The stage also reads ``x`` or received it: always a copy.

    Returns
    -------
    torch.Tensor
        ``x`` itself when it is dense, not a view and ``copy`` is False, else a dense copy
        (differentiable).
    """
    import torch

    if copy or x._is_view() or not x.is_contiguous():
        return x.clone(memory_format=torch.contiguous_format)
    return x


_DenseGrad = None


def dense_grad(x):
    """``x`` unchanged, whose gradient is made dense: the gradient a stage sends back for a value it
    received (a transposed read gives a strided one; gloo sends dense tensors).

    Parameters
    ----------
    x : torch.Tensor
        A received value.

    Returns
    -------
    torch.Tensor
        A view of ``x`` (same values); its backward passes a contiguous gradient.
    """
    global _DenseGrad
    if _DenseGrad is None:
        import torch

        class _DenseGrad(torch.autograd.Function):  # noqa: N801 (torch's naming)
            @staticmethod
            def forward(ctx, t):
                return t.view_as(t)

            @staticmethod
            def backward(ctx, g):
                return g.contiguous()

    return _DenseGrad.apply(x)


def update_buffer(buffer, value):
    """Write ``value`` into a stage's buffer (batch norm's running statistics) as eager batch norm
    does: in place, unseen by autograd (the operator that read the buffer saved it for backward).

    Parameters
    ----------
    buffer, value : torch.Tensor
        The buffer and its new value.

    Returns
    -------
    torch.Tensor
        The buffer.
    """
    buffer.data.copy_(value.detach())
    return buffer


def _register(torch, root, name: str, param, buffer, frozen) -> None:
    """Register a copy of the model's parameter or buffer ``name`` in ``root`` under its dotted path."""
    *path, leaf = name.split(".")
    mod = root
    for part in path:
        if not hasattr(mod, part):
            mod.add_module(part, torch.nn.Module())
        mod = getattr(mod, part)
    if hasattr(mod, leaf):
        return
    if param is not None and name not in frozen:
        mod.register_parameter(leaf, torch.nn.Parameter(param.detach().clone()))
    else:
        mod.register_buffer(leaf, (param if param is not None else buffer).detach().clone())
