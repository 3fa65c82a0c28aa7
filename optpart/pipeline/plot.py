"""The Gantt chart of a pipelined step: every bar coloured by its micro-batch.

:func:`optpart.bench.plots.plot_schedule` (``optpart plot RESULT --problem FILE``) calls
:func:`draw_micro_batches` after drawing its bars: on the unrolled step of a pipelined
result (``meta.micro_batches > 1``) it redraws them with one colour per micro-batch (a
sequential colour map, micro-batch 0 darkest) and the once-per-step nodes (optimizer
updates) in grey, and returns the legend entries; on any other problem it draws nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..model.problem import Problem
from .unrolled import SEP

__all__ = ["micro_batch_index", "draw_micro_batches"]

#: Most micro-batches listed one by one in the legend (beyond it: the first and the last).
LEGEND_ROWS = 8


def micro_batch_index(problem: Problem) -> np.ndarray | None:
    """Micro-batch of every node of an unrolled step (-1: runs once per step).

    Parameters
    ----------
    problem
        Any problem; a pipelined one is the unrolled step (:meth:`PipelineStep.unrolled`),
        whose per-micro-batch nodes are ``v@mb<i>``.

    Returns
    -------
    numpy.ndarray or None
        ``None`` when ``problem`` is not the unrolled step of more than one micro-batch.
    """
    m = (problem.meta or {}).get("micro_batches")
    if not isinstance(m, int) or isinstance(m, bool) or m <= 1:
        return None
    out = np.full(problem.n_nodes, -1, dtype=np.int64)
    for v, nid in enumerate(problem.node_ids):
        head, sep, tail = nid.rpartition(SEP)
        if sep and head and tail.isdigit():
            out[v] = int(tail)
    return out


def draw_micro_batches(ax: Any, problem: Problem, placement: np.ndarray, start: np.ndarray, finish: np.ndarray,
                       row: dict[int, int], time_unit: float) -> list[Any]:
    """Redraw a pipelined step's Gantt bars coloured by micro-batch; legend entries back.

    Parameters
    ----------
    ax
        The Gantt axes (matplotlib).
    problem
        The problem the result is over (the unrolled step for a pipelined result).
    placement, start, finish
        The result's device per node and start and finish times (seconds).
    row
        Device index -> y position of its row.
    time_unit
        Seconds per unit of the x axis.

    Returns
    -------
    list
        Legend handles (one per micro-batch, at most :data:`LEGEND_ROWS` listed, and one
        for the once-per-step nodes); empty when ``problem`` is not pipelined.
    """
    mb = micro_batch_index(problem)
    if mb is None:
        return []
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    m = int(problem.meta["micro_batches"])
    cmap = plt.get_cmap("viridis")
    colour = lambda i: cmap(0.85 * i / max(m - 1, 1)) if i >= 0 else (0.7, 0.7, 0.7, 1.0)
    place = np.asarray(placement)
    for d, y in row.items():
        on = np.flatnonzero(place == d)
        bars = [(start[v] / time_unit, (finish[v] - start[v]) / time_unit) for v in on.tolist()]
        ax.broken_barh(bars, (y - 0.38, 0.76), facecolors=[colour(int(mb[v])) for v in on.tolist()],
                       edgecolor="black", linewidth=0.3)
    shown = list(range(m)) if m <= LEGEND_ROWS else [0, m - 1]
    handles = [Patch(facecolor=colour(i), edgecolor="black", label=f"micro-batch {i}") for i in shown]
    if m > LEGEND_ROWS:
        handles.insert(1, Patch(facecolor="none", edgecolor="none", label=f"micro-batches 1-{m - 2}: colours between"))
    if (mb < 0).any():
        handles.append(Patch(facecolor=colour(-1), edgecolor="black", label="once per step (optimizer)"))
    return handles
