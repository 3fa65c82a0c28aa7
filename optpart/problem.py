"""Old home of the problem: re-exports :mod:`optpart.model` (kept for one release).

New code imports from :mod:`optpart.model` (or ``optpart`` itself).
"""

from .model.constraints import Constraints, best_allowed
from .model.devices import Device, LinkOverride, Links
from .model.graph import is_kahn_order as _is_kahn_order
from .model.problem import Problem

__all__ = ["Device", "LinkOverride", "Links", "Constraints", "Problem", "best_allowed", "_is_kahn_order"]
