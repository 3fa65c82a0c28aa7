"""What a sweep leaves and shows: a meaningful README example, explained and per-run reports, one
file on disk, one colour per solver, memory drawn under the model in force."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

import optpart
from optpart.bench import db as bdb
from optpart.bench import load_runs, plan_sweep, run_sweep
from optpart.bench.report import LEGEND, format_report, per_instance, summarize
from optpart.cli import main

ROOT = Path(__file__).resolve().parents[2]
SMALL = sorted((ROOT / "instances" / "small").glob("*.json"))


def test_the_readme_sweep_settings_give_every_row_a_placement(tmp_path):
    # The README's example: instances/small on 2 and 4 devices at 1.5 x each file's capacity
    # (mlp6 has none: 1.5 x its memory over K). The heuristic at effort 0 (its constructions)
    # places every one of them, so each row of the table compares makespans.
    specs = plan_sweep(SMALL, ["heuristic"], devices=[2, 4], memory_scales=[1.5],
                       solver_options={"heuristic": {"effort": 0, "workers": 1}})
    run_sweep(specs, tmp_path / "r.sqlite", executor="inline")
    rows = load_runs(tmp_path / "r.sqlite")
    assert len(rows) == 6 and all(r["status"] in ("feasible", "optimal") for r in rows), \
        [(r["problem"], r["devices"], r["status"]) for r in rows]
    # ... while at the files' own capacity, 2 devices hold none of them: the table the README showed.
    specs = plan_sweep(SMALL, ["heuristic"], devices=[2], solver_options={"heuristic": {"effort": 0, "workers": 1}})
    run_sweep(specs, tmp_path / "s.sqlite", executor="inline")
    assert all(r["status"] not in ("feasible", "optimal") for r in load_runs(tmp_path / "s.sqlite"))


def _rows(problem_hash, problem, solver, status, makespan, bound, devices=2, scale=1.0, wall=1.0):
    return {"problem_hash": problem_hash, "problem": problem, "solver": solver, "status": status,
            "makespan": makespan, "lower_bound": bound, "wall_seconds": wall, "devices": devices,
            "memory_scale": scale}


def test_the_per_instance_view_lists_every_run_against_the_best():
    rows = [_rows("p", "alpha", "a", "optimal", 10.0, 10.0), _rows("p", "alpha", "b", "feasible", 20.0, 5.0),
            _rows("q", "beta", "a", "unknown", None, 2.0), _rows("q", "beta", "b", "feasible", 4.0, 3.0)]
    view = per_instance(rows)
    assert [(v["problem"], v["solver"], v["status"]) for v in view] == [
        ("alpha", "a", "optimal"), ("alpha", "b", "feasible"), ("beta", "a", "unknown"), ("beta", "b", "feasible")]
    assert view[1]["rel"] == pytest.approx(2.0) and view[1]["gap"] == pytest.approx(0.5)
    assert view[2]["rel"] is None and view[3]["rel"] == 1.0 and view[3]["gap"] == pytest.approx(0.25)
    text = format_report(view, "markdown", view="instance", legend=True)
    assert "| alpha   | 2       | 1            | b      | feasible | 20" in text and "2.000" in text
    assert LEGEND["instance"] in text
    assert format_report(view, "csv", view="instance").splitlines()[0].startswith("problem,devices,memory_scale")


def test_the_setting_report_says_what_its_columns_mean():
    text = format_report(summarize([_rows("p", "alpha", "a", "optimal", 10.0, 10.0)]), "markdown", legend=True)
    header = text.splitlines()[0]
    assert "makespan/best geo" in header and "memory scale" in header and "ms/best" not in header
    for words in ("- memory scale: each device's capacity as a multiple", "- makespan/best geo, max: the run's makespan",
                  "- gap mean", "--by instance"):
        assert words in text


def test_report_by_instance_on_the_command_line(tmp_path, capsys):
    graph = optpart.Problem.build(nodes=[{"id": "a", "time": 1.0, "memory": 1}, {"id": "b", "time": 1.0, "memory": 1}],
                                  name="two")
    path = tmp_path / "two.json"
    optpart.save(graph, path)
    db = tmp_path / "r.sqlite"
    assert main(["bench", str(path), "--solvers", "heft,single", "--devices", "1,2", "--memory-scale", "2",
                 "--db", str(db), "--executor", "inline"]) == 0
    capsys.readouterr()
    assert main(["report", str(db), "--by", "instance"]) == 0
    out = capsys.readouterr().out
    assert out.count("| two ") == 4 and "makespan/best" in out and LEGEND["instance"] in out


def test_a_finished_sweep_leaves_only_its_database(tmp_path):
    graph = optpart.Problem.build(nodes=[{"id": "a", "time": 1.0, "memory": 1}], name="one")
    db = tmp_path / "r.sqlite"
    run_sweep(plan_sweep([graph], ["single"], devices=[1, 2], memory_scales=[2.0]), db, executor="inline")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.sqlite"]
    assert len(load_runs(db)) == 2 and sorted(p.name for p in tmp_path.iterdir()) == ["r.sqlite"]
    # A reader open while a sweep ends: the file stays in WAL mode, nothing is lost, and the next
    # sweep to end alone cleans up.
    reader = bdb.connect_readonly(db)
    run_sweep(plan_sweep([graph], ["heft"], devices=[1], memory_scales=[2.0]), db, executor="inline")
    assert reader.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 3
    reader.close()
    run_sweep(plan_sweep([graph], ["heft"], devices=[2], memory_scales=[2.0]), db, executor="inline")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.sqlite"]
    assert sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_one_colour_per_solver_across_figures():
    pytest.importorskip("matplotlib")
    from optpart.bench import plots

    def colours(rows):
        fig = plots.plot_gaps(rows)
        legend = fig.axes[1].get_legend()
        return {t.get_text().split(":")[0]: tuple(h.get_facecolor()[:3]) for t, h in zip(legend.get_texts(),
                                                                                        legend.legend_handles)}

    first = colours([_rows("p", "x", s, "feasible", 1.0, 1.0) for s in ("heuristic", "heft", "cpsat")])
    second = colours([_rows("p", "x", s, "feasible", 1.0, 1.0) for s in ("cpsat", "mine")])
    assert first["cpsat"] == second["cpsat"] and len(set(first.values())) == 3
    assert plots.solver_color("heuristic (M=8)") == plots.solver_color("heuristic")


def test_the_memory_panel_draws_the_model_in_force_against_the_capacity():
    pytest.importorskip("matplotlib")
    from optpart.bench import plots

    # Static sums above the capacity, liveness within it: the peak plan must not draw the sums.
    nodes = [{"id": f"n{i}", "time": 1.0, "param_bytes": 0, "output_bytes": 600, "temp_bytes": 0} for i in range(6)]
    edges = [{"src": f"n{i}", "dst": f"n{i + 1}", "bytes": 600} for i in range(5)]
    p = optpart.Problem.build(nodes=nodes, edges=edges).with_devices(1, memory=2000)
    result = optpart.solve(p, "heft", memory_model="peak")
    assert result.ok and result.memory_static[0] > 2000 >= result.memory_peak[0]
    fig = plots.plot_schedule(p, result)
    memory_axes = fig.axes[1]
    top = max(float(np.max(line.get_ydata())) for line in memory_axes.get_lines())
    assert top <= 2000 / 1024 and "peak model" in memory_axes.get_title()  # KiB: nothing drawn above capacity
    assert "costs as given in the file" in fig.axes[0].get_title()
    static = optpart.solve(p.with_devices(1, memory=4000), "heft", memory_model="static")
    assert "static model" in plots.plot_schedule(p.with_devices(1, memory=4000), static).axes[1].get_title()
