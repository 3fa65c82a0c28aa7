"""The module-level plan closest to, or best for, an operator placement, and its device map.

See :mod:`optpart.export` for the method.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from ..errors import OptpartError
from ..evaluate import evaluate, time_tolerance, violations
from ..model.problem import Problem
from ..result import Result
from .costs import cost_profile, phases
from .search import fullness, memory_advice, repair_stages
from .sequential import SequentialRun, sequential_run
from .stages import EXHAUSTIVE, all_blocks, stage_candidates, unit_order, untied
from .tree import (Units, compress, entry_modules, export_modules, first_seen, follow_inputs, held_tensors,
                   kept_whole, mixed_own_code, node_modules, split_modules)

__all__ = ["ExportError", "ModulePlan", "module_plan", "closest_plan", "pipeline_plan", "device_map", "placement_map"]

#: How a plan is scored: ``"accelerate"`` one module at a time as ``dispatch_model`` runs a device
#: map (:mod:`optpart.export.sequential`); ``"concurrent"`` the evaluator's canonical schedule,
#: devices working at once (pipeline stages).
RULES = ("accelerate", "concurrent")


class ExportError(OptpartError):
    """A placement cannot be exported in the requested form (not a pipeline, no module metadata)."""

@dataclass
class ModulePlan:
    """A module-consistent version of a placement, scored under the rule its framework runs it by.

    ``device_map``: ``{module path: device}`` in the order modules first run (node order);
    ``placement``: a device index per node under that map; ``result``: the plan scored by the
    evaluator, on the schedule of ``rule`` (:data:`RULES`: ``"accelerate"``, one node at a time
    in program order with a move for every tensor that crosses devices, for a device map;
    ``"concurrent"``, the canonical schedule, for pipeline stages) under ``memory_model``;
    ``run``: the sequential run's parts (``rule == "accelerate"``); ``fits``: whether it respects
    memory and constraints (``problems`` lists what it breaks); ``original_makespan``: the
    makespan of the placement it came from (its own, concurrent schedule); ``split_modules``:
    modules that the original placement spread over several devices; ``method``: how the plan
    was found; ``tensor_keys``: keys of ``device_map`` that name a parameter or buffer, not a
    module; ``entry_modules``: for each module key, the module that runs first under it (a
    container such as a ``ModuleList`` is never called, so a pipeline stage begins at its first
    child that runs); ``shared``: parameters used by modules on different devices, each with
    those modules (a pipeline plan only: ``torch.distributed.pipelining`` replicates them, see
    :mod:`optpart.export.stages`); ``kept_whole``: modules no plan cuts (``--no-split`` classes,
    modules holding parameters the import did not name); ``advice``: for a plan that does not
    fit, one line with the memory at which it would.
    """

    device_map: dict[str, Any]
    placement: np.ndarray
    result: Result
    memory_model: str
    fits: bool
    original_makespan: float
    rule: str = "concurrent"
    run: SequentialRun | None = None
    split_modules: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    method: str = "majority"
    tensor_keys: set[str] = field(default_factory=set)
    entry_modules: dict[str, str] = field(default_factory=dict)
    shared: list[tuple[str, list[str]]] = field(default_factory=list)
    kept_whole: list[str] = field(default_factory=list)
    advice: str = ""

    @property
    def makespan(self) -> float:
        return self.result.makespan

    @property
    def memory(self) -> np.ndarray:
        """Bytes per device under ``memory_model`` on the plan's schedule."""
        return self.result.memory_peak if self.memory_model == "peak" else self.result.memory_static

    def summary(self, problem: Problem | None = None) -> str:
        """One line: the plan's time under its rule, what that rule is, the costs it assumes, and whether it fits.

        Parameters
        ----------
        problem : Problem, optional
            The problem the plan was scored on: its metadata names the hardware profile the
            node times and links come from.

        Returns
        -------
        str
        """
        from ..units import format_time

        fit = "fits" if self.fits else "DOES NOT FIT: " + "; ".join(self.problems[:3])
        new, orig = format_time(self.makespan), format_time(self.original_makespan)
        costs = f"; {cost_profile(problem)}" if problem is not None else ""
        if self.rule == "accelerate" and self.run is not None:
            devices = len(set(self.device_map.values()))
            return (f"device map: {len(self.device_map)} entries on {devices} device(s) ({self.method}); "
                    f"{new} per step{' ' + phases(problem) if problem is not None else ''} as accelerate runs it, one device at a time "
                    f"({format_time(self.run.compute)} of operators, {self.run.transfers} tensor move(s) between "
                    f"devices taking {format_time(self.run.transfer)}){costs}; the operator placement's concurrent "
                    f"schedule takes {orig}; {self.memory_model} memory {fit}")
        price = (self.makespan - self.original_makespan) / self.original_makespan if self.original_makespan > 0 else 0.0
        return (f"pipeline stages ({self.method}): makespan {new} with the devices working at once vs {orig} for "
                f"the operator placement ({price:+.1%}){costs}; {self.memory_model} memory {fit}")

    def memory_lines(self, problem: Problem) -> list[str]:
        """Per device: the plan's memory under its model beside the capacity.

        Parameters
        ----------
        problem : Problem
            The problem the plan was scored on (device ids and capacities).

        Returns
        -------
        list of str
            One indented line per device: ``gpu0: 1.2 GiB of 2 GiB (peak)``.
        """
        from ..units import format_bytes

        return [f"  {did}: {format_bytes(float(u))} of {format_bytes(float(c))} ({self.memory_model})"
                for did, u, c in zip(problem.device_ids, self.memory.tolist(), problem.device_memory.tolist())]


