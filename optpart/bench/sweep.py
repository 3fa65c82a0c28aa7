"""Sweeps: the cross product instances x device counts x memory scales x solvers, run and resumed.

:func:`plan_sweep` turns the instances and settings into a deterministic list of
:class:`RunSpec` (order: instance, device count, memory scale, solver), each with
its identity ``(problem_hash, solver, options)``. :func:`run_sweep` skips the
identities already in the database, runs the others through an executor
(:mod:`optpart.bench.executors`) with at most ``executor.capacity`` runs in flight,
and writes each finished run at once from this process, the only writer.

Devices and memory (documented in ``docs/bench.md``):

* the device count ``K`` of a setting replaces the instance's (devices and links go
  through :func:`optpart.model.devices.resolve_devices`, the rules of ``optpart solve``);
  without ``devices`` the instance keeps its own;
* memory scale ``s``: each device gets ``s`` times its capacity; a device with unlimited
  capacity gets ``s`` times the graph's total memory divided by ``K`` (so ``s = 1`` is
  a perfectly balanced split and ``s < 1`` is infeasible by total memory).

A run that raises is recorded with status ``error`` and the exception's text; it does
not stop the sweep. Rerunning skips error rows too, unless ``retry_errors`` is set.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence, TextIO

from .. import __version__
from ..hardware import with_hardware
from ..errors import OptpartError, SolverError
from ..formats import load, problem_to_json
from ..model.devices import Device
from ..model.devices import with_resolved_devices
from ..model.problem import Problem
from ..api import solve
from ..pipeline.schedules import ORDER_NAMES
from ..solvers.registry import SOLVERS, load_plugin_payload, plugin_payload, solver_info
from . import db as _db
from .executors import Executor, InlineExecutor, make_executor
from .progress_line import Progress

__all__ = ["RunSpec", "SweepOutcome", "scale_memory", "problem_hash", "check_solvers", "plan_sweep",
           "run_one", "run_sweep", "iter_instances"]

_DEVICE_FLAGS = ("devices", "memory", "speed", "bandwidth", "latency", "device_type", "dtype", "link")
_HARDWARE = ("device_type", "dtype", "link")


@dataclass
class RunSpec:
    """One run of a sweep: a problem with its devices, a solver and its options."""

    problem: Problem
    problem_hash: str
    source: str | None
    solver: str
    options: dict[str, Any]
    devices: int
    memory_scale: float

    @property
    def options_json(self) -> str:
        return _db.options_key(self.options)

    @property
    def key(self) -> tuple[str, str, str]:
        """The identity used for resume: ``(problem_hash, solver, options JSON)``."""
        return (self.problem_hash, self.solver, self.options_json)


@dataclass
class SweepOutcome:
    """What a sweep did: runs planned, skipped (already done), run now, and errors among them."""

    planned: int = 0
    skipped: int = 0
    ran: int = 0
    errors: int = 0
    keys: list[tuple[str, str, str]] = field(default_factory=list)


# ---------------------------------------------------------------------- planning
def scale_memory(problem: Problem, scale: float) -> Problem:
    """``problem`` with each device capacity ``scale`` times its own, or ``scale`` times
    total memory / K for a device with unlimited capacity.

    Parameters
    ----------
    problem : Problem
        A problem with devices.
    scale : float
        The factor (``--memory-scale``).

    Returns
    -------
    Problem
        The same graph, devices and links, capacities scaled.

    Raises
    ------
    OptpartError
        When ``scale`` is not a positive finite number or the problem has no devices.
    """
    if not (0 < scale < math.inf):
        raise OptpartError(f"memory scale {scale!r} must be a positive number")
    if problem.n_devices == 0:
        raise OptpartError(f"'{problem.name}' has no devices to scale")
    share = float(problem.memory.sum()) / problem.n_devices
    devices = [Device(d.id, scale * (d.memory if math.isfinite(d.memory) else share), d.speed)
               for d in problem.devices]
    return problem.with_devices(devices, links=problem.links, constraints=problem.constraints)


def problem_hash(problem: Problem) -> str:
    """SHA-256 (hex) of the problem's optpart JSON bytes: equal problems, equal hashes.

    Parameters
    ----------
    problem : Problem
        The problem of a run (devices included).

    Returns
    -------
    str
        64 hex digits: the run's identity in the results database.
    """
    return hashlib.sha256(problem_to_json(problem).encode("utf-8")).hexdigest()


def check_solvers(names: Sequence[str]) -> list[str]:
    """Canonical solver names, or an error (before any run) for an unknown or missing one.

    Parameters
    ----------
    names : sequence of str
        Solver names or aliases (``--solvers``).

    Returns
    -------
    list of str
        Their registered names, in the order given.

    Raises
    ------
    SolverError
        Naming the solver and listing those installed (and the extra to install).
    """
    if not names:
        raise SolverError("no solver given; installed: " + ", ".join(n for n in sorted(SOLVERS) if SOLVERS[n].installed))
    out: list[str] = []
    for name in names:
        if name in ORDER_NAMES:  # gpipe / 1f1b: pipelined orders of optpart.solve
            out += [name] if name not in out else []
            continue
        info = solver_info(name)  # unknown names raise here
        if not info.installed:
            installed = ", ".join(n for n in sorted(SOLVERS) if SOLVERS[n].installed)
            hint = f" (pip install 'optpart[{info.extra}]')" if info.extra else " (its module is not there yet)"
            raise SolverError(f"solver '{name}' is not installed{hint}; installed: {installed}")
        if info.name not in out:
            out.append(info.name)
    return out


def _device_values(device_args: Mapping[str, Any] | Any, k: int | None) -> dict[str, Any]:
    """Keyword arguments for :func:`resolve_devices`: ``device_args`` (a mapping, or any
    object with those attributes) with the setting's device count."""
    if device_args is None:
        values: dict[str, Any] = {}
    elif isinstance(device_args, Mapping):
        unknown = set(device_args) - set(_DEVICE_FLAGS)
        if unknown:
            raise OptpartError(f"device_args names unknown setting(s) {sorted(map(str, unknown))}; "
                               f"known: {', '.join(_DEVICE_FLAGS[1:])}")
        values = dict(device_args)
    else:
        values = {flag: getattr(device_args, flag, None) for flag in _DEVICE_FLAGS}
    values = {key: value for key, value in values.items() if value is not None}
    values["devices"] = k
    return values


