"""Pipelined training steps: the plans torch's pipelining runtime executes (docs/model.md section 7).

A step of ``M`` micro-batches runs as a chain of **stages** (:mod:`.stages`), each on one
device, with per device a list of actions (:class:`~optpart.pipeline.plan.PipelinePlan`,
torch's ``"0F1"`` strings); :func:`solve_pipelined` finds the stages and the action orders
(named schedules of :mod:`.schedules` and a search from them), and every plan is scored on the
unrolled step by the one evaluator (:mod:`.expand`).

>>> import optpart
>>> p = optpart.load("instances/small/mlp4-torch-training.json")  # doctest: +SKIP
>>> r = optpart.solve(p, micro_batches=4)                         # doctest: +SKIP
"""

from .plan import Action, PipelinePlan
from .step import PipelineStep, check_micro_batches
from .unrolled import SEP

__all__ = ["Action", "PipelinePlan", "PipelineStep", "check_micro_batches", "SEP"]
