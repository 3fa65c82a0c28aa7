"""A placed, runnable training step: :func:`apply` turns a placement into a ``torch.fx.GraphModule``.

The training step is the flat ATen graph the importer traces
(:func:`optpart.formats.torch.trace_training_step`: forward, loss and backward, the
same loss the problem was built from). :func:`apply` rebuilds it so that

* every operator runs on the device its problem node is placed on (factory operators
  such as ``arange`` get that device too);
* a tensor used on another device is copied there once (``Tensor.to``), just before
  its first use on that device;
* operators come in the order of the result's schedule (start time, ties by graph
  order) while every data dependency is kept, so on GPUs (asynchronous launches) each
  device's queue follows the plan;
* parameters and buffers live on the device of their optimizer node ``update.<name>``
  (the importer colocates every reader of a parameter with it), inputs on the device
  of their input node;
* random operators (dropout) run in their traced order, so that with the same seed they
  draw what eager autograd draws;
* a step traced with real tensors on one path of its data (mixture-of-experts routing,
  ``.item()``, a tensor handed to NumPy: its :attr:`~optpart.formats.torch.TracedStep.reads`)
  checks every read as soon as it is made and raises :class:`~optpart.errors.OptpartError`,
  in one line naming the operator and its module, when a call's data takes another path;
  no operator traced after a read runs before its check.

Calling the module with the example inputs (positionally, or as keywords when they
were given as a dict; nested inputs as their tensors, flattened depth first; then the
targets, if ``loss_fn`` takes some) returns ``(loss, grads)``, ``grads`` a dict from ``named_parameters()`` name to
its gradient (``None`` for a parameter the loss does not use), and with ``outputs=True``
also the module's forward outputs. It does not run an optimizer step. Parameters are read, not copied, when they already sit on their
device, so an optimizer that updates the module in place is seen by the next call.
The step runs with grad mode on whatever the caller's mode (``torch.no_grad()`` included), as
it was traced (:func:`~optpart.formats.torch.step.replaying`); nothing in it requires grad.

References: PyTorch ``torch.fx`` (Reed et al., MLSys 2022) for graph rewriting; the
joint forward/backward graph is AOTAutograd's (``functorch``).
"""

from __future__ import annotations

import functools
import heapq
import keyword
import operator
import re
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..errors import OptpartError
from ..formats.torch.aliasing import storage_accesses
from ..formats.torch.datadep import check_read
from ..formats.torch.rng import draws_random
from ..formats.torch.step import replaying
from ..result import Result
from .transfers import check_devices

__all__ = ["apply", "placement_and_order", "MicroBatchedStep"]


def _torch():
    try:
        import torch
    except ImportError:  # pragma: no cover - exercised only without torch
        raise OptpartError("optpart.torch needs torch: pip install 'optpart[torch]'") from None
    return torch


@functools.cache
def _placed_module_class():
    """A ``torch.fx.GraphModule`` whose call runs under :func:`replaying` (grad mode on)."""
    import torch.fx as fx

    class PlacedGraphModule(fx.GraphModule):
        def __call__(self, *args, **kwargs):
            with replaying():
                return super().__call__(*args, **kwargs)

    return PlacedGraphModule


def placement_and_order(result: Result | Mapping[str, str], problem=None) -> tuple[dict[str, str], dict[str, float]]:
    """``({node id: device id}, {node id: start time})`` of a result or of a bare placement.

    A bare ``{node id: device id}`` mapping has no schedule: the start times are empty
    and the graph keeps its traced (topological) order.

    Parameters
    ----------
    result : Result or {node id: device id}
        A solver's result, or a bare placement.
    problem : Problem, optional
        The problem of ``result`` (default: the one the Result was scored on, which every
        Result from :func:`optpart.solve`, :func:`optpart.evaluate` or
        :func:`optpart.load_result` carries; a Result built by hand needs it).

    Returns
    -------
    tuple of dict
        ``{node id: device id}`` and ``{node id: start time in seconds}`` (empty for a bare
        placement).

    Raises
    ------
    OptpartError
        A result without a placement, without its problem, or of another problem's size.
    """
    if isinstance(result, Mapping):
        return {str(k): str(v) for k, v in result.items()}, {}
    if not isinstance(result, Result):
        raise OptpartError(f"result must be an optpart Result or a {{node id: device id}} dict, "
                           f"not {type(result).__name__}")
    if result.placement is None:
        raise OptpartError(f"result of '{result.solver}' has status '{result.status.value}' and no placement")
    problem = problem if problem is not None else result.source_problem
    if problem is None:
        raise OptpartError("this Result does not know its problem (it was built by hand): pass problem=... "
                           "to name its nodes and devices, or the plan as {node id: device id}")
    if len(result.placement) != problem.n_nodes:
        raise OptpartError(f"result has {len(result.placement)} nodes but problem '{problem.name}' has "
                           f"{problem.n_nodes}")
    ids = problem.node_ids
    dev = problem.device_ids
    placement = {ids[v]: dev[d] for v, d in enumerate(np.asarray(result.placement).tolist())}
    start = {} if result.start is None else {ids[v]: float(s) for v, s in enumerate(np.asarray(result.start))}
    return placement, start