def plan_sweep(instances: Sequence[str | Path | Problem], solvers: Sequence[str], *,
               devices: Sequence[int] | None = None, memory_scales: Sequence[float] = (1.0,),
               time_limit: float | None = None, seed: int = 0,
               solver_options: Mapping[str, Mapping[str, Any]] | None = None,
               device_args: Any = None) -> list[RunSpec]:
    """The runs of a sweep, in a fixed order: instance, device count, memory scale, solver.

    Parameters
    ----------
    instances : paths or Problems
        Problem files (any format :func:`optpart.load` reads) or problems in memory.
    solvers : names
        Checked with :func:`check_solvers` before anything else.
    devices : device counts, optional
        ``None`` keeps each instance's own devices.
    memory_scales : floats
        See :func:`scale_memory`.
    time_limit, seed : solver settings, part of each run's options.
    solver_options : ``{solver: {option: value}}``, optional
        Extra options for one solver.
    device_args : mapping, optional
        ``memory``/``speed``/``bandwidth``/``latency`` for every instance, as
        :func:`optpart.model.devices.resolve_devices` takes them, and ``device_type``/``dtype``/
        ``link`` to price every instance for a device type (:func:`optpart.hardware.with_hardware`).

    Returns
    -------
    list of RunSpec
        One run per instance x solver x device count x memory scale x micro-batch count.
    """
    names = check_solvers(list(solvers))
    solver_options = dict(solver_options or {})
    for key in solver_options:
        if solver_info(key).name not in names:
            raise OptpartError(f"options given for solver '{key}', which is not in the sweep ({', '.join(names)})")
    if devices is not None:
        for k in devices:
            if int(k) < 1:
                raise OptpartError(f"device count {k} must be at least 1")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= 2**31 - 1:
        raise OptpartError(f"seed {seed!r} must be an integer between 0 and {2**31 - 1}")
    scales = [float(s) for s in memory_scales]
    for s in scales:
        if not (0 < s < math.inf):
            raise OptpartError(f"memory scale {s!r} must be a positive number")
    specs: list[RunSpec] = []
    for inst in instances:
        base, source = (inst, None) if isinstance(inst, Problem) else (load(inst), str(inst))
        for k in (list(devices) if devices is not None else [None]):
            values = _device_values(device_args, k)
            if any(key in values for key in _HARDWARE):  # priced for a device type (optpart.hardware)
                with_devices = with_hardware(base, **values)
            else:
                with_devices = with_resolved_devices(base, **values)
            for s in scales:
                problem = scale_memory(with_devices, s)
                digest = problem_hash(problem)
                for name in names:
                    opts = {"time_limit": time_limit, "seed": seed,
                            **dict(solver_options.get(name, {}))}
                    opts = {key: opts[key] for key in sorted(opts) if opts[key] is not None}
                    specs.append(RunSpec(problem, digest, source, name, opts, problem.n_devices, s))
    return specs


