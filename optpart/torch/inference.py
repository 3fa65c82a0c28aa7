"""A training plan used for inference: the module's forward pass, placed as the plan says.

A plan places the operators of one *training* step (forward, loss, backward, optimizer).
:func:`apply_inference` traces the module's forward pass alone in ``eval()`` mode
(:func:`optpart.formats.torch.trace_training_step` with ``training=False``: no dropout,
batch norm on its running statistics) and puts each of its operators where the plan put
the same operator of the training step: same FX name, same ATen operator and same module
(the forward of a training trace and the forward trace name their operators alike). An
operator the training step does not have (batch norm's inference kernel, an eval-only
branch) goes to the device that holds most of its module's operators in the plan (the
nearest enclosing module with placed operators; the plan's most used device for none).
Parameters, buffers and inputs sit where the plan put them (a parameter with its
optimizer node). The graph is then built as :func:`optpart.torch.apply` builds the training
step: operators in the plan's schedule order, a copy before a tensor's first use on
another device, every transfer proved present (:func:`optpart.torch.check_devices`), and
each read of the data of a real-tensor trace checked against the traced batch's.

See ``docs/apply.md``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Mapping

from ..errors import OptpartError
from ..result import Result
from .placed import _build, _torch, _torch_devices, placement_and_order

__all__ = ["apply_inference"]


def apply_inference(module, example_inputs, result: Result | Mapping[str, str],
                    devices: Mapping[str, Any] | None = None, problem=None):
    """The forward pass of ``module`` (eval mode), each operator on the device the plan gives it.

    Parameters
    ----------
    module : torch.nn.Module
        The model, with real parameters.
    example_inputs : tensor, sequence of tensors or dict of keyword tensors
        Inputs shaped as the ones of the plan's problem (the graph is traced for their shapes).
    result : Result or {node id: device id}
        A plan of the module's *training* step (what :func:`optpart.solve` returns for a
        problem imported from it).
    devices : {device id: torch device}, optional
        Where each optpart device runs, as in :func:`optpart.torch.apply`.
    problem : Problem, optional
        The problem of ``result`` (default: the one a Result knows). It names the plan's
        operators' ATen operators and modules; without it (a bare mapping) the training
        step is traced to read them.

    Returns
    -------
    torch.fx.GraphModule
        ``gm(*inputs)`` (``gm(**inputs)`` for keyword inputs) ``->`` the tuple of the output's
        tensors (:func:`~optpart.formats.torch.output_tensors` order, e.g. a Hugging Face
        output's ``logits``). ``gm.meta["optpart"]`` holds the FX node -> torch device map,
        the number of transfers and ``"matched"``, how many of its operators the training plan
        placed by name (the others by module).

    Raises
    ------
    OptpartError
        A result without a placement, a device id without a torch device.

    Examples
    --------
    >>> import torch, optpart, optpart.torch
    >>> from optpart.formats.torch_import import from_torch
    >>> lin, x = torch.nn.Linear(3, 1), torch.ones(2, 3)
    >>> result = optpart.solve(from_torch(lin, (x,), devices=1))
    >>> gm = optpart.torch.apply_inference(lin, (x,), result, {"dev0": "cpu"})
    >>> torch.equal(gm(x)[0], lin(x))
    True
    """
    torch = _torch()
    from ..formats.torch import trace_training_step

    placement, start = placement_and_order(result, problem)
    known = problem if problem is not None else getattr(result, "source_problem", None)
    where = _operators(known) if known is not None else _operators_traced(module, example_inputs)
    step = trace_training_step(module, example_inputs, training=False)
    place, matched = _inference_placement(step, placement, where)
    tdev = _torch_devices(devices, set(place.values()))
    gm = _build(torch, step, module, place, start, tdev)
    gm.meta["optpart"]["matched"] = matched
    return gm


def _operators(problem) -> dict[str, tuple[str, str]]:
    """``{node id: (ATen operator, module path)}`` of a problem imported from PyTorch."""
    meta = problem.node_meta or [{}] * problem.n_nodes
    return {nid: (str(m.get("op", "")), str(m.get("module", ""))) for nid, m in zip(problem.node_ids, meta)}


def _operators_traced(module, example_inputs) -> dict[str, tuple[str, str]]:
    """As :func:`_operators`, read from a trace of the training step (a bare plan has no metadata)."""
    from ..formats.torch import trace_training_step

    step = trace_training_step(module, example_inputs)
    return {nd.name: (str(nd.target), step.node_module.get(nd.name, ("", ""))[0])
            for nd in step.graph_module.graph.nodes if nd.op == "call_function"}


def _inference_placement(step, placement: dict[str, str], where: dict[str, tuple[str, str]]):
    """``({node id of the forward step: device id}, operators placed by name)`` (see the module docstring)."""
    if not placement:
        raise OptpartError("the plan places no node")
    by_module: dict[str, Counter] = {}
    for nid, dev in placement.items():
        if nid in where and not nid.startswith(("input.", "buffer.", "target.", "update.")):
            by_module.setdefault(where[nid][1], Counter())[dev] += 1
    busiest = Counter(placement.values()).most_common(1)[0][0]

    def module_device(path: str) -> str:
        while True:
            if path in by_module:
                return by_module[path].most_common(1)[0][0]
            if not path:
                return busiest
            path = path.rpartition(".")[0]

    place = {nid: dev for nid, dev in placement.items() if nid.startswith(("input.", "buffer.", "update."))}
    matched = 0
    for nd in step.graph_module.graph.nodes:
        if nd.op != "call_function" or nd.name not in step.node_names:
            continue
        path = step.node_module.get(nd.name, ("", ""))[0]
        if nd.name in placement and where.get(nd.name) == (str(nd.target), path):
            place[nd.name] = placement[nd.name]
            matched += 1
        else:
            place[nd.name] = module_device(path)
    return place, matched
