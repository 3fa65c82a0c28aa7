"""Solvers behind one interface; see :mod:`optpart.solvers.registry` and :mod:`optpart.solvers.base`.

The solvers live in three groups: :mod:`.exact` (``cpsat``, ``milp``), :mod:`.heuristic` (the
default ``heuristic`` and the seed method alone, ``pardnn``) and :mod:`.baselines` (``heft``,
``etf``, ``topo``, ``metis``, ``single``); the registry, the spec and the solver contract
(``base``) stay here.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import pkgutil
import sys

from .base import Solution, finalize
from .registry import SOLVERS, SolverInfo, available_solvers, get_solver, solve, solver_info, solver_names

__all__ = ["Solution", "finalize", "SOLVERS", "SolverInfo", "available_solvers", "get_solver", "solve",
           "solver_info", "solver_names"]

# Old module paths, kept importable for one release (issue 27 regrouped solvers/; remove this
# shim in the release after 0.1, with MOVED). ``import optpart.solvers.cpsat`` (or any module
# below ``optpart.solvers.pardnn``) gives the module at its new path itself, the same object,
# so attributes set through either name are seen through both. The shim is a finder here
# rather than a file at each old path, so the old paths hold no file at all.
#: old module path -> new one (a package's submodules follow it)
MOVED: dict[str, str] = {
    **{f"optpart.solvers.{m}": f"optpart.solvers.exact.{m}"
       for m in ("cpsat", "cpsat_decode", "cpsat_model", "cpsat_peak", "cpsat_search", "milp", "milp_backend",
                 "milp_model", "milp_time_indexed", "exact_bounds", "exact_grid", "exact_times", "_exact_common",
                 "lns", "lns_window", "path_bounds")},
    **{f"optpart.solvers.{m}": f"optpart.solvers.baselines.{m}" for m in ("heft", "etf", "topo", "metis", "single")},
    "optpart.solvers.pardnn": "optpart.solvers.heuristic",
    "optpart.solvers.pardnn_seed": "optpart.solvers.heuristic.pardnn_seed",
}


def _new_path(name: str) -> str | None:
    for old, new in MOVED.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old):]
    return None


class _OldPaths(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports a moved module by its old path as the module at its new path."""

    def find_spec(self, fullname, path=None, target=None):  # noqa: D102 - importlib's protocol
        new = _new_path(fullname)
        if new is None or importlib.util.find_spec(new) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self, is_package=False)

    def create_module(self, spec):  # noqa: D102
        module = importlib.import_module(_new_path(spec.name))
        if hasattr(module, "__path__"):  # a moved package: its submodules answer to their old names too
            for info in pkgutil.iter_modules(module.__path__):
                sys.modules.setdefault(f"{spec.name}.{info.name}",
                                       importlib.import_module(f"{module.__name__}.{info.name}"))
            # registered before any ``import old.package.sub`` runs, which then finds the module in
            # sys.modules and does not rebind ``sub`` on the package (where a function may carry that
            # name: ``heuristic.refine`` is the function, ``heuristic/refine.py`` the module)
        return module

    def exec_module(self, module) -> None:  # noqa: D102 - the new module already ran
        return None


if not any(isinstance(f, _OldPaths) for f in sys.meta_path):
    # first: below an old package path (``optpart.solvers.pardnn.improve``) the path finder
    # would otherwise load a second copy of the module from the new package's directory
    sys.meta_path.insert(0, _OldPaths())
