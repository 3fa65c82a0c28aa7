"""The closest module-consistent plan to an operator placement, and its device map.

See :mod:`optpart.export` for the method.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from ..errors import OptpartError
from ..evaluate import evaluate, time_tolerance, violations
from ..model.constraints import Constraints
from ..model.problem import Problem
from ..result import Result
from .search import fullness, memory_advice, repair_stages
from .stages import pipeline_modules, stage_candidates, unit_order, untied
from .tree import Units, compress, entry_modules, first_seen, node_modules, owned_tensor, split_modules

__all__ = ["ExportError", "ModulePlan", "module_plan", "pipeline_plan", "device_map", "placement_map"]


class ExportError(OptpartError):
    """A placement cannot be exported in the requested form (not a pipeline, no module metadata)."""

@dataclass
class ModulePlan:
    """A module-consistent version of a placement, re-scored by the evaluator.

    ``device_map``: ``{module path: device}`` in the order modules first run (node order);
    ``placement``: a device index per node under that map; ``result``: the map's
    plan scored on the canonical schedule under ``memory_model``; ``fits``: whether
    it respects memory and constraints (``problems`` lists what it breaks);
    ``original_makespan``: the makespan of the placement it came from; ``split_modules``:
    modules that the original placement spread over several devices; ``method``:
    ``"majority"`` or ``"re-solved"`` (see the module docstring); ``tensor_keys``: keys of
    ``device_map`` that name a parameter or buffer, not a module; ``entry_modules``: for each
    module key, the module that runs first under it (a container such as a ``ModuleList``
    is never called, so a pipeline stage begins at its first child that runs); ``shared``:
    parameters used by modules on different devices, each with those modules (a pipeline plan
    only: ``torch.distributed.pipelining`` replicates them, see :mod:`optpart.export.stages`);
    ``advice``: for a plan that does not fit, one line with the memory at which it would.
    """

    device_map: dict[str, Any]
    placement: np.ndarray
    result: Result
    memory_model: str
    fits: bool
    original_makespan: float
    split_modules: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    method: str = "majority"
    tensor_keys: set[str] = field(default_factory=set)
    entry_modules: dict[str, str] = field(default_factory=dict)
    shared: list[tuple[str, list[str]]] = field(default_factory=list)
    advice: str = ""

    @property
    def makespan(self) -> float:
        return self.result.makespan

    def summary(self) -> str:
        """One line: both makespans, the price of the coarser plan, and whether it fits.

        Returns
        -------
        str
        """
        from ..units import format_time

        orig, new = self.original_makespan, self.makespan
        price = (new - orig) / orig if orig > 0 else 0.0
        fit = "fits" if self.fits else "DOES NOT FIT: " + "; ".join(self.problems[:3])
        return (f"device map: {len(self.device_map)} entries ({self.method}), makespan {format_time(new)} vs "
                f"{format_time(orig)} for the operator placement ({price:+.1%}), {self.memory_model} memory {fit}")

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

        used = self.result.memory_peak if self.memory_model == "peak" else self.result.memory_static
        return [f"  {did}: {format_bytes(float(u))} of {format_bytes(float(c))} ({self.memory_model})"
                for did, u, c in zip(problem.device_ids, used.tolist(), problem.device_memory.tolist())]

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

def _follow_inputs(problem: Problem, placement: np.ndarray, free: np.ndarray) -> np.ndarray:
    """Place every free node on the device of its heaviest predecessor edge, else of its heaviest successor."""
    p = placement.copy()
    done = ~free
    allowed = problem.allowed
    src, dst, eb = problem.edge_src, problem.edge_dst, problem.edge_bytes

    def pick(v: int, edges: np.ndarray, ends: np.ndarray) -> bool:
        best, best_b = -1, -1.0
        for e in edges.tolist():
            u = int(ends[e])
            if done[u] and allowed[v, p[u]] and eb[e] > best_b:
                best, best_b = int(p[u]), float(eb[e])
        if best >= 0:
            p[v] = best
            done[v] = True
        return best >= 0

    for v in problem.topo.tolist():
        if not done[v]:
            pick(v, problem.in_edges[problem.in_ptr[v]:problem.in_ptr[v + 1]], src)
    for v in problem.topo[::-1].tolist():
        if not done[v]:
            pick(v, problem.out_edges[problem.out_ptr[v]:problem.out_ptr[v + 1]], dst)
    for v in np.flatnonzero(~done).tolist():
        p[v] = int(np.flatnonzero(allowed[v])[0]) if allowed[v].any() else 0
    # A colocation group moves as one: with its module members (one unit, so one device), else
    # to the device most of its members chose.
    for members in problem.groups:
        if free[members].any() and np.unique(p[members]).size > 1:
            fixed = members[~free[members]]
            p[members] = int(p[fixed[0]]) if fixed.size else int(np.bincount(p[members]).argmax())
    return p

def module_plan(problem: Problem, result: Result | Mapping[str, str] | np.ndarray, *,
                resolve: bool = True, depth: int | str | None = None, solver: str = "heuristic",
                seed: int = 0) -> ModulePlan:
    """The closest module-consistent plan to ``result`` (see the module docstring).

    Parameters
    ----------
    problem : Problem
        The problem the placement is for; its nodes need ``module`` metadata.
    result : Result, {node id: device id} or array of device indices
        The operator placement.
    resolve : bool
        When the majority plan breaks memory, re-solve with every module's operators
        colocated (with ``solver``) and keep that plan if it fits.
    depth : int, optional
        Place whole modules no deeper than this many path components (``3`` keeps each
        ``transformer.h.N`` block of GPT-2 whole): a coarser map than the placement asks
        for, scored the same way. ``"auto"``: the smallest depth whose plan fits and is as fast
        as the default one (the default plan when no depth is). Default: as fine as the
        placement needs.
    solver, seed : str, int
        The solver (and its seed) of the re-solve.

    Returns
    -------
    ModulePlan
        The plan, scored; ``fits`` False (with ``problems`` and ``method`` saying why) when
        no module-consistent plan was found within memory.

    Raises
    ------
    ExportError
        When no node carries module metadata, or a module's nodes are pinned apart.
    """
    if depth == "auto":
        return _coarsest(problem, result, resolve=resolve, solver=solver, seed=seed)
    placement = _placement_of(problem, result)
    model = _memory_model(problem)
    original = _original_makespan(problem, result, placement, model)
    modules = node_modules(problem)
    if all(m is None for m in modules):
        raise ExportError(f"'{problem.name}' has no node with 'module' metadata; a device map needs a problem "
                          "imported from PyTorch (optpart import package.module:function)")
    split = split_modules(problem, modules, placement)
    if depth is not None:
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            raise ExportError(f"depth={depth!r} must be an integer >= 1 (module path components) or 'auto'")
        modules = [None if m is None else ".".join(m.split(".")[:depth]) for m in modules]
    units = Units(problem, modules)
    unit_dev = _majority(problem, units, placement)
    plan = _build(problem, modules, units, unit_dev, model, original, split, "majority")
    if plan.fits or not resolve:
        if not plan.fits:
            plan.advice = "this device map does not fit: " + memory_advice(problem, _used(plan), model)
        return plan
    alt, why = _resolve(problem, modules, units, model, solver, seed)
    tried = [plan]
    if alt is not None:
        plan2 = _build(problem, modules, units, alt, model, original, split, "re-solved")
        if plan2.fits:
            return plan2
        why = "; ".join(plan2.problems[:1])
        tried.append(plan2)
    return _fallback(problem, placement, modules, units, model, original, split, tried, depth,
                     f"re-solving with modules colocated ({solver}) did not fit: {why}")

def _fallback(problem: Problem, placement: np.ndarray, modules, units: Units, model: str, original: float,
              split: list[str], tried: list[ModulePlan], depth: int | None, why: str) -> ModulePlan:
    """The fastest fitting plan among ``tried``, coarser depths and contiguous stages (see
    :mod:`optpart.export.search`), else the one that overflows least, with its memory advice."""
    if depth is None:
        deepest = max((m.count(".") + 1 for m in modules if m is not None), default=1)
        for d in range(deepest - 1, 0, -1):
            cut = [None if m is None else ".".join(m.split(".")[:d]) for m in modules]
            u = Units(problem, cut)
            p = _build(problem, cut, u, _majority(problem, u, placement), model, original, split,
                       f"majority at depth {d}")
            tried.append(p)
    tried.append(_stage_plan(problem, modules, units, model, original, split, "contiguous stages"))
    fitting = [p for p in tried if p.fits]
    if fitting:
        best = min(fitting, key=lambda p: p.makespan)
        best.method = f"{best.method}, since the majority plan does not fit and {why}"
        return best
    best = min(tried, key=lambda p: (_overflow(problem, p), p.makespan))
    best.method = f"{best.method}, the least overflow of {len(tried)} module-level plans; {why}"
    best.advice = "no device map fits these devices: " + memory_advice(problem, _used(best), model)
    return best

def _used(plan: ModulePlan) -> np.ndarray:
    return plan.result.memory_peak if plan.memory_model == "peak" else plan.result.memory_static

def _overflow(problem: Problem, plan: ModulePlan) -> float:
    return float(np.max(fullness(problem, _used(plan)))) if not plan.fits else 0.0

def _stage_plan(problem: Problem, modules, units: Units, model: str, original: float, split: list[str],
                method: str) -> ModulePlan:
    """The best contiguous-stage plan (fits first, then makespan), the best candidates repaired against memory."""
    cache: dict[tuple[int, ...], ModulePlan] = {}

    def build(unit_dev: np.ndarray) -> ModulePlan:
        key = tuple(unit_dev.tolist())
        if key not in cache:
            cache[key] = _build(problem, modules, units, unit_dev, model, original, split, method)
        return cache[key]

    def score(unit_dev: np.ndarray) -> tuple[np.ndarray, float]:
        p = build(unit_dev)
        return fullness(problem, _used(p)), p.makespan

    candidates = stage_candidates(problem, units, modules)
    if not candidates:
        raise ExportError(f"'{problem.name}' has no module to place in a pipeline stage")
    ranked = sorted(candidates, key=lambda c: (_overflow(problem, build(c)), build(c).makespan))
    if not build(ranked[0]).fits:  # repair the three that overflow least against memory
        order = unit_order(problem, units, modules)
        for c in ranked[:3]:
            if build(repair_stages(order, c, score)).fits:
                break
    return min(cache.values(), key=lambda p: (_overflow(problem, p), p.makespan))

def _coarsest(problem: Problem, result, *, resolve: bool, solver: str, seed: int) -> ModulePlan:
    """The plan at the smallest depth that fits and loses nothing against the default plan."""
    fine = module_plan(problem, result, resolve=resolve, solver=solver, seed=seed)
    deepest = max((m.count(".") + 1 for m in node_modules(problem) if m is not None), default=1)
    for depth in range(1, deepest):
        plan = module_plan(problem, result, resolve=False, depth=depth)
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
    modules = pipeline_modules(problem, depth)
    if all(m is None for m in modules):
        raise ExportError(f"'{problem.name}' has no node with 'module' metadata")
    relaxed, shared = untied(problem, modules)
    plan = _stage_plan(relaxed, modules, Units(relaxed, modules), model, original, [], "pipeline")
    if not plan.fits:
        plan.advice = "no pipeline of contiguous stages fits these devices: " + memory_advice(problem, _used(plan), model)
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

def _resolve(problem: Problem, modules, units: Units, model: str, solver: str,
             seed: int) -> tuple[np.ndarray | None, str]:
    """Unit devices from a re-solve with every unit's operators colocated (None without a
    solution), and the solver's message."""
    from ..solvers.registry import solve

    groups = [tuple(problem.node_ids[v] for v in units.members[u].tolist()) for u in range(units.n)]
    groups += _follower_pairs(problem, np.array([m is None for m in modules], dtype=bool))
    c = problem.constraints
    constraints = Constraints(pin=dict(c.pin), forbid=dict(c.forbid),
                              colocate=tuple(c.colocate) + tuple(g for g in groups if len(g) > 1))
    p2 = problem.with_devices(list(problem.devices), links=problem.links, constraints=constraints)
    r = solve(p2, solver, seed=seed, memory_model=model)
    if not r.ok:
        return None, r.message or f"status {r.status.value}"
    return np.array([int(r.placement[units.members[u][0]]) for u in range(units.n)],
                    dtype=np.int64), r.message