def _torch_devices(devices: Mapping[str, Any] | None, used: set[str]) -> dict[str, Any]:
    torch = _torch()
    out = {}
    for did in sorted(used):
        if devices is None:
            target = did
        elif did in devices:
            target = devices[did]
        else:
            raise OptpartError(f"devices= has no entry for device '{did}' (it has {sorted(devices)})")
        try:
            out[did] = torch.device(target)
        except (RuntimeError, TypeError):
            raise OptpartError(f"device '{did}' maps to {target!r}, which is not a torch device "
                               "(e.g. 'cuda:0', 'cpu')") from None
    return out


def apply(
    module,
    example_inputs,
    result: Result | Mapping[str, str],
    devices: Mapping[str, Any] | None = None,
    problem=None,
    *,
    loss_fn: Callable[..., Any] | None = None,
    targets: Sequence[Any] = (),
    step=None,
    outputs: bool = False,
):
    """The training step of ``module`` with every operator on its placed device.

    Parameters
    ----------
    module : torch.nn.Module
        The model, with real parameters (they are read, not copied, when already on
        their device).
    example_inputs : tensor, sequence of tensors or dict of keyword tensors
        As given to the importer; the graph is traced for their shapes.
    result : Result or {node id: device id}
        The plan. A :class:`~optpart.result.Result` also gives the schedule order. A pipelined
        result (over the unrolled step of ``M`` micro-batches, node ids ``v@mb<i>``) gives a
        :class:`MicroBatchedStep`: one micro-batch's step placed as copy 0 of every node, run on
        each micro-batch, the gradients accumulated.
    devices : {device id: torch device}, optional
        Where each optpart device runs, e.g. ``{"gpu0": "cuda:0", "gpu1": "cuda:1"}``.
        Default: the device ids are torch devices themselves.
    problem : Problem, optional
        The problem ``result`` is for (its placement holds node and device *indices* of that
        problem). Default: the problem the Result knows (``Result.source_problem``: every
        Result from :func:`optpart.solve` carries it).
    loss_fn, targets :
        As given to the importer (default: its default loss, no targets).
    step : TracedStep, optional
        A trace of this module and these inputs, to skip tracing again.
    outputs : bool
        Also return the module's forward outputs: ``(loss, grads, outputs)``, ``outputs`` the
        tuple of the output's tensors (:func:`~optpart.formats.torch.output_tensors` order,
        e.g. a Hugging Face output's ``loss``, ``logits``), each on its placed device; ``None``
        for an output the loss does not use (the step does not compute it).

    Returns
    -------
    torch.fx.GraphModule or MicroBatchedStep
        ``gm(*inputs, *targets)`` (``gm(**inputs)`` for keyword inputs) ``-> (loss, {param name: grad})``
        (with ``outputs=True``: ``(loss, grads, outputs)``). ``gm.meta["optpart"]`` holds the
        node -> torch device map, the number of transfers and of data reads checked
        (``"data_reads_checked"``). For inference with the same plan
        see :func:`optpart.torch.apply_inference`.

    Raises
    ------
    OptpartError
        A node of the plan that the traced step does not have (or the reverse), a device
        id without a torch device. The returned step raises it when called on data that
        takes another path than the traced batch (see the module docstring).

    Examples
    --------
    >>> import torch, optpart.torch
    >>> from optpart.formats.torch_import import from_torch
    >>> lin, x = torch.nn.Linear(3, 1), torch.ones(2, 3)
    >>> plan = {nid: "dev0" for nid in from_torch(lin, (x,)).node_ids}
    >>> gm = optpart.torch.apply(lin, (x,), plan, {"dev0": "cpu"})
    >>> loss, grads = gm(x)
    >>> sorted(grads)
    ['bias', 'weight']
    """
    torch = _torch()
    from ..formats.torch import trace_training_step

    placement, start = placement_and_order(result, problem)
    m = _micro_batches(result, placement)
    if m > 1:  # a pipelined plan: one micro-batch's step placed as copy 0 of each node, run on every micro-batch
        from .stages import split_batch

        placement, start = _first_copy(result, start)
        example_inputs, targets = split_batch(example_inputs, targets, m)
        step = None
    if step is None:
        step = trace_training_step(module, example_inputs, loss_fn=loss_fn, targets=targets)
    if not step.training:
        raise OptpartError("apply needs a training step (trace_training_step(..., training=True))")
    fx_of = step.node_names
    for nid in placement:
        if nid not in fx_of and not (nid.startswith("update.") and nid[len("update."):] in step.param_names):
            raise OptpartError(f"the plan names node '{nid}', which the traced step of {type(module).__name__} "
                               "does not have (was the problem imported from this module and these inputs?)")
    for nid in fx_of:
        if nid not in placement:
            raise OptpartError(f"the plan leaves node '{nid}' of the traced step without a device")
    tdev = _torch_devices(devices, set(placement.values()))
    gm = _build(torch, step, module, placement, start, tdev, outputs=outputs)
    return gm if m == 1 else MicroBatchedStep(gm, m)


