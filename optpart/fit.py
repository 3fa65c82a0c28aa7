"""Will it fit? The smallest device capacity, or device count, at which a solver places a graph.

:func:`min_capacity` bisects (geometrically, to a relative tolerance, 1% by default) over
one capacity shared by ``devices`` devices, solving at each probe; :func:`min_devices`
searches the device count for one capacity (doubling, then bisection). Both return a
:class:`FitResult` with the answer, the solver's result there, every probe, and a
**proven** lower bound (:func:`capacity_lower_bound`, :func:`devices_lower_bound`) that
holds for *any* placement and schedule, so the user sees how far the solver's answer can
be from the truth.

A probe counts as found only when the solver's placement fits under the requested
memory model (checked here with :func:`optpart.model.memory.fits` on the evaluator's figures).
The search assumes that more room never hurts the solver; a heuristic may break that,
so the answer is "the smallest probed value at which it found a placement", not a proof
of minimality. Budgets are deterministic: the heuristic runs with ``effort=0`` during the
search (then once with its default effort at the answer, kept if it still fits), and no
wall-clock limit is set unless ``time_limit`` is given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .errors import OptpartError
from .model.memory import fits
from .model.screening import live_at_start, running_need
from .model.devices import Device, Links
from .model.problem import Problem
from .result import Result
from .units import format_bytes
from .api import solve

__all__ = ["FitResult", "capacity_lower_bound", "devices_lower_bound", "min_capacity", "min_devices", "on_devices"]



@dataclass
class FitResult:
    """The answer of :func:`min_capacity` / :func:`min_devices`.

    ``capacity`` (bytes per device) and ``devices`` describe where ``result`` was found
    (``None`` when the search found nothing); ``lower_bound`` is the proven bound on the
    searched quantity (bytes for min_capacity, a device count for min_devices);
    ``probes`` lists ``(devices, capacity, found)`` in search order.
    """

    capacity: float | None
    devices: int | None
    lower_bound: float
    result: Result | None
    memory_model: str
    solver: str
    searched: str
    reason: str = ""
    probes: list[tuple[int, float, bool]] = field(default_factory=list)

    def to_dict(self, problem: Problem | None = None) -> dict[str, Any]:
        """JSON-ready: ``capacity``, ``devices``, ``lower_bound``, ``result`` (the optpart-result
        document, or None), plus ``memory_model``, ``solver``, ``searched``, ``reason``, ``probes``.

        Parameters
        ----------
        problem : Problem, optional
            The problem searched; needed to write ``result`` (None writes ``result: null``).

        Returns
        -------
        dict
            The fields above; an infinite lower bound (nothing fits) is written as None.
        """
        import json

        from .formats.optpart_json import result_to_json
        res = None
        if self.result is not None and problem is not None:
            res = json.loads(result_to_json(self.result, problem, include_wall_time=False))
        lb = self.lower_bound if math.isfinite(self.lower_bound) else None  # None: no value fits
        return {"capacity": self.capacity, "devices": self.devices, "lower_bound": lb,
                "result": res, "memory_model": self.memory_model, "solver": self.solver,
                "searched": self.searched, "reason": self.reason,
                "probes": [{"devices": k, "capacity": c, "found": ok} for k, c, ok in self.probes]}


def _model(problem: Problem, memory_model: str | None) -> str:
    if memory_model is None:  # the default everywhere (equal to static on graphs without the split)
        return "peak"
    if memory_model not in ("static", "peak"):
        raise OptpartError(f"memory_model={memory_model!r}; use 'static' or 'peak'")
    return memory_model


def capacity_lower_bound(problem: Problem, devices: int, memory_model: str | None = None) -> float:
    """Bytes per device that any placement on ``devices`` equal devices needs (proven).

    Static: the largest node or colocation group, and the total over ``devices``. Peak:
    the largest running need (:func:`optpart.model.screening.running_need`: what is
    surely live when a node starts), the parameters over ``devices`` (held all step), and
    the parameters of the nodes pinned to one device.

    Parameters
    ----------
    problem : Problem
        The graph (its devices are ignored).
    devices : int
        How many equal devices share the graph.
    memory_model : {"static", "peak"}, optional
        Default: peak, as everywhere (equal to static on graphs without the param/output/temp split).

    Returns
    -------
    float
        Bytes per device below which no placement fits under ``memory_model``.
    """
    model = _model(problem, memory_model)
    if problem.n_nodes == 0:
        return 0.0
    held = problem.param_bytes if model == "peak" else problem.memory
    bounds = [float(held.sum()) / devices]
    if model == "peak":
        bounds.append(float(running_need(problem).max()))
        live = live_at_start(problem)
        if live is not None:
            bounds.append(float(live.max()) / devices)
    else:
        bounds.append(float(problem.memory.max()))
        bounds += [float(problem.memory[g].sum()) for g in problem.groups]
    pinned = problem.pin >= 0
    if pinned.any():
        bounds.append(float(np.bincount(problem.pin[pinned], weights=held[pinned]).max()))
    return max(bounds)


def devices_lower_bound(problem: Problem, capacity: float, memory_model: str | None = None) -> tuple[int, str]:
    """``(count, reason)``: no fewer devices of ``capacity`` bytes can hold the graph (proven);
    count 0 with the reason when no count can (a node needs more than ``capacity``).

    Parameters
    ----------
    problem : Problem
        The graph (its devices are ignored).
    capacity : float
        Bytes per device.
    memory_model : {"static", "peak"}, optional
        Default: peak, as everywhere (equal to static on graphs without the param/output/temp split).

    Returns
    -------
    count : int
        The proven minimum device count (1 for an empty graph, 0 when none suffices).
    reason : str
        Why, in one line (the node or total that sets the bound).
    """
    model = _model(problem, memory_model)
    if problem.n_nodes == 0:
        return 1, ""
    if model == "peak":
        need = running_need(problem)
        v = int(np.argmax(need))
        if not fits(float(need[v]), capacity):
            return 0, (f"node '{problem.node_ids[v]}' needs {format_bytes(need[v])} while it runs, more than "
                       f"{format_bytes(capacity)}")
        live = live_at_start(problem)
        total = float(problem.param_bytes.sum()) if live is None else float(live.max())
    else:
        sizes = [problem.memory] + [np.asarray([problem.memory[g].sum()]) for g in problem.groups]
        big = max(float(s.max()) for s in sizes)
        if not fits(big, capacity):
            return 0, f"a node or colocation group needs {format_bytes(big)}, more than {format_bytes(capacity)}"
        total = float(problem.memory.sum())
    if capacity <= 0:
        return (1 if total <= 0 else 0), ""
    k = max(1, math.ceil(total / capacity))
    while k > 1 and fits(total, (k - 1) * capacity):  # ceil's float noise, under the one fit rule
        k -= 1
    return k, ""


def on_devices(problem: Problem, k: int, capacity: float) -> Problem:
    """``problem`` on ``k`` devices of ``capacity`` bytes each (the file's device ids and speeds kept
    where they exist, its links, else the default links).

    Parameters
    ----------
    problem : Problem
        The graph, with or without devices.
    k : int
        Device count.
    capacity : float
        Bytes per device (every device gets the same).

    Returns
    -------
    Problem
        The problem on the ``k`` devices; link overrides naming a dropped device go.
    """
    old = problem.devices
    speeds = [d.speed for d in old] if len(old) == k else [1.0] * k
    devs = [Device(old[i].id if i < len(old) else f"dev{i}", float(capacity), speeds[i]) for i in range(k)]
    links = problem.links
    if links is not None and len(old) > k:
        keep = {d.id for d in devs}
        links = Links(links.latency, links.bandwidth, tuple(o for o in links.pairs if o.src in keep and o.dst in keep))
    return problem.with_devices(devs, links=links)


class _Prober:
    """Solves at one (devices, capacity) and says whether the answer fits the model."""

    def __init__(self, problem: Problem, solver: str, model: str, seed: int, time_limit: float | None,
                 options: dict[str, Any], micro_batches: int | None = None,
                 report: Callable[[str], None] | None = None) -> None:
        self.problem, self.solver, self.model, self.report = problem, solver, model, report
        self.seed, self.time_limit, self.micro_batches = seed, time_limit, micro_batches
        from .pipeline.fit import solver_parameters  # gpipe/1f1b are pipelined orders, not registry solvers

        params = solver_parameters(solver)
        self.options = dict(options)
        if "memory_model" in params and "memory_model" not in self.options:
            self.options["memory_model"] = model
        self.quick = dict(self.options)
        if "effort" in params and "effort" not in options:
            self.quick["effort"] = 0
        self.probes: list[tuple[int, float, bool]] = []

    def ok(self, q: Problem, r: Result) -> bool:
        used = r.memory_peak if self.model == "peak" else r.memory_static
        return bool(r.ok and fits(used, q.device_memory).all())

    def __call__(self, k: int, capacity: float, quick: bool = True) -> tuple[Problem, Result | None]:
        q = on_devices(self.problem, k, capacity)
        r = solve(q, self.solver, time_limit=self.time_limit, seed=self.seed, micro_batches=self.micro_batches,
                  **(self.quick if quick else self.options))
        good = self.ok(q, r)
        if quick:
            self.probes.append((k, float(capacity), good))
        if self.report is not None:
            self.report(f"{'probe ' + str(len(self.probes)) if quick else 'final solve'}: {k} x "
                        f"{format_bytes(float(capacity))} {'fits' if good else 'does not fit'}")
        return q, (r if good else None)

    def polish(self, k: int, capacity: float, found: Result) -> Result:
        """The solver's full-effort answer at the result's point, when it differs and still fits."""
        if self.quick == self.options:
            return found
        _, r = self(k, capacity, quick=False)
        return r if r is not None and r.makespan <= found.makespan else found


def _geometric_midpoint(lo: int, hi: int) -> int:
    """The integer near ``sqrt(lo * hi)`` strictly between ``lo`` and ``hi`` (halving from 0)."""
    mid = math.ceil(math.sqrt(max(lo, 1) * hi)) if lo > 0 else math.ceil(hi / 2)
    return min(max(mid, lo + 1), hi - 1)


def _bisect(found: Callable[[int], Result | None], lo: int, best: tuple[int, Result],
            midpoint: Callable[[int, int], int], done: Callable[[int, int], bool]) -> tuple[int, Result]:
    """Bisection between ``lo`` (known to fail) and ``best[0]`` (where ``best[1]`` was found).

    Probes ``found(midpoint(lo, hi))`` until ``done(lo, hi)`` and returns the smallest
    value probed with a placement and that placement.
    """
    hi = best[0]
    while not done(lo, hi):
        mid = midpoint(lo, hi)
        r = found(mid)
        if r is not None:
            hi, best = mid, (mid, r)
        else:
            lo = mid
    return best


def min_capacity(problem: Problem, devices: int, solver: str = "heuristic", *, memory_model: str | None = None,
                 tolerance: float = 0.01, seed: int = 0, time_limit: float | None = None,
                 options: dict[str, Any] | None = None, micro_batches: int | None = None,
                 report: Callable[[str], None] | None = None) -> FitResult:
    """The smallest capacity (bytes, the same on every device, to ``tolerance``) at which
    ``solver`` places ``problem`` on ``devices`` devices under ``memory_model`` (default:
    peak, as everywhere). See the module doc.

    Parameters
    ----------
    problem : Problem
        The graph (its own devices' capacities are ignored).
    devices : int
        Device count (>= 1).
    solver : str, optional
        Registered solver name.
    memory_model : {"static", "peak"}, optional
        The model a placement must fit.
    tolerance : float, optional
        Relative precision of the answer (> 0; 0.01 is 1%).
    seed : int, optional
        Passed to the solver.
    time_limit : float, optional
        Seconds per probe; None sets no wall-clock limit (deterministic).
    options : dict, optional
        Solver options (see ``optpart solvers``).
    micro_batches : int, optional
        Fit one step of that many micro-batches (docs/model.md section 7): every probe is a
        pipelined solve and the bound is the unrolled step's (default: the file's recorded M).
    report : callable, optional
        Called with one line after every probe (``"probe 3: 4 x 1.25 GiB fits"``): the CLI's
        progress display.

    Returns
    -------
    FitResult
        ``capacity`` in bytes (None when nothing was found), the solver's result there,
        every probe and the proven :func:`capacity_lower_bound`.
    """
    if not isinstance(devices, (int, np.integer)) or devices < 1:
        raise OptpartError(f"devices={devices!r} must be an integer >= 1")
    if not tolerance > 0:
        raise OptpartError(f"tolerance={tolerance!r} must be > 0")
    model = _model(problem, memory_model)
    probe = _Prober(problem, solver, model, seed, time_limit, options or {}, micro_batches, report)
    from .pipeline.fit import bound_problem

    judged = bound_problem(problem, micro_batches)  # the unrolled step when pipelined
    lb = capacity_lower_bound(judged, devices, model)
    # One device holding everything fits under both models (no received copies).
    total = float((judged.param_bytes + judged.output_bytes + judged.temp_bytes).sum()) if model == "peak" \
        else float(judged.memory.sum())
    hi = max(math.ceil(total), math.ceil(lb), 1)
    best = None
    for _ in range(4):  # a solver that misses where one device would do gets more room
        _, r = probe(devices, hi)
        if r is not None:
            best = (hi, r)
            break
        hi *= 2
    if best is None:
        return FitResult(None, devices, lb, None, model, solver, "capacity", reason=(
            f"{solver} found no placement up to {hi // 2} bytes per device"), probes=probe.probes)
    lo = max(math.ceil(lb) - 1, 0)  # largest capacity known not to work (lb itself may)
    if lo < hi:
        _, r = probe(devices, max(math.ceil(lb), 1))
        if r is not None:
            best = (max(math.ceil(lb), 1), r)
            hi = best[0]
    cap, r = _bisect(lambda c: probe(devices, c)[1], lo, best, _geometric_midpoint,
                     lambda lo, hi: hi <= max(lo, 1) * (1 + tolerance) or hi - lo <= 1)
    r = probe.polish(devices, cap, r)
    return FitResult(float(cap), devices, lb, r, model, solver, "capacity", probes=probe.probes)


def min_devices(problem: Problem, memory: float, solver: str = "heuristic", *, memory_model: str | None = None,
                max_devices: int | None = None, seed: int = 0, time_limit: float | None = None,
                options: dict[str, Any] | None = None, micro_batches: int | None = None,
                report: Callable[[str], None] | None = None) -> FitResult:
    """The smallest number of devices of ``memory`` bytes each on which ``solver`` places
    ``problem`` (doubling from the proven lower bound, then bisection; at most
    ``max_devices``, default the node count).

    Parameters
    ----------
    problem : Problem
        The graph (its own device count is ignored).
    memory : float
        Bytes per device (> 0).
    solver : str, optional
        Registered solver name.
    memory_model : {"static", "peak"}, optional
        The model a placement must fit.
    max_devices : int, optional
        The largest count probed (default: the node count).
    seed : int, optional
        Passed to the solver.
    time_limit : float, optional
        Seconds per probe; None sets no wall-clock limit.
    options : dict, optional
        Solver options.
    micro_batches, report : optional
        As in :func:`min_capacity`.

    Returns
    -------
    FitResult
        ``devices`` (None when no count up to ``max_devices`` worked), the result there,
        every probe and the proven :func:`devices_lower_bound`.
    """
    if not memory > 0:
        raise OptpartError(f"memory={memory!r} must be a positive number of bytes")
    model = _model(problem, memory_model)
    from .pipeline.fit import bound_problem

    lb, reason = devices_lower_bound(bound_problem(problem, micro_batches), memory, model)
    limit = max_devices if max_devices is not None else max(1, problem.n_nodes)
    if lb == 0:
        return FitResult(float(memory), None, math.inf, None, model, solver, "devices",
                         reason=f"no device count fits: {reason}")
    probe = _Prober(problem, solver, model, seed, time_limit, options or {}, micro_batches, report)
    lo, k, best = lb - 1, lb, None
    while k <= limit:
        _, r = probe(k, memory)
        if r is not None:
            best = (k, r)
            break
        lo = k
        k = min(2 * k, limit) if k < limit else limit + 1
    if best is None:
        return FitResult(float(memory), None, float(lb), None, model, solver, "devices",
                         reason=f"{solver} found no placement with up to {limit} devices", probes=probe.probes)
    k, r = _bisect(lambda k: probe(k, memory)[1], lo, best, lambda lo, hi: (lo + hi) // 2,
                   lambda lo, hi: hi - lo <= 1)
    r = probe.polish(k, memory, r)
    return FitResult(float(memory), k, float(lb), r, model, solver, "devices", probes=probe.probes)
