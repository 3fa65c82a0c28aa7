"""Solvers behind one interface; see :mod:`optpart.solvers.registry` and :mod:`optpart.solvers.base`.

The solvers live in three groups: :mod:`.exact` (``cpsat``, ``milp``), :mod:`.heuristic` (the
default ``heuristic`` and the seed method alone, ``pardnn``) and :mod:`.baselines` (``heft``,
``etf``, ``topo``, ``metis``, ``single``); the registry, the spec and the solver contract
(``base``) stay here.
"""

from __future__ import annotations

from .base import Solution, finalize
from .incumbent import Interrupted
from .plugins import load_plugins
from .registry import (SOLVERS, SolverInfo, available_solvers, get_solver, load_plugin_payload, plugin_payload,
                       register_solver, solve, solver_info, solver_names)
from .spec import Option

__all__ = ["Solution", "finalize", "SOLVERS", "SolverInfo", "available_solvers", "get_solver", "solve",
           "solver_info", "solver_names", "register_solver", "Option", "load_plugins", "plugin_payload",
           "load_plugin_payload", "Interrupted"]