def _micro_batches(result, placement: dict[str, str]) -> int:
    """``M`` of a pipelined plan (its nodes are the unrolled step's ``v@mb<i>``), else 1."""
    opts = getattr(result, "options", None) or {}
    m = opts.get("micro_batches", 1) if isinstance(opts, Mapping) else 1
    if (not isinstance(m, int) or m <= 1) and any(_MB.search(n) for n in placement):
        m = 1 + max(int(h.group(1)) for h in map(_MB.search, placement) if h)
    return int(m) if isinstance(m, int) and m > 1 else 1


_MB = re.compile(r"@mb(\d+)$")


def _first_copy(result, start: dict[str, float]) -> tuple[dict[str, str], dict[str, float]]:
    """Every base node on its stage's device (the plan's), started where copy 0 of it starts."""
    from ..pipeline.plan import PipelinePlan

    plan, ids, _ = PipelinePlan.read(result)
    device = [ids.device_ids[plan.stage_device[s]] for s in plan.stage_of.tolist()]
    place = dict(zip(ids.node_ids, device))
    order = {n: start.get(f"{n}@mb0", start.get(n, 0.0)) for n in ids.node_ids}
    return place, order


class MicroBatchedStep:
    """A placed step of one micro-batch run on each of ``M`` micro-batches, gradients accumulated.

    ``step(*inputs, *targets)`` (or keywords) splits every batched tensor (first dimension) into
    ``M`` equal parts, runs the placed step on each in turn and returns the mean loss and the
    mean gradients (``(loss, grads)``, plus the per-micro-batch outputs with ``outputs=True``):
    the whole batch's loss and gradients for a loss that is a mean over samples. Batch norm's
    statistics are those of each micro-batch, as in a pipeline.

    Attributes
    ----------
    placed : torch.fx.GraphModule
        The placed step of one micro-batch (:func:`apply`).
    micro_batches : int
        ``M``.
    """

    def __init__(self, placed, micro_batches: int):
        self.placed = placed
        self.micro_batches = int(micro_batches)
        self.meta = placed.meta

    def __call__(self, *args, **kwargs):
        """Run every micro-batch; see the class docstring."""
        m = self.micro_batches
        cut = lambda x: x.chunk(m) if hasattr(x, "chunk") and x.dim() >= 1 else [x] * m  # noqa: E731
        for x in list(args) + list(kwargs.values()):
            if hasattr(x, "shape") and x.dim() >= 1 and x.shape[0] % m:
                raise OptpartError(f"a batch of {x.shape[0]} samples does not divide into {m} micro-batches")
        parts_a = [cut(x) for x in args]
        parts_k = {k: cut(v) for k, v in kwargs.items()}
        loss, grads, outs = None, {}, []
        for i in range(m):
            got = self.placed(*(p[i] for p in parts_a), **{k: p[i] for k, p in parts_k.items()})
            loss = got[0] / m if loss is None else loss + got[0].to(loss.device) / m
            for name, g in got[1].items():
                grads[name] = None if g is None else (g / m if grads.get(name) is None else grads[name] + g / m)
            outs.append(got[2] if len(got) > 2 else None)
        return (loss, grads, outs) if outs and outs[0] is not None else (loss, grads)


