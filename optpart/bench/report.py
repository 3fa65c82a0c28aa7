"""Summaries of a results database: one line per solver and setting (device count, memory scale).

For each problem (one ``problem_hash``: graph, devices and memory limits) the
*best known* makespan is the smallest any run in the reference rows found, and the
*best bound* the largest lower bound any run proved (every solver's bound is a
proven bound, docs/model.md section 4). A line then gives:

* ``runs``: number of runs; ``errors``: runs that raised;
* ``feasible``: share of runs with a valid placement (status optimal or feasible);
* ``optimal``: share proven optimal;
* ``ms/best geo`` and ``ms/best max``: makespan over the best known, geometric mean and
  maximum over the runs with a placement (1.0 = as good as the best known);
* ``gap mean``: mean of ``(makespan - best bound) / makespan`` over those runs;
* ``wall median``: median wall time in seconds, over every run.

:func:`per_instance` lists every run instead (``optpart report --by instance``): its status,
makespan, makespan over the best known and gap.

Ratios use the geometric mean because they are ratios (Fleming and Wallace, "How not
to lie with statistics: the correct way to summarize benchmark results", CACM 1986).
"""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
from typing import Any, Iterable, Mapping, Sequence

from ..errors import OptpartError

__all__ = ["FORMATS", "VIEWS", "best_known", "summarize", "per_instance", "format_report", "LEGEND"]

FORMATS = ("markdown", "csv", "json")
#: ``setting``: one line per solver and setting; ``instance``: one line per run.
VIEWS = ("setting", "instance")

_HEADER = [("solver", "solver"), ("devices", "devices"), ("memory_scale", "memory scale"), ("runs", "runs"),
           ("errors", "errors"), ("feasible", "feasible"), ("optimal", "optimal"),
           ("rel_geomean", "makespan/best geo"), ("rel_max", "makespan/best max"), ("gap_mean", "gap mean"),
           ("wall_median_s", "wall median (s)")]
_INSTANCE_HEADER = [("problem", "problem"), ("devices", "devices"), ("memory_scale", "memory scale"),
                    ("solver", "solver"), ("status", "status"), ("makespan_s", "makespan (s)"),
                    ("rel", "makespan/best"), ("gap", "gap"), ("wall_s", "wall (s)")]

#: What the columns of a Markdown report mean (printed under the table).
LEGEND = {
    "setting": "\n".join([
        "Columns:",
        "- memory scale: each device's capacity as a multiple of the instance's own (of total memory / K for a "
        "graph without capacities)",
        "- feasible, optimal: share of runs with a placement; share proven optimal",
        "- makespan/best geo, max: the run's makespan over the best any run in the database found for the same "
        "problem and devices (1.000 = the best), geometric mean and maximum over the runs with a placement",
        "- gap mean: mean of (makespan - best proven bound) / makespan over the runs with a placement",
        "- wall median (s): median wall time of the solver",
        "One line per run: optpart report DB --by instance."]),
    "instance": "\n".join([
        "Columns:",
        "- makespan/best: the run's makespan over the best any run found for the same problem, devices and memory "
        "scale (1.000 = the best)",
        "- gap: (makespan - best proven bound) / makespan; a run without a placement shows its status and '-'"]),
}

_SOLVED = ("optimal", "feasible")


def best_known(rows: Iterable[Mapping[str, Any]]) -> dict[str, tuple[float, float]]:
    """``{problem_hash: (best makespan, best lower bound)}``; best makespan is inf when none was found.

    Parameters
    ----------
    rows : iterable of mapping
        Runs (:func:`optpart.bench.db.load_runs`).

    Returns
    -------
    dict of str to tuple of float
        Per problem hash, the smallest makespan of a run with a placement (seconds) and the
        largest lower bound of any run that did not fail.
    """
    best: dict[str, list[float]] = {}
    for r in rows:
        entry = best.setdefault(r["problem_hash"], [math.inf, 0.0])
        if r["status"] in _SOLVED and r["makespan"] is not None:
            entry[0] = min(entry[0], float(r["makespan"]))
        if r["status"] != "error" and r["lower_bound"] is not None:
            entry[1] = max(entry[1], float(r["lower_bound"]))
    return {h: (m, b) for h, (m, b) in best.items()}


def _ratio(makespan: float, best: float) -> float:
    if best <= 0:
        return 1.0 if makespan <= 0 else math.inf
    return makespan / best


