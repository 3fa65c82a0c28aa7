"""Solvers behind one interface; see :mod:`optpart.solvers.registry` and :mod:`optpart.solvers.base`."""

from .base import Solution, finalize
from .registry import SOLVERS, SolverInfo, available_solvers, get_solver, solve, solver_info, solver_names

__all__ = ["Solution", "finalize", "SOLVERS", "SolverInfo", "available_solvers", "get_solver", "solve",
           "solver_info", "solver_names"]