def _follower_pairs(problem: Problem, free: np.ndarray) -> list[tuple[str, str]]:
    """``(node, leader)`` for every free node: the neighbour it will run beside under accelerate.

    The same rule as :func:`_follow_inputs` (heaviest input edge, else heaviest output edge),
    so a re-solve with these pairs colocated is scored as the exported map will run.
    """
    ids = problem.node_ids
    out = []
    for v in np.flatnonzero(free).tolist():
        edges, ends = problem.in_edges[problem.in_ptr[v]:problem.in_ptr[v + 1]], problem.edge_src
        if edges.size == 0:
            edges, ends = problem.out_edges[problem.out_ptr[v]:problem.out_ptr[v + 1]], problem.edge_dst
        if edges.size:
            e = int(edges[int(np.argmax(problem.edge_bytes[edges]))])
            out.append((ids[v], ids[int(ends[e])]))
    return out

def _build(problem: Problem, modules, units: Units, unit_dev: np.ndarray, model: str, original: float,
           split: list[str], method: str) -> ModulePlan:
    by_module = {m: int(unit_dev[units.unit_of[v]]) for v, m in enumerate(modules) if m is not None}
    direct_params: dict[str, list[str]] = {}  # module -> its own parameters and buffers
    for nid, meta in zip(problem.node_ids, problem.node_meta or []):
        name = owned_tensor(nid, meta)
        if name is not None:
            owner = name.rsplit(".", 1)[0] if "." in name else ""
            direct_params.setdefault(owner, []).append(name.rsplit(".", 1)[-1])
    rank = first_seen(problem, modules)
    dmap, covered, tensor_keys = compress(by_module, direct_params, rank)
    entry = entry_modules(dmap, tensor_keys, by_module, rank)
    free = np.array([m is None or m not in covered for m in modules], dtype=bool)
    placement = np.zeros(problem.n_nodes, dtype=np.int64)
    for v, m in enumerate(modules):
        if not free[v]:
            placement[v] = by_module[m]
    placement = _follow_inputs(problem, placement, free)
    scored = evaluate(problem, placement, solver=f"export-{method}", memory_model=model)
    found = violations(problem, scored)
    return ModulePlan(device_map=dmap, placement=placement, result=scored, memory_model=model, fits=not found,
                      original_makespan=original, split_modules=split, problems=found, method=method,
                      tensor_keys=tensor_keys, entry_modules=entry)

