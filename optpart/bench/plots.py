"""Figures: a schedule (Gantt chart with transfers, and memory over time) and a database's gaps.

matplotlib is the optional ``plot`` extra: it is imported inside the functions, with
the non-interactive Agg backend unless a backend was already chosen (a notebook's).

* :func:`plot_schedule`: one bar per node on its device's row, a line from producer
  to consumer row for each cross-device edge (from the producer's finish to the
  tensor's arrival; left out above ``max_transfers``), and below it the memory in use
  per device under the result's memory model (peak: bytes live over time,
  :func:`~optpart.evaluate.memory_timeline`; static: each device's sum), beside the capacity
  as a dotted line; the other model's figures are not drawn against the capacity.
* :func:`plot_gaps`: per solver, the distribution of the gap to the best lower bound
  and of the makespan over the best known (box plots), from a results database.
* :func:`figure_problems`: what a figure lacks (title, axis labels, legend), so tests
  and the notebook can hold every figure to the same standard.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import OptpartError
from ..text import plot_safe
from ..model.problem import Problem
from ..result import Result
from ..model.memory import memory_timeline, static_memory

__all__ = ["plot_schedule", "plot_gaps", "figure_problems", "save_figure", "is_sqlite", "memory_timeline",
           "solver_color", "image_formats"]


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise OptpartError("plots need matplotlib: pip install 'optpart[plot]'") from None
    if "matplotlib.pyplot" not in sys.modules:  # keep a backend already chosen (a notebook's)
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _time_unit(span: float) -> tuple[str, float]:
    """A readable unit for times up to ``span`` seconds: (name, seconds per unit)."""
    for name, size in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if span >= size:
            return name, size
    return "ns", 1e-9


def _byte_unit(top: float) -> tuple[str, float]:
    for name, size in (("GiB", 2.0**30), ("MiB", 2.0**20), ("KiB", 2.0**10)):
        if top >= size:
            return name, size
    return "B", 1.0


#: One colour per solver, the same in every figure (matplotlib's tab10 and tab20 colours, by hex):
#: the built-in solvers first, in a fixed order, then others (plugins) by their name.
_SOLVER_ORDER = ("heuristic", "cpsat", "milp", "heft", "etf", "topo", "metis", "single", "pardnn", "gpipe", "1f1b")
_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
            "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d")


def solver_color(solver: str) -> str:
    """The colour of ``solver`` in every figure (a Gantt's legend aside): built-in solvers have
    fixed colours, any other name (a plugin, ``heuristic (M=8)``) one chosen from its text.

    Parameters
    ----------
    solver : str
        A solver name or run label.

    Returns
    -------
    str
        A hex colour.

    Examples
    --------
    >>> solver_color("heuristic"), solver_color("cpsat")
    ('#1f77b4', '#ff7f0e')
    """
    base = solver.split(" (", 1)[0]
    if base in _SOLVER_ORDER:
        return _PALETTE[_SOLVER_ORDER.index(base)]
    rest = _PALETTE[len(_SOLVER_ORDER):]
    return rest[sum(base.encode("utf-8")) % len(rest)]  # deterministic: no hash seed


def image_formats() -> set[str]:
    """The file extensions :func:`save_figure` can write (matplotlib's, e.g. png, svg, pdf).

    Returns
    -------
    set of str
        Lower-case extensions without the dot.
    """
    _pyplot()
    from matplotlib.backend_bases import FigureCanvasBase

    return set(FigureCanvasBase.get_supported_filetypes())


def is_sqlite(path: str | Path) -> bool:
    """True when ``path`` is an SQLite file (by its 16-byte header).

    Parameters
    ----------
    path : str or Path
        The file to look at (a missing or unreadable file is not SQLite).

    Returns
    -------
    bool
        Whether the file starts with SQLite's 16-byte ``SQLite format 3`` header.
    """
    try:
        with open(path, "rb") as fh:
            return fh.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def save_figure(fig: Any, path: str | Path, dpi: int = 120) -> None:
    """Write ``fig`` (the format follows the file's extension) and release it.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure to write; it is closed afterwards so long sweeps do not pile up figures.
    path : str or Path
        Output file; ``.png``, ``.pdf``, ``.svg``, ... choose the format.
    dpi : int
        Resolution of raster formats, dots per inch.
    """
    plt = _pyplot()
    fig.savefig(str(path), dpi=dpi, bbox_inches="tight")
    plt.close(fig)


def plot_schedule(problem: Problem, result: Result, *, max_transfers: int = 300, max_labels: int = 40) -> Any:
    """A result's schedule per device with its transfers, over its memory in use per device.

    Parameters
    ----------
    problem, result : a result with a placement and schedule, and its problem
    max_transfers : cross-device edges above this count are not drawn (the legend says how many)
    max_labels : node ids are written in their bars when the graph has at most this many nodes

    Returns
    -------
    matplotlib.figure.Figure
    """
    if not result.ok or result.start is None:
        raise OptpartError(f"result for '{problem.name}' has status '{result.status.value}' and no schedule to draw")
    plt = _pyplot()
    from matplotlib.collections import LineCollection
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    k = problem.n_devices
    place = np.asarray(result.placement)
    start, finish = np.asarray(result.start, float), np.asarray(result.finish, float)
    makespan = float(finish.max()) if finish.size else 0.0
    tname, tsize = _time_unit(makespan)
    colors = plt.get_cmap("tab10" if k <= 10 else "tab20")
    fig, (ax, axm) = plt.subplots(2, 1, figsize=(11, 3.0 + 0.45 * k + 3.2), sharex=True,
                                  gridspec_kw={"height_ratios": [max(1.0, 0.45 * k + 1.0), 3.2]})
    # Gantt: row d (top to bottom), one bar per node.
    row = {d: k - 1 - d for d in range(k)}
    handles = []
    for d in range(k):
        on = np.flatnonzero(place == d)
        bars = [(start[v] / tsize, (finish[v] - start[v]) / tsize) for v in on.tolist()]
        ax.broken_barh(bars, (row[d] - 0.38, 0.76), facecolors=colors(d % colors.N), edgecolor="black", linewidth=0.3)
        busy = float((finish[on] - start[on]).sum())
        handles.append(Patch(facecolor=colors(d % colors.N), edgecolor="black",
                             label=f"{plot_safe(problem.device_ids[d])}: {on.size} nodes, busy {busy / max(makespan, 1e-300):.0%}"))
    from ..pipeline.plot import draw_micro_batches  # a pipelined step: bars coloured by micro-batch
    handles += draw_micro_batches(ax, problem, place, start, finish, row, tsize)
    if problem.n_nodes <= max_labels:
        for v in range(problem.n_nodes):
            if finish[v] - start[v] < 0.013 * makespan * len(problem.node_ids[v]):
                continue  # the id would not fit in its bar
            ax.text((start[v] + finish[v]) / 2 / tsize, row[int(place[v])], plot_safe(problem.node_ids[v]),
                    ha="center", va="center", fontsize=7, clip_on=True)
    # Transfers: producer's row at its finish -> consumer's row at the tensor's arrival.
    src, dst = problem.edge_src, problem.edge_dst
    cross = np.flatnonzero(place[src] != place[dst])
    if cross.size:
        comm = problem.transfer_times(place)
        if cross.size <= max_transfers:
            segs = [[(finish[src[e]] / tsize, row[int(place[src[e]])]),
                     ((finish[src[e]] + comm[e]) / tsize, row[int(place[dst[e]])])] for e in cross.tolist()]
            ax.add_collection(LineCollection(segs, colors="0.25", linewidths=0.8, alpha=0.7))
            ends = np.array([s[1] for s in segs])
            ax.plot(ends[:, 0], ends[:, 1], linestyle="none", marker="v", markersize=3, color="0.25")
            handles.append(Line2D([], [], color="0.25", marker="v", markersize=3,
                                  label=f"transfer ({cross.size}): producer end -> arrival"))
        else:
            handles.append(Line2D([], [], color="none", label=f"{cross.size} transfers (not drawn: > {max_transfers})"))
    ax.set_yticks([row[d] for d in range(k)], [plot_safe(d) for d in problem.device_ids])
    ax.set_ylim(-0.6, k - 0.4)
    ax.set_ylabel("device")
    from ..hardware import costs_label

    ax.set_title(f"{plot_safe(problem.name)}: {plot_safe(result.solver)}, {result.status.value} "
                 f"({result.memory_model} memory), makespan {makespan / tsize:.3g} {tname} "
                 f"(lower bound {result.lower_bound / tsize:.3g} {tname})\n{plot_safe(costs_label(problem))}",
                 fontsize=10)
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.grid(axis="x", alpha=0.3)
    # Memory over time per device.
    # Memory under the model the result is for, against the capacity. Under peak: bytes live
    # over time; under static: each device's sum of node memories (the liveness curve, which
    # the static sum bounds, is not drawn beside the capacity as if it were the checked figure).
    caps = problem.device_memory
    finite_caps = caps[np.isfinite(caps)]
    peak_model = result.memory_model == "peak"
    lines = memory_timeline(problem, place, start, finish) if peak_model else []
    static = static_memory(problem, place)
    top = max(([float(b.max()) for _, b in lines] if peak_model else [float(static.max()) if k else 0.0])
              + ([float(finite_caps.max())] if finite_caps.size else []))
    bname, bsize = _byte_unit(top)
    for d in range(k):
        c = colors(d % colors.N)
        if peak_model:
            t, b = lines[d]
            axm.plot(t / tsize, b / bsize, drawstyle="steps-post", color=c, linewidth=1.2,
                     label=f"{plot_safe(problem.device_ids[d])} live (peak {b.max() / bsize:.3g} {bname})")
        else:
            axm.hlines(static[d] / bsize, 0, makespan / tsize, colors=[c], linewidth=1.5,
                       label=f"{plot_safe(problem.device_ids[d])} static sum {static[d] / bsize:.3g} {bname}")
    mem_handles, _ = axm.get_legend_handles_labels()
    if finite_caps.size:
        axm.hlines(sorted(set((finite_caps / bsize).tolist())), 0, makespan / tsize, colors="black",
                   linestyles="dotted", linewidth=1.2)
        mem_handles.append(Line2D([], [], color="black", linestyle="dotted", label="capacity"))
    axm.set_xlabel(f"time ({tname})")
    axm.set_ylabel(f"memory ({bname})")
    axm.set_title("memory per device under the peak model: bytes live over time" if peak_model else
                  "memory per device under the static model: the sum of its nodes' memory")
    axm.legend(handles=mem_handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    axm.set_xlim(0, max(makespan / tsize, 1e-12))
    axm.set_ylim(bottom=0)
    axm.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def _gap_data(rows: Sequence[Mapping[str, Any]]) -> dict[str, tuple[list[float], list[float]]]:
    """Per solver: (gaps to the best bound in %, makespans over the best known) of its solved runs."""
    from .report import best_known

    best = best_known(rows)
    out: dict[str, tuple[list[float], list[float]]] = {}
    for r in rows:
        if r["status"] not in ("optimal", "feasible") or r["makespan"] is None:
            out.setdefault(r["solver"], ([], []))
            continue
        m = float(r["makespan"])
        bm, bb = best[r["problem_hash"]]
        gaps, ratios = out.setdefault(r["solver"], ([], []))
        gaps.append(0.0 if m <= 0 else 100.0 * max(0.0, m - min(bb, m)) / m)
        ratios.append(1.0 if bm <= 0 else m / bm)
    return {s: out[s] for s in sorted(out)}


def plot_gaps(source: str | Path | sqlite3.Connection | Sequence[Mapping[str, Any]]) -> Any:
    """Box plots per solver of the gap to the best lower bound and of makespan / best known.

    ``source`` is a results database (path or connection) or its rows
    (:func:`optpart.bench.db.load_runs`). Runs without a placement are counted in the
    legend, not drawn.

    Parameters
    ----------
    source : path, sqlite3.Connection or sequence of mappings
        The runs to plot: a results database written by ``optpart bench``, or its rows.

    Returns
    -------
    matplotlib.figure.Figure
        Two panels (gap to the best lower bound, makespan over the best known), one box per solver.
    """
    from . import db as _db

    rows = list(source) if isinstance(source, (list, tuple)) else _db.load_runs(source)
    plt = _pyplot()
    from matplotlib.patches import Patch

    data = _gap_data(rows)
    solvers = list(data)
    fig, axes = plt.subplots(1, 2, figsize=(max(8.0, 1.6 * len(solvers) + 5), 4.2))
    panels = [("gap to the best lower bound", "gap (% of makespan)", 0),
              ("makespan relative to the best known", "makespan / best known (ratio)", 1)]
    for ax, (title, ylabel, i) in zip(axes, panels):
        values = [data[s][i] for s in solvers]
        drawn = [(j, v) for j, v in enumerate(values) if v]
        if drawn:
            box = ax.boxplot([v for _, v in drawn], positions=[j + 1 for j, _ in drawn], widths=0.6,
                             patch_artist=True, showmeans=True)
            for patch, (j, _) in zip(box["boxes"], drawn):
                patch.set_facecolor(solver_color(solvers[j]))
                patch.set_alpha(0.7)
        else:
            ax.text(0.5, 0.5, "no run with a placement", ha="center", va="center", transform=ax.transAxes)
        ax.set_xticks(range(1, len(solvers) + 1), [plot_safe(s) for s in solvers])
        ax.set_xlim(0.4, len(solvers) + 0.6)
        ax.set_xlabel("solver")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
    total = {s: sum(r["solver"] == s for r in rows) for s in solvers}
    handles = [Patch(facecolor=solver_color(s), alpha=0.7,
                     label=f"{plot_safe(s)}: {len(data[s][0])} of {total[s]} runs with a placement") for j, s in enumerate(solvers)]
    axes[1].legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    axes[0].legend(handles=[plt.Line2D([], [], color="green", marker="^", linestyle="none", label="mean"),
                            plt.Line2D([], [], color="orange", label="median")], fontsize=8, loc="upper right")
    n_problems = len({r["problem_hash"] for r in rows})
    fig.suptitle(f"solver quality over {n_problems} problem settings ({len(rows)} runs)")
    fig.tight_layout()
    return fig


def figure_problems(fig: Any) -> list[str]:
    """What ``fig`` lacks: for every axes with data, a title (its own or the figure's),
    an x and a y label, and a legend (its own or a neighbour's). Empty when complete.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        A figure made by this module (the notebooks' and ``optpart plot``'s figures are checked with it).

    Returns
    -------
    list of str
        One line per missing title, axis label or legend, naming the axes.
    """
    out = []
    axes = [ax for ax in fig.get_axes() if ax.has_data()]
    suptitle = fig.get_suptitle() if hasattr(fig, "get_suptitle") else getattr(fig, "_suptitle", None)
    has_suptitle = bool(suptitle if isinstance(suptitle, str) else suptitle and suptitle.get_text())
    any_legend = any(ax.get_legend() is not None for ax in axes) or bool(fig.legends)
    for i, ax in enumerate(axes):
        name = f"axes {i} ({ax.get_title() or 'untitled'})"
        if not (ax.get_title() or has_suptitle):
            out.append(f"{name}: no title")
        if not any(a.get_xlabel() for a in ax.get_shared_x_axes().get_siblings(ax)):
            out.append(f"{name}: no x label")
        if not ax.get_ylabel():
            out.append(f"{name}: no y label")
    if axes and not any_legend:
        out.append("no legend")
    return out
