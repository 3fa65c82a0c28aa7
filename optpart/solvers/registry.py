"""The solver registry and :func:`solve`, the one entry point every caller uses.

Solvers are listed here by name with the module that implements them, what they
need, and the extra that installs it. Modules are imported only when a solver is
used, so listing what is available never imports a heavy dependency. An unknown
name is an error that lists the known ones; a solver whose optional dependency is
missing says which extra to install. No silent fallbacks.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import time
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ..errors import ProblemError, SolverError
from ..evaluate import problem_lower_bound
from ..problem import Problem
from ..result import Result, Status
from .base import finalize

__all__ = ["SolverInfo", "SOLVERS", "solver_names", "available_solvers", "solver_info", "get_solver", "solve"]


@dataclass(frozen=True)
class SolverInfo:
    """What the registry knows about a solver without importing it."""

    name: str
    module: str
    summary: str
    exact: bool = False
    requires: tuple[str, ...] = ()
    extra: str | None = None

    @property
    def installed(self) -> bool:
        """True when its module and optional dependencies can be imported."""
        return (importlib.util.find_spec(self.module) is not None
                and all(importlib.util.find_spec(req) is not None for req in self.requires))


def _registry(*infos: SolverInfo) -> dict[str, SolverInfo]:
    return {info.name: info for info in infos}


#: Every solver by name. Add a solver by adding its line here and its module beside this one.
SOLVERS: dict[str, SolverInfo] = _registry(
    SolverInfo("heuristic", "optpart.solvers.pardnn",
               "HEFT/ETF constructions, the ParDNN seed method and schedule-aware search; "
               "never worse than heft, always within memory"),
    SolverInfo("pardnn", "optpart.solvers.pardnn_seed",
               "the ParDNN seed method alone: slicing, mapping, refinement, memory step"),
    SolverInfo("cpsat", "optpart.solvers.cpsat",
               "exact: OR-Tools CP-SAT, proven optimum or bound and gap", exact=True, requires=("ortools",)),
    SolverInfo("milp", "optpart.solvers.milp",
               "exact: MILP through PuLP (HiGHS, or CBC)", exact=True, requires=("pulp",)),
    SolverInfo("heft", "optpart.solvers.heft",
               "HEFT with insertion (Topcuoglu et al. 2002), memory-aware"),
    SolverInfo("etf", "optpart.solvers.etf", "Baechi m-ETF: earliest task first with memory checks"),
    SolverInfo("topo", "optpart.solvers.topo", "Baechi m-TOPO: topological fill, device after device"),
    SolverInfo("metis", "optpart.solvers.metis",
               "METIS balanced k-way partition (compute and memory weights)", requires=("pymetis", "scipy"),
               extra="metis"),
    SolverInfo("single", "optpart.solvers.single",
               "no model parallelism: the whole graph on the fastest device that holds it"),
)

#: Other names users may type for a solver.
ALIASES: dict[str, str] = {}


def solver_names() -> list[str]:
    """Every registered solver name, sorted."""
    return sorted(SOLVERS)


def available_solvers() -> list[str]:
    """Registered solvers whose optional dependencies are installed."""
    return [name for name in solver_names() if SOLVERS[name].installed]


def solver_info(name: str) -> SolverInfo:
    key = ALIASES.get(name, name)
    if key not in SOLVERS:
        raise SolverError(f"unknown solver '{name}'; available: {', '.join(solver_names())}")
    return SOLVERS[key]


def get_solver(name: str):
    """The ``solve`` function of a solver, importing its module on first use."""
    info = solver_info(name)
    if importlib.util.find_spec(info.module) is None:
        raise SolverError(f"solver '{info.name}' is registered but its module {info.module} is missing")
    missing = [req for req in info.requires if importlib.util.find_spec(req) is None]
    if missing:
        hint = f": pip install 'optpart[{info.extra}]'" if info.extra else ""
        raise SolverError(f"solver '{info.name}' needs {', '.join(missing)}, which is not installed{hint}")
    return importlib.import_module(info.module).solve


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


def solve(problem: Problem, solver: str = "single", *, time_limit: float | None = None, seed: int = 0,
          hint: Any = None, **options: Any) -> Result:
    """Place ``problem`` with the named solver and return a checked, evaluated :class:`Result`.

    Parameters
    ----------
    problem : Problem
        The problem; it must have devices (see :meth:`Problem.with_devices`).
    solver : str
        A name from :func:`solver_names`.
    time_limit : float, optional
        Seconds the solver may use; each solver has its own default.
    seed : int
        Seed for any randomness; equal inputs and seed give equal results.
    hint : placement, Result or dict, optional
        A starting placement for solvers that take one.
    **options
        Solver-specific options; an unknown one is an error listing the valid ones.

    Returns
    -------
    Result
        Status ``infeasible`` (with the reason in ``message``) when no placement can fit,
        without calling the solver.
    """
    if not isinstance(problem, Problem):
        raise SolverError(f"solve() needs a Problem, got {type(problem).__name__}")
    if problem.n_devices == 0:
        raise ProblemError(f"problem '{problem.name}' has no devices; add them with Problem.with_devices() "
                           "or on the command line with --devices K --memory SIZE")
    if time_limit is not None and not time_limit > 0:
        raise SolverError(f"time_limit={time_limit!r} must be a positive number of seconds")
    info = solver_info(solver)
    fn = get_solver(solver)
    params = inspect.signature(fn).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        known = [n for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY
                 and n not in ("time_limit", "seed", "hint")]
        for key in options:
            if key not in known:
                raise SolverError(f"solver '{info.name}' has no option '{key}'; its options: "
                                  f"{', '.join(known) or 'none'}")
    record = {"time_limit": time_limit, "seed": seed, **options}
    record = {k: v for k, v in record.items() if v is not None}
    t0 = time.perf_counter()
    model = options.get("memory_model", "static")
    reason = problem.infeasibility(model if model in ("static", "peak") else "static")  # solvers reject bad ones
    if reason is not None:
        return Result(problem=problem.name, solver=info.name, status=Status.INFEASIBLE,
                      lower_bound=problem_lower_bound(problem), wall_seconds=time.perf_counter() - t0,
                      message=reason, options=record)
    solution = fn(problem, time_limit=time_limit, seed=seed, hint=_normalize_hint(problem, hint), **options)
    return finalize(problem, solution, info.name, time.perf_counter() - t0, record)