def device_map(problem: Problem, result: Result | Mapping[str, str] | np.ndarray, *,
               values: str = "index", resolve: bool = True, depth: int | str | None = None) -> dict[str, Any]:
    """The accelerate/transformers ``device_map`` of the closest module-consistent plan.

    ``values="index"`` gives device indices (what ``accelerate`` expects for GPUs);
    ``values="id"`` gives optpart device ids. Use :func:`module_plan` to see the plan's
    makespan and whether it fits.

    Parameters
    ----------
    problem, result
        As in :func:`placement_map`.
    values : {"index", "id"}
        Map values as device indices or as optpart device ids.
    resolve, depth
        As in :func:`module_plan`.

    Returns
    -------
    dict
        Module (or tensor) path to device, in the order modules first run.

    Examples
    --------
    >>> import optpart
    >>> p = optpart.Problem.build(
    ...     nodes=[{"id": "a", "time": 1, "memory": 1, "module": "layers.0"},
    ...            {"id": "b", "time": 1, "memory": 1, "module": "layers.1"}],
    ...     edges=[{"src": "a", "dst": "b", "bytes": 0}]).with_devices(2, memory=4)
    >>> device_map(p, {"a": "dev0", "b": "dev1"})
    {'layers.0': 0, 'layers.1': 1}
    """
    if values not in ("index", "id"):
        raise ExportError(f"values={values!r}; use 'index' or 'id'")
    plan = module_plan(problem, result, resolve=resolve, depth=depth)
    if values == "id":
        return {k: problem.device_ids[d] for k, d in plan.device_map.items()}
    return dict(plan.device_map)
