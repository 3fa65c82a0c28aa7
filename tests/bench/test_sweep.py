"""Sweeps, the results database, resume after a kill, and the report (optpart.bench)."""

from __future__ import annotations

import io
import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pytest

import optpart
from optpart.bench import db as bdb
from optpart.bench.report import format_report, summarize
from optpart.bench.progress_line import Progress
from optpart.bench.sweep import check_solvers, plan_sweep, problem_hash, run_sweep, scale_memory
from optpart.cli import main
from optpart.errors import OptpartError, SolverError
from optpart.generators import layered_dag, training_graph
from optpart.solvers import registry


@pytest.fixture
def graphs(tmp_path):
    """Two graph files without devices, as a user would bring them."""
    paths = []
    for problem in (layered_dag(16, seed=3), training_graph(2, seed=4)):
        path = tmp_path / f"{problem.name}.json"
        optpart.save(problem, path)
        paths.append(path)
    return paths


def _rows(path):
    return bdb.load_runs(path)


# ---------------------------------------------------------------------- planning and memory scale
def test_plan_is_the_cross_product_in_a_fixed_order(graphs):
    specs = plan_sweep(graphs, ["single"], devices=[1, 2, 3], memory_scales=[1.0, 0.5], time_limit=5, seed=7)
    assert len(specs) == 2 * 3 * 2
    assert [(s.devices, s.memory_scale) for s in specs[:6]] == [(1, 1.0), (1, 0.5), (2, 1.0), (2, 0.5), (3, 1.0),
                                                                (3, 0.5)]
    assert all(s.options == {"seed": 7, "time_limit": 5} for s in specs)
    assert specs[0].options_json == '{"seed":7,"time_limit":5}'
    # Device count and memory scale are part of the problem, so of its hash; equal problems hash equally.
    assert len({s.problem_hash for s in specs}) == len(specs)
    again = plan_sweep(graphs, ["single"], devices=[1, 2, 3], memory_scales=[1.0, 0.5], time_limit=5, seed=7)
    assert [s.key for s in again] == [s.key for s in specs]
    assert problem_hash(specs[0].problem) == specs[0].problem_hash


def test_memory_scale_uses_the_capacity_or_total_over_k():
    p = layered_dag(12, seed=1)
    total = float(p.memory.sum())
    unlimited = scale_memory(p.with_devices(4), 0.5)
    assert np.allclose(unlimited.device_memory, 0.5 * total / 4)
    limited = scale_memory(p.with_devices([optpart.Device("a", 100e6), optpart.Device("b", 300e6, 2.0)]), 1.5)
    assert limited.device_memory.tolist() == [150e6, 450e6] and limited.device_speed.tolist() == [1.0, 2.0]
    with pytest.raises(OptpartError, match="memory scale -1"):
        scale_memory(p.with_devices(2), -1)


def test_unknown_or_missing_solver_fails_before_any_run(graphs, tmp_path, monkeypatch):
    with pytest.raises(SolverError, match="unknown solver 'nope'.*single"):
        check_solvers(["single", "nope"])
    monkeypatch.setitem(registry.SOLVERS, "ghost",
                        registry.SolverInfo("ghost", "optpart.solvers.no_such_module", "test", extra="ghost"))
    with pytest.raises(SolverError, match="'ghost' is not installed.*optpart\\[ghost\\]"):
        check_solvers(["ghost"])
    db_path = tmp_path / "r.sqlite"
    code = main(["bench", str(graphs[0]), "--solvers", "single,nope", "--devices", "2", "--db", str(db_path)])
    assert code == 2 and not db_path.exists()


# ---------------------------------------------------------------------- running and resuming
def test_sweep_writes_checked_rows_and_resume_skips_them(graphs, tmp_path):
    db_path = tmp_path / "r.sqlite"
    specs = plan_sweep(graphs, ["single"], devices=[1, 2], memory_scales=[1.0, 2.0])
    out = run_sweep(specs, db_path, executor="inline")
    assert (out.planned, out.ran, out.skipped, out.errors) == (8, 8, 0, 0)
    rows = _rows(db_path)
    assert len(rows) == 8
    by_key = {(r["problem_hash"], r["solver"], r["options"]): r for r in rows}
    for spec in specs:
        row = by_key[spec.key]
        # Every row agrees with a fresh, checked solve of the same problem.
        result = optpart.solve(spec.problem, "single", seed=0)
        if result.ok:
            optpart.check(spec.problem, result)
            assert row["makespan"] == pytest.approx(result.makespan, rel=1e-12)
            memory = json.loads(row["memory"])
            assert list(memory) == spec.problem.device_ids
            assert [memory[d]["static"] for d in spec.problem.device_ids] == pytest.approx(result.memory_static)
        else:
            assert row["makespan"] is None and row["gap"] is None
        assert row["status"] == result.status.value
        assert row["devices"] == spec.devices and row["memory_scale"] == spec.memory_scale
        assert row["version"] == optpart.__version__ and row["timestamp"].endswith("+00:00")
    # single fits one device only at scale >= K (total memory / K per device): K=2, scale 1 is 'unknown'.
    statuses = {(r["devices"], r["memory_scale"]): r["status"] for r in rows if r["problem"] == specs[0].problem.name}
    assert statuses == {(1, 1.0): "feasible", (1, 2.0): "feasible", (2, 1.0): "unknown", (2, 2.0): "feasible"}
    again = run_sweep(specs, db_path, executor="inline")
    assert (again.ran, again.skipped) == (0, 8)
    assert len(_rows(db_path)) == 8


