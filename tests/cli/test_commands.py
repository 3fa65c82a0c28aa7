"""The command line: solve, evaluate, info, solvers; bad input gives one line and a non-zero exit."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import optpart
from optpart.cli import main

from conftest import INSTANCES

SMALL = INSTANCES / "small" / "mlp6-training.json"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "optpart", *args], capture_output=True, text=True, timeout=300)


def test_solve_prints_a_table_and_evaluate_rescores_the_same_makespan(tmp_path):
    out = tmp_path / "r.json"
    proc = run("solve", str(SMALL), "--solver", "single", "--devices", "2", "--memory", "8GiB", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "makespan" in proc.stdout and "device" in proc.stdout and "peak mem" in proc.stdout
    written = json.loads(out.read_text())
    assert written["status"] == "feasible"
    proc = run("evaluate", str(SMALL), str(out), "--devices", "2", "--memory", "8GiB", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["makespan"] == written["makespan"]


def test_solve_json_output_and_options(capsys):
    code = main(["solve", str(SMALL), "--devices", "2", "--memory", "8GiB", "--speed", "1,2",
                 "--bandwidth", "10GB/s", "--latency", "5us", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["placement"]["input"] == "dev1"  # the faster device


def test_infeasible_is_one_line_and_exit_1(capsys):
    code = main(["solve", str(SMALL), "--devices", "2", "--memory", "1GiB"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "infeasible" in err


@pytest.mark.parametrize("content,needle,code", [
    ('{"format": "optpart-problem", "version": 1, "nodes": [{"id": "a", "time": 1, "memory": 1}, '
     '{"id": "b", "time": 1, "memory": 1}], "edges": [{"src": "a", "dst": "b"}, {"src": "b", "dst": "a"}]}', "cycle: node", 2),
    ('{"format": "optpart-problem", "version": 1, "nodes": [{"id": "a", "time": 1, "memory": 1}, '
     '{"id": "a", "time": 1, "memory": 1}]}', "duplicate node id 'a'", 2),
    ('{"format": "optpart-problem", "version": 1, "nodes": [{"id": "a", "time": 1, "memory": 1}], '
     '"edges": [{"src": "a", "dst": "q"}]}', "unknown node 'q'", 2),
    ('{"format": "optpart-problem", "version": 1, "nodes": [{"id": "a", "time": -2, "memory": 1}]}', "node 'a' has time=-2", 2),
    ('{"format": "optpart-problem", "version": 1, "nodes": [{"id": "a", "time": NaN, "memory": 1}]}', "not valid JSON", 2),
    ('{"format": "optpart-problem", "version": 1, "nodes": [{"id": "a", "time": 1}]}', "node 'a' has no field 'memory'", 2),
    ('{"format": "optpart-problem", "version": 2, "nodes": []}', "version 2", 2),
    ('{"format": "optpart-problem", "version": 1, "nodes": [{"id": "a", "time": 1, "memory": 99}], '
     '"devices": [{"id": "g", "memory": 10}]}', "node 'a' needs", 1),
    ('{"format": "optpart-problem", "version": 1, "nodes": [{"id": "a", "time": 1, "memory": 6}, '
     '{"id": "b", "time": 1, "memory": 6}], "devices": [{"id": "g", "memory": 10}, {"id": "h", "memory": 10}], '
     '"constraints": {"colocate": [["a", "b"]]}}', "colocation group of node 'a'", 1),
])
def test_bad_input_one_line_non_zero_exit_no_traceback(tmp_path, content, needle, code):
    """Bad input exits 2; a well-formed problem that the screening proves infeasible is an
    answer, exit 1 (each item states its code: the exit is never inferred from the output)."""
    path = tmp_path / "bad.json"
    path.write_text(content)
    proc = run("solve", str(path), "--devices", "2")
    assert proc.returncode == code, proc.stderr
    assert proc.stderr.startswith("optpart: infeasible: " if code == 1 else "optpart: error: "), proc.stderr
    assert needle in proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_usage_errors(capsys):
    assert main(["solve", str(SMALL), "--solver", "nope", "--devices", "2"]) == 2
    assert "unknown solver 'nope'; available: " in capsys.readouterr().err
    assert main(["solve", str(SMALL)]) == 2
    assert "has no devices" in capsys.readouterr().err
    assert main(["solve", str(SMALL), "--devices", "2", "--memory", "16 parsecs"]) == 2
    assert "unknown size unit" in capsys.readouterr().err
    assert main(["solve", str(SMALL), "--devices", "2", "--option", "nope=1"]) == 2
    assert "heuristic: no option 'nope'; its options: effort" in capsys.readouterr().err


def test_info_and_solvers(capsys):
    assert main(["info", str(SMALL), "--devices", "4", "--memory", "2GiB"]) == 0
    out = capsys.readouterr().out
    assert "lower bound" in out and "nodes" in out
    assert main(["info", str(SMALL), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["nodes"] == optpart.load(SMALL).n_nodes
    assert main(["solvers"]) == 0
    assert "single" in capsys.readouterr().out


def test_info_names_the_memory_model_of_each_screen(capsys, tmp_path):
    """A chain whose tensors die at their reader fits under peak but not under the static sum:
    info says which model each screen is for."""
    mib = 2**20
    chain = optpart.Problem.build(
        nodes=[{"id": f"n{i}", "time": 1.0, "memory": mib, "output_bytes": mib} for i in range(8)],
        edges=[{"src": f"n{i}", "dst": f"n{i + 1}", "bytes": mib} for i in range(7)],
        devices=[{"id": "d0", "memory": 3 * mib}, {"id": "d1", "memory": 3 * mib}])
    path = tmp_path / "chain.json"
    optpart.save(chain, path)
    assert main(["info", str(path)]) == 0
    rows = {line.split("  ")[0]: line for line in capsys.readouterr().out.splitlines()}
    assert "no obstruction" in rows["memory (peak, default)"]
    assert "infeasible: the graph needs" in rows["memory (static)"]


def test_units():
    from optpart.units import parse_bandwidth, parse_bytes, parse_time
    assert parse_bytes("16GiB") == 16 * 2**30 and parse_bytes("2GB") == 2e9 and parse_bytes(5) == 5
    assert parse_bandwidth("25GB/s") == 25e9 and parse_bandwidth("100Gbit/s") == 12.5e9
    assert parse_time("10us") == pytest.approx(1e-5) and parse_time("2ms") == pytest.approx(2e-3)


def test_solve_memory_model_flag_and_defaults(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["solve", str(SMALL), "--devices", "2", "-o", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["solver"] == "heuristic" and doc["memory_model"] == "peak"
    assert main(["solve", str(SMALL), "--devices", "2", "--memory-model", "static", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["memory_model"] == "static"
    with pytest.raises(SystemExit) as usage:
        main(["solve", str(SMALL), "--devices", "2", "--memory-model", "liveness"])
    assert usage.value.code == 2 and "invalid choice: 'liveness'" in capsys.readouterr().err
    assert main(["solve", str(SMALL), "--devices", "2"]) == 0
    assert "memory    peak (liveness) model respected" in capsys.readouterr().out


def test_solvers_command_shows_guarantees_and_options(capsys):
    assert main(["solvers"]) == 0
    out = capsys.readouterr().out
    assert "memory models" in out and "time limit" in out and "hint" in out
    assert main(["solvers", "heuristic"]) == 0
    detail = capsys.readouterr().out
    assert "--option effort (float >= 0" in detail
    assert main(["solvers", "nope"]) == 2
    assert "unknown solver 'nope'" in capsys.readouterr().err


def test_solvers_command_lists_the_pipeline_orders(capsys):
    """gpipe and 1f1b are accepted as --solver of a pipelined solve, so the listing shows them
    (kind "pipeline order", with when they apply) and ``optpart solvers gpipe`` describes it."""
    from optpart.pipeline.schedules import ORDER_NAMES

    assert main(["solvers"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    for name in ORDER_NAMES:
        assert name in rows and "pipeline order" in rows[name], name
    assert "--micro-batches" in out
    assert main(["solvers", "gpipe"]) == 0
    cap = capsys.readouterr()
    assert cap.err == "" and "gpipe: GPipe order" in cap.out and "pipeline order" in cap.out
    assert "cpsat" not in cap.out  # only what was asked for
    assert main(["solvers", "1f1b", "heuristic"]) == 0
    out = capsys.readouterr().out
    assert "1f1b: 1F1B order" in out and "--option effort" in out


def test_result_files_carry_their_devices_for_bare_graph_files(tmp_path, capsys):
    """A bare graph solved with --devices/--memory: show, evaluate and export read the result
    beside the graph without repeating the flags; a result judged against other devices is
    a false claim."""
    import json

    p = optpart.Problem.build(nodes=[{"id": "a", "time": 1, "memory": 4}, {"id": "b", "time": 2, "memory": 4}],
                              edges=[{"src": "a", "dst": "b", "bytes": 8}])
    graph, res = tmp_path / "g.json", tmp_path / "r.json"
    optpart.save(p, graph)
    assert main(["solve", str(graph), "--devices", "2", "--memory", "8B", "-o", str(res), "-q"]) == 0
    doc = json.loads(res.read_text())
    assert [d["memory"] for d in doc["devices"]] == [8, 8] and "links" in doc
    capsys.readouterr()
    assert main(["evaluate", str(graph), str(res)]) == 0
    assert main(["show", str(res), "--problem", str(graph), "--by", "op"]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(graph), str(res), "--memory", "16B"]) == 1
    assert "devices: 'dev0' has memory 8 in the result, 16 in the problem" in capsys.readouterr().err


def test_out_that_looks_like_a_solver_option_is_refused(tmp_path, diamond, capsys, monkeypatch):
    """The old habit `-o workers=2` (when -o meant --option) must not write a file named so."""
    problem_file = tmp_path / "p.json"
    optpart.save(diamond, problem_file)
    monkeypatch.chdir(tmp_path)
    assert main(["solve", str(problem_file), "-s", "cpsat", "-o", "workers=2"]) == 2
    assert "--option KEY=VALUE" in capsys.readouterr().err and not (tmp_path / "workers=2").exists()


def test_a_size_without_a_unit_is_refused_and_times_take_units(tmp_path, capsys):
    graph = tmp_path / "g.json"
    optpart.save(optpart.Problem.build(nodes=[{"id": "a", "time": 1, "memory": 4}], edges=[]), graph)
    assert main(["solve", str(graph), "--devices", "2", "--memory", "16", "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--memory" in err and "has no unit" in err and "16GiB" in err
    assert main(["solve", str(graph), "--devices", "2", "--memory", "16B", "--time-limit", "5m", "-q",
                 "-o", str(tmp_path / "r.json")]) == 0
    capsys.readouterr()
    # Every command that takes a size or a bandwidth refuses a bare number (a rate as well as a size);
    # 0 and inf need no unit. The time limit takes units on every command that has one.
    bare = [["solve", str(graph), "-k", "2", "--memory", "16B", "--bandwidth", "25"],
            ["evaluate", str(graph), str(tmp_path / "r.json"), "-k", "2", "--memory", "16"],
            ["fit", str(graph), "--memory", "16"],
            ["info", str(graph), "-k", "2", "--memory", "2,2"],
            ["bench", str(graph), "-k", "2", "--memory", "16", "--db", str(tmp_path / "b.sqlite")],
            ["bench", str(graph), "-k", "2", "--bandwidth", "10", "--db", str(tmp_path / "b.sqlite")]]
    for argv in bare:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "has no unit" in err and ("--memory" in err or "--bandwidth" in err), argv
    assert not (tmp_path / "b.sqlite").exists()  # refused before any run
    assert main(["solve", str(graph), "-k", "2", "--memory", "inf", "--bandwidth", "inf", "-q"]) == 0
    db = tmp_path / "ok.sqlite"
    assert main(["bench", str(graph), "-k", "2", "--memory", "16B", "--bandwidth", "10GB/s", "--time-limit", "1m",
                 "--db", str(db)]) == 0
    import sqlite3

    with sqlite3.connect(db) as con:
        assert [json.loads(r[0])["time_limit"] for r in con.execute("SELECT options FROM runs")] == [60.0]


def test_every_flag_that_takes_a_value_shows_its_default_in_help():
    """'--help' of each subcommand names the default of every flag that takes a value
    (a flag without one says what happens when it is left out, e.g. 'default: the file's'), and
    every positional argument says what it is."""
    import argparse

    from optpart.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing = []
    for name, cmd in sorted(sub.choices.items()):
        for action in cmd._actions:
            if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
                continue
            text = action.help or ""
            if not action.option_strings:
                if not text:
                    missing.append(f"{name} {action.dest}: positional without help")
                continue
            takes_value = action.nargs != 0 and not isinstance(action, argparse.BooleanOptionalAction)
            if (takes_value or isinstance(action, argparse.BooleanOptionalAction)) and not action.required \
                    and "default" not in text:
                missing.append(f"{name} {action.option_strings[-1]}: {text!r}")
    assert not missing, "\n".join(missing)
    assert "(default peak" in " ".join(sub.choices["solve"].format_help().split())  # it reaches the printed help