# ---------------------------------------------------------------------- one run (in a worker)
def run_one(task: Mapping[str, Any]) -> dict[str, Any]:
    """Solve one run and return the columns it fills; an exception becomes status ``error``.

    Runs in a worker process (or on a Dask worker): it never touches the database.

    Parameters
    ----------
    task : mapping
        ``problem``, ``solver`` and ``options`` (``time_limit`` and ``seed`` among them), and
        ``plugins`` (:func:`optpart.solvers.registry.plugin_payload`: how to register a plugin
        solver in this process).

    Returns
    -------
    dict
        Result columns: status, makespan, lower bound, gap, bytes per device (static and
        peak, as JSON), memory model, wall seconds and message; or status ``error`` with the
        exception's text.
    """
    problem: Problem = task["problem"]
    opts = dict(task["options"])
    t0 = time.perf_counter()
    try:
        load_plugin_payload(task.get("plugins", ()))  # a plugin solver registered in the sweep's process
        result = solve(problem, task["solver"], time_limit=opts.pop("time_limit", None),
                       seed=opts.pop("seed", 0), **opts)
    except Exception as exc:  # recorded, never fatal to the sweep
        return {"status": "error", "wall_seconds": time.perf_counter() - t0,
                "error": f"{type(exc).__name__}: {exc}"}
    has = result.status.has_solution
    memory = None
    if has:
        memory = {d: {"static": float(s), "peak": float(p)} for d, s, p in
                  zip(problem.device_ids, result.memory_static.tolist(), result.memory_peak.tolist())}
    return {
        "status": result.status.value,
        "makespan": float(result.makespan) if has else None,
        "lower_bound": float(result.lower_bound),
        "gap": float(result.gap) if has else None,
        "memory": None if memory is None else _json(memory),
        "memory_model": result.memory_model,
        "wall_seconds": float(result.wall_seconds),
        "message": result.message or None,
    }


def _json(x: Any) -> str:
    return json.dumps(x, sort_keys=True, separators=(",", ":"))


