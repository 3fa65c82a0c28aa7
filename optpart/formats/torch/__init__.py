"""PyTorch tracing for the importer: :func:`trace_training_step` and :class:`TracedStep`.

The problem builder is :func:`optpart.formats.torch_import.from_torch`.
"""

from .aliasing import check_aliasing, ordering_edges, unordered_accesses
from .inputs import DEFAULT_LOSS, OUTPUT_LOSS, default_loss, output_tensors
from .trace import TracedStep, trace_training_step

__all__ = ["TracedStep", "trace_training_step", "default_loss", "output_tensors", "DEFAULT_LOSS", "OUTPUT_LOSS",
           "check_aliasing", "unordered_accesses", "ordering_edges"]