def _placement_of(problem: Problem, result: Result | Mapping[str, str] | np.ndarray) -> np.ndarray:
    if isinstance(result, Result):
        if result.placement is None:
            raise ExportError(f"result of '{result.solver}' has status '{result.status.value}' and no placement "
                              "to export")
        p = np.asarray(result.placement, dtype=np.int64)
    elif isinstance(result, Mapping):
        p = problem.placement_from_ids(result)
    else:
        p = np.asarray(result, dtype=np.int64)
    if p.shape != (problem.n_nodes,):
        raise ExportError(f"placement has {p.size} entries for {problem.n_nodes} nodes of '{problem.name}'")
    return p

def placement_map(problem: Problem, result: Result | Mapping[str, str] | np.ndarray) -> dict[str, str]:
    """``{node id: device id}`` for every node, in the problem's node order.

    Parameters
    ----------
    problem : Problem
        The problem the placement is for.
    result : Result, {node id: device id} or array of device indices
        The operator placement.

    Returns
    -------
    dict
        Node id to device id.
    """
    p = _placement_of(problem, result)
    dev = problem.device_ids
    return {nid: dev[d] for nid, d in zip(problem.node_ids, p.tolist())}

def _memory_model(problem: Problem) -> str:
    return "peak" if problem.has_split else "static"

def _original_makespan(problem: Problem, result, placement: np.ndarray, model: str) -> float:
    if isinstance(result, Result) and result.finish is not None and np.size(result.finish):
        return float(np.max(result.finish))
    return evaluate(problem, placement, memory_model=model).makespan

def _score(problem: Problem, nodes: np.ndarray, placement: np.ndarray) -> np.ndarray:
    """Per device: share of the nodes' run time plus share of their memory (count share when both are 0)."""
    k = problem.n_devices
    d = placement[nodes]
    t = np.bincount(d, weights=problem.time[nodes], minlength=k)
    m = np.bincount(d, weights=problem.memory[nodes], minlength=k)
    s = np.zeros(k)
    if t.sum() > 0:
        s += t / t.sum()
    if m.sum() > 0:
        s += m / m.sum()
    if not s.any():
        s = np.bincount(d, minlength=k).astype(float)
    return s

