"""accelerate's own answer as a baseline: its device map turned into a placement and scored.

``accelerate.infer_auto_device_map`` fills devices in module order by parameter (and buffer)
size alone, up to ``max_memory`` per device; activations, gradients, optimizer state and the
copies a training step keeps alive are left to the reserve the user holds back. This module
asks it for a map on the same model and devices as an optpart problem
(:func:`accelerate_map`), turns any device map into an operator placement the way
``accelerate`` runs it (:func:`placement_from_device_map`: each module's operators on its
device, operators outside every module beside their heaviest input) and scores that placement
with the evaluator under the problem's memory model (:func:`accelerate_baseline`), so it sits
beside our maps in one table (``benchmarks/accelerate_baseline.py``). It is scored as
``accelerate.dispatch_model`` runs it, one module at a time with a move for every tensor that
crosses devices (:mod:`optpart.export.sequential`), the rule our own device maps are chosen by.
A map that overflows a device carries status ``invalid``, never ``feasible``.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..evaluate import evaluate
from ..model.problem import Problem
from ..result import Result
from .plan import ExportError
from .sequential import sequential_run
from .tree import follow_inputs, node_modules, owned_tensor

__all__ = ["placement_from_device_map", "accelerate_map", "accelerate_baseline"]

#: Values of an accelerate device map that are not an accelerator: offloaded modules.
OFFLOAD = ("cpu", "disk", "meta")


def placement_from_device_map(problem: Problem, device_map: Mapping[str, Any]) -> tuple[np.ndarray, list[str]]:
    """The operator placement an accelerate/transformers device map gives, and its offloaded keys.

    Parameters
    ----------
    problem : Problem
        A problem imported from PyTorch (nodes carry ``module`` metadata).
    device_map : {module or tensor path: device}
        Values are device indices, optpart device ids, or ``"cpu"``/``"disk"`` (offloaded:
        accelerate runs those modules on the first accelerator of the map, streaming their
        weights, so they are placed there and their memory counts there).

    Returns
    -------
    (numpy.ndarray, list of str)
        A device index per node, and the keys the map offloads.

    Raises
    ------
    ExportError
        When a value names no device of the problem, or no node carries module metadata.
    """
    modules = node_modules(problem)
    if all(m is None for m in modules):
        raise ExportError(f"'{problem.name}' has no node with 'module' metadata; a device map needs a problem "
                          "imported from PyTorch")
    index: dict[str, int] = {}
    offloaded = [k for k, v in device_map.items() if isinstance(v, str) and v in OFFLOAD]
    main = next((v for v in device_map.values() if not (isinstance(v, str) and v in OFFLOAD)), 0)
    for key, value in device_map.items():
        value = main if isinstance(value, str) and value in OFFLOAD else value
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and 0 <= value < problem.n_devices:
            index[key] = int(value)
        elif isinstance(value, str) and value in problem.device_index:
            index[key] = problem.device_index[value]
        elif isinstance(value, str) and value.startswith("cuda:") and value[5:].isdigit() \
                and int(value[5:]) < problem.n_devices:
            index[key] = int(value[5:])
        else:
            raise ExportError(f"device map entry '{key}': {value!r} is not a device of '{problem.name}' "
                              f"(indices 0..{problem.n_devices - 1} or ids {', '.join(problem.device_ids[:4])})")
    placement = np.zeros(problem.n_nodes, dtype=np.int64)
    free = np.ones(problem.n_nodes, dtype=bool)
    meta = problem.node_meta or [{}] * problem.n_nodes
    for v, (nid, m) in enumerate(zip(problem.node_ids, modules)):
        if m is None:
            continue
        tensor = owned_tensor(nid, meta[v])
        key = _owner_key(index, tensor) if tensor is not None else None
        key = key if key is not None else _owner_key(index, m)
        if key is not None:
            placement[v] = index[key]
            free[v] = False
    return follow_inputs(problem, placement, free), offloaded


def _owner_key(index: Mapping[str, int], path: str) -> str | None:
    """The longest key of the map that is ``path`` or one of its ancestors ("" covers everything)."""
    p = path
    while True:
        if p in index:
            return p
        if not p:
            return None
        p = p.rsplit(".", 1)[0] if "." in p else ""


def accelerate_map(problem: Problem, model: Any, *, reserve: float = 0.25,
                   no_split_module_classes: list[str] | None = None, balanced: bool = False) -> dict[str, Any]:
    """``accelerate.infer_auto_device_map`` for ``model`` on the problem's devices.

    Parameters
    ----------
    problem : Problem
        Its device capacities are the devices' memory.
    model : torch.nn.Module
        The model (real or on the ``meta`` device: only parameter sizes are read).
    reserve : float
        Share of each capacity held back for activations, as accelerate users do:
        ``max_memory[i] = (1 - reserve) * capacity[i]``.
    no_split_module_classes : list of str, optional
        Module classes kept whole (default: the model's ``_no_split_modules``, as transformers sets).
    balanced : bool
        Spread the parameters evenly first (``accelerate.utils.get_balanced_memory``), as
        transformers' ``device_map="auto"`` does on several devices; ``False`` fills device 0
        first (``infer_auto_device_map`` alone, ``device_map="sequential"``).

    Returns
    -------
    dict
        accelerate's device map (values device indices, or ``"cpu"``/``"disk"`` when it offloads).

    Raises
    ------
    ExportError
        One line when accelerate itself fails on the model.
    """
    try:
        from accelerate import infer_auto_device_map
    except ImportError:  # pragma: no cover - the accelerate extra
        raise ExportError("the accelerate baseline needs accelerate: pip install 'optpart[accelerate]'") from None
    if not 0 <= reserve < 1:
        raise ExportError(f"reserve={reserve!r} must be in [0, 1)")
    max_memory = {i: int(c * (1 - reserve)) for i, c in enumerate(problem.device_memory.tolist())}
    keep = no_split_module_classes
    if keep is None:
        keep = list(getattr(model, "_no_split_modules", None) or [])
    try:
        if balanced:
            from accelerate.utils import get_balanced_memory

            max_memory = get_balanced_memory(model, max_memory=max_memory, no_split_module_classes=keep)
        return dict(infer_auto_device_map(model, max_memory=max_memory, no_split_module_classes=keep))
    except (IndexError, KeyError) as exc:  # accelerate's own failure (its tie bookkeeping on BigBird's head)
        raise ExportError(f"accelerate's infer_auto_device_map fails on {type(model).__name__}: "
                          f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None


def accelerate_baseline(problem: Problem, model: Any, *, reserve: float = 0.25, memory_model: str = "peak",
                        no_split_module_classes: list[str] | None = None,
                        balanced: bool = False) -> tuple[Result, dict[str, Any]]:
    """accelerate's device map for ``model`` on the problem's devices, scored as accelerate runs it.

    Parameters
    ----------
    problem : Problem
        The model's training step imported by :func:`optpart.formats.torch_import.from_torch`.
    model : torch.nn.Module
        The same model.
    reserve, no_split_module_classes, balanced
        As in :func:`accelerate_map`.
    memory_model : {"peak", "static"}
        The model the placement is scored under.

    Returns
    -------
    (Result, dict)
        The scored placement (solver ``accelerate``; status ``invalid`` when it overflows a
        device, its message naming the device and, when accelerate offloaded modules, which)
        and accelerate's device map.
    """
    dmap = accelerate_map(problem, model, reserve=reserve, no_split_module_classes=no_split_module_classes,
                          balanced=balanced)
    placement, offloaded = placement_from_device_map(problem, dmap)
    note = (f"accelerate offloads {len(offloaded)} module(s) ({', '.join(offloaded[:3])}"
            f"{' ...' if len(offloaded) > 3 else ''}): they run on its first device" if offloaded else "")
    result = evaluate(problem, placement, sequential_run(problem, placement).start, solver="accelerate",
                      memory_model=memory_model, message=note,
                      options={"reserve": reserve, "balanced": balanced})
    return result, dmap
