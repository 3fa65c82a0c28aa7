"""A sweep on a Dask cluster (two local worker processes) writes the same rows as a local sweep."""

from __future__ import annotations

import pytest

import optpart
from optpart.bench import db as bdb
from optpart.bench.executors import DaskExecutor, make_executor
from optpart.bench.sweep import plan_sweep, run_sweep
from optpart.errors import OptpartError
from optpart.generators import layered_dag, training_graph

distributed = pytest.importorskip("distributed")

#: Deterministic solvers only: a time-limited exact solver may legitimately differ between runs.
DETERMINISTIC = ["single", "heft", "etf", "topo"]


def _by_key(rows):
    return {(r["problem_hash"], r["solver"], r["options"]): r for r in rows}


def test_dask_sweep_gives_the_rows_of_a_local_sweep(tmp_path):
    files = []
    for problem in (layered_dag(24, seed=5), training_graph(3, seed=6)):
        files.append(tmp_path / f"{problem.name}.json")
        optpart.save(problem, files[-1])
    solvers = [s for s in DETERMINISTIC if s in optpart.available_solvers()]
    specs = plan_sweep(files, solvers, devices=[2, 3], memory_scales=[1.5, 4.0], time_limit=10)
    local_db, dask_db = tmp_path / "local.sqlite", tmp_path / "dask.sqlite"
    run_sweep(specs, local_db, jobs=2)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=40) as cluster:
        address = cluster.scheduler_address  # tcp://127.0.0.1:PORT
        assert address.startswith("tcp://")
        out = run_sweep(specs, dask_db, executor="dask://" + address[len("tcp://"):])
        assert (out.ran, out.skipped) == (len(specs), 0)
        # Resume works the same way on the cluster.
        assert run_sweep(specs, dask_db, executor="dask://" + address[len("tcp://"):]).ran == 0
    local, remote = _by_key(bdb.load_runs(local_db)), _by_key(bdb.load_runs(dask_db))
    assert len(local) == len(remote) == len(specs)
    assert set(local) == set(remote)
    for key, row in local.items():
        other = remote[key]
        assert (other["status"], other["makespan"], other["lower_bound"], other["memory"]) == \
               (row["status"], row["makespan"], row["lower_bound"], row["memory"]), key
    assert any(r["status"] == "feasible" for r in local.values())


def test_executor_specs():
    with pytest.raises(OptpartError, match="expected 'local', 'inline' or 'dask://HOST:PORT'"):
        make_executor("ray://x")
    with pytest.raises(OptpartError, match="cannot reach the Dask scheduler"):
        DaskExecutor("tcp://127.0.0.1:1", timeout_s=1.0)
