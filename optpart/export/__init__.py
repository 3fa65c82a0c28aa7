"""Turn a placement into something a framework reads: device maps, pipeline split points.

An optpart placement maps *operators* to devices; frameworks place *modules*:

* :func:`device_map` gives the module-level map that ``accelerate`` and ``transformers`` take
  as ``device_map=`` (keys are ``named_modules()`` paths, values device indices or ids): the
  map that runs fastest **as accelerate runs it** within memory (:func:`module_plan`).
  ``accelerate.dispatch_model`` runs a map one module after another, so every candidate (the
  map closest to the placement, :func:`closest_plan`, at every depth, and contiguous blocks of
  modules in the order they run) is timed one node at a time with a move for every tensor that
  crosses devices (:mod:`optpart.export.sequential`), its memory by the liveness rule on that
  schedule. Every parameter and buffer gets an entry; a module whose whole subtree lands on one
  device is one entry. A map that does not fit is reported as such, never as fitting, with the
  memory at which it would (``ModulePlan.advice``). ``depth=N`` asks for a coarser map
  (modules kept whole down to ``N`` path components). accelerate hooks no module whose children
  are split, so such a module's own operators run where their tensors are: a module stays split
  only when its own code reads one device (:func:`optpart.export.tree.mixed_own_code`), else it
  is kept whole.
* :func:`split_points` gives, for a plan whose devices hold contiguous stages in the order
  modules run, the module where each stage begins (``SplitPoint.BEGINNING`` in
  ``torch.distributed.pipelining``), scored with the devices working at once.
* :func:`placement_map` gives the raw ``{node id: device id}``.
* :func:`torch_pipeline` gives a pipelined result's stages, ranks, action lists (torch's
  schedule CSV, or the built-in schedule's class) and predicted step time, for
  ``torch.distributed.pipelining`` and ``optpart run``.

Operators are tied to modules by the node metadata ``module`` (the ``named_modules()``
path of the innermost module that ran them, written by the PyTorch importer); an
optimizer node ``update.<param>`` belongs to its parameter's module. No export cuts inside a
module the import kept whole (``--no-split`` classes) or a module holding parameters the import
did not name (:func:`optpart.export.tree.kept_whole`). Operators outside every module (the
loss, inputs) are not in a device map: under ``accelerate`` they run where their inputs are,
so the scored plan puts each of them on the device of its predecessor with the largest edge
(its successor's for nodes without predecessors).

See ``docs/export.md`` and ``docs/apply.md``.
"""

from .pipeline import SplitPlan, TorchPipeline, split_points, torch_pipeline
from .plan import ExportError, ModulePlan, closest_plan, device_map, module_plan, placement_map
from .tree import node_modules

__all__ = ["ModulePlan", "module_plan", "closest_plan", "device_map", "split_points", "placement_map", "node_modules",
           "SplitPlan", "ExportError", "TorchPipeline", "torch_pipeline"]