def module_plan(problem: Problem, result: Result | Mapping[str, str] | np.ndarray, *,
                depth: int | str | None = None) -> ModulePlan:
    """The fastest device map within memory as accelerate runs it (see the module docstring).

    Every candidate is scored by :func:`optpart.export.sequential.sequential_run` (one module at a
    time, a move for every tensor that crosses devices) with memory by the liveness rule on that
    schedule: the map closest to ``result`` (every module on the device holding most of its time
    and memory), the same rule at every coarser depth, and contiguous blocks of modules in the
    order they run, balanced by memory and by time over one to all devices and repaired against
    memory. The fastest that fits wins; else the one that overflows least, with its advice.

    Parameters
    ----------
    problem : Problem
        The problem the placement is for; its nodes need ``module`` metadata.
    result : Result, {node id: device id} or array of device indices
        The operator placement.
    depth : int or "auto", optional
        Place whole modules no deeper than this many path components (``3`` keeps each
        ``transformer.h.N`` block of GPT-2 whole). ``"auto"``: the smallest depth whose plan fits
        and is as fast as the default one (the default plan when no depth is). Default: as fine
        as the modules go.

    Returns
    -------
    ModulePlan
        The plan (``rule`` ``"accelerate"``); ``fits`` False (with ``problems``, ``method`` and
        ``advice`` saying why) when no candidate fits memory.

    Raises
    ------
    ExportError
        When no node carries module metadata, or a module's nodes are pinned apart.
    """
    if depth == "auto":
        return _coarsest(problem, result)
    placement = _placement_of(problem, result)
    model = _memory_model(problem)
    original = _original_makespan(problem, result, placement, model)
    modules = _modules(problem, depth)
    split = split_modules(problem, node_modules(problem), placement)
    units = Units(problem, modules)
    tried = [_build(problem, modules, units, _majority(problem, units, placement), model, original, split,
                    "closest to the placement", "accelerate")]
    if depth is None:
        deepest = max((m.count(".") + 1 for m in modules if m), default=1)
        for d in range(deepest - 1, 0, -1):
            cut = [None if m is None else ".".join(m.split(".")[:d]) for m in modules]
            u = Units(problem, cut)
            tried.append(_build(problem, cut, u, _majority(problem, u, placement), model, original, split,
                                f"closest to the placement at depth {d}", "accelerate"))
    every = all_blocks(units.n, problem.n_devices, EXHAUSTIVE)
    if every is not None:  # few enough to score every contiguous split
        order = np.asarray(unit_order(problem, units, modules), dtype=np.int64)
        for blocks in every:
            unit_dev = np.empty(units.n, dtype=np.int64)
            unit_dev[order] = blocks
            tried.append(_build(problem, modules, units, unit_dev, model, original, split,
                                "contiguous blocks in module order (every split scored)", "accelerate"))
    else:
        for weight, name in ((problem.memory, "memory"), (problem.time, "time")):
            tried.append(_stage_plan(problem, modules, units, model, original, split,
                                     f"contiguous blocks in module order balanced by {name}", "accelerate", weight))
    return _pick(problem, tried, "no device map fits these devices: ")


def _pick(problem: Problem, tried: list[ModulePlan], advice: str) -> ModulePlan:
    """The fastest plan that fits, else the one that overflows least, with its memory advice."""
    fitting = [p for p in tried if p.fits]
    if fitting:
        return min(fitting, key=lambda p: (p.makespan, len(p.device_map)))
    best = min(tried, key=lambda p: (_overflow(problem, p), p.makespan))
    best.method = f"{best.method}: the least overflow of {len(tried)} module-level plans"
    best.advice = advice + memory_advice(problem, best.memory, best.memory_model)
    return best


def _modules(problem: Problem, depth) -> list[str | None]:
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
        raise ExportError(f"depth={depth!r} must be an integer >= 1 (module path components) or 'auto'")
    modules = export_modules(problem, depth)
    if all(m is None for m in modules):
        raise ExportError(f"'{problem.name}' has no node with 'module' metadata; a device map needs a problem "
                          "imported from PyTorch (optpart import package.module:function)")
    return modules


