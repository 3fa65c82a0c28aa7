"""Solvers from outside optpart: what a plugin is, where other processes find it, and how its
answer reaches the evaluator.

:func:`optpart.solvers.registry.register_solver` makes a :class:`Plugin` and puts it in the
registry's table. Three ways let another process (a CLI run, a sweep's worker, a Dask
worker) know a plugin:

* the ``optpart.solvers`` entry point group of an installed package (``name =
  "package.module"`` whose import registers ``name``, or ``"package.module:register"``, a
  function called with no argument), found by name (:func:`from_entry_point`);
* ``$OPTPART_PLUGINS``, comma-separated modules or ``.py`` files imported once per process
  (:func:`load_plugins`; the CLI's ``--plugin`` adds to it, and a local sweep's worker
  processes inherit it);
* the registration shipped with each run of a sweep (:func:`plugin_payload`): the function
  by its import path, its options and memory models by value.

This module imports neither the registry nor any solver (the registry imports it).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import inspect
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..errors import SolverError
from ..model.problem import Problem
from .base import as_solution
from .spec import MEMORY_MODELS, Option, SolverSpec

__all__ = ["Plugin", "make_plugin", "load_plugins", "from_entry_point", "entry_point_names", "plugin_payload",
           "plugin_solve", "ENTRY_POINT_GROUP", "PLUGINS_ENV"]

#: The entry point group where installed packages declare solvers.
ENTRY_POINT_GROUP = "optpart.solvers"
#: Plugin modules every optpart process imports (comma-separated; ``--plugin`` adds to it).
PLUGINS_ENV = "OPTPART_PLUGINS"
_LOADED: set[str] = set()


@dataclass(frozen=True)
class Plugin:
    """A registered plugin: its function, its spec, and the arguments of
    :func:`~optpart.solvers.registry.register_solver` (shipped to other processes)."""

    function: Callable[..., Any]
    spec: SolverSpec
    registration: dict[str, Any]


def make_plugin(name: str, function: Callable[..., Any], *, options: Sequence[Option] | Mapping[str, Any] = (),
                memory_models: Sequence[str] = ("static",), uses_hint: bool = False, uses_time_limit: bool = False,
                default_time_limit: float | None = None, summary: str = "", exact: bool = False) -> Plugin:
    """A checked :class:`Plugin` (the arguments are those of ``register_solver``).

    Parameters
    ----------
    name : str
        The solver's name, for messages.
    function : callable
        The placement function.
    options : sequence of Option, or mapping of str to default
        Its options (a mapping declares each with its default's type).
    memory_models : sequence of str
        Models its placements respect.
    uses_hint, uses_time_limit : bool
        Whether it reads those arguments.
    default_time_limit : float, optional
        Its own budget in seconds.
    summary : str
        One line for ``optpart solvers``.
    exact : bool
        Whether it proves optimality.

    Returns
    -------
    Plugin
    """
    if not callable(function):
        raise SolverError(f"register_solver('{name}', ...): {type(function).__name__} is not callable")
    models = tuple(memory_models)
    if not models or any(m not in MEMORY_MODELS for m in models):
        raise SolverError(f"register_solver('{name}', ...): memory_models={models!r}; choose from "
                          f"{', '.join(MEMORY_MODELS)}")
    if default_time_limit is not None and not (isinstance(default_time_limit, (int, float))
                                               and default_time_limit > 0):
        raise SolverError(f"register_solver('{name}', ...): default_time_limit={default_time_limit!r} must be "
                          "a positive number of seconds")
    if isinstance(options, Mapping):
        options = tuple(Option(k, type(v) if v is not None else str, v, "", allow_none=v is None)
                        for k, v in options.items())
    opts = tuple(options)
    if not all(isinstance(o, Option) for o in opts):
        raise SolverError(f"register_solver('{name}', ...): options are Option(...) or a mapping of name to default")
    spec = SolverSpec(options=opts, memory_models=models, uses_hint=bool(uses_hint),
                      uses_time_limit=bool(uses_time_limit))
    registration = dict(options=opts, memory_models=models, uses_hint=bool(uses_hint),
                        uses_time_limit=bool(uses_time_limit), default_time_limit=default_time_limit,
                        summary=summary, exact=bool(exact))
    return Plugin(function, spec, registration)


def plugin_solve(name: str, plugin: Plugin) -> Callable[..., Any]:
    """The plugin as a solver module's ``solve(problem, *, time_limit, seed, hint, memory_model,
    **options)``: its function called with the arguments its signature names, its answer made a
    :class:`~optpart.solvers.base.Solution` (:func:`~optpart.solvers.base.as_solution`).

    Parameters
    ----------
    name : str
        The solver's name.
    plugin : Plugin
        The plugin.

    Returns
    -------
    callable
        The solve function the registry calls.
    """
    function = plugin.function
    params = inspect.signature(function).parameters
    takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())

    def solve(problem: Problem, *, memory_model: str = plugin.spec.memory_models[0], **kwargs: Any) -> Any:
        kwargs["memory_model"] = memory_model
        answer = function(problem, **{k: v for k, v in kwargs.items() if takes_all or k in params})
        return as_solution(problem, answer, name, memory_model)

    return solve


def _import(target: str) -> Any:
    """Import ``package.module``, ``package.module:attr`` or ``path/to/file.py[:attr]``."""
    head, _, attr = target.rpartition(":") if ":" in target and not Path(target).is_file() else (target, "", "")
    if head.endswith(".py"):
        path = Path(head)
        if not path.is_file():
            raise SolverError(f"plugin {target!r}: no file {head!r}")
        unit = importlib.util.spec_from_file_location(f"optpart_plugin_{path.stem}", path)
        if unit is None or unit.loader is None:
            raise SolverError(f"plugin {target!r}: {head!r} is not a Python module")
        module = importlib.util.module_from_spec(unit)
        sys.modules[unit.name] = module  # its functions pickle by reference, as an imported module's do
        unit.loader.exec_module(module)
    else:
        module = importlib.import_module(head)
    return getattr(module, attr) if attr else module


def load_plugins(targets: Sequence[str] = ()) -> None:
    """Import plugin modules once per process: those of ``$OPTPART_PLUGINS``, then ``targets``.
    A module registers its solvers when imported; ``module:register`` names a function called
    with no argument. ``targets`` are added to ``$OPTPART_PLUGINS``, so that processes started
    from this one (a sweep's workers) load them too.

    Parameters
    ----------
    targets : sequence of str
        ``package.module``, ``package.module:register`` or ``path/to/plugin.py``.

    Raises
    ------
    SolverError
        A target that cannot be imported or fails (one line with its error).
    """
    env = [t.strip() for t in os.environ.get(PLUGINS_ENV, "").split(",") if t.strip()]
    for target in [*env, *targets]:
        if target in _LOADED:
            continue
        _LOADED.add(target)
        try:
            loaded = _import(target)
            if ":" in target and callable(loaded) and not inspect.ismodule(loaded):
                loaded()
        except SolverError:
            _LOADED.discard(target)
            raise
        except Exception as exc:  # the plugin's own code failed: bad input, named
            _LOADED.discard(target)
            raise SolverError(f"plugin {target!r} failed to load: {type(exc).__name__}: {exc}") from None
        if target not in env:
            env.append(target)
            os.environ[PLUGINS_ENV] = ",".join(env)


def _entry_points() -> dict[str, Any]:
    try:
        return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
    except Exception:  # a broken distribution's metadata: no plugins from it
        return {}


def entry_point_names() -> list[str]:
    """The solver names installed packages declare in :data:`ENTRY_POINT_GROUP` (not loaded).

    Returns
    -------
    list of str
    """
    return sorted(_entry_points())


def from_entry_point(name: str, registered: Callable[[str], bool]) -> bool:
    """Load the entry point ``name`` (its module registers the solver, or it names a function
    called with no argument).

    Parameters
    ----------
    name : str
        A solver name.
    registered : callable
        ``registered(name)``: whether the registry knows ``name`` now.

    Returns
    -------
    bool
        False when no entry point has that name; True once it registered the solver.

    Raises
    ------
    SolverError
        When loading fails or registers no solver of that name.
    """
    ep = _entry_points().get(name)
    if ep is None:
        return False
    try:
        loaded = ep.load()
        if not registered(name) and callable(loaded) and not inspect.ismodule(loaded):
            loaded()
    except Exception as exc:
        raise SolverError(f"solver '{name}' (entry point {ep.value}) failed to load: {type(exc).__name__}: "
                          f"{exc}") from None
    if not registered(name):
        raise SolverError(f"entry point '{name}' = {ep.value} did not register a solver named '{name}' "
                          "(call optpart.register_solver in it)")
    return True


def plugin_payload(plugins: Mapping[str, Plugin]) -> list[dict[str, Any]]:
    """How another process registers ``plugins`` (a sweep's workers): the function by its import
    path, the registration by value.

    Parameters
    ----------
    plugins : mapping of str to Plugin
        The plugins a sweep runs, by name.

    Returns
    -------
    list of dict
        ``{"name", "function": "module:qualname", "registration": {...}}`` per plugin.

    Raises
    ------
    SolverError
        For a function another process cannot import (defined in ``__main__``, a notebook, or
        inside a function): run such a sweep inline, or put the function in a module.
    """
    out = []
    for name in sorted(plugins):
        fn = plugins[name].function
        module, qual = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
        if module in (None, "__main__") or "<" in qual or not qual:
            raise SolverError(f"solver '{name}' is defined in {module or 'this process'} and cannot be loaded by "
                              "another process: run the sweep with executor='inline' (--executor inline), or "
                              "put the function in a module (docs/plugins.md)")
        out.append({"name": name, "function": f"{module}:{qual}", "registration": dict(plugins[name].registration)})
    return out


def resolve_function(path: str) -> Callable[..., Any]:
    """The function at ``module:qualname`` (:func:`plugin_payload`'s ``function``).

    Parameters
    ----------
    path : str
        ``package.module:Class.method`` or ``package.module:function``.

    Returns
    -------
    callable
    """
    module, _, qual = path.partition(":")
    obj: Any = importlib.import_module(module)
    for part in qual.split("."):
        obj = getattr(obj, part)
    return obj
