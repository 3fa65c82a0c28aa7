"""The human summary of a result that ``solve``, ``fit`` and ``evaluate`` print, and the
pieces other commands share: counts in words and the line naming the costs a time assumes."""

from __future__ import annotations

import numpy as np

from ..model.problem import Problem
from ..result import Result
from ..text import safe
from ..units import format_bytes, format_time
from .common import table

__all__ = ["format_summary", "costs_line", "runs_line", "plural"]


def plural(n: int, word: str) -> str:
    """``'1 solve'``, ``'2 solves'``, ``'0 devices'``.

    Parameters
    ----------
    n : int
        The count.
    word : str
        The singular noun (its plural adds ``s``).

    Returns
    -------
    str
    """
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def costs_line(problem: Problem) -> str:
    """``costs     H100-SXM bf16: 990 TFLOP/s at 50%, 3.35 TB/s; links 450 GB/s, 10 us (nvlink4)``:
    what the times shown assume, named beside them.

    Parameters
    ----------
    problem : Problem
        The problem whose times are shown.

    Returns
    -------
    str
        One line: the profile (or "costs as given in the file") and the links.
    """
    from ..hardware import costs_label, links_label

    label = costs_label(problem)
    return f"costs     {label.removeprefix('costs ')}; links {links_label(problem.links)}"


def runs_line(problem: Problem, result: Result) -> str | None:
    """``runs      ...``: how the plan of an ordinary (not pipelined) result runs, named beside its time.

    The makespan is the schedule of the evaluator: every device runs its operators one at a
    time, in parallel with the others, transfers overlapping. A step imported from PyTorch runs
    as that operator placement under :func:`optpart.torch.apply`; its exports (device maps,
    split points) run as accelerate and torch run them, and ``optpart export`` prints their own
    times. A graph from elsewhere has no framework that runs it.

    Parameters
    ----------
    problem : Problem
        The problem the result is for (its ``meta["source"]`` names where the graph came from).
    result : Result
        The result shown.

    Returns
    -------
    str or None
        One line, or None for a pipelined result (whose plan section says how it runs).
    """
    if result.options.get("pipeline"):
        return None
    if problem.meta.get("source") == "torch":
        return ("runs      as an operator placement: optpart.torch.apply runs it (one process, the plan's order); exported device maps and "
                "split points run as accelerate and torch run them (optpart export prints their times)")
    return "runs      as an operator placement on the model of docs/model.md; no framework runs this graph"


def format_summary(problem: Problem, result: Result) -> str:
    """The human summary of a result: headline figures and one row per device.

    Memory is shown under the model the result is for, beside the capacity; the other
    model's figures (which the placement need not respect) follow the table on a line of
    their own, labelled as such.

    Parameters
    ----------
    problem : Problem
        The problem the result is for (device ids, capacities, speeds).
    result : Result
        The result to show.

    Returns
    -------
    str
        Problem, solver, status, makespan, bound and gap, the cost profile, then per device:
        nodes, busy time, utilisation, memory under the result's model, capacity and speed.
    """
    lines = [
        f"problem   {safe(problem.name)}: {plural(problem.n_nodes, 'node')}, {plural(problem.n_edges, 'edge')}, "
        f"{plural(problem.n_devices, 'device')}",
        f"solver    {safe(result.solver)}",
        f"status    {result.status.value}" + (f" ({safe(result.message)})" if result.message else ""),
    ]
    if result.ok:
        lines.append(f"makespan  {format_time(result.makespan)}   lower bound {format_time(result.lower_bound)}   "
                     f"gap {result.gap:.2%}")
    else:
        lines.append(f"lower bound {format_time(result.lower_bound)}")
    lines.append(costs_line(problem))
    if (runs := runs_line(problem, result)) is not None:
        lines.append(runs)
    lines.append(f"time      {format_time(result.wall_seconds)} (wall clock of the solve)")
    model = result.memory_model
    other = "peak" if model == "static" else "static"
    same = not problem.has_split  # without the param/output/temp split the two models agree
    words = {"peak": "peak (liveness)", "static": "static (sum of node memories)"}
    lines.append(f"memory    {words[model]} model " + ("respected" if result.ok else "requested")
                 + ("; static and peak agree on this graph" if same and result.ok else ""))
    if result.ok:
        busy = np.bincount(result.placement, weights=problem.duration(result.placement),
                           minlength=problem.n_devices)
        count = np.bincount(result.placement, minlength=problem.n_devices)
        used = result.memory_peak if model == "peak" else result.memory_static
        rows = []
        for d, dev in enumerate(problem.devices):
            rows.append([safe(dev.id, 60), str(count[d]), format_time(busy[d]),
                         f"{busy[d] / result.makespan:.0%}" if result.makespan > 0 else "-",
                         format_bytes(used[d]), format_bytes(dev.memory), f"{dev.speed:g}"])
        lines += ["", table(rows, ["device", "nodes", "busy", "util", f"{model} mem", "capacity", "speed"])]
        if not same:
            figures = result.memory_static if other == "static" else result.memory_peak
            lines.append(f"{other} model (not the one in force, not compared with capacity): "
                         + ", ".join(f"{safe(dev.id, 60)} {format_bytes(figures[d])}"
                                     for d, dev in enumerate(problem.devices)))
    return "\n".join(lines)