def closest_plan(problem: Problem, result: Result | Mapping[str, str] | np.ndarray, *, depth: int | None = None,
                 rule: str = "concurrent") -> ModulePlan:
    """Every module on the device holding most of its time and memory under ``result``, scored under ``rule``.

    Parameters
    ----------
    problem : Problem
        The problem; its nodes need ``module`` metadata.
    result : Result, {node id: device id} or array of device indices
        The operator placement.
    depth : int, optional
        Keep modules whole down to this many path components.
    rule : {"accelerate", "concurrent"}
        How the plan is scored (:data:`RULES`).

    Returns
    -------
    ModulePlan
        The plan, ``method`` ``"closest to the placement"``.
    """
    placement = _placement_of(problem, result)
    model = _memory_model(problem)
    modules = _modules(problem, depth)
    units = Units(problem, modules)
    return _build(problem, modules, units, _majority(problem, units, placement), model,
                  _original_makespan(problem, result, placement, model),
                  split_modules(problem, node_modules(problem), placement), "closest to the placement", rule)


def _overflow(problem: Problem, plan: ModulePlan) -> float:
    return float(np.max(fullness(problem, plan.memory))) if not plan.fits else 0.0


def _stage_plan(problem: Problem, modules, units: Units, model: str, original: float, split: list[str],
                method: str, rule: str, weight: np.ndarray | None = None) -> ModulePlan:
    """The best contiguous-stage plan (fits first, then makespan), the best candidates repaired against memory."""
    cache: dict[tuple[int, ...], ModulePlan] = {}

    def build(unit_dev: np.ndarray) -> ModulePlan:
        key = tuple(unit_dev.tolist())
        if key not in cache:
            cache[key] = _build(problem, modules, units, unit_dev, model, original, split, method, rule)
        return cache[key]

    def score(unit_dev: np.ndarray) -> tuple[np.ndarray, float]:
        p = build(unit_dev)
        return fullness(problem, p.memory), p.makespan

    candidates = stage_candidates(problem, units, modules, weight=weight)
    if not candidates:
        raise ExportError(f"'{problem.name}' has no module to place in a pipeline stage")
    ranked = sorted(candidates, key=lambda c: (_overflow(problem, build(c)), build(c).makespan))
    if not build(ranked[0]).fits:  # repair the three that overflow least against memory
        order = unit_order(problem, units, modules)
        for c in ranked[:3]:
            if build(repair_stages(order, c, score)).fits:
                break
    return min(cache.values(), key=lambda p: (_overflow(problem, p), p.makespan))


def _coarsest(problem: Problem, result) -> ModulePlan:
    """The plan at the smallest depth that fits and loses nothing against the default plan."""
    fine = module_plan(problem, result)
    deepest = max((m.count(".") + 1 for m in export_modules(problem) if m), default=1)
    for depth in range(1, deepest):
        plan = module_plan(problem, result, depth=depth)
        if plan.fits and plan.makespan <= fine.makespan + time_tolerance(fine.makespan):
            return plan
    return fine


def pipeline_plan(problem: Problem, result: Result | Mapping[str, str] | np.ndarray, *,
                  depth: int | None = None) -> ModulePlan:
    """The fastest contiguous-stage plan that fits (one stage per device at most), scored by the evaluator.

    Built from the order modules run, not from ``result`` (whose makespan is reported beside
    it); see :mod:`optpart.export.stages`. When no candidate fits, the one that overflows
    least is returned with ``fits`` False.

    Parameters
    ----------
    problem : Problem
        The problem; its nodes need ``module`` metadata.
    result : Result, {node id: device id} or array of device indices
        The operator placement the plan is compared with.
    depth : int, optional
        Keep modules whole down to this many path components.

    Returns
    -------
    ModulePlan
        With ``method`` ``"pipeline"`` and ``shared`` naming replicated parameters.
    """
    placement = _placement_of(problem, result)
    model = _memory_model(problem)
    original = _original_makespan(problem, result, placement, model)
    modules = _modules(problem, depth)
    relaxed, shared = untied(problem, modules)
    plan = _stage_plan(relaxed, modules, Units(relaxed, modules), model, original, [], "pipeline", "concurrent")
    if not plan.fits:
        plan.advice = "no pipeline of contiguous stages fits these devices: " + memory_advice(problem, plan.memory,
                                                                                              model)
    devices = {m: int(plan.placement[v]) for v, m in enumerate(modules) if m is not None}
    plan.shared = [(owner, mods) for owner, mods in shared if len({devices[m] for m in mods}) > 1]
    return plan


