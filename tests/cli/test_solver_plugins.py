"""Solvers of one's own (optpart.register_solver): run, checked and compared like the built-in ones,
in this process, on the command line, and in a sweep's worker processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import optpart
from optpart.cli import main
from optpart.errors import SolverError
from optpart.solvers.registry import SOLVERS
from strategies import examples, problems

ROOT = Path(__file__).resolve().parents[2]
PLACERS = ROOT / "examples" / "placers.py"
MLP4 = ROOT / "instances" / "small" / "mlp4-torch-training.json"


@pytest.fixture(autouse=True)
def _forget_plugins():
    """Each test registers what it needs; the registry and $OPTPART_PLUGINS are restored after."""
    before = dict(SOLVERS)
    env = os.environ.get("OPTPART_PLUGINS")
    from optpart.solvers import plugins

    loaded = set(plugins._LOADED)
    yield
    SOLVERS.clear()
    SOLVERS.update(before)
    plugins._LOADED.clear()
    plugins._LOADED.update(loaded)
    if env is None:
        os.environ.pop("OPTPART_PLUGINS", None)
    else:
        os.environ["OPTPART_PLUGINS"] = env


def _two_nodes(memory: float = 8) -> optpart.Problem:
    return optpart.Problem.build(nodes=[{"id": "a", "time": 1.0, "memory": 4}, {"id": "b", "time": 2.0, "memory": 4}],
                                 edges=[{"src": "a", "dst": "b", "bytes": 0}]).with_devices(2, memory=memory)


def test_a_plugin_is_solved_scored_and_listed_like_a_built_in_solver(capsys):
    calls = []

    def first_device(problem, *, seed, rounds=1):
        """Everything on device 0."""
        calls.append((seed, rounds))
        return [0] * problem.n_nodes

    optpart.register_solver("first", first_device, options={"rounds": 1}, memory_models=("static", "peak"))
    result = optpart.solve(_two_nodes(), "first", seed=3, rounds=4)
    assert result.status.value == "feasible" and result.makespan == 3.0 and calls == [(3, 4)]
    assert result.solver == "first" and result.memory_model == "peak"
    optpart.check(_two_nodes(), result)
    with pytest.raises(SolverError, match="first: no option 'effort'; its options: rounds"):
        optpart.solve(_two_nodes(), "first", effort=1)
    with pytest.raises(SolverError, match="option rounds='many' must be an integer"):
        optpart.solve(_two_nodes(), "first", rounds="many")
    ignored = optpart.solve(_two_nodes(), "first", time_limit=5)
    assert ignored.stats["ignored"] == ["time_limit"] and "does not use it" in ignored.message
    assert "first" in optpart.solver_names()
    assert main(["solvers"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("first "))
    assert "plugin" in row and "static,peak" in row


def test_a_placement_over_capacity_is_never_feasible():
    optpart.register_solver("pile", lambda problem: np.zeros(problem.n_nodes, dtype=int))
    result = optpart.solve(_two_nodes(memory=6), "pile")
    assert result.status.value == "unknown" and result.placement is None
    assert "device 'dev0'" in result.message and "6 B" in result.message


@settings(max_examples=examples(40), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # the fixture restores the registry once
@given(problems(), st.randoms(use_true_random=False))
def test_whatever_a_plugin_places_is_feasible_only_when_the_evaluator_says_it_fits(problem, rnd):
    placement = [rnd.randrange(problem.n_devices) for _ in range(problem.n_nodes)]
    optpart.register_solver("random", lambda p: placement, memory_models=("static", "peak"))
    for model in ("static", "peak"):
        result = optpart.solve(problem, "random", memory_model=model)
        scored = optpart.evaluate(problem, placement, memory_model=model)
        if result.status.value == "feasible":
            assert scored.status.value == "feasible" and result.makespan == scored.makespan
            optpart.check(problem, result)
        elif result.status.value != "infeasible":  # infeasible: screened before the plugin ran
            assert result.status.value == "unknown" and scored.status.value == "invalid"


def test_answers_that_are_not_placements_are_named():
    optpart.register_solver("short", lambda p: [0])
    with pytest.raises(SolverError, match="'short' returned a placement of shape \\(1,\\).*each of 2 nodes"):
        optpart.solve(_two_nodes(), "short")
    optpart.register_solver("nothing", lambda p: None)
    assert optpart.solve(_two_nodes(), "nothing").message == "nothing returned no placement"
    optpart.register_solver("by-id", lambda p: {"a": "dev1", "b": "dev1"})
    assert optpart.solve(_two_nodes(), "by-id").placement.tolist() == [1, 1]
    optpart.register_solver("too-early", lambda p: ([0, 1], [0.0, 0.0]))  # b starts before a ends
    late = optpart.solve(_two_nodes(), "too-early")
    assert late.status.value == "unknown" and "too-early" in late.message


@pytest.mark.parametrize("name, words", [("heft", "built-in"), ("gpipe", "built-in"), ("a b", "letters")])
def test_built_in_and_bad_names_are_refused(name, words):
    with pytest.raises(SolverError, match=words):
        optpart.register_solver(name, lambda p: [0] * p.n_nodes)


def test_the_cli_loads_a_plugin_module_and_solves_with_it(capsys):
    assert main(["solve", str(MLP4), "--plugin", str(PLACERS), "--solver", "fill", "--devices", "2", "--memory", "64MiB"]) == 0
    out = capsys.readouterr().out
    assert "solver    fill" in out and "status    feasible" in out
    assert str(PLACERS) in os.environ["OPTPART_PLUGINS"]  # so a sweep's workers load it too


def test_a_sweep_runs_plugins_in_worker_processes_and_refuses_what_they_cannot_import(tmp_path):
    from optpart.bench import load_runs, plan_sweep, run_sweep
    from optpart.solvers import load_plugins

    load_plugins([str(PLACERS)])
    specs = plan_sweep([MLP4], ["fill", "round-robin"], devices=[2], memory_scales=[1.5])
    out = run_sweep(specs, tmp_path / "r.sqlite", jobs=2)
    rows = {r["solver"]: r for r in load_runs(tmp_path / "r.sqlite")}
    assert out.errors == 0 and rows["fill"]["status"] == "feasible"
    assert rows["round-robin"]["status"] in ("feasible", "unknown")
    optpart.register_solver("local", lambda p: [0] * p.n_nodes)  # defined here: no other process can load it
    specs = plan_sweep([MLP4], ["local"], devices=[2], memory_scales=[1.5])
    with pytest.raises(SolverError, match="executor='inline'"):
        run_sweep(specs, tmp_path / "s.sqlite", jobs=2)
    assert run_sweep(specs, tmp_path / "s.sqlite", executor="inline").ran == 1  # in this process it runs


def test_an_installed_package_declares_a_solver_by_entry_point(tmp_path):
    package = tmp_path / "site"
    (package / "my_placers").mkdir(parents=True)
    (package / "my_placers" / "__init__.py").write_text(textwrap.dedent("""
        import optpart
        optpart.register_solver("from-entry-point", lambda problem: [0] * problem.n_nodes)
    """))
    dist = package / "my_placers-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-placers\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[optpart.solvers]\nfrom-entry-point = my_placers\n")
    script = ("import optpart\n"
              "assert 'from-entry-point' in optpart.solver_names()\n"
              "import sys; assert 'my_placers' not in sys.modules  # listed without importing it\n"
              "p = optpart.Problem.build(nodes=[{'id': 'a', 'time': 1.0, 'memory': 1}]).with_devices(1, memory=2)\n"
              "print(optpart.solve(p, 'from-entry-point').status.value)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(package), str(ROOT)])}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "feasible", proc.stderr


def test_a_plugin_that_fails_to_load_is_one_line(capsys, tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('no GPU here')\n")
    assert main(["solvers", "--plugin", str(broken)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "broken.py" in err and "RuntimeError: no GPU here" in err


def test_report_and_plots_treat_a_plugin_like_any_solver(tmp_path):
    pytest.importorskip("matplotlib")
    from optpart.bench import load_runs, plan_sweep, run_sweep
    from optpart.bench import plots
    from optpart.bench.report import summarize

    optpart.register_solver("halves", lambda p: (np.arange(p.n_nodes) * p.n_devices // max(1, p.n_nodes)))
    specs = plan_sweep([MLP4], ["halves", "heft"], devices=[2], memory_scales=[2.0])
    run_sweep(specs, tmp_path / "r.sqlite", executor="inline")
    rows = load_runs(tmp_path / "r.sqlite")
    assert {s["solver"] for s in summarize(rows)} == {"halves", "heft"}
    fig = plots.plot_gaps(rows)
    assert plots.figure_problems(fig) == []
    assert json.dumps(plots.solver_color("halves")) == json.dumps(plots.solver_color("halves"))
