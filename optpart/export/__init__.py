"""Turn a placement into something a framework reads: device maps, pipeline split points.

An optpart placement maps *operators* to devices; frameworks place *modules*:

* :func:`device_map` gives the module-level map that ``accelerate`` and
  ``transformers`` take as ``device_map=`` (keys are ``named_modules()`` paths,
  values device indices or ids). When the placement splits a module across devices,
  the map is the closest module-consistent plan: every module goes to the device
  that holds the largest share of its run time plus memory, modules whose whole
  subtree lands on one device are merged into their parent (the coarsest map that
  reproduces the plan), and the plan is re-scored with :func:`optpart.evaluate.evaluate`
  so the user sees its makespan beside the original one. When that plan does not
  fit memory, the problem is re-solved with every module's operators colocated, then
  coarser depths and contiguous stages repaired against memory are tried
  (:mod:`optpart.export.search`); a plan that still does not fit is reported as such, never
  as fitting, with the memory at which it would (``ModulePlan.advice``). ``depth=N``
  asks for a coarser map (modules kept whole down to ``N`` path components).
* :func:`split_points` gives, for a plan whose devices hold contiguous stages in the
  order modules run, the module where each stage begins (``SplitPoint.BEGINNING`` in
  ``torch.distributed.pipelining``).
* :func:`placement_map` gives the raw ``{node id: device id}``.
* :func:`torch_pipeline` gives a pipelined result's stages, ranks, action lists (torch's
  schedule CSV, or the built-in schedule's class) and predicted step time, for
  ``torch.distributed.pipelining`` and ``optpart run``.

Operators are tied to modules by the node metadata ``module`` (the ``named_modules()``
path of the innermost module that ran them, written by the PyTorch importer); an
optimizer node ``update.<param>`` belongs to its parameter's module. Operators outside
every module (the loss, inputs) are not in a device map: under ``accelerate`` they run
where their inputs are, so the re-scored plan puts each of them on the device of its
predecessor with the largest edge (its successor's for nodes without predecessors).

See ``docs/apply.md``.
"""

from .pipeline import SplitPlan, TorchPipeline, split_points, torch_pipeline
from .plan import ExportError, ModulePlan, device_map, module_plan, placement_map
from .tree import node_modules

__all__ = ["ModulePlan", "module_plan", "device_map", "split_points", "placement_map", "node_modules",
           "SplitPlan", "ExportError", "TorchPipeline", "torch_pipeline"]