def _majority(problem: Problem, units: Units, placement: np.ndarray) -> np.ndarray:
    allowed = problem.allowed
    dev = np.zeros(units.n, dtype=np.int64)
    for u in range(units.n):
        nodes = units.members[u]
        ok = allowed[nodes].all(axis=0)
        if not ok.any():
            raise ExportError(f"module '{units.keys[u]}' cannot go on one device: its operators' pins or "
                              "forbidden devices exclude every device")
        s = np.where(ok, _score(problem, nodes, placement), -1.0)
        dev[u] = int(np.argmax(s))
    return dev

def _runnable(problem: Problem, modules, units: Units, unit_dev: np.ndarray) -> np.ndarray:
    """``unit_dev`` with every split module whose own code would mix devices under accelerate kept whole.

    :func:`optpart.export.tree.mixed_own_code` finds them; each goes whole to the device holding
    most of its subtree's time and memory, and a split module whose own code runs on one device
    gets that device for its own tensors and nodes. Repeated until nothing changes (each round
    makes a module whole or settles one); after as many rounds as there are modules, the whole
    model goes to one device, which always runs.
    """
    unit_dev = unit_dev.copy()
    node_unit = units.unit_of
    paths = np.array(["" if m is None else m for m in modules], dtype=object)
    has = node_unit >= 0
    for _ in range(units.n + 2):
        by_module = {m: int(unit_dev[node_unit[v]]) for v, m in enumerate(modules) if m is not None}
        bad, own = mixed_own_code(problem, modules, by_module)
        changed = False
        for m in bad:
            inside = np.flatnonzero(has & np.array([p == m or p.startswith(m + ".") for p in paths]))
            unit_dev[np.unique(node_unit[inside])] = _whole_device(problem, inside, unit_dev[node_unit[inside]], m)
            changed = True
        if not bad:
            for m, d in sorted(own.items()):
                u = node_unit[modules.index(m)]
                if unit_dev[u] != d:
                    unit_dev[u] = d
                    changed = True
        if not changed:
            return unit_dev
    every = np.flatnonzero(has)
    unit_dev[:] = _whole_device(problem, every, unit_dev[node_unit[every]], "")
    return unit_dev


def _whole_device(problem: Problem, nodes: np.ndarray, placement: np.ndarray, module: str) -> int:
    """The allowed device holding most of the nodes' time and memory under ``placement`` (one per node)."""
    ok = problem.allowed[nodes].all(axis=0)
    if not ok.any():
        raise ExportError(f"module '{module}' must stay on one device (accelerate runs its own code on one "
                          "device), but its operators' pins or forbidden devices exclude every device")
    full = np.zeros(problem.n_nodes, dtype=np.int64)
    full[nodes] = placement
    return int(np.argmax(np.where(ok, _score(problem, nodes, full), -1.0)))