def _homes(step, placement: dict[str, str], tdev: dict[str, Any]) -> dict[Any, Any]:
    """The torch device of every FX node: its problem node's, a parameter's optimizer node's,
    else (inputs, buffers, constants without a node) the device of its first reader."""
    nodes = list(step.graph_module.graph.nodes)
    index = {nd: i for i, nd in enumerate(nodes)}
    pid_of = {fxname: nid for nid, fxname in step.node_names.items()}
    placeholders = [nd for nd in nodes if nd.op == "placeholder"]
    n_p = len(step.param_names)
    home: dict[Any, Any] = {}
    for i, nd in enumerate(placeholders):
        nid = f"update.{step.param_names[i]}" if i < n_p else pid_of.get(nd.name)
        home[nd] = tdev[placement[nid]] if nid in placement else None
    for nd in nodes:
        if nd.op == "call_function":
            home[nd] = home.get(nd.args[0]) if nd.target is operator.getitem else tdev[placement[pid_of[nd.name]]]
    first_device = tdev[min(tdev)]
    for nd in placeholders + [nd for nd in nodes if nd.op == "get_attr"]:
        if home.get(nd) is None:
            home[nd] = next((home[u] for u in sorted(nd.users, key=index.get) if home.get(u) is not None),
                            first_device)
    return home


