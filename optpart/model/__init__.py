"""The model: the one formulation every solver reads (``docs/model.md``).

One module per concept, each rule written once:

* :mod:`~optpart.model.problem`: the frozen :class:`Problem`;
* :mod:`~optpart.model.placement`: what a placement means on it (run and transfer times,
  constraints kept, ids to indices);
* :mod:`~optpart.model.frozen`: the read-only list and dict a problem holds;
* :mod:`~optpart.model.graph`: edge checks, CSR adjacency, Kahn's order, the cycle report;
* :mod:`~optpart.model.devices`: :class:`Device`, :class:`Links`, and the one resolver of
  device and link values (counts, ids, units, per-device lists, file devices, default links);
* :mod:`~optpart.model.constraints`: pins, colocation groups (one union-find), forbidden devices;
* :mod:`~optpart.model.records`: the one reader of JSON-shaped records (``Problem.build``
  and the JSON format);
* :mod:`~optpart.model.columns`: numeric node columns, checked once;
* :mod:`~optpart.model.memory`: the static and liveness memory models and the one fit rule;
* :mod:`~optpart.model.paths`: top and bottom levels, HEFT's mean costs and rank;
* :mod:`~optpart.model.screening`: the one infeasibility proof and ``running_need``.

The model imports nothing of optpart but :mod:`optpart.errors`, :mod:`optpart.units` and
:mod:`optpart.limits` (``tests/package/test_import_layers.py`` keeps it so).
"""

from .constraints import Constraints, best_allowed
from .devices import DEFAULT_BANDWIDTH, DEFAULT_LATENCY, Device, LinkOverride, Links, resolve_devices
from .problem import Problem

__all__ = ["Problem", "Device", "Links", "LinkOverride", "Constraints", "best_allowed", "resolve_devices",
           "DEFAULT_BANDWIDTH", "DEFAULT_LATENCY"]