def test_a_run_that_raises_is_an_error_row_not_a_crash(graphs, tmp_path):
    db_path = tmp_path / "r.sqlite"
    specs = plan_sweep(graphs[:1], ["single"], devices=[2], memory_scales=[2.0],
                       solver_options={"single": {"no_such_option": 1}})
    specs += plan_sweep(graphs[:1], ["single"], devices=[2], memory_scales=[2.0])
    out = run_sweep(specs, db_path, jobs=2)  # a real process pool
    assert (out.ran, out.errors) == (2, 1)
    rows = {r["options"]: r for r in _rows(db_path)}
    bad = rows['{"no_such_option":1,"seed":0}']
    assert bad["status"] == "error" and "option 'no_such_option'" in bad["error"] and bad["makespan"] is None
    assert rows['{"seed":0}']["status"] == "feasible"
    # Errors are skipped on resume unless retried.
    assert run_sweep(specs, db_path, executor="inline").ran == 0
    assert run_sweep(specs, db_path, executor="inline", retry_errors=True).ran == 1
    assert len(_rows(db_path)) == 2


def test_progress_line_per_run_in_logs_and_carriage_return_on_a_terminal(graphs):
    specs = plan_sweep(graphs[:1], ["single"], devices=[1, 2])
    log = io.StringIO()
    bar = Progress(2, log)
    for s in specs:
        bar.update(s, "feasible")
    lines = log.getvalue().splitlines()
    assert lines[0] == "optpart bench: 2 run(s) to go; one line per finished run"  # shown before any run ends
    assert len(lines) == 3 and lines[1].startswith("[1/2]") and "eta" in lines[1] and "\r" not in log.getvalue()

    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty = Tty()
    bar = Progress(2, tty)
    bar.started(specs[0])  # a terminal shows the first run as it starts
    assert tty.getvalue().endswith("running single on " + specs[0].problem.name + " K=1 x1")
    for s in specs:
        bar.update(s, "feasible")
    assert tty.getvalue().count("\r") == 3 and tty.getvalue().endswith("\n") and tty.getvalue().count("\n") == 2


# ---------------------------------------------------------------------- the database survives a kill
#: Runs the sweep of the command line, except that every run of the problem named in
#: $OPTPART_TEST_BLOCK hangs (in the worker processes too, which import this file as
#: __mp_main__): the sweep then stops at a known row count whatever the machine's speed.
_BLOCKING_SWEEP = """
import os, sys, time
from optpart.bench import sweep

_real = sweep.run_one

def run_one(task):
    if task["problem"].name == os.environ["OPTPART_TEST_BLOCK"]:
        time.sleep(600)
    return _real(task)

if __name__ == "__main__":
    from optpart.cli import main
    sweep.run_one = run_one
    sys.exit(main(sys.argv[1:]))
"""