def _schedule_order(step, start: dict[str, float]) -> list:
    """The call_function nodes by (start time of their problem node, graph position), keeping every
    data dependency and every ordering edge of ``step.order`` (Kahn's algorithm with a heap);
    ``getitem`` projections go with their source. Random operators keep their traced order, and
    every operator traced after a read of the data comes after that read (whose check follows it)."""
    nodes = list(step.graph_module.graph.nodes)
    index = {nd: i for i, nd in enumerate(nodes)}
    pid_of = {fxname: nid for nid, fxname in step.node_names.items()}

    def key(nd) -> tuple[float, int]:
        base = nd
        while base.op == "call_function" and base.target is operator.getitem:
            base = base.args[0]
        return (start.get(pid_of.get(base.name), 0.0) if base.op == "call_function" else -1.0, index[nd])

    ops = [nd for nd in nodes if nd.op == "call_function"]
    by_name = {nd.name: nd for nd in ops}
    succ = {nd: [u for u in nd.users if u.op == "call_function"] for nd in ops}
    for a, b in getattr(step, "order", ()):  # a write after the accesses it must follow, and so on
        if a in by_name and b in by_name:
            succ[by_name[a]].append(by_name[b])
    reads = {r.node for r in getattr(step, "reads", ())}
    last_read = last_random = None
    for nd in ops:  # traced order
        if last_read is not None:  # nothing traced after a read of the data runs before its check
            succ[last_read].append(nd)
        if nd.name in reads:
            last_read = nd
        if draws_random(nd):  # random operators draw in the traced (eager) order
            if last_random is not None:
                succ[last_random].append(nd)
            last_random = nd
    indeg = {nd: 0 for nd in ops}
    for nd in ops:
        for u in set(succ[nd]):
            indeg[u] += 1
    heap = [(key(nd), index[nd]) for nd in ops if indeg[nd] == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        _, i = heapq.heappop(heap)
        order.append(nodes[i])
        for u in set(succ[nodes[i]]):
            indeg[u] -= 1
            if indeg[u] == 0:
                heapq.heappush(heap, (key(u), index[u]))
    return order


def _build(torch, step, module, placement: dict[str, str], start: dict[str, float], tdev: dict[str, Any],
           outputs: bool = False):
    """The placed GraphModule (see the module docstring); a forward-only ``step`` returns its outputs."""
    import torch.fx as fx

    nodes = list(step.graph_module.graph.nodes)
    pid_of = {fxname: nid for nid, fxname in step.node_names.items()}
    placeholders = [nd for nd in nodes if nd.op == "placeholder"]
    consts = [nd for nd in nodes if nd.op == "get_attr"]  # tensors the trace baked in (torch.tensor(...))
    n_p, n_b = len(step.param_names), len(step.buffer_names)
    home = _homes(step, placement, tdev)
    order = _schedule_order(step, start)
    ops = [nd for nd in nodes if nd.op == "call_function"]

    # The new graph: state as attributes, inputs as placeholders, ops in order, copies on first use.
    new = fx.Graph()
    root = torch.nn.Module()
    env: dict[Any, Any] = {}
    params, buffers = dict(module.named_parameters()), dict(module.named_buffers())
    for i, nd in enumerate(placeholders):
        if i < n_p + n_b:
            is_param = i < n_p
            src = params[step.param_names[i]] if is_param else buffers[step.buffer_names[i - n_p]]
            attr = f"param_{i}" if is_param else f"buffer_{i - n_p}"
            root.register_buffer(attr, src.detach().to(home[nd]), persistent=False)
            env[nd] = new.get_attr(attr)
            env[nd].meta["optpart_device"] = str(home[nd])
        else:
            j = i - n_p - n_b
            if j >= step.n_inputs:
                name = f"target_{j - step.n_inputs}"
            else:  # a keyword input keeps its keyword, so gm(**example_inputs) works
                name = step.input_names[j]
                if not name.isidentifier() or keyword.iskeyword(name):  # '0', or a nested leaf '1.0'
                    name = "input_" + re.sub(r"\W", "_", name)
            ph = new.placeholder(name)
            env[nd] = new.call_method("to", (ph, home[nd]))
            env[nd].meta["optpart_device"] = str(home[nd])
    for i, nd in enumerate(consts):
        value = operator.attrgetter(nd.target)(step.graph_module)
        if isinstance(value, torch.Tensor):
            root.register_buffer(f"constant_{i}", value.detach().to(home[nd]), persistent=False)
        else:
            setattr(root, f"constant_{i}", value)
        env[nd] = new.get_attr(f"constant_{i}")
        env[nd].meta["optpart_device"] = str(home[nd])
    copies: dict[tuple[Any, Any], Any] = {}
    n_copies = 0
    reads = {r.node: r for r in step.reads}
    guards: list[str] = []

    def on(dev):
        def fetch(a):
            nonlocal n_copies
            if home[a] == dev:
                return env[a]
            if (a, dev) not in copies:
                copies[(a, dev)] = new.call_method("to", (env[a], dev))
                copies[(a, dev)].meta["optpart_device"] = str(dev)
                n_copies += 1
            return copies[(a, dev)]
        return fetch

    for nd in order:
        dev = home[nd]
        if nd.target is operator.getitem:
            env[nd] = new.call_function(operator.getitem, (env[nd.args[0]], nd.args[1]))
            continue
        args = fx.node.map_arg(nd.args, on(dev))
        kwargs = fx.node.map_arg(nd.kwargs, on(dev))
        if isinstance(kwargs.get("device"), torch.device):
            kwargs = dict(kwargs, device=dev)
        env[nd] = new.call_function(nd.target, args, kwargs)
        env[nd].meta["optpart_device"] = str(dev)
        env[nd].meta["optpart_node"] = pid_of[nd.name]
        if nd.name in reads:  # the data must take the traced path: checked here, read through the check
            attr = f"read_{len(guards)}"
            setattr(root, attr, reads[nd.name])
            guards.append(attr)
            what = new.get_attr(attr)
            env[nd] = new.call_function(check_read, (env[nd], what))
            for g in (what, env[nd]):
                g.meta["optpart_device"] = str(dev)
    # A buffer the step writes (batch norm's running statistics) but that was copied to its
    # device: the update goes back into the module's own buffer, as an eager step leaves it.
    written = {rn for (rn, _), acc in storage_accesses(step.graph_module.graph).items()
               if rn.op == "placeholder" and any(w for _, w in acc)}
    for i, nd in enumerate(placeholders[:n_p + n_b]):
        if nd not in written:
            continue
        own = params[step.param_names[i]] if i < n_p else buffers[step.buffer_names[i - n_p]]
        held = getattr(root, f"param_{i}" if i < n_p else f"buffer_{i - n_p}")
        if held.data_ptr() != own.data_ptr() or held.device != own.device:
            root.register_buffer(f"module_state_{i}", own.detach(), persistent=False)
            back = new.call_function(torch.ops.aten.copy_.default, (new.get_attr(f"module_state_{i}"), env[nd]))
            back.meta["optpart_writeback"] = True  # a copy to the module's own device: a transfer
    vals = list(next(nd for nd in nodes if nd.op == "output").args[0])
    if step.training:
        loss = env[vals[0]]
        grads = {name: (env[g] if g is not None else None) for name, g in zip(step.param_names, vals[1:])}
        by_name = {nd.name: nd for nd in nodes}
        fwd = tuple(None if o is None else env[by_name[o]] for o in step.forward_outputs)
        new.output((loss, grads, fwd) if outputs else (loss, grads))
    else:
        new.output(tuple(env[v] if isinstance(v, fx.Node) else v for v in vals))
    gm = _placed_module_class()(root, new, class_name="PlacedTrainingStep" if step.training else "PlacedForward")
    gm.meta["optpart"] = {"devices": {nd.name: str(home[nd]) for nd in ops}, "transfers": n_copies,
                          "data_reads_checked": len(guards)}
    check_devices(gm)
    return gm
