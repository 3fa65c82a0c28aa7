"""optpart: place a DNN's operator graph on memory-limited devices to minimise the step time.

The model is fixed in docs/model.md; this package re-exports the public API only.
The default solver is ``heuristic`` and the default memory model ``peak`` (liveness,
equal to static on graphs without the param/output/temp split).

>>> import optpart
>>> p = optpart.Problem.build(
...     nodes=[{"id": "a", "time": 1.0, "memory": 4}, {"id": "b", "time": 2.0, "memory": 4}],
...     edges=[{"src": "a", "dst": "b", "bytes": 0}]).with_devices(2, memory=8)
>>> r = optpart.solve(p)
>>> r.solver, r.status.value, r.makespan, r.memory_model
('heuristic', 'optimal', 3.0, 'peak')
"""

from .bounds import all_bounds, critical_path_bound, largest_node_bound, lower_bound, work_bound
from .errors import FormatError, OptpartError, ProblemError, ScheduleError, SolverError
from .evaluate import canonical_schedule, check, evaluate, peak_memory, static_memory, violations
from .judge import Verdict, judge
from .formats import load, load_result, save, save_result
from .model.constraints import Constraints
from .model.devices import Device, LinkOverride, Links
from .model.problem import Problem
from .result import Result, Status
from .api import solve
from .solvers import Interrupted, Option, available_solvers, register_solver, solver_names
from . import export  # noqa: E402,F401  (optpart.export.device_map(problem, result); docs/apply.md)

__version__ = "0.1.0"


def __getattr__(name: str):
    # networkx is imported only when from_networkx/to_networkx are first used (optpart.formats)
    if name in ("from_networkx", "to_networkx"):
        from . import formats

        return getattr(formats, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "Problem", "Device", "Links", "LinkOverride", "Constraints",
    "Result", "Status",
    "solve", "solver_names", "available_solvers", "register_solver", "Option",
    "evaluate", "judge", "Verdict", "canonical_schedule", "check", "violations", "static_memory", "peak_memory",
    "lower_bound", "all_bounds", "critical_path_bound", "work_bound", "largest_node_bound",
    "load", "save", "load_result", "save_result", "from_networkx", "to_networkx",
    "OptpartError", "ProblemError", "FormatError", "SolverError", "ScheduleError", "Interrupted",
    "__version__",
]