def test_killed_sweep_resumes_with_every_run_exactly_once(tmp_path):
    # The runs of the last graph hang, so the kill lands mid-sweep with exactly the first two
    # graphs' rows written and two runs in flight (no race between the sweep and this poll).
    problems = [training_graph(120, width=3, seed=seed) for seed in range(3)]
    files = []
    for p in problems:
        files.append(tmp_path / f"{p.name}.json")
        optpart.save(p, files[-1])
    db_path = tmp_path / "r.sqlite"
    scales = ",".join(str(1.0 + 0.25 * i) for i in range(16))
    args = ["bench", *map(str, files), "--solvers", "single", "--devices", "1,2", "--memory-scale", scales,
            "--db", str(db_path), "--jobs", "2"]
    planned, before_block = 3 * 2 * 16, 2 * 2 * 16
    script = tmp_path / "blocking_sweep.py"
    script.write_text(_BLOCKING_SWEEP)
    env = dict(os.environ, OPTPART_TEST_BLOCK=problems[-1].name)
    proc = subprocess.Popen([sys.executable, str(script), *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True, env=env)
    try:
        deadline = time.monotonic() + 300  # an upper bound for 64 runs of ~10 ms, never a speed
        count = 0
        while time.monotonic() < deadline and proc.poll() is None and count < before_block:
            if db_path.exists():
                try:
                    with sqlite3.connect(db_path, timeout=5) as con:
                        count = con.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
                except sqlite3.OperationalError:  # table not created yet
                    count = 0
            time.sleep(0.05)
        assert proc.poll() is None, "the blocked sweep ended by itself"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # its workers, hanging in the blocked runs
        except ProcessLookupError:
            pass
    assert proc.returncode == -signal.SIGKILL
    with sqlite3.connect(db_path) as con:
        killed_at = con.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert killed_at == before_block, "the sweep should have been killed with the blocked runs in flight"
    done = subprocess.run([sys.executable, "-m", "optpart", *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"{planned} runs: {planned - killed_at} run now, {killed_at} already in" in done.stdout
    with sqlite3.connect(db_path) as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        total, distinct = con.execute(
            "SELECT COUNT(*), COUNT(DISTINCT problem_hash || solver || options) FROM runs").fetchone()
    assert total == distinct == planned
    statuses = {r["status"] for r in _rows(db_path)}
    assert statuses <= {"feasible", "unknown"}


def _row(problem_hash, solver, status, makespan, bound, wall=1.0, devices=2, scale=1.0):
    return {"problem_hash": problem_hash, "solver": solver, "status": status, "makespan": makespan,
            "lower_bound": bound, "wall_seconds": wall, "devices": devices, "memory_scale": scale}


def test_report_figures_against_hand_computed_values():
    rows = [
        _row("p", "a", "optimal", 10.0, 10.0, wall=3.0),
        _row("p", "b", "feasible", 20.0, 5.0, wall=1.0),
        _row("q", "a", "feasible", 8.0, 2.0, wall=5.0),
        _row("q", "b", "feasible", 4.0, 4.0, wall=2.0),
        _row("r", "b", "unknown", None, 1.0, wall=4.0),
        _row("r", "a", "error", None, None, wall=None),
    ]
    summary = {s["solver"]: s for s in summarize(rows)}
    a, b = summary["a"], summary["b"]
    assert (a["runs"], a["errors"], b["runs"], b["errors"]) == (3, 1, 3, 0)
    assert a["feasible"] == pytest.approx(2 / 3) and a["optimal"] == pytest.approx(1 / 3)
    assert b["feasible"] == pytest.approx(2 / 3) and b["optimal"] == 0
    # best known: p -> 10, q -> 4; best bound: p -> 10, q -> 4.
    assert a["rel_geomean"] == pytest.approx(math.sqrt(1.0 * 2.0)) and a["rel_max"] == pytest.approx(2.0)
    assert b["rel_geomean"] == pytest.approx(math.sqrt(2.0 * 1.0)) and b["rel_max"] == pytest.approx(2.0)
    assert a["gap_mean"] == pytest.approx((0.0 + 0.5) / 2)
    assert b["gap_mean"] == pytest.approx((0.5 + 0.0) / 2)
    assert a["wall_median_s"] == pytest.approx(4.0) and b["wall_median_s"] == pytest.approx(2.0)
    text = format_report(list(summary.values()), "markdown")
    assert "| a " in text and "66.7%" in text and "1.414" in text
    with pytest.raises(OptpartError, match="report format 'xml'"):
        format_report([], "xml")


def test_bench_and_report_commands(graphs, tmp_path, capsys):
    db_path = tmp_path / "r.sqlite"
    code = main(["bench", *map(str, graphs), "--solvers", "single", "--devices", "1,2", "--memory-scale", "2",
                 "--time-limit", "10s", "--db", str(db_path), "--executor", "inline", "--bandwidth", "1GB/s"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "4 runs: 4 run now, 0 already in" in out.out and "| single | 1" in out.out
    assert out.err.count("\n") == 5 and "[4/4]" in out.err  # a first line before any run ends, then one per run
    assert all(r["options"] == '{"seed":0,"time_limit":10.0}' for r in _rows(db_path))
    assert main(["report", str(db_path), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(d["devices"], d["runs"], d["feasible"]) for d in doc] == [(1, 2, 1.0), (2, 2, 1.0)]
    csv_path = tmp_path / "r.csv"
    assert main(["report", str(db_path), "-f", "csv", "-o", str(csv_path)]) == 0
    assert csv_path.read_text().splitlines()[0].startswith("solver,devices,memory_scale,runs")
    assert main(["report", str(tmp_path / "missing.sqlite")]) == 2
    assert "no such results database" in capsys.readouterr().err


def test_not_a_database_is_a_clear_error(tmp_path):
    bogus = tmp_path / "bogus.sqlite"
    bogus.write_text("hello, not sqlite" * 100)
    with pytest.raises(OptpartError, match="not an optpart results database"):
        bdb.connect(bogus)


def test_a_dead_worker_costs_its_run_and_the_pool_recovers():
    from concurrent.futures.process import BrokenProcessPool

    from optpart.bench.executors import LocalExecutor

    with LocalExecutor(1) as ex:
        dead = ex.submit(os._exit, 3)  # the worker process dies mid-run
        done, _ = ex.wait_any([dead])
        with pytest.raises(BrokenProcessPool):
            ex.outcome(dead)
        alive = ex.submit(abs, -3)
        ex.wait_any([alive])
        assert ex.outcome(alive) == 3
