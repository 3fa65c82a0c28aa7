"""Run a plan in PyTorch: a placed training step, and measured operator times.

* :func:`apply`: the traced training step as a ``torch.fx.GraphModule`` whose operators
  run on their placed devices, in the order of the plan's schedule; :func:`check_devices`
  proves that each operator reads only tensors on its own device (every transfer present);
* :func:`apply_inference`: the module's forward pass (eval mode) placed by the same plan;
* :func:`run_pipeline`: a pipelined plan (``result.options["pipeline"]``) run by
  ``torch.distributed.pipelining`` across processes, stage modules cut from our own trace
  (:mod:`optpart.torch.stages`), measured beside the prediction;
* :func:`profile_times`: each operator of a traced step timed on real tensors on one
  device; :func:`with_measured_times` puts them into a problem, and
  :func:`measured_problem` does both for a problem imported from a module.

See ``docs/apply.md``.
"""

from .inference import apply_inference
from .placed import apply
from .transfers import check_devices
from .profiling import measured_problem, profile_times, with_measured_times
from .run import PipelineRun, run_pipeline

__all__ = ["apply", "apply_inference", "check_devices", "profile_times", "with_measured_times", "measured_problem",
           "run_pipeline", "PipelineRun"]