def summarize(rows: Sequence[Mapping[str, Any]],
              reference: Sequence[Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One dictionary per (solver, devices, memory scale), sorted by devices, scale, solver.

    ``reference`` (default: ``rows``) gives the best known makespans and bounds, so a
    report on one sweep can still compare with everything else in the database.

    Parameters
    ----------
    rows : sequence of mapping
        The runs to summarise.
    reference : sequence of mapping, optional
        Runs giving the best known makespan and bound per problem.

    Returns
    -------
    list of dict
        Per group: runs, feasible and optimal shares, mean gap, makespan over best known
        (geometric mean and maximum), median wall time.
    """
    best = best_known(reference if reference is not None else rows)
    groups: dict[tuple[str, int, float], list[Mapping[str, Any]]] = {}
    from .pipeline import run_label  # pipelined runs: "heuristic (M=8)"

    for r in rows:
        groups.setdefault((run_label(r), int(r["devices"]), float(r["memory_scale"])), []).append(r)
    out = []
    for (solver, k, scale) in sorted(groups, key=lambda g: (g[1], g[2], g[0])):
        rs = groups[(solver, k, scale)]
        solved = [r for r in rs if r["status"] in _SOLVED and r["makespan"] is not None]
        ratios, gaps = [], []
        for r in solved:
            m = float(r["makespan"])
            bm, bb = best.get(r["problem_hash"], (m, 0.0))
            ratios.append(_ratio(m, min(bm, m)))
            gaps.append(0.0 if m <= 0 else max(0.0, (m - min(bb, m)) / m))
        walls = [float(r["wall_seconds"]) for r in rs if r["wall_seconds"] is not None]
        finite = [x for x in ratios if math.isfinite(x) and x > 0]
        out.append({
            "solver": solver, "devices": k, "memory_scale": scale, "runs": len(rs),
            "errors": sum(r["status"] == "error" for r in rs),
            "feasible": len(solved) / len(rs),
            "optimal": sum(r["status"] == "optimal" for r in rs) / len(rs),
            "rel_geomean": math.exp(statistics.fmean(math.log(x) for x in finite)) if finite else None,
            "rel_max": max(ratios) if ratios else None,
            "gap_mean": statistics.fmean(gaps) if gaps else None,
            "wall_median_s": statistics.median(walls) if walls else None,
        })
    return out


def per_instance(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One dictionary per run, sorted by problem, devices, memory scale and solver: the
    per-instance view of ``optpart report --by instance``.

    Parameters
    ----------
    rows : sequence of mapping
        The runs to list (they give the best known makespan and bound per problem).

    Returns
    -------
    list of dict
        ``problem``, ``devices``, ``memory_scale``, ``solver``, ``status``, ``makespan_s``,
        ``rel`` (makespan over the best known), ``gap`` (to the best bound) and ``wall_s``.
    """
    best = best_known(rows)
    from .pipeline import run_label

    out = []
    for r in rows:
        m = float(r["makespan"]) if r["status"] in _SOLVED and r["makespan"] is not None else None
        bm, bb = best.get(r["problem_hash"], (math.inf, 0.0))
        out.append({"problem": r.get("problem") or r["problem_hash"][:12], "devices": int(r["devices"]),
                    "memory_scale": float(r["memory_scale"]), "solver": run_label(r), "status": r["status"],
                    "makespan_s": m, "rel": None if m is None else _ratio(m, min(bm, m)),
                    "gap": None if m is None else (0.0 if m <= 0 else max(0.0, (m - min(bb, m)) / m)),
                    "wall_s": None if r.get("wall_seconds") is None else float(r["wall_seconds"])})
    return sorted(out, key=lambda x: (x["problem"], x["devices"], x["memory_scale"], x["solver"]))


def _cell(key: str, value: Any) -> str:
    if value is None:
        return "-"
    if key in ("feasible", "optimal", "gap_mean", "gap"):
        return f"{100 * value:.1f}%"
    if key in ("rel_geomean", "rel_max", "rel"):
        return f"{value:.3f}"
    if key == "memory_scale":
        return f"{value:g}"
    if key in ("wall_median_s", "wall_s", "makespan_s"):
        return f"{value:.3g}"
    return str(value)


def format_report(summary: Sequence[Mapping[str, Any]], fmt: str = "markdown", view: str = "setting",
                  legend: bool = False) -> str:
    """The summary as a Markdown table, CSV (raw numbers) or JSON (raw numbers).

    Parameters
    ----------
    summary : sequence of mapping
        :func:`summarize`'s rows (``view="setting"``) or :func:`per_instance`'s (``"instance"``).
    fmt : {"markdown", "csv", "json"}, optional
        The output format.
    view : {"setting", "instance"}, optional
        Which rows ``summary`` holds.
    legend : bool, optional
        Markdown only: add what each column means (:data:`LEGEND`) under the table.

    Returns
    -------
    str
        The report, ending in a newline.

    Raises
    ------
    OptpartError
        For a format not in :data:`FORMATS` or a view not in :data:`VIEWS`.
    """
    if view not in VIEWS:
        raise OptpartError(f"report view {view!r}: expected one of {', '.join(VIEWS)}")
    columns = _HEADER if view == "setting" else _INSTANCE_HEADER
    if fmt == "json":
        return json.dumps(list(summary), indent=2) + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow([k for k, _ in columns])
        for row in summary:
            writer.writerow(["" if row[k] is None else row[k] for k, _ in columns])
        return buf.getvalue()
    if fmt != "markdown":
        raise OptpartError(f"report format {fmt!r}: expected one of {', '.join(FORMATS)}")
    header = [title for _, title in columns]
    cells = [[_cell(k, row[k]) for k, _ in columns] for row in summary]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(header)]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    text = "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, cells)]) + "\n"
    return text + (f"\n{LEGEND[view]}\n" if legend else "")