def _row(spec: RunSpec, answer: Mapping[str, Any]) -> dict[str, Any]:
    caps = spec.problem.device_memory
    return {
        "problem_hash": spec.problem_hash, "problem": spec.problem.name, "source": spec.source,
        "n_nodes": spec.problem.n_nodes, "n_edges": spec.problem.n_edges,
        "solver": spec.solver, "options": spec.options_json, "devices": spec.devices,
        "memory_scale": spec.memory_scale,
        "capacity_bytes": float(caps.min()) if caps.size and math.isfinite(caps.min()) else None,
        **answer,
        "version": __version__,
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


# ---------------------------------------------------------------------- the sweep
def run_sweep(specs: Sequence[RunSpec], db_path: str | Path, *, executor: Executor | str | None = None,
              jobs: int = 1, retry_errors: bool = False, progress: TextIO | None = None) -> SweepOutcome:
    """Run every spec not yet in the database at ``db_path``; write each row as it finishes.

    Parameters
    ----------
    specs : sequence of RunSpec
        From :func:`plan_sweep`.
    db_path : str or pathlib.Path
        The SQLite file (created when missing).
    executor : Executor or str, optional
        An :class:`Executor`, or a spec for :func:`make_executor` (``None``/``"local"``: a
        pool of ``jobs`` processes; ``"inline"``; ``"dask://HOST:PORT"``). An executor
        passed in is not closed here.
    jobs : int
        Worker processes of the local pool (default 1).
    retry_errors : bool
        Rerun the runs recorded with status ``error``.
    progress : file-like, optional
        Stream for the progress line (``None``: silent).

    Returns
    -------
    SweepOutcome
        Counts, and the identities of every planned run (for a report on this sweep).
    """
    con = _db.connect(db_path)
    out = SweepOutcome(planned=len(specs), keys=[s.key for s in specs])
    owner = _db.owner_token()
    try:
        done = _db.done_keys(con, include_errors=not retry_errors)
        todo, seen = [], set()
        for spec in specs:
            if spec.key in done or spec.key in seen:
                continue
            seen.add(spec.key)
            todo.append(spec)
        out.skipped = len(specs) - len(todo)
        if not todo:
            if progress is not None:
                print(f"optpart bench: all {len(specs)} run(s) already in the database", file=progress)
            return out
        own = not isinstance(executor, Executor)
        ex = make_executor(executor, jobs) if own else executor
        # Worker processes learn the plugin solvers from each run; inline runs have them already.
        plugins = [] if isinstance(ex, InlineExecutor) else plugin_payload(sorted({s.solver for s in todo}))
        bar = Progress(len(todo), progress, skipped=out.skipped)
        try:
            _run_claimed(todo, con, ex, owner, retry_errors, bar, out, plugins)
        except BaseException:
            # Interrupted (SIGTERM, Ctrl-C) or failed: stop the workers now, keep what is written.
            if own:
                ex.terminate()
            raise
        finally:
            if own:
                ex.close()
    finally:
        try:
            _db.release_claims(con, owner)
        finally:
            _db.close(con)
    return out


#: Seconds between looks at runs that another sweep holds.
CLAIM_POLL_S = 0.5


def _run_claimed(todo: list[RunSpec], con, ex: Executor, owner: str, retry_errors: bool, bar: Progress,
                 out: SweepOutcome, plugins: list) -> None:
    """Claim, run and write the runs of ``todo`` in planned order, at most ``ex.capacity`` in
    flight. Runs that another live sweep holds are put aside and looked at again when
    nothing else is left: skipped once their row is there, run here if their sweep died."""
    queue = list(range(len(todo)))[::-1]  # pop() from the end keeps the planned order
    held_elsewhere: list[int] = []
    running: dict[Any, int] = {}
    while queue or running or held_elsewhere:
        while queue and len(running) < ex.capacity:
            i = queue.pop()
            spec = todo[i]
            state = _db.claim(con, spec.key, owner, include_errors=not retry_errors)
            if state == "done":  # another sweep wrote it meanwhile
                out.skipped += 1
                bar.total -= 1
                continue
            if state == "busy":
                held_elsewhere.append(i)
                continue
            task = {"problem": spec.problem, "solver": spec.solver, "options": spec.options, "plugins": plugins}
            bar.started(spec)
            running[ex.submit(run_one, task)] = i
        if running:
            finished, _ = ex.wait_any(running)
            # Runs finishing together are written in planned order.
            for handle in sorted(finished, key=running.__getitem__):
                spec = todo[running.pop(handle)]
                try:
                    answer = ex.outcome(handle)
                except Exception as exc:  # the worker died, or the task could not be shipped
                    answer = {"status": "error", "error": f"{type(exc).__name__}: {exc}"}
                _db.insert_run(con, _row(spec, answer), owner=owner)
                out.ran += 1
                out.errors += answer["status"] == "error"
                bar.update(spec, answer["status"])
        elif held_elsewhere and not queue:
            time.sleep(CLAIM_POLL_S)
            queue = held_elsewhere[::-1]
            held_elsewhere = []


def iter_instances(paths: Iterable[str | Path]) -> list[Path]:
    """Expand directories into the problem files they hold (sorted); keep files as given.

    Parameters
    ----------
    paths : iterable of str or pathlib.Path
        Files and folders (``optpart bench INSTANCES...``).

    Returns
    -------
    list of pathlib.Path
        Folders expanded to their ``.json``, ``.json.gz`` and ``.stg`` files; files kept.
    """
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted(q for q in p.iterdir() if q.is_file() and q.name.endswith((".json", ".json.gz", ".stg")))
        else:
            out.append(p)
    return out