def _build(problem: Problem, modules, units: Units, unit_dev: np.ndarray, model: str, original: float,
           split: list[str], method: str, rule: str) -> ModulePlan:
    if rule == "accelerate":
        unit_dev = _runnable(problem, modules, units, unit_dev)
    by_module = {m: int(unit_dev[units.unit_of[v]]) for v, m in enumerate(modules) if m is not None}
    # accelerate's main device: the first of the map's devices (for indices, the smallest). The
    # root's hook moves the root module's own tensors there whatever their keys say, so under
    # accelerate's rule their keys say it and the nodes holding them run there.
    main = min(by_module.values(), default=0) if rule == "accelerate" else None
    tensors: dict[str, list[tuple[str, int]]] = {}  # module -> its own parameters and buffers, with devices
    seen: set[str] = set()
    at_main: list[int] = []
    for v, names in held_tensors(problem).items():
        if modules[v] is None:
            continue
        if main is not None and any("." not in name for name in names):
            at_main.append(v)
        for name in names:
            if name not in seen:
                seen.add(name)
                owner, _, leaf = name.rpartition(".")
                tensors.setdefault(owner, []).append((leaf, by_module[modules[v]] if owner or main is None else main))
    rank = first_seen(problem, modules)
    known = (problem.meta or {}).get("module_classes") or {}
    dmap, covered, tensor_keys = compress(by_module, tensors, rank, known)
    entry = entry_modules(dmap, tensor_keys, by_module, rank)
    free = np.array([m is None or m not in covered for m in modules], dtype=bool)
    placement = np.zeros(problem.n_nodes, dtype=np.int64)
    for v, m in enumerate(modules):
        if not free[v]:
            placement[v] = by_module[m]
    for group in [g for g in problem.groups if any(v in at_main for v in g)] + [[v] for v in at_main]:
        placement[list(group)] = main
        free[list(group)] = False
    placement = follow_inputs(problem, placement, free)
    run = None
    if rule == "accelerate":
        run = sequential_run(problem, placement)
        scored = evaluate(problem, placement, run.start, solver=f"export-{rule}", memory_model=model)
    elif rule == "concurrent":
        scored = evaluate(problem, placement, solver=f"export-{rule}", memory_model=model)
    else:
        raise ExportError(f"rule={rule!r}; use one of {', '.join(RULES)}")
    found = violations(problem, scored)
    return ModulePlan(device_map=dmap, placement=placement, result=scored, memory_model=model, fits=not found,
                      original_makespan=original, rule=rule, run=run, split_modules=split, problems=found,
                      method=method, tensor_keys=tensor_keys, entry_modules=entry, kept_whole=kept_whole(problem))


def device_map(problem: Problem, result: Result | Mapping[str, str] | np.ndarray, *,
               values: str = "index", depth: int | str | None = None) -> dict[str, Any]:
    """The accelerate/transformers ``device_map`` of the fastest module-level plan as accelerate runs it.

    ``values="index"`` gives device indices (what ``accelerate`` expects for GPUs);
    ``values="id"`` gives optpart device ids. Use :func:`module_plan` to see the plan's
    time as accelerate runs it and whether it fits.

    Parameters
    ----------
    problem, result
        As in :func:`placement_map`.
    values : {"index", "id"}
        Map values as device indices or as optpart device ids.
    depth
        As in :func:`module_plan`.

    Returns
    -------
    dict
        Module (or tensor) path to device, in the order modules first run.

    Examples
    --------
    >>> import optpart
    >>> p = optpart.Problem.build(
    ...     nodes=[{"id": "a", "time": 1, "memory": 3, "module": "layers.0"},
    ...            {"id": "b", "time": 1, "memory": 3, "module": "layers.1"}],
    ...     edges=[{"src": "a", "dst": "b", "bytes": 8}]).with_devices(2, memory=4)
    >>> device_map(p, {"a": "dev0", "b": "dev1"})
    {'layers.0': 0, 'layers.1': 1}
    >>> device_map(p.with_devices(2, memory=8), {"a": "dev0", "b": "dev1"})  # one device: no move
    {'': 0}
    """
    if values not in ("index", "id"):
        raise ExportError(f"values={values!r}; use 'index' or 'id'")
    plan = module_plan(problem, result, depth=depth)
    if values == "id":
        return {k: problem.device_ids[d] for k, d in plan.device_map.items()}
    return dict(plan.device_map)
