"""Micro-batch pipelining: one training step of ``M`` micro-batches on one shared placement.

The model is ``docs/model.md`` section 7. :class:`PipelineStep` holds the step (which nodes
run per micro-batch, which once, the per-micro-batch costs, and the unrolled problem every
pipelined result is judged on); :func:`solve_pipelined` places and schedules it (the
heuristic, the GPipe and 1F1B baselines, or any solver's placement with a found schedule);
:func:`schedule_placement` finds a schedule for a given placement.

>>> import optpart
>>> p = optpart.load("instances/small/mlp4-torch-training.json")  # doctest: +SKIP
>>> r = optpart.solve(p, micro_batches=4)                         # doctest: +SKIP
"""

from .solve import BASELINES, baseline_schedule, schedule_placement, solve_pipelined
from .stages import stage_placement
from .cli_hooks import add_micro_batch_argument, micro_batches_in_result, pipelined_for_result
from .step import SEP, PipelineStep, check_micro_batches

__all__ = ["PipelineStep", "check_micro_batches", "solve_pipelined", "schedule_placement",
           "baseline_schedule", "stage_placement", "BASELINES", "SEP", "add_micro_batch_argument",
           "pipelined_for_result", "micro_batches_in_result"]
