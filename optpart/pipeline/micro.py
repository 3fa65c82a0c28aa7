"""Tracing at the micro-batch size: one micro-batch of a model's example inputs.

``from_torch(model, inputs, micro_batches=M)`` and ``optpart import ... --micro-batches M``
trace **one** micro-batch: every tensor of the inputs and targets is split along its first
(batch) dimension into ``M`` equal parts and the first part is traced (and, with
``--profile``, timed). The costs of the problem are then those of one micro-batch, so the
file records it (``docs/model.md`` section 7)::

    meta.per_micro_batch = true
    meta.pipeline = {"micro_batches": M, "micro_batch_size": B / M, "batch_size": B}

and every solve of the file (``optpart solve FILE``, ``optpart.solve(problem)``) is a step
of ``M`` micro-batches unless ``--micro-batches`` / ``micro_batches=`` says otherwise
(another count is a step of that many micro-batches of ``B / M`` samples each).

The batch is the first dimension of the input tensors: every tensor input and target with
at least one dimension must have the same first size ``B`` (a tensor that is not batched,
such as a 0-d flag, is passed whole). ``B`` must divide into ``M`` equal parts; otherwise
one line names the input and the sizes (the CLI exits 2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import FormatError
from ..model.problem import Problem
from .step import check_micro_batches

__all__ = ["MicroBatch", "split_micro_batch", "record_micro_batches"]


@dataclass(frozen=True)
class MicroBatch:
    """How a batch was split: ``count`` micro-batches of ``size`` samples from a batch of ``batch``."""

    count: int
    size: int
    batch: int

    def record(self) -> dict[str, int]:
        """The ``meta.pipeline`` record of a problem traced at this micro-batch size.

        Returns
        -------
        dict
            ``{"micro_batches": M, "micro_batch_size": b, "batch_size": B}``.
        """
        return {"micro_batches": self.count, "micro_batch_size": self.size, "batch_size": self.batch}


def _is_tensor(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "narrow") and hasattr(x, "dim")


def _leaves(x: Any, path: str, out: list[tuple[str, Any]]) -> None:
    if _is_tensor(x):
        out.append((path, x))
    elif isinstance(x, dict):
        for k, v in x.items():
            _leaves(v, f"{path}[{k!r}]", out)
    elif isinstance(x, (list, tuple)):
        for i, v in enumerate(x):
            _leaves(v, f"{path}[{i}]", out)


def _first_part(x: Any, size: int) -> Any:
    if _is_tensor(x):
        return x.narrow(0, 0, size) if x.dim() >= 1 else x
    if isinstance(x, dict):
        return type(x)((k, _first_part(v, size)) for k, v in x.items())
    if isinstance(x, tuple) and hasattr(x, "_fields"):  # a named tuple
        return type(x)(*(_first_part(v, size) for v in x))
    if isinstance(x, (list, tuple)):
        return type(x)(_first_part(v, size) for v in x)
    return x


def split_micro_batch(inputs: Any, targets: Any, micro_batches: Any) -> tuple[Any, Any, MicroBatch]:
    """The first of ``micro_batches`` equal parts of a batch (module docstring).

    Parameters
    ----------
    inputs
        Example inputs of ``module.forward``: a tensor, a sequence of tensors or a dict of
        keyword tensors (nested containers are walked).
    targets
        Extra inputs of the loss (labels), split the same way; ``()`` when none.
    micro_batches
        ``M``, an integer >= 1 (as :func:`~optpart.pipeline.step.check_micro_batches` takes it).

    Returns
    -------
    tuple
        ``(inputs, targets, split)``: the same containers holding the first micro-batch of
        every batched tensor (views, no copy), and the :class:`MicroBatch` that was taken.

    Raises
    ------
    FormatError
        When ``M`` is not an integer >= 1, no input has a batch dimension while ``M > 1``,
        two inputs disagree on the batch size, or the batch does not divide into ``M``
        equal parts (one line naming the input and the sizes).
    """
    m = check_micro_batches(micro_batches)
    if m == 1:  # the whole batch, untouched (no batch dimension is looked for)
        return inputs, targets, MicroBatch(1, 0, 0)
    found: list[tuple[str, Any]] = []
    _leaves(inputs, "inputs", found)
    _leaves(targets, "targets", found)
    batched = [(path, int(t.shape[0])) for path, t in found if t.dim() >= 1]
    if not batched:
        raise FormatError(f"--micro-batches {m}: no input tensor has a batch dimension to split")
    first_path, batch = batched[0]
    for path, size in batched[1:]:
        if size != batch:
            raise FormatError(f"--micro-batches {m}: {path} has {size} samples in its first dimension but "
                              f"{first_path} has {batch}; every batched input must share the batch dimension")
    if m > batch:
        raise FormatError(f"--micro-batches {m} is larger than the batch ({batch} samples in {first_path})")
    if batch % m:
        raise FormatError(f"--micro-batches {m} does not divide the batch of {batch} samples ({first_path}) "
                          "into equal micro-batches")
    size = batch // m
    return _first_part(inputs, size), _first_part(targets, size), MicroBatch(m, size, batch)


def record_micro_batches(problem: Problem, split: MicroBatch) -> Problem:
    """``problem`` (traced at one micro-batch) with the record of how it was split.

    Parameters
    ----------
    problem
        The problem traced on the first micro-batch.
    split
        What :func:`split_micro_batch` took.

    Returns
    -------
    Problem
        ``problem`` itself when ``M`` is 1; else a copy whose ``meta`` has
        ``per_micro_batch: true`` and ``pipeline`` (:meth:`MicroBatch.record`).
    """
    if split.count == 1:
        return problem
    return problem.with_meta(per_micro_batch=True, pipeline=split.record())
