"""The solver registry and :func:`solve`, the one entry point every caller uses.

Solvers are listed here by name with the module that implements them, what they
need, and the extra that installs it. Modules are imported only when a solver is
used, so listing what is available never imports a heavy dependency. An unknown
name is an error that lists the known ones; a solver whose optional dependency is
missing says which extra to install. No silent fallbacks.

What a solver accepts and guarantees is its module's ``SPEC``
(:class:`~optpart.solvers.spec.SolverSpec`), the one source of truth: the registry
keeps no copy of it.
:func:`solve` validates every option against the spec, runs the solver under a
memory model it guarantees, and checks the requested model with the evaluator
(docs/model.md section 3). Arguments a solver does not use (``hint``,
``time_limit``) are accepted and announced: the result's ``stats["ignored"]``
lists them and its ``message`` says so.

Solvers from outside optpart (**plugins**) join the same table with
:func:`register_solver` (docs/plugins.md). Other processes find plugins
through the ``optpart.solvers`` entry point group, the ``OPTPART_PLUGINS`` environment
variable (what ``--plugin`` sets) and, for a sweep's workers, the registration shipped with
each run (:func:`plugin_payload`).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..errors import ProblemError, SolverError
from ..bounds import problem_lower_bound
from ..model.problem import Problem
from ..result import Result, Status
from .base import Solution, finalize
from .incumbent import Interrupted, keeping_best
from . import plugins as _plugins
from .plugins import Plugin
from .spec import MEMORY_MODELS, Option, SolverSpec

__all__ = ["SolverInfo", "SOLVERS", "DEFAULT_SOLVER", "DEFAULT_MEMORY_MODEL", "solver_names",
           "available_solvers", "solver_info", "solver_spec", "get_solver", "solve", "register_solver",
           "plugin_payload", "load_plugin_payload"]

#: The solver used when none is named (CLI, :func:`solve`, bench).
DEFAULT_SOLVER = "heuristic"
#: The memory model used when none is named: liveness, equal to static without the split.
DEFAULT_MEMORY_MODEL = "peak"


@dataclass(frozen=True)
class SolverInfo:
    """What the registry knows about a solver without importing it.

    ``default_time_limit`` is the budget (s) the solver uses when none is given (None: it
    runs until it is done). A plugin (:func:`register_solver`) carries its function and
    spec (``plugin``); a built-in solver is its module's ``solve`` and ``SPEC``.
    """

    name: str
    module: str
    summary: str
    exact: bool = False
    requires: tuple[str, ...] = ()
    extra: str | None = None
    default_time_limit: float | None = None
    plugin: Plugin | None = field(default=None, compare=False, repr=False)

    @property
    def installed(self) -> bool:
        """True when its module and optional dependencies can be imported (a plugin: always)."""
        if self.plugin is not None:
            return True
        return (importlib.util.find_spec(self.module) is not None
                and all(importlib.util.find_spec(req) is not None for req in self.requires))


def _registry(*infos: SolverInfo) -> dict[str, SolverInfo]:
    return {info.name: info for info in infos}


#: Every solver by name. Add a solver by adding its line here and its module in exact/, heuristic/ or baselines/;
#: plugins are added by :func:`register_solver`.
SOLVERS: dict[str, SolverInfo] = _registry(
    SolverInfo("heuristic", "optpart.solvers.heuristic",
               "HEFT/ETF constructions, the ParDNN seed method and schedule-aware search; "
               "never worse than heft, always within memory"),
    SolverInfo("pardnn", "optpart.solvers.pardnn",
               "the ParDNN seed method alone: slicing, mapping, refinement, memory step"),
    SolverInfo("cpsat", "optpart.solvers.exact.cpsat",
               "exact: OR-Tools CP-SAT, proven optimum or bound and gap", exact=True, requires=("ortools",),
               default_time_limit=60.0),
    SolverInfo("milp", "optpart.solvers.exact.milp",
               "exact: MILP through PuLP (HiGHS, or CBC)", exact=True, requires=("pulp",), default_time_limit=60.0),
    SolverInfo("heft", "optpart.solvers.baselines.heft",
               "HEFT with insertion (Topcuoglu et al. 2002), memory-aware"),
    SolverInfo("etf", "optpart.solvers.baselines.etf", "Baechi m-ETF: earliest task first with memory checks"),
    SolverInfo("topo", "optpart.solvers.baselines.topo", "Baechi m-TOPO: topological fill, device after device"),
    SolverInfo("metis", "optpart.solvers.baselines.metis",
               "METIS balanced k-way partition (compute and memory weights)", requires=("pymetis", "scipy"),
               extra="metis"),
    SolverInfo("single", "optpart.solvers.baselines.single",
               "no model parallelism: the whole graph on the fastest device that holds it"),
)

#: Other names users may type for a solver.
ALIASES: dict[str, str] = {}


#: Names that are not solvers of the registry (the pipeline orders of :func:`optpart.solve`).
_RESERVED = ("gpipe", "1f1b")
_BUILTIN = frozenset(SOLVERS)
def register_solver(name: str, function: Callable[..., Any], *, options: Sequence[Option] | Mapping[str, Any] = (),
                    memory_models: Sequence[str] = ("static",), uses_hint: bool = False,
                    uses_time_limit: bool = False, default_time_limit: float | None = None, summary: str = "",
                    exact: bool = False) -> SolverInfo:
    """Register ``function`` as the solver ``name``: :func:`solve`, ``optpart solve/bench`` and
    ``optpart solvers`` then use it like a built-in one (docs/plugins.md).

    ``function(problem, *, time_limit, seed, hint, memory_model, **options)`` receives the
    arguments its signature names (a ``**kwargs`` takes them all) and returns a placement (a
    device index per node, or ``{node id: device id}``), ``(placement, start)`` with its own
    schedule, a :class:`~optpart.solvers.base.Solution`, or None (no placement). The answer is
    scored by the evaluator and checked like every solver's (:func:`finalize`); a placement that
    breaks memory or a constraint is ``unknown`` with the reason, never ``feasible``.

    Registering a name again replaces the plugin (a notebook cell run twice); a built-in
    name, or ``gpipe``/``1f1b``, is refused.

    Parameters
    ----------
    name : str
        The solver's name (letters, digits, ``-``, ``_``, ``.``).
    function : callable
        The placement function (or a class whose instances are called so).
    options : sequence of Option, or mapping of str to default
        Its options; a mapping ``{"rounds": 10}`` declares each with its default's type.
    memory_models : sequence of {"static", "peak"}
        The models whose fit its placements respect; it is called with the first one the
        request allows (:func:`solve` checks the requested one with the evaluator).
    uses_hint, uses_time_limit : bool
        Whether it reads ``hint`` and ``time_limit`` (else a caller's value is announced as ignored).
    default_time_limit : float, optional
        Its own budget when no time limit is given (shown by ``optpart solvers``).
    summary : str
        One line for ``optpart solvers`` (default: the function's docstring's first line).
    exact : bool
        Whether it proves optimality (its ``optimal`` claims are still checked against its bound).

    Returns
    -------
    SolverInfo
        The registry entry.

    Raises
    ------
    SolverError
        A built-in or reserved name, a bad name, a function that is not callable, or an
        unknown memory model.

    Examples
    --------
    >>> import optpart
    >>> def round_robin(problem):
    ...     return [v % problem.n_devices for v in range(problem.n_nodes)]
    >>> _ = register_solver("round-robin", round_robin, memory_models=("static", "peak"))
    >>> p = optpart.Problem.build(nodes=[{"id": "a", "time": 1.0, "memory": 4},
    ...                                  {"id": "b", "time": 1.0, "memory": 4}]).with_devices(2, memory=4)
    >>> optpart.solve(p, "round-robin").makespan
    1.0
    """
    if not isinstance(name, str) or not name or not all(c.isalnum() or c in "-_." for c in name):
        raise SolverError(f"solver name {name!r}: use letters, digits, '-', '_' or '.'")
    if name in _BUILTIN or name in _RESERVED:
        raise SolverError(f"'{name}' is a built-in solver name; register the plugin under another name")
    plugin = _plugins.make_plugin(name, function, options=options, memory_models=memory_models, uses_hint=uses_hint,
                                  uses_time_limit=uses_time_limit, default_time_limit=default_time_limit,
                                  summary=summary, exact=exact)
    doc = (inspect.getdoc(function) or "").strip().splitlines()
    info = SolverInfo(name, getattr(function, "__module__", None) or "?", summary or (doc[0] if doc else "a plugin"),
                      exact=bool(exact), default_time_limit=default_time_limit, plugin=plugin)
    SOLVERS[name] = info
    return info


def plugin_payload(names: Sequence[str]) -> list[dict[str, Any]]:
    """How a sweep's workers register the plugins among ``names`` (see
    :func:`optpart.solvers.plugins.plugin_payload`).

    Parameters
    ----------
    names : sequence of str
        Solver names of a sweep.

    Returns
    -------
    list of dict
        One entry per plugin among them (none for built-in solvers).
    """
    return _plugins.plugin_payload({n: SOLVERS[n].plugin for n in names
                                    if n in SOLVERS and SOLVERS[n].plugin is not None})


def load_plugin_payload(payload: Sequence[Mapping[str, Any]]) -> None:
    """Register, in this process, the plugins :func:`plugin_payload` described (once each).

    Parameters
    ----------
    payload : sequence of mapping
        :func:`plugin_payload`'s entries.
    """
    _plugins.load_plugins()  # a plugin from a .py file is importable once $OPTPART_PLUGINS has loaded it
    for entry in payload:
        if entry["name"] in SOLVERS:
            continue
        function = _plugins.resolve_function(entry["function"])
        if entry["name"] not in SOLVERS:  # importing its module may have registered it
            register_solver(entry["name"], function, **entry["registration"])


def solver_names() -> list[str]:
    """Every registered solver name, sorted: the built-in ones, the plugins registered in this
    process or named by ``$OPTPART_PLUGINS``, and those of the ``optpart.solvers`` entry points.

    Returns
    -------
    list of str
    """
    try:
        _plugins.load_plugins()
    except SolverError:  # a broken plugin module is reported when a solver is asked for, not when listing
        pass
    return sorted(set(SOLVERS) | set(_plugins.entry_point_names()))


def available_solvers() -> list[str]:
    """Registered solvers whose optional dependencies are installed.

    Returns
    -------
    list of str
    """
    return [name for name in solver_names() if SOLVERS[name].installed]


def solver_info(name: str) -> SolverInfo:
    """The registry entry of a solver (aliases resolved), without importing it.

    Parameters
    ----------
    name : str
        A registered name (as :func:`solver_names` lists them) or an alias of one.

    Returns
    -------
    SolverInfo
        Its module, summary, whether it is exact, its requirements and extra.

    Raises
    ------
    SolverError
        For an unknown name, listing the available ones.
    """
    key = ALIASES.get(name, name)
    if key not in SOLVERS:
        _plugins.load_plugins()
    if key not in SOLVERS and not _plugins.from_entry_point(key, SOLVERS.__contains__):
        raise SolverError(f"unknown solver '{name}'; available: {', '.join(solver_names())} "
                          "(a solver of your own: optpart.register_solver, or --plugin MODULE)")
    return SOLVERS[key]


def get_solver(name: str):
    """The ``solve`` function of a solver, importing its module on first use.

    Parameters
    ----------
    name : str
        Which solver (an alias is resolved).

    Returns
    -------
    callable
        ``solve(problem, ...) -> Solution`` of the solver's module.

    Raises
    ------
    SolverError
        When the module or one of its requirements is missing (with the ``pip install``
        extra to add).
    """
    info = solver_info(name)
    if info.plugin is not None:
        return _plugins.plugin_solve(info.name, info.plugin)
    if importlib.util.find_spec(info.module) is None:
        raise SolverError(f"solver '{info.name}' is registered but its module {info.module} is missing")
    missing = [req for req in info.requires if importlib.util.find_spec(req) is None]
    if missing:
        hint = f": pip install 'optpart[{info.extra}]'" if info.extra else ""
        raise SolverError(f"solver '{info.name}' needs {', '.join(missing)}, which is not installed{hint}")
    return importlib.import_module(info.module).solve


def solver_spec(name: str) -> SolverSpec:
    """What solver ``name`` declares: its module's ``SPEC``, the one source of truth.

    Parameters
    ----------
    name : str
        A registered solver name (or alias).

    Returns
    -------
    SolverSpec
        The options, memory models, hint and time-limit use the solver declares.

    Raises
    ------
    SolverError
        When the name is unknown, the module cannot be imported (a missing optional
        dependency names the extra to install), or the module declares no ``SPEC``.
    """
    info = solver_info(name)
    if info.plugin is not None:
        return info.plugin.spec
    try:
        module = importlib.import_module(info.module)
    except ImportError as exc:
        hint = f"; pip install 'optpart[{info.extra}]'" if info.extra else ""
        raise SolverError(f"solver '{info.name}' cannot be loaded ({exc}){hint}") from None
    spec = getattr(module, "SPEC", None)
    if not isinstance(spec, SolverSpec):
        raise SolverError(f"solver module {info.module} declares no SPEC (a SolverSpec)")
    return spec


def _normalize_hint(problem: Problem, hint: Any) -> np.ndarray | None:
    if hint is None:
        return None
    if isinstance(hint, Result):
        return None if hint.placement is None else np.asarray(hint.placement, dtype=np.int64)
    if isinstance(hint, Mapping):
        return problem.placement_from_ids(hint)
    arr = np.asarray(hint, dtype=np.int64)
    if arr.shape != (problem.n_nodes,) or (arr.size and (arr.min() < 0 or arr.max() >= problem.n_devices)):
        raise SolverError(f"hint must give a device index 0..{problem.n_devices - 1} for each of "
                          f"{problem.n_nodes} nodes")
    return arr


def _run_model(problem: Problem, spec: SolverSpec, requested: str) -> str:
    """The memory model the solver runs under for a ``requested`` one.

    Without the param/output/temp split peak equals static, so a solver that guarantees
    static runs under static (cheaper reasoning). Otherwise the requested model when the
    solver guarantees it, else the first one it guarantees (the result is then checked).
    """
    models = spec.memory_models or ("static",)
    if not problem.has_split and "static" in models:
        return "static"
    return requested if requested in models else models[0]


def _accepts(fn, name: str) -> bool:
    params = inspect.signature(fn).parameters
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def solve(problem: Problem, solver: str = DEFAULT_SOLVER, *, memory_model: str = DEFAULT_MEMORY_MODEL,
          time_limit: float | None = None, seed: int = 0, hint: Any = None, **options: Any) -> Result:
    """Place ``problem`` with the named solver and return a checked, evaluated :class:`Result`.

    Parameters
    ----------
    problem : Problem
        The problem; it must have devices (see :meth:`Problem.with_devices`).
    solver : str
        A name from :func:`solver_names` (default ``heuristic``).
    memory_model : {"peak", "static"}
        The memory model the placement must respect (docs/model.md section 3; default
        ``peak``, which equals ``static`` on graphs without the param/output/temp split).
        A solver that does not guarantee it runs under a model it guarantees, and its
        placement is kept only when the evaluator confirms it fits the requested model;
        otherwise the status is ``unknown`` and the message names the device that overflows.
        The result always names the requested model.
    time_limit : float, optional
        Seconds the solver may use; each solver has its own default. A solver that does
        not use a time limit ignores it (``stats["ignored"]`` says so).
    seed : int
        Seed for any randomness; equal inputs and seed give equal results.
    hint : placement, Result or dict, optional
        A starting placement for solvers that take one (others ignore it, and say so).
    **options
        Solver-specific options, validated against the solver's spec (type, range,
        choices); an unknown one is an error listing the valid ones.

    Returns
    -------
    Result
        Status ``infeasible`` (with the reason in ``message``) when :meth:`Problem.infeasibility`
        proves no placement can fit, without calling the solver.

    Raises
    ------
    SolverError
        Unknown solver, missing optional dependency, or a bad option, time limit or model.
    """
    if not isinstance(problem, Problem):
        raise SolverError(f"solve() needs a Problem, got {type(problem).__name__}")
    if problem.n_devices == 0:
        raise ProblemError(f"problem '{problem.name}' has no devices; add them with Problem.with_devices() "
                           "or on the command line with --devices K --memory SIZE")
    if memory_model not in MEMORY_MODELS:
        raise SolverError(f"memory_model={memory_model!r} must be one of: {', '.join(MEMORY_MODELS)}")
    if time_limit is not None and (isinstance(time_limit, bool) or not isinstance(time_limit, (int, float))
                                   or math.isnan(time_limit) or not time_limit > 0):
        raise SolverError(f"time_limit={time_limit!r} must be a positive number of seconds")
    if "micro_batches" in options or solver in ("gpipe", "1f1b"):
        raise SolverError("micro-batches and the gpipe/1f1b orders are solved by optpart.solve "
                          "(optpart.api.solve); optpart.solvers.solve places one step")
    info = solver_info(solver)
    fn = get_solver(solver)
    spec = solver_spec(solver)
    checked = spec.validate(info.name, options)
    ignored = [arg for arg, used, given in (("hint", spec.uses_hint, hint is not None),
                                            ("time_limit", spec.uses_time_limit, time_limit is not None))
               if given and not used]
    record = {"time_limit": time_limit, "seed": seed, "memory_model": memory_model, **checked}
    record = {k: v for k, v in record.items() if v is not None}
    t0 = time.perf_counter()
    reason = problem.infeasibility(memory_model)
    if reason is not None:
        return Result(problem=problem.name, solver=info.name, status=Status.INFEASIBLE,
                      lower_bound=problem_lower_bound(problem), memory_model=memory_model,
                      wall_seconds=time.perf_counter() - t0, message=reason, options=record)
    run_model = _run_model(problem, spec, memory_model)
    kwargs = dict(checked)
    if _accepts(fn, "memory_model"):
        kwargs["memory_model"] = run_model
    with keeping_best() as plans:
        try:
            solution = fn(problem, time_limit=time_limit, seed=seed, hint=_normalize_hint(problem, hint), **kwargs)
        except KeyboardInterrupt:
            raise Interrupted(_best_so_far(problem, plans, info.name, time.perf_counter() - t0, record,
                                           memory_model, run_model)) from None
    result = finalize(problem, solution, info.name, time.perf_counter() - t0, record, memory_model=memory_model)
    if ignored:
        note = f"ignored: {', '.join(ignored)} ({info.name} does not use {'them' if len(ignored) > 1 else 'it'})"
        result.stats["ignored"] = ignored
        result.message = f"{result.message}; {note}" if result.message else note
    return result


def _best_so_far(problem: Problem, plans: list, solver: str, wall_seconds: float, options: dict[str, Any],
                 memory_model: str, run_model: str) -> Result:
    """The shortest offered plan that fits, scored as a ``feasible`` result marked interrupted.

    Plans come from :mod:`optpart.solvers.incumbent` (newest first on equal makespans); one made
    for another problem (another size) is skipped, and a plan whose own schedule breaks a rule
    here is scored on its canonical schedule instead. ``unknown`` when none fits.
    """
    best: Result | None = None
    for placement, start in reversed(plans):
        if placement.shape != (problem.n_nodes,) or (placement.size and (
                placement.min() < 0 or placement.max() >= problem.n_devices)):
            continue
        for times in ((start, None) if start is not None else (None,)):
            try:
                found = finalize(problem, Solution(Status.FEASIBLE, placement=placement, start=times,
                                                   memory_model=run_model), solver, wall_seconds, options,
                                 memory_model=memory_model)
            except (SolverError, ValueError, IndexError):
                continue
            if found.ok and (best is None or found.makespan < best.makespan):
                best = found
            break
    note = f"interrupted after {wall_seconds:.1f} s"
    if best is None:
        return Result(problem=problem.name, solver=solver, status=Status.UNKNOWN,
                      lower_bound=problem_lower_bound(problem), memory_model=memory_model,
                      wall_seconds=wall_seconds, message=f"{note}, before any plan that fits was found",
                      options=options, stats={"interrupted": True})
    best.status = Status.FEASIBLE
    best.message = f"{note}: the best plan found so far"
    best.stats = {"interrupted": True}
    return best

