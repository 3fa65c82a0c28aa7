"""Refining the cuts of a stage-contiguous placement against the pipelined schedule.

The balanced cuts of :func:`optpart.pipeline.stages.balanced_cuts` equalise the work anchored
at each stage, which ignores what the schedule sees: transfers at stage boundaries, the
pipeline's fill and drain, and memory. :func:`refine_cuts` moves one cut at a time by a step
(halved when no move of that size helps) and keeps a move when the makespan of the
``micro-batch`` list schedule (:func:`optpart.pipeline.orders.list_schedule`) on the moved
placement drops and its memory still fits. The budget counts evaluations, so the search is
deterministic and independent of the machine's speed.
"""

from __future__ import annotations

import numpy as np

from .._docstrings import fill_doc
from ..evaluate import evaluate, time_tolerance
from ..model.memory import fits
from .orders import list_schedule, priorities
from .stages import anchors, balanced_cuts, cut_placement, position_weights
from .step import PipelineStep

__all__ = ["refine_cuts"]


def _makespan(step: PipelineStep, placement: np.ndarray, memory_model: str) -> float:
    """Makespan of the ``micro-batch`` list schedule, ``inf`` when it overflows memory."""
    start, finish = list_schedule(step, placement, priorities(step, placement)["micro-batch"])
    r = evaluate(step.unrolled(), step.tile(placement), start, memory_model=memory_model)
    use = r.memory_peak if memory_model == "peak" else r.memory_static
    cap = step.base.device_memory
    if not all(fits(float(u), float(c)) for u, c in zip(use.tolist(), cap.tolist())):
        return float("inf")
    return float(finish.max()) if finish.size else 0.0


@fill_doc
def refine_cuts(step: PipelineStep, n_stages: int, memory_model: str = "peak", budget: int = 24
                ) -> tuple[np.ndarray, int]:
    """A stage-contiguous placement whose cuts are moved to shorten the pipelined schedule.

    Parameters
    ----------
    %(step)s
    n_stages
        Number of stages (stage ``s`` on device ``s``).
    memory_model
        ``peak`` or ``static``: a move that overflows a device is refused.
    budget
        Most schedule evaluations (the balanced start counts one).

    Returns
    -------
    tuple
        ``(placement, evaluations)``: device per base node, and the evaluations spent.
    """
    p = step.base
    s = max(1, min(int(n_stages), p.n_devices))
    anchor = anchors(step)
    weight = position_weights(step, anchor)
    stage = balanced_cuts(weight, s)
    n_pos = stage.size
    cuts = [int(i) for i in np.flatnonzero(np.diff(stage)) + 1]  # first position of stages 1..
    if not cuts or n_pos < 2:
        return cut_placement(step, anchor, stage), 0

    def placement_of(c: list[int]) -> np.ndarray:
        st = np.zeros(n_pos, dtype=np.int64)
        for j, x in enumerate(c):
            st[x:] = j + 1
        return cut_placement(step, anchor, st)

    best = _makespan(step, placement_of(cuts), memory_model)
    used = 1
    delta = max(1, n_pos // (4 * s))
    while delta >= 1 and used < budget:
        improved = False
        for j in range(len(cuts)):
            for sign in (-1, 1):
                if used >= budget:
                    break
                c = list(cuts)
                c[j] += sign * delta
                lo = c[j - 1] + 1 if j else 1
                hi = c[j + 1] - 1 if j + 1 < len(c) else n_pos - 1
                if not lo <= c[j] <= hi:
                    continue
                got = _makespan(step, placement_of(c), memory_model)
                used += 1
                if got < best - time_tolerance(best):
                    best, cuts, improved = got, c, True
        if not improved:
            delta //= 2
    return placement_of(cuts), used
