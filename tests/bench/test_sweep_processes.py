"""Process hygiene of ``optpart bench``: workers die with their sweep, SIGTERM stops a
sweep with one line and a consistent database, concurrent sweeps claim runs so each
runs once, and reading a database never writes it.

Waiting for a process to end uses generous upper bounds (a timeout, never a speed
assertion): the tests pass on a slow machine, only later.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import ROOT

import optpart
from optpart.bench import db as bdb
from optpart.bench import sweep as sweep_mod
from optpart.bench.sweep import plan_sweep
from optpart.cli import main
from optpart.generators import layered_dag



def _gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (absent, or a zombie waiting for its reaper)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False


def _wait_until(predicate, limit_s: float = 60.0) -> bool:
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_workers_die_when_the_sweep_is_killed_and_release_the_pipes(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent("""
        import sys, time
        from optpart.bench.executors import LocalExecutor
        ex = LocalExecutor(2)
        handles = [ex.submit(time.sleep, 600) for _ in range(2)]
        time.sleep(0.5)
        while len(ex._pool._processes) < 2:
            time.sleep(0.1)
        print(" ".join(str(p) for p in ex._pool._processes), flush=True)
        time.sleep(600)
    """))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=env, text=True)
    try:
        workers = [int(x) for x in parent.stdout.readline().split()]
        # (Whether both are still up at this instant is not asserted: on a loaded machine a
        # worker's start can race this line. What matters is that none outlives the parent.)
        assert len(workers) == 2
        parent.kill()  # kill -9: no handler, no cleanup in the parent
        parent.wait(timeout=60)
        assert _wait_until(lambda: all(_gone(w) for w in workers)), "workers outlived their sweep"
        # Nobody holds the pipes any more: reading them ends.
        assert parent.stdout.read() == ""
    finally:
        if parent.poll() is None:
            parent.kill()
        for w in locals().get("workers", []):
            if not _gone(w):
                os.kill(w, signal.SIGKILL)


def test_sigterm_stops_the_sweep_with_one_line_and_a_consistent_database(tmp_path, capsys, monkeypatch):
    path = tmp_path / "g.json"
    optpart.save(layered_dag(10, seed=2), path)
    db = tmp_path / "r.sqlite"
    real = sweep_mod.run_one
    calls = []

    def run_one_then_sigterm(task):
        calls.append(task["solver"])
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)  # arrives while the second run is in flight
        return real(task)

    monkeypatch.setattr(sweep_mod, "run_one", run_one_then_sigterm)
    code = main(["bench", str(path), "-s", "single,heft", "--devices", "1,2", "--db", str(db),
                 "--executor", "inline"])
    err = capsys.readouterr().err.strip().split("\n")
    assert code == 143
    assert err[-1] == "optpart: terminated by SIGTERM; results written so far are kept"
    rows = bdb.load_runs(db)
    assert len(rows) == 1 and rows[0]["status"] != "error"  # the run before the signal, complete
    con = bdb.connect(db)
    assert con.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0  # claims released
    con.close()
    monkeypatch.setattr(sweep_mod, "run_one", real)
    assert main(["bench", str(path), "-s", "single,heft", "--devices", "1,2", "--db", str(db),
                 "--executor", "inline"]) == 0
    assert len(bdb.load_runs(db)) == 4  # resumed: every run exactly once


def test_claims_let_one_sweep_run_each_job(tmp_path):
    con = bdb.connect(tmp_path / "c.sqlite")
    key = ("h", "single", "{}")
    a, b = bdb.owner_token(), bdb.owner_token()
    assert bdb.claim(con, key, a) == "claimed"
    assert bdb.claim(con, key, b) == "busy"  # a is alive (this very process)
    assert bdb.claim(con, key, a) == "claimed"  # its own claim
    row = {"problem_hash": "h", "problem": "p", "solver": "single", "options": "{}", "devices": 1,
           "memory_scale": 1.0, "status": "feasible", "version": "t", "timestamp": "t"}
    bdb.insert_run(con, row, owner=a)
    assert con.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0
    assert bdb.claim(con, key, b) == "done"
    con.close()


def test_the_claim_of_a_dead_sweep_is_taken_over(tmp_path):
    con = bdb.connect(tmp_path / "c.sqlite")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    import socket
    con.execute("INSERT INTO claims VALUES ('h', 's', '{}', 'ghost', ?, ?, 't')", (socket.gethostname(), pid))
    con.commit()
    assert bdb.claim(con, ("h", "s", "{}"), bdb.owner_token()) == "claimed"
    con.close()


def _open_results_database(path: str) -> str:
    """Open and close the database in a worker; an error re-raises in the test (``pool.map``)."""
    bdb.connect(path).close()
    return "ok"


def test_sweeps_opening_a_new_database_together_wait_for_each_other(tmp_path):
    """SQLite answers a concurrent switch of a new file to WAL with "database is locked"
    at once (no busy wait): every opener must still get the database (CI once lost a sweep
    to this race)."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        for i in range(15):
            seen = pool.map(_open_results_database, [str(tmp_path / f"new{i}.sqlite")] * 4)
            assert seen == ["ok"] * 4, seen


def test_two_identical_sweeps_on_one_database_run_each_job_once(tmp_path):
    paths = []
    for seed in range(3):
        p = layered_dag(30, seed=seed)
        paths.append(tmp_path / f"g{seed}.json")
        optpart.save(p, paths[-1])
    db = tmp_path / "shared.sqlite"
    argv = [sys.executable, "-m", "optpart", "bench", *map(str, paths), "-s", "single,heft,etf",
            "--devices", "1,2,3", "--db", str(db), "--executor", "inline"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    ran = []
    for out, _ in outs:
        first = out.splitlines()[0]  # "27 runs: N run now, M already in ..., 0 errors"
        ran.append(int(first.split(":")[1].split()[0]))
    rows = bdb.load_runs(db)
    assert len(rows) == 27
    assert sum(ran) == 27, outs  # without claims both sweeps ran all 27


def test_report_on_an_empty_file_is_an_error_and_leaves_it_alone(tmp_path, capsys):
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    code = main(["report", str(empty)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "empty.sqlite" in err and "empty file" in err
    assert empty.stat().st_size == 0


def test_plan_sweep_checks_the_seed(tmp_path):
    path = tmp_path / "g.json"
    optpart.save(layered_dag(5, seed=1), path)
    with pytest.raises(optpart.OptpartError, match="seed 4294967296"):
        plan_sweep([path], ["single"], devices=[1], seed=2**32)


def test_worker_count_is_limited(monkeypatch):
    from optpart.bench.executors import LocalExecutor
    monkeypatch.setenv("OPTPART_MAX_JOBS", "4")
    with pytest.raises(optpart.OptpartError, match="--jobs 5 exceeds the limit of 4"):
        LocalExecutor(5)
